#!/usr/bin/env python3
"""chart.py - make bench's picture: native vs unstall per case (bars scaled per
row, the ratio beside them) and a timeline of one scenario (case B, a 256 MiB
pageable H2D behind a 200 ms kernel): when the host thread was inside CUDA
calls and when the stream was busy, natively and under unstall. Writes an SVG
and the same figures as JSON. Python 3 standard library only.

Usage:
  chart.py --native DIR --shim DIR [--timeline DIR] [--about TEXT] [--json OUT] [--svg OUT]
  chart.py --from-table BENCH.md [--timeline DIR] [--about TEXT] [--json OUT] [--svg OUT]
  chart.py --from-json FIGURES.json [--svg OUT]

  --native, --shim  tests/gpu/runner.sh's OUT/native and OUT/shim (RESULT lines;
                    the rows are tools/bench/table.py's)
  --from-table      a table make bench printed (e.g. the table in docs/measurements/2026-11-28-h200x2-final.md)
  --timeline DIR    native.out/.json and unstall.out/.json: the scenario's RESULT
                    line and the shim's JSON report (UNSTALL_REPORT) of one run
                    with UNSTALL_FIX=0 (the shim only watching: native copies) and
                    one fixing. Host bars: the report's events (held_ns); the
                    shim's pipeline bars: its spans; the stream: the kernel, then
                    the copy until the RESULT line's done_ms.
  --about           who and where: machine, driver, commit, date (shown in the chart)
"""
import argparse
import json
import os
import re
import sys
from xml.sax.saxutils import escape

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "scenarios"))

TIMELINE_TEST = ("B", "held_large")  # the scenario drawn as a timeline
TIMELINE_RULE = "pageable_h2d"       # the finding of its copy
NATIVE_COLOR, UNSTALL_COLOR = "#9a9a9a", "#2b6cb0"
RULE_COLORS = {"pageable_h2d": "#d9534f", "pageable_d2h": "#d9534f", "staged_peer": "#d9534f",
               "explicit_sync": "#8c8c8c"}


# --- figures ---------------------------------------------------------------------


def ratio_of(native, unstall):
    if isinstance(native, (int, float)) and isinstance(unstall, (int, float)) and native:
        return unstall / native
    return None


def improved(row):
    """True where unstall is better than native, False where worse, None: equal or no numbers."""
    r = row["ratio"]
    if r is None or abs(r - 1) < 0.05:
        return None
    return (r > 1) == (row["better"] == "higher")


def rows_from_runs(native_dir, shim_dir):
    from results import load_runs
    import table
    native, shim = load_runs(native_dir), load_runs(shim_dir)
    out = []
    for row in table.rows():
        nv, nrow = row.get(native)
        sv, srow = row.get(shim)
        scale = lambda v: v * row.scale if isinstance(v, float) else v  # noqa: E731
        nv, sv = scale(nv), scale(sv)
        if row.target_from is not None:  # a target that derives from the run (the first-use rows'), as the table's
            row.target, row.target_text = row.target_from(shim, native)
        met = None if row.target is None or sv is None else bool(row.target(sv / row.scale if isinstance(sv, float)
                                                                           else sv))
        out.append({"label": row.label(nrow or srow), "unit": row.unit, "better": row.better, "native": nv,
                    "unstall": sv, "ratio": ratio_of(nv, sv), "target": row.target_text, "target_met": met})
    return out


_VALUE = re.compile(r"^(-?[\d.]+) (GB/s|ms|us)$")


def cell_value(text):
    m = _VALUE.match(text.strip())
    if m:
        return float(m.group(1)), m.group(2)
    return (None if text.strip() == "-" else text.strip()), None


