#!/bin/sh
# The launcher and the report as a new user meets them, on
# the simulated runtime: the scenario programs run as built, directly and
# under tools/unstall; native frames named with file:line where the program
# has debug information; a process that never used CUDA told apart from one
# whose runtime the shim cannot see; make install into a temporary prefix.
# Prints "PASS name" / "FAIL name: why" and "launcher: N passed, M failed".
# Usage: tests/launcher/run.sh BUILD_DIR [fake|gpu]
# gpu (make gpu-test): the report's frames and the no-call cases over the real
# runtime and driver, with the shared and the static runtime.
build=$(cd "${1:-build}" && pwd) || exit 1
target=${2:-fake}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
shim=$build/libunstall.so
fake=$build/fakecuda
work=$build/launcher-tests
# a sanitized build (tests/sanitize.sh) needs its sanitizer's runtime first in
# LD_PRELOAD (SAN_PRELOAD) and its flags on the test programs (SAN_CFLAGS)
preload="${SAN_PRELOAD:+$SAN_PRELOAD }$shim"
rm -rf "$work"; mkdir -p "$work"
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
# one field of a JSON file, by a Python expression over r
json_field() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>&1; }

cc_prog() { # out, sources and flags...
    out=$1; shift
    ${CC:-gcc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror $SAN_CFLAGS -I"$cuda/include" -o "$out" "$@" || exit 1
}

if [ "$target" = gpu ]; then
    call_line=$(grep -n 'THE CALL' "$here/prog_srcline.c" | cut -d: -f1)
    cc_prog "$work/prog_srcline" -O1 -g "$here/prog_srcline.c" -L"$cuda/lib64" -lcudart -Wl,-rpath,"$cuda/lib64"
    cc_prog "$work/prog_srcline_static" -O1 -g "$here/prog_srcline.c" -L"$cuda/lib64" -L"$cuda/lib64/stubs" \
        -lcudart_static -lcuda -ldl -lrt -pthread
    cc_prog "$work/prog_idle" "$here/prog_idle.c" -ldl
    UNSTALL_REPORT="$work/gpu_shared.json" LD_PRELOAD="$preload" "$work/prog_srcline" >"$work/gpu_shared.out" 2>&1
    got=$(json_field "$work/gpu_shared.json" 'r["findings"][0]["site"]["native"][0]')
    if ldconfig -p 2>/dev/null | grep -q 'libdw\.so\.1 ' ||
        ls $(echo "${LD_LIBRARY_PATH:-}" | tr ':' ' ') 2>/dev/null | grep -q '^libdw\.so\.1$'; then
        case "$got" in
            "prog_srcline!main+0x"*" (prog_srcline.c:$call_line)") pass gpu_frame_names_file_and_line ;;
            *) fail gpu_frame_names_file_and_line "line $call_line expected: $got" ;;
        esac
    else # no libdw here: the frame keeps its old form, which is what the report promises
        case "$got" in
            "prog_srcline"*"+0x"*) echo "SKIP gpu_frame_names_file_and_line: no libdw.so.1 on this machine (got $got)" ;;
            *) fail gpu_frame_names_file_and_line "without libdw, expected prog_srcline+0x...: $got" ;;
        esac
    fi
    # a static runtime: seen through the driver layer; with the layer off,
    # told that it links the runtime statically
    UNSTALL_REPORT="$work/gpu_static.json" LD_PRELOAD="$preload" "$work/prog_srcline_static" >"$work/gpu_static.out" 2>&1
    got=$(json_field "$work/gpu_static.json" '"seen" if r["cuda"] == "runtime" and r["driver_layer"] else r["cuda"]')
    if [ "$got" = seen ]; then pass gpu_static_runtime_seen_by_driver_layer
    else fail gpu_static_runtime_seen_by_driver_layer "cuda: $got"; fi
    UNSTALL_REPORT="$work/gpu_static_off.json" UNSTALL_DRIVER_LAYER=0 LD_PRELOAD="$preload" "$work/prog_srcline_static" \
        >"$work/gpu_static_off.out" 2>&1
    got=$(json_field "$work/gpu_static_off.json" 'r["cuda"]')
    said=$(grep -o 'unstall saw no CUDA runtime call[^:;]*' "$work/gpu_static_off.out")
    if [ "$got" = driver_without_runtime ]; then pass "gpu_static_runtime_is_told_static ($said)"
    else fail gpu_static_runtime_is_told_static "cuda: $got; $said"; fi
    UNSTALL_REPORT="$work/gpu_idle.json" LD_PRELOAD="$preload" \
        "$work/prog_idle" "$cuda/lib64/libcudart.so" libcuda.so.1 >"$work/gpu_idle.out" 2>&1
    got=$(json_field "$work/gpu_idle.json" 'r["cuda"]')
    if [ "$got" = runtime_not_called ]; then pass gpu_idle_runtime_is_not_told_static
    else fail gpu_idle_runtime_is_not_told_static "cuda: $got; $(cat "$work/gpu_idle.out")"; fi
    echo "launcher: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit
