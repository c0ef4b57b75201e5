"""unstall's Python package: where the launcher, the tools and libunstall.so are.

The wheel (make wheel) carries them inside this package:

    unstall/bin/unstall              the launcher (tools/unstall, as is)
    unstall/bin/unstall-report, unstall-compare (and the report's helper modules)
    unstall/bin/python/              the pin_dataloader sitecustomize (tools/python)
    unstall/lib/libunstall.so        found by the launcher as $top/lib/libunstall.so
    unstall/config/*.conf            the launcher's --profile, --strict
    unstall/VERSION                  the launcher's --version

The Debian package (make deb) installs them in their FHS places and sets
INSTALLED_BIN and INSTALLED_LIB below. The console commands and python -m
unstall exec the launcher (unstall._cli); pytest_unstall re-runs pytest
through it.
"""
import os

# make deb (tools/pkg/build) sets these to the installed files; in the wheel
# they stay empty and the files inside this package serve
INSTALLED_BIN = ""
INSTALLED_LIB = ""

HERE = os.path.dirname(os.path.abspath(__file__))


def _version():
    try:
        with open(os.path.join(HERE, "VERSION"), encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


__version__ = _version()


def bin_dir():
    """The folder of the launcher and the tools."""
    return INSTALLED_BIN or os.path.join(HERE, "bin")


def tool(name):
    """The path of a command: unstall, unstall-report, unstall-compare."""
    return os.path.join(bin_dir(), name)


def launcher():
    return tool("unstall")


def library():
    """The libunstall.so that the launcher preloads by default."""
    return INSTALLED_LIB or os.path.join(HERE, "lib", "libunstall.so")
