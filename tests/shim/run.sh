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
cc_prog "$work/prog_nocuda" "$here/prog_nocuda.c" -ldl
cc_prog "$work/prog_exit_growing" "$here/prog_exit_growing.c" -L"$fake" -lcudart
mkdir -p "$work/driver"
cc_prog "$work/driver/libcuda.so.1" -shared -fPIC "$here/fake_libcuda.c" -Wl,-soname,libcuda.so.1

run_fake() { LD_LIBRARY_PATH="$fake" "$@"; }
with_shim() { LD_LIBRARY_PATH="$fake" LD_PRELOAD="$preload" "$@"; }

# --- exit while the grower pins: the exit waits for it (shim/fix/grower.c) -----
# pinning 4 ms per MiB: the grower is inside a registration when main returns,
# and the simulated driver aborts if it unloads then (tests/fakecuda/memory.c)
out=$(FAKECUDA_HOST_REGISTER_US_PER_MIB=4000 FAKECUDA_HOST_ALLOC_US_PER_MIB=4000 with_shim "$work/prog_exit_growing" 2>&1)
rc=$?
case "$rc|$out" in
    "0|"*"prog_exit_growing: ok"*) pass exit_waits_for_the_grower ;;
    *) fail exit_waits_for_the_grower "exit status $rc: $(printf '%s' "$out" | grep -v '^unstall' | tail -2)" ;;
esac

# --- how the library is built -------------------------------------------------
if readelf -d "$shim" | grep -q 'NEEDED.*libcudart'; then fail no_libcudart_needed "readelf lists libcudart"
else pass no_libcudart_needed; fi

# and dlsym: the driver layer's door to libcuda (shim/entry_driver/dlsym.c),
# sigaction and signal: the report's way through termination signals
# (shim/entry_runtime/signal.c),
# and, for programs linked with -lcuda, exactly the libcuda functions the
# driver layer wraps (copy.h's US_DRIVER_COPY_APIS, driver_layer.h's others
# and its mapping functions)
wrapped=$( (sed -n 's/^ *X(US_API_CU_[A-Z_]*, \(cu[A-Za-z0-9_]*\),.*/\1/p' "$here/../../shim/base/copy.h"
            grep -o 'X(cu[A-Za-z0-9_]*[),]' "$here/../../shim/entry_driver/driver_layer.h" | sed 's/X(\(.*\)[),]/\1/') | sort)
exported_cu=$(nm -D --defined-only "$shim" | awk '{print $3}' | grep '^cu[A-Z]' | sort)
others=$(nm -D --defined-only "$shim" | awk '{print $3}' | grep -v -e '^cuda' -e '^__cudaLaunchKernel' -e '^cu[A-Z]' -e '^unstall_strict_failures$' \
    -e '^_init$' -e '^_fini$' -e '^dlsym$' -e '^sigaction$' -e '^signal$')
if [ -n "$others" ]; then fail exports_only_cuda_api "also exports: $(echo $others | head -c 200)"
elif [ "$exported_cu" != "$wrapped" ] || [ -z "$wrapped" ]; then
    fail exports_only_cuda_api "libcuda names exported: $(echo $exported_cu | head -c 200); wrapped: $(echo $wrapped | head -c 200)"
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

# --- strict mode and the allow-list ------------------------------------------
out=$(UNSTALL_MODE=strict with_shim "$work/prog_copies" 2>&1)
case "$?:$out" in
    1:*pageable_h2d*"cudaErrorNotPermitted"*) pass strict_fails_pageable_copy ;;
    *) fail strict_fails_pageable_copy "$out" ;;
esac
out=$(UNSTALL_MODE=strict UNSTALL_ALLOW=pageable_h2d,pageable_d2h with_shim "$work/prog_copies" 2>&1)
if [ $? -eq 0 ]; then pass strict_allow_list_silences; else fail strict_allow_list_silences "$out"; fi
out=$(UNSTALL_MODE=strict UNSTALL_ALLOW='*@*prog_copies*' with_shim "$work/prog_copies" 2>&1)
if [ $? -eq 0 ]; then pass strict_allow_by_call_site; else fail strict_allow_by_call_site "$out"; fi

