#!/bin/sh
# Programs as the shim meets them at either layer, in the primary context
# and in a context of their own (cuCtxCreate), natively and under the shim:
#   ctx_copies         runtime API, dynamic runtime (-lcudart)
#   ctx_copies_static  the same source with the runtime linked in (fake:
#                      libcudart_static.a; gpu: -lcudart_static, and
#                      ctx_copies_nvcc built with plain nvcc, whose default it
#                      is): it reaches libcuda only through dlopen +
#                      cuGetProcAddress
#   drv_copies         driver API only: dlopen libcuda.so.1, cuGetProcAddress
#   drv_copies_linked  the same program linked against libcuda (-lcuda), calling
#                      the driver's exported functions directly
#                      ("driver": the 4-argument form, flags 0) or the static
#                      runtime's sequence ("static": cuGetProcAddress_v2, then
#                      through itself, each copy function with the legacy and
#                      the per-thread flag)
#   ctx_switch         runtime API (-lcudart): "switch" takes turns between the
#                      primary context and a created one with copies of both
#                      in flight; "recreate" destroys a created context after
#                      its copies and makes a new one (fake: at the same
#                      address, FAKECUDA_CTX_REUSE=1) three times
# Every byte right, no error, the current context left alone; under the shim
# the JSON report names the API the program's copies went through (the
# runtime's for ctx_copies and nothing below it, the driver's otherwise),
# rewritten in the primary context and in a created one; strict mode
# refuses a pageable copy of drv_copies; UNSTALL_DRIVER_LAYER=0 leaves the
# driver-only programs as they are natively (no CUDA call reaches the shim).
# Fake only: safety runs (a program without CUDA, a second preload, two
# runtimes, graph capture) and the scenario programs A-E linked with the
# runtime inside, through tests/scenarios/run.sh.
# Prints "PASS name" / "FAIL name: why" and "driver: N passed, M failed".
#
# Usage: tests/driver/run.sh [BUILD_DIR] [fake|gpu]   (make shim fakecuda)
# gpu: the same programs over the real runtime and driver (make gpu-test).
build=$(cd "${1:-build}" && pwd) || exit 1
target=${2:-fake}
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
fake=$build/fakecuda
preload="${SAN_PRELOAD:+$SAN_PRELOAD }$build/libunstall.so"
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

work=$(mktemp -d "$build/driver-tests.XXXXXX") || exit 1
cc_flags="-std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror $SAN_CFLAGS -I$cuda/include"
if [ "$target" = gpu ]; then
    # the real libcuda comes with the driver; the toolkit's stub is for linking only
    ${CC:-gcc} $cc_flags -o "$work/ctx_copies" "$here/ctx_copies.c" -L"$cuda/lib64" -L"$cuda/lib64/stubs" \
        -lcudart -lcuda -Wl,-rpath,"$cuda/lib64" &&
        ${CC:-gcc} $cc_flags -o "$work/ctx_copies_static" "$here/ctx_copies.c" -L"$cuda/lib64" -L"$cuda/lib64/stubs" \
            -lcudart_static -lcuda -ldl -lrt -pthread &&
        ${CC:-gcc} $cc_flags -o "$work/drv_copies" "$here/drv_copies.c" -ldl &&
        ${CC:-gcc} $cc_flags -DDRV_LINKED -o "$work/drv_copies_linked" "$here/drv_copies.c" -L"$cuda/lib64/stubs" \
            -ldl -lcuda &&
        ${CC:-gcc} $cc_flags -o "$work/ctx_switch" "$here/ctx_switch.c" -L"$cuda/lib64" -L"$cuda/lib64/stubs" \
            -lcudart -lcuda -Wl,-rpath,"$cuda/lib64" &&
        ${CC:-gcc} $cc_flags -o "$work/pin_unseen" "$here/pin_unseen.c" -L"$cuda/lib64" -L"$cuda/lib64/stubs" \
            -lcudart -lcuda -Wl,-rpath,"$cuda/lib64" &&
        # as a user builds it: plain nvcc, whose default is the static runtime
        ${NVCC:-$cuda/bin/nvcc} -O1 -o "$work/ctx_copies_nvcc" "$here/ctx_copies.c" -L"$cuda/lib64/stubs" -lcuda ||
        built=no
    devices=$(nvidia-smi -L 2>/dev/null | wc -l)
