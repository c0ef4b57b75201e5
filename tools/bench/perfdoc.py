#!/usr/bin/env python3
"""perfdoc.py - docs/performance.md and the README's results table, written
from the figures `make bench` saved (its bench.json: tools/bench/chart.py's
rows, native and unstall side by side from one run), so that the documents
show what the recorded runs measured and nothing else.

  perfdoc.py record BENCH_JSON --kind KIND [--commit C] [--date D] [--command CMD]
      copy a run's figures into docs/measurements (named DATE-KIND.bench.json) with
      where and how they were measured (KIND: the machine, e.g. h200x2, h100)
  perfdoc.py write      rewrite docs/performance.md, its chart (docs/bench-chart.svg,
                        tools/bench/chart.py's drawing) and the README's table
  perfdoc.py check      exit 1 when any of them is not what `write` would write

Per machine kind the newest recording is shown; older ones stay in git.
The README's table takes the rows named in README_ROWS from the recording
named first in README_KINDS that has them. Python 3 standard library only.
"""
import argparse
import datetime
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MEASUREMENTS = os.path.join(ROOT, "docs", "measurements")
PERFORMANCE = os.path.join(ROOT, "docs", "performance.md")
CHART = os.path.join(ROOT, "docs", "bench-chart.svg")
README = os.path.join(ROOT, "README.md")
BEGIN, END = "<!-- perfdoc:begin (tools/bench/perfdoc.py write) -->", "<!-- perfdoc:end -->"

# the README's rows: label prefixes, in this order (one row each, the first match)
README_ROWS = [
    "A: 256 MiB staged peer copy, cudaMemcpyPeerAsync",
    "A: independent 64 MiB copy on stream B",
    "B: 16 MiB pageable H2D behind a 200 ms kernel",
    "B: 256 MiB pageable H2D behind a 200 ms kernel",
    "B: a process's first 16 MiB pageable H2D",
    "B: a process's first 256 MiB pageable H2D",
    "B: 256 MiB pageable H2D throughput",
    "C: 256 MiB pageable D2H throughput",
    "C: launch latency of another thread during a 256 MiB pageable D2H loop, 3 processes taking turns",
    "C: launch latency of another thread during a 256 MiB pageable D2H loop (max)",
    "C: a 4 B D2H on stream 0 whose stream waits",
    "D: the same, fix_busy_d2d=1 (unstall column), created context, busy",
    "E: the same, legacy_stream=ordered",
]
README_KINDS = ["h200x2", "h100x2", "h200", "h100"]


def chart_svg(newest):
    """tools/bench/chart.py's drawing of the README's recording (its rows, and
    the timeline when the run kept one), or None without a recording."""
    rec = readme_recording(newest)
    if rec is None:
        return None
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import chart  # noqa: E402 (beside this file)
    fig = dict(rec, about=where(rec))
    return chart.draw(fig)


def readme_recording(newest):
    return next((newest[k] for k in README_KINDS if k in newest), None)


def recordings():
    """{kind: newest recording}, each a dict with its file name added."""
    newest = {}
    for path in sorted(glob.glob(os.path.join(MEASUREMENTS, "*.bench.json"))):
        with open(path) as f:
            rec = json.load(f)
        rec["file"] = os.path.basename(path)
        for key in ("kind", "date", "commit", "command", "machine", "rows"):
            if key not in rec:
                sys.exit(f"perfdoc: {path} lacks '{key}' (record it with perfdoc.py record)")
        kind = rec["kind"]
        if kind not in newest or (rec["date"], rec["file"]) > (newest[kind]["date"], newest[kind]["file"]):
            newest[kind] = rec
    return newest


def cell(value, unit):
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    text = f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    if "." not in text and "e" not in text:
        text += ".0"
    return f"{text} {unit}".strip()


def met(row):
    if row.get("target_met") is None:
        return "-"
    return "yes" if row["target_met"] else "**no**"


def target(row):
    text = row.get("target")
    if text in (None, "", "-"):
        return "-"
    text = str(text)
    unit = row.get("unit") or ""
    # a bare bound (">= 50") takes the row's unit; a worded one ("completes") stands alone
    return f"{text} {unit}" if unit and re.fullmatch(r"[<>=]+ ?[0-9.]+", text) else text


def ratio(row):
    return f"{row['ratio']:.2f}" if isinstance(row.get("ratio"), (int, float)) else "-"


