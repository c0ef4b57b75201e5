"""unstall_html: the job as one page (unstall-report --html OUT report*.json).

One self-contained HTML file for one process or a whole multi-rank, multi-host
job: inline CSS and inline SVG, no script, no font, no image, no link out of
the page (every href is an anchor in it), so that it opens offline, from a
mail or a cluster's file system. Sections: the job (hosts, ranks, duration,
how each process ended); time held per rule; time held per rank, grouped by
host (every rank up to ALL_RANKS processes; beyond, the worst ranks, one row
per host and the distribution over ranks); the top call sites with their
Python and native frames; a timeline of the stalls and the rewritten copies
per device and stream; what unstall fixed and what to change; how each
process ended. Every section is bounded: at 1024 ranks the page is a few
hundred KiB, never one row per rank.

The data come from unstall-report's own helpers (merge, rule_totals, ended,
...), passed in as its namespace, so that the page, the text and the JSON
agree. Python 3 standard library only.
"""
import html
import math
from types import SimpleNamespace

ALL_RANKS = 32          # up to this many processes, one bar per rank
HOST_ROWS = 64          # rows of the per-host summary (the rest summed in one line)
TIMELINE_PROCS = 8      # processes drawn in the timeline (the worst by time held)
TIMELINE_LANES = 32     # lanes in all (device and stream of a process)
LANE_RECTS = 200        # marks per lane at most (neighbours merged)
NATIVE_SHOWN = 4        # native frames shown open; the rest under "more"
ENDED_ROWS = 50         # processes listed by name in a large job (the rest counted)
HIST_BINS = 20

PALETTE = ("#d1495b", "#edae49", "#00798c", "#30638e", "#66a182", "#8d6a9f", "#e07a5f", "#3d405b",
           "#81b29a", "#c75146", "#5f0f40", "#0f4c5c")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#f6f7f9;padding:18px 28px}
