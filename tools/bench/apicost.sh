#!/bin/sh
# What each building block of a rewritten or observed copy costs on this
# machine (tools/bench/apicost.c): natively, then under the shim, side by
# side. Also builds tools/bench/callprof.c (BUILD_DIR/bench/libcallprof.so),
# a preload that counts and times the runtime calls a program and the shim
# make (LD_PRELOAD="BUILD_DIR/libunstall.so BUILD_DIR/bench/libcallprof.so").
# On a machine without a GPU it runs over the simulated runtime, which checks
# the program, not the figures.
# Usage: tools/bench/apicost.sh [BUILD_DIR] [REPS]
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
. "$here/bench_runtime.sh"
bench_runtime apicost "$build/fakecuda"
mkdir -p "$build/bench"
bench_build "$here/apicost.c" "$build/bench/apicost" -ldl || exit 1
${CC:-gcc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -fPIC -shared -I"$cuda/include" -I"$root/shim/base" \
    "$here/callprof.c" -o "$build/bench/libcallprof.so" -ldl || exit 1
"$build/bench/apicost" ${2:-} >"$build/bench/apicost.native" || exit 1
LD_PRELOAD="$build/libunstall.so" UNSTALL_REPORT=/dev/null "$build/bench/apicost" ${2:-} >"$build/bench/apicost.shim" 2>/dev/null || exit 1
echo "apicost: $where"
printf '%-44s %10s %10s\n' "ns a call" native unstall
paste "$build/bench/apicost.native" "$build/bench/apicost.shim" |
    sed 's/APICOST name=//g; s/ ns=/ /g' | awk '{printf "%-44s %10s %10s\n", $1, $2, $4}'
