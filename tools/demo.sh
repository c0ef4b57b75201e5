#!/bin/sh
# make demo: build, run the bundled scenarios (cases A-E) natively and under
# the shim, print both side by side and what the shim reported, and end with
# one table at a glance (case, native, unstall, what it shows: the table code
# of make bench, tools/bench/table.py). On the GPU when there is one
# (nvidia-smi and nvcc), else on the simulated runtime.
# Usage: tools/demo.sh BUILD_DIR
build=${1:-build}
cuda=${CUDA_HOME:-/usr/local/cuda}
if nvidia-smi -L >/dev/null 2>&1 && [ -x "$cuda/bin/nvcc" ]; then
    where=gpu
    echo "unstall demo: on the GPU ($(nvidia-smi -L | head -1 | cut -d'(' -f1)x$(nvidia-smi -L | wc -l))"
    make --no-print-directory -s shim $(ls tests/scenarios/case_*.c | sed "s|tests/scenarios/|$build/gpu/|; s|\.c$||") || exit 1
    bins=$(ls "$build"/gpu/case_*)
    libpath=""
else
    where=fake
    echo "unstall demo: no GPU here: on the simulated runtime (tests/fakecuda; its timings are models, not measurements)"
    make --no-print-directory -s shim fakecuda scenarios || exit 1
    bins=$(ls "$build"/scenarios/case_*)
    libpath=$build/fakecuda
    export SCN_QUICK=1
fi
out=$build/demo
rm -rf "$out"
mkdir -p "$out/native" "$out/shim"
# runs named as tests/gpu/runner.sh names them (case_a ... case_clean), in the
# layout tools/bench/table.py reads: <mode>/<run>.{out,err,rc}
for bin in $bins; do
    run=$(basename "$bin" | sed 's/^\(case_[a-z]\)_.*/\1/')
    LD_LIBRARY_PATH="$libpath" "$bin" >"$out/native/$run.out" 2>"$out/native/$run.err"
    echo $? >"$out/native/$run.rc"
    LD_LIBRARY_PATH="$libpath" LD_PRELOAD="$PWD/$build/libunstall.so" UNSTALL_MODE=report \
        UNSTALL_REPORT_TOP=5 "$bin" >"$out/shim/$run.out" 2>"$out/shim/$run.err"
    echo $? >"$out/shim/$run.rc"
done
# every RESULT key side by side, what unstall reported, then one table
python3 tools/bench/table.py --demo "$out/native" "$out/shim"
echo
echo "demo: outputs in $out/ ($where)"
