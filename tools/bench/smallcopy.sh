#!/bin/sh
# The cost of a pageable copy to the caller, 4 B to 256 MiB, natively and
# under the shim in one run, side by side (median, p99, worst and the first
# call of each row; no warm-up). Each direction runs in a process of its
# own, so that its first row holds the process's first copy, and each
# process is run SMALLCOPY_ROUNDS times, native, shim and a control (the shim
# loaded and disabled) taking turns, in an order that changes each round.
#
# Usage: tools/bench/smallcopy.sh [BUILD_DIR] [MAX_BYTES]
# On a machine without a GPU it runs over the simulated runtime
# (BUILD_DIR/fakecuda), which checks the program, not the figures.
# Rows up to 1 MiB and rows from 2 MiB run in processes of their own (each
# process's first copy is then a 4 B or a 2 MiB one), the small ones in more
# rounds: they cost little, and their verdict's margin (1 us) is smaller than
# what one process's p99 moves by from the next (the control's column).
# Environment: SMALLCOPY_ROUNDS (default 3: native, shim and control processes
#              take turns that many times per direction for the rows from 2 MiB,
#              and the table pools every round's calls: on the GPU hosts one
#              process's median moved by more than the differences measured,
#              native against native), SMALLCOPY_SMALL_ROUNDS (default 16: the
#              same for the rows up to 1 MiB), SMALLCOPY_REPS,
#              SMALLCOPY_AGAIN_ROUNDS (default SMALLCOPY_SMALL_ROUNDS: the rounds of the
#              second sample, below; 0: none),
#              SMALLCOPY_OUT (default BUILD_DIR/smallcopy),
#              SMALLCOPY_SHIM_ENV (extra variables for the shim run, e.g. UNSTALL_...=...),
#              SMALLCOPY_OPS (default "h2d d2h d2h_async h2d_async"; peer_async: a
#              cross-GPU copy without peer access, two GPUs);
#              smallcopy.c's own (SMALLCOPY_GAP_US: a sleep between calls) pass through
# A row the table calls slower (or where the control is off native by the
# table's rule) is judged again in a second sample: its op's processes run
# again, SMALLCOPY_AGAIN_ROUNDS rounds, from the same first row up to it, and
# the row stays slower only where both samples say so (smallcopy_table.py:
# the rule makes 60 tests a table, and native against native failed one of
# them in some tables).
build=$(cd "${1:-build}" && pwd) || exit 1
max=${2:-268435456}
rounds=${SMALLCOPY_ROUNDS:-3}
small_rounds=${SMALLCOPY_SMALL_ROUNDS:-16}
for n in "$rounds" "$small_rounds"; do
    case $n in ''|*[!0-9]*|0) echo "smallcopy: SMALLCOPY_ROUNDS and SMALLCOPY_SMALL_ROUNDS must be positive numbers, not '$n'"; exit 1 ;; esac
done
again_rounds=${SMALLCOPY_AGAIN_ROUNDS:-$small_rounds}
case $again_rounds in ''|*[!0-9]*) echo "smallcopy: SMALLCOPY_AGAIN_ROUNDS must be a number, not '$again_rounds'"; exit 1 ;; esac
small_max=1048576 # the largest small row
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
out=${SMALLCOPY_OUT:-$build/smallcopy}
shim=$build/libunstall.so
bin=$build/bench/smallcopy
[ -f "$shim" ] || { echo "smallcopy: missing $shim (make shim)"; exit 1; }
mkdir -p "$build/bench" "$out"
. "$here/bench_runtime.sh"
bench_runtime smallcopy "$build/fakecuda"
bench_build "$here/smallcopy.c" "$bin" || exit 1
for sample in "" .again; do
    : >"$out/native$sample"
    : >"$out/shim$sample"
    : >"$out/control$sample"
done
: >"$out/shim.err"
libpath=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# one process of one variant: native; the shim; the control (the shim loaded
# and disabled: native in all but the process, the table's measure of how far
# one set of processes lies from another)
run_variant() { # variant op min max; $sample: which files
    case $1 in
    native) SMALLCOPY_MIN=$3 SMALLCOPY_TIMES=1 LD_LIBRARY_PATH=$libpath "$bin" "$4" "$2" >>"$out/native$sample" ;;
    shim) env $SMALLCOPY_SHIM_ENV SMALLCOPY_MIN=$3 SMALLCOPY_TIMES=1 LD_LIBRARY_PATH=$libpath LD_PRELOAD="$shim" \
        "$bin" "$4" "$2" >>"$out/shim$sample" 2>>"$out/shim.err" || { cat "$out/shim.err"; return 1; } ;;
    control) UNSTALL_DISABLE=1 SMALLCOPY_MIN=$3 SMALLCOPY_TIMES=1 LD_LIBRARY_PATH=$libpath LD_PRELOAD="$shim" \
        "$bin" "$4" "$2" >>"$out/control$sample" ;;
    esac
}
run_rounds() { # rounds min max [op...]
    rounds_wanted=$1 min=$2 most=$3
    shift 3
    [ $# -gt 0 ] || set -- ${SMALLCOPY_OPS:-h2d d2h d2h_async h2d_async}
    round=0
    while [ $round -lt "$rounds_wanted" ]; do
        # the order changes each round, so that no variant always runs first
        # or right after the same other one
        case $((round % 6)) in
        0) order="native shim control" ;;
        1) order="control shim native" ;;
        2) order="shim control native" ;;
        3) order="native control shim" ;;
        4) order="control native shim" ;;
        *) order="shim native control" ;;
        esac
        for op in "$@"; do
            for v in $order; do
                run_variant $v $op "$min" "$most" || exit 1
            done
        done
        round=$((round + 1))
    done
}
sample=
if [ "$max" -le $small_max ]; then
    run_rounds "$small_rounds" 0 "$max"
else
    run_rounds "$small_rounds" 0 $small_max
    run_rounds "$rounds" $((small_max + 1)) "$max"
fi
# the second sample: per op and group of rows (to 1 MiB, from 2 MiB), its
# processes again up to the largest row to judge again
if [ "$again_rounds" -gt 0 ]; then
    sample=.again
    python3 "$here/smallcopy_table.py" --flagged "$out/native" "$out/shim" "$out/control" |
        awk -v small=$small_max '{ g = $2 <= small ? 0 : small + 1; k = $1 " " g
                                   if (!(k in most) || $2 > most[k]) most[k] = $2 }
                                 END { for (k in most) print k, most[k] }' >"$out/again.rows"
    while read -r op min most; do
        echo "smallcopy: $op from $min to $most bytes again, $again_rounds rounds"
        run_rounds "$again_rounds" "$min" "$most" "$op" </dev/null
    done <"$out/again.rows"
fi
echo "smallcopy: $where"
if [ "$again_rounds" -gt 0 ] && [ -s "$out/again.rows" ]; then
    python3 "$here/smallcopy_table.py" "$out/native" "$out/shim" "$out/control" \
        --again "$out/native.again" "$out/shim.again" "$out/control.again"
else
    python3 "$here/smallcopy_table.py" "$out/native" "$out/shim" "$out/control"
fi
