#!/bin/sh
# Where a copy's time goes on the calling thread, step by step:
# tools/bench/smallcopy.c's rows under a probe build of the shim (make PROBE=1
# BUILD=DIR shim; shim/base/probe.h), PROBE_ROUNDS processes of each op, then
# tools/bench/probe_steps.py's table: per API, path and size, each step's
# median time for the processes' first calls and for their later calls.
# On a machine without a GPU it runs over the simulated runtime
# (FAKECUDA_DIR, default BUILD_DIR/fakecuda), which checks the program, not the
# figures.
#
# Usage: tools/bench/probe.sh PROBE_BUILD_DIR [MAX_BYTES [OP...]]
#        (default 1 MiB, ops h2d d2h d2h_async h2d_async)
# Environment: PROBE_ROUNDS (default 8), PROBE_SKIP (probe_steps.py --skip),
#              PROBE_OUT (default PROBE_BUILD_DIR/probe-steps: the records),
#              PROBE_SHIM_ENV (extra variables for the shim, e.g. UNSTALL_MODE=off);
#              smallcopy.c's own pass through (SMALLCOPY_REPS, SMALLCOPY_GAP_US, SMALLCOPY_MIN)
build=$(cd "${1:?usage: probe.sh PROBE_BUILD_DIR [MAX_BYTES [OP...]]}" && pwd) || exit 1
max=${2:-1048576}
[ $# -gt 2 ] && shift 2 || set -- h2d d2h d2h_async h2d_async
rounds=${PROBE_ROUNDS:-8}
case $rounds in ''|*[!0-9]*|0) echo "probe: PROBE_ROUNDS must be a positive number, not '$rounds'"; exit 1 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
shim=$build/libunstall.so
out=${PROBE_OUT:-$build/probe-steps}
nm "$shim" 2>/dev/null | grep -q us_probe_stamp ||
    { echo "probe: $shim is not a probe build (make PROBE=1 BUILD=$build shim)"; exit 1; }
. "$here/bench_runtime.sh"
bench_runtime probe "${FAKECUDA_DIR:-$build/fakecuda}"
mkdir -p "$out"
bin=$out/smallcopy
bench_build "$here/smallcopy.c" "$bin" || exit 1
: >"$out/steps"
: >"$out/shim.err"
round=0
while [ $round -lt "$rounds" ]; do
    for op in "$@"; do
        env $PROBE_SHIM_ENV UNSTALL_PROBE_OUT="$out/steps" UNSTALL_REPORT=/dev/null UNSTALL_LOG_LEVEL=error \
            LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" LD_PRELOAD="$shim" \
            "$bin" "$max" "$op" >/dev/null 2>>"$out/shim.err" || { cat "$out/shim.err"; exit 1; }
    done
    round=$((round + 1))
done
echo "probe: $where; $rounds processes of each op ($*), up to $max bytes; records in $out/steps"
python3 "$here/probe_steps.py" ${PROBE_SKIP:+--skip "$PROBE_SKIP"} "$out/steps"
