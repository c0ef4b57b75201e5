#!/usr/bin/env python3
"""Compares runs of capture_conform with the outcomes they must show.

usage: compare.py RUNTIME DIR EXPECTED PREDICTED
  RUNTIME  fake: every line must equal expected.txt or predicted.txt;
           gpu:  lines of expected.txt must match; a line of predicted.txt
                 that the GPU answers differently is reported (NOTE), not failed.
  DIR      one file MODE.out per mode (native.out first); every mode must
           also print exactly what native printed (the shim changes nothing).
Prints "PASS mode case" / "FAIL mode case: ..." and "capture: N passed, M failed".
"""
import os
import sys


def cases(path):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line and not line.startswith("#") and ":" in line:
                out[line.split(":", 1)[0]] = line
    return out


def main():
    runtime, rundir, expected_path, predicted_path = sys.argv[1:5]
    expected, predicted = cases(expected_path), cases(predicted_path)
    wanted = dict(predicted, **expected)
    modes = sorted(f[:-4] for f in os.listdir(rundir) if f.endswith(".out"))
    modes.sort(key=lambda m: m != "native")
    native = cases(os.path.join(rundir, "native.out")) if "native" in modes else {}
    passed = failed = 0
    for mode in modes:
        got = cases(os.path.join(rundir, mode + ".out"))
        for name, want in wanted.items():
            line = got.get(name)
            why = None
            if line is None:
                why = "no output (crashed or hung? see %s/%s.err)" % (rundir, mode)
            elif mode != "native" and name in native and line != native[name]:
                why = "differs from native:\n    native: %s\n    %s: %s" % (native[name], mode, line)
            elif line != want and (runtime == "fake" or name in expected):
                why = "differs from %s:\n    want: %s\n    got:  %s" % (
                    "expected.txt" if name in expected else "predicted.txt", want, line)
            elif line != want:
                print("NOTE %s %s: the GPU answers what predicted.txt does not:\n    predicted: %s\n    gpu:       %s"
                      % (mode, name, want, line))
            if why is None:
                passed += 1
                print("PASS %s %s" % (mode, name))
            else:
                failed += 1
                print("FAIL %s %s: %s" % (mode, name, why))
        for name in sorted(set(got) - set(wanted)):
            failed += 1
            print("FAIL %s %s: a case neither expected.txt nor predicted.txt knows" % (mode, name))
    print("capture: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
