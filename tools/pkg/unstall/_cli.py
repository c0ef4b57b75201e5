"""The wheel's console commands and python -m unstall: each execs the bundled
tool, so that it behaves exactly as the tool does (tools/unstall,
tools/unstall-report, tools/unstall-compare)."""
import os
import sys

import unstall

# the launcher's options that take a value (tools/unstall's usage)
_VALUED = {"--mode", "--profile", "--config", "--report", "--log", "--legacy-stream", "--lib"}


def _launcher_env(args):
    """The environment for the launcher. For --version, git stops at the
    folder that holds this package: the launcher names the commit of a git
    checkout around it, and a venv inside a project's checkout is not ours."""
    if "--version" not in _options(args):
        return os.environ
    top = os.path.dirname(unstall.bin_dir())
    return dict(os.environ, GIT_CEILING_DIRECTORIES=os.path.dirname(top))


def _options(args):
    """The launcher's own options: those before '--' or the program."""
    out, i = [], 0
    while i < len(args):
        a = args[i]
        if a == "--" or not a.startswith("-"):
            break
        out.append(a)
        i += 2 if a in _VALUED else 1
    return out


def exec_launcher(args):
    path = unstall.launcher()
    if not os.path.isfile(path):
        sys.stderr.write(f"unstall: the launcher {path} is missing: reinstall the package\n")
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    # through sh: the launcher is a shell script, whatever mode the installer gave it
    os.execve("/bin/sh", ["/bin/sh", path, *args], _launcher_env(args))


def _exec_python_tool(name, args):
    path = unstall.tool(name)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, path, *args])


def main():
    """The unstall command."""
    return exec_launcher(sys.argv[1:])


def report():
    """The unstall-report command."""
    return _exec_python_tool("unstall-report", sys.argv[1:])


def compare():
    """The unstall-compare command."""
    return _exec_python_tool("unstall-compare", sys.argv[1:])


def module_args(args):
    """python -m unstall's arguments for the launcher: as given, except that
    a Python script named where the program goes (no '--' before it) runs
    with this interpreter: python -m unstall [options] script.py args."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return list(args)
        if a.startswith("-"):
            i += 2 if a in _VALUED else 1
            continue
        if a.endswith(".py"):
            return list(args[:i]) + ["--", sys.executable] + list(args[i:])
        return list(args)
    return list(args)
