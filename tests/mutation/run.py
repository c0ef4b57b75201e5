#!/usr/bin/env python3
"""The mutation check: every hand-written mutant of a pure module is killed.

Each mutant (tests/mutation/mutants.ini) is one source edit: a comparison
flipped, a condition dropped, a bound off by one, an option ignored. For each,
the script copies the sources and the built objects of BUILD_DIR into a
folder of its own under a temporary directory, applies the edit there, lets
make rebuild what the mutant's unit tests need (the mutated object, the core
archive, the tests' link: the generated dependencies keep the rest) and runs
those tests. A mutant is killed when one of them fails; one that survives
names a fault no test would notice, and fails the suite.

Before any mutant, the suite fails loudly where a mutant no longer applies
(its text is not found exactly once: the code changed under it) or where a
unit test fails unmutated (nothing could be judged).

Usage: tests/mutation/run.py [BUILD_DIR] [--only NAME...] [--list] [-j N]
BUILD_DIR (default build) must hold a built core (make test-bins). Prints
one line per mutant, then "mutation: N passed, M failed" (passed: killed).
"""
import argparse
import concurrent.futures
import configparser
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MUTANTS = os.path.join(ROOT, 'tests', 'mutation', 'mutants.ini')
# what a unit test's build reads, from the repository root
SOURCES = ['Makefile', 'VERSION', 'shim', 'tests/unit', 'tests/common', '.deps']
# what it reuses from the build folder
BUILT = ['shim', 'tests/unit', 'libunstall_core.a']
TEST_TIMEOUT_S = 120


class Mutant:
    def __init__(self, name, section):
        self.name = name
        missing = [k for k in ('file', 'tests', 'why', 'find', 'replace') if k not in section]
        if missing:
            raise ValueError(f'{name}: missing {", ".join(missing)}')
        self.file = section['file']
        self.tests = section['tests'].split()
        self.why = section['why']
        self.find = section['find']
        self.replace = section['replace']
        # runs of blanks and line ends in the text match any such run
        self.pattern = re.compile(r'\s+'.join(re.escape(w) for w in self.find.split()))

    def apply(self, text):
        """The mutated text, or an error saying why the mutant does not apply."""
        found = self.pattern.findall(text)
        if len(found) != 1:
            return None, f'its text is found {len(found)} times in {self.file}, not once: "{self.find}"'
        return self.pattern.sub(lambda _: self.replace, text, count=1), None


def load_mutants(path):
    parser = configparser.ConfigParser(interpolation=None, delimiters=('=',), comment_prefixes=('#',),
                                       empty_lines_in_values=False)
    parser.optionxform = str
    with open(path, encoding='utf-8') as f:
        parser.read_file(f)
    return [Mutant(name, parser[name]) for name in parser.sections()]


def clean_env():
    """The environment for make: not the outer make's (make check's jobserver)."""
    env = dict(os.environ)
    for var in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'MAKEOVERRIDES'):
        env.pop(var, None)
    return env


def copy_tree(src, dst):
    """src into dst, file times kept (make compares them)."""
    if os.path.isdir(src):
        shutil.copytree(src, dst, symlinks=True, copy_function=shutil.copy2, dirs_exist_ok=True)
    elif os.path.exists(src):
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)


def make_tests(tree, build_rel, tests):
    """Builds the tests in tree; returns (ok, output, objects compiled)."""
    targets = [f'{build_rel}/unit/{t}' for t in tests]
    r = subprocess.run(['make', '--no-print-directory', '-C', tree, f'BUILD={build_rel}'] + targets,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env())
    compiled = [line.split(' -o ')[-1].split()[0] for line in r.stdout.splitlines()
                if ' -c ' in line and ' -o ' in line]
    return r.returncode == 0, r.stdout, compiled


def run_tests(tree, build_rel, tests):
    """Runs the tests from the repository root (they read files there);
    returns [(name, failed?, the last lines of its output)]."""
    results = []
    for t in tests:
        binary = os.path.join(tree, build_rel, 'unit', t)
        try:
            r = subprocess.run([binary], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=TEST_TIMEOUT_S, errors='replace')
            failed, out = r.returncode != 0, r.stdout
        except subprocess.TimeoutExpired as e:
            failed, out = True, f'timed out after {TEST_TIMEOUT_S} s\n{e.stdout or ""}'
        results.append((t, failed, out.strip().splitlines()[-3:]))
    return results


