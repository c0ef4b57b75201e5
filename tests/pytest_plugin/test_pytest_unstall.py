"""tools/pytest_unstall.py over the simulated runtime: pytest runs
strict_sample.py (ctypes calls into tests/fakecuda's libcudart.so.13) under
the shim's strict mode, and the test that made a pageable D2H copy fails,
named by its line, while the clean tests pass.

Run by tests/run-all.sh (make check) with BUILD set to the build folder.
Needs pytest for some python3 (tools/install-deps.sh installs Debian's
python3-pytest, for /usr/bin/python3).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.environ.get("BUILD", os.path.join(ROOT, "build")))
SHIM = os.path.join(BUILD, "libunstall.so")
FAKE = os.path.join(BUILD, "fakecuda", "libcudart.so.13")
SAMPLE = os.path.join(HERE, "strict_sample.py")
LAUNCHER = os.path.join(ROOT, "tools", "unstall")


def python_with_pytest():
    """The first python3 that imports pytest: this one, then Debian's."""
    for exe in (sys.executable, shutil.which("python3"), "/usr/bin/python3"):
        if exe and os.path.exists(exe) and subprocess.run(
                [exe, "-c", "import pytest"], capture_output=True).returncode == 0:
            return exe
    return None


PYTHON = python_with_pytest()


def marker_line(name):
    """The line of strict_sample.py that carries '# LINE:name'."""
    with open(SAMPLE) as f:
        for number, text in enumerate(f, 1):
            if re.search(r"# LINE:%s\b" % re.escape(name), text):
                return number
    raise AssertionError(f"no LINE:{name} marker in {SAMPLE}")