else
    ${CC:-gcc} $cc_flags -o "$work/ctx_copies" "$here/ctx_copies.c" -L"$fake" -lcudart -l:libcuda.so.1 -Wl,-rpath,"$fake" &&
        ${CC:-gcc} $cc_flags -o "$work/ctx_copies_static" "$here/ctx_copies.c" "$fake/libcudart_static.a" -L"$fake" \
            -l:libcuda.so.1 -ldl -pthread -Wl,-rpath,"$fake" &&
        ${CC:-gcc} $cc_flags -o "$work/drv_copies" "$here/drv_copies.c" -ldl -Wl,-rpath,"$fake" &&
        ${CC:-gcc} $cc_flags -DDRV_LINKED -o "$work/drv_copies_linked" "$here/drv_copies.c" -ldl -L"$fake" \
            -l:libcuda.so.1 -Wl,-rpath,"$fake" &&
        ${CC:-gcc} $cc_flags -o "$work/ctx_switch" "$here/ctx_switch.c" -L"$fake" -lcudart -l:libcuda.so.1 -Wl,-rpath,"$fake" &&
        ${CC:-gcc} $cc_flags -o "$work/pin_unseen" "$here/pin_unseen.c" -L"$fake" -lcudart -l:libcuda.so.1 -Wl,-rpath,"$fake" ||
        built=no
    export FAKECUDA_DEVICES=2
    devices=2
fi
[ "${built:-yes}" = yes ] || { echo "FAIL build"; echo "driver: 0 passed, 1 failed"; exit 1; }
# drv_copies links nothing of CUDA: its dlopen("libcuda.so.1") finds the simulated driver here
[ "$target" = gpu ] || export LD_LIBRARY_PATH="$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

export UNSTALL_CHUNK_BYTES=256k UNSTALL_SLOTS=4
export UNSTALL_PEER_MIN_BYTES=0 UNSTALL_PEER_IDLE_NATIVE_BYTES=0 UNSTALL_H2D_MIN_BYTES=0 UNSTALL_H2D_IDLE_NATIVE_BYTES=0 UNSTALL_D2H_MIN_BYTES=0
export UNSTALL_MODE=report UNSTALL_LOG_LEVEL=info

# name, expected last line, then env assignments, then the program and its arguments
run() {
    name=$1 want=$2; shift 2
    out=$work/$name.out
    if env "$@" >"$out" 2>&1 && [ "$(tail -1 "$out")" = "$want" ]; then
        return 0
    fi
    fail "$name" "$(tail -3 "$out" | tr '\n' ' ')"
    return 1
}
# name, then check_report.py's arguments after the report
check() {
    name=$1; shift
    if why=$(python3 "$here/check_report.py" "$work/$name.json" "$@"); then
        pass "$name"
    else
        fail "$name" "$(echo "$why" | tr '\n' ' ')"
    fi
}

