"""results.py - read the scenario programs' RESULT lines.

A line is "RESULT case=<id> test=<name> key=value ..."; values have no spaces.
Used by tests/scenarios/check.py (CI), tests/gpu/check.py and
tools/bench/table.py.
"""
import os
import re

_PAIR = re.compile(r"(\S+?)=(\S*)")


def parse_line(line):
    """The key/value pairs of one RESULT line, or None for other lines."""
    if not line.startswith("RESULT "):
        return None
    return dict(_PAIR.findall(line[len("RESULT "):]))


def parse_text(text):
    """Every RESULT line of a program's output, in order, as dicts."""
    rows = []
    for line in text.splitlines():
        row = parse_line(line)
        if row is not None:
            rows.append(row)
    return rows


def by_test(rows):
    """{(case, test): row}; a later line of the same test wins (the watchdog's)."""
    return {(r.get("case", "?"), r.get("test", "?")): r for r in rows}


def num(row, key, default=None):
    """A numeric value of a row, or default when absent or not a number."""
    if row is None or key not in row:
        return default
    try:
        return float(row[key])
    except ValueError:
        return default


class Run:
    """One program run: its RESULT rows, exit status and stderr text, read
    from DIR/NAME.out, DIR/NAME.rc and DIR/NAME.err."""

    def __init__(self, directory, name):
        self.name = name
        base = os.path.join(directory, name)
        self.out = _read(base + ".out")
        self.err = _read(base + ".err")
        rc = _read(base + ".rc").strip()
        self.rc = int(rc) if rc.lstrip("-").isdigit() else None
        self.rows = parse_text(self.out)
        self.tests = by_test(self.rows)

    def row(self, case, test):
        return self.tests.get((case, test))


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def load_runs(directory):
    """{name: Run} for every NAME.rc in directory."""
    runs = {}
    if os.path.isdir(directory):
        for entry in sorted(os.listdir(directory)):
            if entry.endswith(".rc"):
                name = entry[: -len(".rc")]
                runs[name] = Run(directory, name)
    return runs