def prepare_base(base, build, build_rel, tests):
    """A copy of the sources and the build that the mutants start from,
    brought up to date, its tests passing unmutated; None or an error."""
    for path in SOURCES:
        copy_tree(os.path.join(ROOT, path), os.path.join(base, path))
    for path in BUILT:
        copy_tree(os.path.join(build, path), os.path.join(base, build_rel, path))
    ok, out, _ = make_tests(base, build_rel, tests)
    if not ok:
        return 'the unmutated tests do not build:\n' + out[-3000:]
    bad = [(t, tail) for t, failed, tail in run_tests(base, build_rel, tests) if failed]
    if bad:
        return 'unit tests fail unmutated, so no mutant can be judged:\n' + '\n'.join(
            f'  {t}: ' + ' | '.join(tail) for t, tail in bad)
    return None


def try_mutant(mutant, base, work, build_rel, mutated_text):
    """Killed, survived or broken, with what to say."""
    started = time.monotonic()
    tree = os.path.join(work, mutant.name)
    try:
        copy_tree(base, tree)
        target = os.path.join(tree, mutant.file)
        with open(target, 'w', encoding='utf-8') as f:
            f.write(mutated_text)
        ok, out, compiled = make_tests(tree, build_rel, mutant.tests)
        took = time.monotonic() - started
        if not ok:
            # a mutant must be a program that builds: one that does not tests nothing
            return 'broken', f'does not build ({took:.1f} s):\n' + out[-2000:]
        results = run_tests(tree, build_rel, mutant.tests)
        took = time.monotonic() - started
        rebuilt = f'{len(compiled)} object{"" if len(compiled) == 1 else "s"} rebuilt'
        killers = [t for t, failed, _ in results if failed]
        if killers:
            return 'killed', f'by {" ".join(killers)} ({rebuilt}, {took:.1f} s)'
        return 'survived', f'{" ".join(mutant.tests)} passed ({rebuilt}, {took:.1f} s): {mutant.why}'
    finally:
        shutil.rmtree(tree, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('build', nargs='?', default='build')
    ap.add_argument('--only', nargs='+', metavar='NAME', help='run these mutants only')
    ap.add_argument('--list', action='store_true', help='list the mutants and why each exists')
    ap.add_argument('-j', type=int, default=os.cpu_count() or 1, help='mutants at once (default: the CPUs)')
    args = ap.parse_args()

    mutants = load_mutants(MUTANTS)
    if args.list:
        for m in mutants:
            print(f'{m.name:32} {m.file:24} {" ".join(m.tests):14} {m.why}')
        return 0
    if args.only:
        unknown = set(args.only) - {m.name for m in mutants}
        if unknown:
            print(f'mutation: no mutant named {", ".join(sorted(unknown))}', file=sys.stderr)
            return 2
        mutants = [m for m in mutants if m.name in args.only]

    # every mutant applies exactly once, before anything is built
    texts, problems = {}, []
    for m in mutants:
        path = os.path.join(ROOT, m.file)
        if not os.path.isfile(path):
            problems.append(f'{m.name}: {m.file} does not exist (moved? update tests/mutation/mutants.ini)')
            continue
        with open(path, encoding='utf-8') as f:
            mutated, error = m.apply(f.read())
        if error:
            problems.append(f'{m.name}: {error} (update tests/mutation/mutants.ini)')
        texts[m.name] = mutated
    if problems:
        for p in problems:
            print(f'FAIL  {p}')
        print(f'mutation: 0 passed, {len(problems)} failed')
        return 1

    build = os.path.abspath(args.build)
    if not os.path.isfile(os.path.join(build, 'libunstall_core.a')):
        print(f'FAIL  {build}: no libunstall_core.a (make BUILD={args.build} test-bins first)')
        print('mutation: 0 passed, 1 failed')
        return 1
    build_rel = os.path.relpath(build, ROOT)
    if build_rel.startswith('..'):
        build_rel = os.path.basename(build)

    tests = sorted({t for m in mutants for t in m.tests})
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix='unstall-mutation-') as work:
        base = os.path.join(work, 'base')
        error = prepare_base(base, build, build_rel, tests)
        if error:
            print(f'FAIL  baseline: {error}')
            print('mutation: 0 passed, 1 failed')
            return 1
        print(f'baseline: {" ".join(tests)} pass unmutated ({time.monotonic() - started:.1f} s)', flush=True)
        killed = failed = 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as pool:
            futures = [pool.submit(try_mutant, m, base, work, build_rel, texts[m.name]) for m in mutants]
            for m, fut in zip(mutants, futures):
                outcome, text = fut.result()
                if outcome == 'killed':
                    killed += 1
                    print(f'ok    {m.name}: killed {text}', flush=True)
                else:
                    failed += 1
                    print(f'FAIL  {m.name}: {outcome}, {text}', flush=True)
    print(f'mutation: {len(mutants)} mutants in {time.monotonic() - started:.0f} s, {killed} killed')
    print(f'mutation: {killed} passed, {failed} failed')
    return 0 if failed == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
