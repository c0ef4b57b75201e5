"""tests/bench: tools/bench/smallcopy_table.py pools the rounds of
tools/bench/smallcopy.sh: median, p99 and worst over every round's calls,
first the median of the rounds' first calls, data ok only if every round's was.

Run: python3 -m unittest discover -s tests/bench
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TABLE = os.path.join(ROOT, "tools", "bench", "smallcopy_table.py")


def rows(op, size, rounds, ok=None, gap=None):
    """smallcopy.c's lines for one row, one round each: a SMALLCOPY summary
    (of that round's calls) and its SMALLCOPY_TIMES line; gap: the summary's
    gap_us field (None: left out, as before smallcopy.c wrote it)."""
    out = []
    ok = ok if ok is not None else (1,) * len(rounds)
    for i, times in enumerate(rounds):
        s = sorted(times)
        p99 = s[int(0.99 * (len(s) - 1) + 0.5)]
        out.append(f"SMALLCOPY op={op} bytes={size} reps={len(s)} first_us={times[0]:.1f} median_us={s[len(s) // 2]:.1f} "
                   f"p99_us={p99:.1f} max_us={s[-1]:.1f} ok={ok[i]}" + (f" gap_us={gap}" if gap is not None else ""))
        out.append(f"SMALLCOPY_TIMES op={op} bytes={size} us=" + ",".join(f"{t:.1f}" for t in times))
    return out


def run_table(samples, flagged=False):
    """smallcopy_table.py over samples: [(native, shim[, control]) lines], the
    second given with --again; its stdout."""
    with tempfile.TemporaryDirectory() as d:
        args = ["--flagged"] if flagged else []
        for i, sample in enumerate(samples):
            if i > 0:
                args.append("--again")
            for name, lines in zip(("native", "shim", "control"), sample):
                args.append(os.path.join(d, f"{name}{i}"))
                with open(args[-1], "w") as f:
                    f.write("\n".join(lines) + "\n")
        p = subprocess.run([sys.executable, TABLE] + args, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


def table(native_lines, shim_lines, control_lines=None, again=None):
    """The table's rows by "op size", and its whole text; again: a second
    sample's (native, shim[, control]) lines."""
    first = (native_lines, shim_lines) + ((control_lines,) if control_lines is not None else ())
    out = run_table([first] + ([again] if again is not None else []))
    return {l.split("|")[0].split()[0] + " " + l.split("|")[0].split()[1]: l for l in out.splitlines()
            if l.startswith(("h2d", "d2h"))}, out


class SmallcopyTable(unittest.TestCase):
    def test_pooled_median_is_not_one_rounds(self):
        # the shim's second process is slow all along: its own median (20) would
        # flag the row; over the three rounds' 300 calls the median is 10
        native = rows("h2d", 4, [[10.0] * 100] * 3)
        shim = rows("h2d", 4, [[10.0] * 100, [20.0] * 100, [10.0] * 100])
        got, _ = table(native, shim)
        cols = [c.split() for c in got["h2d 4"].split("|")]
        self.assertEqual(cols[1], ["10.0", "10.0"])
        self.assertEqual(cols[2], ["10.0", "20.0"])  # p99 and worst keep the slow process's calls
        self.assertEqual(cols[3], ["10.0", "20.0"])
        self.assertIn("slower: p99 1/3", got["h2d 4"])  # one round's own p99 says so, not three

    def test_first_is_the_median_of_first_calls_and_worst_holds_the_worst(self):
        native = rows("d2h", 4096, [[30.0] + [5.0] * 99, [35.0] + [5.0] * 99, [90.0] + [5.0] * 99])
        shim = rows("d2h", 4096, [[40.0] + [5.0] * 99, [41.0] + [5.0] * 99, [300.0] + [5.0] * 99])
        got, out = table(native, shim)
        cols = [c.split() for c in got["d2h 4"].split("|")]
        self.assertEqual(cols[3], ["90.0", "300.0"])
        self.assertEqual(cols[4], ["35.0", "41.0"])
        self.assertIn("3 rounds", out)
        self.assertIn("slower: first 3/3", got["d2h 4"])  # 41 against 35: the first call is judged too (each round: 40/30, 41/35, 300/90)

    def test_a_first_call_alone_makes_a_row_slower(self):
        # every later call equal; the shim's first calls 12 us over native's
        native = rows("h2d", 4, [[20.0] + [5.0] * 99] * 3)
        shim = rows("h2d", 4, [[32.0] + [5.0] * 99] * 3)
        got, out = table(native, shim)
        self.assertTrue(got["h2d 4"].endswith("slower: first 3/3"), got["h2d 4"])
        self.assertIn("rows where unstall is slower: 1 ", out)

    def test_a_first_call_within_the_margin_is_not_slower(self):
        # 1 us over: inside the margin (more than 3% and more than 1 us)
        native = rows("h2d", 4, [[20.0] + [5.0] * 99] * 3)
        shim = rows("h2d", 4, [[21.0] + [5.0] * 99] * 3)
        got, _ = table(native, shim)
        self.assertTrue(got["h2d 4"].endswith("ok"), got["h2d 4"])

    def test_rounds_per_size_class_are_said(self):
        # smallcopy.sh runs the rows up to 1 MiB in more rounds than the larger ones
        native = rows("h2d", 4, [[5.0] * 10] * 8) + rows("h2d", 2 << 20, [[150.0] * 10] * 3)
        shim = rows("h2d", 4, [[5.0] * 10] * 8) + rows("h2d", 2 << 20, [[140.0] * 10] * 3)
        _, out = table(native, shim)
        self.assertIn("8 rounds up to 4 B, 3 from 2 MiB of processes", out)

    def test_a_bad_round_marks_the_row(self):
        native = rows("h2d", 4, [[5.0] * 10] * 3)
        shim = rows("h2d", 4, [[5.0] * 10] * 3, ok=(1, 0, 1))
        got, out = table(native, shim)
        self.assertIn(" BAD ", got["h2d 4"])
        self.assertIn("rows where unstall is slower: 0 ", out)

    def test_summaries_alone_still_read(self):
        # an older file: no SMALLCOPY_TIMES lines, one round
        native = [l for l in rows("h2d", 4, [[5.0] * 10]) if l.startswith("SMALLCOPY ")]
        shim = [l for l in rows("h2d", 4, [[9.0] * 10]) if l.startswith("SMALLCOPY ")]
        got, out = table(native, shim)
        self.assertIn("slower: median 1/1,p99 1/1,first 1/1", got["h2d 4"])
        self.assertNotIn("rounds of processes", out)

    def test_control_shows_the_rows_where_native_against_native_moves(self):
        # the control (the shim disabled) is 2 us off native in h2d 4 B: the
        # row says so; the verdict stays unstall against native
        native = rows("h2d", 4, [[8.0] * 100] * 3) + rows("h2d", 65536, [[9.0] * 100] * 3)
        shim = rows("h2d", 4, [[10.0] * 100] * 3) + rows("h2d", 65536, [[11.0] * 100] * 3)
        control = rows("h2d", 4, [[6.0] * 100] * 3) + rows("h2d", 65536, [[9.2] * 100] * 3)
        got, out = table(native, shim, control)
        self.assertIn("slower: median 3/3,p99 3/3,first 3/3 (control off native: median,p99,first)", got["h2d 4"])
        self.assertTrue(got["h2d 64"].endswith("slower: median 3/3,p99 3/3,first 3/3"), got["h2d 64"])
        self.assertIn("|    6.0    6.0 |", got["h2d 4"])
        self.assertIn("rows where unstall is slower: 2 ", out)
        self.assertIn("either way, by the figures: 1; by the verdict's rule: 0 of the 0 rows with rounds enough to test, 1 of the 2 with too few (the figure alone)", out)

    def test_rounds_agreeing_tell_one_slow_process_from_every_process(self):
        # two rows flagged by the pooled p99: in 64 KiB one shim process of four
        # has a burst of slow calls; in 4 KiB every shim process is 3 us slower
        # at its tail. The rounds that say the same on their own: 1/4 and 4/4.
        native = rows("h2d", 65536, [[16.0] * 95 + [25.0] * 5] * 4) + rows("h2d", 4096, [[7.0] * 95 + [12.0] * 5] * 4)
        shim = (rows("h2d", 65536, [[16.0] * 95 + [25.0] * 5] * 3 + [[16.0] * 70 + [50.0] * 30])
                + rows("h2d", 4096, [[7.0] * 95 + [15.0] * 5] * 4))
        got, out = table(native, shim)
        self.assertTrue(got["h2d 64"].endswith("slower: p99 1/4"), got["h2d 64"])
        self.assertTrue(got["h2d 4"].endswith("slower: p99 4/4"), got["h2d 4"])
        self.assertIn("the rounds whose own figure is that much worse", out)

    def test_rows_run_apart_are_said_to_be(self):
        got, out = table(rows("h2d", 4, [[20.0] * 10] * 2, gap=2000), rows("h2d", 4, [[21.0] * 10] * 2, gap=2000))
        self.assertTrue(got["h2d 4"].endswith("ok"), got["h2d 4"])
        self.assertIn("after the host slept 2000 us (SMALLCOPY_GAP_US)", out)
        for gap in (0, None):  # back to back, as written now or before the field
            _, out = table(rows("h2d", 4, [[8.0] * 10], gap=gap), rows("h2d", 4, [[8.0] * 10], gap=gap))
            self.assertNotIn("SMALLCOPY_GAP_US", out)

    def test_a_worse_figure_that_chance_explains_is_not_slower(self):
        # 16 rounds whose first calls come out at 80 or 140 us, native and
        # shim alike: the shim's drew 140 in 9 rounds, native's in 5. Its
        # median first call (140 against 80) is worse by far more than the
        # margin, but 9 of 14 such rounds falling one way is what a coin does
        # (p 0.21): ok, and the counts said
        native_firsts = [140.0] * 5 + [80.0] * 11
        shim_firsts = [80.0] * 5 + [140.0] * 9 + [80.0] * 2
        native = rows("h2d", 1 << 20, [[f] + [85.0] * 99 for f in native_firsts])
        shim = rows("h2d", 1 << 20, [[f] + [85.0] * 99 for f in shim_firsts])
        got, out = table(native, shim)
        cols = [c.split() for c in got["h2d 1"].split("|")]
        self.assertEqual(cols[4], ["80.0", "140.0"])
        self.assertTrue(got["h2d 1"].endswith("ok; by chance: first 9/16 against 5/16 (p 0.21)"), got["h2d 1"])
        self.assertIn("rows where unstall is slower: 0 ", out)
        self.assertIn("in a figure that chance explains, and not slower: 1", out)

    def test_a_cost_every_round_pays_is_slower_beyond_chance(self):
        # 16 rounds; the shim's median 2 us over native's in 15, even in one
        native = rows("d2h", 4, [[8.0] * 100] * 16)
        shim = rows("d2h", 4, [[10.0] * 100] * 15 + [[8.0] * 100])
        got, out = table(native, shim)
        self.assertTrue(got["d2h 4"].endswith("slower: median 15/16 against 0/16 (p 3.1e-05),"
                                              "p99 15/16 against 0/16 (p 3.1e-05),first 15/16 against 0/16 (p 3.1e-05)"), got["d2h 4"])
        self.assertIn("rows where unstall is slower: 1 ", out)

    def test_a_control_off_native_by_chance_is_not_counted_by_the_test(self):
        # the control's median 2 us off native in 10 rounds one way and 6 the
        # other: off by the figure, not by the test
        native = rows("h2d", 4096, [[7.0] * 100] * 16)
        shim = rows("h2d", 4096, [[7.0] * 100] * 16)
        control = rows("h2d", 4096, [[9.0] * 100] * 10 + [[5.0] * 100] * 6)
        _, out = table(native, shim, control)
        self.assertIn("either way, by the figures: 1; by the verdict's rule: 0 of the 1 rows with rounds enough to test", out)

    def test_a_slower_row_stands_only_if_the_second_sample_says_so_too(self):
        # the 4 KiB row's first call 2 us worse in 12 rounds of 16 and again in
        # the second sample: slower; the 64 KiB row's the same in the first
        # sample only: ok, both samples said
        def firsts(slow):  # the rounds in `slow` have a first call of 9 us, the others 7
            return [[9.0 if i in slow else 7.0] + [7.0] * 99 for i in range(16)]
        native = rows("h2d", 4096, firsts(())) + rows("h2d", 65536, firsts(()))
        shim = rows("h2d", 4096, firsts(range(12))) + rows("h2d", 65536, firsts(range(12)))
        native2 = rows("h2d", 4096, firsts(())) + rows("h2d", 65536, firsts(range(11, 16)))
        shim2 = rows("h2d", 4096, firsts(range(11))) + rows("h2d", 65536, firsts(range(9)))
        got, out = table(native, shim, again=(native2, shim2))
        self.assertTrue(got["h2d 4"].endswith("slower: first 12/16 against 0/16 (p 0.00024) and again 11/16 against "
                                              "0/16 (p 0.00049)"), got["h2d 4"])
        self.assertTrue(got["h2d 64"].endswith("ok; by chance: first 12/16 against 0/16 (p 0.00024) but not again: "
                                               "9/16 against 5/16 (p 0.21)"), got["h2d 64"])
        self.assertIn("rows where unstall is slower: 1 ", out)
        self.assertIn("rows of unstall judged again in a second sample (16 rounds, the row's op in fresh processes): 2;",
                      out)

    def test_a_second_sample_within_the_margin_does_not_confirm(self):
        native = rows("d2h", 4, [[8.0] * 100] * 16)
        shim = rows("d2h", 4, [[10.0] * 100] * 16)
        got, _ = table(native, shim, again=(rows("d2h", 4, [[8.0] * 100] * 16), rows("d2h", 4, [[8.5] * 100] * 16)))
        self.assertIn("median 16/16 against 0/16 (p 1.5e-05) but not again: 8.5 / 8.0 us", got["d2h 4"])
        self.assertTrue(got["d2h 4"].split("|")[-1].strip().startswith("ok; by chance:"), got["d2h 4"])

    def test_a_row_of_few_rounds_is_judged_again_by_the_test(self):
        # 3 rounds: the figure alone flags the 2 MiB row's first call; 16 rounds
        # of the second sample, as often worse as better, do not
        native = rows("d2h", 2 << 20, [[280.0] + [150.0] * 9] * 3)
        shim = rows("d2h", 2 << 20, [[340.0] + [120.0] * 9] * 3)
        native2 = rows("d2h", 2 << 20, [[280.0 if i < 9 else 340.0] + [150.0] * 9 for i in range(16)])
        shim2 = rows("d2h", 2 << 20, [[340.0 if i < 9 else 280.0] + [120.0] * 9 for i in range(16)])
        got, _ = table(native, shim, again=(native2, shim2))
        self.assertIn("ok; by chance: p99 3/3 but not again: 340.0 / 340.0 us,first 3/3 but not again: 9/16 against "
                      "7/16 (p 0.4)", got["d2h 2"])

    def test_a_control_off_native_in_one_sample_only_is_not_counted(self):
        native = rows("h2d", 4096, [[7.0] * 100] * 16)
        control = rows("h2d", 4096, [[9.0] * 100] * 16)
        _, out = table(native, native, control)
        self.assertIn("by the verdict's rule: 1 of the 1 rows", out)
        _, out = table(native, native, control, again=(native, native, native))
        self.assertIn("by the verdict's rule: 0 of the 1 rows", out)
        _, out = table(native, native, control, again=(native, native, control))
        self.assertIn("by the verdict's rule: 1 of the 1 rows", out)

    def test_flagged_names_the_rows_to_judge_again(self):
        # the shim slower in h2d 4 B, the control off native in d2h 4 KiB, both
        # fine in h2d 64 KiB
        native = rows("h2d", 4, [[8.0] * 100] * 16) + rows("h2d", 65536, [[15.0] * 100] * 16) + \
            rows("d2h", 4096, [[8.0] * 100] * 16)
        shim = rows("h2d", 4, [[10.0] * 100] * 16) + rows("h2d", 65536, [[15.0] * 100] * 16) + \
            rows("d2h", 4096, [[8.0] * 100] * 16)
        control = rows("h2d", 4, [[8.0] * 100] * 16) + rows("h2d", 65536, [[15.0] * 100] * 16) + \
            rows("d2h", 4096, [[6.0] * 100] * 16)
        out = run_table([(native, shim, control)], flagged=True)
        self.assertEqual(out.split("\n"), ["h2d 4", "d2h 4096", ""])
        # a control off native by its figure alone (3 rounds) is not
        few = rows("d2h", 2 << 20, [[150.0] * 10] * 3)
        out = run_table([(few, few, rows("d2h", 2 << 20, [[120.0] * 10] * 3))], flagged=True)
        self.assertEqual(out, "")

    def test_without_control_no_control_column(self):
        got, out = table(rows("h2d", 4, [[8.0] * 10]), rows("h2d", 4, [[8.0] * 10]))
        self.assertNotIn("control", out)


if __name__ == "__main__":
    unittest.main()
