#!/usr/bin/env python3
"""Fault injection at every runtime and driver call the shim makes.

Builds tests/faults/inject.c (libfaultinject.so, preloaded after the shim: it
fails the nth call the shim makes to one function of shim/base/real_api.def
or shim/base/real_driver.def)
and tests/faults/fault_prog.c (pipelined copies, every path, two rounds).
First a clean run counts the shim's calls per function; then, for every
function the shim called, a run fails its first call, its last call, and all
of its calls, and the asynchronous errors of fakecuda (FAKECUDA_FAULT_ASYNC)
hit the 1st, 5th and 20th operation queued. Each copy must end one of the
ways a native call could: cudaSuccess with the data right (the shim fell back
or recovered), or the injected error (or, for an asynchronous error, the
stream's error) returned by the copy or its synchronization. No wrong data on
success, no other error, no hang (60 s watchdog), no crash, and the program
finishes.

The table of outcomes is docs/faults.md; this run checks it is current
(--write rewrites it). Prints PASS/FAIL lines and "faults: N passed, M failed".

Usage: tests/faults/run.py BUILD_DIR [--write]
"""
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, 'tests', 'faults')
DOC = os.path.join(ROOT, 'docs', 'faults.md')
INJECTED = 'cudaErrorMemoryAllocation'  # FAULT_ERR's default, code 2
ASYNC = 'cudaErrorLaunchFailure'        # FAKECUDA_FAULT_ASYNC's default
ASYNC_NTHS = (1, 5, 20)
TIMEOUT = 60
# how many calls the shim makes of these depends on timing, so the table
# gives no count and no fixed outcome for their last call (each run's outcome
# is still judged): cudaEventQuery is polled until done; cuEventSynchronize is
# a copy's wait for its own earlier chunk in a slot, which a pageable H2D
# makes only while the pool holds fewer slots than it wants (the grower adds
# them on its thread meanwhile: 65 to 76 waits in runs of one build)
VARIES = {'cudaEventQuery': 'polled', 'cuEventSynchronize': 'waits while the pool grows'}

passed = failed = 0


def check(name, ok, why=''):
    global passed, failed
    if ok:
        passed += 1
        print(f'PASS {name}')
    else:
        failed += 1
        print(f'FAIL {name}: {why}')


def build(work):
    cc = os.environ.get('CC', 'gcc')
    cuda = os.environ.get('CUDA_HOME', '/usr/local/cuda')
    san = os.environ.get('SAN_CFLAGS', '').split()
    common = [cc, '-std=c11', '-D_GNU_SOURCE', '-O1', '-g', '-Wall', '-Wextra', '-Werror', *san,
              f'-I{cuda}/include', *(f'-I{ROOT}/shim/{layer}' for layer in ('base', 'report', 'detect', 'fix', 'chain'))]
    lib = os.path.join(work, 'libfaultinject.so')
    prog = os.path.join(work, 'fault_prog')
    subprocess.run(common + ['-fPIC', '-shared', os.path.join(HERE, 'inject.c'), '-o', lib, '-ldl', '-pthread'],
                   check=True)
    subprocess.run(common + [os.path.join(HERE, 'fault_prog.c'), '-o', prog, f'-L{BUILD}/fakecuda', '-lcudart'],
                   check=True)
    return lib, prog


def run(prog, lib, extra, deferred=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith(('UNSTALL_', 'FAKECUDA_', 'FAULT_'))}
    preload = ' '.join(filter(None, [os.environ.get('SAN_PRELOAD'), os.path.join(BUILD, 'libunstall.so'), lib]))
    env.update(LD_LIBRARY_PATH=os.path.join(BUILD, 'fakecuda'), LD_PRELOAD=preload,
               FAKECUDA_DEVICES='2', FAKECUDA_TIME_SCALE='0.1',
               UNSTALL_CHUNK_BYTES='256k', UNSTALL_SLOTS='4', UNSTALL_PEER_MIN_BYTES='0', UNSTALL_PEER_IDLE_NATIVE_BYTES='0',
               UNSTALL_H2D_MIN_BYTES='0', UNSTALL_H2D_IDLE_NATIVE_BYTES='0', UNSTALL_D2H_MIN_BYTES='0',
               UNSTALL_LOG_LEVEL='warn',
               # the spill's warming thread makes no CUDA call, but on a 2-core machine
               # its 256 MiB of page faults shift when the grower pins its slots, and with
               # it how many slots the pool grows (the clean run's counts: 14 or 15
               # registrations in one run of four with it)
               UNSTALL_SPILL_WARM='0')
    if deferred:
        env['UNSTALL_D2H_DEFERRED'] = '1'
    env.update(extra)
    try:
        p = subprocess.run([prog], env=env, capture_output=True, text=True, timeout=TIMEOUT)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return 'hang', (e.stdout or b'').decode(errors='replace') if isinstance(e.stdout, bytes) else (e.stdout or ''), ''


