#!/bin/sh
# Runs the GPU builds of the scenario programs (BUILD_DIR/gpu/case_*) in the
# given modes and leaves OUT/<mode>/<run>.{out,err,rc} for tests/gpu/check.py
# and tools/bench/table.py. Modes: native, fix0 (the shim with UNSTALL_FIX=0),
# disabled (UNSTALL_DISABLE=1), shim (the shim fixing, default options).
# Full sizes (SCN_QUICK unset) unless the caller sets SCN_* knobs.
#
# Usage: tests/gpu/runner.sh BUILD_DIR OUT "MODES"
# Environment: SCN_GPU_BIN_DIR (default BUILD_DIR/gpu) where the programs are
build=$(cd "${1:-build}" && pwd) || exit 1
out=$2
modes=${3:-native fix0 shim}
shim=$build/libunstall.so
bin=${SCN_GPU_BIN_DIR:-$build/gpu} # gpu-static: the statically linked builds
[ -n "$out" ] || { echo "usage: $0 BUILD_DIR OUT MODES" >&2; exit 2; }
for f in "$shim" "$bin/case_a_staged_peer" "$bin/case_b_pageable_h2d" "$bin/case_c_pageable_d2h" \
         "$bin/case_d_busy_d2d" "$bin/case_e_legacy" "$bin/case_clean"; do
    [ -e "$f" ] || { echo "runner: missing $f (make shim $build/gpu/case_...)" >&2; exit 2; }
done
rm -rf "$out"

run() { # mode, name, env assignments and command...
    mode=$1 name=$2
    shift 2
    dir=$out/$mode
    mkdir -p "$dir"
    case $mode in
        native) set -- env "$@" ;;
        fix0) set -- env LD_PRELOAD="$shim" UNSTALL_FIX=0 "$@" ;;
        disabled) set -- env LD_PRELOAD="$shim" UNSTALL_DISABLE=1 "$@" ;;
        shim) set -- env LD_PRELOAD="$shim" "$@" ;;
        *) echo "runner: unknown mode $mode" >&2; return ;;
    esac
    start=$(date +%s)
    timeout -k 10 300 "$@" >"$dir/$name.out" 2>"$dir/$name.err"
    rc=$?
    echo $rc >"$dir/$name.rc"
    echo "  $mode $name: exit $rc, $(($(date +%s) - start)) s"
}

for mode in $modes; do
    run "$mode" case_a "$bin/case_a_staged_peer"
    run "$mode" case_b "$bin/case_b_pageable_h2d"
    # the freed-source copies alone, so that their first round is the process's first copy
    run "$mode" case_b_freed "$bin/case_b_pageable_h2d" freed
    run "$mode" case_c "$bin/case_c_pageable_d2h" throughput link launch_latency
    run "$mode" case_c_deadlock "$bin/case_c_pageable_d2h" deadlock
    run "$mode" case_c_deadlock_1m SCN_C_DEADLOCK_BYTES=1M "$bin/case_c_pageable_d2h" deadlock
    # as the user wrote it: the empty kernel's first launch happens in the
    # other thread, and lazy module loading deadlocks it whatever the copy does
    run "$mode" case_c_deadlock_asis SCN_C_DEADLOCK_KERNEL_WARMUP=0 SCN_C_DEADLOCK_S=5 "$bin/case_c_pageable_d2h" deadlock
    # the same with the case E remedy, eager module loading: natively
    # CUDA_MODULE_LOADING=EAGER, under the shim its option eager_modules
    if [ "$mode" = native ]; then eager=CUDA_MODULE_LOADING=EAGER; else eager=UNSTALL_EAGER_MODULES=1; fi
    run "$mode" case_c_deadlock_asis_eager SCN_C_DEADLOCK_KERNEL_WARMUP=0 SCN_C_DEADLOCK_S=5 "$eager" \
        "$bin/case_c_pageable_d2h" deadlock
    # case D: one burst, and the repeated bursts busy and idle in the primary
    # and a cuCtxCreate context
    run "$mode" case_d "$bin/case_d_busy_d2d"
    # the case D remedy (fix_busy_d2d, on by default; set all the same), under the shim only
    [ "$mode" = native ] || run "$mode" case_d_fixed UNSTALL_FIX_BUSY_D2D=1 "$bin/case_d_busy_d2d" \
        bursts_primary_idle bursts_primary_busy bursts_created_idle bursts_created_busy
    run "$mode" case_e "$bin/case_e_legacy"
    # the case E remedy (legacy_stream, off by default), under the shim only:
    # the order tests that per_thread drops by design are left out of its run
    if [ "$mode" != native ]; then
        run "$mode" case_e_ordered UNSTALL_LEGACY_STREAM=ordered "$bin/case_e_legacy"
        run "$mode" case_e_per_thread UNSTALL_LEGACY_STREAM=per_thread "$bin/case_e_legacy" legacy wait_event sync
    fi
    run "$mode" case_clean "$bin/case_clean"
done
# another thread's launches beside the D2H loop, in fresh processes taking
# turns between the modes: a process's worst launch moves a lot from one
# process to the next (natively 0.05-0.6 ms on one H200), so the table
# compares each pairing (tools/bench/table.py: no worse than native's in each).
# Beside them the same loop into pinned memory (case_clean): what a program
# that copies right gets at the link's speed, the reference for both
for i in 1 2 3; do
    for mode in $modes; do
        run "$mode" case_c_launch_$i "$bin/case_c_pageable_d2h" launch_latency
        run "$mode" clean_launch_$i "$bin/case_clean" launch_latency
    done
done
