"""pytest_unstall - fail the test that made an implicit synchronization.

A pytest plugin (and, without pytest, a context manager) for programs run
under unstall's strict mode. Strict mode makes a forbidden CUDA call (a
pageable copy, a synchronous cudaMemcpy, ...) fail with
cudaErrorNotPermitted; PyTorch raises on that, but a program may swallow the
error, and the traceback names the C++ call, not why it failed. The plugin
asks the shim after each phase of each test (setup, call, teardown) how many
calls strict mode failed (the export unstall_strict_failures) and fails the
test that made them, naming the Python line of the latest one:

    FAILED tests/test_io.py::test_cpu - unstall strict mode failed 1 CUDA call:
    pageable_d2h (high severity) in cudaMemcpyAsync at tests/test_io.py:17 (test_cpu)

Installed (the wheel or the Debian package: pytest finds the plugin by its
entry point), in any project:

    pytest --unstall-strict tests/     # strict mode: the tests above fail
    pytest --unstall tests/            # the report at exit, no test fails for it

Where the tests are not already running under the shim, the plugin runs
pytest again, at once, under the launcher (unstall --strict -- python -m
pytest ..., the same arguments), before a test or conftest touched CUDA, and
says so in one line; PYTEST_UNSTALL_REEXEC (the process id) keeps it from
doing so twice. Without either option, an installed plugin does nothing
unless the shim is preloaded (then it checks as below).

From a checkout (tools/ on PYTHONPATH so that pytest can import the plugin):

    PYTHONPATH=/path/to/unstall/tools \\
        /path/to/unstall/tools/unstall --strict -- python -m pytest -p pytest_unstall tests/

or name it in a conftest.py: pytest_plugins = ["pytest_unstall"]; so named
(-p, conftest, PYTEST_PLUGINS), a run without the shim is a usage error
unless --unstall-optional, --unstall or --unstall-strict is given. The allow
list (UNSTALL_ALLOW, docs/findings.md) accepts known findings; with
UNSTALL_STRICT_SEVERITY=high only high ones fail. A test already failing
keeps its own traceback and gets an "unstall strict mode" section.

Without pytest (the module imports without it):

    import pytest_unstall
    with pytest_unstall.strict_section():    # raises ImplicitSyncError
        x.cpu()                               # naming this line

Limits: only calls through the CUDA runtime that the shim sees; the Python
line is named where the shim can read the frames (CPython 3.11 and 3.12
always; other versions only while the calling thread holds the GIL, which
PyTorch releases): otherwise the native frames are named. Findings made by
the test's other threads count for the test that is running.
"""
import ctypes
import os
import re
import sys

__all__ = ["ImplicitSyncError", "shim_loaded", "strict_failures", "strict_section", "python_frames"]

_LATEST_SIZE = 1024
# "path:line (function)" frames at the head of a site; native frames follow
_PY_FRAME = re.compile(r"(\S+?\.py):(\d+)(?: \(([^)]*)\))?")


class ImplicitSyncError(AssertionError):
    """Strict mode failed CUDA calls inside a strict_section (or a test)."""


def _query():
    """The shim's unstall_strict_failures, or None where it is not loaded."""
    try:
        fn = ctypes.CDLL(None).unstall_strict_failures
    except (AttributeError, OSError):
        return None
    fn.restype = ctypes.c_ulonglong
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return fn


_fn = _query()


def shim_loaded():
    """Whether libunstall.so is in the process (preloaded)."""
    return _fn is not None


def strict_failures():
    """(count, latest): how many calls strict mode has failed in this process,
    and the latest one as "rule (severity) in api at site" ("" before any).
    (0, "") where the shim is not loaded."""
    if _fn is None:
        return 0, ""
    buf = ctypes.create_string_buffer(_LATEST_SIZE)
    count = _fn(buf, _LATEST_SIZE)
    return int(count), buf.value.decode("utf-8", "replace")


