#!/bin/sh
# The random-copy stress on a real GPU (make gpu-test): BUILD_DIR/gpu/stress,
# built against the real runtime, natively and under the shim, without and
# with peer access, sizes up to 256 MiB. Prints each run's seed and its
# "copies N bytes B mismatches M" line; exits non-zero if any run mismatched,
# failed or hung. Rerun one with STRESS_SEED=<seed>.
#
# Usage: tests/stress/gpu.sh BUILD_DIR OUT_DIR
# Environment: STRESS_GPU_SEEDS (default: two from the clock),
#   STRESS_CHAINS (default 300), STRESS_MAX_BYTES (default 256m), STRESS_THREADS (4)
build=$(cd "${1:-build}" && pwd) || exit 1
out=${2:-$build/gpu-test}/stress
prog=$build/gpu/stress
shim=$build/libunstall.so
mkdir -p "$out"
export STRESS_CHAINS=${STRESS_CHAINS:-300} STRESS_MAX_BYTES=${STRESS_MAX_BYTES:-256m} STRESS_THREADS=${STRESS_THREADS:-4}
seeds=${STRESS_GPU_SEEDS:-"$(date +%s) $(($(date +%s) + 7919))"}
bad=0
for seed in $seeds; do
    for peer in 0 1; do
        for mode in native shim; do
            label=$mode.peer$peer.$seed
            pre=""
            [ "$mode" = shim ] && pre="LD_PRELOAD=$shim"
            timeout -k 10 900 env $pre STRESS_SEED="$seed" STRESS_PEER=$peer "$prog" >"$out/$label.out" 2>"$out/$label.err"
            rc=$?
            echo "  stress $label: exit $rc: $(grep '^stress: copies' "$out/$label.out")"
            [ "$rc" -eq 0 ] || { bad=1; grep -m2 -A14 MISMATCH "$out/$label.err" | sed 's/^/    /'; }
        done
    done
done
[ "$bad" -eq 0 ]