class PytestUnstall(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if PYTHON is None:
            raise AssertionError("no python3 here imports pytest: tools/install-deps.sh installs python3-pytest")
        for path in (SHIM, FAKE):
            if not os.path.exists(path):
                raise AssertionError(f"{path} missing: run make first")
        cls.tmp = tempfile.mkdtemp(prefix="pytest-unstall-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def pytest(self, *args, shim=True, plugin=True, env=None):
        """Run pytest over the sample; (exit code, output, {test: (outcome, text)})."""
        xml = os.path.join(self.tmp, "junit.xml")
        if os.path.exists(xml):
            os.unlink(xml)
        cmd = [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={xml}", SAMPLE, *args]
        if plugin:
            cmd[3:3] = ["-p", "pytest_unstall"]
        if shim:
            cmd = [LAUNCHER, "--strict", "--lib", SHIM, "--"] + cmd
        full_env = dict(os.environ, UNSTALL_FAKECUDA=FAKE, PYTHONPATH=os.path.join(ROOT, "tools"),
                        PYTHONDONTWRITEBYTECODE="1")
        for key in ("UNSTALL_MODE", "UNSTALL_CONFIG", "UNSTALL_ALLOW", "LD_PRELOAD"):
            full_env.pop(key, None)
        full_env.update(env or {})
        p = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=120, cwd=self.tmp)
        out = p.stdout + p.stderr
        return p.returncode, out, self.outcomes(xml)

    @staticmethod
    def outcomes(xml):
        """{test name: [(outcome, text)]}: passed, failure, error, skipped;
        a test with an error at teardown has two entries."""
        result = {}
        if not os.path.exists(xml):
            return result
        for case in ET.parse(xml).getroot().iter("testcase"):
            entries = []
            for kind in ("failure", "error", "skipped"):
                for el in case.findall(kind):
                    entries.append((kind, (el.get("message") or "") + "\n" + (el.text or "")))
            result[case.get("name")] = entries or [("passed", "")]
        return result

    def assert_outcome(self, res, test, kind, *needles):
        entries = res.get(test)
        self.assertIsNotNone(entries, f"{test} did not run: {sorted(res)}")
        texts = [text for k, text in entries if k == kind]
        self.assertTrue(texts, f"{test}: expected {kind}, got {entries}")
        for needle in needles:
            self.assertIn(needle, texts[0], f"{test}: {needle!r} not in its {kind}")

    def test_strict_run_fails_the_tests_that_synchronized_naming_their_lines(self):
        rc, out, res = self.pytest()
        self.assertEqual(rc, 1, out)
        self.assert_outcome(res, "test_clean", "passed")
        self.assert_outcome(res, "test_clean_after", "passed")
        # the program ignores the error: only the plugin fails the test
        self.assert_outcome(res, "test_pageable_d2h_ignored", "failure",
                            "unstall strict mode failed 1 CUDA call during call at ",
                            f"strict_sample.py:{marker_line('ignored')} (test_pageable_d2h_ignored)",
                            "pageable_d2h (high severity) in cudaMemcpy at ")
        # the test fails on its own (rc 800); the plugin adds its section
        self.assert_outcome(res, "test_pageable_d2h_checked", "failure", "assert 800 == 0")
        self.assertIn(f"strict_sample.py:{marker_line('checked')} (test_pageable_d2h_checked)", out)
        self.assertIn("unstall strict mode ---", out)
        # through a helper: the helper's line, and the test's own
        self.assert_outcome(res, "test_through_helper", "failure",
                            f"strict_sample.py:{marker_line('helper')} (helper_copies_pageable), called from ",
                            f"strict_sample.py:{marker_line('caller')} (test_through_helper)",
                            "in cudaMemcpyAsync at ")
        # a fixture's teardown: an error of that test
        self.assert_outcome(res, "test_dirty_teardown", "error", "during teardown at ",
                            f"strict_sample.py:{marker_line('teardown')} (dirty_teardown)")
        self.assertRegex(out, r"3 failed, 3 passed, 1 error")

    def test_without_the_plugin_a_swallowed_error_passes(self):
        rc, out, res = self.pytest(plugin=False)
        self.assertEqual(rc, 1, out)
        self.assert_outcome(res, "test_pageable_d2h_ignored", "passed")
        self.assert_outcome(res, "test_pageable_d2h_checked", "failure", "assert 800 == 0")

    # "test_clean", not "clean": -k also matches the names of the directories above the file
    # (a checkout in /tmp/cleanclone selected every test)
    def test_clean_tests_pass(self):
        rc, out, res = self.pytest("-k", "test_clean")
        self.assertEqual(rc, 0, out)
        self.assertEqual(sorted(res), ["test_clean", "test_clean_after"])
        self.assertIn("unstall: strict mode;", out)

    def test_allow_list_accepts_one_site(self):
        line = marker_line("ignored")
        rc, out, res = self.pytest(env={"UNSTALL_ALLOW": f"pageable_d2h@*/strict_sample.py:{line}"})
        self.assertEqual(rc, 1, out)
        self.assert_outcome(res, "test_pageable_d2h_ignored", "passed")
        self.assert_outcome(res, "test_through_helper", "failure", "(helper_copies_pageable)")

    def test_not_preloaded_is_a_usage_error(self):
        rc, out, res = self.pytest(shim=False)
        self.assertEqual(rc, 4, out)  # pytest's usage error
        self.assertIn("libunstall.so is not preloaded", out)
        self.assertIn("tools/unstall --strict -- python -m pytest -p pytest_unstall", out)
        self.assertEqual(res, {})

    def test_not_strict_says_so_in_the_header(self):
        rc, out, res = self.pytest("-k", "test_clean", env={"UNSTALL_MODE": "report"})
        self.assertEqual(rc, 0, out)
        self.assertIn("do not ask for strict mode", out)

    def test_strict_section_without_pytest(self):
        script = os.path.join(self.tmp, "section_user.py")
        with open(script, "w") as f:
            f.write(
                "import ctypes, os, sys\n"
                "sys.modules['pytest'] = None  # as where pytest is not installed\n"
                "import pytest_unstall\n"
                "assert pytest_unstall.pytest is None and pytest_unstall.shim_loaded()\n"
                "ctypes.CDLL(os.environ['UNSTALL_FAKECUDA'], mode=ctypes.RTLD_GLOBAL)\n"
                "cuda = ctypes.CDLL(None)\n"
                "cuda.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]\n"
                "dev = ctypes.c_void_p()\n"
                "assert cuda.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(1 << 20)) == 0\n"
                "host = ctypes.create_string_buffer(1 << 20)\n"
                "with pytest_unstall.strict_section():\n"
                "    pass\n"
                "try:\n"
                "    with pytest_unstall.strict_section(__file__):\n"
                "        cuda.cudaMemcpy(host, dev, 1 << 20, 2)\n"
                "except pytest_unstall.ImplicitSyncError as e:\n"
                "    print('raised:', e)\n"
                "print('count', pytest_unstall.strict_failures()[0])\n")
        env = dict(os.environ, UNSTALL_FAKECUDA=FAKE, PYTHONPATH=os.path.join(ROOT, "tools"))
        env.pop("LD_PRELOAD", None)
        p = subprocess.run([LAUNCHER, "--strict", "--lib", SHIM, "--", sys.executable, script],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("raised: unstall strict mode failed 1 CUDA call at ", p.stdout)
        self.assertIn("section_user.py:15 (<module>)", p.stdout)
        self.assertIn("count 1", p.stdout)


if __name__ == "__main__":
    unittest.main()
