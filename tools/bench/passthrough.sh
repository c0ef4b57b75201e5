#!/bin/sh
# The shim's pass-through overhead on the simulated runtime (no GPU needed):
# builds tools/bench/passthrough.c with gcc against BUILD_DIR/fakecuda, runs
# it without the shim, with LD_PRELOAD (default options: mode report, fixes
# on), with UNSTALL_DISABLE=1 and with the hang explainer off
# (UNSTALL_HANG_REPORT_S=0), and prints ns per call side by side with what
# the shim adds. Target: under 50 ns added per call (the pass-through budget).
#
# Usage: tools/bench/passthrough.sh [BUILD_DIR] [CALL...]
# Environment: PT_CALLS (1000000), PT_QUEUED_CALLS (10000), PT_REPS (5), CC
# The queued calls (copies, event records, launches) include the simulated
# runtime's worker hand-off and are noisy; the no-op copy and the stream
# query measure the shim's own cost.
build=$(cd "${1:-build}" && pwd) || exit 1
[ $# -gt 0 ] && shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
fake=$build/fakecuda
shim=$build/libunstall.so
bin=$build/bench/passthrough
for f in "$fake/libcudart.so.13" "$shim"; do
    [ -f "$f" ] || { echo "passthrough: missing $f (make shim fakecuda)"; exit 1; }
done
mkdir -p "$build/bench"
${CC:-gcc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I"$cuda/include" -I"$root/tests/fakecuda" \
    "$here/passthrough.c" -o "$bin" -L"$fake" -lcudart -pthread || exit 1

# the simulated runtime's copies cost no modelled time
export FAKECUDA_LATENCY_US=0 FAKECUDA_TIME_SCALE=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
LD_LIBRARY_PATH="$fake" "$bin" "$@" >"$tmp/native" || exit 1
LD_LIBRARY_PATH="$fake" LD_PRELOAD="$shim" UNSTALL_MODE=report "$bin" "$@" >"$tmp/shim" 2>"$tmp/shim.err" || {
    cat "$tmp/shim.err"; exit 1; }
LD_LIBRARY_PATH="$fake" LD_PRELOAD="$shim" UNSTALL_DISABLE=1 "$bin" "$@" >"$tmp/disabled" || exit 1
# the hang explainer's share (on by default): the same with it off
LD_LIBRARY_PATH="$fake" LD_PRELOAD="$shim" UNSTALL_MODE=report UNSTALL_HANG_REPORT_S=0 "$bin" "$@" \
    >"$tmp/nohang" 2>/dev/null || exit 1

python3 - "$tmp" <<'PY'
import re, sys
d = sys.argv[1]
def read(name):
    rows = {}
    for line in open(f"{d}/{name}"):
        m = re.match(r"PASSTHROUGH call=(\S+) calls=(\d+) ns_per_call=(\S+)", line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), float(m.group(3)))
    return rows
native, shim, disabled, nohang = read("native"), read("shim"), read("disabled"), read("nohang")
print("pass-through overhead on the simulated runtime (ns per call, best of PT_REPS runs; queued calls are noisy)")
print(f"{'call':<22} {'calls':>8} {'native':>9} {'unstall':>9} {'added':>8} {'disabled':>9} {'added':>8} "
      f"{'hang off':>9} {'added':>8}")
worst = 0.0
for call, (n, nat) in native.items():
    s = shim.get(call, (0, float("nan")))[1]
    x = disabled.get(call, (0, float("nan")))[1]
    h = nohang.get(call, (0, float("nan")))[1]
    print(f"{call:<22} {n:>8} {nat:>9.1f} {s:>9.1f} {s - nat:>+8.1f} {x:>9.1f} {x - nat:>+8.1f} {h:>9.1f} "
          f"{h - nat:>+8.1f}")
    if call == "memcpy_async_0B":
        worst = s - nat
if "memcpy_async_0B" in native:
    print(f"no-op copy: {worst:+.1f} ns added by the shim (target: under 50 ns): {'met' if worst < 50 else 'NOT met'}")
PY
