#!/bin/sh
# The cost of a pageable copy to the caller, 4 B to 256 MiB, natively and
# under the shim in one run, side by side (median, p99, worst and the first
# call of each row; no warm-up). Each direction runs in a process of its
# own, so that its first row holds the process's first copy.
#
# Usage: tools/bench/smallcopy.sh [BUILD_DIR] [MAX_BYTES]
# On a machine without a GPU it runs over the simulated runtime
# (BUILD_DIR/fakecuda), which checks the program, not the figures.
# Environment: SMALLCOPY_REPS, SMALLCOPY_OUT (default BUILD_DIR/smallcopy),
#              SMALLCOPY_SHIM_ENV (extra variables for the shim run, e.g. UNSTALL_...=...)
build=$(cd "${1:-build}" && pwd) || exit 1
max=${2:-268435456}
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
out=${SMALLCOPY_OUT:-$build/smallcopy}
shim=$build/libunstall.so
bin=$build/bench/smallcopy
[ -f "$shim" ] || { echo "smallcopy: missing $shim (make shim)"; exit 1; }
mkdir -p "$build/bench" "$out"
if nvidia-smi -L >/dev/null 2>&1; then
    libdir=$cuda/lib64 where="GPU: $(nvidia-smi -L | head -1)"
else
    libdir=$build/fakecuda where="simulated runtime (no GPU): figures mean nothing"
    [ -f "$libdir/libcudart.so.13" ] || { echo "smallcopy: missing $libdir/libcudart.so.13 (make fakecuda)"; exit 1; }
fi
${CC:-gcc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I"$cuda/include" "$here/smallcopy.c" -o "$bin" \
    -L"$libdir" -lcudart -Wl,-rpath,"$libdir" || exit 1
: >"$out/native"
: >"$out/shim"
for op in h2d d2h d2h_async h2d_async; do
    LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$bin" "$max" $op >>"$out/native" || exit 1
    env $SMALLCOPY_SHIM_ENV LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} LD_PRELOAD="$shim" "$bin" "$max" $op \
        >>"$out/shim" 2>>"$out/shim.err" || { cat "$out/shim.err"; exit 1; }
done
echo "smallcopy: $where"
python3 "$here/smallcopy_table.py" "$out/native" "$out/shim"
