"""The wheel and the Debian package (tools/pkg/build, make wheel / make deb),
built from BUILD and used as a user would, over the simulated runtime:

- the wheel installed with pip --no-index into a fresh venv (Debian's
  python3 with its system site-packages, for pytest): unstall --version, a
  scenario program under unstall and python -m unstall, pytest --unstall-strict
  failing a project's test and naming its line, --unstall, -p pytest_unstall;
  its RECORD hashes, its glibc tag against objdump -T;
- the .deb's contents (dpkg-deb -c), its commands run from an extracted tree,
  its man pages; with PACKAGING_INSTALL=1, as root: dpkg -i, use, dpkg --purge,
  nothing left.

Run by tests/run-all.sh with BUILD set; needs /usr/bin/python3 with venv and
pytest (python3-venv, python3-pytest), objdump, and dpkg-deb for the deb's tests.
"""
import base64
import csv
import glob
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.environ.get("BUILD", os.path.join(ROOT, "build")))
FAKE_DIR = os.path.join(BUILD, "fakecuda")
FAKE = os.path.join(FAKE_DIR, "libcudart.so.13")
SCENARIO = os.path.join(BUILD, "scenarios", "case_c_pageable_d2h")
BUILDER = os.path.join(ROOT, "tools", "pkg", "build")
SYSTEM_PYTHON = "/usr/bin/python3"
MULTIARCH_LIB = "/usr/lib/x86_64-linux-gnu/libunstall.so"
with open(os.path.join(ROOT, "VERSION")) as _f:
    VERSION = _f.read().strip()


def run(cmd, env=None, cwd=None, timeout=180, check=False):
    full = dict(os.environ)
    for key in ("LD_PRELOAD", "UNSTALL_MODE", "UNSTALL_CONFIG", "UNSTALL_ALLOW", "PYTHONPATH", "UNSTALL_LIB",
                "PYTEST_UNSTALL_REEXEC", "PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        full.pop(key, None)
    full.update(env or {})
    p = subprocess.run(cmd, capture_output=True, text=True, env=full, cwd=cwd, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def newest_glibc(path):
    out = run(["objdump", "-T", path], check=True).stdout
    versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"\(GLIBC_(2\.[0-9.]+)\)", out)}
    return max(versions)


def marker_line(path, name):
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if f"# LINE:{name}" in text:
                return number
    raise AssertionError(f"no LINE:{name} in {path}")


