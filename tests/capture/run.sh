#!/bin/sh
# Stream capture, graphs and stream-ordered allocation, natively and under
# the shim: tests/capture/capture_conform prints one line per case, and every
# run must print the outcomes of expected.txt (measured on a GPU or stated by
# the CUDA documentation) and, on the simulated runtime, predicted.txt (what
# fakecuda models and no GPU confirmed yet). Under the shim every line must
# equal the native one: whatever the shim does must not change what a
# capture does (docs/contract.md §7).
#
# Usage: tests/capture/run.sh [BUILD_DIR] [fake|gpu]
#   fake (default, CI): BUILD_DIR/capture/capture_conform on BUILD_DIR/fakecuda
#   gpu  (make gpu-test): BUILD_DIR/gpu/capture_conform on the real runtime
# Modes: native; fix0 (UNSTALL_MODE=off UNSTALL_FIX=0: the shim only
# interposes, which once invalidated a capture); shim (defaults).
build=$(cd "${1:-build}" && pwd) || exit 1
runtime=${2:-fake}
here=$(cd "$(dirname "$0")" && pwd)
shim=$build/libunstall.so
out=$build/capture-runs/$runtime
case $runtime in
    fake) prog=$build/capture/capture_conform
          export LD_LIBRARY_PATH=$build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
          export FAKECUDA_DEVICES=${FAKECUDA_DEVICES:-2} ;;
    gpu) prog=$build/gpu/capture_conform ;;
    *) echo "usage: $0 [BUILD_DIR] [fake|gpu]" >&2; exit 2 ;;
esac
for f in "$prog" "$shim"; do
    if [ ! -f "$f" ]; then
        echo "FAIL build: $f missing (make shim $(echo "$prog" | sed "s|$build/|\$(BUILD)/|"))"
        echo "capture: 0 passed, 1 failed"
        exit 1
    fi
done

rm -rf "$out"
mkdir -p "$out"
for mode in native fix0 shim; do
    case $mode in
        native) pre="" ;;
        fix0) pre="LD_PRELOAD=$shim UNSTALL_MODE=off UNSTALL_FIX=0" ;;
        shim) pre="LD_PRELOAD=$shim" ;;
    esac
    env $pre timeout -k 5 120 "$prog" >"$out/$mode.out" 2>"$out/$mode.err"
    rc=$?
    [ $rc -eq 0 ] || echo "note: $mode exited $rc (stderr in $out/$mode.err)"
done
python3 "$here/compare.py" "$runtime" "$out" "$here/expected.txt" "$here/predicted.txt"
