#!/bin/sh
# Integration tests of the pipelines (case A, B, C) under the shim on the
# simulated runtime: builds tests/pipelines/pipe_tests.c against
# BUILD_DIR/fakecuda, runs it natively (the tests themselves are right), under
# the shim, with the removed d2h_deferred option set, with faults injected, checks what the log
# says about the faults, and prints "PASS name" / "FAIL name: why" and a last
# line "pipelines: N passed, M failed". Exits non-zero on any failure.
#
# Usage: tests/pipelines/run.sh [BUILD_DIR]   (needs BUILD_DIR/libunstall.so and
# BUILD_DIR/fakecuda/libcudart.so.13: make shim fakecuda)
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
shim=$build/libunstall.so
fake=$build/fakecuda
# a sanitized build (tests/sanitize.sh) needs its sanitizer's runtime first in
# LD_PRELOAD (SAN_PRELOAD) and its flags on the test programs (SAN_CFLAGS)
preload="${SAN_PRELOAD:+$SAN_PRELOAD }$shim"
passed=0 failed=0

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
finish() {
    echo "pipelines: $passed passed, $failed failed"
    if [ "$failed" -eq 0 ]; then rm -rf "$work"; else echo "pipelines: outputs kept in $work"; fi
    [ "$failed" -eq 0 ]
    exit
}

if [ ! -f "$shim" ] || [ ! -f "$fake/libcudart.so.13" ]; then
    fail build "missing $shim or $fake/libcudart.so.13 (make shim fakecuda)"
    echo "pipelines: $passed passed, $failed failed"
    exit 1
fi
# a directory of its own: runs at the same time do not share a binary
work=$(mktemp -d "$build/pipeline-tests.XXXXXX") || exit 1
prog=$work/pipe_tests
if ! ${CC:-gcc} -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror $SAN_CFLAGS -I"$cuda/include" -I"$here/../fakecuda" -I"$here/../common" \
    -o "$prog" "$here/pipe_tests.c" -L"$fake" -lcudart -pthread -ldl; then
    fail build "pipe_tests.c does not compile"
    finish
fi
# who pins memory on which thread (the first-use tests), preloaded after the shim
rec=$work/alloc_record.so
if ! ${CC:-gcc} -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -fPIC -shared -I"$cuda/include" \
    -o "$rec" "$here/alloc_record.c" -ldl; then
    fail build "alloc_record.c does not compile"
    finish
fi

# The simulated machine (docs/fakecuda.md) and the shim's staging, small
# enough that a few hundred KiB make many chunks. Thresholds 0: every size
# goes through the pipelines. run.sh's own environment wins where set.
export FAKECUDA_DEVICES=2 FAKECUDA_TIME_SCALE=1
export UNSTALL_CHUNK_BYTES=256k UNSTALL_SLOTS=4 UNSTALL_PINNED_MAX=256m
export UNSTALL_PEER_MIN_BYTES=0 UNSTALL_PEER_IDLE_NATIVE_BYTES=0 UNSTALL_H2D_MIN_BYTES=0 UNSTALL_H2D_IDLE_NATIVE_BYTES=0 UNSTALL_D2H_MIN_BYTES=0
export UNSTALL_LOG_LEVEL=info UNSTALL_MODE=report

# One run: label, then env assignments and the test names. Its PASS/FAIL
# lines count, prefixed with the label; a run that dies without saying why
# counts as one failure.
run() {
    label=$1
    shift
    out=$work/$label.out err=$work/$label.err
    env "$@" >"$out" 2>"$err"
    rc=$?
    sed -n "s/^PASS /PASS $label./p; s/^FAIL /FAIL $label./p" "$out"
    p=$(grep -c '^PASS ' "$out") f=$(grep -c '^FAIL ' "$out")
    passed=$((passed + p)) failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        fail "$label" "exit status $rc; stderr: $(tail -3 "$err" | tr '\n' ' ')"
    fi
}

native() {
    label=$1
    shift
    run "$label" LD_LIBRARY_PATH="$fake" PIPE_NATIVE=1 "$prog" "$@"
}
shimmed() {
    label=$1
    shift
    run "$label" LD_LIBRARY_PATH="$fake" LD_PRELOAD="$preload" "$@"
}
# label, text, lines expected in the run's stderr
expect_log() {
    n=$(grep -c "$2" "$work/$1.err")
    if [ "$n" -eq "$3" ]; then pass "$1.log"
    else fail "$1.log" "'$2' logged $n times, expected $3"; fi
}

native native data threads order cross_device_before cross_device_after cross_device_ptsz independent_stream h2d_behind_kernel capture async_error d2h_then_h2d free_during_copy d2h_fresh_hugepages
# staged copies that do not hold their caller (as on NVLink H200s): the
# cross-device ordering is then all the stream's doing
run native_nohold LD_LIBRARY_PATH="$fake" PIPE_NATIVE=1 FAKECUDA_STAGED_HOLD=0 "$prog" \
    cross_device_before cross_device_after cross_device_ptsz