class Wheel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for path in (os.path.join(BUILD, "libunstall.so"), FAKE, SCENARIO):
            if not os.path.exists(path):
                raise AssertionError(f"{path} missing: make BUILD={BUILD} test-bins")
        if run([SYSTEM_PYTHON, "-c", "import venv, pytest, ensurepip"]).returncode != 0:
            raise AssertionError(f"{SYSTEM_PYTHON} lacks venv or pytest: apt-get install python3-venv python3-pytest")
        cls.tmp = tempfile.mkdtemp(prefix="unstall-wheel-")
        dist = os.path.join(cls.tmp, "dist")
        run([sys.executable, BUILDER, "wheel", BUILD, dist], check=True)
        cls.wheels = glob.glob(os.path.join(dist, "*.whl"))
        # the venv inside a git checkout of someone else's project: --version must not name its commit
        cls.project = os.path.join(cls.tmp, "project")
        os.makedirs(cls.project)
        run(["git", "init", "-q", cls.project])
        cls.venv = os.path.join(cls.project, "venv")
        run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", cls.venv], check=True)
        cls.python = os.path.join(cls.venv, "bin", "python")
        run([cls.python, "-m", "pip", "install", "-q", "--no-index", "--no-cache-dir", *cls.wheels], check=True,
            timeout=300)
        cls.sample = os.path.join(cls.project, "test_strict_case.py")
        shutil.copy(os.path.join(HERE, "strict_case.py"), cls.sample)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def bin(self, name):
        return os.path.join(self.venv, "bin", name)

    def site(self):
        return run([self.python, "-c", "import unstall, os; print(os.path.dirname(unstall.__file__))"],
                   check=True).stdout.strip()

    def test_one_wheel_named_by_version_and_the_glibc_the_library_needs(self):
        self.assertEqual(len(self.wheels), 1, self.wheels)
        need = max(newest_glibc(os.path.join(BUILD, "libunstall.so")), (2, 17))
        self.assertEqual(os.path.basename(self.wheels[0]),
                         f"unstall-{VERSION}-py3-none-manylinux_{need[0]}_{need[1]}_x86_64.whl")

    def test_record_lists_every_file_with_its_sha256(self):
        with zipfile.ZipFile(self.wheels[0]) as z:
            names = set(z.namelist())
            record = f"unstall-{VERSION}.dist-info/RECORD"
            rows = list(csv.reader(io.StringIO(z.read(record).decode())))
            listed = {row[0] for row in rows}
            self.assertEqual(listed, names)
            for name, digest, size in rows:
                if name == record:
                    self.assertEqual((digest, size), ("", ""))
                    continue
                data = z.read(name)
                want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                self.assertEqual(digest, want, name)
                self.assertEqual(int(size), len(data), name)
            entry = z.read(f"unstall-{VERSION}.dist-info/entry_points.txt").decode()
            self.assertIn("[pytest11]\npytest_unstall = pytest_unstall", entry)
            self.assertIn("unstall = unstall._cli:main", entry)
            self.assertIn(f"Version: {VERSION}\n", z.read(f"unstall-{VERSION}.dist-info/METADATA").decode())
            for must in ("unstall/bin/unstall", "unstall/lib/libunstall.so", "unstall/config/strict.conf",
                         "unstall/bin/python/sitecustomize.py", "unstall/bin/unstall-report", "pytest_unstall.py"):
                self.assertIn(must, names)
            # the launcher as it is in the checkout, executable
            with open(os.path.join(ROOT, "tools", "unstall"), "rb") as f:
                self.assertEqual(z.read("unstall/bin/unstall"), f.read())
            self.assertTrue((z.getinfo("unstall/bin/unstall").external_attr >> 16) & 0o111)

    def test_unstall_version_names_the_version_and_the_bundled_library(self):
        p = run([self.bin("unstall"), "--version"], cwd=self.project)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines()[0], f"unstall {VERSION}")  # no "(commit ...)" of the project
        self.assertIn(f"library: {os.path.join(self.site(), 'lib', 'libunstall.so')}", p.stdout)

    def test_unstall_runs_a_scenario_under_the_bundled_library(self):
        report = os.path.join(self.tmp, "scenario.json")
        p = run([self.bin("unstall"), "--report", report, "--", SCENARIO], env={"LD_LIBRARY_PATH": FAKE_DIR})
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(report) as f:
            data = json.load(f)
        self.assertEqual(data["unstall_version"], VERSION)  # the library's version is the wheel's
        self.assertIn("pageable_d2h", json.dumps(data))
        # the report tool from the wheel reads it
        p = run([self.bin("unstall-report"), report], check=True)
        self.assertIn("pageable_d2h", p.stdout)

    def test_python_m_unstall_runs_a_program_and_a_script(self):
        p = run([self.python, "-m", "unstall", "--", SCENARIO], env={"LD_LIBRARY_PATH": FAKE_DIR})
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("pageable_d2h", p.stderr)
        script = os.path.join(self.tmp, "show.py")
        with open(script, "w") as f:
            f.write("import os, sys\nprint(os.environ.get('LD_PRELOAD'))\nprint(sys.executable)\nprint(sys.argv[1:])\n")
        p = run([self.python, "-m", "unstall", "--mode", "report", script, "a", "--b"], check=True)
        preload, exe, argv = p.stdout.splitlines()
        self.assertEqual(preload, os.path.join(self.site(), "lib", "libunstall.so"))
        self.assertEqual(os.path.realpath(exe), os.path.realpath(self.python))
        self.assertEqual(argv, "['a', '--b']")
        p = run([self.python, "-m", "unstall", "--version"], check=True)
        self.assertEqual(p.stdout.splitlines()[0], f"unstall {VERSION}")

    def pytest(self, *args, env=None):
        return run([self.python, "-m", "pytest", "-p", "no:cacheprovider", *args],
                   env=dict({"FAKECUDA_LIB": FAKE}, **(env or {})), cwd=self.project)

    def test_pytest_unstall_strict_reruns_under_the_shim_and_fails_the_line(self):
        p = self.pytest("--unstall-strict", "test_strict_case.py")
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 1, out)
        self.assertEqual(out.count("pytest_unstall: running pytest again under unstall --strict"), 1, out)
        self.assertIn("unstall: strict mode;", out)
        line = marker_line(self.sample, "d2h")
        self.assertIn(f"unstall strict mode failed 1 CUDA call during call at .../project/test_strict_case.py:{line} "
                      "(test_pageable_copy)", out)
        self.assertRegex(out, r"1 failed, 1 passed")

    def test_pytest_unstall_report_mode_fails_nothing_and_reports(self):
        p = self.pytest("--unstall", "test_strict_case.py")
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out)
        self.assertEqual(out.count("running pytest again under unstall ("), 1, out)
        self.assertIn("unstall: report mode", out)
        self.assertIn("pageable_d2h", out)  # the shim's report at exit
        self.assertIn(f"test_strict_case.py:{marker_line(self.sample, 'd2h')} (test_pageable_copy)", out)

    def test_plugin_loaded_by_its_entry_point_does_nothing_unasked(self):
        p = self.pytest("test_strict_case.py")
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out)
        self.assertIn("plugins: unstall-", out)  # loaded, through its entry point
        self.assertNotIn("running pytest again", out)
        self.assertNotIn("unstall:", out)

    def test_p_pytest_unstall_as_before(self):
        # named with -p and no shim: the usage error it always gave
        p = self.pytest("-p", "pytest_unstall", "test_strict_case.py")
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
        self.assertIn("libunstall.so is not preloaded", p.stdout + p.stderr)
        # under the launcher: one plugin (its entry point and -p name the same), strict failures
        p = run([self.bin("unstall"), "--strict", "--", self.python, "-m", "pytest", "-p", "no:cacheprovider",
                 "-p", "pytest_unstall", "test_strict_case.py"], env={"FAKECUDA_LIB": FAKE}, cwd=self.project)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 1, out)
        self.assertNotIn("running pytest again", out)
        self.assertRegex(out, r"1 failed, 1 passed")

    def test_rerun_guard_stops_a_loop(self):
        # as if this process had re-run itself already and the preload was lost on the way
        code = ("import os, sys, pytest\nos.environ['PYTEST_UNSTALL_REEXEC'] = str(os.getpid())\n"
                "sys.exit(pytest.main(['-p', 'no:cacheprovider', '--unstall-strict', 'test_strict_case.py']))\n")
        p = run([self.python, "-c", code], env={"FAKECUDA_LIB": FAKE}, cwd=self.project)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 4, out)
        self.assertIn("yet libunstall.so is not preloaded", out)
        self.assertNotIn("running pytest again", out)


