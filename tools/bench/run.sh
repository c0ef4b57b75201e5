#!/bin/sh
# make bench: on a GPU machine, the scenario programs (BUILD_DIR/gpu/case_*,
# full sizes; also BUILD_DIR/gpu-static/case_*, the same linked with the static
# runtime as plain nvcc does) natively and under the shim in one run, then the
# performance table of cases A-E (tools/bench/table.py: native, unstall,
# target, ratio) with the machine it ran on. Printed, and written to BENCH_OUT (default
# BUILD_DIR/bench.md); the chart (tools/bench/chart.py: bars per case and a
# timeline of case B) to BENCH_SVG (BUILD_DIR/bench.svg) and its figures to
# BENCH_JSON (BUILD_DIR/bench.json). Every figure comes from the programs'
# RESULT lines and the shim's JSON report. Then the small-copy tables
# (tools/bench/smallcopy.sh: back to back, 2 ms apart, and with two GPUs
# cross-GPU copies without peer access) and a process's first copies
# (tools/bench/firstcall.sh).
#
# Usage: tools/bench/run.sh [BUILD_DIR]
# Environment: BENCH_OUT, BENCH_SVG, BENCH_JSON, BENCH_RUNS (default BUILD_DIR/bench-runs), SCN_* knobs
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${BENCH_RUNS:-$build/bench-runs}
report=${BENCH_OUT:-$build/bench.md}

if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "bench: no GPU here (nvidia-smi -L failed); the performance table needs one"
    echo "bench: on the simulated runtime, tools/bench/passthrough.sh measures the pass-through cost"
    exit 1
fi
echo "bench: scenario programs natively and under the shim"
sh "$root/tests/gpu/runner.sh" "$build" "$out" "native shim" || exit 1
# the same programs linked as plain nvcc links them (static runtime): the shim
# sees them through its driver layer and must fix them alike
if [ -x "$build/gpu-static/case_b_pageable_h2d" ]; then
    echo "bench: the same programs built with the static runtime (plain nvcc)"
    SCN_GPU_BIN_DIR=$build/gpu-static sh "$root/tests/gpu/runner.sh" "$build" "$out-static" "native shim" || exit 1
fi

cuda=${CUDA_HOME:-/usr/local/cuda}
{
    echo "# unstall bench"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
    # the build itself: a copy of the tree whose git metadata is stale (a
    # machine the build folder was carried to) still names its shim
    echo "- shim: $build/libunstall.so, sha256 $(sha256sum "$build/libunstall.so" 2>/dev/null | cut -c1-16)"
    nvidia-smi -L | sed 's/^/- /'
    echo "- driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
    echo "- CUDA toolkit: $("$cuda/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
    echo "- CPU: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1) x $(nproc)"
    if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
        echo "- GPU 0 - GPU 1 link: $(nvidia-smi topo -m 2>/dev/null | awk '$1 == "GPU0" {print $3}')"
    fi
    echo "- sizes and kernels: the programs' defaults (docs/scenarios.md)$(env | grep '^SCN_' | tr '\n' ' ' | sed 's/^./; overridden: &/')"
    echo
    python3 "$here/table.py" "$out/native" "$out/shim"
    echo
    if [ -d "$out-static/shim" ]; then
        echo "## The same programs linked with the static CUDA runtime (nvcc's default)"
        echo
        echo "unstall sees them through its driver layer (libcuda), not through libcudart's exports."
        echo
        python3 "$here/table.py" "$out-static/native" "$out-static/shim"
        echo
    fi
    echo "Ratio: unstall / native (for times, below 1 is faster). Runs: $out"
} >"$report.tmp" && mv "$report.tmp" "$report"
cat "$report"
echo
echo "bench: written to $report"

# the chart: the same rows, and a timeline of case B held_large from the
# shim's JSON report, watching (UNSTALL_FIX=0: the runtime's own copy) and fixing
tl=$out/timeline
mkdir -p "$tl"
for run in native unstall; do
    [ $run = native ] && fix=0 || fix=1
    env LD_PRELOAD="$build/libunstall.so" UNSTALL_FIX=$fix UNSTALL_REPORT="$tl/$run.json" \
        timeout -k 10 300 "$build/gpu/case_b_pageable_h2d" held_large >"$tl/$run.out" 2>"$tl/$run.err"
done
about="$(nvidia-smi -L | wc -l) x $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
about="$about$(sed -n 's/^- GPU 0 - GPU 1 link: \(.*\)/ (link \1)/p' "$report"), driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
about="$about, $(sed -n 's/^- CUDA toolkit: /CUDA /p' "$report"), $(sed -n 's/^- commit: /commit /p' "$report"), $(sed -n 's/^- date: //p' "$report")"
python3 "$here/chart.py" --native "$out/native" --shim "$out/shim" --timeline "$tl" --about "$about" \
    --json "${BENCH_JSON:-$build/bench.json}" --svg "${BENCH_SVG:-$build/bench.svg}" &&
    echo "bench: chart ${BENCH_SVG:-$build/bench.svg}, figures ${BENCH_JSON:-$build/bench.json}"
echo
echo "bench: small copies, 4 B to 256 MiB, natively and under the shim (tools/bench/smallcopy.sh)"
sh "$here/smallcopy.sh" "$build" | tee "$build/smallcopy.md"
echo
# the same with the host idle 2 ms before each call, as a training loop's
# copies come between steps (its copy threads asleep, its caches cold): fewer
# calls and rounds, sizes up to 4 MiB
echo "bench: small copies 2 ms apart, 4 B to 4 MiB, natively and under the shim (tools/bench/smallcopy.sh)"
SMALLCOPY_GAP_US=2000 SMALLCOPY_REPS=30 SMALLCOPY_SMALL_ROUNDS=8 SMALLCOPY_OUT="$build/smallcopy-idle" \
    sh "$here/smallcopy.sh" "$build" 4194304 | tee "$build/smallcopy-idle.md"
echo
# case A at small sizes: a cross-GPU copy without peer access, which the shim
# sends native on an idle stream and stages behind queued work
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    echo "bench: cross-GPU copies without peer access, 4 B to 16 MiB, natively and under the shim (tools/bench/smallcopy.sh)"
    SMALLCOPY_OPS=peer_async SMALLCOPY_OUT="$build/smallcopy-peer" sh "$here/smallcopy.sh" "$build" 16777216 |
        tee "$build/smallcopy-peer.md"
    echo
fi
echo "bench: a process's first copies, 10 processes each, natively and under the shim (tools/bench/firstcall.sh)"
sh "$here/firstcall.sh" "$build" 10 | tee "$build/firstcall.md"