fi

export SCN_QUICK=1 FAKECUDA_TIME_SCALE=1

# --- the scenario programs find the simulated runtime as built ----------------
# (the toolkit's libcudart may be in the loader's cache: without a RUNPATH
# they took it and failed with "CUDA driver version is insufficient")
out=$(env -u LD_LIBRARY_PATH "$build/scenarios/case_b_pageable_h2d" held_small 2>&1)
case "$out" in
    *"RESULT case=B test=held_small"*" ok=1"*) pass scenario_runs_directly ;;
    *) fail scenario_runs_directly "$(printf '%s' "$out" | tail -2)" ;;
esac
if [ "${TEST_SANITIZER:-}" = tsan ]; then
    # the launcher is a shell script: TSan's runtime cannot be preloaded into it
    echo "SKIP scenario_runs_under_launcher: not under TSan"
else
    out=$(env -u LD_LIBRARY_PATH ${SAN_PRELOAD:+LD_PRELOAD="$SAN_PRELOAD"} "$root/tools/unstall" --lib "$shim" \
        "$build/scenarios/case_b_pageable_h2d" held_small 2>&1)
    case "$out" in
        *"RESULT case=B test=held_small"*" ok=1"*"unstall report"*) pass scenario_runs_under_launcher ;;
        *) fail scenario_runs_under_launcher "$(printf '%s' "$out" | tail -2)" ;;
    esac
fi
if [ "${TEST_SANITIZER:-}" != tsan ]; then
    # --legacy-stream: case E's legacy work no longer waits for the blocking stream
    out=$(env -u LD_LIBRARY_PATH ${SAN_PRELOAD:+LD_PRELOAD="$SAN_PRELOAD"} SCN_E_KERNEL_MS=100 "$root/tools/unstall" \
        --lib "$shim" --legacy-stream ordered "$build/scenarios/case_e_legacy" legacy 2>&1)
    done_ms=$(printf '%s\n' "$out" | sed -n 's/.*test=legacy .*legacy_done_ms=\([0-9.]*\).* ok=1.*/\1/p')
    if [ -n "$done_ms" ] && [ "${done_ms%%.*}" -lt 50 ]; then pass launcher_legacy_stream_flag
    else fail launcher_legacy_stream_flag "legacy_done_ms=${done_ms:-none}: $(printf '%s' "$out" | grep RESULT)"; fi
fi
# a library path LD_PRELOAD cannot hold (space, colon) is refused, not
# silently left out of the program
mkdir -p "$work/a b" && cp "$shim" "$work/a b/libunstall.so"
out=$("$root/tools/unstall" --lib "$work/a b/libunstall.so" true 2>&1); rc=$?
case "$rc:$out" in
    "2:"*"LD_PRELOAD splits paths at spaces and colons"*) pass launcher_refuses_unpreloadable_path ;;
    *) fail launcher_refuses_unpreloadable_path "exit $rc: $out" ;;
