#!/usr/bin/env python3
"""run_unittest.py SUITE DIR - the Python test suites (unittest discovery in
DIR), ending with the one closing line every suite prints and the only one
tests/run-all.sh reads: "SUITE: N passed, M failed" (", K skipped" when some
were). Exit status 0 when nothing failed."""
import sys
import unittest


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    suite_name, directory = sys.argv[1], sys.argv[2]
    tests = unittest.defaultTestLoader.discover(directory, top_level_dir=directory)
    result = unittest.TextTestRunner(verbosity=1).run(tests)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    skipped = len(result.skipped)
    passed = result.testsRun - failed - skipped
    line = f"{suite_name}: {passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line, flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
