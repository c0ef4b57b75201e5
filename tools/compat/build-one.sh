#!/bin/sh
# One line of samples.txt -> OUT/bin/<name> (tools/compat/run.sh runs this in
# parallel). Usage: build-one.sh OUT CUDA_SAMPLES SM "line"
out=$1 samples=$2 sm=$3 line=$4
path=$(echo "$line" | cut -d'|' -f1 | xargs)
flags=$(echo "$line" | cut -d'|' -f2 | sed "s|@COMMON@|$samples/Common|g")
name=$(basename "$path")
dir=$samples/Samples/$path
srcs=$(ls "$dir"/*.cu "$dir"/*.cpp 2>/dev/null)
"${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" -O2 -std=c++17 -arch=sm_$sm -cudart shared \
    -I"$samples/Common" -I"$dir" $srcs -o "$out/bin/$name" -lcuda $flags >"$out/bin/$name.build.log" 2>&1 ||
    rm -f "$out/bin/$name"