STEP = re.compile(r'^STEP (\S+) copy=(\S+) sync=(\S+) data=(\S+)$', re.M)


def judge(rc, out, allowed):
    """(outcome for the table, problem or None)"""
    if rc == 'hang':
        return 'hang', f'no end after {TIMEOUT} s'
    setup = re.search(r'^SETUP (\S+) (\S+)$', out, re.M)
    if rc == 3 and setup:
        # the program's own call, interposed by the shim, got the failure
        if setup.group(2) in allowed:
            return f'the program\'s {setup.group(1)} returned {setup.group(2)} (setup)', None
        return f'BAD: setup {setup.group(1)} returned {setup.group(2)}', f'setup {setup.group(1)}: {setup.group(2)}'
    if rc != 0 or 'DONE' not in out:
        return 'crash', f'exit {rc}'
    errors, bad = [], []
    for name, copy, sync, data in STEP.findall(out):
        for what, e in (('copy', copy), ('sync', sync)):
            if e != 'cudaSuccess':
                errors.append(f'{name}.{what}')
                if e not in allowed:
                    bad.append(f'{name}.{what} returned {e}')
        if data == 'bad':
            bad.append(f'{name}: wrong data after cudaSuccess')
    if bad:
        return 'BAD: ' + '; '.join(bad), '; '.join(bad)
    if not errors:
        return 'every copy succeeded, data right', None
    return f'{"/".join(sorted(allowed))} from ' + ', '.join(errors) + '; every other copy right', None


def main():
    global BUILD
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    BUILD = os.path.abspath(sys.argv[1])
    write = '--write' in sys.argv[2:]
    work = tempfile.mkdtemp(prefix='faults.', dir=BUILD)
    lib, prog = build(work)

    counts_file = os.path.join(work, 'counts')
    rc, out, err = run(prog, lib, {'FAULT_COUNTS': counts_file})
    outcome, problem = judge(rc, out, set())
    check('clean_run', problem is None and outcome.startswith('every copy'), problem or err[-500:])
    counts = {}
    if os.path.exists(counts_file):
        for line in open(counts_file):
            name, n = line.split()
            counts[name] = int(n)
    counts.pop('injected', None)
    defined = re.findall(r'^US_REAL\([^,]+,\s*(\w+),', open(os.path.join(ROOT, 'shim/base/real_api.def')).read(),
                         re.M)
    defined += re.findall(r'^US_REAL_DRV\((\w+),', open(os.path.join(ROOT, 'shim/base/real_driver.def')).read(), re.M)
    never = {'cudaGetErrorName', 'cudaGetLastError'}  # no cudaError_t to fail with
    rows = []
    for fn in defined:
        n = counts.get(fn, 0)
        if n == 0 or fn in never:
            continue
        for label, nth, count in (('1st', 1, 1), (f'last ({n})', n, 1), ('all', 1, 0)):
            if label.startswith('last') and n == 1:
                continue
            rc, out, err = run(prog, lib, {'FAULT_FN': fn, 'FAULT_NTH': str(nth), 'FAULT_COUNT': str(count)})
            outcome, problem = judge(rc, out, {INJECTED})
            label = 'last' if label.startswith('last') else label
            check(f'{fn}.{label}', problem is None, f'{problem}; stderr: {err[-300:]}')
            if fn in VARIES and label == 'last':
                outcome = f'depends on timing ({VARIES[fn]}); checked in every run'
            rows.append((fn, label, outcome))
    # deferred D2H (option d2h_deferred) calls what the default does not
    # (cudaLaunchHostFunc): those functions again, in that mode
    deferred_counts_file = os.path.join(work, 'counts-deferred')
    rc, out, err = run(prog, lib, {'FAULT_COUNTS': deferred_counts_file}, deferred=True)
    outcome, problem = judge(rc, out, set())
    check('clean_run_deferred', problem is None and outcome.startswith('every copy'), problem or err[-500:])
    deferred_counts = {}
    if os.path.exists(deferred_counts_file):
        for line in open(deferred_counts_file):
            name, n = line.split()
            deferred_counts[name] = int(n)
    for fn in defined:
        n = deferred_counts.get(fn, 0)
        if n == 0 or fn in never or fn in counts:
            continue
        for label, nth, count in (('1st', 1, 1), ('last', n, 1), ('all', 1, 0)):
            if label == 'last' and n == 1:
                continue
            rc, out, err = run(prog, lib, {'FAULT_FN': fn, 'FAULT_NTH': str(nth), 'FAULT_COUNT': str(count)},
                               deferred=True)
            outcome, problem = judge(rc, out, {INJECTED})
            check(f'{fn}.deferred.{label}', problem is None, f'{problem}; stderr: {err[-300:]}')
            rows.append((fn, f'{label}, deferred D2H', outcome))
    for nth in ASYNC_NTHS:
        rc, out, err = run(prog, lib, {'FAKECUDA_FAULT_ASYNC': f'{nth}:1'})
        outcome, problem = judge(rc, out, {ASYNC})
        check(f'async_error.{nth}', problem is None, f'{problem}; stderr: {err[-300:]}')
        rows.append(('asynchronous error (FAKECUDA_FAULT_ASYNC)', f'op {nth}', outcome))

    table = render(rows, counts)
    generated = os.path.join(work, 'faults.md')
    with open(generated, 'w') as f:
        f.write(table)
    if failed == 0:
        shutil.rmtree(work, ignore_errors=True)
        generated = 'this run'
    if write:
        with open(DOC, 'w') as f:
            f.write(table)
        print(f'faults: wrote {DOC}')
    elif os.environ.get('TEST_SANITIZER'):
        print(f'SKIP docs_faults_md_current: not under {os.environ["TEST_SANITIZER"]} (slower: polled counts differ)')
    else:
        current = open(DOC).read() if os.path.exists(DOC) else ''
        diff = ''.join(difflib.unified_diff(current.splitlines(True), table.splitlines(True), 'docs/faults.md',
                                            'this run', n=0))
        check('docs_faults_md_current', current == table,
              f'docs/faults.md differs from this run\'s table ({generated}): tests/faults/run.py {sys.argv[1]} --write'
              f'\n{diff}')
    print(f'faults: {passed} passed, {failed} failed')
    return 0 if failed == 0 else 1


