#!/usr/bin/env python3
"""smallcopy_table.py - tools/bench/smallcopy.c's rows, native and unstall
side by side: median, p99, worst and first call in microseconds, and whether
unstall is slower than native (median, p99 or first call more than 3% and
1 us worse: the target holds at every size, first call included).

A file may hold several rounds of the same rows (tools/bench/smallcopy.sh runs
native, shim and control processes in turn, SMALLCOPY_ROUNDS times): where the
rows carry every call's time (SMALLCOPY_TIMES lines), median, p99 and worst
are those of all the rounds' calls together, so that one process's state
(its host, its CPU placement) does not decide a row; first is the median of
the rounds' first calls (the worst column holds the worst of them), and data
is ok only if every round's was.

A third file, the control, holds the same program run with the shim loaded
but disabled (UNSTALL_DISABLE=1: each hook adds a few nanoseconds): it is
native in all but the process. Its median and p99 are printed beside the
others, and a row where the control itself differs from native by the
verdict's margin (either way) says so: the margin there is inside what one
set of processes differs from another, which no change of the shim decides.
The verdict is still unstall against native.

A figure worse by the margin makes a row slower only where the rounds say
so beyond chance. Rounds are paired in file order, as smallcopy.sh runs them
(native, shim and control taking turns on one host state): for each key, k
rounds whose shim process was worse than that round's native one by the margin
(its own first call, median or p99, from its SMALLCOPY line), j where native's
was worse than the shim's by as much. Were neither slower, each of those k + j
rounds would fall either way as a coin does; the verdict is "slower" where k
or more of them falling the shim's way has a chance under 1% (a one-sided sign
test). It says "first 14/16 against 1/16 (p 0.00049)". A figure worse by the
margin that chance explains is said beside "ok" ("by chance: first 11/16
against 4/16 (p 0.059)"): on the GPU hosts a row's first call came out at 70-90
or 130-200 us from one process to the next, natively as under the shim, and
the median of 16 such draws moved by 40%. Where the rounds are too few for the
test ever to reach 1% (6 or fewer), the figure alone decides, as it did for every
row before the sign test, and the key carries n/N only ("first 3/3").

The control is judged by the same rule against native, either way: the
count of rows where it differs is what chance makes of the rule. On an H200
the test flagged it in none of the 20 rows of 16 rounds, the
figure alone in 31 of 40 (19 of the 20 rows of 3 rounds, where the figure
alone still decides).

A row is judged again in a second sample where the first one says "slower"
(--again: the same processes run again, the row's op from the same first row
up to it, so that its first call comes after the same rows; smallcopy.sh does
so). Each key then says so in both or it is not slower: "slower: first 12/16
against 1/16 (p 0.0017), again 11/16 against 2/16 (p 0.011)"; a key the second
sample does not confirm is said beside "ok" with both ("not again"). Why: the
rule makes 60 tests a table (20 rows, 3 figures), and the control, native
against native, was "slower" in 1 of 20 rows in three tables of six (sessions
34-37); twice, by chance, is one row in thousands. A cost the shim adds comes
back in the second sample. Rows of 6 or fewer rounds (the figure alone) are
judged again the same way, with the second sample's rounds. The control is
judged by the same two steps in the rows of rounds enough to test.

Rows that smallcopy.c ran with a sleep before each call (SMALLCOPY_GAP_US: its
lines say gap_us) are said to be so under the table.

Usage: smallcopy_table.py NATIVE_FILE SHIM_FILE [CONTROL_FILE] [--again NATIVE2 SHIM2 [CONTROL2]]
       smallcopy_table.py --flagged NATIVE_FILE SHIM_FILE [CONTROL_FILE]
--flagged prints "op bytes" for each row a second sample should judge (the
shim's row slower, or the control's off native by the rule), nothing else.
Exit status 0; the verdict column says where unstall loses."""
import math
import re
import sys


# what the verdict compares: the median and p99 of every call, and the row's
# first call (the median of the rounds' first calls)
VERDICT_KEYS = ("median_us", "p99_us", "first_us")

# the chance under which the paired rounds' counts make a worse figure a
# slower row (one-sided sign test; module docstring)
ALPHA = 0.01


def p99_of(sorted_times):
    return sorted_times[int(0.99 * (len(sorted_times) - 1) + 0.5)]


