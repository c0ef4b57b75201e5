#!/bin/sh
# make demo: build, run the bundled scenarios (cases A-E) natively and under
# the shim, print both side by side and what the shim reported. On the GPU
# when there is one (nvidia-smi and nvcc), else on the simulated runtime.
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
mkdir -p "$out"
for bin in $bins; do
    name=$(basename "$bin")
    LD_LIBRARY_PATH="$libpath" "$bin" >"$out/$name.native" 2>&1
    LD_LIBRARY_PATH="$libpath" LD_PRELOAD="$PWD/$build/libunstall.so" UNSTALL_MODE=report \
        UNSTALL_REPORT_TOP=5 "$bin" >"$out/$name.shim" 2>&1
done
python3 - "$out" <<'PY'
import glob, os, re, sys
out = sys.argv[1]
def results(path):
    rows = {}
    for line in open(path, errors="replace"):
        if line.startswith("RESULT "):
            kv = dict(re.findall(r"(\S+?)=(\S+)", line))
            rows[(kv.get("case", "?"), kv.get("test", "?"))] = kv
    return rows
for native_path in sorted(glob.glob(os.path.join(out, "*.native"))):
    name = os.path.basename(native_path)[:-len(".native")]
    native, shim = results(native_path), results(native_path[:-len(".native")] + ".shim")
    print(f"\n== {name}")
    for key in sorted(set(native) | set(shim)):
        n, s = native.get(key, {}), shim.get(key, {})
        fields = [k for k in list(n) + [k for k in s if k not in n] if k not in ("case", "test")]
        print(f"  case {key[0]} {key[1]}")
        for k in fields:
            print(f"    {k:<22} native {n.get(k, '-'):>12}   unstall {s.get(k, '-'):>12}")
    report = [l for l in open(native_path[:-len(".native")] + ".shim", errors="replace") if l.startswith("unstall")]
    if report:
        print("  what unstall saw:")
        for line in report[:25]:
            print("   ", line.rstrip())
PY
echo
echo "demo: outputs in $out/ ($where)"
