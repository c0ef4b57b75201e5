#!/bin/sh
# A process's first pageable H2D copies behind queued work, natively and
# under the shim, taking turns, each in a fresh process (case B's
# first_use_small and first_use_large, then host_copy for the target):
# per variant the median and worst time the second copy held its caller,
# and the target 1.25 x bytes / the host's copy bandwidth + 0.1 ms. No
# warm-up: every round is a new process, and every round counts.
#
# Usage: tools/bench/firstuse.sh [BUILD_DIR [ROUNDS]]   (default build, 5)
# Environment: FIRSTUSE_VARIANTS  extra shim variants, each a space-free list
#              of VAR=value joined by commas (e.g. UNSTALL_COPY_THREADS=16)
build=$(cd "${1:-build}" && pwd) || exit 1
rounds=${2:-5}
bin=$build/gpu/case_b_pageable_h2d
[ -x "$bin" ] || bin=$build/scenarios/case_b_pageable_h2d
[ -x "$bin" ] || { echo "firstuse: no case_b_pageable_h2d in $build/gpu or $build/scenarios"; exit 2; }
shim=$build/libunstall.so
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
variants="native shim ${FIRSTUSE_VARIANTS:-}"
r=1
while [ "$r" -le "$rounds" ]; do
    for v in $variants; do
        case $v in
            native) env "$bin" first_use_small first_use_large ;;
            shim) env LD_PRELOAD="$shim" "$bin" first_use_small first_use_large ;;
            *) env LD_PRELOAD="$shim" $(echo "$v" | tr ',' ' ') "$bin" first_use_small first_use_large ;;
        esac 2>/dev/null | grep '^RESULT' | sed "s/^/$v /" >>"$out/results"
    done
    r=$((r + 1))
done
host_line=$(env LD_PRELOAD="$shim" "$bin" host_copy 2>/dev/null | grep 'test=host_copy')
host=$(echo "$host_line" | sed -n 's/.* gbps=\([0-9.]*\).*/\1/p')
host_threads=$(echo "$host_line" | sed -n 's/.* threads=\([0-9]*\).*/\1/p')
echo "firstuse: $rounds fresh processes per variant, taking turns; $bin"
echo "host copy bandwidth (256 MiB, ${host_threads:-?} threads): ${host:-?} GB/s"
echo
echo "| variant | copy | held median ms | held worst ms | target ms | data |"
echo "|---|---|---|---|---|---|"
for v in $variants; do
    for t in first_use_small first_use_large; do
        rows=$(grep "^$v RESULT .* test=$t " "$out/results")
        [ -n "$rows" ] || continue
        bytes=$(echo "$rows" | sed -n 's/.* bytes=\([0-9]*\).*/\1/p' | head -1)
        wrong=$(echo "$rows" | grep -vc ' ok=1')
        echo "$rows" | sed -n 's/.* held_ms=\([0-9.]*\).*/\1/p' | sort -n | awk -v v="$v" -v bytes="$bytes" \
            -v host="${host:-0}" -v wrong="$wrong" '
            { held[NR] = $1 }
            END {
                med = (NR % 2) ? held[(NR + 1) / 2] : (held[NR / 2] + held[NR / 2 + 1]) / 2
                target = host > 0 ? sprintf("%.2f", 1.25 * bytes / (host * 1e9) * 1e3 + 0.1) : "?"
                printf "| %s | %.0f MiB | %.2f | %.2f | %s | %s |\n", v, bytes / 1048576, med, held[NR], target,
                       (wrong > 0 ? wrong " wrong" : "right")
            }'
    done
done
