#!/bin/sh
# Per-call cost of a kernel launch and a small pinned copy on a GPU: natively,
# under the shim (defaults: driver layer on), and with the driver layer off,
# side by side (the driver layer left them unchanged within noise on a GPU).
# Three runs of each, interleaved.
# Usage: tools/bench/percall.sh [BUILD_DIR]   (needs BUILD_DIR/gpu/kernels.o)
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
bin=$build/bench/percall
mkdir -p "$build/bench"
${CC:-gcc} -std=c11 -D_GNU_SOURCE -O2 -I"$cuda/include" -I"$root/tests/scenarios" "$here/percall.c" \
    "$build/gpu/kernels.o" -o "$bin" -L"$cuda/lib64" -lcudart -lstdc++ -Wl,-rpath,"$cuda/lib64" || exit 1
for r in 1 2 3; do
    echo "run $r native:          $("$bin" | awk '{printf "%s %s/%s ns  ", $2, $3, $4}')"
    echo "run $r unstall:         $(LD_PRELOAD="$build/libunstall.so" UNSTALL_REPORT=/dev/null "$bin" 2>/dev/null | awk '{printf "%s %s/%s ns  ", $2, $3, $4}')"
    echo "run $r unstall, layer off: $(LD_PRELOAD="$build/libunstall.so" UNSTALL_REPORT=/dev/null UNSTALL_DRIVER_LAYER=0 "$bin" 2>/dev/null | awk '{printf "%s %s/%s ns  ", $2, $3, $4}')"
done
echo "(name median/p99 ns per call on the calling thread)"
