#!/usr/bin/env python3
"""smallcopy_table.py - tools/bench/smallcopy.c's rows, native and unstall
side by side: median, p99, worst and first call in microseconds, and whether
unstall is slower than native (median or p99 more than 5% and 1 us worse).

Usage: smallcopy_table.py NATIVE_FILE SHIM_FILE
Exit status 0; the verdict column says where unstall loses."""
import re
import sys


def load(path):
    rows = {}
    for line in open(path):
        if line.startswith("SMALLCOPY "):
            kv = dict(re.findall(r"(\w+)=(\S+)", line))
            rows[(kv["op"], int(kv["bytes"]))] = kv
    return rows


def size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} B"


def worse(shim, native):
    return shim > native * 1.05 and shim > native + 1.0


def main():
    native, shim = load(sys.argv[1]), load(sys.argv[2])
    print(f"{'op':<10} {'size':>8} | {'median native':>13} {'unstall':>8} | {'p99 native':>10} {'unstall':>8} | "
          f"{'worst native':>12} {'unstall':>8} | {'first native':>12} {'unstall':>8} | data | verdict")
    slower = 0
    for key, n in native.items():
        s = shim.get(key)
        if s is None:
            continue
        f = lambda r, k: float(r[k])
        bad = [k for k in ("median_us", "p99_us") if worse(f(s, k), f(n, k))]
        slower += bool(bad)
        verdict = "slower: " + ",".join(k[:-3] for k in bad) if bad else "ok"
        data = "ok" if n["ok"] == "1" and s["ok"] == "1" else "BAD"
        print(f"{key[0]:<10} {size(key[1]):>8} | {f(n, 'median_us'):>13.1f} {f(s, 'median_us'):>8.1f} | "
              f"{f(n, 'p99_us'):>10.1f} {f(s, 'p99_us'):>8.1f} | {f(n, 'max_us'):>12.1f} {f(s, 'max_us'):>8.1f} | "
              f"{f(n, 'first_us'):>12.1f} {f(s, 'first_us'):>8.1f} | {data:>4} | {verdict}")
    print(f"rows where unstall is slower (median or p99 > 5% and > 1 us worse): {slower}")
    print("times in microseconds on the calling thread; first: the row's first call (the process's first copy for the first row)")


if __name__ == "__main__":
    main()