for where in primary created; do
    # fixed in the primary context and in a created one (docs/architecture.md, "Contexts")
    how=fixed
    peer=
    [ "$devices" -gt 1 ] && peer=yes

    name=ctx_copies-native-$where
    run "$name" ok "$work/ctx_copies" "$where" && pass "$name"
    name=ctx_copies-shim-$where
    run "$name" ok LD_PRELOAD="$preload" UNSTALL_REPORT="$work/$name.json" "$work/ctx_copies" "$where" &&
        check "$name" --require "pageable_d2h:cudaMemcpy:$how" --require "pageable_d2h:cudaMemcpyAsync:$how" \
            ${peer:+--require "staged_peer:cudaMemcpyPeerAsync:$how"} --only-prefix cuda --driver-layer no

    for prog in ctx_copies_static ctx_copies_nvcc; do
        [ -x "$work/$prog" ] || continue
        name=$prog-native-$where
        run "$name" ok "$work/$prog" "$where" && pass "$name"
        name=$prog-shim-$where
        run "$name" ok LD_PRELOAD="$preload" UNSTALL_REPORT="$work/$name.json" "$work/$prog" "$where" &&
            check "$name" --require "pageable_d2h:cuMemcpyDtoH_v2:$how" --require "pageable_d2h:cuMemcpyDtoHAsync_v2:$how" \
                --require "pageable_h2d:cuMemcpyHtoDAsync_v2:$how" ${peer:+--require "staged_peer:cuMemcpyPeerAsync:$how"}
    done

    for style in driver static linked; do
        prog="$work/drv_copies $style $where"
        [ "$style" = linked ] && prog="$work/drv_copies_linked $style $where"
        name=drv_copies-$style-native-$where
        run "$name" ok $prog && pass "$name"
        name=drv_copies-$style-shim-$where
        run "$name" ok LD_PRELOAD="$preload" UNSTALL_REPORT="$work/$name.json" $prog &&
            check "$name" --require "pageable_h2d:cuMemcpyHtoD_v2:$how" --require "pageable_d2h:cuMemcpyDtoH_v2:$how" \
                --require "pageable_h2d:cuMemcpyHtoD_v2_ptds:$how" --require "pageable_d2h:cuMemcpyDtoH_v2_ptds:$how" \
                --require "pageable_d2h:cuMemcpyDtoHAsync_v2:$how" --require "pageable_d2h:cuMemcpyDtoHAsync_v2_ptsz:$how" \
                --require "pageable_h2d:cuMemcpyHtoDAsync_v2_ptsz:$how" --require "pageable_d2h:cuMemcpyAsync:$how" \
                ${peer:+--require "staged_peer:cuMemcpyPeerAsync:$how" --require "staged_peer:cuMemcpyPeer:$how"} \
                --require explicit_sync:cuCtxSynchronize_v2 --only-prefix cu --driver-layer yes
        if [ -n "$peer" ] && [ "$where" = primary ]; then
            # peer access enabled through the driver (a static runtime's
            # cudaDeviceEnablePeerAccess): the peer copies go direct, untouched
            name=drv_copies-$style-peer-enabled
            run "$name" ok LD_PRELOAD="$preload" UNSTALL_REPORT="$work/$name.json" ${prog% *} primary peer &&
                check "$name" --forbid staged_peer --require "pageable_d2h:cuMemcpyDtoH_v2:fixed" --driver-layer yes
        fi
        name=drv_copies-$style-strict-$where
        run "$name" refused LD_PRELOAD="$preload" UNSTALL_MODE=strict $prog strict && pass "$name"
        name=drv_copies-$style-layer-off-$where
        run "$name" ok LD_PRELOAD="$preload" UNSTALL_DRIVER_LAYER=0 UNSTALL_REPORT="$work/$name.json" $prog &&
            check "$name" --none --driver-layer no
    done
done

# Contexts taking turns, and destroyed and made again (the fake reuses the
# address: a resource of the old context found by the handle alone would be
# used in the new one); every pageable and peer copy rewritten
peer=
[ "$devices" -gt 1 ] && peer=yes
name=ctx_switch-native
run "$name" ok "$work/ctx_switch" switch && pass "$name"
name=ctx_switch-shim
run "$name" ok LD_PRELOAD="$preload" UNSTALL_REPORT="$work/$name.json" "$work/ctx_switch" switch &&
    check "$name" --fixed-at-least pageable_h2d:cudaMemcpyAsync:6 --fixed-at-least pageable_d2h:cudaMemcpyAsync:8 \
        --fixed-at-least pageable_h2d:cudaMemcpy:4 --fixed-at-least pageable_d2h:cudaMemcpy:4
# the context cuStreamGetCtx names, natively (the GPU's answers, which the
# simulated driver must give too) and under the shim, whose pipelines ask it
name=stream_ctx-native
run "$name" ok "$work/ctx_switch" stream_ctx && pass "$name"
name=stream_ctx-shim
run "$name" ok LD_PRELOAD="$preload" UNSTALL_REPORT="$work/$name.json" "$work/ctx_switch" stream_ctx &&
    check "$name" --require pageable_d2h:cudaMemcpyAsync:fixed
