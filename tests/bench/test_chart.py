"""tests/bench: tools/bench/chart.py from checked-in inputs: the H200 table
(a table make bench printed on 2 x H200), RESULT lines written here, and a timeline
pair of case B recorded on the simulated runtime (timeline-fakecuda/).

Run: python3 -m unittest discover -s tests/bench
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHART = os.path.join(ROOT, "tools", "bench", "chart.py")
# a fixed copy of a make bench table (2 x H200), so that a new measurement in docs/ does not change the test
TABLE = os.path.join(HERE, "bench-table-h200x2.md")
TIMELINE = os.path.join(HERE, "timeline-fakecuda")
SVG = "{http://www.w3.org/2000/svg}"

sys.path.insert(0, os.path.dirname(CHART))
import chart  # noqa: E402


def chart_run(*args):
    return subprocess.run([sys.executable, CHART] + list(args), capture_output=True, text=True)


def rects(root, cls):
    return [r for r in root.iter(SVG + "rect") if r.get("class") == cls]


def texts(root, cls=None):
    return [t.text for t in root.iter(SVG + "text") if cls is None or t.get("class") == cls]


def rows_of_runs(d, runs):
    """The figures chart.py gives for runs {"native"|"shim": {run name: RESULT text}} written under d."""
    for run, files in runs.items():
        os.makedirs(os.path.join(d, run))
        for name, text in files.items():
            with open(os.path.join(d, run, name + ".out"), "w") as f:
                f.write(text)
            with open(os.path.join(d, run, name + ".rc"), "w") as f:
                f.write("0\n")
    out = os.path.join(d, "c.json")
    r = chart_run("--native", os.path.join(d, "native"), "--shim", os.path.join(d, "shim"),
                  "--json", out, "--svg", os.path.join(d, "c.svg"))
    assert r.returncode == 0, r.stderr
    with open(out) as f:
        return json.load(f)["rows"]


class FromTable(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.svg, cls.json = os.path.join(cls.dir.name, "c.svg"), os.path.join(cls.dir.name, "c.json")
        r = chart_run("--from-table", TABLE, "--timeline", TIMELINE, "--about", "2 x H200, commit x",
                      "--svg", cls.svg, "--json", cls.json)
        assert r.returncode == 0, r.stderr
        with open(cls.json) as f:
            cls.fig = json.load(f)
        cls.root = ET.parse(cls.svg).getroot()  # well-formed, or this raises

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_figures(self):
        rows = {r["label"]: r for r in self.fig["rows"]}
        self.assertEqual(len(rows), 18)
        b = rows["B: 256 MiB pageable H2D throughput"]
        self.assertEqual((b["native"], b["unstall"], b["unit"], b["better"]), (9.0, 31.3, "GB/s", "higher"))
        self.assertAlmostEqual(b["ratio"], 31.3 / 9.0)
        self.assertTrue(b["target_met"])
        c = rows["C: launch latency of another thread during a 256 MiB pageable D2H loop (max)"]
        self.assertEqual((c["native"], c["unstall"], c["unit"], c["better"]), (121, 657, "us", "lower"))
        self.assertFalse(c["target_met"])
        s = rows["C: a 4 B D2H on stream 0 whose stream waits for another thread's launch"]
        self.assertEqual((s["native"], s["unstall"], s["ratio"]), ("deadlock", "completes", None))

    def test_a_bar_per_number_and_the_ratios(self):
        numeric = [i for i, r in enumerate(self.fig["rows"]) if isinstance(r["native"], float)]
        self.assertEqual(len(numeric), 15)
        for run in ("native", "unstall"):
            bars = rects(self.root, f"bar {run}")
            self.assertEqual(sorted(int(b.get("data-row")) for b in bars), numeric)
        widths = {b.get("data-row"): float(b.get("width")) for b in rects(self.root, "bar unstall")}
        native = {b.get("data-row"): float(b.get("width")) for b in rects(self.root, "bar native")}
        row = str(next(i for i, r in enumerate(self.fig["rows"]) if r["label"] == "B: 256 MiB pageable H2D throughput"))
        self.assertAlmostEqual(native[row] / widths[row], 9.0 / 31.3, places=2)  # scaled within the row
        ratios = texts(self.root, "ratio")
        self.assertIn("\u00d73.48 better", ratios)
        self.assertIn("\u00d75.43 worse", ratios)
        self.assertIn("\u00d70.0050 (201\u00d7 less)", ratios)
        self.assertIn("unstall: completes", texts(self.root, "outcome unstall"))
        self.assertIn("2 x H200, commit x", texts(self.root, "about"))

    def test_timeline(self):
        runs = self.fig["timeline"]["runs"]
        for name in ("native", "unstall"):
            r = runs[name]
            copy = next(b for b in r["host"] if b["rule"] == "pageable_h2d" and b["start_ms"] == 0)
            # the shim's held time of the copy agrees with the program's own measurement
            self.assertAlmostEqual(copy["end_ms"], r["held_ms"], delta=0.05 * r["held_ms"] + 0.5)
            self.assertEqual([b["end_ms"] for b in r["stream"]], [200.0, r["done_ms"]])
        self.assertGreater(runs["native"]["held_ms"], 200)
        self.assertLess(runs["unstall"]["held_ms"], 100)
        self.assertEqual(runs["native"]["pipeline"], [])
        self.assertEqual(len(runs["unstall"]["pipeline"]), 1)
        self.assertEqual(len(rects(self.root, "tl stream")), 4)
        self.assertEqual([b.get("data-run") for b in rects(self.root, "tl pipeline")], ["unstall"])
        self.assertEqual({b.get("data-run") for b in rects(self.root, "tl host")}, {"native", "unstall"})

    def test_redrawn_from_json(self):
        with open(self.svg) as f:
            first = f.read()
        again = os.path.join(self.dir.name, "again.svg")
        self.assertEqual(chart_run("--from-json", self.json, "--svg", again).returncode, 0)
        with open(again) as f:
            self.assertEqual(f.read(), first)


class FromRuns(unittest.TestCase):
    """RESULT lines as tests/gpu/runner.sh leaves them, two programs only."""

    def test_rows_from_result_lines(self):
        with tempfile.TemporaryDirectory() as d:
            for run, held, gbps in (("native", 202.2, 9.0), ("shim", 0.722, 31.3)):
                os.makedirs(os.path.join(d, run))
                with open(os.path.join(d, run, "case_b.out"), "w") as f:
                    f.write(f"RESULT case=B test=held_small bytes=16777216 kernel_ms=200 held_ms={held} ok=1\n"
                            f"RESULT case=B test=throughput bytes=268435456 gbps={gbps} ok=1\n")
                with open(os.path.join(d, run, "case_b.rc"), "w") as f:
                    f.write("0\n")
            out = os.path.join(d, "c.json")
            svg = os.path.join(d, "c.svg")
            r = chart_run("--native", os.path.join(d, "native"), "--shim", os.path.join(d, "shim"),
                          "--json", out, "--svg", svg)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                rows = {x["label"]: x for x in json.load(f)["rows"]}
            held = rows["B: 16 MiB pageable H2D behind a 200 ms kernel, caller held"]
            self.assertEqual((held["native"], held["unstall"], held["target_met"]), (202.2, 0.722, True))
            self.assertEqual(rows["B: 256 MiB pageable H2D throughput"]["unstall"], 31.3)
            self.assertIsNone(rows["E: legacy-stream kernel behind a ? ms kernel on a blocking stream: done at"]["native"])
            self.assertEqual(len(rects(ET.parse(svg).getroot(), "bar native")), 2)

    def test_first_use_target_from_the_runs_host_copy(self):
        """The first-use rows' target derives from the same run's host copy
        bandwidth (1.25 x bytes / GB/s + 0.1 ms), in the figures as in the table."""
        with tempfile.TemporaryDirectory() as d:
            rows = rows_of_runs(d, {run: {"case_b": f"RESULT case=B test=first_use_small bytes=16777216 kernel_ms=200 "
                                                    f"held_ms={held} ok=1\n"
                                                    "RESULT case=B test=host_copy bytes=268435456 threads=8 gbps=33.5 "
                                                    "ok=1\n"}
                                    for run, held in (("native", 202.0), ("shim", 0.9))})
            row = next(x for x in rows if "first 16 MiB" in x["label"])
            self.assertEqual((row["target"], row["target_met"]), ("<= 0.73", False))

    def test_targets_from_the_links_the_host_and_native(self):
        """The throughput rows' target is 90% of the slower of the link
        (pinned copy) and the host copy, the freed row's the caller bound of
        its own bytes; the launch row of the processes taking turns is met
        only when unstall's worst is no worse than native's in each pairing,
        and the single run's launch row has no target."""
        with tempfile.TemporaryDirectory() as d:
            runs = {}
            for run, (gbps, launch, freed) in (("native", (7.5, 0.150, 52.4)), ("shim", (44.0, 0.140, 3.5))):
                runs[run] = {
                    "case_b": f"RESULT case=B test=throughput bytes=268435456 reps=3 gbps={gbps} ok=1\n"
                              "RESULT case=B test=link bytes=268435456 reps=3 gbps=55.0 ok=1\n"
                              "RESULT case=B test=host_copy bytes=268435456 threads=16 gbps=50.0 ok=1\n",
                    "case_b_freed": f"RESULT case=B test=freed bytes=67108864 kernel_ms=50 rounds=3 held_ms={freed} ok=1\n",
                    "case_c": f"RESULT case=C test=throughput bytes=268435456 reps=3 gbps={gbps + 2} ok=1\n"
                              "RESULT case=C test=link bytes=268435456 reps=3 gbps=50.0 ok=1\n"
                              f"RESULT case=C test=launch_latency copy_bytes=268435456 max_ms={launch} ok=1\n",
                }
                # pairings: unstall better, equal, better; the shim's worst over them is the row's figure
                for i, worst in enumerate((0.150, 0.090, 0.300) if run == "native" else (0.120, 0.090, 0.200), 1):
                    runs[run][f"case_c_launch_{i}"] = (f"RESULT case=C test=launch_latency copy_bytes=268435456 "
                                                        f"max_ms={worst} ok=1\n")
                # the pinned loop beside them (case clean): a reference, without a target
                for i, worst in enumerate((0.110, 0.400, 0.080) if run == "native" else (0.100, 0.070, 0.090), 1):
                    runs[run][f"clean_launch_{i}"] = (f"RESULT case=clean test=launch_latency copy_bytes=268435456 "
                                                      f"max_ms={worst} ok=1\n")
            rows = rows_of_runs(d, runs)

            def row(start):
                return next(x for x in rows if x["label"].startswith(start))
            b = row("B: 256 MiB pageable H2D throughput")
            self.assertEqual((b["target"], b["target_met"]), (">= 45.0", False))  # 0.9 x min(55, 50)
            c = row("C: 256 MiB pageable D2H throughput")
            self.assertEqual((c["target"], c["target_met"]), (">= 45.0", True))  # 0.9 x min(50, 50)
            freed = row("B: 64 MiB pageable H2D from fresh memory")
            self.assertEqual((freed["target"], freed["target_met"]), ("<= 1.78", False))  # 1.25 x 67.1 MB / 50 GB/s
            single = row("C: launch latency of another thread during a 256 MiB pageable D2H loop (max)")
            self.assertEqual((single["target"], single["target_met"]), ("-", None))
            pairs = row("C: launch latency of another thread during a 256 MiB pageable D2H loop, 3 processes")
            self.assertEqual((pairs["native"], pairs["unstall"]), (300.0, 200.0))
            self.assertEqual((pairs["target"], pairs["target_met"]), ("<= native's in each pairing: 150/90/300", True))
            pinned = row("C: launch latency of another thread during a 256 MiB D2H loop into pinned memory")
            self.assertEqual((pinned["native"], pinned["unstall"]), (400.0, 100.0))
            self.assertEqual((pinned["target"], pinned["target_met"]), ("-", None))

    def test_launch_pairs_one_worse_pairing_misses(self):
        """One pairing where unstall's worst launch is above native's misses
        the target, though unstall's worst over the pairings is the lower;
        a pairing without native's figure misses it too."""
        with tempfile.TemporaryDirectory() as d:
            runs = {"native": {}, "shim": {}}
            for run, worsts in (("native", (0.100, 0.600, None)), ("shim", (0.120, 0.200, 0.050))):
                for i, worst in enumerate(worsts, 1):
                    runs[run][f"case_c_launch_{i}"] = ("" if worst is None else
                                                       "RESULT case=C test=launch_latency copy_bytes=268435456 "
                                                       f"max_ms={worst} ok=1\n")
            rows = rows_of_runs(d, runs)
            pairs = next(x for x in rows if "3 processes taking turns" in x["label"])
            self.assertEqual((pairs["target"], pairs["target_met"]), ("<= native's in each pairing: 100/600/?", False))
            runs["native"]["case_c_launch_3"] = ("RESULT case=C test=launch_latency copy_bytes=268435456 "
                                                 "max_ms=0.060 ok=1\n")
            runs["shim"]["case_c_launch_1"] = "RESULT case=C test=launch_latency copy_bytes=268435456 max_ms=0.090 ok=1\n"
        with tempfile.TemporaryDirectory() as d:
            rows = rows_of_runs(d, runs)
            pairs = next(x for x in rows if "3 processes taking turns" in x["label"])
            self.assertEqual(pairs["target_met"], True)

    def test_no_figures_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            r = chart_run("--native", d, "--shim", d)
            self.assertEqual(r.returncode, 1)
            self.assertIn("no figures", r.stderr)


if __name__ == "__main__":
    unittest.main()
