#!/usr/bin/env python3
"""table.py - tools/compat/run.sh's results: one row per sample, native and
unstall side by side (exit status, the program's own verdict, wall time) and
the shim's findings by rule (count, fixed/observed), from the JSON report.
Exit status 1 when any sample's outcome (exit status or verdict) differs.

Usage: table.py OUT LIST"""
import json
import os
import re
import sys

PASS = re.compile(r"test passed|result = pass|\bpassed\b|test results:\s*pass", re.I)
FAIL = re.compile(r"test failed|result = fail|\bfailed\b|errors? found|mismatch", re.I)
WAIVE = re.compile(r"waiv", re.I)


def verdict(path):
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return "-"
    if WAIVE.search(text):
        return "waived"
    if FAIL.search(text):
        return "FAIL"
    if PASS.search(text):
        return "pass"
    return "-"


def run(out, name, mode):
    try:
        rc, wall = open(os.path.join(out, f"{name}.{mode}.rc")).read().split()
    except (OSError, ValueError):
        return None
    text = os.path.join(out, f"{name}.{mode}.out")
    both = verdict(text)
    if both == "-":
        both = verdict(os.path.join(out, f"{name}.{mode}.err"))
    return int(rc), both, float(wall)


def findings(out, name):
    try:
        report = json.load(open(os.path.join(out, f"{name}.json")))
    except (OSError, ValueError):
        return "(no report)"
    rules = [f"{r['rule']} {r['count']} ({r['fixed']} fixed)" for r in report.get("rules", [])]
    return ", ".join(rules) if rules else "none"


def main():
    out, listing = sys.argv[1], sys.argv[2]
    names = [os.path.basename(line.split("|")[0].strip()) for line in open(listing) if line.strip()]
    print(f"{'sample':<28} {'exit n/u':>8} {'verdict native/unstall':>22} {'wall s n/u':>14}  same  findings under unstall")
    differ = built = 0
    for name in names:
        n, u = run(out, name, "native"), run(out, name, "unstall")
        if n is None or u is None:
            if os.path.exists(os.path.join(out, "bin", f"{name}.build.log")):
                print(f"{name:<28} {'build failed (see bin/' + name + '.build.log)'}")
            continue
        built += 1
        same = n[0] == u[0] and n[1] == u[1]
        differ += not same
        print(f"{name:<28} {n[0]:>3}/{u[0]:<4} {n[1]:>10}/{u[1]:<11} {n[2]:>6.2f}/{u[2]:<7.2f}  {'yes' if same else 'NO':<4}  "
              f"{findings(out, name)}")
    print(f"compat: {built - differ} passed, {differ} failed ({built} samples ran; same = same exit status and verdict)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