name=ctx_recreate-native
run "$name" ok FAKECUDA_CTX_REUSE=1 "$work/ctx_switch" recreate && pass "$name"
name=ctx_recreate-shim
if run "$name" ok FAKECUDA_CTX_REUSE=1 LD_PRELOAD="$preload" UNSTALL_REPORT="$work/$name.json" \
    "$work/ctx_switch" recreate; then
    if [ "$target" = fake ] && ! grep -q "^reused 2$" "$work/$name.out"; then
        fail "$name" "the simulated driver did not reuse the context's address: $(grep reused "$work/$name.out")"
    else
        check "$name" --fixed-at-least pageable_h2d:cudaMemcpyAsync:2 --fixed-at-least pageable_d2h:cudaMemcpyAsync:3 \
            --fixed-at-least pageable_h2d:cudaMemcpy:3 --fixed-at-least pageable_d2h:cudaMemcpy:3 \
            ${peer:+--fixed-at-least staged_peer:cudaMemcpyPeerAsync:6}
    fi
fi
# the case E remedy's per-context stream: made in each new context, never the
# destroyed one's (at the same address)
for mode in ordered per_thread; do
    name=ctx_recreate-legacy-$mode
    run "$name" ok FAKECUDA_CTX_REUSE=1 LD_PRELOAD="$preload" UNSTALL_LEGACY_STREAM=$mode "$work/ctx_switch" recreate &&
        pass "$name"
done

# Memory met as pageable, then registered through the driver: the next D2H
# into it returns while its stream is held, as a D2H into pinned memory does,
# whether the shim saw the registration (the layer on) or had to find out
# from the runtime (the layer off: said once); shim/model/hostpages.h
name=pin_unseen-native
run "$name" ok "$work/pin_unseen" && pass "$name"
name=pin_unseen-shim
run "$name" ok LD_PRELOAD="$preload" UNSTALL_REPORT="$work/$name.json" "$work/pin_unseen" &&
    if grep -q "by a call the shim did not see" "$work/$name.out"; then
        fail "$name" "the driver layer did not see the registration"
    else
        check "$name" --require pageable_d2h:cudaMemcpyAsync:fixed
    fi
name=pin_unseen-layer-off
run "$name" ok LD_PRELOAD="$preload" UNSTALL_DRIVER_LAYER=0 UNSTALL_REPORT="$work/$name.json" "$work/pin_unseen" &&
    if grep -q "by a call the shim did not see" "$work/$name.out"; then
        check "$name" --require pageable_d2h:cudaMemcpyAsync:fixed
    else
        fail "$name" "no line says the remembered page was found pinned"
    fi

# Safety: a program that never uses CUDA, under the shim and a second
# preload that finds its puts with dlsym(RTLD_NEXT) (the shim's dlsym must
# answer relative to the caller)
${CC:-gcc} $cc_flags -shared -fPIC -o "$work/next_puts.so" "$here/next_puts.c" -ldl &&
    ${CC:-gcc} $cc_flags -o "$work/no_cuda" "$here/no_cuda.c" -ldl -lm &&
    run no-cuda-next-preload ok LD_PRELOAD="$preload $work/next_puts.so" "$work/no_cuda" && pass no-cuda-next-preload
