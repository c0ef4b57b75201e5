#!/bin/sh
# make sanitize: the suites again with the shim, the simulated runtime and
# every test program built under a sanitizer, each in a build dir of its own:
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer, leak checking on (build-asan)
#   tsan  ThreadSanitizer (build-tsan)
# A run is clean when every suite passes and no sanitizer wrote a report: the
# reports go to files (log_path), so one is caught also where a test expects
# its program to fail or kills it. Prints the reports' summaries and a last
# line "sanitize: N passed, M failed" (the suites' test cases plus one per
# report).
#
# Usage: tests/sanitize.sh [asan] [tsan]   (default both)
# Environment: SAN_SCOPE  full (default: every suite below, make sanitize) or
#   quick (make check, within its minutes): under ASan the unit, simulated
#   runtime, pipeline, stress, fault, driver and library suites (the code
#   paths that allocate, free and hand memory between threads); under TSan
#   the unit suites and the random-copy stress (every pipeline, lane and
#   host-copy thread at once, racing)
# Environment: SAN_SUITES  when set, only these suites (shell patterns, as
#   ONLY_SUITES of tests/run-all.sh) in either scope: SAN_SUITES=conformance-shim-1dev
# Environment: SAN_SCENARIO_MODES  the scenario modes run under a sanitizer
#   (default "native shim" under ASan, "shim" under TSan: the pass-through
#   modes fix0 and disabled run the same code paths as native plus the shim's
#   hooks, which "shim" covers, and are left to `make check` to keep the
#   sanitized passes within minutes)
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
sanitizers=${*:-asan tsan}
passed=0 failed=0

for san in $sanitizers; do
    build=build-$san
    case $san in
        asan) flags=address,undefined runtime=libasan.so ;;
        tsan) flags=thread runtime=libtsan.so ;;
        *) echo "sanitize: unknown sanitizer $san (asan, tsan)" >&2; exit 2 ;;
    esac
    echo "== $san: building $build"
    mkdir -p "$build"
    if ! make --no-print-directory -j"$(nproc 2>/dev/null || echo 2)" BUILD="$build" SANITIZE="$flags" sanitize-bins \
        >"$build/make.log" 2>&1; then
        tail -20 "$build/make.log"
        echo "FAIL $san.build"
        failed=$((failed + 1))
        continue
    fi
    reports=$top/$build/sanitizer-reports
    rm -rf "$reports" && mkdir -p "$reports"
    # the runtime first in LD_PRELOAD wherever a run script preloads the shim;
    # the test programs the scripts compile get the same flags
    SAN_PRELOAD=$(${CC:-gcc} -print-file-name=$runtime)
    SAN_CFLAGS="-fsanitize=$flags -fno-omit-frame-pointer -fno-sanitize-recover=all"
    export SAN_PRELOAD SAN_CFLAGS
    export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:log_path=$reports/asan"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan"
    export TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1:log_path=$reports/tsan:suppressions=$top/tests/tsan.supp"
    export TEST_SANITIZER=$san # tests skip what they judge by speed alone
    export SCN_MODES="${SAN_SCENARIO_MODES:-native shim}"
    # nothing sanitized in the Python-only suites, and fuzz sanitizes itself.
    # Under TSan, to keep make check within minutes, the detection suite
    # (about 150 program runs of single-threaded finding logic) and fault
    # injection (60 runs of error paths) are left to the ASan pass, and the
    # scenarios run under the shim only (natively they test fakecuda alone,
    # which its own suites cover)
    # The suites that exercise the shim's own code (unit, simulated runtime,
    # pipelines, detection, scenarios) and the stress; the conformance,
    # capture, p2pcheck and chart suites run other programs over the same code
    # paths and are left to the plain run to keep make check within its time.
    # pytest-plugin and pin-dataloader preload the shim into an uninstrumented
    # python, where a sanitizer's runtime cannot come first (the plain run
    # covers them). probe builds an unsanitized shim of its own and a bench
    # program linked to this pass's simulated runtime, whose sanitizer runtime
    # then does not come first either (TSan crashed starting it, shim or not;
    # the plain run covers it).
    # The conformance programs are built here (sanitize-bins) and their three
    # suites run under ASan in the full scope (make sanitize); under TSan they
    # are left out: their rules are judged by how long calls take, which
    # TSan's slowdown changes. mutation builds plain objects of its own (no
    # sanitizer), perfdoc-check and packaging check text and packages.
    SKIP_SUITES="gen-docs-check unstall-report fuzz capture p2pcheck bench-chart pytest-plugin pin-dataloader probe mutation perfdoc-check packaging"
    if [ "$san" = tsan ]; then
        SKIP_SUITES="$SKIP_SUITES detect faults conformance conformance-shim conformance-shim-1dev"
        SCN_MODES=${SAN_SCENARIO_MODES:-shim}
    fi
    export SKIP_SUITES
    ONLY_SUITES=
    if [ "${SAN_SCOPE:-full}" = quick ]; then
        case $san in
            asan) ONLY_SUITES="test_* pipelines stress faults driver shim" ;;
            tsan) ONLY_SUITES="test_* stress" ;;
        esac
    fi
    [ -n "${SAN_SUITES:-}" ] && ONLY_SUITES=$SAN_SUITES
    export ONLY_SUITES
    out=$(sh tests/run-all.sh "$build")
    rc=$?
    echo "$out" | grep -v '^check: '
    p=$(echo "$out" | sed -n 's/^check: \([0-9]*\) passed, [0-9]* failed$/\1/p')
    f=$(echo "$out" | sed -n 's/^check: [0-9]* passed, \([0-9]*\) failed$/\1/p')
    p=${p:-0} f=${f:-0}
    [ "$rc" -ne 0 ] && [ "$f" -eq 0 ] && f=1
    passed=$((passed + p)) failed=$((failed + f))
    n=0
    for r in "$reports"/*; do
        [ -f "$r" ] || continue
        n=$((n + 1))
        echo "FAIL $san.report $(basename "$r"): $(grep -m1 -E 'SUMMARY|runtime error' "$r")"
        grep -m1 -A12 -E '^(WARNING|ERROR): |runtime error' "$r" | sed 's/^/    /'
    done
    failed=$((failed + n))
    [ "$n" -eq 0 ] && echo "ok    $san: no sanitizer reports"
    unset SKIP_SUITES TEST_SANITIZER SAN_PRELOAD SAN_CFLAGS ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS SCN_MODES
done

echo "sanitize: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