def load(path):
    """{(op, bytes): {median_us, p99_us, max_us, first_us, ok, rounds}}, rows in file order."""
    summaries, times = {}, {}
    for line in open(path):
        kv = dict(re.findall(r"(\w+)=(\S+)", line))
        if line.startswith("SMALLCOPY "):
            summaries.setdefault((kv["op"], int(kv["bytes"])), []).append(kv)
        elif line.startswith("SMALLCOPY_TIMES "):
            times.setdefault((kv["op"], int(kv["bytes"])), []).append([float(t) for t in kv["us"].split(",")])
    rows = {}
    for key, rounds in summaries.items():
        per_round = [{k: float(r[k]) for k in VERDICT_KEYS} for r in rounds]
        firsts = sorted(r["first_us"] for r in per_round)
        row = {"first_us": firsts[len(firsts) // 2], "ok": all(r["ok"] == "1" for r in rounds),
               "rounds": len(rounds), "per_round": per_round,
               "gap_us": max(int(r.get("gap_us", "0")) for r in rounds)}
        calls = sorted(t for run in times.get(key, []) for t in run)
        if len(times.get(key, [])) == len(rounds) and calls:
            row.update(median_us=calls[len(calls) // 2], p99_us=p99_of(calls), max_us=calls[-1])
        else:  # summaries only (one round, or an older file): the first round's
            row.update({k: float(rounds[0][k]) for k in ("median_us", "p99_us", "max_us")})
        rows[key] = row
    return rows


def size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} B"


def rounds_text(rounds):
    """'3 rounds', or '8 rounds up to 1 MiB, 3 from 2 MiB' when the rows differ."""
    by = {}
    for r, b in rounds:
        by.setdefault(r, []).append(b)
    if len(by) <= 1:
        return f"{next(iter(by), 1)} rounds"
    parts = sorted(by.items(), key=lambda kv: min(kv[1]))
    text = []
    for i, (r, sizes) in enumerate(parts):
        if i == 0:
            text.append(f"{r} rounds up to {size(max(sizes))}")
        else:
            text.append(f"{r} from {size(min(sizes))}")
    return ", ".join(text)


def worse(shim, native):
    return shim > native * 1.03 and shim > native + 1.0


def differs(a, b):
    return worse(a, b) or worse(b, a)


def sign_test(key, a, b):
    """(k, j, n, p) over the n rounds paired in file order: k whose own figure
    for key is worse in a than in b by the margin, j worse in b than in a; p
    the chance of k or more of the k + j falling a's way were neither slower."""
    pairs = list(zip(a["per_round"], b["per_round"]))
    k = sum(worse(x[key], y[key]) for x, y in pairs)
    j = sum(worse(y[key], x[key]) for x, y in pairs)
    m = k + j
    p = sum(math.comb(m, i) for i in range(k, m + 1)) / 2 ** m if m else 1.0
    return k, j, len(pairs), p


def testable(rounds):
    """Whether so many paired rounds can say anything beyond chance: all of
    them falling one way must be rarer than ALPHA."""
    return 0.5 ** rounds < ALPHA


def judge(key, a, b):
    """None where a's figure for key is not worse than b's by the margin; else
    (slower, text): slower where the rounds say so beyond chance, or are too
    few to test (the figure alone then); text the rounds' counts."""
    if not worse(a[key], b[key]):
        return None
    k, j, n, p = sign_test(key, a, b)
    if not testable(n):  # the figure alone then
        return True, f"{key[:-3]} {k}/{n}"
    return p < ALPHA, f"{key[:-3]} {k}/{n} against {j}/{n} (p {p:.2g})"


def judge_again(key, a, b, again):
    """judge(key, a, b), with a "slower" the second sample (again: (a2, b2),
    either None when it lacks the row) must say again to stand."""
    first = judge(key, a, b)
    if first is None or not first[0] or None in again:
        return first
    a2, b2 = again
    second = judge(key, a2, b2)
    if second is not None and second[0]:
        return True, f"{first[1]} and again {second[1].split(' ', 1)[1]}"
    said = second[1].split(" ", 1)[1] if second is not None else f"{a2[key]:.1f} / {b2[key]:.1f} us"
    return False, f"{first[1]} but not again: {said}"


def control_off_native(key, c, n, again_c, again_n):
    """Whether the control is off native by the rule, either way, in both samples."""
    return any(j is not None and j[0] for j in (judge_again(key, c, n, (again_c, again_n)),
                                              judge_again(key, n, c, (again_n, again_c))))


def flagged(native, shim, control):
    """The rows a second sample should judge: "op bytes" lines. The control's
    only where its rounds are enough to test: with fewer, its figure alone is
    off native in most rows (19 of 20 on an H200), and each would run the
    largest rows again; it is counted apart, from one sample."""
    for key in native:
        n, s = native[key], shim.get(key)
        c = control.get(key) if control is not None else None
        shim_slower = s is not None and any(j is not None and j[0] for j in (judge(k, s, n) for k in VERDICT_KEYS))
        control_off = c is not None and testable(min(len(c["per_round"]), len(n["per_round"]))) and \
            any(control_off_native(k, c, n, None, None) for k in VERDICT_KEYS)
        if shim_slower or control_off:
            print(f"{key[0]} {key[1]}")


def parse_args(argv):
    """(files, again files or None, flagged?)"""
    flag = "--flagged" in argv
    argv = [a for a in argv if a != "--flagged"]
    again = None
    if "--again" in argv:
        i = argv.index("--again")
        again, argv = argv[i + 1:], argv[:i]
    if len(argv) < 2 or (again is not None and len(again) < 2):
        sys.exit(__doc__.split("Usage: ", 1)[1].split("Exit status")[0])
    return argv, again, flag


def main():
    files, again_files, flag = parse_args(sys.argv[1:])
    native, shim = load(files[0]), load(files[1])
    control = load(files[2]) if len(files) > 2 else None
    if flag:
        flagged(native, shim, control)
        return
    again = [load(f) for f in again_files] if again_files is not None else None
    native2, shim2 = (again[0], again[1]) if again else ({}, {})
    control2 = again[2] if again and len(again) > 2 else {}
    control_head = f" {'control':>13} |" if control is not None else ""
    print(f"{'op':<10} {'size':>8} | {'median native':>13} {'unstall':>8} | {'p99 native':>10} {'unstall':>8} | "
          f"{'worst native':>12} {'unstall':>8} | {'first native':>12} {'unstall':>8} |{control_head} data | verdict")
    slower = by_chance = noisy = judged_again = 0
    control_differs, control_rows = [0, 0], [0, 0]  # [rows too few rounds to test, testable rows]
    rounds = set()
    ops = list(dict.fromkeys(op for op, _ in native))  # in the order they first appear
    for key in sorted(native, key=lambda k: (ops.index(k[0]), k[1])):
        n = native[key]
        s = shim.get(key)
        if s is None:
            continue
        rounds.add((min(n["rounds"], s["rounds"]), key[1]))
        judged = [j for j in (judge_again(k, s, n, (shim2.get(key), native2.get(key))) for k in VERDICT_KEYS)
                  if j is not None]
        bad = [text for is_slower, text in judged if is_slower]
        chance = [text for is_slower, text in judged if not is_slower]
        slower += bool(bad)
        judged_again += any(" again " in text or " not again:" in text for _, text in judged)
        by_chance += bool(chance) and not bad
        verdict = "slower: " + ",".join(bad) if bad else "ok"
        if chance:
            verdict += "; by chance: " + ",".join(chance)
        data = "ok" if n["ok"] and s["ok"] else "BAD"
        c = control.get(key) if control is not None else None
        control_cols = "" if control is None else f" {'-':>13} |"
        if c is not None:
            control_cols = f" {c['median_us']:>6.1f} {c['p99_us']:>6.1f} |"
            data = data if c["ok"] else "BAD"
            differs_now = any(control_off_native(k, c, n, control2.get(key), native2.get(key)) for k in VERDICT_KEYS)
            can_test = testable(min(len(c["per_round"]), len(n["per_round"])))
            control_differs[can_test] += differs_now
            control_rows[can_test] += 1
            off = [k[:-3] for k in VERDICT_KEYS if differs(c[k], n[k])]
            if off:
                noisy += 1
                verdict += " (control off native: " + ",".join(off) + ")"
        print(f"{key[0]:<10} {size(key[1]):>8} | {n['median_us']:>13.1f} {s['median_us']:>8.1f} | "
              f"{n['p99_us']:>10.1f} {s['p99_us']:>8.1f} | {n['max_us']:>12.1f} {s['max_us']:>8.1f} | "
              f"{n['first_us']:>12.1f} {s['first_us']:>8.1f} |{control_cols} {data:>4} | {verdict}")
    print(f"rows where unstall is slower: {slower} (a median, p99 or first call > 3% and > 1 us worse, in more of "
          f"the paired rounds than chance explains: one-sided sign test, p < {ALPHA:g}; n/N: the rounds whose own "
          "figure is that much worse, against those where native's is; with 6 rounds or fewer, the figure alone)")
    print(f"rows worse by the margin in a figure that chance explains, and not slower: {by_chance}")
    if again is not None:
        again_rounds = sorted({r["rounds"] for r in native2.values()})
        print(f"rows of unstall judged again in a second sample ({', '.join(map(str, again_rounds))} rounds, the row's "
              f"op in fresh processes): {judged_again}; a figure is slower only where both samples say so "
              "(\"again\"; \"not again\": the second did not)")
    if control is not None:
        print(f"rows where the control (the shim loaded, UNSTALL_DISABLE=1) is as far from native, either way, "
              f"by the figures: {noisy}; by the verdict's rule: {control_differs[True]} of the {control_rows[True]} "
              f"rows with rounds enough to test" + (f", {control_differs[False]} of the {control_rows[False]} with "
                                                    "too few (the figure alone)" if control_rows[False] else ""))
    many = max((r for r, _ in rounds), default=1)
    print("times in microseconds on the calling thread; first: the row's first call (a process's first copy for "
          "the first row of its processes)" + (f"; {rounds_text(rounds)} of processes, native and unstall" + (", and the control," if control is not None else "")
                              + " taking turns: median, p99 and worst "
                              "over every round's calls, first the median of the rounds' first calls" if many > 1 else "")
          + ("; control: median and p99 of the same program with the shim loaded and disabled" if control is not None
             else ""))
    gaps = sorted({row["gap_us"] for row in list(native.values()) + list(shim.values())} - {0})
    if gaps:
        print(f"each call but a row's first after the host slept {' or '.join(str(g) for g in gaps)} us "
              "(SMALLCOPY_GAP_US): the host idle before it, as a program's copy between two steps")


if __name__ == "__main__":
    main()
