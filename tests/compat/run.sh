#!/bin/sh
# The project's own compatibility programs (tests/compat/*.cu: the patterns
# NVIDIA's cuda-samples exercise), each built with
# `nvcc -cudart shared` and run natively, under unstall with its defaults, and
# under unstall with each legacy_stream remedy. One row each: the outcome
# ("PASS" or the program's own FAIL line, or its exit status) and the wall
# time per mode, and the rules unstall reported. Any mode whose outcome
# differs from native's is a failure (exit 1). Needs a GPU and nvcc.
#
# Usage: tests/compat/run.sh [BUILD_DIR]
# Environment: COMPAT_PROGS_OUT (BUILD_DIR/compat-progs), COMPAT_TIMEOUT
#              (seconds a run, 120), COMPAT_ONLY (names to run, default all)
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
out=${COMPAT_PROGS_OUT:-$build/compat-progs}
limit=${COMPAT_TIMEOUT:-120}
shim=$build/libunstall.so
[ -f "$shim" ] || { echo "compat-progs: missing $shim (make shim)"; exit 2; }
nvidia-smi -L >/dev/null 2>&1 || { echo "compat-progs: no GPU here (nvidia-smi -L failed)"; exit 2; }
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
# programs built before (where nvcc ran elsewhere: a carried build folder)
# are kept when newer than their sources; every other output is made anew
bin=$out/bin-sm_$cap # per architecture, so that a carried build serves only its own
mkdir -p "$bin"
find "$out" -maxdepth 1 -type f -delete

names=${COMPAT_ONLY:-$(cd "$here" && ls *.cu | sed 's/\.cu$//')}
for name in $names; do
    if [ "$bin/$name" -nt "$here/$name.cu" ] && [ "$bin/$name" -nt "$here/compat.h" ]; then
        continue
    fi
    extra=""
    [ "$name" = omp_devices ] && extra="-Xcompiler -fopenmp"
    # shellcheck disable=SC2086 # extra is words
    "$cuda/bin/nvcc" -cudart shared -arch="sm_$cap" -O2 $extra -o "$bin/$name" "$here/$name.cu" \
        >"$out/$name.build" 2>&1 || echo "compat-progs: $name does not build (see $out/$name.build)"
done

modes="native shim ordered per_thread"
failed=0
printf '%-16s' program
for mode in $modes; do printf ' | %-22s' "$mode"; done
printf ' | %s\n' "rules reported (unstall, defaults)"
for name in $names; do
    printf '%-16s' "$name"
    native=""
    for mode in $modes; do
        case $mode in
            native) set -- env ;;
            shim) set -- env LD_PRELOAD="$shim" UNSTALL_REPORT="$out/$name.json" ;;
            *) set -- env LD_PRELOAD="$shim" UNSTALL_LEGACY_STREAM="$mode" ;;
        esac
        start=$(date +%s%N)
        if [ -x "$bin/$name" ]; then
            "$@" timeout -k 5 "$limit" "$bin/$name" >"$out/$name.$mode.out" 2>"$out/$name.$mode.err"
            rc=$?
        else
            rc=127
        fi
        ms=$((($(date +%s%N) - start) / 1000000))
        line=$(grep "^COMPAT " "$out/$name.$mode.out" 2>/dev/null | tail -1)
        case "$line" in
            "COMPAT $name PASS"*) outcome=PASS ;;
            "COMPAT "*" FAIL "*) outcome="FAIL" ;;
            *) outcome="exit $rc" ;;
        esac
        [ "$rc" -eq 0 ] || [ "$outcome" != PASS ] || outcome="exit $rc"
        [ "$mode" = native ] && native=$outcome
        mark=""
        if [ "$outcome" != "$native" ]; then mark=" DIFFERS"; failed=$((failed + 1)); fi
        printf ' | %-22s' "$outcome ${ms} ms$mark"
    done
    rules=$(python3 -c 'import json,sys,collections
try:
    r = json.load(open(sys.argv[1]))
except Exception:
    print("-"); sys.exit()
c, fixed = collections.Counter(), collections.Counter()
for f in r.get("findings", []):
    c[f.get("rule", "?")] += f.get("count", 1)
    fixed[f.get("rule", "?")] += f.get("fixed", 0)
print(" ".join(f"{k}:{v}" + (f" ({fixed[k]} fixed)" if fixed[k] else "") for k, v in sorted(c.items())) or "none")' "$out/$name.json")
    printf ' | %s\n' "$rules"
done
echo "compat-progs: $failed differences from native (outputs in $out)"
[ "$failed" -eq 0 ]