def python_frames(latest):
    """The Python frames named in a failure line, innermost first:
    [(file, line, function)]."""
    at = latest.find(" at ")
    site = latest[at + 4:] if at >= 0 else latest
    frames = []
    for part in site.split(" <- "):
        m = _PY_FRAME.fullmatch(part.strip())
        if m is None:
            break  # the native frames follow the Python ones
        frames.append((m.group(1), int(m.group(2)), m.group(3) or ""))
    return frames


def _same_file(frame_file, path):
    """Whether a frame's file (perhaps shortened to "...tail") is path."""
    if path is None:
        return False
    path = os.path.abspath(str(path))
    tail = frame_file[3:] if frame_file.startswith("...") else frame_file
    if os.path.isabs(tail) and not frame_file.startswith("..."):
        return os.path.abspath(tail) == path
    return path.endswith(os.sep + tail.lstrip(os.sep)) or path == tail


def _frame_text(frame):
    return f"{frame[0]}:{frame[1]}" + (f" ({frame[2]})" if frame[2] else "")


def describe(new, latest, path=None, phase=None, function=None):
    """The message for new failed calls: the count, the innermost line in
    path (the test's file) that the frames name, the test function's own line
    where that is another, and the latest failure."""
    calls = "1 CUDA call" if new == 1 else f"{new} CUDA calls"
    when = f" during {phase}" if phase else ""
    text = f"unstall strict mode failed {calls}{when}"
    frames = python_frames(latest)
    mine = [f for f in frames if _same_file(f[0], path)]
    where = mine[0] if mine else (frames[0] if frames else None)
    if where is not None:
        text += f" at {_frame_text(where)}"
        caller = [f for f in mine if function and f[2] == function]
        if caller and caller[0] != where:
            text += f", called from {_frame_text(caller[0])}"
    text += f"\n  {'the latest: ' if new > 1 else ''}{latest}"
    if not frames:
        text += ("\n  (no Python frame: the shim reads them on CPython 3.11 and 3.12, elsewhere only "
                 "while the calling thread holds the GIL)")
    text += ("\n  each rule's fix: docs/rules.md; to accept it: UNSTALL_ALLOW=rule or "
             "UNSTALL_ALLOW='rule@*/file.py:line' (docs/findings.md)")
    return text


class strict_section:
    """Context manager: raises ImplicitSyncError on leaving if strict mode
    failed a CUDA call inside, chained to the exception that the failed call
    raised, if any (PyTorch raises one)."""

    def __init__(self, path=None):
        self.path = path

    def __enter__(self):
        self.before = strict_failures()[0]
        return self

    def __exit__(self, kind, value, tb):
        count, latest = strict_failures()
        new = count - self.before
        if new <= 0:
            return False
        raise ImplicitSyncError(describe(new, latest, self.path)) from value


def _strict_configured():
    """Whether the environment asks for strict mode (UNSTALL_MODE, else
    the mode line of UNSTALL_CONFIG), for the header's warning only."""
    mode = os.environ.get("UNSTALL_MODE")
    if mode:
        return mode.strip() == "strict"
    path = os.environ.get("UNSTALL_CONFIG")
    if not path:
        return False
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.split("#", 1)[0].partition("=")
                if key.strip() == "mode":
                    mode = value.strip()
    except OSError:
        return False
    return mode == "strict"


# --- the pytest plugin -------------------------------------------------------------------------

try:
    import pytest
except ImportError:  # the module serves without pytest (strict_section)
    pytest = None

class _Crash:
    """What pytest's short summary reads of a failure (reprcrash)."""

    def __init__(self, message, path, lineno):
        self.message, self.path, self.lineno = message, path, lineno


class _Failure:
    """A test report's longrepr: the message, and a one-line reprcrash for
    the short summary; str() where reports travel (pytest-xdist)."""

    def __init__(self, text, latest):
        self.text = text
        frames = python_frames(latest)
        short = latest.split(" at ", 1)[0]
        if frames:
            short += " at " + _frame_text(frames[0])
        self.reprcrash = _Crash("unstall: " + short, frames[0][0] if frames else "", frames[0][1] if frames else 0)

    def toterminal(self, tw):
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self):
        return self.text