esac

# --- native frames with file:line where the program has debug information ----
call_line=$(grep -n 'THE CALL' "$here/prog_srcline.c" | cut -d: -f1)
cc_prog "$work/prog_srcline" -O1 -g "$here/prog_srcline.c" -L"$fake" -lcudart -Wl,-rpath,"$fake"
mkdir -p "$work/stripped"
cc_prog "$work/stripped/prog_srcline" -O1 -g0 -s "$here/prog_srcline.c" -L"$fake" -lcudart -Wl,-rpath,"$fake"
# the innermost frame of the first finding (pageable_h2d): its text and its source
innermost() { # report.json -> "native text|file:line" of the first finding's first frame
    json_field "$1" '(lambda f: f["site"]["native"][0] + "|" + ("%s:%d" % (f["site"]["native_src"][0]["file"], f["site"]["native_src"][0]["line"]) if f["site"].get("native_src", [None])[0] else "none"))(r["findings"][0])'
}
UNSTALL_REPORT="$work/debug.json" LD_PRELOAD="$preload" "$work/prog_srcline" >"$work/debug.out" 2>&1
got=$(innermost "$work/debug.json")
case "$got" in
    "prog_srcline!main+0x"*" (prog_srcline.c:$call_line)|"*"/tests/launcher/prog_srcline.c:$call_line")
        if grep -q "at prog_srcline!main+0x[0-9a-f]* (prog_srcline.c:$call_line)" "$work/debug.out"; then
            pass frame_names_file_and_line
        else fail frame_names_file_and_line "the text report lacks it: $(grep ' at ' "$work/debug.out" | head -2)"; fi ;;
    *) fail frame_names_file_and_line "line $call_line expected: $got" ;;
esac
UNSTALL_REPORT="$work/stripped.json" LD_PRELOAD="$preload" "$work/stripped/prog_srcline" >"$work/stripped.out" 2>&1
got=$(innermost "$work/stripped.json")
if printf '%s' "$got" | grep -Eq '^prog_srcline\+0x[0-9a-f]+\|none$'; then pass frame_without_debug_info_as_before
else fail frame_without_debug_info_as_before "$got"; fi

# ... and a frame without local debug information asks no debuginfod server
# (DEBUGINFOD_URLS, set by Ubuntu's login shells): no download at exit
python3 - "$work/debuginfod" <<'PY' &
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8); s.settimeout(0.2)
open(sys.argv[1] + ".port", "w").write(str(s.getsockname()[1]))
asked, end = 0, time.time() + 20
while time.time() < end and not __import__("os").path.exists(sys.argv[1] + ".stop"):
    try:
        c, _ = s.accept(); asked += 1; c.close()
    except OSError:
        pass
open(sys.argv[1] + ".asked", "w").write(str(asked))
PY
server=$!
for i in 1 2 3 4 5 6 7 8 9 10; do [ -f "$work/debuginfod.port" ] && break; sleep 0.2; done
DEBUGINFOD_URLS="http://127.0.0.1:$(cat "$work/debuginfod.port" 2>/dev/null)" DEBUGINFOD_TIMEOUT=2 \
    UNSTALL_REPORT="$work/nodownload.json" LD_PRELOAD="$preload" "$work/stripped/prog_srcline" >/dev/null 2>&1
touch "$work/debuginfod.stop"; wait $server
asked=$(cat "$work/debuginfod.asked" 2>/dev/null)
if [ "$asked" = 0 ]; then pass no_debuginfod_download_at_exit
else fail no_debuginfod_download_at_exit "the debuginfod server was asked ${asked:-?} times"; fi

