#!/bin/sh
# Programs that work in CUDA contexts of their own (cuCtxCreate) or in the
# primary one, under the shim on the simulated runtime and driver: every
# byte right, no error, the current context left alone. Prints "PASS name" /
# "FAIL name: why" and "driver: N passed, M failed".
#
# Usage: tests/driver/run.sh [BUILD_DIR] [fake|gpu]   (make shim fakecuda)
# gpu: the same program over the real runtime and driver, built twice: with
# the shared runtime and with the static one (nvcc's default), in the primary
# and in a created context, natively and under the shim (make gpu-test).
build=$(cd "${1:-build}" && pwd) || exit 1
target=${2:-fake}
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
fake=$build/fakecuda
preload="${SAN_PRELOAD:+$SAN_PRELOAD }$build/libunstall.so"
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

work=$(mktemp -d "$build/driver-tests.XXXXXX") || exit 1
cc_flags="-std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror $SAN_CFLAGS -I$cuda/include"
if [ "$target" = gpu ]; then
    # the real libcuda comes with the driver; the toolkit's stub is for linking only
    ${CC:-gcc} $cc_flags -o "$work/ctx_copies" "$here/ctx_copies.c" -L"$cuda/lib64" -L"$cuda/lib64/stubs" \
        -lcudart -lcuda -Wl,-rpath,"$cuda/lib64" &&
        ${CC:-gcc} $cc_flags -o "$work/ctx_copies_static" "$here/ctx_copies.c" -L"$cuda/lib64" -L"$cuda/lib64/stubs" \
            -lcudart_static -lcuda -ldl -lrt -pthread
else
    ${CC:-gcc} $cc_flags -o "$work/ctx_copies" "$here/ctx_copies.c" -L"$fake" -lcudart -l:libcuda.so.1 -Wl,-rpath,"$fake"
fi || { echo "FAIL build"; echo "driver: 0 passed, 1 failed"; exit 1; }

export FAKECUDA_DEVICES=2 UNSTALL_CHUNK_BYTES=256k UNSTALL_SLOTS=4
export UNSTALL_PEER_MIN_BYTES=0 UNSTALL_H2D_MIN_BYTES=0 UNSTALL_D2H_MIN_BYTES=0
export UNSTALL_MODE=report UNSTALL_LOG_LEVEL=info

# name, then env assignments, then the program's arguments
run() {
    name=$1; shift
    out=$work/$name.out
    if env "$@" >"$out" 2>&1 && grep -qx ok "$out"; then pass "$name"; else fail "$name" "$(tail -3 "$out" | tr '\n' ' ')"; fi
}
for prog in "$work"/ctx_copies*; do
    for where in primary created; do
        run "$(basename "$prog")-native-$where" "$prog" "$where"
        run "$(basename "$prog")-shim-$where" LD_PRELOAD="$preload" "$prog" "$where"
    done
done

echo "driver: $passed passed, $failed failed"
if [ "$failed" -eq 0 ]; then rm -rf "$work"; else echo "driver: outputs kept in $work"; fi
[ "$failed" -eq 0 ]