REEXEC_ENV = "PYTEST_UNSTALL_REEXEC"  # the pid of a pytest that re-ran itself under the launcher
PLUGIN = "pytest_unstall"


def _launcher():
    """The launcher to re-run pytest under: tools/unstall beside this module
    in a checkout, else the installed package's (the wheel's, or /usr/bin/unstall)."""
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unstall")
    if os.path.isfile(beside):
        return beside
    try:
        import unstall
    except ImportError:
        return None
    path = unstall.launcher()
    return path if os.path.isfile(path) else None


def _python_command(args):
    """This pytest's command line with args (the original arguments): this
    interpreter, then -m pytest or the pytest script it ran."""
    first = sys.argv[0] if sys.argv else ""
    if not first or first == "-m" or os.path.basename(os.path.dirname(first)) == "pytest" \
            and os.path.basename(first) == "__main__.py":
        return [sys.executable, "-m", "pytest", *args]
    return [sys.executable, first, *args]


def _requested_mode(config):
    """"strict", "report" or None: what --unstall-strict / --unstall ask for."""
    ns = getattr(config, "known_args_namespace", None) or config.option
    if getattr(ns, "unstall_strict", False):
        return "strict"
    if getattr(ns, "unstall_report", False):
        return "report"
    return None


def _named_explicitly(config):
    """Whether the run names the plugin itself (-p pytest_unstall, a
    conftest's pytest_plugins, PYTEST_PLUGINS), not only its entry point."""
    ns = getattr(config, "known_args_namespace", None) or config.option
    if PLUGIN in (getattr(ns, "plugins", None) or []):
        return True
    if PLUGIN in os.environ.get("PYTEST_PLUGINS", "").split(","):
        return True
    for plugin in config.pluginmanager.get_plugins():
        wanted = getattr(plugin, "pytest_plugins", None) if str(getattr(plugin, "__file__", "")).endswith(
            "conftest.py") else None
        if wanted == PLUGIN or (isinstance(wanted, (list, tuple)) and PLUGIN in wanted):
            return True
    return False


