#!/bin/sh
# Programs that work in CUDA contexts of their own (cuCtxCreate) or in the
# primary one, under the shim on the simulated runtime and driver: every
# byte right, no error, the current context left alone. Prints "PASS name" /
# "FAIL name: why" and "driver: N passed, M failed".
#
# Usage: tests/driver/run.sh [BUILD_DIR]   (make shim fakecuda)
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
fake=$build/fakecuda
preload="${SAN_PRELOAD:+$SAN_PRELOAD }$build/libunstall.so"
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

work=$(mktemp -d "$build/driver-tests.XXXXXX") || exit 1
if ! ${CC:-gcc} -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror $SAN_CFLAGS -I"$cuda/include" \
    -o "$work/ctx_copies" "$here/ctx_copies.c" -L"$fake" -lcudart -l:libcuda.so.1 -Wl,-rpath,"$fake"; then
    echo "FAIL build"; echo "driver: 0 passed, 1 failed"; exit 1
fi

export FAKECUDA_DEVICES=2 UNSTALL_CHUNK_BYTES=256k UNSTALL_SLOTS=4
export UNSTALL_PEER_MIN_BYTES=0 UNSTALL_H2D_MIN_BYTES=0 UNSTALL_D2H_MIN_BYTES=0
export UNSTALL_MODE=report UNSTALL_LOG_LEVEL=info

# name, then env assignments, then the program's arguments
run() {
    name=$1; shift
    out=$work/$name.out
    if env "$@" >"$out" 2>&1 && grep -qx ok "$out"; then pass "$name"; else fail "$name" "$(tail -3 "$out" | tr '\n' ' ')"; fi
}
for where in primary created; do
    run "native-$where" "$work/ctx_copies" "$where"
    run "shim-$where" LD_PRELOAD="$preload" "$work/ctx_copies" "$where"
done

echo "driver: $passed passed, $failed failed"
if [ "$failed" -eq 0 ]; then rm -rf "$work"; else echo "driver: outputs kept in $work"; fi
[ "$failed" -eq 0 ]
