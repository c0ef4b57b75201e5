#!/usr/bin/env python3
"""table.py - the performance table of cases A-E from the scenario programs'
RESULT lines: native and unstall side by side, the target, the ratio and
whether the target is met. Every figure comes from the RESULT lines; the
targets are the project's, one per row below. Also make demo's table: one
line per case, native, unstall and what the case shows.

Usage: tools/bench/table.py [--all | --demo] NATIVE_DIR SHIM_DIR
  NATIVE_DIR, SHIM_DIR: <run>.out files (tests/gpu/runner.sh's OUT/native
  and OUT/shim). --all: also every RESULT key of every test side by side.
  --demo: every RESULT key, what unstall reported (<run>.err), and ends with
  the table at a glance (tools/demo.sh).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "scenarios"))
from results import load_runs, num  # noqa: E402


def mib(row):
    b = num(row, "bytes") or num(row, "copy_bytes")
    if b is None:
        return "?"
    return f"{b / (1 << 20):g} MiB" if b >= 1 << 20 else f"{b:g} B"


def kms(row, key="kernel_ms"):
    v = num(row, key)
    return f"{v:g} ms" if v is not None else "? ms"


class Row:
    """One line of the table.
    get(runs) -> (value or None, label context row); value is a number, or a
    string for yes/no outcomes. better: 'higher', 'lower' or 'text'."""

    def __init__(self, label, get, unit, better, target=None, target_text="-", scale=1.0, shows="",
                 target_from=None):
        self.label, self.get, self.unit, self.better = label, get, unit, better
        self.target, self.target_text, self.scale = target, target_text, scale
        self.shows = shows  # make demo's "what it shows"
        # target_from(shim_runs, native_runs) -> (target, target_text): a
        # target that derives from other figures of the same run (the host's
        # copy bandwidth, the link's, native's figure in the same row)
        self.target_from = target_from


def host_copy_gbps(runs):
    """The host's copy bandwidth of a run (case B's host_copy test), or None."""
    rb = runs.get("case_b")
    return num(rb.row("B", "host_copy"), "gbps") if rb else None


def caller_bound(run, test):
    """The target of a row where a caller waits only for its source to be
    read (a first use, a source freed on return): a caller that must read its
    whole source before it returns needs bytes / the host's copy bandwidth
    (case B's host_copy test, the same run); 1.25 times that plus 0.1 ms."""
    def target_from(runs, native=None):
        r, host = runs.get(run), host_copy_gbps(runs)
        x = r.row("B", test) if r else None
        n = num(x, "bytes") if x is not None else None
        if not host or not n:
            return None, "-"
        bound_ms = 1.25 * n / (host * 1e9) * 1e3 + 0.1
        return (lambda v: v <= bound_ms), f"<= {bound_ms:.2f}"
    return target_from


def bandwidth_bound(case, run):
    """The throughput rows' target: 90% of what the slower of the two legs
    allows, the link (the same copy from or into pinned memory, the case's
    link test) and the host's copy into mapped memory (case B's host_copy),
    both from the same run."""
    def target_from(runs, native=None):
        rl, host = runs.get(run), host_copy_gbps(runs)
        link = num(rl.row(case, "link"), "gbps") if rl else None
        if not link or not host:
            return None, "-"
        bound = 0.9 * min(link, host)
        return (lambda v: v >= bound), f">= {bound:.1f}"
    return target_from


def field(run, case, test, key, agg=None, tests=None):
    """A getter: runs[run] row (case, test) key; with tests=[...] and agg, the
    aggregate (max/min) of the key over several tests."""
    def get(runs):
        r = runs.get(run)
        if r is None:
            return None, None
        if tests:
            rows = [r.row(case, t) for t in tests]
            vals = [num(x, key) for x in rows if x is not None and num(x, key) is not None]
            return (agg(vals) if vals else None), next((x for x in rows if x is not None), None)
        x = r.row(case, test)
        return num(x, key), x
    return get


LAUNCH_PAIRS = 3  # tests/gpu/runner.sh's case_c_launch_1..3, native and unstall taking turns


def launch_pair_figures(runs, run="case_c_launch", case="C"):
    """(worst launch, row) of each of the run's launch-latency processes that
    took turns with the other mode's (case_c_launch_1..3; the pinned loop's:
    clean_launch_1..3, case clean), in order; the worst is None where a
    process gave no figure."""
    return [field(f"{run}_{i}", case, "launch_latency", "max_ms")(runs) for i in range(1, LAUNCH_PAIRS + 1)]


def launch_pair_worsts(runs):
    return [worst for worst, _ in launch_pair_figures(runs)]


def launch_pairs_worst(run="case_c_launch", case="C"):
    """A getter: the worst over the pairings, and the first process's row."""
    def get(runs):
        figures = launch_pair_figures(runs, run, case)
        vals = [worst for worst, _ in figures if worst is not None]
        return (max(vals) if vals else None), figures[0][1]
    return get


def no_worse_in_each_pairing(runs, native=None):
    """The launch row's target (as the issue set it): in every pairing of
    processes that took turns, unstall's worst launch no worse than
    native's. Met only when every pairing has both figures."""
    shim, nat = launch_pair_worsts(runs), launch_pair_worsts(native or {})
    if all(n is None for n in nat):
        return None, "-"
    met = all(s is not None and n is not None and s <= n for s, n in zip(shim, nat))
    shown = "/".join("?" if n is None else f"{n * 1000:.0f}" for n in nat)
    return (lambda v: met), f"<= native's in each pairing: {shown}"


def outcome(run):
    def get(runs):
        r = runs.get(run)
        x = r.row("C", "deadlock") if r else None
        if x is None:
            return None, None
        if x.get("completed") == "1":
            return "completes", x
        if x.get("deadlock") == "1":
            return "deadlock", x
        return "?", x
    return get


def remedy_field(ctx, load):
    """Native: the plain case_d run; unstall: the case_d_fixed run (the
    shim's directory only has it)."""
    def get(runs):
        r = runs.get("case_d_fixed") or runs.get("case_d")
        x = r.row("D", f"bursts_{ctx}_{load}") if r else None
        return num(x, "median_ms"), x
    return get


def remedy_run_field(run, case, test, key):
    """Native: the plain run of the case; unstall: the remedy's run (the
    shim's directory only has it)."""
    def get(runs):
        r = runs.get(run) or runs.get(f"case_{case.lower()}")
        x = r.row(case, test) if r else None
        return num(x, key), x
    return get


def rows():
    A = ["peer_async", "memcpy_default"]
    return [
        Row(lambda x: f"A: {mib(x)} staged peer copy, cudaMemcpyPeerAsync", field("case_a", "A", "peer_async", "gbps"),
            "GB/s", "higher", lambda v: v >= 50, ">= 50"),
        Row(lambda x: f"A: {mib(x)} staged peer copy, cudaMemcpyAsync(Default)",
            field("case_a", "A", "memcpy_default", "gbps"), "GB/s", "higher", lambda v: v >= 50, ">= 50"),
        Row(lambda x: f"A: independent {mib(x)} copy on stream B while stream A has a {kms(x)} kernel then a staged "
            "copy: done at", field("case_a", "A", "stall", "b_done_ms"), "ms", "lower", lambda v: v <= 3, "<= 3"),
        Row(lambda x: f"A: host time in the call, {mib(x)}, stream idle (worst of both APIs)",
            field("case_a", "A", None, "call_idle_ms", max, A), "ms", "lower", lambda v: v < 0.2, "< 0.2"),
        Row(lambda x: f"A: host time in the call, {mib(x)}, stream busy (worst of both APIs)",
            field("case_a", "A", None, "call_busy_ms", max, A), "ms", "lower", lambda v: v < 0.2, "< 0.2"),
        Row(lambda x: f"B: {mib(x)} pageable H2D behind a {kms(x)} kernel, caller held",
            field("case_b", "B", "held_small", "held_ms"), "ms", "lower", lambda v: v < 5, "< 5"),
        Row(lambda x: f"B: {mib(x)} pageable H2D behind a {kms(x)} kernel, caller held",
            field("case_b", "B", "held_large", "held_ms"), "ms", "lower", lambda v: v < 40, "< 40"),
        Row(lambda x: f"B: {mib(x)} pageable H2D throughput", field("case_b", "B", "throughput", "gbps"), "GB/s",
            "higher", target_from=bandwidth_bound("B", "case_b")),
    ] + [
        Row((lambda t: lambda x: f"B: a process's first {mib(x)} pageable H2D behind a {kms(x)} kernel (the copy "
             "once on the idle stream first, nothing else before it), caller held")(test),
            field("case_b", "B", test, "held_ms"), "ms", "lower", target_from=caller_bound("case_b", test))
        for test in ("first_use_small", "first_use_large")
    ] + [
        Row(lambda x: f"B: {mib(x)} pageable H2D from fresh memory behind a {kms(x)} kernel, the source overwritten "
            f"and freed on return, {x.get('rounds', '?') if x else '?'} rounds from a process's first copy, "
            "caller held (worst)", field("case_b_freed", "B", "freed", "held_ms"), "ms", "lower",
            target_from=caller_bound("case_b_freed", "freed")),
        Row(lambda x: f"B: the link, {mib(x)} H2D from pinned memory", field("case_b", "B", "link", "gbps"),
            "GB/s", "higher"),
    ] + [
        Row(lambda x: f"B: the host's copy bandwidth, {mib(x)} into mapped memory on "
            f"{x.get('threads', '?') if x else '?'} threads", field("case_b", "B", "host_copy", "gbps"), "GB/s",
            "higher"),
        Row(lambda x: f"C: {mib(x)} pageable D2H throughput", field("case_c", "C", "throughput", "gbps"), "GB/s",
            "higher", target_from=bandwidth_bound("C", "case_c")),
        Row(lambda x: f"C: {mib(x)} pageable D2H throughput into fresh memory",
            field("case_c", "C", "throughput", "fresh_gbps"), "GB/s", "higher"),
        Row(lambda x: f"C: the link, {mib(x)} D2H into pinned memory", field("case_c", "C", "link", "gbps"),
            "GB/s", "higher"),
        Row(lambda x: f"C: launch latency of another thread during a {mib(x)} pageable D2H loop (max)",
            field("case_c", "C", "launch_latency", "max_ms"), "us", "lower", scale=1000.0),
        Row(lambda x: f"C: launch latency of another thread during a {mib(x)} pageable D2H loop, "
            f"{LAUNCH_PAIRS} processes taking turns with native's (worst)", launch_pairs_worst(), "us", "lower",
            scale=1000.0, target_from=no_worse_in_each_pairing),
        Row(lambda x: f"C: launch latency of another thread during a {mib(x)} D2H loop into pinned memory (case "
            f"clean: the link's speed, nothing to fix), {LAUNCH_PAIRS} processes taking turns with the row above "
            f"(worst)",
            launch_pairs_worst("clean_launch", "clean"), "us", "lower", scale=1000.0),
        Row(lambda x: f"C: launch latency of another thread during a {mib(x)} pageable D2H loop (p99)",
            field("case_c", "C", "launch_latency", "p99_ms"), "us", "lower", scale=1000.0),
        Row(lambda x: f"C: a {mib(x)} D2H on stream 0 whose stream waits for another thread's launch", outcome("case_c_deadlock"), "", "text",
            lambda v: v == "completes", "completes"),
        Row(lambda x: f"C: the same with a {mib(x)} D2H", outcome("case_c_deadlock_1m"), "", "text",
            lambda v: v == "completes", "completes"),
        Row(lambda x: "C: the same, the kernel first launched in the other thread (lazy module loading)",
            outcome("case_c_deadlock_asis"), "", "text"),
        Row(lambda x: "C: the same, eager module loading (native: CUDA_MODULE_LOADING=EAGER; unstall: "
            "eager_modules=1)", outcome("case_c_deadlock_asis_eager"), "", "text", lambda v: v == "completes",
            "completes"),
        Row(lambda x: f"D: burst of {x.get('copies', '?') if x else '?'} x {mib(x)} D2D while a {kms(x)} kernel runs",
            field("case_d", "D", "busy_d2d", "burst_ms"), "ms", "lower"),
        Row(lambda x: f"D: the same burst, no kernel running", field("case_d", "D", "busy_d2d", "base_ms"), "ms",
            "lower"),
    ] + [
        Row((lambda c, l, a: lambda x: f"D: 10 bursts of {x.get('copies', '?') if x else '?'} x {mib(x)} D2D + sync, "
             f"{c} context, {l}, {a} burst")(ctx, load, agg), field(run, "D", f"bursts_{ctx}_{load}", key), "ms",
            "lower",
            target, target_text)
        for ctx in ("primary", "created")
        for load in ("busy", "idle")
        for run, key, agg, target, target_text in (
            ("case_d", "median_ms", "median", None, "-"),
            ("case_d", "max_ms", "max", None, "-"),
        )
    ] + [
        # the remedy: unstall's column is the fix_busy_d2d run, native the plain one
        Row((lambda c, l: lambda x: f"D: the same, fix_busy_d2d=1 (unstall column), {c} context, {l}, median burst")
            (ctx, load), remedy_field(ctx, load), "ms", "lower",
            (lambda v: v < 0.5) if load == "busy" else None, "< 0.5" if load == "busy" else "-")
        for ctx in ("primary", "created")
        for load in ("busy", "idle")
    ] + [
        Row(lambda x: f"E: legacy-stream kernel behind a {kms(x)} kernel on a blocking stream: done at",
            field("case_e", "E", "legacy", "legacy_done_ms"), "ms", "lower"),
    ] + [
        Row((lambda m: lambda x: f"E: the same, legacy_stream={m} (unstall column): done at")(mode),
            remedy_run_field(f"case_e_{mode}", "E", "legacy", "legacy_done_ms"), "ms", "lower")
        for mode in ("ordered", "per_thread")
    ]


def demo_rows():
    """make demo's table: the stall each case shows, one figure each, natively and under unstall."""
    return [
        Row(lambda x: f"A: {mib(x)} peer copy behind a {kms(x, 'busy_kernel_ms')} kernel: call held",
            field("case_a", "A", "peer_async", "call_busy_ms"), "ms", "lower",
            shows="no peer access: the driver stages through the host, holding the caller"),
        Row(lambda x: "A: a copy on another stream: done at", field("case_a", "A", "stall", "b_done_ms"), "ms",
            "lower", shows="the staged copy holds back other streams too "),
        Row(lambda x: f"B: {mib(x)} pageable H2D behind a {kms(x)} kernel: call held",
            field("case_b", "B", "held_large", "held_ms"), "ms", "lower",
            shows="a pageable copy waits for the work queued before it"),
        Row(lambda x: f"C: launch in another thread during {mib(x)} D2H (max)",
            field("case_c", "C", "launch_latency", "max_ms"), "us", "lower", scale=1000.0,
            shows="a pageable D2H makes other threads' launches wait"),
        Row(lambda x: f"C: a {mib(x)} D2H on stream 0 whose stream waits for another thread's launch", outcome("case_c"), "", "text",
            shows="the same lock deadlocks a program whose stream waits for another thread"),
        Row(lambda x: f"D: {x.get('copies', '?') if x else '?'} x {mib(x)} D2D while a {kms(x)} kernel runs",
            field("case_d", "D", "busy_d2d", "burst_ms"), "ms", "lower",
            shows="D2D copies wait for a running kernel"),
        Row(lambda x: f"E: legacy-stream work behind a {kms(x)} kernel: done at",
            field("case_e", "E", "legacy", "legacy_done_ms"), "ms", "lower",
            shows="stream 0 waits for blocking streams (the API's promise: kept)"),
        Row(lambda x: f"clean: {mib(x)} pinned H2D behind a {kms(x)} kernel: call held",
            field("case_clean", "clean", "pinned_h2d", "held_ms"), "ms", "lower",
            shows="done right: nothing to fix, nothing changed"),
    ]


def fmt(v, unit, scale):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    v *= scale
    if unit == "GB/s":
        return f"{v:.1f} {unit}"
    if unit == "us":
        return f"{v:.0f} {unit}"
    return f"{v:.3f} {unit}" if v < 10 else f"{v:.1f} {unit}"


def table(native, shim):
    lines = ["| case | native | unstall | target | ratio (unstall/native) | target met |",
             "|---|---|---|---|---|---|"]
    for row in rows():
        nv, nrow = row.get(native)
        sv, srow = row.get(shim)
        label = row.label(nrow or srow)
        if row.better == "text" or nv is None or sv is None or isinstance(nv, str):
            ratio = "-"
        else:
            ratio = f"{sv / nv:.2f}" if nv else "-"
        if row.target_from is not None:
            row.target, row.target_text = row.target_from(shim, native)
        if row.target is None or sv is None:
            met = "-"
        else:
            met = "yes" if row.target(sv if isinstance(sv, str) else sv * 1.0) else "NO"
        target = row.target_text + (f" {row.unit}" if row.target_text != "-" and row.unit else "")
        lines.append(f"| {label} | {fmt(nv, row.unit, row.scale)} | {fmt(sv, row.unit, row.scale)} | {target} "
                     f"| {ratio} | {met} |")
    return "\n".join(lines)


def aligned(header, cells, right=()):
    """A Markdown table whose columns line up in a terminal too; columns in right are right-aligned."""
    widths = [max(len(str(r[i])) for r in [header] + cells) for i in range(len(header))]

    def line(r):
        return "| " + " | ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                                 for i, (c, w) in enumerate(zip(r, widths))) + " |"
    rule = "|" + "|".join(("-" * (w + 1) + ":") if i in right else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule] + [line(r) for r in cells])


