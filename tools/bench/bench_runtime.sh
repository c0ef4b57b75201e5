# bench_runtime.sh - sourced by the bench scripts that build a program of
# tools/bench against the CUDA runtime: the GPU's where there is one, else the
# simulated one, whose figures mean nothing. One place for that choice and
# for the build line (smallcopy.sh, firstcall.sh, apicost.sh, probe.sh).
#
# bench_runtime NAME FAKECUDA_DIR
#     sets libdir (the runtime's folder) and where (what the figures come
#     from, for the table's head); exits 1 when there is no GPU and no
#     simulated runtime in FAKECUDA_DIR (NAME starts the message). Needs cuda.
# bench_build SRC BIN [ARG...]
#     compiles SRC into BIN against that runtime (ARGs: more link flags).

bench_runtime() { # name fakecuda_dir
    if nvidia-smi -L >/dev/null 2>&1; then
        libdir=$cuda/lib64 where="GPU: $(nvidia-smi -L | head -1)"
    else
        libdir=$2 where="simulated runtime (no GPU): figures mean nothing"
        [ -f "$libdir/libcudart.so.13" ] || { echo "$1: missing $libdir/libcudart.so.13 (make fakecuda)"; exit 1; }
    fi
}

bench_build() { # src bin [arg...]
    src=$1 bin_out=$2
    shift 2
    ${CC:-gcc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I"$cuda/include" "$src" -o "$bin_out" \
        -L"$libdir" -lcudart -Wl,-rpath,"$libdir" "$@"
}
