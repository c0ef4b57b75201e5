#!/bin/sh
# make compat: NVIDIA's cuda-samples self-checking programs (tools/compat/
# samples.txt), each built with `nvcc -cudart shared` and run natively, then
# under unstall; one row each: exit status and the program's own verdict both
# ways, wall time both ways, and the shim's findings by rule (fixed/observed).
# Any difference in outcome is a failure (exit 1). Needs a GPU, nvcc and a
# checkout of https://github.com/NVIDIA/cuda-samples (not vendored).
#
# Usage: CUDA_SAMPLES=/path/to/cuda-samples tools/compat/run.sh [BUILD_DIR]
# Environment: COMPAT_OUT (BUILD_DIR/compat), COMPAT_JOBS (build jobs, nproc),
#              COMPAT_TIMEOUT (seconds a run, 120), COMPAT_LIST (samples.txt),
#              COMPAT_ONLY (space-separated sample names to run, default all)
build=$(cd "${1:-build}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
samples=${CUDA_SAMPLES:?set CUDA_SAMPLES to a checkout of NVIDIA/cuda-samples}
samples=$(cd "$samples" && pwd) || exit 1
out=${COMPAT_OUT:-$build/compat}
list=${COMPAT_LIST:-$here/samples.txt}
jobs=${COMPAT_JOBS:-$(nproc)}
limit=${COMPAT_TIMEOUT:-120}
cuda=${CUDA_HOME:-/usr/local/cuda}
shim=$build/libunstall.so
[ -f "$shim" ] || { echo "compat: missing $shim (make shim)"; exit 2; }
nvidia-smi -L >/dev/null 2>&1 || { echo "compat: no GPU here (nvidia-smi -L failed)"; exit 2; }
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')
mkdir -p "$out/bin"

# build: one line of samples.txt per job
grep -v '^#' "$list" | grep -v '^[[:space:]]*$' >"$out/list"
echo "compat: building $(wc -l <"$out/list") samples (sm_$cap, $jobs jobs)"
while IFS= read -r line; do
    name=$(basename "$(echo "$line" | cut -d'|' -f1 | xargs)")
    case " ${COMPAT_ONLY:-$name} " in *" $name "*) printf '%s\0' "$line" ;; esac
done <"$out/list" | xargs -0 -P "$jobs" -I{} sh "$here/build-one.sh" "$out" "$samples" "$cap" {}

# run: natively, then under the shim, in the sample's own directory
while IFS= read -r line; do
    path=$(echo "$line" | cut -d'|' -f1 | xargs)
    args=$(echo "$line" | cut -d'|' -f3)
    name=$(basename "$path")
    case " ${COMPAT_ONLY:-$name} " in *" $name "*) ;; *) continue ;; esac
    bin=$out/bin/$name
    [ -x "$bin" ] || { echo "$name build failed" >"$out/$name.row"; continue; }
    for mode in native unstall; do
        pre=""
        [ $mode = unstall ] && pre="LD_PRELOAD=$shim UNSTALL_REPORT=$out/$name.json"
        start=$(date +%s.%N)
        (cd "$samples/Samples/$path" && env $pre timeout -k 5 "$limit" "$bin" $args) \
            >"$out/$name.$mode.out" 2>"$out/$name.$mode.err" </dev/null
        rc=$?
        echo "$rc $(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$start" "$(date +%s.%N)")" \
            >"$out/$name.$mode.rc"
    done
    echo "  $name: native exit $(cut -d' ' -f1 "$out/$name.native.rc"), unstall exit $(cut -d' ' -f1 "$out/$name.unstall.rc")"
done <"$out/list"
python3 "$here/table.py" "$out" "$out/list"
