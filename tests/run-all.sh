#!/bin/sh
# Runs every test suite that needs no GPU and prints one closing line
# "check: N passed, M failed" (test cases, summed over the suites).
# Environment: SKIP_SUITES  names of suites not to run; ONLY_SUITES  when
# set, only the suites matching its shell patterns run; CHECK_SANITIZE=0
# leaves out the sanitizer passes (tests/sanitize.sh: the quick ones here,
# every suite with make sanitize).
# Usage: tests/run-all.sh BUILD_DIR
build=${1:-build}
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# add the counts of the suite's closing line, the one format every suite
# prints: "name: N passed, M failed" (", K skipped" when some were; cmocka
# programs through tests/common/summary.h, Python suites through
# tests/common/run_unittest.py); a suite that failed without printing it
# still counts as one failure
tally() { # name, exit code
    name=$1 rc=$2
    line=$(grep -E '^[A-Za-z0-9_.-]+: [0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$log" | tail -1)
    p=$(echo "$line" | sed -n 's/^[^:]*: \([0-9]*\) passed.*/\1/p')
    f=$(echo "$line" | sed -n 's/^[^:]*: [0-9]* passed, \([0-9]*\) failed.*/\1/p')
    p=${p:-0} f=${f:-0}
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    passed=$((passed + p))
    failed=$((failed + f))
    took="$(($(date +%s) - started)) s"
    [ "$rc" -eq 0 ] && echo "ok    $name ($p, $took)" || { echo "FAIL  $name ($took)"; cat "$log"; }
}

# ONLY_SUITES: when set, the suites run (shell patterns: "test_* stress")
only() { # name
    [ -z "${ONLY_SUITES:-}" ] && return 0
    for pattern in $ONLY_SUITES; do
        # shellcheck disable=SC2254 # the pattern is meant to match
        case $1 in $pattern) return 0 ;; esac
    done
    return 1
}

suite() { # name, command...
    name=$1; shift
    case " ${SKIP_SUITES:-} " in *" $name "*) echo "skip  $name"; return ;; esac
    only "$name" || { echo "skip  $name"; return; }
    started=$(date +%s)
    "$@" >"$log" 2>&1
    tally "$name" $?
}

for t in "$build"/unit/test_* "$build"/fakecuda/test_*; do
    [ -x "$t" ] || continue
    suite "$(basename "$t")" "$t"
done
suite gen-docs-check sh -c 'python3 tools/gen-docs --check && echo "gen-docs-check: 1 passed, 0 failed"'
suite perfdoc-check sh -c 'python3 tools/bench/perfdoc.py check && echo "perfdoc-check: 1 passed, 0 failed"'
suite layers env BUILD="$build" python3 tests/common/run_unittest.py layers tests/layers
# hand-written mutants of the pure modules (policy, parsers, staging size
# policy), each rebuilt and run against its unit tests: every one killed
[ -f tests/mutation/run.py ] && suite mutation python3 tests/mutation/run.py "$build"
[ -d tests/report ] && suite unstall-report python3 tests/common/run_unittest.py unstall-report tests/report
# unstall-report --html: pages of real and synthetic jobs, rendered in headless Chromium (screenshots in BUILD/html/)
[ -d tests/html ] && suite html env BUILD="$build" python3 tests/common/run_unittest.py html tests/html
[ -d tests/bench ] && suite bench-chart python3 tests/common/run_unittest.py bench-chart tests/bench
[ -d tests/p2pcheck ] && suite p2pcheck env BUILD="$build" python3 tests/common/run_unittest.py p2pcheck tests/p2pcheck
[ -d tests/pytest_plugin ] && suite pytest-plugin env BUILD="$build" python3 tests/common/run_unittest.py pytest-plugin tests/pytest_plugin
[ -d tests/pin_dataloader ] && suite pin-dataloader env BUILD="$build" python3 tests/common/run_unittest.py pin-dataloader tests/pin_dataloader
# the wheel and the .deb built from this build, installed in a venv / extracted (PACKAGING_INSTALL=1: dpkg -i and --purge too)
[ -d tests/packaging ] && suite packaging env BUILD="$build" python3 tests/common/run_unittest.py packaging tests/packaging
[ -x tests/pipelines/run.sh ] && suite pipelines sh tests/pipelines/run.sh "$build"
[ -x tests/scenarios/run.sh ] && suite scenarios sh tests/scenarios/run.sh "$build"
[ -x tests/shim/run.sh ] && suite shim sh tests/shim/run.sh "$build"
[ -x tests/detect/run.sh ] && suite detect sh tests/detect/run.sh "$build"
[ -x tests/hang/run.sh ] && suite hang sh tests/hang/run.sh "$build"
[ -d tests/endings ] && suite endings env BUILD="$build" python3 tests/common/run_unittest.py endings tests/endings
[ -x tests/launcher/run.sh ] && suite launcher sh tests/launcher/run.sh "$build"
[ -x tests/probe/run.sh ] && suite probe sh tests/probe/run.sh "$build"
[ -x tests/driver/run.sh ] && suite driver sh tests/driver/run.sh "$build"
if [ -x tests/conformance/run.sh ]; then
    # natively (the model against the real GPU's table), then under the shim
    # with staged copies that do not hold the caller (as on NVLink H200s); the
    # case D remedy off there: d2d_busy_engine times bursts against a 1.2 ms
    # line, and the remedy changes their timing by design (through the
    # simulation's slow pinned copies, about 1 ms a burst); make bench and
    # tests/scenarios measure what it does
    suite conformance sh tests/conformance/run.sh "$build/conformance/fake"
    suite conformance-shim env CONFORM_SHIM="$(cd "$build" && pwd)/libunstall.so" FAKECUDA_STAGED_HOLD=0 \
        UNSTALL_FIX_BUSY_D2D=0 sh tests/conformance/run.sh "$build/conformance/fake"
    # on one device, as on a one-GPU machine: the shim's current device then
    # comes without a driver call (model/context.c)
    suite conformance-shim-1dev env FAKECUDA_DEVICES=1 CONFORM_SHIM="$(cd "$build" && pwd)/libunstall.so" \
        FAKECUDA_STAGED_HOLD=0 UNSTALL_FIX_BUSY_D2D=0 sh tests/conformance/run.sh "$build/conformance/fake"
fi
[ -x tests/capture/run.sh ] && suite capture sh tests/capture/run.sh "$build" fake
[ -x tests/stress/run.sh ] && suite stress sh tests/stress/run.sh "$build"
[ -f tests/faults/run.py ] && suite faults python3 tests/faults/run.py "$build"
[ -x tests/fuzz/run.sh ] && suite fuzz sh tests/fuzz/run.sh "$build"
# the suites again under ASan+UBSan and TSan (not from inside that run)
[ -z "${TEST_SANITIZER:-}" ] && [ "${CHECK_SANITIZE:-1}" != 0 ] && suite sanitize env SAN_SCOPE=quick sh tests/sanitize.sh

echo "check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
