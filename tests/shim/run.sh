#!/bin/sh
# Preload tests of libunstall.so over the simulated runtime: how the library
# is built and exported, and how it loads into programs that bind the
# runtime's versioned names, that load it RTLD_LOCAL, or whose runtime lacks
# functions. Usage: tests/shim/run.sh BUILD_DIR
build=$(cd "${1:-build}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
shim=$build/libunstall.so
fake=$build/fakecuda
work=$build/shim-tests
# a sanitized build (tests/sanitize.sh) needs its sanitizer's runtime first in
# LD_PRELOAD (SAN_PRELOAD) and its flags on the test programs (SAN_CFLAGS)
preload="${SAN_PRELOAD:+$SAN_PRELOAD }$shim"
mkdir -p "$work"
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
cc_prog() { # out, sources and flags...
    out=$1; shift
    ${CC:-gcc} -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror $SAN_CFLAGS -I"$cuda/include" -o "$out" "$@" || exit 1
}

cc_prog "$work/prog_copies" "$here/prog_copies.c" -L"$fake" -lcudart
mkdir -p "$work/mini"
cc_prog "$work/mini/libcudart.so.13" -shared -fPIC "$here/mini_runtime.c" -Wl,-soname,libcudart.so.13 \
    -Wl,--version-script="$here/../fakecuda/libcudart.map"
ln -sf libcudart.so.13 "$work/mini/libcudart.so"
cc_prog "$work/prog_mini" "$here/prog_mini.c" -L"$work/mini" -lcudart -ldl
cc_prog "$work/lib_user.so" -shared -fPIC "$here/lib_user.c" -L"$fake" -lcudart
cc_prog "$work/prog_dlopen" "$here/prog_dlopen.c" -ldl
cc_prog "$work/prog_fork" "$here/prog_fork.c" -L"$fake" -lcudart

run_fake() { LD_LIBRARY_PATH="$fake" "$@"; }
with_shim() { LD_LIBRARY_PATH="$fake" LD_PRELOAD="$preload" "$@"; }

# --- how the library is built -------------------------------------------------
if readelf -d "$shim" | grep -q 'NEEDED.*libcudart'; then fail no_libcudart_needed "readelf lists libcudart"
else pass no_libcudart_needed; fi

others=$(nm -D --defined-only "$shim" | awk '{print $3}' | grep -v -e '^cuda' -e '^_init$' -e '^_fini$')
if [ -n "$others" ]; then fail exports_only_cuda_api "also exports: $(echo $others | head -c 200)"
else pass exports_only_cuda_api; fi

# A version node of another name than libcudart.so.13 would make programs
# bound to cudaMemcpyAsync@libcudart.so.13 skip the shim silently.
if readelf -V "$shim" | grep -q 'Version definition'; then fail exports_unversioned "the library defines a version node"
else pass exports_unversioned; fi

# --- loading into programs ----------------------------------------------------
if run_fake "$work/prog_copies" >/dev/null; then pass native_program_runs
else fail native_program_runs "prog_copies fails without the shim"; fi

out=$(UNSTALL_LOG_LEVEL=info with_shim "$work/prog_copies" 2>&1)
case "$out" in
    *"loaded"*"prog_copies: ok"*) pass interposes_versioned_names ;;
    *) fail interposes_versioned_names "no hook ran or data differs: $out" ;;
esac

out=$(UNSTALL_DISABLE=1 UNSTALL_LOG_LEVEL=debug with_shim "$work/prog_copies" 2>&1)
case "$out" in
    *unstall*) fail disable_is_pure_pass_through "the shim spoke: $out" ;;
    *"prog_copies: ok"*) pass disable_is_pure_pass_through ;;
    *) fail disable_is_pure_pass_through "$out" ;;
esac

out=$(UNSTALL_CHUNK_BYTES=8x with_shim "$work/prog_copies" 2>&1)
n=$(printf '%s\n' "$out" | grep -c 'UNSTALL_CHUNK_BYTES')
if [ "$n" -eq 1 ] && printf '%s' "$out" | grep -q "prog_copies: ok"; then pass bad_value_warns_once_and_runs
else fail bad_value_warns_once_and_runs "$n warning lines: $out"; fi