def rows_from_table(path):
    """The rows of a table make bench printed (| case | native | unstall | target | ratio | met |)."""
    out = []
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 6 or cells[0] == "case" or set(cells[0]) <= set("-"):
                continue
            nv, nunit = cell_value(cells[1])
            sv, sunit = cell_value(cells[2])
            unit = nunit or sunit or ""
            better = "higher" if unit == "GB/s" else "lower" if unit else "text"
            out.append({"label": cells[0], "unit": unit, "better": better, "native": nv, "unstall": sv,
                        "ratio": ratio_of(nv, sv), "target": cells[3].replace(f" {unit}", "") if unit else cells[3],
                        "target_met": {"yes": True, "NO": False}.get(cells[5])})
    return out


def _result(path):
    from results import by_test, parse_text
    try:
        with open(path) as f:
            return by_test(parse_text(f.read())).get(TIMELINE_TEST)
    except OSError:
        return None


def timeline_run(report_path, out_path):
    """One run of the timeline scenario: bars in ms from the start of its copy call."""
    with open(report_path) as f:
        rep = json.load(f)
    res = _result(out_path)
    if res is None:
        raise ValueError(f"{out_path}: no RESULT line of case {TIMELINE_TEST[0]} test {TIMELINE_TEST[1]}")
    nbytes = int(float(res["bytes"]))
    copies = [e for e in rep.get("events", []) if e["rule"] == TIMELINE_RULE and e["bytes"] == nbytes]
    if not copies:
        raise ValueError(f"{report_path}: no {TIMELINE_RULE} event of {nbytes} bytes")
    copy = copies[-1]  # the test's copy: the program warms the path up first
    t0, tid = copy["start_ns"], copy["tid"]
    kernel_ms, done_ms = float(res["kernel_ms"]), float(res["done_ms"])
    end_ms = max(done_ms, copy["held_ns"] / 1e6) * 1.06
    ms = lambda ns: (ns - t0) / 1e6  # noqa: E731

    def inside(a, b):
        return b > -0.02 * end_ms and a < end_ms

    host = [{"start_ms": ms(e["start_ns"]), "end_ms": ms(e["start_ns"] + e["held_ns"]), "rule": e["rule"],
             "fixed": e.get("fixed", False)} for e in rep.get("events", []) if e["tid"] == tid
            and inside(ms(e["start_ns"]), ms(e["start_ns"] + e["held_ns"]))]
    pipeline = [{"start_ms": ms(s["start_ns"]), "end_ms": ms(s["end_ns"]), "name": s["name"], "bytes": s["bytes"]}
                for s in rep.get("spans", []) if inside(ms(s["start_ns"]), ms(s["end_ns"]))]
    stream = [{"start_ms": 0.0, "end_ms": kernel_ms, "what": f"kernel ({kernel_ms:g} ms)"},
              {"start_ms": kernel_ms, "end_ms": done_ms, "what": f"the copy, done at {done_ms:.1f} ms"}]
    return {"host": host, "pipeline": pipeline, "stream": stream, "held_ms": float(res["held_ms"]),
            "done_ms": done_ms, "end_ms": end_ms, "program": rep.get("cmdline", "")}


def timeline(directory):
    runs = {name: timeline_run(os.path.join(directory, f"{name}.json"), os.path.join(directory, f"{name}.out"))
            for name in ("native", "unstall")}
    return {"scenario": "case B, a 256 MiB pageable H2D behind a 200 ms kernel (held_large)",
            "native_means": "the shim watching with UNSTALL_FIX=0: the runtime's own copy",
            "runs": runs}


# --- SVG -------------------------------------------------------------------------


def fmt(v, unit):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if unit == "GB/s":
        return f"{v:.1f} GB/s"
    if unit == "us":
        return f"{v:.0f} us"
    return f"{v:.3f} {unit}" if v < 10 else f"{v:.1f} {unit}"


