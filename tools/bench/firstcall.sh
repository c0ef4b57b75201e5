#!/bin/sh
# A process's first copies (tools/bench/firstcall.c), natively and under the
# shim, in PROCS processes each, interleaved so that both see the same machine
# state, in an order that turns each round (no variant always runs right
# after the same other one: a process's first copies differed by 10-15 us
# with the process that ran before it); prints the median and the worst of
# each call over the processes.
#
# Usage: tools/bench/firstcall.sh [BUILD_DIR] [PROCS]   (default build, 15)
# Environment: FIRSTCALL_VARIANTS: extra shim runs, each a space-free list of
# VAR=value joined by commas (e.g. "UNSTALL_MODE=off UNSTALL_FIX=0"; LD_PRELOAD=path
# runs another build of the shim).
# Without a GPU it runs over the simulated runtime: figures mean nothing.
build=$(cd "${1:-build}" && pwd) || exit 1
procs=${2:-15}
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
shim=$build/libunstall.so
[ -f "$shim" ] || { echo "firstcall: missing $shim (make shim)"; exit 1; }
. "$here/bench_runtime.sh"
bench_runtime firstcall "$build/fakecuda"
mkdir -p "$build/bench"
bin=$build/bench/firstcall
bench_build "$here/firstcall.c" "$bin" || exit 1
out=$(mktemp -d)
variants="native shim"
for v in ${FIRSTCALL_VARIANTS:-}; do variants="$variants $v"; done
count=$(echo $variants | wc -w)
i=0
while [ $i -lt "$procs" ]; do
    # round i starts at variant i % count and goes round, forwards in even
    # sweeps of `count` rounds and backwards in odd ones
    j=0
    while [ $j -lt "$count" ]; do
        if [ $(( i / count % 2 )) -eq 0 ]; then step=$j; else step=$(( count - j )); fi
        k=$(( (i + step) % count + 1 )) # the variant's file: its position (a variant may hold a path)
        v=$(echo $variants | cut -d' ' -f$k)
        case $v in
        native) "$bin" >>"$out/$k" || exit 1 ;;
        shim) LD_PRELOAD="$shim" UNSTALL_REPORT=/dev/null "$bin" >>"$out/$k" 2>/dev/null || exit 1 ;;
        *) env LD_PRELOAD="$shim" UNSTALL_REPORT=/dev/null $(echo "$v" | tr ',' ' ') "$bin" >>"$out/$k" 2>/dev/null || exit 1 ;;
        esac
        j=$((j + 1))
    done
    i=$((i + 1))
done
echo "firstcall: $where, $procs processes each (us on the calling thread: median / worst)"
python3 - "$out" $variants <<'PY'
import sys, statistics
out, variants = sys.argv[1], sys.argv[2:]
rows = {}
for k, v in enumerate(variants, 1):
    for line in open(f"{out}/{k}"):
        for f in line.split()[1:]:
            k, val = f.split("=")
            rows.setdefault(k, {}).setdefault(v, []).append(float(val))
print(f"{'call':20}" + "".join(f"{v.split('/')[-2] if '/' in v else v:>26.24}" for v in variants))
for k, per in rows.items():
    cells = []
    for v in variants:
        xs = per.get(v, [])
        if k == "ok":
            cells.append(f"{'all ok' if xs and min(xs) == 1 else 'MISMATCH':>26}")
        else:
            cells.append(f"{statistics.median(xs):>15.1f} / {max(xs):>8.1f}")
    print(f"{k:20}" + "".join(cells))
PY
rm -rf "$out"
