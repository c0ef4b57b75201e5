"""tests/bench: tools/bench/perfdoc.py writes docs/performance.md and the
README's results table from the recorded bench.json files, newest per machine
kind, marks unmet targets, and `check` fails when either document is stale.

Run: python3 -m unittest discover -s tests/bench
"""
import importlib.util
import json
import os
import re
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load_perfdoc():
    spec = importlib.util.spec_from_file_location("perfdoc", os.path.join(ROOT, "tools", "bench", "perfdoc.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bench(value):
    """A bench.json as chart.py writes it: one met and one unmet row."""
    return {"version": 1, "about": "", "rows": [
        {"label": "B: 16 MiB pageable H2D behind a 200 ms kernel, caller held", "unit": "ms", "better": "lower",
         "native": 201.9, "unstall": value, "ratio": value / 201.9, "target": "< 5", "target_met": value < 5},
        {"label": "C: launch latency of another thread during a 256 MiB pageable D2H loop (max)", "unit": "us",
         "better": "lower", "native": 92.0, "unstall": 301.0, "ratio": 3.27, "target": "<= 300",
         "target_met": False},
    ]}


class PerfDoc(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.pd = load_perfdoc()
        self.pd.MEASUREMENTS = os.path.join(d, "measurements")
        self.pd.PERFORMANCE = os.path.join(d, "performance.md")
        self.pd.README = os.path.join(d, "README.md")
        self.pd.CHART = os.path.join(d, "bench-chart.svg")
        os.makedirs(self.pd.MEASUREMENTS)
        with open(self.pd.README, "w") as f:
            f.write(f"# x\n\n{self.pd.BEGIN}\n{self.pd.END}\n\ntail\n")

    def tearDown(self):
        self.tmp.cleanup()

    def record(self, value, date, kind="h200x2"):
        src = os.path.join(self.tmp.name, f"bench-{date}.json")
        with open(src, "w") as f:
            json.dump(bench(value), f)
        self.pd.main(["record", src, "--kind", kind, "--date", date, "--commit", "abc1234",
                      "--machine", f"machine {kind}", "--dir", self.pd.MEASUREMENTS])

    def read(self, path):
        with open(path) as f:
            return f.read()

    def test_newest_recording_per_kind_is_shown(self):
        self.record(0.9, "2026-01-01")
        self.record(0.5, "2026-02-01")
        self.record(7.0, "2026-01-15", kind="h100")
        self.pd.main(["write"])
        perf = self.read(self.pd.PERFORMANCE)
        self.assertIn("| 201.9 ms | 0.5 ms | < 5 ms |", perf)
        self.assertNotIn("0.9 ms", perf)
        self.assertIn("## machine h100", perf)
        self.assertIn("| 201.9 ms | 7.0 ms | < 5 ms | 0.03 | **no** |", perf)
        self.assertIn("Commit `abc1234`, 2026-02-01", perf)

    def test_readme_block_takes_the_first_kind_and_keeps_the_rest(self):
        self.record(0.5, "2026-02-01")
        self.pd.main(["write"])
        readme = self.read(self.pd.README)
        self.assertTrue(readme.startswith("# x\n\n" + self.pd.BEGIN))
        self.assertTrue(readme.endswith(self.pd.END + "\n\ntail\n"))
        self.assertIn("| C: launch latency of another thread during a 256 MiB pageable D2H loop (max) "
                      "| 92.0 us | 301.0 us | <= 300 us | **no** |", readme)

    def test_the_chart_is_drawn_from_the_readme_recording(self):
        self.record(0.5, "2026-02-01")
        self.pd.main(["write"])
        svg = self.read(self.pd.CHART)
        self.assertIn("<svg", svg)
        self.assertIn("commit `abc1234`", svg)
        with open(self.pd.CHART, "w") as f:
            f.write(svg.replace("0.5", "0.6"))
        self.assertEqual(self.pd.main(["check"]), 1)

    def test_check_fails_when_stale(self):
        self.record(0.5, "2026-02-01")
        self.pd.main(["write"])
        self.assertEqual(self.pd.main(["check"]), 0)
        self.record(0.7, "2026-03-01")
        self.assertEqual(self.pd.main(["check"]), 1)
        self.pd.main(["write"])
        with open(self.pd.README, "a") as f:
            f.write("edited\n")
        self.assertEqual(self.pd.main(["check"]), 0)  # outside the block: the README's own text
        text = self.read(self.pd.README).replace("301.0 us", "30.0 us")
        with open(self.pd.README, "w") as f:
            f.write(text)
        self.assertEqual(self.pd.main(["check"]), 1)

    def test_a_recording_without_its_provenance_is_refused(self):
        with open(os.path.join(self.pd.MEASUREMENTS, "2026-01-01-x.bench.json"), "w") as f:
            json.dump(bench(0.5), f)
        with self.assertRaises(SystemExit):
            self.pd.main(["write"])


class MeasurementsIndex(unittest.TestCase):
    """docs/measurements/README.md lists every raw output kept there, and
    every file the project's text cites there exists."""

    DIR = os.path.join(ROOT, "docs", "measurements")

    def listed(self):
        with open(os.path.join(self.DIR, "README.md")) as f:
            return set(re.findall(r"^\| `([^`]+)` \|", f.read(), re.M))

    def test_every_file_is_listed_and_every_listed_file_exists(self):
        files = {f for f in os.listdir(self.DIR) if f != "README.md"}
        listed = self.listed()
        self.assertEqual(sorted(files - listed), [], "files in docs/measurements missing from its README.md")
        self.assertEqual(sorted(listed - files), [], "docs/measurements/README.md lists files that are not there")

    def test_every_cited_file_exists(self):
        files = set(os.listdir(self.DIR))
        missing = []
        for top in ("README.md", "docs", "shim", "tools", "config", "tests"):
            path = os.path.join(ROOT, top)
            walk = [(os.path.dirname(path), [], [top])] if os.path.isfile(path) else os.walk(path)
            for d, _, names in walk:
                for name in names:
                    if not name.endswith((".md", ".c", ".h", ".def", ".py", ".sh", ".conf", ".txt")):
                        continue
                    with open(os.path.join(d, name), errors="replace") as f:
                        for cited in re.findall(r"measurements/([A-Za-z0-9_.-]+\.(?:md|txt|json))", f.read()):
                            if cited not in files:
                                missing.append(f"{os.path.relpath(os.path.join(d, name), ROOT)}: {cited}")
        self.assertEqual(missing, [], "citations of files not in docs/measurements")


if __name__ == "__main__":
    unittest.main()