out=$(UNSTALL_CHUNK_BYTE=8m with_shim "$work/prog_copies" 2>&1)
case "$out" in
    *UNSTALL_CHUNK_BYTE*UNSTALL_CHUNK_BYTES*"prog_copies: ok"*) pass unknown_variable_names_close_match ;;
    *) fail unknown_variable_names_close_match "$out" ;;
esac

out=$(LD_LIBRARY_PATH="$work/mini" LD_PRELOAD="$preload" "$work/prog_mini" 2>&1)
if [ $? -eq 0 ]; then pass runtime_missing_functions; else fail runtime_missing_functions "$out"; fi

out=$(cd "$work" && UNSTALL_LOG_LEVEL=info with_shim ./prog_dlopen ./lib_user.so 2>&1)
case "$?:$out" in
    0:*loaded*) pass runtime_loaded_rtld_local ;;
    *) fail runtime_loaded_rtld_local "$out" ;;
esac

# A forked child passes through: the runtime's own answer, no finding logged.
native_answer=$(run_fake "$work/prog_fork" 2>&1 | sed -n 's/.*child got \([0-9-]*\).*/\1/p')
out=$(UNSTALL_MODE=warn with_shim "$work/prog_fork" "$native_answer" 2>&1)
rc=$?
child_lines=$(printf '%s\n' "$out" | grep -c "cudaMemcpyAsync") # only the child calls it
if [ $rc -eq 0 ] && [ -n "$native_answer" ] && [ "$child_lines" -eq 0 ]; then pass forked_child_passes_through
else fail forked_child_passes_through "rc=$rc native=$native_answer: $out"; fi

# --- strict mode and the allow-list (issue 4) --------------------------------
out=$(UNSTALL_MODE=strict with_shim "$work/prog_copies" 2>&1)
case "$?:$out" in
    1:*pageable_h2d*"cudaErrorNotPermitted"*) pass strict_fails_pageable_copy ;;
    *) fail strict_fails_pageable_copy "$out" ;;
esac
out=$(UNSTALL_MODE=strict UNSTALL_ALLOW=pageable_h2d,pageable_d2h with_shim "$work/prog_copies" 2>&1)
if [ $? -eq 0 ]; then pass strict_allow_list_silences; else fail strict_allow_list_silences "$out"; fi
out=$(UNSTALL_MODE=strict UNSTALL_ALLOW='*@*prog_copies*' with_shim "$work/prog_copies" 2>&1)
if [ $? -eq 0 ]; then pass strict_allow_by_call_site; else fail strict_allow_by_call_site "$out"; fi

# --- the launcher ------------------------------------------------------------
launcher=$here/../../tools/unstall
if [ "${TEST_SANITIZER:-}" = tsan ]; then
    # the launcher is a shell script: TSan's runtime cannot be preloaded into it
    echo "SKIP launcher_strict_profile: not under TSan"
    echo "SKIP launcher_report_json: not under TSan"
else
    out=$(LD_LIBRARY_PATH="$fake" LD_PRELOAD="${SAN_PRELOAD:-}" "$launcher" --lib "$shim" --strict -- "$work/prog_copies" 2>&1)
    case "$?:$out" in
        1:*pageable_h2d*) pass launcher_strict_profile ;;
        *) fail launcher_strict_profile "$out" ;;
    esac
    out=$(LD_LIBRARY_PATH="$fake" LD_PRELOAD="${SAN_PRELOAD:-}" "$launcher" --lib "$shim" --report "$work/launcher-%p.json" --mode report -- "$work/prog_copies" 2>&1)
    if [ $? -eq 0 ] && ls "$work"/launcher-*.json >/dev/null 2>&1 && python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$(ls "$work"/launcher-*.json | head -1)"; then
        pass launcher_report_json
    else fail launcher_report_json "$out"; fi
    rm -f "$work"/launcher-*.json
fi
out=$("$launcher" --profile nosuch -- true 2>&1)
case "$?:$out" in
    2:*"not found"*) pass launcher_unknown_profile_is_clear ;;
    *) fail launcher_unknown_profile_is_clear "$out" ;;
esac

echo "shim: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