def render(rows, counts):
    lines = [
        '# Fault injection: what a failing runtime or driver call does to the program',
        '',
        'Generated by `tests/faults/run.py BUILD --write`; `make check` runs it and fails when this',
        'table is not what the run gives. The program (`tests/faults/fault_prog.c`) issues every',
        'rewritten copy (pageable H2D and D2H, async and synchronous, staged peer copies by',
        '`cudaMemcpyPeer[Async]` and by `cudaMemcpyAsync` across devices) twice, 3 MiB + 5 bytes each,',
        'under the shim with 256 KiB chunks, 4 slots and `spill_warm=0` on the simulated runtime (2 devices, no peer',
        'access). `libfaultinject.so` (`tests/faults/inject.c`), preloaded after the shim, fails the',
        'shim\'s own calls of one function with `cudaErrorMemoryAllocation` (a driver function,',
        '`cu...`, with the same code, `CUDA_ERROR_OUT_OF_MEMORY`): the first call, the last',
        'one the clean run made, or every call. A pipeline makes a failed driver call again through',
        'the runtime (`shim/base/real_driver.h`). Functions only deferred D2H calls',
        '(`UNSTALL_D2H_DEFERRED=1`) are failed in that mode. The asynchronous rows fail the nth',
        'operation queued on any stream (fakecuda\'s `FAKECUDA_FAULT_ASYNC`).',
        '',
        'Accepted outcomes: the copy succeeds with the right data (the shim went native or',
        'recovered), or the copy or its synchronization returns the injected error (for an',
        'asynchronous fault, the stream\'s error), as a native call could. Never: wrong data after',
        'cudaSuccess, another error, a hang, a crash.',
        '',
        'Calls the shim made in the clean run: ' +
        ', '.join(f'`{fn}` {f"({VARIES[fn]}, varies)" if fn in VARIES else n}' for fn, n in sorted(counts.items())) + '.',
        '',
        '| function | failed call | outcome |',
        '|---|---|---|',
    ]
    for fn, label, outcome in rows:
        lines.append(f'| `{fn}` | {label} | {outcome} |' if fn.startswith('cu') else f'| {fn} | {label} | {outcome} |')
    return '\n'.join(lines) + '\n'


if __name__ == '__main__':
    sys.exit(main())
