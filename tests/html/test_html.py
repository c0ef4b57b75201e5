"""Tests of unstall-report --html (tools/unstall_html.py): one self-contained
page for a process or a whole job. Pages from real runs on the simulated
runtime (scenario programs and tests/endings/ending_prog.c under the shim:
exited, ended by SIGTERM, a snapshot left by SIGKILL) and from synthetic jobs
of 2 ranks on 2 hosts and 1024 ranks on 64 hosts: one file, nothing outside
it referenced, the rules, ranks, hosts and endings named, the size and the
rows bounded at 1024 ranks; then each page rendered in a real headless browser
(Chromium: its DOM after load, the resources it fetched, a screenshot kept in
BUILD/html/). No browser found fails the browser tests.
Run: BUILD=build python3 tests/common/run_unittest.py html tests/html"""
import html.parser
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "tools", "unstall-report")
BUILD = os.path.abspath(os.environ.get("BUILD", os.path.join(ROOT, "build")))
SHIM = os.path.join(BUILD, "libunstall.so")
FAKE = os.path.join(BUILD, "fakecuda")
SCENARIOS = os.path.join(BUILD, "scenarios")
ARTIFACTS = os.path.join(BUILD, "html")  # the pages and their screenshots, kept
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")

FIXES = {
    "pageable_d2h": "copy into pinned memory; unstall lands it through pinned slots without the lock",
    "pageable_h2d": "pin the source (cudaHostAlloc, cudaHostRegister, tensor.pin_memory()); unstall stages it",
    "explicit_sync": "wait only where the data is needed; prefer events and cudaStreamWaitEvent between streams",
    "device_alloc_sync": "allocate up front or use a caching or stream-ordered allocator (cudaMallocAsync)",
}
SEVERITY = {"pageable_d2h": "high", "pageable_h2d": "medium", "explicit_sync": "low", "device_alloc_sync": "low"}