if [ "$target" = fake ]; then
    # a dynamic runtime beside the program's own driver calls: the shim works
    # with it and loads none of its own
    name=drv_copies-with-dynamic-runtime
    run "$name" ok LD_PRELOAD="$preload $fake/libcudart.so.13" UNSTALL_REPORT="$work/$name.json" \
        "$work/drv_copies" static primary &&
        if grep -q "for the shim's own work" "$work/$name.out"; then
            fail "$name" "loaded a runtime of its own beside the program's"
        else
            check "$name" --require pageable_d2h:cuMemcpyDtoHAsync_v2:fixed
        fi
    # a copy the dynamic runtime makes inside its own call that the runtime
    # layer did not take (cudaMemcpyAsync taken from libcudart with dlsym):
    # native at the driver layer, no finding, said once
    name=runtime-inner-copy
    ${CC:-gcc} $cc_flags -o "$work/rt_inner" "$here/rt_inner.c" -ldl &&
        run "$name" ok LD_PRELOAD="$preload" UNSTALL_REPORT="$work/$name.json" "$work/rt_inner" "$fake/libcudart.so.13" &&
        if grep -q "inside one of its own calls" "$work/$name.out"; then
            check "$name" --forbid pageable_d2h --forbid pageable_h2d
        else
            fail "$name" "no line says the runtime's inner copy went native"
        fi
    # graph capture through the driver layer: every outcome as native
    name=capture-static
    if ${CC:-gcc} $cc_flags -I"$here/../fakecuda" -o "$work/capture_static" "$here/../capture/capture_conform.c" \
        "$fake/libcudart_static.a" -L"$fake" -l:libcuda.so.1 -ldl -pthread -Wl,-rpath,"$fake"; then
        timeout -k 5 120 "$work/capture_static" >"$work/$name-native.out" 2>&1
        env LD_PRELOAD="$preload" timeout -k 5 120 "$work/capture_static" >"$work/$name-shim.out" 2>"$work/$name-shim.err"
        if [ -s "$work/$name-native.out" ] && cmp -s "$work/$name-native.out" "$work/$name-shim.out" &&
            grep -q "captured into a graph goes native" "$work/$name-shim.err"; then
            pass "$name"
        else
            fail "$name" "$(diff "$work/$name-native.out" "$work/$name-shim.out" | head -3 | tr '\n' ' ')"
        fi
    else
        fail "$name" "does not build"
    fi
fi

if [ "$target" = fake ]; then
    # the scenario programs A-E with the runtime linked in: every check of
    # tests/scenarios (data, and the stalls the shim removes) through the
    # driver layer
    name=scenarios-static
    mkdir -p "$work/scenarios"
    common=$(ls "$here"/../scenarios/*.c | grep -v -e /case_ -e /kernels)
    built=yes
    for src in "$here"/../scenarios/case_*.c; do
        ${CC:-gcc} $cc_flags -I"$here/../scenarios" -o "$work/scenarios/$(basename "$src" .c)" "$src" $common \
            "$here/../scenarios/kernels_fake.c" "$fake/libcudart_static.a" -L"$fake" -l:libcuda.so.1 -ldl -pthread -lm \
            -Wl,-rpath,"$fake" || built=
    done
    if [ -z "$built" ]; then
        fail "$name" "does not build"
    # with the shim's defaults, as tests/scenarios runs them (not this suite's small slots);
    # case E's remedy moves no kernel launch at the driver layer (docs/findings.md)
    elif SCN_EXPECT_FIXED="${SCN_EXPECT_FIXED:-A.stall,A.call,B.held_small,B.held_large,C.launch_latency,C.deadlock,C.deadlock_1m}" \
        env -u UNSTALL_CHUNK_BYTES -u UNSTALL_SLOTS -u UNSTALL_PEER_MIN_BYTES -u UNSTALL_PEER_IDLE_NATIVE_BYTES -u UNSTALL_H2D_MIN_BYTES -u UNSTALL_H2D_IDLE_NATIVE_BYTES \
        -u UNSTALL_D2H_MIN_BYTES -u UNSTALL_MODE -u UNSTALL_LOG_LEVEL \
        SCN_BIN="$work/scenarios" SCN_OUT="$work/scenario-runs" SCN_MODES="${SCN_MODES:-native shim}" \
        sh "$here/../scenarios/run.sh" "$build" >"$work/$name.out" 2>&1; then
        pass "$name"
    else
        fail "$name" "$(grep -v '^PASS' "$work/$name.out" | head -3 | tr '\n' ' ')"
    fi
fi

echo "driver: $passed passed, $failed failed"
if [ "$failed" -eq 0 ]; then rm -rf "$work"; else echo "driver: outputs kept in $work"; fi
[ "$failed" -eq 0 ]
