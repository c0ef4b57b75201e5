#!/bin/sh
# The random-copy stress (tests/stress/stress.c) on the simulated runtime,
# bounded for CI: a few seeds natively and under the shim, each under a
# watchdog, and prints "PASS name" / "FAIL name: why" / "XFAIL name: why" and
# "stress: N passed, M failed". Every run prints its seed: rerun one with
# STRESS_SEED=<seed> (and STRESS_VERBOSE=1 for every operation).
#
# Usage: tests/stress/run.sh [BUILD_DIR]   (needs BUILD_DIR/stress/stress,
# BUILD_DIR/libunstall.so, BUILD_DIR/fakecuda: make test-bins)
# Environment: STRESS_SEEDS (default "1 2 3"), STRESS_CHAINS (default 40),
# STRESS_MAX_BYTES (default 2m), SAN_PRELOAD (tests/sanitize.sh).
build=$(cd "${1:-build}" && pwd) || exit 1
prog=$build/stress/stress
shim=$build/libunstall.so
fake=$build/fakecuda
preload="${SAN_PRELOAD:+$SAN_PRELOAD }$shim"
work=$build/stress-runs
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

if [ ! -x "$prog" ] || [ ! -f "$shim" ]; then
    fail build "missing $prog or $shim (make test-bins)"
    echo "stress: $passed passed, $failed failed"
    exit 1
fi
rm -rf "$work" && mkdir -p "$work"

# The simulated machine: two devices without peer access (cross-device copies
# are staged), time 10x faster than real so that kernels and copies overlap
# without making the run long.
export FAKECUDA_DEVICES=2 FAKECUDA_TIME_SCALE=0.1
export STRESS_CHAINS=${STRESS_CHAINS:-40} STRESS_MAX_BYTES=${STRESS_MAX_BYTES:-2m} STRESS_THREADS=${STRESS_THREADS:-3}
# every size through the pipelines, small chunks: many chunks per copy
export UNSTALL_CHUNK_BYTES=256k UNSTALL_PEER_MIN_BYTES=0 UNSTALL_PEER_IDLE_NATIVE_BYTES=0 UNSTALL_H2D_MIN_BYTES=0 UNSTALL_H2D_IDLE_NATIVE_BYTES=0 UNSTALL_D2H_MIN_BYTES=0

# The known cross-device ordering defect: a cudaMemcpy between devices must
# wait for the blocking streams of both devices; the simulated runtime and the
# shim only wait for the current device's. Fixed on another branch; until it
# lands here, the runs that use that ordering are allowed to mismatch (not
# every run does: it is a race). Set to 1 when it lands: then they must pass.
cross_legacy_fixed=1

# one run: label, then env assignments
run() {
    label=$1
    shift
    timeout -k 5 120 env LD_LIBRARY_PATH="$fake" "$@" "$prog" >"$work/$label.out" 2>"$work/$label.err"
    echo $? >"$work/$label.rc"
}
# judge: label, expected to fail (1) or not (0)
judge() {
    label=$1 xfail=$2 rc=$(cat "$work/$1.rc")
    line=$(grep '^stress: copies' "$work/$label.out")
    seed=$(sed -n 's/^stress: seed \([0-9]*\).*/\1/p' "$work/$label.out")
    if [ "$xfail" = 1 ]; then
        if [ "$rc" -eq 1 ]; then echo "XFAIL $label: seed $seed: $line (the known cross-device ordering defect)"
        elif [ "$rc" -eq 0 ]; then echo "XPASS $label: seed $seed: $line (a timing race: not every run shows it)"
        else fail "$label" "seed $seed: exit $rc: $(tail -3 "$work/$label.err" | tr '\n' ' ')"; fi
        return
    fi
    case "$rc" in
        0) pass "$label ($line)" ;;
        124|137) fail "$label" "seed $seed: hung (killed after 120 s)" ;;
        *) fail "$label" "seed $seed: exit $rc, $line: $(grep -m3 -A3 MISMATCH "$work/$label.err" | tr '\n' ' ' | head -c 600)" ;;
    esac
}

for seed in ${STRESS_SEEDS:-1 2 3}; do
    run "native.$seed" STRESS_SEED="$seed" STRESS_CROSS_LEGACY=0
    judge "native.$seed" 0
    run "shim.$seed" STRESS_SEED="$seed" STRESS_CROSS_LEGACY=0 LD_PRELOAD="$preload"
    judge "shim.$seed" 0
done
# the legacy stream's cross-device ordering: seed 1 mismatches without the
# fix; under a sanitizer, where the missing order is a data race by
# construction (TSan reports it), only once fixed
xfail=$((1 - cross_legacy_fixed))
if [ -n "${TEST_SANITIZER:-}" ] && [ "$xfail" = 1 ]; then
    echo "SKIP cross_legacy: the known race, not under $TEST_SANITIZER until fixed"
else
    run native.cross_legacy STRESS_SEED=1 STRESS_CHAINS=60
    judge native.cross_legacy "$xfail"
    run shim.cross_legacy STRESS_SEED=1 STRESS_CHAINS=60 LD_PRELOAD="$preload"
    judge shim.cross_legacy "$xfail"
fi

echo "stress: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