def demo_table(native, shim):
    """One line per case a newcomer reads at a glance: case, native, unstall, what it shows."""
    cells = []
    for row in demo_rows():
        nv, nrow = row.get(native)
        sv, srow = row.get(shim)
        cells.append([row.label(nrow or srow), fmt(nv, row.unit, row.scale), fmt(sv, row.unit, row.scale), row.shows])
    return aligned(["case", "native", "unstall", "what it shows"], cells, right=(1, 2))


def reported(shim, max_lines=25):
    """What unstall reported at the end of each run under it (the report's lines of <run>.err)."""
    out = []
    for name in sorted(shim):
        lines = [l for l in shim[name].err.splitlines() if l.startswith("unstall")]
        if lines:
            out.append(f"\n{name}: what unstall saw")
            out += ["  " + l for l in lines[:max_lines]]
    return "\n".join(out)


def everything(native, shim):
    out = []
    for name in sorted(set(native) | set(shim)):
        n, s = native.get(name), shim.get(name)
        keys = sorted(set(n.tests if n else {}) | set(s.tests if s else {}))
        out.append(f"\n{name} (exit native {n.rc if n else '-'}, unstall {s.rc if s else '-'})")
        for key in keys:
            nr = n.tests.get(key, {}) if n else {}
            sr = s.tests.get(key, {}) if s else {}
            out.append(f"  case {key[0]} test {key[1]}")
            for k in [k for k in list(nr) + [k for k in sr if k not in nr] if k not in ("case", "test")]:
                out.append(f"    {k:<18} native {nr.get(k, '-'):>14}   unstall {sr.get(k, '-'):>14}")
    return "\n".join(out)


def main(argv):
    show_all = "--all" in argv
    demo = "--demo" in argv
    args = [a for a in argv if a not in ("--all", "--demo")]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    native, shim = load_runs(args[0]), load_runs(args[1])
    if not native and not shim:
        print(f"table: no runs in {args[0]} or {args[1]}", file=sys.stderr)
        return 1
    if demo:
        print(everything(native, shim))
        print(reported(shim))
        print("\nat a glance (native: the program as it is; unstall: the same binary under tools/unstall):\n")
        print(demo_table(native, shim))
        return 0
    print(table(native, shim))
    if show_all:
        print(everything(native, shim))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
