"""Tests of tools/unstall-report: loading, merging ranks, the text report, the
merged JSON, the Chrome trace / Perfetto export, and the command line.
Run: python3 -m unittest discover -s tests/report"""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "tools", "unstall-report")
FIX = os.path.join(HERE, "fixtures")


def load_tool():
    loader = importlib.machinery.SourceFileLoader("unstall_report", TOOL)
    spec = importlib.util.spec_from_loader("unstall_report", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


ur = load_tool()


def fixture(name):
    return ur.load(os.path.join(FIX, name))


def run_tool(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=60)


class LoadTest(unittest.TestCase):
    def test_reads_a_report(self):
        r = fixture("rank0.json")
        self.assertEqual(r["pid"], 1000)
        self.assertEqual(len(r["findings"]), 2)

    def test_rejects_broken_json(self):
        with self.assertRaisesRegex(ur.ReportError, "not JSON"):
            fixture("broken.json")

    def test_rejects_other_versions(self):
        with self.assertRaisesRegex(ur.ReportError, "version 99"):
            fixture("future.json")

    def test_rejects_missing_file(self):
        with self.assertRaisesRegex(ur.ReportError, "No such file"):
            fixture("absent.json")


class MergeTest(unittest.TestCase):
    def setUp(self):
        self.reports = [fixture("rank0.json"), fixture("rank1.json")]
        self.rows, self.fixes = ur.merge(self.reports)

    def row(self, rule, other=False):
        rows = [r for r in self.rows if r["rule"] == rule and r["other"] == other]
        self.assertEqual(len(rows), 1)
        return rows[0]

    def test_same_site_merges_across_ranks(self):
        d2h = self.row("pageable_d2h")
        self.assertEqual(d2h["count"], 5)
        self.assertEqual(d2h["total_ns"], 50000000)
        self.assertEqual(d2h["max_ns"], 12000000)
        self.assertEqual(d2h["fixed"], 3)
        self.assertEqual(d2h["observed"], 2)
        self.assertEqual(d2h["bytes"], 5 * 64 << 20)
        self.assertEqual(d2h["ranks"], {"0": 3, "1": 2})
        self.assertEqual(d2h["apis"], ["cudaMemcpyAsync"])

    def test_other_sites_and_distinct_sites_stay_apart(self):
        self.assertEqual(len(self.rows), 4)
        self.assertEqual(self.row("explicit_sync")["ranks"], {"0": 2})
        other = self.row("explicit_sync", other=True)
        self.assertEqual(other["count"], 4)
        self.assertEqual(other["ranks"], {"1": 4})

    def test_sorted_by_time_held(self):
        self.assertEqual([r["rule"] for r in self.rows],
                         ["staged_peer", "pageable_d2h", "explicit_sync", "explicit_sync"])
        self.assertFalse(self.rows[2]["other"])  # 5 ms before the 0.4 ms of other sites

    def test_fixes_come_from_the_reports(self):
        self.assertIn("pinned", self.fixes["pageable_d2h"])

    def test_rule_totals(self):
        totals = {t["rule"]: t for t in ur.rule_totals(self.rows)}
        self.assertEqual(totals["explicit_sync"]["count"], 6)
        self.assertEqual(totals["staged_peer"]["total_ns"], 60000000)


class UnlocatedTest(unittest.TestCase):
    """Short explicit waits counted without a call site (option
    sync_site_min_us): one row per (rule, API) across ranks, never merged
    with a located row, shown as such."""

    def setUp(self):
        self.reports = [fixture("rank0.json"), fixture("rank1.json")]
        for i, r in enumerate(self.reports):
            for api in ("cudaStreamSynchronize", "cudaEventSynchronize"):
                r["findings"].append(dict(index=len(r["findings"]), rule="explicit_sync", severity="low", api=api,
                                          count=10 + i, bytes=0, total_ns=1000 * (10 + i), max_ns=2000, fixed=0,
                                          observed=10 + i, forbidden=0, first_ns=0, last_ns=0, other=False,
                                          unlocated=True, streams=["user"], devices=[], site={"python": [], "native": []}))
        self.rows, _ = ur.merge(self.reports)

    def test_one_row_per_api_across_ranks(self):
        short = [r for r in self.rows if r["unlocated"]]
        self.assertEqual(sorted(r["apis"][0] for r in short), ["cudaEventSynchronize", "cudaStreamSynchronize"])
        for r in short:
            self.assertEqual(r["count"], 21)
            self.assertEqual(r["ranks"], {"0": 10, "1": 11})
        self.assertTrue(all(not r["unlocated"] for r in self.rows if r not in short))

    def test_text_says_so(self):
        text = ur.render_text(self.reports)
        self.assertIn("(short waits: counted, not located by call site; option sync_site_min_us)", text)


class TextTest(unittest.TestCase):
    def test_merged_text(self):
        text = ur.render_text([fixture("rank0.json"), fixture("rank1.json")])
        self.assertIn("---- unstall report: 2 processes (ranks 0-1), python3 train.py, mode report ----", text)
        self.assertIn("  pageable_d2h       high      50.0 ms in 5 calls, 320.0 MiB, 3 fixed", text)
        self.assertIn("   2  pageable_d2h       high          5  320.0 MiB    50.0 ms    12.0 ms         3/2  "
                      "cudaMemcpyAsync", text)
        self.assertIn("        at /w/train.py:42 (step) <- /w/train.py:80 (main) <- "
                      "libtorch_cuda.so!at::native::copy_+0x1a2 <- libtorch_cuda.so!at::native::_to_copy+0x3c <- "
                      "libtorch_cpu.so!at::_ops::to::call+0x77", text)
        self.assertIn("        ranks: 0:3 1:2", text)
        self.assertIn("        at (other sites: the table of call sites is full)", text)
        self.assertIn("how to fix them:", text)
        self.assertIn("  staged_peer        enable peer access", text)
        self.assertTrue(text.endswith("---- end of unstall report ----\n"))

    def test_single_process_has_no_rank_lines(self):
        text = ur.render_text([fixture("rank0.json")])
        self.assertIn("1 process (rank 0)", text)
        self.assertNotIn("ranks:", text)

    def test_top(self):
        text = ur.render_text([fixture("rank0.json"), fixture("rank1.json")], top=1)
        self.assertIn("   1  staged_peer", text)
        self.assertNotIn("   2  pageable_d2h", text)
        self.assertIn("... 3 more rows (--top)", text)

    def test_process_without_cuda_calls(self):
        text = ur.render_text([fixture("nocuda.json")])
        self.assertIn("rank 2 (pid 2000): unstall saw no CUDA runtime call", text)
        self.assertIn("-cudart shared", text)
        self.assertIn("no implicit synchronization seen", text)

    def test_process_that_loaded_the_runtime_but_called_nothing(self):
        # torchrun's own process after import torch: not told it may link statically
        r = fixture("nocuda.json")
        r["cuda"] = "runtime_not_called"
        text = ur.render_text([r])
        self.assertIn("rank 2 (pid 2000): unstall saw no CUDA runtime call: the process loaded the CUDA runtime but "
                      "called none of it", text)
        self.assertNotIn("statically", text)
        r["cuda"] = "driver_without_runtime"
        self.assertIn("libcuda.so.1 is loaded but no libcudart", ur.render_text([r]))

    def test_unranked_process(self):
        r = fixture("rank0.json")
        r["rank"] = None
        self.assertIn("1 process (pid 1000)", ur.render_text([r]))

    def test_amounts(self):
        self.assertEqual(ur.human_bytes(1023), "1023 B")
        self.assertEqual(ur.human_bytes(64 << 20), "64.0 MiB")
        self.assertEqual(ur.human_time(1500), "1.5 us")
        self.assertEqual(ur.human_time(2345000000), "2.35 s")

    def test_long_python_path_shortened(self):
        frame = {"file": "/home/someone/projects/model/src/pkg/train.py", "line": 3, "function": "f"}
        self.assertEqual(ur.python_text(frame), ".../pkg/train.py:3 (f)")


class JsonTest(unittest.TestCase):
    def test_merged_json(self):
        merged = ur.merged_json([fixture("rank0.json"), fixture("rank1.json")])
        self.assertEqual(merged["tool"], "unstall-report")
        self.assertEqual([p["rank"] for p in merged["processes"]], [0, 1])
        self.assertTrue(merged["processes"][0]["file"].endswith("rank0.json"))
        self.assertEqual(merged["findings"][1]["ranks"], {"0": 3, "1": 2})
        self.assertEqual(merged["rules"][0]["rule"], "staged_peer")
        self.assertIn("peer access", merged["rules"][0]["fix"])
        json.dumps(merged)  # serializable


class TraceTest(unittest.TestCase):
    def setUp(self):
        self.reports = [fixture("rank0.json"), fixture("rank1.json")]
        self.trace = ur.render_trace(self.reports)
        self.events = self.trace["traceEvents"]

    def of(self, ph, **match):
        return [e for e in self.events if e["ph"] == ph and all(e.get(k) == v for k, v in match.items())]

    def test_one_process_per_rank_even_with_equal_pids(self):
        names = self.of("M", name="process_name")
        self.assertEqual(len(names), 2)
        self.assertNotEqual(names[0]["pid"], names[1]["pid"])  # both reports say pid 1000
        self.assertEqual(names[0]["args"]["name"], "rank 0: python3 train.py (pid 1000)")
        self.assertEqual(names[1]["args"]["name"], "rank 1: python3 train.py (pid 1000)")

    def test_findings_on_thread_tracks(self):
        findings = [e for e in self.of("X") if e["cat"] == "unstall.finding"]
        self.assertEqual(len(findings), 7)
        first = findings[0]
        self.assertEqual(first["name"], "pageable_d2h")
        self.assertEqual(first["tid"], 1000)
        # wall clock: realtime 1.7e18 ns at monotonic 1e9 ns; the event 0.5 ms later
        self.assertEqual(first["ts"], 1700000000000000 + 500)
        self.assertEqual(first["dur"], 12000)
        self.assertEqual(first["args"]["api"], "cudaMemcpyAsync")
        self.assertTrue(first["args"]["fixed"])
        self.assertTrue(first["args"]["site"].startswith("/w/train.py:42 (step)"))
        threads = {e["tid"]: e["args"]["name"] for e in self.of("M", name="thread_name") if e["tid"] < ur.SPAN_TID_BASE}
        self.assertEqual(threads[1001], "findings, thread 1001")

    def test_spans_on_gpu_tracks(self):
        spans = [e for e in self.of("X") if e["cat"] == "unstall.pipeline"]
        self.assertEqual(len(spans), 3)
        self.assertEqual({e["tid"] for e in spans}, {ur.SPAN_TID_BASE, ur.SPAN_TID_BASE + 1})
        self.assertEqual(spans[0]["dur"], 9400)
        labels = {e["args"]["name"] for e in self.of("M", name="thread_name") if e["tid"] >= ur.SPAN_TID_BASE}
        self.assertEqual(labels, {"unstall pipeline, GPU 0", "unstall pipeline, GPU 1"})

    def test_time_base_first(self):
        trace = ur.render_trace(self.reports, time_base="first")
        ts = [e["ts"] for e in trace["traceEvents"] if e["ph"] == "X"]
        self.assertEqual(min(ts), 0)
        self.assertEqual(max(ts), 1100000 - 500)  # rank 1's last event, 1.1 s after rank 0's first

    def test_other_sites_event(self):
        r = fixture("rank1.json")
        r["events"].append(dict(r["events"][0], finding=2, rule="explicit_sync"))
        trace = ur.render_trace([r])
        sites = [e["args"]["site"] for e in trace["traceEvents"] if e["ph"] == "X"]
        self.assertIn("(other sites)", sites)


def multi_host_reports():
    """node-a ranks 0 and 1, node-b rank 0 (LOCAL_RANK repeats across hosts)."""
    a0, a1, b0 = fixture("rank0.json"), fixture("rank1.json"), fixture("rank0.json")
    a0["host"] = a1["host"] = "node-a"
    b0["host"], b0["pid"], b0["_file"] = "node-b", 3000, "b0.json"
    return [b0, a1, a0]


class HostTest(unittest.TestCase):
    """Reports of a job over several nodes, grouped by host and rank."""

    def test_rows_count_per_host_and_rank(self):
        rows, _ = ur.merge(multi_host_reports())
        d2h = [r for r in rows if r["rule"] == "pageable_d2h" and not r["other"]][0]
        self.assertEqual(list(d2h["ranks"].items()), [("node-a/0", 3), ("node-a/1", 2), ("node-b/0", 3)])

    def test_one_host_keeps_plain_ranks(self):
        reports = multi_host_reports()[1:]
        rows, _ = ur.merge(reports)
        d2h = [r for r in rows if r["rule"] == "pageable_d2h" and not r["other"]][0]
        self.assertEqual(d2h["ranks"], {"0": 3, "1": 2})

    def test_text_by_host_and_rank(self):
        text = ur.render_text(multi_host_reports())
        self.assertIn("---- unstall report: 3 processes (2 hosts: node-a ranks 0-1; node-b rank 0), ", text)
        self.assertIn("        ranks: node-a/0:3 node-a/1:2 node-b/0:3", text)
        lines = text.splitlines()
        start = lines.index("by host and rank:")
        table = [l.split()[:4] for l in lines[start + 2:start + 5]]
        self.assertEqual(table, [["node-a", "0", "1000", "5"], ["node-a", "1", "1000", "7"],
                                 ["node-b", "0", "3000", "5"]])

    def test_merged_json_processes(self):
        merged = ur.merged_json(multi_host_reports())
        self.assertEqual([(p["host"], p["rank"], p["pid"]) for p in merged["processes"]],
                         [("node-a", 0, 1000), ("node-a", 1, 1000), ("node-b", 0, 3000)])
        self.assertEqual(merged["processes"][0]["count"], 5)

    def test_trace_names_the_host(self):
        trace = ur.render_trace(multi_host_reports())
        names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
        self.assertEqual(names[2], "node-b rank 0: python3 train.py (pid 3000)")

    def test_command_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for i, r in enumerate(multi_host_reports()):
                path = os.path.join(tmp, f"r{i}.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump({k: v for k, v in r.items() if k != "_file"}, f)
                paths.append(path)
            p = run_tool(*paths)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("node-b rank 0", p.stdout)
        self.assertIn("by host and rank:", p.stdout)


class CommandLineTest(unittest.TestCase):
    def test_text(self):
        p = run_tool(os.path.join(FIX, "rank0.json"), os.path.join(FIX, "rank1.json"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("2 processes (ranks 0-1)", p.stdout)

    def test_json(self):
        p = run_tool("--json", os.path.join(FIX, "rank0.json"), os.path.join(FIX, "rank1.json"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["findings"][1]["count"], 5)

    def test_trace(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "trace.json")
            p = run_tool("--trace", out, os.path.join(FIX, "rank0.json"), os.path.join(FIX, "rank1.json"))
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout, "")
            self.assertIn("10 events from 2 reports", p.stderr)
            with open(out) as f:
                trace = json.load(f)
            self.assertEqual(len([e for e in trace["traceEvents"] if e["ph"] == "X"]), 10)
            self.assertEqual(os.listdir(d), ["trace.json"])

    def test_bad_file_among_good_ones(self):
        p = run_tool(os.path.join(FIX, "rank0.json"), os.path.join(FIX, "broken.json"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("broken.json: not JSON", p.stderr)
        self.assertIn("1 process (rank 0)", p.stdout)

    def test_nothing_readable(self):
        p = run_tool(os.path.join(FIX, "broken.json"), os.path.join(FIX, "absent.json"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("no report could be read", p.stderr)


if __name__ == "__main__":
    unittest.main()