@unittest.skipUnless(shutil.which("dpkg-deb"), "dpkg-deb not here")
class Deb(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="unstall-deb-")
        run([sys.executable, BUILDER, "deb", BUILD, os.path.join(cls.tmp, "dist")], check=True)
        cls.deb = os.path.join(cls.tmp, "dist", f"unstall_{VERSION}_amd64.deb")
        cls.tree = os.path.join(cls.tmp, "tree")
        run(["dpkg-deb", "-x", cls.deb, cls.tree], check=True)
        cls.paths = [line.split()[-1].lstrip(".") for line in
                     run(["dpkg-deb", "-c", cls.deb], check=True).stdout.splitlines()]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_fields_and_paths(self):
        self.assertEqual(run(["dpkg-deb", "-f", self.deb, "Version"], check=True).stdout.strip(), VERSION)
        self.assertEqual(run(["dpkg-deb", "-f", self.deb, "Architecture"], check=True).stdout.strip(), "amd64")
        need = max(newest_glibc(os.path.join(BUILD, "libunstall.so")), (2, 17))
        self.assertIn(f"libc6 (>= {need[0]}.{need[1]})", run(["dpkg-deb", "-f", self.deb, "Depends"]).stdout)
        for must in (MULTIARCH_LIB, "/usr/bin/unstall", "/usr/bin/unstall-report", "/usr/bin/unstall-compare",
                     "/usr/bin/p2pcheck", "/usr/share/unstall/config/strict.conf",
                     "/usr/share/unstall/config/pytorch.conf", "/usr/share/unstall/python/sitecustomize.py",
                     "/usr/lib/python3/dist-packages/pytest_unstall.py",
                     "/usr/lib/python3/dist-packages/unstall/__init__.py",
                     f"/usr/lib/python3/dist-packages/unstall-{VERSION}.dist-info/entry_points.txt",
                     "/usr/share/man/man1/unstall.1.gz", "/usr/share/man/man1/unstall-report.1.gz",
                     "/usr/share/man/man1/p2pcheck.1.gz", "/usr/share/doc/unstall/copyright"):
            self.assertIn(must, self.paths)
        # nothing outside /usr, and no Python cache
        self.assertEqual([p for p in self.paths if p not in ("/", "") and not p.startswith("/usr/")], [])
        self.assertEqual([p for p in self.paths if "__pycache__" in p or p.endswith(".pyc")], [])

    def test_extracted_launcher_names_the_multiarch_library_and_runs(self):
        launcher = os.path.join(self.tree, "usr", "bin", "unstall")
        with open(launcher) as f:
            text = f.read()
        self.assertIn(f"installed_lib='{MULTIARCH_LIB}'", text)
        self.assertIn("installed_config='/usr/share/unstall/config'", text)
        p = run([launcher, "--version"], check=True)
        self.assertEqual(p.stdout.splitlines()[0], f"unstall {VERSION}")
        lib = os.path.join(self.tree, MULTIARCH_LIB.lstrip("/"))
        report = os.path.join(self.tmp, "r.json")
        p = run([launcher, "--lib", lib, "--report", report, "--", SCENARIO], env={"LD_LIBRARY_PATH": FAKE_DIR})
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(report) as f:
            self.assertEqual(json.load(f)["unstall_version"], VERSION)
        p = run([os.path.join(self.tree, "usr", "bin", "unstall-report"), report], check=True)
        self.assertIn("pageable_d2h", p.stdout)
        p = run([os.path.join(self.tree, "usr", "bin", "p2pcheck"), "--help"], check=True)
        self.assertIn("usage: p2pcheck", p.stdout)

    def test_man_pages(self):
        for page, needles in (("unstall", ["UNSTALL_MODE", "pageable_d2h", "--strict", MULTIARCH_LIB]),
                              ("unstall-report", ["--json", "pageable_d2h"]),
                              ("p2pcheck", ["--try-enable", "/usr/libexec/unstall/p2pcheck-probe"])):
            path = os.path.join(self.tree, "usr", "share", "man", "man1", page + ".1.gz")
            if shutil.which("man"):
                p = run(["man", "-l", "-P", "cat", path], env={"MANWIDTH": "200", "LC_ALL": "C.UTF-8"}, check=True)
                text = p.stdout.replace("\u2010", "-").replace("\u2212", "-")
                self.assertIn(page.upper() + "(1)", text)
                if shutil.which("groff"):
                    w = run(["sh", "-c", f"gzip -dc '{path}' | groff -ww -man -Tutf8 -z"])
                    self.assertEqual(w.stderr, "", page)
            else:
                import gzip
                with gzip.open(path, "rt") as f:
                    text = f.read().replace("\\-", "-")
                self.assertIn(f".TH {page.upper()} 1", text)
            for needle in needles:
                self.assertIn(needle, text, page)
            self.assertIn(f"unstall {VERSION}", text)

    @unittest.skipUnless(os.environ.get("PACKAGING_INSTALL") == "1", "PACKAGING_INSTALL=1 installs and removes it")
    def test_install_use_and_purge_leave_nothing(self):
        if os.geteuid() != 0 or not shutil.which("dpkg"):
            self.skipTest("needs root and dpkg")
        if run(["dpkg", "-s", "unstall"]).returncode == 0:
            self.skipTest("a package unstall is installed already: left alone")
        try:
            run(["dpkg", "-i", self.deb], check=True)
            p = run(["/usr/bin/unstall", "--version"], check=True)
            self.assertEqual(p.stdout.splitlines(), [f"unstall {VERSION}", f"library: {MULTIARCH_LIB}"])
            p = run(["/usr/bin/unstall", "--", SCENARIO], env={"LD_LIBRARY_PATH": FAKE_DIR})
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("pageable_d2h", p.stderr)
            p = run([SYSTEM_PYTHON, "-m", "unstall", "--version"], check=True)
            self.assertIn(f"library: {MULTIARCH_LIB}", p.stdout)
            project = os.path.join(self.tmp, "project")
            os.makedirs(project, exist_ok=True)
            sample = os.path.join(project, "test_strict_case.py")
            shutil.copy(os.path.join(HERE, "strict_case.py"), sample)
            p = run([SYSTEM_PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "--unstall-strict", sample],
                    env={"FAKECUDA_LIB": FAKE}, cwd=project)
            out = p.stdout + p.stderr
            self.assertEqual(p.returncode, 1, out)
            self.assertIn("running pytest again under unstall --strict (/usr/bin/unstall)", out)
            self.assertIn(f"test_strict_case.py:{marker_line(sample, 'd2h')} (test_pageable_copy)", out)
            if shutil.which("man"):
                self.assertIn("UNSTALL_MODE", run(["man", "-P", "cat", "unstall"], check=True).stdout)
            # Python caches written while it was used (as root) go with it
            run([SYSTEM_PYTHON, "-c", "import unstall, pytest_unstall"], check=True)
            run(["/usr/bin/unstall", "--pin-dataloader", "--", SYSTEM_PYTHON, "-c", "pass"])
        finally:
            run(["dpkg", "-r", "unstall"])
            left_after_remove = [p for p in self.paths if p and not p.endswith("/") and os.path.lexists(p)]
            run(["dpkg", "--purge", "unstall"])
        self.assertEqual(left_after_remove, [])
        self.assertNotEqual(run(["dpkg", "-s", "unstall"]).returncode, 0)
        for path in ("/usr/share/unstall", "/usr/lib/x86_64-linux-gnu/unstall", "/usr/share/doc/unstall",
                     "/usr/lib/python3/dist-packages/unstall", "/usr/libexec/unstall",
                     f"/usr/lib/python3/dist-packages/unstall-{VERSION}.dist-info"):
            self.assertFalse(os.path.lexists(path), path)
        self.assertEqual(glob.glob("/usr/lib/python3/dist-packages/__pycache__/pytest_unstall.*")
                         + glob.glob("/usr/lib/python3/dist-packages/__pycache__/unstall_html.*"), [])


if __name__ == "__main__":
    unittest.main()