# --- a process that made no CUDA call, told apart from one unstall cannot see -
cc_prog "$work/prog_idle" "$here/prog_idle.c" -ldl
# the runtime and the driver loaded, nothing called (torchrun after import torch)
UNSTALL_REPORT="$work/idle_runtime.json" LD_PRELOAD="$preload" \
    "$work/prog_idle" "$fake/libcudart.so.13" "$fake/libcuda.so.1" >"$work/idle_runtime.out" 2>&1
got=$(json_field "$work/idle_runtime.json" 'r.get("cuda")')
if [ "$got" = runtime_not_called ] && grep -q "loaded the CUDA runtime (libcudart.so.13) but called none of it" \
    "$work/idle_runtime.out" && ! grep -q "statically" "$work/idle_runtime.out"; then
    pass idle_runtime_is_not_told_static
else fail idle_runtime_is_not_told_static "cuda: $got; $(grep unstall "$work/idle_runtime.out" | sed -n 2p)"; fi
# one version string: the VERSION file's, the launcher's and the library's
# (its JSON report)
want=$(cat "$root/VERSION")
got_report=$(json_field "$work/idle_runtime.json" 'r.get("unstall_version")')
got_launcher=$("$root/tools/unstall" --lib "$shim" --version 2>&1 | head -1)
case "$got_launcher" in
    "unstall $want"|"unstall $want (commit "*)
        if [ -n "$want" ] && [ "$got_report" = "$want" ]; then pass one_version
        else fail one_version "VERSION $want, the report's $got_report"; fi ;;
    *) fail one_version "VERSION $want, the launcher's: $got_launcher" ;;
esac
# the driver alone: a static runtime or the driver API, or nothing; unstall
# cannot tell which without the NVIDIA device files
UNSTALL_REPORT="$work/idle_driver.json" LD_PRELOAD="$preload" \
    "$work/prog_idle" "$fake/libcuda.so.1" >"$work/idle_driver.out" 2>&1
got=$(json_field "$work/idle_driver.json" 'r.get("cuda")')
if [ "$got" = driver_without_runtime ] && grep -q "libcuda.so.1 is loaded but no libcudart" "$work/idle_driver.out" &&
    grep -q "statically" "$work/idle_driver.out"; then
    pass driver_without_runtime_is_told_static
else fail driver_without_runtime_is_told_static "cuda: $got; $(grep unstall "$work/idle_driver.out" | sed -n 2p)"; fi


# --- make install into a temporary prefix, the installed launcher at work -----
# (not under a sanitizer: the installed library is the build's, and the
# sanitizer's runtime would have to be preloaded into make and python too)
if [ -n "${TEST_SANITIZER:-}" ]; then
    echo "launcher: make install left to the plain run (TEST_SANITIZER=$TEST_SANITIZER)"