# --- reports and logs under launchers (issues 8 and 15) ----------------------
# Each run starts without any launcher's rank variable, then sets its own.
norank() { env -u RANK -u LOCAL_RANK -u SLURM_PROCID -u OMPI_COMM_WORLD_RANK -u PMI_RANK -u PMIX_RANK "$@"; }
json_field() { # file, python expression on the report r
    python3 -c "import json,sys; r=json.load(open(sys.argv[1], encoding='utf-8')); print($2)" "$1" 2>&1
}
host=$(python3 -c "import socket; print(socket.gethostname())")
rm -rf "$work/ranks"; mkdir -p "$work/ranks"
rank_case() { # name, expected %r, expected rank_from, VAR=value...
    name=$1 want=$2 from=$3; shift 3
    out=$(norank "$@" UNSTALL_REPORT="$work/ranks/%h-%r.json" LD_LIBRARY_PATH="$fake" LD_PRELOAD="$preload" \
        "$work/prog_copies" 2>&1)
    file="$work/ranks/$host-$want.json"
    got=$(json_field "$file" '"%s %s %s" % (r["rank"], r["rank_from"], r["host"])')
    rank=$want; [ "$want" = norank ] && rank=None
    if [ "$got" = "$rank $from $host" ]; then pass "rank_$name"
    else fail "rank_$name" "want $file with rank $rank from $from: $got; $(ls "$work/ranks"); $out"; fi
    rm -f "$work/ranks"/*
}
rank_case rank_first 3 RANK RANK=3 SLURM_PROCID=9 LOCAL_RANK=1
rank_case slurm 5 SLURM_PROCID SLURM_PROCID=5 LOCAL_RANK=1
rank_case openmpi 6 OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_RANK=6 LOCAL_RANK=0
rank_case pmi 7 PMI_RANK PMI_RANK=7
rank_case pmix 8 PMIX_RANK PMIX_RANK=8 LOCAL_RANK=0
rank_case local_rank_last 2 LOCAL_RANK LOCAL_RANK=2
rank_case none_is_norank norank None

# torchrun's own process: no rank, libcuda loaded, no CUDA call, exits last.
# It must neither take rank 0's name nor empty rank 0's report.
rm -f "$work/ranks"/* "$work/ranks.go"
norank UNSTALL_REPORT="$work/ranks/r-%r.json" LD_PRELOAD="$preload" \
    "$work/prog_nocuda" "$work/driver/libcuda.so.1" "$work/ranks.go" >/dev/null 2>&1 &
agent=$!
norank RANK=0 UNSTALL_REPORT="$work/ranks/r-%r.json" LD_LIBRARY_PATH="$fake" LD_PRELOAD="$preload" \
    "$work/prog_copies" >/dev/null 2>&1
touch "$work/ranks.go"; wait $agent
got=$(json_field "$work/ranks/r-0.json" 'len(r["findings"])')
agent_hooked=$(json_field "$work/ranks/r-norank.json" 'r["hooked"]')
if [ "$got" -gt 0 ] 2>/dev/null && [ "$agent_hooked" = False ]; then pass launcher_process_keeps_its_own_name
else fail launcher_process_keeps_its_own_name "rank 0 findings: $got; agent: $agent_hooked; $(ls "$work/ranks")"; fi

# The same with a rank (srun -> torchrun: the agent has SLURM_PROCID=0): a
# report that saw nothing does not replace one with findings written meanwhile...
rm -f "$work/ranks"/* "$work/ranks.go"
norank SLURM_PROCID=0 UNSTALL_REPORT="$work/ranks/r-%r.json" LD_PRELOAD="$preload" \
    "$work/prog_nocuda" "$work/driver/libcuda.so.1" "$work/ranks.go" >"$work/agent.out" 2>&1 &
agent=$!
norank RANK=0 UNSTALL_REPORT="$work/ranks/r-%r.json" LD_LIBRARY_PATH="$fake" LD_PRELOAD="$preload" \
    "$work/prog_copies" >/dev/null 2>&1
touch "$work/ranks.go"; wait $agent
got=$(json_field "$work/ranks/r-0.json" '"%d %s" % (len(r["findings"]), r["hooked"])')
case "$got" in
    [1-9]*" True") if grep -q "report: not written to .*findings" "$work/agent.out"; then pass empty_report_keeps_findings
                   else fail empty_report_keeps_findings "no note: $(cat "$work/agent.out")"; fi ;;
    *) fail empty_report_keeps_findings "r-0.json: $got" ;;
esac
# ... but a later run (the file is older than the process) replaces it.
norank RANK=0 UNSTALL_REPORT="$work/ranks/r-%r.json" LD_PRELOAD="$preload" \
    "$work/prog_nocuda" "$work/driver/libcuda.so.1" >/dev/null 2>&1
got=$(json_field "$work/ranks/r-0.json" 'r["hooked"]')
if [ "$got" = False ]; then pass later_run_replaces_report; else fail later_run_replaces_report "hooked: $got"; fi

# --- the report path: a regular file or a new one, nothing else -------------
rm -rf "$work/paths"; mkdir -p "$work/paths"
mkfifo "$work/paths/fifo"
printf keep >"$work/paths/target"
ln -s "$work/paths/target" "$work/paths/link"
mkdir "$work/paths/dir"
[ "$(id -u)" -eq 0 ] && mknod "$work/paths/null" c 1 3
for kind in fifo link dir null; do
    [ -e "$work/paths/$kind" ] || [ -L "$work/paths/$kind" ] || continue
    before=$(ls -ld "$work/paths/$kind" | cut -c1)
    out=$(UNSTALL_REPORT="$work/paths/$kind" timeout 20 sh -c 'LD_LIBRARY_PATH="$1" LD_PRELOAD="$2" "$3"' \
        sh "$fake" "$preload" "$work/prog_copies" 2>&1)
    rc=$?
    after=$(ls -ld "$work/paths/$kind" | cut -c1)
    notes=$(printf '%s\n' "$out" | grep -c "report: not written to .*$kind")
    if [ $rc -eq 0 ] && [ "$before" = "$after" ] && [ "$notes" -eq 1 ] && [ "$(cat "$work/paths/target")" = keep ]; then
        pass "report_leaves_${kind}_alone"
    else fail "report_leaves_${kind}_alone" "rc=$rc type $before -> $after, $notes notes: $out"; fi
done
ls "$work/paths" | grep -q tmp && fail report_tmp_cleaned "$(ls "$work/paths")" || pass report_tmp_cleaned
out=$(UNSTALL_REPORT="$work/paths/new.json" with_shim "$work/prog_copies" 2>&1)
if [ -f "$work/paths/new.json" ] && [ ! -L "$work/paths/new.json" ] && json_field "$work/paths/new.json" 'r["tool"]' | grep -q unstall
then pass report_new_file; else fail report_new_file "$out"; fi

# --- FIFOs never hang the program ----------------------------------------------
mkfifo "$work/paths/config.fifo" "$work/paths/log.fifo"
out=$(UNSTALL_CONFIG="$work/paths/config.fifo" timeout 20 sh -c 'LD_LIBRARY_PATH="$1" LD_PRELOAD="$2" "$3"' \
    sh "$fake" "$preload" "$work/prog_copies" 2>&1)
case "$?:$out" in
    0:*"config.fifo: cannot read it (not a regular file)"*"prog_copies: ok"*) pass config_fifo_does_not_block ;;
    *) fail config_fifo_does_not_block "$out" ;;
esac
# no reader: one warning, then stderr
out=$(UNSTALL_LOG="$work/paths/log.fifo" UNSTALL_MODE=warn timeout 20 sh -c \
    'LD_LIBRARY_PATH="$1" LD_PRELOAD="$2" "$3"' sh "$fake" "$preload" "$work/prog_copies" 2>&1)
rc=$?
warnings=$(printf '%s\n' "$out" | grep -c "cannot open log file .*log.fifo.*no reader")
if [ $rc -eq 0 ] && [ "$warnings" -eq 1 ] && printf '%s' "$out" | grep -q "unstall report"; then pass log_fifo_without_reader
else fail log_fifo_without_reader "rc=$rc, $warnings warnings: $out"; fi
# a reader that reads nothing and a full pipe: lines are dropped and counted
sleep 30 <"$work/paths/log.fifo" &
reader=$!
python3 - "$work/paths/log.fifo" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)
try:
    while True:
        os.write(fd, b"x" * 4096)
except BlockingIOError:
    pass
PY
out=$(UNSTALL_LOG="$work/paths/log.fifo" UNSTALL_MODE=warn timeout 20 sh -c \
    'LD_LIBRARY_PATH="$1" LD_PRELOAD="$2" "$3"' sh "$fake" "$preload" "$work/prog_copies" 2>&1)
rc=$?
kill $reader 2>/dev/null; wait $reader 2>/dev/null
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "log lines\{0,1\} dropped"; then pass log_full_fifo_does_not_block
else fail log_full_fifo_does_not_block "rc=$rc: $out"; fi
# a reader that goes away after the first line: no SIGPIPE for the program
rm -f "$work/paths/reader.ready"
python3 - "$work/paths/log.fifo" "$work/paths/reader.ready" >"$work/paths/reader.out" <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)  # a reader from now on
open(sys.argv[2], "w").close()
data, deadline = b"", time.time() + 20
while b"\n" not in data and time.time() < deadline:
    try:
        chunk = os.read(fd, 4096)
    except BlockingIOError:
        chunk = b""
    data += chunk
    if not chunk:
        time.sleep(0.01)
os.close(fd)
print(data.split(b"\n")[0].decode(errors="replace"))
PY
reader=$!
for i in $(seq 100); do [ -e "$work/paths/reader.ready" ] && break; sleep 0.1; done
out=$(UNSTALL_LOG="$work/paths/log.fifo" UNSTALL_LOG_LEVEL=info UNSTALL_VERBOSE=1 timeout 20 sh -c \
    'LD_LIBRARY_PATH="$1" LD_PRELOAD="$2" "$3" 67108864' sh "$fake" "$preload" "$work/prog_copies" 2>&1)
rc=$?
wait $reader
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q "prog_copies: ok" && printf '%s' "$out" | grep -q "log lines\{0,1\} dropped"
then pass log_reader_gone_no_sigpipe
else fail log_reader_gone_no_sigpipe "rc=$rc (reader read: $(cat "$work/paths/reader.out")): $out"; fi

# --- bounded config warnings, valid UTF-8 report -------------------------------
python3 -c "import sys; sys.stdout.write('junk\n' * 200000)" >"$work/paths/garbage.conf"
out=$(UNSTALL_CONFIG="$work/paths/garbage.conf" UNSTALL_LOG_MAX_LINES=50 with_shim "$work/prog_copies" 2>&1)
n=$(printf '%s\n' "$out" | grep -c "expected key = value")
summary=$(printf '%s\n' "$out" | grep -c "199951 more configuration warnings suppressed (option log_max_lines)")
if [ "$n" -eq 49 ] && [ "$summary" -eq 1 ] && printf '%s' "$out" | grep -q "prog_copies: ok"; then
    pass config_warnings_capped
else fail config_warnings_capped "$n warning lines, $summary summaries: $(printf '%s\n' "$out" | tail -3)"; fi
odd=$(printf 'prog_\377x')
cp "$work/prog_copies" "$work/$odd"
rm -f "$work/paths/utf8.json"
out=$(UNSTALL_REPORT="$work/paths/utf8.json" with_shim "$work/$odd" 1048576 "$(printf 'arg\377\303\251')" 2>&1)
got=$(json_field "$work/paths/utf8.json" 'r["program"] + "|" + r["cmdline"][-5:]')
if [ "$got" = "$(printf 'prog_\357\277\275x|arg\357\277\275\303\251')" ]; then pass report_json_is_utf8
else fail report_json_is_utf8 "$got; $out"; fi
rm -f "$work/$odd"

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

# --help shows the usage and nothing of the script; --version
out=$("$launcher" --help 2>&1)
case "$?:$out" in
    *"set -e"*|*"here="*) fail launcher_help_is_only_usage "$out" ;;
    0:usage:*--compare*--version*"Exit status:"*"strict_action=abort"*) pass launcher_help_is_only_usage ;;
    *) fail launcher_help_is_only_usage "$out" ;;
esac
out=$("$launcher" --lib "$shim" --version 2>&1)
case "$?:$out" in
    "0:unstall "*"library: $shim") pass launcher_version ;;
    *) fail launcher_version "$out" ;;
esac

if [ -n "${TEST_SANITIZER:-}" ]; then
    # --compare runs the program natively from Python: a sanitized simulated
    # runtime would need the sanitizer's runtime preloaded into Python itself
    echo "SKIP launcher_compare: not under a sanitizer"
    echo "SKIP launcher_compare_strict_differs: not under a sanitizer"
else
    # --compare: native, then under unstall, side by side, on a
    # scenario program over the simulated runtime
    scenario=$build/scenarios/case_b_pageable_h2d
    out=$(LD_LIBRARY_PATH="$fake" "$launcher" --lib "$shim" --compare -- "$scenario" 2>"$work/compare.err")
    rc=$?
    row() { printf '%s\n' "$out" | grep "^$1" | tr -s ' '; }
    fixed=$(row "  pageable_h2d" | cut -d' ' -f4)
    if [ $rc -eq 0 ] && [ "$(row 'exit status')" = "exit status 0 0" ] && row "wall time" | grep -q "^wall time [0-9.]* m\{0,1\}s [0-9.]* m\{0,1\}s" \
        && [ "${fixed%%/*}" -gt 0 ] 2>/dev/null && printf '%s' "$out" | grep -q "^verdict: same exit status" \
        && grep -q "unstall --compare: native run" "$work/compare.err"; then pass launcher_compare
    else fail launcher_compare "rc=$rc fixed=$fixed: $out"; fi
    out=$(LD_LIBRARY_PATH="$fake" "$launcher" --lib "$shim" --strict --compare -- "$work/prog_copies" 2>/dev/null)
    rc=$?
    if [ $rc -eq 1 ] && [ "$(row 'exit status')" = "exit status 0 1 differs" ] && row "  pageable_h2d" | grep -q forbidden
    then pass launcher_compare_strict_differs
    else fail launcher_compare_strict_differs "rc=$rc: $out"; fi

fi

# eager_modules (case E): CUDA_MODULE_LOADING=EAGER set before main
# when asked, a value the user set kept, nothing without the option or disabled
loading() { env "$@" LD_PRELOAD="$preload" /usr/bin/env 2>/dev/null | sed -n 's/^CUDA_MODULE_LOADING=//p'; }
[ "$(loading UNSTALL_EAGER_MODULES=1)" = EAGER ] && pass eager_modules_set || fail eager_modules_set "got '$(loading UNSTALL_EAGER_MODULES=1)'"
[ "$(loading UNSTALL_EAGER_MODULES=1 CUDA_MODULE_LOADING=LAZY)" = LAZY ] && pass eager_modules_user_wins ||
    fail eager_modules_user_wins "got '$(loading UNSTALL_EAGER_MODULES=1 CUDA_MODULE_LOADING=LAZY)'"
[ -z "$(loading)" ] && pass eager_modules_default_off || fail eager_modules_default_off "got '$(loading)'"
[ -z "$(loading UNSTALL_EAGER_MODULES=1 UNSTALL_DISABLE=1)" ] && pass eager_modules_disabled ||
    fail eager_modules_disabled "got '$(loading UNSTALL_EAGER_MODULES=1 UNSTALL_DISABLE=1)'"
if [ -n "${TEST_SANITIZER:-}" ]; then
    # the launcher preloads the shim alone; a sanitized one needs its runtime first
    echo "SKIP launcher_eager_modules: not under a sanitizer"
else
    out=$(env -u CUDA_MODULE_LOADING "$launcher" --lib "$shim" --eager-modules -- /usr/bin/env 2>/dev/null |
        sed -n 's/^CUDA_MODULE_LOADING=//p')
    [ "$out" = EAGER ] && pass launcher_eager_modules || fail launcher_eager_modules "got '$out'"
fi

echo "shim: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
