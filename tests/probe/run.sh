#!/bin/sh
# tests/probe: the probe build (make PROBE=1, shim/base/probe.h) on the
# simulated runtime. Builds the shim with its stamps into BUILD_DIR/probe, runs
# tools/bench/probe.sh over it (smallcopy.c's H2D and D2H rows, 4 B to 4 MiB,
# 3 calls a row, one process each), and tests/probe/check.py checks the
# records, what tools/bench/probe_steps.py makes of them, and that the shim of
# BUILD_DIR itself has no stamps compiled in (probe.sh refuses it).
# Usage: tests/probe/run.sh BUILD_DIR   (after make shim fakecuda)
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
probe=$build/probe
cd "$root" || exit 1
fail() { cat "$1"; echo "probe: 0 passed, 1 failed"; exit 1; }
make -s PROBE=1 BUILD="$probe" shim >"$probe.log" 2>&1 || fail "$probe.log"
PROBE_ROUNDS=1 SMALLCOPY_REPS=3 FAKECUDA_DIR="$build/fakecuda" PROBE_OUT="$probe/steps" \
    sh tools/bench/probe.sh "$probe" 4194304 h2d d2h >"$probe/table.txt" 2>&1 || fail "$probe/table.txt"
FAKECUDA_DIR="$build/fakecuda" sh tools/bench/probe.sh "$build" >"$probe/refused.txt" 2>&1
refused=$?
python3 "$here/check.py" "$probe/steps/steps" "$build/libunstall.so" "$probe/libunstall.so" "$probe/table.txt" \
    "$probe/refused.txt" "$refused"