header h1{margin:0 0 6px;font-size:22px}
header dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:8px 0 0}
header dt{color:#aab2c0}header dd{margin:0}
nav{padding:8px 28px;background:#e9ecf1;font-size:13px}nav a{margin-right:14px;color:#30638e}
main{padding:4px 28px 28px;max-width:1400px}
section{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:12px 18px;margin:16px 0}
h2{font-size:18px;margin:4px 0 10px}h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;font-size:13px}th,td{padding:3px 8px;border-bottom:1px solid #eceef2;
text-align:left;vertical-align:top}th{background:#f1f3f6}td.n,th.n{text-align:right;white-space:nowrap}
code,.frames{font:12px/1.4 ui-monospace,"DejaVu Sans Mono",monospace}
.frames{margin:2px 0;padding-left:18px}.frames li{white-space:pre-wrap;word-break:break-all}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.sev-high{color:#b3261e;font-weight:600}.sev-medium{color:#a15c00}.sev-low{color:#4a5568}
.note{color:#5a6372;font-size:13px}.bad{color:#b3261e}.legend span{margin-right:14px;white-space:nowrap}
svg{display:block;max-width:100%;height:auto}svg text{font:11px system-ui,sans-serif;fill:#1d2330}
svg .ax{stroke:#c6ccd6;stroke-width:1}svg .hostrow{fill:#eef1f5}
td p,td details{margin:2px 0}.fix{margin:4px 0 10px}.fix b{display:inline-block;min-width:160px}
footer{padding:10px 28px 24px;color:#5a6372;font-size:12px}
"""


def esc(text):
    return html.escape(str(text), quote=True)


class Page:
    """The facts of a job, computed once from its reports with unstall-report's helpers."""

    def __init__(self, reports, tool, top, now_ns):
        t = tool if isinstance(tool, SimpleNamespace) else SimpleNamespace(**tool)
        self.t = t
        self.top = max(1, top)
        self.now_ns = now_ns
        self.reports = sorted(reports, key=t.process_sort_key)
        self.by_host = t.several_hosts(self.reports)
        self.rows, self.fixes = t.merge(self.reports)
        self.totals = t.rule_totals(self.rows)
        self.color = {r["rule"]: PALETTE[i % len(PALETTE)] for i, r in enumerate(self.totals)}
        self.hosts = sorted({t.host_of(r) for r in self.reports})
        # per process: its label, its time held per rule, its totals
        self.procs = []
        for r in self.reports:
            per_rule = {}
            for f in r["findings"]:
                per_rule[f["rule"]] = per_rule.get(f["rule"], 0) + f.get("total_ns", 0)
                self.color.setdefault(f["rule"], PALETTE[len(self.color) % len(PALETTE)])
            rank = f"rank {r['rank']}" if r.get("rank") is not None else f"pid {r.get('pid')}"
            self.procs.append({"report": r, "label": t.process_label(r, self.by_host), "host": t.host_of(r),
                               "rank": rank, "who": f"{t.host_of(r)} {rank}" if self.by_host else rank,
                               "per_rule": per_rule, "ended": t.ended(r, now_ns), **t.process_totals(r)})

    def swatch(self, rule):
        return f'<span class="sw" style="background:{self.color.get(rule, "#999")}"></span>'

    def rule_order(self):
        return [r["rule"] for r in self.totals]


# --- the job ---------------------------------------------------------------------------------


def wall_ns(report, mono_ns):
    clock = report.get("clock") or {}
    return clock.get("realtime_ns", 0) + (mono_ns - clock.get("monotonic_ns", 0))


def job_span(reports):
    """(first start, last end) on the wall clock in ns, or None."""
    starts, ends = [], []
    for r in reports:
        clock = r.get("clock") or {}
        if clock.get("realtime_ns"):
            starts.append(clock["realtime_ns"])
            if r.get("ended_ns"):
                ends.append(wall_ns(r, r["ended_ns"]))
    if not starts or not ends:
        return None
    return min(starts), max(ends)


def ending_kind(text):
    """ "snapshot, 12 s old" counts as "snapshot" in the summaries."""
    return text.split(",")[0]


def endings_summary(procs):
    counts = {}
    for p in procs:
        counts[ending_kind(p["ended"])] = counts.get(ending_kind(p["ended"]), 0) + 1
    order = sorted(counts, key=lambda k: (k != "exited", k))
    return ", ".join(f"{counts[k]} {k}" for k in order)


def list_bounded(items, shown=3):
    items = list(items)
    if len(items) <= shown:
        return ", ".join(items)
    return ", ".join(items[:shown]) + f" and {len(items) - shown} more"


def render_header(page):
    t = page.t
    n = len(page.reports)
    programs = sorted({r.get("cmdline") or r.get("program") or "?" for r in page.reports})
    span = job_span(page.reports)
    held = sum(p["total_ns"] for p in page.procs)
    calls = sum(p["count"] for p in page.procs)
    fixed = sum(p["fixed"] for p in page.procs)
    hosts = page.hosts
    facts = [
        ("processes", f"{n} ({t.describe_ranks(page.reports)})"),
        ("hosts", f"{len(hosts)}: {list_bounded(hosts, 6)}"),
        ("program", list_bounded(programs)),
        ("mode", "/".join(sorted({r.get("mode", "?") for r in page.reports}))),
    ]
    if span:
        started = min(r.get("started", "") for r in page.reports if r.get("started")) \
            if any(r.get("started") for r in page.reports) else "?"
        facts.append(("duration", f"{t.human_time(max(0, span[1] - span[0]))} (started {started})"))
    facts.append(("ended", endings_summary(page.procs)))
    facts.append(("time held", f"{t.human_time(held)} in {calls} call{'s' if calls != 1 else ''}, {fixed} fixed"
                                 f" by unstall, summed over the processes"))
    out = ['<header id="job">', f"<h1>unstall report: {esc(list_bounded(programs, 1))}</h1>", "<dl>"]
    for k, v in facts:
        out.append(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>")
    out += ["</dl>", "</header>"]
    out.append('<nav><a href="#rules">rules</a><a href="#ranks">ranks</a><a href="#sites">call sites</a>'
               '<a href="#timeline">timeline</a><a href="#fixes">fixes</a><a href="#processes">processes</a></nav>')
    return out


# --- bars ----------------------------------------------------------------------------------------


def stacked_bars(page, rows, label_w=190, bar_w=760, row_h=18):
    """One horizontal stacked bar per row: rows are (label, {rule: ns}, kind), kind "host" for a
    group's heading row (shaded) and "rank" for a rank; the scale is the largest row."""
    t = page.t
    order = page.rule_order()
    biggest = max([sum(v.values()) for _, v, _ in rows] + [1])
    h = row_h * len(rows) + 6
    w = label_w + bar_w + 90
    out = [f'<svg class="bars" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img">']
    for i, (label, per_rule, kind) in enumerate(rows):
        y = 3 + i * row_h
        if kind == "host":
            out.append(f'<rect class="hostrow" x="0" y="{y}" width="{w}" height="{row_h}"/>')
        bold = ' font-weight="600"' if kind == "host" else ""
        out.append(f'<text x="{label_w - 6}" y="{y + row_h - 5}" text-anchor="end"{bold}>{esc(label)}</text>')
        x = float(label_w)
        for rule in order + sorted(set(per_rule) - set(order)):
            ns = per_rule.get(rule, 0)
            if ns <= 0:
                continue
            width = bar_w * ns / biggest
            out.append(f'<rect x="{x:.1f}" y="{y + 3}" width="{max(width, 0.5):.1f}" height="{row_h - 6}" '
                       f'fill="{page.color.get(rule, "#999")}"><title>{esc(label)}: {esc(rule)} '
                       f'{esc(t.human_time(ns))}</title></rect>')
            x += width
        out.append(f'<text x="{x + 5:.1f}" y="{y + row_h - 5}">{esc(t.human_time(sum(per_rule.values())))}</text>')
    out.append("</svg>")
    return out


def legend(page, rules=None):
    rules = rules if rules is not None else page.rule_order()
    return ['<p class="legend">' + "".join(f"<span>{page.swatch(r)}{esc(r)}</span>" for r in rules) + "</p>"]


def render_rules(page):
    t = page.t
    out = ['<section id="rules">', "<h2>Time held per rule</h2>"]
    if not page.totals:
        out += ['<p>no implicit synchronization seen</p>', "</section>"]
        return out
    out.append('<p class="note">The time the calls held the calling thread, summed over all processes.</p>')
    out += stacked_bars(page, [(r["rule"], {r["rule"]: r["total_ns"]}, "rule") for r in page.totals])
    out.append('<table><tr><th>rule</th><th>severity</th><th class="n">held</th><th class="n">calls</th>'
               '<th class="n">bytes</th><th class="n">fixed</th><th class="n">forbidden</th></tr>')
    for r in page.totals:
        out.append(f'<tr><td>{page.swatch(r["rule"])}{esc(r["rule"])}</td>'
                   f'<td class="sev-{esc(r["severity"])}">{esc(r["severity"])}</td>'
                   f'<td class="n">{esc(t.human_time(r["total_ns"]))}</td><td class="n">{r["count"]}</td>'
                   f'<td class="n">{esc(t.human_bytes(r["bytes"])) if r["bytes"] else "-"}</td>'
                   f'<td class="n">{r["fixed"]}</td><td class="n">{r["forbidden"]}</td></tr>')
    out += ["</table>", "</section>"]
    return out


def percentile(sorted_values, q):
    if not sorted_values:
        return 0
    i = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[i]


def histogram(page, values, w=900, h=160):
    """Ranks by time held: HIST_BINS equal bins from 0 to the largest."""
    t = page.t
    top = max(values + [1])
    bins = [0] * HIST_BINS
    for v in values:
        bins[min(HIST_BINS - 1, int(v * HIST_BINS / top))] += 1
    most = max(bins + [1])
    left, bottom, plot_w, plot_h = 40, h - 30, w - 60, h - 45
    bw = plot_w / HIST_BINS
    out = [f'<svg class="hist" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img">',
           f'<line class="ax" x1="{left}" y1="{bottom}" x2="{left + plot_w}" y2="{bottom}"/>']
    for i, c in enumerate(bins):
        lo, hi = top * i / HIST_BINS, top * (i + 1) / HIST_BINS
        bh = plot_h * c / most
        x = left + i * bw
        out.append(f'<rect x="{x + 1:.1f}" y="{bottom - bh:.1f}" width="{bw - 2:.1f}" height="{bh:.1f}" '
                   f'fill="#30638e"><title>{c} rank{"s" if c != 1 else ""} held '
                   f'{esc(t.human_time(int(lo)))} to {esc(t.human_time(int(hi)))}</title></rect>')
        if c:
            out.append(f'<text x="{x + bw / 2:.1f}" y="{bottom - bh - 3:.1f}" text-anchor="middle">{c}</text>')
    for i in (0, HIST_BINS // 2, HIST_BINS):
        out.append(f'<text x="{left + i * bw:.1f}" y="{bottom + 14}" text-anchor="middle">'
                   f'{esc(t.human_time(int(top * i / HIST_BINS)))}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{h - 2}" text-anchor="middle">time held per rank</text>')
    out.append(f'<text x="4" y="12">ranks</text>')
    out.append("</svg>")
    return out


def render_ranks(page):
    t = page.t
    procs = page.procs
    out = ['<section id="ranks">', "<h2>Time held per rank</h2>"]
    if not procs:
        return out + ["</section>"]
    out += legend(page)
    if len(procs) <= ALL_RANKS:
        rows = []
        for host in page.hosts:
            mine = [p for p in procs if p["host"] == host]
            if page.by_host:
                rows.append((f"{host} ({len(mine)} rank{'s' if len(mine) != 1 else ''})", sum_rules(mine), "host"))
            rows += [(p["rank"], p["per_rule"], "rank") for p in mine]
        out += stacked_bars(page, rows)
        return out + ["</section>"]
    worst = sorted(procs, key=lambda p: (-p["total_ns"], p["label"]))[:page.top]
    out.append(f"<h3>The {len(worst)} ranks that held longest (of {len(procs)})</h3>")
    out += stacked_bars(page, [(p["who"], p["per_rule"], "rank") for p in worst])
    values = sorted(p["total_ns"] for p in procs)
    out.append("<h3>Distribution over ranks</h3>")
    out.append(f'<p class="note">min {esc(t.human_time(values[0]))}, median '
               f'{esc(t.human_time(percentile(values, 0.5)))}, p90 {esc(t.human_time(percentile(values, 0.9)))}, '
               f'p99 {esc(t.human_time(percentile(values, 0.99)))}, max {esc(t.human_time(values[-1]))}</p>')
    out += histogram(page, values)
    out.append(f"<h3>By host ({len(page.hosts)} host{'s' if len(page.hosts) != 1 else ''}: "
               f"time held summed over its ranks)</h3>")
    hosts = []
    for host in page.hosts:
        mine = [p for p in procs if p["host"] == host]
        hosts.append((host, mine, sum(p["total_ns"] for p in mine)))
    shown = hosts if len(hosts) <= HOST_ROWS else sorted(hosts, key=lambda h: (-h[2], h[0]))[:HOST_ROWS]
    shown_names = {h[0] for h in shown}
    out += stacked_bars(page, [(f"{h} ({len(mine)})", sum_rules(mine), "rank")
                               for h, mine, _ in hosts if h in shown_names])
    out.append("<details><summary>per host: ranks, time held, the median and the worst rank, how they ended"
               "</summary>")
    out.append('<table><tr><th>host</th><th class="n">ranks</th><th class="n">held</th>'
               '<th class="n">median rank</th><th>worst rank</th><th>ended</th></tr>')
    for host, mine, held in hosts:
        if host not in shown_names:
            continue
        values = sorted(p["total_ns"] for p in mine)
        worst_p = max(mine, key=lambda p: p["total_ns"])
        out.append(f'<tr><td>{esc(host)}</td><td class="n">{len(mine)}</td><td class="n">{esc(t.human_time(held))}'
                   f'</td><td class="n">{esc(t.human_time(percentile(values, 0.5)))}</td>'
                   f'<td>{esc(worst_p["rank"])} ({esc(t.human_time(worst_p["total_ns"]))})</td>'
                   f'<td>{esc(endings_summary(mine))}</td></tr>')
    out.append("</table></details>")
    rest = [h for h in hosts if h[0] not in shown_names]
    if rest:
        out.append(f'<p class="note">{len(rest)} more hosts ({sum(len(m) for _, m, _ in rest)} ranks, '
                   f'{esc(t.human_time(sum(h for _, _, h in rest)))} held) not drawn.</p>')
    return out + ["</section>"]


def sum_rules(procs):
    total = {}
    for p in procs:
        for rule, ns in p["per_rule"].items():
            total[rule] = total.get(rule, 0) + ns
    return total


# --- call sites ---------------------------------------------------------------------------------


def python_frame(frame):
    text = f"{frame.get('file', '?')}:{frame.get('line', 0)}"
    if frame.get("function"):
        text += f" ({frame['function']})"
    return text


def render_sites(page):
    t = page.t
    out = ['<section id="sites">', f"<h2>Top call sites</h2>"]
    if not page.rows:
        return out + ["<p>no implicit synchronization seen</p>", "</section>"]
    out.append('<p class="note">Rows merge across processes by rule and call site (Python frames, then native '
               'frames, innermost first); most time held first. fixed/observed: the calls unstall rewrote and '
               'those it only saw.</p>')
    out.append('<table><tr><th class="n">#</th><th>rule</th><th>api</th><th class="n">count</th>'
               '<th class="n">bytes</th><th class="n">held</th><th class="n">max</th><th class="n">fixed/obs</th>'
               '<th>call site</th></tr>')
    for i, r in enumerate(page.rows[:page.top], 1):
        site = r["site"]
        if r["other"]:
            where = ["<p>(other sites: the table of call sites is full)</p>"]
        elif r["unlocated"]:
            where = [f"<p>{esc(t.UNLOCATED)}</p>"]
        else:
            where = []
            if site["python"]:
                where.append('<ol class="frames">' + "".join(f"<li>{esc(python_frame(f))}</li>"
                                                             for f in site["python"]) + "</ol>")
            native = site["native"]
            if native:
                where.append('<ol class="frames" start="{}">'.format(len(site["python"]) + 1)
                             + "".join(f"<li>{esc(f)}</li>" for f in native[:NATIVE_SHOWN]) + "</ol>")
                if len(native) > NATIVE_SHOWN:
                    where.append(f"<details><summary>{len(native) - NATIVE_SHOWN} more native frames</summary>"
                                 f'<ol class="frames" start="{len(site["python"]) + NATIVE_SHOWN + 1}">'
                                 + "".join(f"<li>{esc(f)}</li>" for f in native[NATIVE_SHOWN:]) + "</ol></details>")
            if not where:
                where.append("<p>(unknown site)</p>")
        ranks = r["ranks"]
        if len(page.reports) > 1 and ranks:
            busiest = sorted(ranks.items(), key=lambda kv: (-kv[1], t.label_sort_key(kv[0])))[:5]
            where.append(f'<p class="note">on {len(ranks)} of {len(page.reports)} processes; most: '
                         + esc(", ".join(f"{k} ({v})" for k, v in busiest)) + "</p>")
        forbidden = f', <span class="bad">{r["forbidden"]} forbidden</span>' if r["forbidden"] else ""
        out.append(f'<tr><td class="n">{i}</td><td>{page.swatch(r["rule"])}{esc(r["rule"])}<br>'
                   f'<span class="sev-{esc(r["severity"])}">{esc(r["severity"])}</span></td>'
                   f'<td><code>{esc(",".join(r["apis"]) or "?")}</code></td><td class="n">{r["count"]}</td>'
                   f'<td class="n">{esc(t.human_bytes(r["bytes"])) if r["bytes"] else "-"}</td>'
                   f'<td class="n">{esc(t.human_time(r["total_ns"]))}</td>'
                   f'<td class="n">{esc(t.human_time(r["max_ns"]))}</td>'
                   f'<td class="n">{r["fixed"]}/{r["observed"]}{forbidden}</td><td>{"".join(where)}</td></tr>')
    out.append("</table>")
    if len(page.rows) > page.top:
        more = len(page.rows) - page.top
        out.append(f'<p class="note">{more} more row{"s" if more != 1 else ""} (unstall-report --top N, or '
                   f'--json for all).</p>')
    return out + ["</section>"]


# --- timeline --------------------------------------------------------------------------------------


def nice_step(span):
    """A tick step of 1, 2 or 5 times a power of ten giving 4 to 10 ticks over span."""
    if span <= 0:
        return 1
    raw = span / 6
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def lane_of_event(e):
    device = e.get("dst_device", -1)
    if device is None or device < 0:
        device = e.get("src_device", -1)
    device = -1 if device is None else device
    return (0, device, e.get("stream") or "?", e.get("stream_kind") or "")


def lane_name(key):
    kind, device, stream, stream_kind = key
    gpu = f"GPU {device}" if device >= 0 else "no device"
    if kind == 1:
        return f"{gpu} · unstall pipeline (rewritten copies)"
    return f"{gpu} · stream {stream}" + (f" ({stream_kind})" if stream_kind else "")


def coalesce(marks, x_of, limit):
    """marks: (start, end, rule, held, bytes, fixed); merged where they meet within a gap of pixels
    (1, doubled until the lane holds at most limit): (x0, x1, rule, calls, held, bytes, fixed)."""
    gap = 1.0
    while True:
        merged = []
        for start, end, rule, held, nbytes, fixed in marks:
            x0, x1 = x_of(start), x_of(end)
            if merged and x0 <= merged[-1][1] + gap:
                m = merged[-1]
                m[1] = max(m[1], x1)
                m[3] += 1
                m[4] += held
                m[5] += nbytes
                m[6] = m[6] and fixed
                m[7][rule] = m[7].get(rule, 0) + held
            else:
                merged.append([x0, x1, rule, 1, held, nbytes, fixed, {rule: held}])
        if len(merged) <= limit or gap > 1e6:
            break
        gap *= 2
    return [(m[0], m[1], max(m[7], key=m[7].get), m[3], m[4], m[5], m[6]) for m in merged]


def render_timeline(page, width=1180, label_w=330, lane_h=16):
    t = page.t
    out = ['<section id="timeline">', "<h2>Timeline of stalls and rewritten copies</h2>"]
    with_marks = [p for p in page.procs if p["report"]["events"] or p["report"]["spans"]]
    if not with_marks:
        return out + ['<p>no events in the reports</p>', "</section>"]
    chosen = with_marks if len(with_marks) <= TIMELINE_PROCS else \
        sorted(with_marks, key=lambda p: (-p["total_ns"], p["label"]))[:TIMELINE_PROCS]
    chosen = sorted(chosen, key=lambda p: t.process_sort_key(p["report"]))
    if len(chosen) < len(with_marks):
        out.append(f'<p class="note">The {len(chosen)} processes that held longest, of {len(with_marks)} with '
                   f'events.</p>')
    # lanes: per process, its streams (per device) and its pipeline per device
    groups = []
    lanes_left = TIMELINE_LANES
    notes = []
    for p in chosen:
        r = p["report"]
        lanes = {}
        for e in r["events"]:
            start = wall_ns(r, e["start_ns"])
            lanes.setdefault(lane_of_event(e), []).append(
                (start, start + e.get("held_ns", 0), e.get("rule", "?"), e.get("held_ns", 0), e.get("bytes", 0),
                 bool(e.get("fixed"))))
        for s in r["spans"]:
            start = wall_ns(r, s["start_ns"])
            end = wall_ns(r, max(s.get("end_ns", s["start_ns"]), s["start_ns"]))
            device = s.get("device", -1)
            lanes.setdefault((1, -1 if device is None else device, "", ""), []).append(
                (start, end, s.get("name", "?"), end - start, s.get("bytes", 0), True))
        busiest = sorted(lanes, key=lambda k: (-sum(m[3] for m in lanes[k]), k))
        keep = busiest[:max(1, min(lanes_left, 8))]
        lanes_left -= len(keep)
        if len(keep) < len(lanes):
            notes.append(f"{p['who']}: {len(lanes) - len(keep)} more lanes not drawn")
        dropped = (r.get("events_dropped") or 0, r.get("spans_dropped") or 0)
        if any(dropped):
            notes.append(f"{p['who']}: the report kept the latest events only ({dropped[0]} older events, "
                         f"{dropped[1]} older spans not in it)")
        groups.append((p, [(k, sorted(lanes[k])) for k in sorted(keep, key=lambda k: (k[1], k[0], k[2]))]))
        if lanes_left <= 0:
            break
    t0 = min(m[0] for _, lanes in groups for _, marks in lanes for m in marks)
    t1 = max(m[1] for _, lanes in groups for _, marks in lanes for m in marks)
    span = max(t1 - t0, 1)
    plot_w = width - label_w - 10

    def x_of(ns):
        return label_w + plot_w * (ns - t0) / span

    nrows = sum(1 + len(lanes) for _, lanes in groups)
    h = 24 + nrows * lane_h + 4
    out += legend(page, [r for r in page.rule_order()])
    out.append('<p class="note">Time on the wall clock from the first event drawn; a filled mark is a call '
               'that held its thread, an outlined one a call that unstall rewrote, a pale bar on a pipeline lane '
               'a rewritten copy in flight. Marks closer than a pixel are merged (hover for counts).</p>')
    out.append(f'<svg class="timeline" viewBox="0 0 {width} {h}" width="{width}" height="{h}" role="img">')
    step = nice_step(span)
    tick = 0
    while tick <= span:
        x = x_of(t0 + tick)
        out.append(f'<line class="ax" x1="{x:.1f}" y1="14" x2="{x:.1f}" y2="{h}"/>'
                   f'<text x="{x:.1f}" y="11" text-anchor="middle">{esc(t.human_time(int(tick)))}</text>')
        tick += step
    y = 20
    for p, lanes in groups:
        r = p["report"]
        out.append(f'<rect class="hostrow" x="0" y="{y}" width="{width}" height="{lane_h}"/>'
                   f'<text x="4" y="{y + lane_h - 4}" font-weight="600">{esc(p["who"])} (pid {esc(r.get("pid"))}, '
                   f'{esc(p["ended"])})</text>')
        y += lane_h
        for key, marks in lanes:
            out.append(f'<text x="14" y="{y + lane_h - 4}">{esc(lane_name(key))}</text>')
            for x0, x1, rule, calls, held, nbytes, fixed in coalesce(marks, x_of, LANE_RECTS):
                color = page.color.get(rule, "#999")
                if key[0] == 1:
                    style = f'fill="{color}" fill-opacity="0.35" stroke="{color}"'
                elif fixed:
                    style = f'fill="#fff" stroke="{color}" stroke-width="1.5"'
                else:
                    style = f'fill="{color}"'
                tip = f"{rule}: {calls} call{'s' if calls != 1 else ''}, held {t.human_time(held)}"
                if nbytes:
                    tip += f", {t.human_bytes(nbytes)}"
                if key[0] == 0 and fixed:
                    tip += ", rewritten by unstall"
                out.append(f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(x1 - x0, 1.0):.1f}" height="{lane_h - 6}" '
                           f'{style}><title>{esc(tip)}</title></rect>')
            y += lane_h
    out.append("</svg>")
    if notes:
        out.append('<p class="note">' + "<br>".join(esc(n) for n in notes[:20]) + "</p>")
    return out + ["</section>"]


# --- fixes and processes -------------------------------------------------------------------------


def render_fixes(page):
    t = page.t
    out = ['<section id="fixes">', "<h2>What unstall fixed, and what to change</h2>"]
    if not page.totals:
        return out + ["<p>nothing to change: no implicit synchronization seen</p>", "</section>"]
    fixed = [r for r in page.totals if r["fixed"]]
    if fixed:
        out.append("<h3>Fixed by unstall while the job ran</h3><ul>")
        for r in fixed:
            out.append(f'<li>{page.swatch(r["rule"])}<b>{esc(r["rule"])}</b>: {r["fixed"]} of {r["count"]} '
                       f'call{"s" if r["count"] != 1 else ""} rewritten (the program\'s data unchanged); '
                       f'they still held {esc(t.human_time(r["total_ns"]))} in all</li>')
        out.append("</ul>")
    else:
        out.append("<p>unstall rewrote no call (mode report, or nothing it fixes).</p>")
    out.append("<h3>What to change in the program</h3>")
    for r in page.totals:
        fix = page.fixes.get(r["rule"]) or "(no advice in the reports)"
        out.append(f'<p class="fix">{page.swatch(r["rule"])}<b>{esc(r["rule"])}</b> '
                   f'<span class="sev-{esc(r["severity"])}">{esc(r["severity"])}</span>: {esc(fix)}</p>')
    out.append('<p class="note">The call sites above say where; docs/rules.md says more about each rule.</p>')
    return out + ["</section>"]


def render_processes(page):
    t = page.t
    procs = page.procs
    out = ['<section id="processes">', "<h2>How each process ended</h2>",
           f"<p>{esc(endings_summary(procs))}.</p>"]
    blind = [p for p in procs if not p["report"].get("hooked", True)]
    for p in blind[:ENDED_ROWS]:
        r = p["report"]
        out.append(f'<p class="note">{esc(p["who"])} (pid {esc(r.get("pid"))}): unstall saw no CUDA runtime '
                   f'call{esc(t.BLIND_REASONS.get(r.get("cuda"), t.BLIND_REASONS[None]))}</p>')
    if len(blind) > ENDED_ROWS:
        out.append(f'<p class="note">{len(blind) - ENDED_ROWS} more processes saw no CUDA runtime call.</p>')
    listed = procs
    if len(procs) > ENDED_ROWS:
        # a large job: the processes that did not exit, then the worst, up to ENDED_ROWS
        odd = [p for p in procs if p["ended"] != "exited"]
        worst = sorted(procs, key=lambda p: (-p["total_ns"], p["label"]))
        listed, seen = [], set()
        for p in odd + worst:
            if id(p) not in seen and len(listed) < ENDED_ROWS:
                listed.append(p)
                seen.add(id(p))
        listed.sort(key=lambda p: t.process_sort_key(p["report"]))
        out.append(f'<p class="note">{len(listed)} of {len(procs)} processes listed: those that did not exit '
                   f'first, then those that held longest; the host table above counts them all.</p>')
    out.append('<table><tr><th>host</th><th class="n">rank</th><th class="n">pid</th><th class="n">calls</th>'
               '<th class="n">held</th><th class="n">fixed</th><th>ended</th><th>program</th></tr>')
    for p in listed:
        r = p["report"]
        rank = r.get("rank")
        cls = "" if p["ended"] == "exited" else ' class="bad"'
        out.append(f'<tr><td>{esc(p["host"])}</td><td class="n">{"-" if rank is None else esc(rank)}</td>'
                   f'<td class="n">{esc(r.get("pid", "?"))}</td><td class="n">{p["count"]}</td>'
                   f'<td class="n">{esc(t.human_time(p["total_ns"]))}</td><td class="n">{p["fixed"]}</td>'
                   f'<td{cls}>{esc(p["ended"])}</td>'
                   f'<td><code>{esc(r.get("cmdline") or r.get("program") or "?")}</code></td></tr>')
    out.append("</table>")
    return out + ["</section>"]


def render_html(reports, tool, top=20, now_ns=None):
    """The page, as one string. tool: unstall-report's names (its globals(): merge, rule_totals,
    ended, process_totals, human_time, ...); top: rows of the call sites and ranks in a large job."""
    page = Page(reports, tool, top, now_ns)
    files = len(page.reports)
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>unstall report: {files} process{'es' if files != 1 else ''}, {len(page.hosts)} "
           f"host{'s' if len(page.hosts) != 1 else ''}</title>",
           f"<style>{CSS}</style>", "</head>", "<body>"]
    out += render_header(page)
    out.append("<main>")
    for part in (render_rules, render_ranks, render_sites, render_timeline, render_fixes, render_processes):
        out += part(page)
    out.append("</main>")
    out.append(f'<footer id="end">written by unstall-report --html from {files} report'
               f'{"s" if files != 1 else ""}; one file, no network: inline CSS and SVG, no script.</footer>')
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"
