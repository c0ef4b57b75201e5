"""The report survives the way a process ends (shim/report/endings.c), on the
simulated runtime: each termination signal at random points during
pipelined copies (the report present and consistent, the exit status as
native, no byte wrong: the program checks every round), a program's own
handler, Python's re-raise of SIGINT, an ignored signal, SIGKILL (a snapshot
no older than the interval), and a three-rank job whose launcher ends the
others when one fails (every report present, the merged view says how each
ended). BUILD (default build) names the build folder."""
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.abspath(os.environ.get("BUILD", os.path.join(ROOT, "build")))
SHIM = os.path.join(BUILD, "libunstall.so")
FAKE = os.path.join(BUILD, "fakecuda")
REPORT_TOOL = os.path.join(ROOT, "tools", "unstall-report")
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def child_setup():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # SIGQUIT's core dump: not on the test machine's disk
    # the signals' default actions, whatever the test was started with (under
    # nohup SIGHUP is ignored, and the program, native too, would never end)
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


class Endings(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="unstall-endings-")
        cls.prog = os.path.join(cls.work, "ending_prog")
        cc = os.environ.get("CC", "gcc").split()
        flags = os.environ.get("SAN_CFLAGS", "").split()
        subprocess.run(cc + ["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", *flags,
                             "-I" + os.path.join(CUDA, "include"), "-o", cls.prog,
                             os.path.join(ROOT, "tests", "endings", "ending_prog.c"), "-L" + FAKE, "-lcudart",
                             "-Wl,-rpath," + FAKE], check=True)

    def start(self, mode, shim=True, seed=1, **env):
        e = dict(os.environ)
        for k in [k for k in e if k.startswith("UNSTALL_")]:
            del e[k]
        if shim:
            preload = os.environ.get("SAN_PRELOAD", "")
            e["LD_PRELOAD"] = (preload + " " if preload else "") + SHIM
        e.update({k: str(v) for k, v in env.items()})
        p = subprocess.Popen([self.prog, mode, str(seed)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e,
                             preexec_fn=child_setup, text=True)
        line = p.stdout.readline()  # "ready": its first round checked
        self.assertEqual(line.strip(), "ready", p.stderr.read() if p.poll() is not None else line)
        return p

    def finish(self, p, timeout=60):
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err

    def report(self, path):
        self.assertTrue(os.path.exists(path), f"no report at {path}")
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    def assert_consistent(self, r):
        self.assertEqual(r["tool"], "unstall")
        rules = {x["rule"]: x for x in r["rules"]}
        self.assertIn("pageable_h2d", rules)  # the copies it made are in it
        self.assertGreater(rules["pageable_h2d"]["count"], 0)
        self.assertEqual(sum(f["count"] for f in r["findings"] if f["rule"] == "pageable_h2d"),
                         rules["pageable_h2d"]["count"])

    def test_each_signal_ends_as_natively_with_its_report(self):
        rng = random.Random(int(os.environ.get("ENDINGS_SEED", "4")))
        for sig in SIGNALS:
            with self.subTest(signal=sig.name):
                delay = rng.uniform(0.05, 0.6)
                native = self.start("loop", shim=False, seed=rng.randrange(1000))
                time.sleep(delay)
                native.send_signal(sig)
                native_rc, _, _ = self.finish(native)
                path = os.path.join(self.work, f"{sig.name}.json")
                p = self.start("loop", seed=rng.randrange(1000), UNSTALL_REPORT=path)
                time.sleep(delay)
                p.send_signal(sig)
                rc, _, err = self.finish(p)
                self.assertEqual(native_rc, -sig)
                self.assertEqual(rc, native_rc, err[-2000:])  # not 3: no byte was wrong
                r = self.report(path)
                self.assertEqual(r["end"]["how"], "signal")
                self.assertEqual(r["end"]["signal"], sig.name)
                self.assert_consistent(r)
                self.assertIn(f"ended by {sig.name}", err)  # the text report too

    def test_a_programs_handler_runs_first_and_decides(self):
        path = os.path.join(self.work, "handler.json")
        p = self.start("handler", UNSTALL_REPORT=path)
        time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        rc, out, err = self.finish(p)
        self.assertEqual(rc, 0, err[-2000:])
        self.assertIn("handled", out)
        self.assertEqual(self.report(path)["end"]["how"], "exit")

    def test_a_handler_that_reraises_with_the_default_action(self):
        # what Python does at exit after an uncaught KeyboardInterrupt; the
        # handler was installed before the program's first CUDA call
        path = os.path.join(self.work, "reraise.json")
        p = self.start("reraise", UNSTALL_REPORT=path)
        time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        rc, _, err = self.finish(p)
        self.assertEqual(rc, -signal.SIGINT, err[-2000:])
        r = self.report(path)
        self.assertEqual((r["end"]["how"], r["end"]["signal"]), ("signal", "SIGINT"))

    def test_an_ignored_signal_is_left_alone(self):
        path = os.path.join(self.work, "ignore.json")
        p = self.start("ignore", UNSTALL_REPORT=path)
        p.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        self.assertIsNone(p.poll())  # still running, as natively
        p.send_signal(signal.SIGTERM)
        rc, _, _ = self.finish(p)
        self.assertEqual(rc, -signal.SIGTERM)
        self.assertEqual(self.report(path)["end"]["signal"], "SIGTERM")

    def test_report_on_signal_off_leaves_signals_alone(self):
        path = os.path.join(self.work, "off.json")
        p = self.start("loop", UNSTALL_REPORT=path, UNSTALL_REPORT_ON_SIGNAL=0, UNSTALL_REPORT_INTERVAL_S=0)
        time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        rc, _, _ = self.finish(p)
        self.assertEqual(rc, -signal.SIGTERM)
        self.assertFalse(os.path.exists(path))

    def test_sigkill_leaves_a_snapshot_no_older_than_the_interval(self):
        path = os.path.join(self.work, "kill.json")
        p = self.start("loop", UNSTALL_REPORT=path, UNSTALL_REPORT_INTERVAL_S=1)
        time.sleep(2.6)
        killed_ns = time.time_ns()
        p.send_signal(signal.SIGKILL)
        rc, _, _ = self.finish(p)
        self.assertEqual(rc, -signal.SIGKILL)
        r = self.report(path)
        self.assertEqual(r["end"]["how"], "snapshot")
        age_s = (killed_ns - r["end"]["realtime_ns"]) / 1e9
        self.assertLess(age_s, 1.0 + 0.5)  # the interval, and the time a snapshot takes to write
        self.assert_consistent(r)
        listed = subprocess.run([sys.executable, REPORT_TOOL, path], capture_output=True, text=True)
        self.assertIn("snapshot,", listed.stdout)

    def test_launcher_ends_the_other_ranks_when_one_fails(self):
        pattern = os.path.join(self.work, "job-%r.json")
        ranks = []
        for rank in range(3):
            ranks.append(self.start("fail" if rank == 1 else "loop", seed=rank, RANK=rank, UNSTALL_REPORT=pattern))
        # the launcher's part: wait for a rank to fail, then SIGTERM the others
        deadline = time.time() + 60
        while all(p.poll() is None for p in ranks) and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(ranks[1].wait(timeout=60), 1)
        for p in (ranks[0], ranks[2]):
            p.send_signal(signal.SIGTERM)
        codes = [self.finish(p)[0] for p in ranks]
        self.assertEqual(codes, [-signal.SIGTERM, 1, -signal.SIGTERM])
        files = [pattern.replace("%r", str(rank)) for rank in range(3)]
        ends = [self.report(f)["end"] for f in files]
        self.assertEqual([e["how"] for e in ends], ["signal", "exit", "signal"])
        merged = subprocess.run([sys.executable, REPORT_TOOL, "--json", *files], capture_output=True, text=True)
        self.assertEqual(merged.returncode, 0, merged.stderr)
        self.assertEqual([x["ended"] for x in json.loads(merged.stdout)["processes"]],
                         ["SIGTERM", "exited", "SIGTERM"])
        watched = subprocess.run([sys.executable, REPORT_TOOL, "--watch", os.path.join(self.work, "job-*.json"),
                                  "--rounds", "1"], capture_output=True, text=True)
        self.assertEqual(watched.returncode, 0, watched.stderr)
        self.assertIn("3 reports", watched.stdout)
        self.assertEqual(watched.stdout.count("SIGTERM"), 2)


if __name__ == "__main__":
    unittest.main()