def load_tool():
    loader = importlib.machinery.SourceFileLoader("unstall_report_html", TOOL)
    spec = importlib.util.spec_from_loader("unstall_report_html", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


ur = load_tool()


def run_tool(*args, cwd=None):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


# --- synthetic reports ------------------------------------------------------------------------------


def synthetic(host, rank, pid, held, end=None, start_real=1_700_000_000_000_000_000, events=12):
    """A version 1 report: held {rule: ns} at one site per rule (a Python frame and native ones), events
    spread over a second on stream 0x10 (copies on GPU rank % 8), a span per fixed copy."""
    mono0 = 5_000_000_000
    findings, rules, evs, spans = [], [], [], []
    for i, (rule, ns) in enumerate(sorted(held.items())):
        copy = rule.startswith("pageable")
        count = 4
        fixed = count if copy else 0
        findings.append({
            "index": i, "rule": rule, "severity": SEVERITY[rule],
            "api": "cudaMemcpyAsync" if copy else "cudaStreamSynchronize", "count": count,
            "bytes": count << 20 if copy else 0, "total_ns": ns, "max_ns": ns // 2, "fixed": fixed,
            "observed": count - fixed, "forbidden": 0, "first_ns": mono0, "last_ns": mono0 + 10**9,
            "other": False, "unlocated": False, "streams": ["user"], "devices": [rank % 8],
            "site": {"python": [{"file": "/job/train.py", "line": 40 + i, "function": f"step_{rule}"},
                                {"file": "/job/train.py", "line": 200, "function": "main"}],
                     "native": [f"libtorch_cuda.so!copy_{rule}+0x1a", "libtorch_cpu.so+0x77", "libc.so.6+0x2724a",
                                "python3+0x1234", "python3!_PyEval_EvalFrameDefault+0x99"],
                     "native_at": [], "native_src": []}})
        rules.append({"rule": rule, "severity": SEVERITY[rule], "count": count, "bytes": count << 20 if copy else 0,
                      "total_ns": ns, "fixed": fixed, "forbidden": 0, "fix": FIXES[rule]})
    for k in range(events):
        f = findings[k % len(findings)] if findings else None
        if f is None:
            break
        start = mono0 + 200_000_000 + k * (800_000_000 // max(events, 1))
        held_ns = max(f["total_ns"] // 4, 1000)
        copy = f["rule"].startswith("pageable")
        evs.append({"finding": f["index"], "rule": f["rule"], "start_ns": start, "held_ns": held_ns,
                    "bytes": 1 << 20 if copy else 0, "tid": pid, "stream": "0x10", "stream_kind": "user",
                    "src_device": -1, "dst_device": rank % 8 if copy else -1, "context": "0x0", "fixed": copy})
        if copy:
            spans.append({"name": f["rule"], "device": rank % 8, "tid": pid, "start_ns": start,
                          "end_ns": start + held_ns, "bytes": 1 << 20})
    rules.sort(key=lambda r: -r["total_ns"])
    return {
        "version": 1, "tool": "unstall", "pid": pid, "rank": rank, "rank_from": "RANK", "host": host,
        "program": "python3", "cmdline": "python3 /job/train.py --epochs 1", "mode": "warn", "hooked": True,
        "cuda": "runtime", "started": "2023-11-14T22:13:20Z",
        "clock": {"monotonic_ns": mono0, "realtime_ns": start_real},
        "ended_ns": mono0 + 2_000_000_000, "end": end or {"how": "exit", "signal": None,
                                                           "realtime_ns": start_real + 2_000_000_000},
        "rules": rules, "findings": findings, "events": evs, "events_dropped": 0, "spans": spans,
        "spans_dropped": 0,
    }


def write_reports(folder, reports):
    paths = []
    for r in reports:
        path = os.path.join(folder, f"r-{r['host']}-{r['rank']}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(r, f)
        paths.append(path)
    return paths


def two_hosts():
    """Rank 0 on node-a (exits), rank 1 on node-b (SIGTERM), the same pid on both; node-b started 1 s
    later (the job: 3 s)."""
    return [synthetic("node-a", 0, 4242, {"pageable_d2h": 30_000_000, "explicit_sync": 5_000_000}),
            synthetic("node-b", 1, 4242, {"pageable_d2h": 20_000_000, "device_alloc_sync": 1_000_000},
                      end={"how": "signal", "signal": "SIGTERM", "realtime_ns": 1_700_000_003_000_000_000},
                      start_real=1_700_000_001_000_000_000)]


def job_1024():
    """1024 ranks on 64 hosts, 16 each; rank 777 holds longest (explicit waits), 16 ranks of host 5 were
    ended by SIGTERM, 8 of host 9 left a snapshot."""
    reports = []
    for rank in range(1024):
        host = f"gpu-node-{rank // 16:02d}"
        held = {"pageable_h2d": 1_000_000 + (rank * 7919) % 5_000_000,
                "explicit_sync": 500_000 + (rank * 104729) % 3_000_000}
        if rank % 3 == 0:
            held["pageable_d2h"] = 2_000_000 + rank * 1000
        if rank == 777:
            held["explicit_sync"] = 900_000_000
        end = None
        if rank // 16 == 5:
            end = {"how": "signal", "signal": "SIGTERM", "realtime_ns": 1_700_000_002_000_000_000}
        elif rank // 16 == 9 and rank % 2 == 0:
            end = {"how": "snapshot", "signal": None, "realtime_ns": 1_700_000_001_000_000_000}
        reports.append(synthetic(host, rank, 10000 + rank % 16, held, end=end, events=40))
    return reports


# --- what a page must be ----------------------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr",
        # SVG elements written self-closed
        "rect", "line", "path", "circle", "stop"}


class Structure(html.parser.HTMLParser):
    """Tags balanced; every reference kept: src, href, xlink:href, url(...), @import."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.errors, self.refs, self.tags, self.text = [], [], [], {}, []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for k, v in attrs:
            if k in ("src", "href", "xlink:href", "srcset", "data", "action", "poster", "background"):
                self.refs.append(f"{tag} {k}={v}")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for k, v in attrs:
            if k in ("src", "href", "xlink:href"):
                self.refs.append(f"{tag} {k}={v}")

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def check_structure(test, page):
    s = Structure()
    s.feed(page)
    s.close()
    test.assertEqual(s.errors, [], "tags not balanced")
    test.assertEqual(s.stack, [], "tags left open")
    return s


def external_references(page):
    """Everything in the page that would make a browser fetch something: a URL with a scheme, a src, an
    href that is not an anchor in the page, a CSS url() or @import, a script, link, img, iframe or object."""
    found = re.findall(r"\b(?:https?|ftp)://[^\s\"'<>]*", page)
    found += re.findall(r"<(?:script|link|img|iframe|object|embed|image|use)\b[^>]*>", page, re.I)
    found += re.findall(r"\bsrc\s*=", page, re.I)
    found += [m for m in re.findall(r"\bhref\s*=\s*[\"']?([^\"'\s>]*)", page, re.I) if not m.startswith("#")]
    found += re.findall(r"url\s*\(|@import|@font-face", page, re.I)
    return found


def section(page, ident):
    start = page.find(f'<section id="{ident}">')
    assert start >= 0, f"no section {ident}"
    return page[start:page.index("</section>", start)]


class Helpers(unittest.TestCase):
    def assert_self_contained(self, page):
        self.assertEqual(external_references(page), [], "the page refers to something outside it")
        s = check_structure(self, page)
        self.assertEqual([r for r in s.refs if not r.split("=", 1)[1].startswith("#")], [])
        return s

    def render(self, folder, paths, *extra):
        out = os.path.join(folder, "out.html")
        p = run_tool("--html", out, *extra, *paths, cwd=folder)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("wrote", p.stderr)
        self.assertEqual(p.stdout, "", "--html alone prints no text report")
        with open(out, encoding="utf-8") as f:
            return f.read()


# --- synthetic jobs ---------------------------------------------------------------------------------------


class TwoHosts(Helpers):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="unstall-html-2-")
        cls.paths = write_reports(cls.work, two_hosts())
        p = run_tool("--html", "out.html", *cls.paths, cwd=cls.work)
        assert p.returncode == 0, p.stderr
        with open(os.path.join(cls.work, "out.html"), encoding="utf-8") as f:
            cls.page = f.read()
        keep(cls.page, "two-hosts.html")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def test_one_file_written_and_nothing_else(self):
        self.assertEqual(sorted(os.listdir(self.work)), sorted([os.path.basename(p) for p in self.paths]
                                                                + ["out.html"]))

    def test_self_contained(self):
        s = self.assert_self_contained(self.page)
        self.assertNotIn("script", s.tags)
        self.assertGreaterEqual(s.tags.get("svg", 0), 3)  # rules, ranks, timeline

    def test_header_names_the_job(self):
        header = self.page[self.page.index("<header"):self.page.index("</header>")]
        for text in ("processes</dt><dd>2 (ranks 0-1)", "node-a", "node-b", "1 exited, 1 SIGTERM",
                     "duration</dt><dd>3.00 s", "python3 /job/train.py"):
            self.assertIn(text, header)

    def test_sections_in_order(self):
        where = [self.page.index(f'<section id="{s}">') for s in
                 ("rules", "ranks", "sites", "timeline", "fixes", "processes")]
        self.assertEqual(where, sorted(where))

    def test_rules_ranks_by_host(self):
        rules = section(self.page, "rules")
        for rule in ("pageable_d2h", "explicit_sync", "device_alloc_sync"):
            self.assertIn(rule, rules)
        self.assertIn("50.0 ms", rules)  # pageable_d2h over both ranks
        ranks = section(self.page, "ranks")
        # grouped by host: each host's heading row, then its rank
        a, b = ranks.index(">node-a (1 rank)<"), ranks.index(">node-b (1 rank)<")
        self.assertLess(a, ranks.index(">rank 0<"))
        self.assertLess(ranks.index(">rank 0<"), b)
        self.assertLess(b, ranks.index(">rank 1<"))

    def test_call_sites_with_frames(self):
        sites = section(self.page, "sites")
        self.assertIn("/job/train.py:40 (step_device_alloc_sync)", sites)
        self.assertIn("libtorch_cuda.so!copy_pageable_d2h+0x1a", sites)
        self.assertIn("more native frames", sites)  # past the first 4: under <details>
        self.assertIn("on 2 of 2 processes", sites)  # the pageable_d2h row, merged
        self.assertIn(">8/0</td>", sites)  # fixed/observed of the rewritten copies, both ranks

    def test_timeline_lanes_per_device_and_stream(self):
        tl = section(self.page, "timeline")
        self.assertIn("node-a rank 0 (pid 4242, exited)", tl)
        self.assertIn("node-b rank 1 (pid 4242, SIGTERM)", tl)
        self.assertIn("GPU 0 · stream 0x10 (user)", tl)
        self.assertIn("GPU 1 · unstall pipeline (rewritten copies)", tl)
        self.assertIn("no device · stream 0x10 (user)", tl)  # explicit waits
        self.assertIn("rewritten by unstall", tl)

    def test_fixes_name_each_rule_with_its_advice(self):
        fixes = section(self.page, "fixes")
        for rule, text in FIXES.items():
            if rule != "pageable_h2d":
                self.assertIn(f"<b>{rule}</b>", fixes)
                self.assertIn(text, fixes)
        self.assertIn("8 of 8 calls rewritten", fixes)

    def test_processes_say_how_each_ended(self):
        procs = section(self.page, "processes")
        self.assertIn(">exited<", procs)
        self.assertIn(">SIGTERM<", procs)

    def test_text_is_escaped(self):
        r = synthetic("node-a", 0, 1, {"explicit_sync": 1000})
        r["cmdline"] = "python3 x.py --tag '<script>alert(1)</script>' & more"
        page = ur.html_module().render_html([r], vars(ur))
        self.assertNotIn("<script>", page)
        self.assertIn("&lt;script&gt;alert(1)&lt;/script&gt;", page)
        check_structure(self, page)

    def test_no_findings_still_a_page(self):
        r = synthetic("node-a", 0, 1, {})
        page = ur.html_module().render_html([r], vars(ur))
        self.assertIn("no implicit synchronization seen", page)
        self.assert_self_contained(page)

    def test_snapshot_age(self):
        r = synthetic("node-a", 0, 1, {"explicit_sync": 1000},
                      end={"how": "snapshot", "signal": None, "realtime_ns": 1_700_000_000_000_000_000})
        page = ur.html_module().render_html([r], vars(ur), now_ns=1_700_000_012_000_000_000)
        self.assertIn("snapshot, 12 s old", section(page, "processes"))
        self.assertIn("1 snapshot", page[:page.index("</header>")])

    def test_runs_from_anywhere_and_through_a_link(self):
        """The module is found beside the script's real path: from / and through a symbolic link."""
        with tempfile.TemporaryDirectory() as d:
            link = os.path.join(d, "unstall-report")
            os.symlink(TOOL, link)
            out = os.path.join(d, "p.html")
            p = subprocess.run([sys.executable, link, "--html", out, *self.paths], capture_output=True, text=True,
                               timeout=120, cwd="/")
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out, encoding="utf-8") as f:
                self.assertIn("node-b", f.read())

    def test_installed_by_install_sh(self):
        """tools/install.sh installs the module where the installed unstall-report finds it, and removes it."""
        if not os.path.exists(SHIM):
            self.fail(f"missing {SHIM} (make BUILD={BUILD} test-bins): tools/install.sh needs it")
        with tempfile.TemporaryDirectory() as d:
            prefix = os.path.join(d, "prefix")
            p = subprocess.run(["sh", os.path.join(ROOT, "tools", "install.sh"), "install", BUILD, prefix],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            module = os.path.join(prefix, "share", "unstall", "python", "unstall_html.py")
            self.assertTrue(os.path.exists(module))
            out = os.path.join(d, "p.html")
            p = subprocess.run([sys.executable, os.path.join(prefix, "bin", "unstall-report"), "--html", out,
                                *self.paths], capture_output=True, text=True, timeout=120, cwd="/")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(os.path.getsize(out) > 1000)
            p = subprocess.run(["sh", os.path.join(ROOT, "tools", "install.sh"), "uninstall", BUILD, prefix],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertFalse(os.path.exists(module))

    def test_html_with_text_options(self):
        """--html writes the page; --json beside it still prints the merged JSON."""
        with tempfile.TemporaryDirectory() as d:
            p = run_tool("--html", os.path.join(d, "p.html"), "--json", *self.paths)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(json.loads(p.stdout)["tool"], "unstall-report")
            self.assertTrue(os.path.getsize(os.path.join(d, "p.html")) > 1000)


class LargeJob(Helpers):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="unstall-html-1024-")
        cls.paths = write_reports(cls.work, job_1024())
        p = run_tool("--html", "out.html", *cls.paths, cwd=cls.work)
        assert p.returncode == 0, p.stderr
        with open(os.path.join(cls.work, "out.html"), encoding="utf-8") as f:
            cls.page = f.read()
        keep(cls.page, "ranks-1024.html")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def test_self_contained(self):
        self.assert_self_contained(self.page)

    def test_size_bounded(self):
        # 1024 reports of about 20 KiB each; the page a few hundred KiB at most
        self.assertLess(len(self.page.encode()), 400 * 1024)

    def test_header(self):
        header = self.page[:self.page.index("</header>")]
        self.assertIn("processes</dt><dd>1024 (ranks 0-1023)", header)
        self.assertIn("hosts</dt><dd>64: gpu-node-00, gpu-node-01", header)
        self.assertIn("1000 exited, 16 SIGTERM, 8 snapshot", header)

    def test_never_one_row_per_rank(self):
        ranks = section(self.page, "ranks")
        worst = re.findall(r">gpu-node-\d\d rank \d+<", ranks)
        self.assertEqual(len(worst), 20)  # --top's default
        self.assertEqual(worst[0], ">gpu-node-48 rank 777<")  # the worst first
        # every rank of the page, wherever it is named: far fewer than 1024
        named = set(re.findall(r"rank (\d+)\b", self.page))
        self.assertLess(len(named), 120)
        self.assertIn("777", named)

    def test_every_host_summarised(self):
        ranks = section(self.page, "ranks")
        for h in range(64):
            self.assertIn(f"<td>gpu-node-{h:02d}</td>", ranks)
        self.assertIn("<td>gpu-node-05</td><td class=\"n\">16</td>", ranks)
        self.assertIn("16 SIGTERM", ranks)

    def test_distribution_counts_every_rank(self):
        counts = [int(n) for n in re.findall(r"<title>(\d+) ranks? held", section(self.page, "ranks"))]
        self.assertEqual(len(counts), 20)
        self.assertEqual(sum(counts), 1024)
        self.assertIn("median", section(self.page, "ranks"))

    def test_timeline_bounded(self):
        tl = section(self.page, "timeline")
        self.assertIn("The 8 processes that held longest, of 1024", tl)
        self.assertIn("gpu-node-48 rank 777", tl)
        self.assertLessEqual(tl.count("<rect"), 32 * 200 + 40)

    def test_processes_bounded_and_odd_endings_first(self):
        procs = section(self.page, "processes")
        rows = procs.count("<tr>") - 1
        self.assertEqual(rows, 50)
        self.assertEqual(procs.count(">SIGTERM<"), 16)
        self.assertEqual(procs.count(">snapshot, "), 8)

    def test_hosts_bounded(self):
        """200 hosts of one rank: 64 host rows drawn (the ones that held longest), the rest in one line."""
        reports = [synthetic(f"h{i:03d}", i, 100 + i, {"explicit_sync": 1_000_000 + i * 1000}, events=2)
                   for i in range(200)]
        for r in reports:
            r["_file"] = "-"
        page = ur.html_module().render_html(reports, vars(ur))
        ranks = section(page, "ranks")
        drawn = re.findall(r">(h\d{3}) \(1\)<", ranks)
        self.assertEqual(len(drawn), 64)
        self.assertEqual(sorted(drawn)[0], "h136")  # the 64 that held longest
        self.assertIn("136 more hosts (136 ranks,", ranks)
        self.assertLess(len(page.encode()), 300 * 1024)

    def test_top_option(self):
        with tempfile.TemporaryDirectory() as d:
            page = self.render(d, self.paths[:64], "--top", "5")
        ranks = section(page, "ranks")
        self.assertEqual(len(re.findall(r">gpu-node-\d\d rank \d+<", ranks)), 5)
        self.assertLessEqual(section(page, "sites").count('<td class="n">'), 5 * 7)


# --- real runs on the simulated runtime ---------------------------------------------------------------


_REAL = {}


def real_job():
    """Four processes of one job on the simulated runtime, run once for the module: rank 0 case B (exits),
    rank 1 case C (exits), rank 2 ending_prog ended by SIGTERM, rank 3 ending_prog killed by SIGKILL after a
    snapshot. (report paths, page); raises RuntimeError when it could not run."""
    if "error" in _REAL:
        raise RuntimeError(_REAL["error"])
    if "page" not in _REAL:
        try:
            _REAL.update(_run_real_job())
        except (OSError, subprocess.SubprocessError, RuntimeError) as e:
            _REAL["error"] = str(e)
            raise RuntimeError(_REAL["error"]) from None
    return _REAL["paths"], _REAL["page"]


def _run_real_job():
    missing = [p for p in (SHIM, os.path.join(FAKE, "libcudart.so.13"),
                           os.path.join(SCENARIOS, "case_b_pageable_h2d"),
                           os.path.join(SCENARIOS, "case_c_pageable_d2h")) if not os.path.exists(p)]
    if missing:
        raise RuntimeError(f"missing in {BUILD}: {', '.join(missing)} (make BUILD={BUILD} test-bins)")
    work = tempfile.mkdtemp(prefix="unstall-html-real-")
    try:
        prog = os.path.join(work, "ending_prog")
        cc = subprocess.run(os.environ.get("CC", "gcc").split() + [
            "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(CUDA, "include"),
            "-o", prog, os.path.join(ROOT, "tests", "endings", "ending_prog.c"), "-L" + FAKE, "-lcudart",
            "-Wl,-rpath," + FAKE], capture_output=True, text=True)
        if cc.returncode != 0:
            raise RuntimeError("ending_prog.c did not build: " + cc.stderr[-1000:])
        env = {k: v for k, v in os.environ.items() if not k.startswith("UNSTALL_")}
        env.update({"LD_PRELOAD": SHIM, "LD_LIBRARY_PATH": FAKE, "FAKECUDA_DEVICES": "2",
                    "FAKECUDA_TIME_SCALE": "1", "SCN_QUICK": "1",
                    "UNSTALL_REPORT": os.path.join(work, "r-%p.json")})
        procs = []

        def start(rank, cmd, **extra):
            procs.append(subprocess.Popen(cmd, env=dict(env, RANK=str(rank), **extra), stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True))
            return procs[-1]

        try:
            term = start(2, [prog, "loop", "2"])
            kill = start(3, [prog, "loop", "3"], UNSTALL_REPORT_INTERVAL_S="1")
            start(0, [os.path.join(SCENARIOS, "case_b_pageable_h2d")])
            start(1, [os.path.join(SCENARIOS, "case_c_pageable_d2h"), "throughput"])
            for p in (term, kill):
                if p.stdout.readline().strip() != "ready":
                    raise RuntimeError("ending_prog did not start")
            time.sleep(0.5)
            term.send_signal(signal.SIGTERM)
            time.sleep(1.5)  # past one snapshot of rank 3
            kill.send_signal(signal.SIGKILL)
            for p in procs:
                p.communicate(timeout=120)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        paths = sorted(os.path.join(work, f) for f in os.listdir(work) if f.endswith(".json"))
        reports = {os.path.basename(p) for p in paths}
        p = run_tool("--html", "job.html", *paths, cwd=work)
        if p.returncode != 0:
            raise RuntimeError("unstall-report --html failed: " + p.stderr)
        with open(os.path.join(work, "job.html"), encoding="utf-8") as f:
            page = f.read()
        keep(page, "real-job.html")
        return {"paths": sorted(reports), "page": page}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def keep(page, name):
    """A page kept with the build as a test artifact (BUILD/html/NAME)."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    with open(os.path.join(ARTIFACTS, name), "w", encoding="utf-8") as f:
        f.write(page)


class RealJob(Helpers):
    def setUp(self):
        try:
            self.paths, self.page = real_job()
        except RuntimeError as e:
            self.fail(f"the job did not run on the simulated runtime: {e}")

    def test_four_reports_one_page(self):
        self.assertEqual(len(self.paths), 4)
        self.assert_self_contained(self.page)
        self.assertIn("processes</dt><dd>4 (ranks 0-3)", self.page)

    def test_rules_of_the_runs(self):
        rules = section(self.page, "rules")
        for rule in ("pageable_h2d", "pageable_d2h", "explicit_sync"):
            self.assertIn(f">{rule}</td>", rules)
        fixes = section(self.page, "fixes")
        self.assertIn("pin the source", fixes)  # the shim's own advice, from the reports
        self.assertIn("copy into pinned memory", fixes)

    def test_ranks_and_endings(self):
        ranks = section(self.page, "ranks")
        for rank in range(4):
            self.assertIn(f">rank {rank}<", ranks)
        header = self.page[:self.page.index("</header>")]
        self.assertIn("2 exited, 1 SIGTERM, 1 snapshot", header)
        procs = section(self.page, "processes")
        self.assertIn(">SIGTERM<", procs)
        self.assertRegex(procs, r">snapshot, \d+ s old<")

    def test_native_frames_of_the_scenarios(self):
        sites = section(self.page, "sites")
        self.assertIn("case_c_pageable_d2h!", sites)
        self.assertIn("ending_prog!main+", sites)

    def test_timeline_has_stalls_and_rewritten_copies(self):
        tl = section(self.page, "timeline")
        self.assertIn("unstall pipeline (rewritten copies)", tl)
        self.assertIn("GPU 0 · stream", tl)
        self.assertIn("rewritten by unstall", tl)
        self.assertIn("rank 2 (pid", tl)


# --- a real browser ------------------------------------------------------------------------------------

# Put first into a copy of the page given to the browser (never to the page itself, which has no script):
# after load, it writes into the DOM the resources the browser fetched, the loads that failed, the number of
# SVG marks and the width of the first chart as laid out.
PROBE = """<script>
(function(){var failed=[];
window.addEventListener('error',function(e){var t=e.target;failed.push(t&&(t.src||t.href)||String(e.message));},true);
window.addEventListener('load',function(){
 var res=performance.getEntriesByType('resource').map(function(e){return e.name;});
 var svg=document.querySelector('svg');
 var d=document.createElement('div');d.id='unstall-probe';
 d.setAttribute('data-resources',res.join(' '));d.setAttribute('data-failed',failed.join(' '));
 d.setAttribute('data-marks',String(document.querySelectorAll('svg rect').length));
 d.setAttribute('data-width',String(svg?Math.round(svg.getBoundingClientRect().width):0));
 document.body.appendChild(d);});})();
</script>"""


def find_browser():
    """(kind, path): a Chromium (chromium, chromium-browser, google-chrome) or Firefox; None if none."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return "chromium", path
    path = shutil.which("firefox")
    return ("firefox", path) if path else None


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", head[16:24])


class Browser(Helpers):
    """Each page in a headless browser: Chromium's DOM after load (--dump-dom) shows the rules and ranks, the
    browser fetched nothing and no load failed; a screenshot of each kept in BUILD/html/."""

    @classmethod
    def setUpClass(cls):
        cls.browser = find_browser()
        cls.profile = tempfile.mkdtemp(prefix="unstall-html-browser-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.profile, ignore_errors=True)

    def setUp(self):
        if self.browser is None:
            self.fail("no headless browser found (chromium, chromium-browser, google-chrome or firefox): "
                      "install one (tools/install-deps.sh installs Debian's chromium)")

    def chromium(self, *args):
        if self.browser[0] != "chromium":
            self.skipTest(f"{self.browser[1]} is Firefox, which has no --dump-dom (the screenshots still run)")
        cmd = [self.browser[1], "--headless", "--disable-gpu", "--no-sandbox", "--user-data-dir=" + self.profile,
               "--host-resolver-rules=MAP * ~NOTFOUND", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    def dom(self, page):
        """The DOM of the page (with the probe) after load, and the probe's attributes."""
        d = tempfile.mkdtemp(prefix="unstall-html-dom-", dir=self.profile)
        path = os.path.join(d, "page.html")
        with open(path, "w", encoding="utf-8") as f:
            # first in the document, before anything that could load
            at = page.index("<head>") + 6 if "<head>" in page else page.index("<body>") + 6
            f.write(page[:at] + PROBE + page[at:])
        p = self.chromium("--dump-dom", "file://" + path)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        m = re.search(r'<div id="unstall-probe"([^>]*)>', p.stdout)
        self.assertIsNotNone(m, "the page did not finish loading: " + p.stdout[-500:] + p.stderr[-1500:])
        probe = dict(re.findall(r'data-(\w+)="([^"]*)"', m.group(1)))
        return p.stdout, probe

    def assert_loads_clean(self, page):
        dom, probe = self.dom(page)
        self.assertEqual(probe["resources"], "", "the browser fetched something")
        self.assertEqual(probe["failed"], "", "a load failed")
        self.assertGreater(int(probe["marks"]), 10)
        self.assertGreater(int(probe["width"]), 500)
        self.assertIn('id="end"', dom)  # parsed to the end
        return dom

    def test_probe_sees_an_external_reference(self):
        """The check can fail: a page with an image file and a remote script is caught."""
        bad = ("<!DOCTYPE html><html><body><svg width='600'><rect width='9' height='9'/></svg>"
               "<img src='missing.png'><script src='https://example.invalid/x.js'></script></body></html>")
        _, probe = self.dom(bad)
        self.assertIn("missing.png", probe["failed"])
        self.assertIn("example.invalid", probe["resources"] + probe["failed"])

    def screenshot(self, name):
        """BUILD/html/NAME.png of BUILD/html/NAME.html, 1400 x 2000."""
        html_path = os.path.join(ARTIFACTS, f"{name}.html")
        shot = os.path.join(ARTIFACTS, f"{name}.png")
        if os.path.exists(shot):
            os.unlink(shot)
        if self.browser[0] == "chromium":
            p = self.chromium("--screenshot=" + shot, "--window-size=1400,2000", "file://" + html_path)
        else:
            p = subprocess.run([self.browser[1], "--headless", "--screenshot", shot, "--window-size=1400,2000",
                                "file://" + html_path], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        self.assertEqual(png_size(shot), (1400, 2000), f"no screenshot at {shot}")
        self.assertGreater(os.path.getsize(shot), 20000)  # not a blank page

    def test_two_hosts(self):
        page = two_hosts_page()
        self.screenshot("two-hosts")
        dom = self.assert_loads_clean(page)
        for text in ("node-a", "node-b", "rank 0", "rank 1", "pageable_d2h", "explicit_sync", "SIGTERM"):
            self.assertIn(text, dom)

    def test_1024_ranks(self):
        with tempfile.TemporaryDirectory() as d:
            page = self.render(d, write_reports(d, job_1024()))
        keep(page, "ranks-1024.html")
        self.screenshot("ranks-1024")
        dom = self.assert_loads_clean(page)
        for text in ("gpu-node-48 rank 777", "gpu-node-63", "1024 (ranks 0-1023)", "explicit_sync",
                     "pageable_h2d"):
            self.assertIn(text, dom)

    def test_real_job(self):
        try:
            _, page = real_job()
        except RuntimeError as e:
            self.fail(f"the job did not run on the simulated runtime: {e}")
        self.screenshot("real-job")
        dom = self.assert_loads_clean(page)
        for text in ("pageable_h2d", "pageable_d2h", "rank 0", "rank 3", "unstall pipeline", "SIGTERM"):
            self.assertIn(text, dom)


def two_hosts_page():
    with tempfile.TemporaryDirectory() as d:
        page = ur.html_module().render_html([ur.load(p) for p in write_reports(d, two_hosts())], vars(ur))
    keep(page, "two-hosts.html")
    return page


if __name__ == "__main__":
    unittest.main()