def _rerun_under_shim(config, mode):
    """exec pytest again under the launcher (never returns), or raise
    pytest's usage error saying why it cannot."""
    how = "unstall --strict" if mode == "strict" else "unstall"
    if os.environ.get(REEXEC_ENV) == str(os.getpid()):
        raise pytest.UsageError(
            f"pytest_unstall: pytest was re-run under {how}, yet libunstall.so is not preloaded "
            f"(LD_PRELOAD={os.environ.get('LD_PRELOAD', '')!r}): something in between drops it")
    launcher = _launcher()
    if launcher is None:
        raise pytest.UsageError("pytest_unstall: the unstall launcher is not found: install the unstall package, "
                                "or run the tests as  unstall --strict -- python -m pytest ...")
    args = list(config.invocation_params.args)
    if list(sys.argv[1:]) != args:
        raise pytest.UsageError(
            f"pytest_unstall: --unstall{'-strict' if mode == 'strict' else ''} outside the shim needs pytest "
            f"started from its command line (this one was called with other arguments); run it as  {how} -- "
            "python -m pytest ...")
    argv = ["/bin/sh", launcher] + (["--strict"] if mode == "strict" else []) + ["--"] + _python_command(args)
    # pytest captures fd 1 and 2 into files by now: the new pytest gets the terminal back
    capman = config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        capman.stop_global_capturing()
    sys.stderr.write(f"pytest_unstall: running pytest again under {how} ({launcher}), "
                     "with libunstall.so preloaded\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os.chdir(str(config.invocation_params.dir))
    os.execve("/bin/sh", argv, dict(os.environ, **{REEXEC_ENV: str(os.getpid())}))


if pytest is not None:
    _seen = [0]  # strict failures counted before the phase that runs now
    _active = [False]  # the plugin checks this run

    def pytest_addoption(parser):
        group = parser.getgroup("unstall")
        group.addoption("--unstall", action="store_true", default=False, dest="unstall_report",
                        help="run the tests under unstall (report mode: the report at exit); outside the shim, "
                             "pytest runs again under the launcher")
        group.addoption("--unstall-strict", action="store_true", default=False, dest="unstall_strict",
                        help="run the tests under unstall's strict mode: a test whose CUDA call strict mode fails "
                             "fails, naming its line; outside the shim, pytest runs again under unstall --strict")
        group.addoption("--unstall-optional", action="store_true", default=False,
                        help="run the tests even where libunstall.so is not preloaded (the plugin then checks nothing)")

    @pytest.hookimpl(tryfirst=True)
    def pytest_load_initial_conftests(early_config, parser, args):
        # the earliest hook for a plugin named by -p or its entry point: no
        # conftest (which may import torch) has run yet
        mode = _requested_mode(early_config)
        if mode is not None and not shim_loaded():
            _rerun_under_shim(early_config, mode)

    def pytest_configure(config):
        mode = _requested_mode(config)
        if not shim_loaded():
            if mode is not None:  # a plugin named by a conftest only: the conftests have run, the tests not
                _rerun_under_shim(config, mode)
            if _named_explicitly(config) and not config.getoption("unstall_optional"):
                raise pytest.UsageError(
                    "pytest_unstall: libunstall.so is not preloaded in this process; run the suite as\n"
                    "  tools/unstall --strict -- python -m pytest -p pytest_unstall ...\n"
                    "(or pytest --unstall-strict, or pass --unstall-optional to run it without the checks)")
        elif mode == "strict" and not _strict_configured():
            raise pytest.UsageError(
                "pytest_unstall: --unstall-strict, but this pytest already runs under the shim in another mode "
                "(UNSTALL_MODE / UNSTALL_CONFIG); run it as  unstall --strict -- python -m pytest ...  or as  "
                "pytest --unstall-strict  alone")
        _active[0] = shim_loaded() or mode is not None or _named_explicitly(config)
        _seen[0] = strict_failures()[0]

    def pytest_report_header(config):
        if not _active[0]:
            return None
        if not shim_loaded():
            return "unstall: libunstall.so not preloaded: no test fails for an implicit synchronization"
        if not _strict_configured():
            if _requested_mode(config) == "report":
                return "unstall: report mode; the report at exit (no test fails for a finding)"
            return ("unstall: preloaded, but UNSTALL_MODE / UNSTALL_CONFIG do not ask for strict mode: "
                    "no call fails, so no test will (tools/unstall --strict)")
        return "unstall: strict mode; a test whose CUDA call strict mode fails fails, naming its line"

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        # makereport runs right after each phase: what strict mode failed
        # since the previous phase's report was made in this one
        count, latest = strict_failures()
        new = count - _seen[0]
        _seen[0] = count
        outcome = yield
        if new <= 0:
            return
        report = outcome.get_result()
        path = getattr(item, "path", None) or getattr(item, "fspath", None)
        function = getattr(item, "originalname", None) or item.name
        message = describe(new, latest, path, call.when, function)
        if report.passed and not hasattr(report, "wasxfail"):
            report.outcome = "failed"
            report.longrepr = _Failure(message, latest)
        elif report.failed:
            report.sections.append(("unstall strict mode", message))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(collector):
        # importing a test module may make CUDA calls: its collection fails
        outcome = yield
        count, latest = strict_failures()
        new = count - _seen[0]
        _seen[0] = count
        report = outcome.get_result()
        if new > 0 and report.passed:
            report.outcome = "failed"
            report.longrepr = _Failure(describe(new, latest, getattr(collector, "path", None), "collection"), latest)