class Svg:
    def __init__(self, width):
        self.width, self.parts, self.y = width, [], 0

    def text(self, x, y, s, size=12, anchor="start", weight="normal", fill="#222", cls=None):
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
                          f'font-weight="{weight}" fill="{fill}"{c}>{escape(s)}</text>')

    def rect(self, x, y, w, h, fill, cls, title, **data):
        attrs = "".join(f' data-{k}="{escape(str(v))}"' for k, v in data.items())
        self.parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.5):.1f}" height="{h:.1f}" fill="{fill}" '
                          f'class="{cls}"{attrs}><title>{escape(title)}</title></rect>')

    def line(self, x1, y1, x2, y2, stroke="#ccc"):
        self.parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}"/>')

    def render(self):
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.y:.0f}" '
                f'viewBox="0 0 {self.width} {self.y:.0f}" font-family="DejaVu Sans, Arial, sans-serif">\n'
                f'<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(self.parts) + "\n</svg>\n")


def shorten(s, n):
    return s if len(s) <= n else s[:n - 1] + "\u2026"


def draw_rows(svg, rows):
    x0, bar_w, right = 20, 560, svg.width - 20
    svg.text(x0, svg.y + 20, "native vs unstall, per case (bars scaled per row; ratio = unstall / native)",
             size=15, weight="bold")
    svg.rect(right - 250, svg.y + 9, 12, 12, NATIVE_COLOR, "legend native", "native")
    svg.text(right - 234, svg.y + 20, "native")
    svg.rect(right - 170, svg.y + 9, 12, 12, UNSTALL_COLOR, "legend unstall", "unstall")
    svg.text(right - 154, svg.y + 20, "unstall")
    svg.y += 34
    for i, row in enumerate(rows):
        y = svg.y
        svg.text(x0, y + 12, shorten(row["label"], 130), size=11.5)
        numeric = [v for v in (row["native"], row["unstall"]) if isinstance(v, (int, float))]
        top = max(numeric) if numeric else 0
        for k, (run, color) in enumerate((("native", NATIVE_COLOR), ("unstall", UNSTALL_COLOR))):
            v, by = row[run], y + 17 + k * 13
            if isinstance(v, (int, float)):
                w = bar_w * v / top if top > 0 else 0
                svg.rect(x0, by, w, 11, color, f"bar {run}", f"{run}: {fmt(v, row['unit'])}", row=i)
                svg.text(x0 + w + 5, by + 9.5, fmt(v, row["unit"]), size=10.5)
            else:
                svg.text(x0, by + 9.5, f"{run}: {fmt(v, row['unit'])}", size=10.5,
                         fill=color if run == "unstall" else "#555", cls=f"outcome {run}")
        good = improved(row)
        if row["ratio"] is not None:
            r = row["ratio"]
            note = f"\u00d7{r:.2f}" if r >= 0.01 else f"\u00d7{r:.4f}"
            if good is not None and row["better"] == "lower" and r > 0 and 1 / r >= 2:
                note += f" ({1 / r:.0f}\u00d7 less)"
            elif good is not None:
                note += " better" if good else " worse"
            svg.text(right, y + 35, note, size=12, anchor="end", weight="bold",
                     fill={True: "#2f855a", False: "#c53030", None: "#444"}[good], cls="ratio")
        if row.get("target") not in (None, "-", ""):
            met = {True: "met", False: "not met", None: ""}[row.get("target_met")]
            svg.text(right, y + 22, f"target {row['target']} {row['unit']} {met}".strip(), size=10, anchor="end",
                     fill="#666")
        svg.line(x0, y + 46, right, y + 46, "#eee")
        svg.y += 50


def nice_step(span):
    for step in (1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000):
        if span / step <= 10:
            return step
    return 2000