else
    # a prefix LD_PRELOAD could not name is refused
    if make --no-print-directory -s -C "$root" install BUILD="$build" PREFIX="$work/prefix b" >"$work/install.out" 2>&1 ||
        [ -e "$work/prefix b" ]; then fail install_refuses_unpreloadable_prefix "$(tail -2 "$work/install.out")"
    else pass install_refuses_unpreloadable_prefix; fi
    prefix="$work/prefix"
    if make --no-print-directory -s -C "$root" install BUILD="$build" PREFIX="$prefix" >"$work/install.out" 2>&1; then
        missing=""
        for f in bin/unstall bin/unstall-report bin/unstall-compare bin/p2pcheck lib/libunstall.so \
            share/unstall/config/strict.conf share/unstall/config/pytorch.conf share/unstall/config/unstall.conf \
            share/unstall/python/sitecustomize.py share/unstall/python/unstall_pin_dataloader.py; do
            [ -f "$prefix/$f" ] || missing="$missing $f"
        done
        if [ -z "$missing" ]; then pass install_puts_every_file; else fail install_puts_every_file "missing:$missing"; fi
    else
        fail install_puts_every_file "make install failed: $(tail -3 "$work/install.out")"
    fi
    # the installed launcher names the installed library and a version, from
    # anywhere (no checkout around it)
    out=$(cd / && "$prefix/bin/unstall" --version 2>&1)
    case "$out" in
        *"version unknown"*) fail installed_launcher_finds_its_library "$out" ;;
        "unstall "*"library: $prefix/lib/libunstall.so") pass installed_launcher_finds_its_library ;;
        *) fail installed_launcher_finds_its_library "$out" ;;
    esac
    # ... whose library captures call sites with an unwinder as the system
    # ships it (libunwind.so.8, else libgcc_s): nothing installed beside it
    out=$(cd / && env -u LD_LIBRARY_PATH UNSTALL_LOG_LEVEL=info "$prefix/bin/unstall" \
        "$build/scenarios/case_b_pageable_h2d" held_small 2>&1)
    case "$out" in
        *"captured with libunwind (libunwind.so.8)"* | *"captured with libgcc_s's _Unwind_Backtrace"*)
            if [ -e "$prefix/lib/unstall" ]; then fail installed_library_uses_the_system_unwinder "lib/unstall installed"
            else pass installed_library_uses_the_system_unwinder; fi ;;
        *) fail installed_library_uses_the_system_unwinder "$(printf '%s' "$out" | grep -i -e unwind -e backtrace | head -2)" ;;
    esac
    # ... runs a simulated-runtime program with a profile and a JSON report,
    # which the installed report tool renders
    out=$(cd / && env -u LD_LIBRARY_PATH "$prefix/bin/unstall" --profile pytorch --report "$work/installed.json" \
        "$build/scenarios/case_b_pageable_h2d" held_small 2>&1)
    rendered=$("$prefix/bin/unstall-report" "$work/installed.json" 2>&1)
    case "$out|$rendered" in
        *"RESULT case=B test=held_small"*" ok=1"*"unstall report"*"|"*"unstall report: 1 process"*) pass installed_launcher_runs ;;
        *) fail installed_launcher_runs "$(printf '%s' "$out|$rendered" | tail -3)" ;;
    esac
    # ... puts the installed sitecustomize first on PYTHONPATH for --pin-dataloader
    # (what it does there: tests/pin_dataloader)
    out=$(cd / && PYTHONPATH=/elsewhere "$prefix/bin/unstall" --pin-dataloader sh -c 'echo "$PYTHONPATH"' 2>&1)
    if [ "$out" = "$prefix/share/unstall/python:/elsewhere" ]; then pass installed_launcher_pin_dataloader_path
    else fail installed_launcher_pin_dataloader_path "PYTHONPATH=$out"; fi
    out=$(cd / && env -u LD_LIBRARY_PATH "$prefix/bin/unstall" --compare -- "$build/scenarios/case_b_pageable_h2d" held_small 2>&1)
    case "$out" in
        *"what unstall saw and changed"*pageable_h2d*) pass installed_compare_runs ;;
        *) fail installed_compare_runs "$(printf '%s' "$out" | tail -3)" ;;
    esac
    out=$("$prefix/bin/p2pcheck" --json 2>&1)
    case "$out" in
        *"make p2pcheck"*) [ -x "$prefix/libexec/unstall/p2pcheck-probe" ] &&
            fail installed_p2pcheck_finds_its_probe "$out" || pass "installed_p2pcheck_finds_its_probe (no probe built here)" ;;
        *) pass installed_p2pcheck_finds_its_probe ;;
    esac
    make --no-print-directory -s -C "$root" uninstall BUILD="$build" PREFIX="$prefix" >"$work/uninstall.out" 2>&1
    left=$(find "$prefix" -type f 2>/dev/null)
    if [ -z "$left" ]; then pass uninstall_removes_every_file; else fail uninstall_removes_every_file "left: $left"; fi
fi

echo "launcher: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