shimmed shim "$prog" all
# a lane's ring faulted in ahead by the grower, then registered by the copy that makes the lane
native peer_ring_ahead_native peer_ring_ahead
shimmed peer_ring_ahead UNSTALL_LOG_LEVEL=debug UNSTALL_PEER_IDLE_NATIVE_BYTES=16m "$prog" peer_ring_ahead
expect_log peer_ring_ahead "a lane's ring of [0-9]* bytes faulted in ahead" 1
expect_log peer_ring_ahead "faulted in ahead, taken" 1
# a stream's first same-device copy untimed; its first timed copy the one after busy_d2d_probe_ms,
# with the timing events made inside the first device allocation
native d2d_first_untimed_native d2d_first_untimed
shimmed d2d_first_untimed UNSTALL_LOG_LEVEL=debug "$prog" d2d_first_untimed
expect_log d2d_first_untimed "a timed copy of 4096 bytes" 0
expect_log d2d_first_untimed "a timed copy of 8192 bytes" 1
expect_log d2d_first_untimed "takes the timing events made at the first device allocation" 1
# d2h_fresh_hugepages advised once, and said so once, where the kernel acts on the advice
if grep -q '\[\(always\|madvise\)\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null; then
    expect_log shim "advised huge pages for its destination" 1
else
    expect_log shim "advised huge pages for its destination" 0
fi
shimmed d2h_deferred_removed UNSTALL_D2H_DEFERRED=1 "$prog" d2h_then_h2d data
expect_log d2h_deferred_removed "d2h_deferred was removed" 1
# cudaDeviceReset, then copies again (tests/gpu/device_reset.c, also run on a GPU)
reset_prog=$work/device_reset
if ${CC:-gcc} -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror $SAN_CFLAGS -I"$cuda/include" \
    -o "$reset_prog" "$here/../gpu/device_reset.c" -L"$fake" -lcudart; then
    for mode in native shim; do
        with=""
        [ "$mode" = shim ] && with=$preload # may hold two paths: quoted as one value below
        if env LD_LIBRARY_PATH="$fake" ${with:+LD_PRELOAD="$with"} "$reset_prog" >"$work/reset_$mode.out" 2>"$work/reset_$mode.err" &&
            grep -q '^device_reset: ok=1$' "$work/reset_$mode.out"; then pass "device_reset.$mode"
        else fail "device_reset.$mode" "$(grep -v 'done' "$work/reset_$mode.out" | head -2 | tr '\n' ' ')"; fi
    done
else
    fail device_reset.build "tests/gpu/device_reset.c does not compile"
fi

# first use with pinning as costly as on an H200 and the default staging sizes
run first_use_native LD_LIBRARY_PATH="$fake" PIPE_NATIVE=1 FAKECUDA_HOST_ALLOC_US_PER_MIB=400 FAKECUDA_HOST_REGISTER_US_PER_MIB=110 UNSTALL_CHUNK_BYTES=8m "$prog" first_use_launch
shimmed first_use FAKECUDA_HOST_ALLOC_US_PER_MIB=400 FAKECUDA_HOST_REGISTER_US_PER_MIB=110 UNSTALL_CHUNK_BYTES=8m "$prog" first_use_launch
# each the process's first copies, pinning as costly as on an H100, with a cold
# pool (warm_pinned=0: the first cudaMalloc pins one 64 KiB slot): nothing
# beyond the inline budget is pinned inside a copy, the grower does the rest
for t in first_use_large first_use_small_d2h first_use_capture grower_at_first_malloc first_malloc_pins_a_slot; do
    run "${t}_native" LD_LIBRARY_PATH="$fake" LD_PRELOAD="${SAN_PRELOAD:+$SAN_PRELOAD }$rec" PIPE_NATIVE=1 FAKECUDA_HOST_ALLOC_US_PER_MIB=400 FAKECUDA_HOST_REGISTER_US_PER_MIB=110 \
        "$prog" "$t"
    run "$t" LD_LIBRARY_PATH="$fake" LD_PRELOAD="$preload $rec" FAKECUDA_HOST_ALLOC_US_PER_MIB=400 FAKECUDA_HOST_REGISTER_US_PER_MIB=110 \
        UNSTALL_CHUNK_BYTES=8m UNSTALL_WARM_PINNED=0 "$prog" "$t"
done
# the default warm_pinned: the first cudaMalloc pins the first copies' slots in one block
run first_malloc_pins_the_ladder LD_LIBRARY_PATH="$fake" LD_PRELOAD="$preload $rec" FAKECUDA_HOST_ALLOC_US_PER_MIB=400 \
    FAKECUDA_HOST_REGISTER_US_PER_MIB=110 UNSTALL_CHUNK_BYTES=8m "$prog" first_malloc_pins_a_slot
