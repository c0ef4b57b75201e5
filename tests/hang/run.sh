#!/bin/sh
# The hang explainer (options hang_report_s, hang_sites; shim/report/hang.c) on
# the simulated runtime: the stream-0 D2H deadlock (case_c_pageable_d2h
# deadlock: a D2H on the legacy stream waits behind a host function that waits
# for another thread, whose kernel launch waits for the legacy stream) with the
# shim watching only (UNSTALL_FIX=0, so the copy deadlocks as natively). The
# scenario's own watchdog ends the process after SCN_C_DEADLOCK_S seconds.
# Prints "PASS name" / "FAIL name: why" and "hang: N passed, M failed".
#
# Usage: tests/hang/run.sh [BUILD_DIR]
build=$(cd "${1:-build}" && pwd) || exit 1
prog=$build/scenarios/case_c_pageable_d2h
preload="${SAN_PRELOAD:+$SAN_PRELOAD }$build/libunstall.so"
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
[ -x "$prog" ] || { echo "FAIL setup: missing $prog (make test-bins)"; echo "hang: 0 passed, 1 failed"; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() { # name, env...
    name=$1
    shift
    env SCN_C_DEADLOCK_S=4 LD_PRELOAD="$preload" "$@" timeout -k 5 30 "$prog" deadlock >"$out/$name.out" 2>"$out/$name.err"
    echo $? >"$out/$name.rc"
}

# what every explanation says: both threads' calls, the host function by
# name, the cause and the fixes
explains() { # name, err file, extra wanted strings...
    name=$1 err=$2
    shift 2
    missing=""
    for want in "hang: a CUDA call has not returned" "cudaMemcpyAsync on the legacy default stream" \
        "cudaLaunchKernel on stream" "Host functions running" "block_op_host_fn" "Likely cause: a host function" \
        "eager_modules=1" "cudaStreamNonBlocking" "$@"; do
        grep -q -F "$want" "$err" || missing="$missing [$want]"
    done
    if [ -z "$missing" ]; then pass "$name"; else fail "$name" "missing:$missing; $(grep -c . "$err") lines"; fi
}

# with hang_sites, each call's site too: the reported copy's line in the source
site="case_c_pageable_d2h.c:$(grep -n 'the reported copy \*/' "$(dirname "$0")/../scenarios/case_c_pageable_d2h.c" | cut -d: -f1)"
run explained UNSTALL_FIX=0 UNSTALL_HANG_REPORT_S=1 UNSTALL_HANG_SITES=1
explains explained "$out/explained.err" "$site" "launch_thread_main"
n=$(grep -c "hang: a CUDA call has not returned" "$out/explained.err")
if [ "$n" = 1 ]; then pass explained_once; else fail explained_once "$n explanations"; fi

# without: the same, and no site captured
run explained_no_sites UNSTALL_FIX=0 UNSTALL_HANG_REPORT_S=1
explains explained_no_sites "$out/explained_no_sites.err"
if grep -q "$site" "$out/explained_no_sites.err"; then
    fail no_sites_by_default "a site was named: $(grep -m1 "$site" "$out/explained_no_sites.err")"
else pass no_sites_by_default; fi

# on by default: the same hang, explained after hang_report_s' default (60 s)
# with nothing set; the scenario's own watchdog ends it at 64 s
if [ "${HANG_DEFAULT_TEST:-1}" = 1 ]; then
    env SCN_C_DEADLOCK_S=64 LD_PRELOAD="$preload" UNSTALL_FIX=0 timeout -k 5 120 "$prog" deadlock \
        >"$out/default.out" 2>"$out/default.err"
    explains explained_by_default "$out/default.err" "for 6"
fi

# off: the same hang, nothing said
run silent UNSTALL_FIX=0 UNSTALL_HANG_REPORT_S=0
if grep -q "hang:" "$out/silent.err"; then fail off_when_0 "$(grep -m1 'hang:' "$out/silent.err")"
else pass off_when_0; fi

# a program that does not hang is not explained (the shim removes this one)
run completes UNSTALL_HANG_REPORT_S=1
if [ "$(cat "$out/completes.rc")" = 0 ] && ! grep -q "hang:" "$out/completes.err"; then pass no_false_alarm
else fail no_false_alarm "exit $(cat "$out/completes.rc"), $(grep -m1 'hang:' "$out/completes.err")"; fi

echo "hang: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