def draw_timeline(svg, tl):
    x0, label_w, right = 20, 230, svg.width - 20
    plot_x, plot_w = x0 + label_w, right - x0 - label_w
    runs = tl["runs"]
    end = max(r["end_ms"] for r in runs.values())
    scale = lambda t: plot_x + plot_w * max(0.0, min(t, end)) / end  # noqa: E731
    svg.y += 14
    svg.text(x0, svg.y + 16, "timeline: " + tl["scenario"], size=15, weight="bold")
    svg.y += 26
    svg.text(x0, svg.y + 12, f"native: {tl['native_means']}; times in ms from the copy call; hover a bar for its "
             "rule", size=11, fill="#555")
    svg.y += 22
    lanes = (("host", "host thread in CUDA calls"), ("pipeline", "unstall pipeline (host side)"),
             ("stream", "the stream (kernel, copy)"))
    for name in ("native", "unstall"):
        r = runs[name]
        svg.text(x0, svg.y + 14, f"{name}: caller held {r['held_ms']:.1f} ms, copy done at {r['done_ms']:.1f} ms",
                 size=12.5, weight="bold", fill=UNSTALL_COLOR if name == "unstall" else "#444")
        svg.y += 22
        for lane, title in lanes:
            bars = r[lane]
            if lane == "pipeline" and not bars and name == "native":
                continue
            svg.text(x0 + 10, svg.y + 11, title, size=11)
            svg.rect(plot_x, svg.y, plot_w, 14, "#f4f4f4", "lane", title)
            for b in bars:
                a, z = scale(b["start_ms"]), scale(b["end_ms"])
                if lane == "host":
                    color, what = RULE_COLORS.get(b["rule"], "#dd8f3c"), b["rule"] + (" (fixed)" if b["fixed"]
                                                                                       else "")
                elif lane == "pipeline":
                    color, what = UNSTALL_COLOR, f"{b['name']}, {b['bytes']} bytes"
                else:
                    color, what = ("#6b46c1" if "kernel" in b["what"] else "#38a169"), b["what"]
                svg.rect(a, svg.y + 1, z - a, 12, color, f"tl {lane}",
                         f"{what}: {b['start_ms']:.2f} to {b['end_ms']:.2f} ms", run=name)
            svg.y += 18
        svg.y += 8
    step = nice_step(end)
    t = 0
    while t <= end:
        x = scale(t)
        svg.line(x, svg.y - 4, x, svg.y + 2, "#888")
        svg.text(x, svg.y + 14, f"{t:g}", size=10, anchor="middle", fill="#555")
        t += step
    svg.text(right, svg.y + 28, "ms", size=10, anchor="end", fill="#555")
    svg.y += 34


def draw(fig):
    svg = Svg(1000)
    svg.text(20, 28, "unstall bench", size=20, weight="bold")
    svg.text(20, 48, shorten(fig.get("about") or "", 160), size=11.5, fill="#555", cls="about")
    svg.y = 58
    draw_rows(svg, fig["rows"])
    if fig.get("timeline"):
        if fig.get("timeline_about"):
            svg.y += 8
            svg.text(20, svg.y + 12, shorten("timeline measured on: " + fig["timeline_about"], 160), size=11.5,
                     fill="#555", cls="about")
            svg.y += 14
        draw_timeline(svg, fig["timeline"])
    svg.y += 6
    return svg.render()


def main(argv):
    ap = argparse.ArgumentParser(description="make bench's chart and figures")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--native")
    src.add_argument("--from-table")
    src.add_argument("--from-json")
    ap.add_argument("--shim")
    ap.add_argument("--timeline")
    ap.add_argument("--about", default="")
    ap.add_argument("--timeline-about", default="", help="where the timeline came from, when not --about's run")
    ap.add_argument("--json")
    ap.add_argument("--svg")
    a = ap.parse_args(argv)
    if a.from_json:
        with open(a.from_json) as f:
            fig = json.load(f)
    else:
        if a.native and not a.shim:
            ap.error("--native needs --shim")
        rows = rows_from_runs(a.native, a.shim) if a.native else rows_from_table(a.from_table)
        if not rows or all(r["native"] is None and r["unstall"] is None for r in rows):
            print("chart: no figures in the input", file=sys.stderr)
            return 1
        fig = {"version": 1, "about": a.about, "rows": rows}
        if a.timeline:
            fig["timeline"] = timeline(a.timeline)
            if a.timeline_about:
                fig["timeline_about"] = a.timeline_about
    if a.json:
        with open(a.json, "w") as f:
            json.dump(fig, f, indent=1)
            f.write("\n")
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(draw(fig))
    if not a.json and not a.svg:
        json.dump(fig, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