expect_log first_use_large "goes native while a background thread grows the pool" 1
# the first cudaMalloc's rehearsal of the first copies issues nothing and
# records nothing: the report counts the program's two copies, in each mode
# that keeps findings (strict does not rehearse: it classifies first)
for mode in report warn strict; do
    run "first_malloc_rehearses_native_$mode" LD_LIBRARY_PATH="$fake" PIPE_NATIVE=1 "$prog" first_malloc_rehearses
    shimmed "first_malloc_rehearses_$mode" UNSTALL_MODE=$mode UNSTALL_STRICT_SEVERITY=high \
        UNSTALL_REPORT="$work/rehearse_$mode.json" UNSTALL_H2D_MIN_BYTES=1m "$prog" first_malloc_rehearses
    counted=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print(sum(f["count"] for f in r["findings"] if f["rule"] == "pageable_h2d"))' "$work/rehearse_$mode.json" 2>&1)
    if [ "$counted" = 2 ]; then pass "first_malloc_rehearses_$mode.report"
    else fail "first_malloc_rehearses_$mode.report" "pageable_h2d counted '$counted' times, expected 2"; fi
done
# the stream-0 D2H deadlock as the process's first copy (a 4-byte D2H): rewritten, no hang
shimmed deadlock_first FAKECUDA_HOST_ALLOC_US_PER_MIB=400 FAKECUDA_HOST_REGISTER_US_PER_MIB=110 UNSTALL_CHUNK_BYTES=8m "$prog" deadlock
# staging is mapped and registered by the shim, and not inherited by fork
run staging_registered_native LD_LIBRARY_PATH="$fake" PIPE_NATIVE=1 "$prog" staging_registered
shimmed staging_registered "$prog" staging_registered
shimmed no_pinned FAKECUDA_FAULT_HOST_REGISTER=1 FAKECUDA_FAULT_HOST_ALLOC=1 "$prog" fault_no_pinned
expect_log no_pinned "cudaHostAlloc of .* failed" 1
shimmed no_events "$prog" fault_no_events
expect_log no_events "cannot create the shim's events" 1
shimmed no_streams "$prog" fault_no_streams
expect_log no_streams "cannot create the shim's streams" 1

# case D's remedy (fix_busy_d2d): in a created context data, order,
# staged while late, back to native; in the primary one data and order, and the
# first copy waits for the kernel's end whatever the shim does
stage_prog=$work/d2d_stage_tests
if ${CC:-gcc} -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror $SAN_CFLAGS -I"$cuda/include" -I"$here/../fakecuda" \
    -o "$stage_prog" "$here/d2d_stage_tests.c" -L"$fake" -lcudart -l:libcuda.so.1 -pthread; then
    run d2d_native LD_LIBRARY_PATH="$fake" FAKECUDA_TIMESLICE_US=10000 "$stage_prog" native
    run d2d_shim_off LD_LIBRARY_PATH="$fake" LD_PRELOAD="$preload" FAKECUDA_TIMESLICE_US=10000 UNSTALL_FIX_BUSY_D2D=0 \
        "$stage_prog" native
    # late: 6 ms over what the size explains, against the simulated 10 ms
    # slice that a copy off the engine waits whole (the default 0.5 ms, and
    # even 3 ms, are within how late the simulated GPU's timing events, host
    # threads, can read on a loaded 2-core machine: a free engine looked
    # busy). A recheck every 150 ms: each makes a round's copy native, and
    # rounds of kernels and copies that each wait a slice take 20-50 ms
    run d2d_staged LD_LIBRARY_PATH="$fake" LD_PRELOAD="$preload" FAKECUDA_TIMESLICE_US=10000 UNSTALL_FIX_BUSY_D2D=1 \
        UNSTALL_BUSY_D2D_RECHECK_MS=150 UNSTALL_BUSY_D2D_MAX_BYTES=2m UNSTALL_BUSY_D2D_LATE_US=6000 "$stage_prog" staged
    # a copy larger than the stream's 2 MiB buffer goes through it in pieces
    run d2d_staged_pieces LD_LIBRARY_PATH="$fake" LD_PRELOAD="$preload" FAKECUDA_TIMESLICE_US=10000 \
        UNSTALL_FIX_BUSY_D2D=1 UNSTALL_BUSY_D2D_RECHECK_MS=150 UNSTALL_BUSY_D2D_MAX_BYTES=8m UNSTALL_BUSY_D2D_LATE_US=6000 \
        "$stage_prog" pieces 2101251
else
    fail d2d_stage.build "d2d_stage_tests.c does not compile"
fi
finish
