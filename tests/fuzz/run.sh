#!/bin/sh
# Bounded fuzzing of the configuration value parsers, config files and
# environment, report path templates and the pointer table
# (tests/fuzz/fuzz_targets.c), each target under ASan+UBSan: with libFuzzer
# where clang can build it, else with driver.c (gcc, seeded random inputs and
# mutated corpus files). Seeds: tests/fuzz/corpus/<target>/ (libFuzzer's new
# inputs go to BUILD_DIR/fuzz, not into the repository). Prints "PASS name" /
# "FAIL name: why" and "fuzz: N passed, M failed".
#
# Usage: tests/fuzz/run.sh [BUILD_DIR]
# Environment: FUZZ_SECONDS per target (default 4), FUZZ_SEED (default from
# the clock; printed), FUZZ_ENGINE=driver to use driver.c even with clang.
# A failure prints the input libFuzzer saved (crash-*) or the driver's seed.
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
work=$build/fuzz
seconds=${FUZZ_SECONDS:-4}
seed=${FUZZ_SEED:-$(date +%s)}
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
mkdir -p "$work"

# the modules under test and what they need, nothing else
core="$root/shim/base/config.c $root/shim/base/log.c $root/shim/base/ptrtable.c"
flags="-std=c11 -D_GNU_SOURCE -g -O1 -I$cuda/include -I$root/shim/base"
engine=${FUZZ_ENGINE:-libfuzzer}
if [ "$engine" = libfuzzer ] && ! command -v clang >/dev/null 2>&1; then engine=driver; fi
echo "fuzz: engine $engine, seed $seed, $seconds s per target"

n=0
for target in values config path ptrtable; do
    n=$((n + 1))
    bin=$work/fuzz_$target.$engine
    # rebuilt when a source is newer than the binary
    stale=1
    if [ -x "$bin" ]; then
        stale=0
        for f in $core $root/shim/base/*.h $root/shim/base/options.def "$here/fuzz_targets.c" "$here/driver.c"; do
            [ "$f" -nt "$bin" ] && stale=1
        done
    fi
    if [ "$stale" = 1 ]; then
        if [ "$engine" = libfuzzer ]; then
            cmd="clang $flags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -DFUZZ_TARGET=$n $here/fuzz_targets.c $core"
        else
            cmd="${CC:-gcc} $flags -fsanitize=address,undefined -fno-sanitize-recover=all -DFUZZ_TARGET=$n $here/fuzz_targets.c $here/driver.c $core"
        fi
        if ! $cmd -o "$bin" -ldl -pthread -lm >"$work/$target.build.log" 2>&1; then
            fail "$target.build" "$(tail -5 "$work/$target.build.log" | tr '\n' ' ')"
            continue
        fi
    fi
    log=$work/$target.log
    if [ "$engine" = libfuzzer ]; then
        corpus=$work/corpus-$target
        mkdir -p "$corpus"
        (cd "$work" && ASAN_OPTIONS=detect_leaks=1 timeout -k 5 $((seconds + 60)) "$bin" -max_total_time="$seconds" \
            -seed="$seed" -timeout=10 -rss_limit_mb=2048 "$corpus" "$here/corpus/$target") >"$log" 2>&1
    else
        ASAN_OPTIONS=detect_leaks=1 timeout -k 5 $((seconds + 60)) "$bin" "$seconds" "$seed" "$here/corpus/$target"/* >"$log" 2>&1
    fi
    rc=$?
    if [ "$rc" -eq 0 ]; then
        pass "$target ($(grep -E '^Done|runs, no failure' "$log" | tail -1))"
    else
        fail "$target" "exit $rc, seed $seed: $(grep -m3 -E 'does not hold|ERROR|runtime error|SUMMARY|Test unit written' "$log" | tr '\n' ' ')"
    fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
