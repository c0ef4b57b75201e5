#!/bin/sh
# make gpu-test: on a GPU machine, the GPU builds of the scenario programs
# (BUILD_DIR/gpu/case_*) natively, under the shim in pass-through mode
# (UNSTALL_FIX=0) and fixing; then tests/torch/smoke.py natively and under
# the shim in both modes; the conformance programs (tests/conformance, BUILD_DIR/
# conformance/gpu) natively and under the shim against tests/conformance/expected.txt;
# tests/gpu/device_reset.c in every mode; the random-copy stress (tests/stress/gpu.sh).
# Checks data ok=1 everywhere and no extra failures
# in pass-through (tests/gpu/check.py), then prints the figures side by side
# (tools/bench/table.py; make bench is the place for the performance table).
# Also tests/capture/run.sh BUILD_DIR gpu: the capture conformance program
# natively and under the shim, against tests/capture/expected.txt.
# Needs gcc, nvcc and (for the smoke test) python3 with torch; no cmocka,
# no uthash beyond .deps/include/uthash.h.
#
# Usage: tests/gpu/run.sh [BUILD_DIR]
# Environment: GPU_TEST_OUT (default BUILD_DIR/gpu-test), PYTHON (python3),
#              GPU_TEST_MODES (default "native fix0 shim")
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${GPU_TEST_OUT:-$build/gpu-test}
py=${PYTHON:-python3}
modes=${GPU_TEST_MODES:-native fix0 shim}
shim=$build/libunstall.so

if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu-test: no GPU here (nvidia-smi -L failed); on a machine without one, run make check"
    exit 1
fi
echo "gpu-test: $(nvidia-smi -L | wc -l) GPU(s): $(nvidia-smi -L | head -1)"
echo "gpu-test: scenario programs (modes: $modes)"
sh "$here/runner.sh" "$build" "$out" "$modes" || exit 1

echo "gpu-test: conformance programs (tests/conformance; natively, then under the shim)"
conf_rc=0
mkdir -p "$out"
sh "$root/tests/conformance/run.sh" "$build/conformance/gpu" >"$out/conformance-native.txt" 2>&1 || conf_rc=1
CONFORM_SHIM=$shim sh "$root/tests/conformance/run.sh" "$build/conformance/gpu" >"$out/conformance-shim.txt" 2>&1 || conf_rc=1
for f in "$out/conformance-native.txt" "$out/conformance-shim.txt"; do
    echo "  $(basename "$f" .txt): $(tail -1 "$f")"
    grep -e '^FAIL' -e '^SKIP' "$f" | sed 's/^/    /'
done
echo "gpu-test: cudaDeviceReset, then copies again (tests/gpu/device_reset.c)"
reset_rc=0
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$out"
if ${CC:-gcc} -std=c11 -O1 -I"$cuda/include" -o "$out/device_reset" "$here/device_reset.c" \
    -L"$cuda/lib64" -lcudart -Wl,-rpath,"$cuda/lib64"; then
    for mode in $modes; do
        case $mode in
            native) pre="" ;;
            fix0) pre="LD_PRELOAD=$shim UNSTALL_FIX=0" ;;
            disabled) pre="LD_PRELOAD=$shim UNSTALL_DISABLE=1" ;;
            shim) pre="LD_PRELOAD=$shim" ;;
        esac
        mkdir -p "$out/$mode"
        env $pre timeout -k 10 120 "$out/device_reset" >"$out/$mode/device_reset.log" 2>&1
        r=$?
        echo "  $mode device_reset: exit $r, $(grep -m1 -v 'done' "$out/$mode/device_reset.log")"
        [ "$r" -eq 0 ] || reset_rc=1
    done
else
    echo "  device_reset.c does not compile"
    reset_rc=1
fi

echo "gpu-test: PyTorch smoke test"
for mode in $modes; do
    dir=$out/$mode
    mkdir -p "$dir"
    case $mode in
        native) pre="" ;;
        fix0) pre="LD_PRELOAD=$shim UNSTALL_FIX=0" ;;
        disabled) pre="LD_PRELOAD=$shim UNSTALL_DISABLE=1" ;;
        shim) pre="LD_PRELOAD=$shim" ;;
    esac
    env $pre PYTHONUNBUFFERED=1 timeout -k 10 600 "$py" "$root/tests/torch/smoke.py" \
        >"$dir/torch.out" 2>"$dir/torch.err"
    echo $? >"$dir/torch.rc"
    echo "  $mode torch: exit $(cat "$dir/torch.rc")"
done

echo "gpu-test: stream capture conformance (tests/capture: the GPU's answers vs expected.txt)"
sh "$root/tests/capture/run.sh" "$build" gpu >"$out/capture.txt" 2>&1
capture_rc=$?
grep -v '^PASS' "$out/capture.txt"

echo "gpu-test: copies in created and primary contexts, shared and static runtime (tests/driver)"
sh "$root/tests/driver/run.sh" "$build" gpu >"$out/driver.txt" 2>&1
driver_rc=$?
grep -v '^PASS' "$out/driver.txt"

echo "gpu-test: the report's file:line frames and the no-call cases, shared and static runtime (tests/launcher)"
sh "$root/tests/launcher/run.sh" "$build" gpu >"$out/launcher.txt" 2>&1
launcher_rc=$?
grep -v '^PASS' "$out/launcher.txt"

echo "gpu-test: the compatibility programs (tests/compat: natively, under the shim, under each legacy_stream remedy)"
sh "$root/tests/compat/run.sh" "$build" >"$out/compat-progs.txt" 2>&1
compat_rc=$?
cat "$out/compat-progs.txt"

echo "gpu-test: random-copy stress (tests/stress/gpu.sh)"
sh "$root/tests/stress/gpu.sh" "$build" "$out"
stress_rc=$?

echo
python3 "$here/check.py" "$out"
rc=$?
[ "$conf_rc" -ne 0 ] && rc=1
[ $capture_rc -eq 0 ] || rc=1
[ "$reset_rc" -eq 0 ] || rc=1
[ "$stress_rc" -eq 0 ] || rc=1
[ "$driver_rc" -eq 0 ] || rc=1
[ "$launcher_rc" -eq 0 ] || rc=1
[ "$compat_rc" -eq 0 ] || rc=1
echo
python3 "$root/tools/bench/table.py" --all "$out/native" "$out/shim" 2>/dev/null || true
echo "gpu-test: outputs in $out"
exit $rc