def table(rows, columns):
    out = ["| " + " | ".join(c[0] for c in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        out.append("| " + " | ".join(c[1](row) for c in columns) + " |")
    return out


FULL_COLUMNS = [
    ("case", lambda r: r["label"]),
    ("native", lambda r: cell(r.get("native"), r.get("unit", ""))),
    ("unstall", lambda r: cell(r.get("unstall"), r.get("unit", ""))),
    ("target", lambda r: target(r)),
    ("unstall / native", ratio),
    ("target met", met),
]
SHORT_COLUMNS = [FULL_COLUMNS[0], FULL_COLUMNS[1], FULL_COLUMNS[2], FULL_COLUMNS[3], FULL_COLUMNS[5]]


def where(rec, machine=True):
    return ((f"{rec['machine']}; " if machine else "") + f"commit `{rec['commit']}`, {rec['date']}; "
            f"`{rec['command']}`; figures: `docs/measurements/{rec['file']}`")


def performance_md(newest):
    out = [
        "# Performance",
        "",
        "<!-- written by tools/bench/perfdoc.py write from docs/measurements/*.bench.json; do not edit -->",
        "",
        "What `make bench` measured on each kind of machine, native and unstall side by side from one",
        "run (the newest recording per kind; earlier ones are in git). A row's ratio is unstall / native:",
        "for times, below 1 is faster. Targets are the project's (`docs/contract.md` says what \"never",
        "slower\" means); \"no\" marks a target not met in that run. How each row is measured:",
        "`tools/bench/table.py` (its rows) and `docs/scenarios.md` (the programs).",
        "",
        "To add a run: `make bench` on a GPU machine, then",
        "`tools/bench/perfdoc.py record build/bench.json --kind KIND` and `tools/bench/perfdoc.py write`.",
        "`make check` fails while this page or the README's table is not what the recordings give.",
        "Other figures the docs cite, each with its command: `docs/measurements/README.md`.",
        "",
    ]
    order = sorted(newest, key=lambda k: (README_KINDS.index(k) if k in README_KINDS else 99, k))
    for kind in order:
        rec = newest[kind]
        out += [f"## {rec['machine']}", "", where(rec, machine=False)[0].upper() + where(rec, machine=False)[1:] + ".", ""]
        if rec.get("notes"):
            out += [rec["notes"], ""]
        if rec is readme_recording(newest):
            out += ["![native vs unstall per row, this run](bench-chart.svg)", ""]
        out += table(rec["rows"], FULL_COLUMNS) + [""]
    return "\n".join(out)


def readme_table(newest):
    for kind in README_KINDS:
        rec = newest.get(kind)
        if rec is None:
            continue
        rows = []
        for prefix in README_ROWS:
            match = next((r for r in rec["rows"] if r["label"].startswith(prefix)), None)
            if match is not None:
                rows.append(match)
        if rows:
            return "\n".join([BEGIN, "", where(rec) + ".", ""] + table(rows, SHORT_COLUMNS) + ["", END])
    return "\n".join([BEGIN, "", "(no recording: tools/bench/perfdoc.py record)", "", END])


def readme_with(text, block):
    if BEGIN not in text or END not in text:
        sys.exit(f"perfdoc: README.md lacks the markers {BEGIN} ... {END}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + block + tail


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cmd_record(a):
    with open(a.bench_json) as f:
        rec = json.load(f)
    if "rows" not in rec:
        sys.exit(f"perfdoc: {a.bench_json} has no rows (make bench's bench.json expected)")
    if not re.fullmatch(r"[a-z0-9]+", a.kind):
        sys.exit("perfdoc: --kind is a short machine name: letters and digits (h200x2, h100)")
    rec.update(kind=a.kind, date=a.date or datetime.date.today().isoformat(), commit=a.commit or git_commit(),
               command=a.command, machine=a.machine or rec.get("about") or a.kind)
    if a.notes:
        rec["notes"] = a.notes
    path = os.path.join(a.dir, f"{rec['date']}-{a.kind}.bench.json")
    with open(path, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    print(f"perfdoc: recorded {path}; add it to docs/measurements/README.md, then perfdoc.py write")


def expected():
    newest = recordings()
    with open(README) as f:
        readme = f.read()
    return performance_md(newest), readme_with(readme, readme_table(newest)), readme, chart_svg(newest)


def cmd_write(_a):
    perf, readme, _, svg = expected()
    with open(PERFORMANCE, "w") as f:
        f.write(perf)
    if svg is not None:
        with open(CHART, "w") as f:
            f.write(svg)
    with open(README, "w") as f:
        f.write(readme)
    print("perfdoc: wrote docs/performance.md, docs/bench-chart.svg and the README's table")


def cmd_check(_a):
    perf, readme, current, svg = expected()
    stale = []
    with open(PERFORMANCE) as f:
        if f.read() != perf:
            stale.append("docs/performance.md")
    if svg is not None:
        try:
            with open(CHART) as f:
                if f.read() != svg:
                    stale.append("docs/bench-chart.svg")
        except FileNotFoundError:
            stale.append("docs/bench-chart.svg (missing)")
    if current != readme:
        stale.append("README.md's results table")
    if stale:
        print("perfdoc: not what the recordings give: " + ", ".join(stale) + " (run tools/bench/perfdoc.py write)")
        return 1
    print("perfdoc: docs/performance.md and the README's table match the recordings")
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("bench_json")
    r.add_argument("--kind", required=True)
    r.add_argument("--machine", help="the machine in words (default: the run's own 'about')")
    r.add_argument("--commit")
    r.add_argument("--date")
    r.add_argument("--command", default="make bench")
    r.add_argument("--notes")
    r.add_argument("--dir", default=MEASUREMENTS)
    sub.add_parser("write")
    sub.add_parser("check")
    a = p.parse_args(argv)
    return {"record": cmd_record, "write": cmd_write, "check": cmd_check}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
