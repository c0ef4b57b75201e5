"""tests/bench: make demo's table at a glance (tools/bench/table.py --demo),
from RESULT lines written here in tests/gpu/runner.sh's layout.

Run: python3 -m unittest discover -s tests/bench
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TABLE = os.path.join(ROOT, "tools", "bench", "table.py")

RUNS = {
    "native": {
        "case_b": ("RESULT case=B test=held_large bytes=67108864 kernel_ms=50.000 held_ms=58.944 ok=1", ""),
        "case_c": ("RESULT case=C test=deadlock bytes=4 completed=0 deadlock=1 ok=0", ""),
    },
    "shim": {
        "case_b": ("RESULT case=B test=held_large bytes=67108864 kernel_ms=50.000 held_ms=7.252 ok=1",
                   "unstall[7]: ---- unstall report: case_b ----\nunstall[7]:   pageable_h2d  medium\nother line"),
        "case_c": ("RESULT case=C test=deadlock bytes=4 completed=1 deadlock=0 ok=1", ""),
    },
}


def table_run(*args):
    return subprocess.run([sys.executable, TABLE] + list(args), capture_output=True, text=True)


class DemoTable(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        for mode, runs in RUNS.items():
            os.makedirs(os.path.join(cls.dir.name, mode))
            for name, (out, err) in runs.items():
                base = os.path.join(cls.dir.name, mode, name)
                for ext, text in ((".out", out + "\n"), (".err", err + "\n"), (".rc", "0\n")):
                    with open(base + ext, "w") as f:
                        f.write(text)
        r = table_run("--demo", os.path.join(cls.dir.name, "native"), os.path.join(cls.dir.name, "shim"))
        assert r.returncode == 0, r.stderr
        cls.out = r.stdout
        cls.table = cls.out[cls.out.index("| case"):].rstrip("\n").split("\n")

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_ends_with_the_table(self):
        last = self.out.rstrip().split("\n")[-1]
        self.assertEqual(last.split("|")[-2].strip(), "done right: nothing to fix, nothing changed")
        self.assertEqual([c.strip() for c in self.table[0].split("|")[1:-1]],
                         ["case", "native", "unstall", "what it shows"])

    def test_one_line_per_case_columns_aligned(self):
        rows = self.table[2:]
        self.assertEqual([r.split("|")[1].strip().split(":")[0] for r in rows],
                         ["A", "A", "B", "C", "C", "D", "E", "clean"])
        self.assertEqual(len({len(line) for line in self.table}), 1, "columns do not line up")

    def test_figures_from_the_result_lines(self):
        cells = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:4]] for r in self.table[2:]}
        self.assertEqual(cells["B: 64 MiB pageable H2D behind a 50 ms kernel: call held"], ["58.9 ms", "7.252 ms"])
        self.assertEqual(cells["C: a 4 B D2H on stream 0 whose stream waits for another thread's launch"], ["deadlock", "completes"])
        # a case that did not run shows "-", never a made-up figure
        self.assertEqual(cells["E: legacy-stream work behind a ? ms kernel: done at"], ["-", "-"])

    def test_dumps_and_report_come_first(self):
        self.assertIn("held_ms", self.out[:self.out.index("| case")])
        self.assertIn("case_b: what unstall saw\n  unstall[7]: ---- unstall report: case_b ----", self.out)
        self.assertNotIn("other line", self.out)


if __name__ == "__main__":
    unittest.main()
