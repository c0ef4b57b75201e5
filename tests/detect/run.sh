#!/bin/sh
# Detection tests on the simulated runtime: builds
# tests/detect/rules_prog.c against BUILD_DIR/fakecuda, then check.py runs
# each situation natively and under the shim with a JSON report, and the
# scenario programs (SCN_QUICK=1) under the shim, and prints "PASS name" /
# "FAIL name: why" / "XFAIL name: why" and a last line
# "detect: N passed, M failed". Exits non-zero on any failure.
#
# Usage: tests/detect/run.sh [BUILD_DIR]   (needs BUILD_DIR/libunstall.so,
# BUILD_DIR/fakecuda/libcudart.so.13 and BUILD_DIR/scenarios: make all)
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
fake=$build/fakecuda
work=$build/detect
prog=$work/rules_prog

missing=""
[ -f "$build/libunstall.so" ] || missing="$missing libunstall.so"
[ -f "$fake/libcudart.so.13" ] || missing="$missing fakecuda/libcudart.so.13"
[ -d "$build/scenarios" ] || missing="$missing scenarios"
if [ -n "$missing" ]; then
    echo "FAIL build: missing in $build:$missing (make all)"
    echo "detect: 0 passed, 1 failed"
    exit 1
fi
mkdir -p "$work"
# -rdynamic: the situation functions get names in the report's call sites;
# no sibling calls: the call under test stays in its situation's frame
if ! ${CC:-gcc} -std=c11 -D_GNU_SOURCE -O1 -g -fno-optimize-sibling-calls -rdynamic \
    -Wall -Wextra -Werror -Wmissing-prototypes $SAN_CFLAGS -I"$cuda/include" -I"$here/../fakecuda" \
    -o "$prog" "$here/rules_prog.c" -L"$fake" -lcudart; then
    echo "FAIL build: tests/detect/rules_prog.c does not compile"
    echo "detect: 0 passed, 1 failed"
    exit 1
fi
exec python3 "$here/check.py" "$build" "$prog"
