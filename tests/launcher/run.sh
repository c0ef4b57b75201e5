#!/bin/sh
# The launcher and the report as a new user meets them (issue 12 item 3), on
# the simulated runtime: the scenario programs run as built, directly and
# under tools/unstall; native frames named with file:line where the program
# has debug information; a process that never used CUDA told apart from one
# whose runtime the shim cannot see; make install into a temporary prefix.
# Prints "PASS name" / "FAIL name: why" and "launcher: N passed, M failed".
# Usage: tests/launcher/run.sh BUILD_DIR
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
shim=$build/libunstall.so
fake=$build/fakecuda
work=$build/launcher-tests
# a sanitized build (tests/sanitize.sh) needs its sanitizer's runtime first in
# LD_PRELOAD (SAN_PRELOAD) and its flags on the test programs (SAN_CFLAGS)
preload="${SAN_PRELOAD:+$SAN_PRELOAD }$shim"
rm -rf "$work"; mkdir -p "$work"
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
# one field of a JSON file, by a Python expression over r
json_field() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>&1; }

export SCN_QUICK=1 FAKECUDA_TIME_SCALE=1

# --- the scenario programs find the simulated runtime as built ----------------
# (the toolkit's libcudart may be in the loader's cache: without a RUNPATH
# they took it and failed with "CUDA driver version is insufficient")
out=$(env -u LD_LIBRARY_PATH "$build/scenarios/case_b_pageable_h2d" held_small 2>&1)
case "$out" in
    *"RESULT case=B test=held_small"*" ok=1"*) pass scenario_runs_directly ;;
    *) fail scenario_runs_directly "$(printf '%s' "$out" | tail -2)" ;;
esac
out=$(env -u LD_LIBRARY_PATH ${SAN_PRELOAD:+LD_PRELOAD="$SAN_PRELOAD"} "$root/tools/unstall" --lib "$shim" \
    "$build/scenarios/case_b_pageable_h2d" held_small 2>&1)
case "$out" in
    *"RESULT case=B test=held_small"*" ok=1"*"unstall report"*) pass scenario_runs_under_launcher ;;
    *) fail scenario_runs_under_launcher "$(printf '%s' "$out" | tail -2)" ;;
esac

echo "launcher: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
