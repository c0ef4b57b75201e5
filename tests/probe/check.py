#!/usr/bin/env python3
"""tests/probe: checks a probe build's step records (tests/probe/run.sh).

Usage: check.py STEPS_FILE PLAIN_SHIM PROBE_SHIM PROBE_SH_OUTPUT REFUSED_OUTPUT REFUSED_STATUS
(the last three: tools/bench/probe.sh's output over the probe build, and its
output and exit status over the plain one)"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STEPS = os.path.join(ROOT, "tools", "bench", "probe_steps.py")
sys.path.insert(0, os.path.dirname(STEPS))
import probe_steps  # noqa: E402  the records as the tool reads them

passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    passed += bool(ok)
    failed += not ok
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))


def records(path):
    """[(api, path, bytes, {step: us})], read by probe_steps.py."""
    return [key + (steps,) for _, _, key, steps in probe_steps.read([path])]


def in_order(steps, names):
    times = [steps.get(n) for n in names]
    return None not in times and times == sorted(times)


def symbols(lib):
    p = subprocess.run(["nm", lib], capture_output=True, text=True)
    return p.stdout if p.returncode == 0 else ""


def main(path, plain, probe, table, refused, refused_status):
    recs = records(path)
    # smallcopy: per op, 6 rows of 3 calls + the row's check copy, and the
    # H2D rows' check copy is a D2H
    check("every call is a record", len(recs) >= 2 * 6 * 3, f"{len(recs)} records")
    check("every record enters first and leaves last",
          all(s.get("entered") == 0.0 and s.get("left") == max(s.values()) for _, _, _, s in recs))
    d2h = [s for api, path_, n, s in recs if api == "cudaMemcpy" and path_ == "D2H_pageable" and n == 4 << 20]
    check("a 4 MiB pageable D2H runs the pipeline's steps in order", d2h and all(
        in_order(s, ["entered", "classified", "pipe_begun", "slots_claimed", "issued", "waited", "host_copied",
                     "pipe_done", "recorded", "left"]) for s in d2h), d2h[:1])
    check("its host copy tells the copy threads and waits for their parts", d2h and all(
        in_order(s, ["waited", "workers_woken", "own_parts_done", "host_copied"]) for s in d2h), d2h[:1])
    h2d = [s for api, path_, n, s in recs if api == "cudaMemcpy" and path_ == "H2D_pageable" and n == 4 << 20]
    check("a 4 MiB pageable H2D copies into its slot before it issues", h2d and all(
        in_order(s, ["pipe_begun", "slots_claimed", "host_copied", "issued", "waited", "pipe_done"]) for s in h2d),
          h2d[:1])
    small = [s for api, path_, n, s in recs if api == "cudaMemcpy" and path_ == "H2D_pageable" and n == 4]
    check("a 4 B pageable H2D goes native, then is classified and recorded", small and all(
        in_order(s, ["entered", "native_done", "classified", "site_taken", "recorded", "left"])
        and "pipe_begun" not in s for s in small), small[:1])
    p = subprocess.run([sys.executable, STEPS, path], capture_output=True, text=True)
    check("probe_steps.py puts them side by side", p.returncode == 0 and re.search(
        r"^cudaMemcpy D2H_pageable 4 MiB: the first call of [12] process\(es\) \| [1-9] later call\(s\)", p.stdout, re.M)
          and re.search(r"^  waited +[0-9.]+ \(\+ *[0-9.]+\) \| +[0-9.]+", p.stdout, re.M), p.stdout[:400] + p.stderr)
    text = open(table).read()
    check("probe.sh says where it ran and prints the table", text.startswith("probe: simulated runtime") and
          re.search(r"^cudaMemcpy H2D_pageable 4 B: the first call of [12] process", text, re.M), text[:300])
    text = open(refused).read()
    check("probe.sh refuses a plain build", refused_status != "0" and "is not a probe build" in text, text[:300])
    check("the probe build has the stamps", "us_probe_stamp" in symbols(probe))
    check("a plain build has none", symbols(plain) != "" and "us_probe" not in symbols(plain))
    print(f"probe: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))
