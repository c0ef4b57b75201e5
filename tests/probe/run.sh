#!/bin/sh
# tests/probe: the probe build (make PROBE=1, shim/base/probe.h) on the
# simulated runtime. Builds the shim with its stamps into BUILD_DIR/probe, runs
# tools/bench/smallcopy.c's H2D and D2H rows (4 B to 4 MiB, 3 calls a row) under
# it, and tests/probe/check.py checks the records and what
# tools/bench/probe_steps.py makes of them, and that the shim of BUILD_DIR
# itself has no stamps compiled in.
# Usage: tests/probe/run.sh BUILD_DIR   (after make shim fakecuda)
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
probe=$build/probe
cd "$root" || exit 1
make -s PROBE=1 BUILD="$probe" shim >"$probe.log" 2>&1 || { cat "$probe.log"; echo "probe: 0 passed, 1 failed"; exit 1; }
cuda=${CUDA_HOME:-/usr/local/cuda}
${CC:-gcc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I"$cuda/include" tools/bench/smallcopy.c \
    -o "$probe/smallcopy" -L"$build/fakecuda" -lcudart -Wl,-rpath,"$build/fakecuda" || exit 1
out=$probe/steps.txt
rm -f "$out"
SMALLCOPY_REPS=3 UNSTALL_PROBE_OUT="$out" UNSTALL_LOG_LEVEL=error UNSTALL_REPORT=/dev/null \
    LD_PRELOAD="$probe/libunstall.so" "$probe/smallcopy" 4194304 h2d d2h >/dev/null 2>"$probe/run.err" ||
    { cat "$probe/run.err"; echo "probe: 0 passed, 1 failed"; exit 1; }
python3 "$here/check.py" "$out" "$build/libunstall.so" "$probe/libunstall.so"
