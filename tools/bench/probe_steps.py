#!/usr/bin/env python3
"""probe_steps.py - the step times a probe build writes (make PROBE=1: shim/base/probe.h),
put side by side: for each API, path and size, the median time at which the calls
reached each step, microseconds since the shim took the call, for each
process's first call of that API, path and size and for its later calls, with the
time since the step before.

A file may hold the lines of many processes (UNSTALL_PROBE_OUT appends); a
call's process is its pid. A step a call did not reach is left out of that
call; a step reached by fewer than half the calls of a column is marked
with how many reached it.

Usage: probe_steps.py [--skip N] FILE...
  --skip N  leave out each process's first N calls of an API, path and size from the
            "later" column (default 0), e.g. the calls while a pool grows
Exit status 0; 1 if the files hold no UNSTALL_PROBE line."""
import re
import statistics
import sys

from smallcopy_table import size  # the same size text as the small-copy table's


def read(paths):
    """[(pid, call, (api, path, bytes), {step: us})] in file order."""
    calls = []
    for path in paths:
        for line in open(path):
            if not line.startswith("UNSTALL_PROBE "):
                continue
            fields = dict(re.findall(r"(\w+)=(\S+)", line))
            steps = {k: float(v) for k, v in fields.items() if k not in ("pid", "call", "tid", "api", "path", "bytes")}
            key = (fields["api"], fields.get("path", "?"), int(fields["bytes"]))
            calls.append((fields["pid"], int(fields["call"]), key, steps))
    return calls


def column(calls):
    """{step: (median us since entered, how many calls reached it)}"""
    steps = {}
    for c in calls:
        for step, us in c.items():
            steps.setdefault(step, []).append(us)
    return {step: (statistics.median(v), len(v)) for step, v in steps.items()}


def main(argv):
    skip = 0
    if len(argv) > 1 and argv[0] == "--skip":
        skip, argv = int(argv[1]), argv[2:]
    calls = read(argv)
    if not calls:
        print("probe_steps: no UNSTALL_PROBE lines (a probe build: make PROBE=1; UNSTALL_PROBE_OUT=file)")
        return 1
    groups = {}
    for pid, call, key, steps in sorted(calls, key=lambda c: (c[0], c[1])):
        groups.setdefault(key, {}).setdefault(pid, []).append(steps)
    for (api, path, nbytes), by_process in sorted(groups.items()):
        first = [p[0] for p in by_process.values()]
        later = [s for p in by_process.values() for s in p[1 + skip:]]
        cols = [column(first), column(later)]
        print(f"{api} {path} {size(nbytes)}: the first call of {len(first)} process(es) | {len(later)} later call(s); "
              "median us since the shim took the call (+ since the step before)")
        order = sorted(set(cols[0]) | set(cols[1]),
                       key=lambda s: (cols[1].get(s, cols[0].get(s))[0], s != "entered"))
        previous = [0.0, 0.0]
        for step in order:
            cells = []
            for i, (col, n) in enumerate(((cols[0], len(first)), (cols[1], len(later)))):
                if step not in col:
                    cells.append(f"{'-':>22}")
                    continue
                us, reached = col[step]
                mark = f" [{reached}/{n}]" if reached * 2 < n else ""
                cells.append(f"{us:>9.2f} (+{us - previous[i]:>7.2f}){mark}")
                previous[i] = us
            print(f"  {step:<15} {cells[0]} | {cells[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
