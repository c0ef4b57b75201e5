#!/usr/bin/env python3
"""run.py - make torch-test: the PyTorch programs of tests/torch/cases.py,
each natively and under the shim (tools/unstall --lib BUILD/libunstall.so),
their results compared, then one summary table.

    python3 tests/torch/run.py [--build DIR] [--out DIR] [--only case,...]

Needs python3 with torch and a GPU, and a built libunstall.so (BUILD, default
build/: a build folder carried from another machine serves; nothing is built
or installed here). Without torch or a GPU it says so and exits 0 (skipped).

What passes: every run exits 0 with its own checks ok; every DIGEST (an exact
checksum of a result: copies, batches, losses, weights) is the same natively
and under the shim; the shim's JSON report shows it was loaded and saw CUDA
calls; the two torchrun ranks wrote one report each, which tools/unstall-report
merges; the DataLoader CNN job (pin_memory=False) under unstall with
--pin-dataloader pins its loader and trains to native's weights. Figures
(d2h_vs_launch's worst launch and D2H GB/s, the DataLoader CNN's steps/s natively, under
unstall, with pin_memory=True and under unstall with --pin-dataloader, DDP
steps/s) are printed, not judged. Outputs: --out or TORCH_TEST_OUT (default BUILD/torch-test).
Exit status: 0 all passed (or skipped), 1 a check failed, 2 usage.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CASES_PY = os.path.join(HERE, "cases.py")
LAUNCHER = os.path.join(ROOT, "tools", "unstall")
REPORT_TOOL = os.path.join(ROOT, "tools", "unstall-report")
ALL = ["copies", "dataloader", "train", "graph", "d2h_vs_launch", "cnn", "ddp", "ddp_fail", "strict", "pytest"]
ALL += ["pin_default"]  # the DataLoader CNN job as a user starts it (pin_dataloader's default)


class Run:
    """One run of a case: exit status, its lines, the shim's reports."""

    def __init__(self, label, rc, out, seconds, reports):
        self.label, self.rc, self.out, self.seconds, self.reports = label, rc, out, seconds, reports
        self.digests, self.checks, self.figures = {}, {}, {}
        for line in out.splitlines():
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[0] == "DIGEST":
                self.digests[parts[1]] = parts[2]
            elif len(parts) >= 3 and parts[0] == "CHECK":
                self.checks[parts[1]] = (parts[2] == "ok", parts[3] if len(parts) > 3 else "")
            elif len(parts) >= 3 and parts[0] == "FIGURE":
                try:
                    self.figures[parts[1]] = float(parts[2])
                except ValueError:
                    pass

    def failed_checks(self):
        return [f"{k} {v[1]}".strip() for k, v in self.checks.items() if not v[0]]

    def findings(self):
        """(hooked, calls, fixed) over this run's JSON reports."""
        hooked, calls, fixed = False, 0, 0
        for path in self.reports:
            try:
                with open(path) as f:
                    r = json.load(f)
            except (OSError, ValueError):
                continue
            hooked = hooked or bool(r.get("hooked"))
            for rule in r.get("rules", []):
                calls += rule.get("count", 0)
                fixed += rule.get("fixed", 0)
        return hooked, calls, fixed


class Tester:
    def __init__(self, args):
        self.args = args
        self.python = args.python
        self.lib = os.path.join(args.build, "libunstall.so")
        self.out = args.out
        self.rows = []       # (case, verdict, detail)
        self.figures = {}    # (name, label) -> value
        self.failed = 0
        self.passed = 0
        self.skipped = 0

    def run(self, case, label, extra=(), shim=False, strict=False, timeout=600, cmd=None, flags=(), env=None):
        """Run cases.py CASE (or cmd) natively or under the shim (with the
        launcher's flags); a Run."""
        log_dir = os.path.join(self.out, label)
        os.makedirs(log_dir, exist_ok=True)
        report_dir = os.path.join(log_dir, f"{case}-reports")
        shutil.rmtree(report_dir, ignore_errors=True)
        os.makedirs(report_dir)
        command = cmd or [self.python, CASES_PY, case, *extra]
        if shim:
            pre = [LAUNCHER, "--lib", self.lib, "--report", os.path.join(report_dir, "unstall-%r-%p.json")]
            if strict:
                pre.append("--strict")
            pre += list(flags)
            command = pre + ["--"] + command
        env_extra = env or {}
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        for key in list(env):
            if key.startswith("UNSTALL_") or key == "LD_PRELOAD":
                del env[key]
        env.update(env_extra)
        t0 = time.perf_counter()
        try:
            p = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               timeout=timeout, cwd=log_dir)
            rc, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            rc, out = 124, (e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes) \
                else (e.stdout or "")
            out += f"\n# timed out after {timeout} s"
        seconds = time.perf_counter() - t0
        name = f"{case}{''.join(extra).replace('--', '-')}"
        with open(os.path.join(log_dir, f"{name}.out"), "w") as f:
            f.write(out)
        reports = sorted(glob.glob(os.path.join(report_dir, "*.json")))
        r = Run(label, rc, out, seconds, reports)
        print(f"  {case:<10} {label:<11} exit {rc}, {seconds:.1f} s", flush=True)
        return r

    def verdict(self, case, problems, detail):
        if problems:
            self.failed += 1
            self.rows.append((case, "FAIL", "; ".join(problems)[:400]))
        else:
            self.passed += 1
            self.rows.append((case, "PASS", detail))

    def skip(self, case, why):
        self.skipped += 1
        self.rows.append((case, "SKIP", why))

    def compare(self, case, native, shimmed, extra_problems=()):
        """Both runs ok, their digests equal, the shim loaded and hooked."""
        problems = list(extra_problems)
        for r in (native, shimmed):
            if r.rc != 0:
                tail = " | ".join(l for l in r.out.strip().splitlines()[-3:])
                problems.append(f"{r.label} exit {r.rc} ({tail[:200]})")
            problems += [f"{r.label}: {c}" for c in r.failed_checks()]
        if not native.digests:
            problems.append("native printed no DIGEST")
        differ = [k for k in native.digests if shimmed.digests.get(k) != native.digests[k]]
        if differ:
            problems.append(f"{len(differ)} of {len(native.digests)} results differ under the shim: "
                            + ", ".join(differ[:6]))
        hooked, calls, fixed = shimmed.findings()
        if not hooked:
            problems.append("the shim's report says it saw no CUDA call (not loaded?)")
        detail = (f"{len(native.digests)} results equal, {len(native.checks)} checks ok; "
                  f"unstall: {calls} findings, {fixed} fixed")
        self.verdict(case, problems, detail)
        for r in (native, shimmed):
            for k, v in r.figures.items():
                self.figures[(k, r.label)] = v
        return not problems

    def plain(self, case, extra=(), **kw):
        native = self.run(case, "native", extra, **kw)
        if native.rc == 77:
            self.skip(case, native.out.strip().splitlines()[-1][:200])
            return None, None
        shimmed = self.run(case, "unstall", extra, shim=True, **kw)
        self.compare(case, native, shimmed)
        return native, shimmed

    # --- the cases ---------------------------------------------------------------------

    def case_train(self):
        native = self.run("train", "native")
        control = self.run("train", "native2")
        shimmed = self.run("train", "unstall", shim=True)
        extra = []
        if control.digests.get("train_weights") != native.digests.get("train_weights"):
            extra.append("two native runs differ: the loop is not deterministic here, so the comparison is void")
        self.compare("train", native, shimmed, extra)
        # the second native run's speed too: the summary shows how far two
        # native processes differ, which one run each cannot tell from unstall's effect
        for k, v in control.figures.items():
            self.figures[(k, "native2")] = v

    def case_cnn(self):
        native = self.run("cnn", "native", ["--pin", "0"])
        shimmed = self.run("cnn", "unstall", ["--pin", "0"], shim=True)
        pinned = self.run("cnn", "pinned", ["--pin", "1"])
        # the same program (pin_memory=False), its loader pinned from outside
        pin_dl = self.run("cnn", "unstall+pin", ["--pin", "0"], shim=True, flags=["--pin-dataloader"])
        extra = []
        if pinned.rc != 0:
            extra.append(f"pin_memory=True run exit {pinned.rc}")
        if pinned.digests.get("cnn_weights") != native.digests.get("cnn_weights"):
            extra.append("pin_memory=True gives other weights than native: the job is not deterministic here")
        if pin_dl.rc != 0:
            tail = " | ".join(pin_dl.out.strip().splitlines()[-3:])
            extra.append(f"unstall + pin_dataloader run exit {pin_dl.rc} ({tail[:200]})")
        extra += [f"unstall + pin_dataloader: {c}" for c in pin_dl.failed_checks()]
        if pin_dl.digests.get("cnn_weights") != native.digests.get("cnn_weights"):
            extra.append("unstall + pin_dataloader gives other weights than native")
        if pin_dl.figures.get("cnn_loader_pin_memory") != 1 or native.figures.get("cnn_loader_pin_memory") != 0:
            extra.append(f"loader pin_memory: native {native.figures.get('cnn_loader_pin_memory')}, "
                         f"unstall + pin_dataloader {pin_dl.figures.get('cnn_loader_pin_memory')} (0 and 1 expected)")
        if "unstall: pin_dataloader: DataLoader at " not in pin_dl.out:
            extra.append("unstall + pin_dataloader did not say which DataLoader it pinned")
        self.compare("cnn", native, shimmed, extra)
        for run in (pinned, pin_dl):
            for k, v in run.figures.items():
                self.figures[(k, run.label)] = v

    def case_pin_default(self, rounds=3):
        """The DataLoader CNN job (pin_memory=False) as a user starts it: under
        unstall its loader pins by default. Three rounds of native,
        pin_memory=True and the default launch (steps/s each, the default's
        share of pin_memory=True's); then --no-pin-dataloader (not pinned),
        and pinned memory made scarce: pin_dataloader_max 4m (a 3 MiB batch
        at a time) and a pin failure injected every seventh pin_memory() call.
        Every run must finish with native's weights."""
        runs = []
        for r in range(1, rounds + 1):
            runs.append(self.run("cnn", f"native-r{r}", ["--pin", "0"]))
            runs.append(self.run("cnn", f"pinned-r{r}", ["--pin", "1"]))
            runs.append(self.run("cnn", f"default-r{r}", ["--pin", "0"], shim=True))
        off = self.run("cnn", "no-pin", ["--pin", "0"], shim=True, flags=["--no-pin-dataloader"])
        capped = self.run("cnn", "cap-4m", ["--pin", "0"], shim=True, env={"UNSTALL_PIN_DATALOADER_MAX": "4m"})
        inject = ("import runpy, sys, torch\n"
                  "calls = [0]\n"
                  "pin = torch.Tensor.pin_memory\n"
                  "def failing_pin_memory(self, *a, **k):\n"
                  "    calls[0] += 1\n"
                  "    if calls[0] % 7 == 3:\n"
                  "        raise RuntimeError('CUDA error: out of memory (injected by torch-test)')\n"
                  "    return pin(self, *a, **k)\n"
                  "torch.Tensor.pin_memory = failing_pin_memory\n"
                  "sys.argv = sys.argv[1:]\n"
                  "runpy.run_path(sys.argv[0], run_name='__main__')\n")
        failing = self.run("cnn", "pin-fails", shim=True,
                           cmd=[self.python, "-c", inject, CASES_PY, "cnn", "--pin", "0"])
        problems = []
        weights = runs[0].digests.get("cnn_weights")
        if not weights:
            problems.append("native printed no weights")
        for run in runs + [off, capped, failing]:
            if run.rc != 0:
                tail = " | ".join(run.out.strip().splitlines()[-3:])
                problems.append(f"{run.label} exit {run.rc} ({tail[:200]})")
            problems += [f"{run.label}: {c}" for c in run.failed_checks()]
            if run.digests.get("cnn_weights") != weights:
                problems.append(f"{run.label}: other weights than native")
        want_pinned = [(run, 1 if run.label.startswith(("pinned", "default", "cap", "pin-fails")) else 0)
                       for run in runs + [off, capped, failing]]
        problems += [f"{run.label}: loader pin_memory {run.figures.get('cnn_loader_pin_memory')}, {want} expected"
                     for run, want in want_pinned if run.figures.get("cnn_loader_pin_memory") != want]
        notes = {run.label: run.out.count("unstall: pin_dataloader: DataLoader at ") for run in runs + [off]}
        problems += [f"{label}: {n} notes that the loader pins" for label, n in notes.items()
                     if n != (1 if label.startswith("default") else 0)]
        failures = failing.out.count("unstall: pin_dataloader: a batch could not be pinned (RuntimeError")
        if failures != 1:
            problems.append(f"pin-fails: {failures} failure warnings, 1 expected")
        if "unstall: pin_dataloader: pinned batches reached pin_dataloader_max=4m" not in capped.out:
            problems.append("cap-4m: no note that the cap was reached")
        shares = []
        for r in range(rounds):
            native, pinned, default = runs[3 * r:3 * r + 3]
            for run in (native, pinned, default):
                self.figures[("pin_default_steps_per_s", run.label)] = run.figures.get("cnn_steps_per_s")
            pin_rate, default_rate = pinned.figures.get("cnn_steps_per_s"), default.figures.get("cnn_steps_per_s")
            if pin_rate and default_rate:
                shares.append(default_rate / pin_rate)
            print(f"  round {r + 1}: steps/s native {native.figures.get('cnn_steps_per_s')}, "
                  f"pin_memory=True {pin_rate}, default launch {default_rate}", flush=True)
        shown = ", ".join(f"{100 * s:.1f}%" for s in shares)
        met = "met" if shares and min(shares) >= 0.95 else "not met"
        self.verdict("pin_default", problems,
                     f"weights equal in {3 * rounds + 3} runs (scarce: cap 4m, a failure every 7th pin); "
                     f"default launch / pin_memory=True per round: {shown} (target >= 95% each: {met})")

    def case_ddp(self):
        count = self.gpu_count()
        if count < 2:
            self.skip("ddp", f"{count} GPU: the two-process torchrun job needs two")
            return
        torchrun = [self.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                    CASES_PY, "ddp"]
        native = self.run("ddp", "native", cmd=torchrun)
        shimmed = self.run("ddp", "unstall", shim=True, cmd=torchrun)
        extra = []
        for r in (native, shimmed):
            w0, w1 = r.digests.get("ddp_weights_rank0"), r.digests.get("ddp_weights_rank1")
            if w0 is None or w0 != w1:
                extra.append(f"{r.label}: the ranks' weights differ or are missing ({w0}, {w1})")
        ranks = [p for p in shimmed.reports if re.search(r"unstall-\d+-\d+\.json$", p)]
        if len(ranks) != 2:
            extra.append(f"{len(ranks)} rank reports, 2 expected: {[os.path.basename(p) for p in shimmed.reports]}")
        else:
            merged = subprocess.run([sys.executable, REPORT_TOOL, *ranks], capture_output=True, text=True)
            merged_json = subprocess.run([sys.executable, REPORT_TOOL, "--json", *ranks], capture_output=True,
                                         text=True)
            path = os.path.join(self.out, "ddp-merged-report.txt")
            with open(path, "w") as f:
                f.write(merged.stdout + merged.stderr)
            self.merged_report = path
            try:
                procs = json.loads(merged_json.stdout).get("processes", [])
                got = sorted(p.get("rank") for p in procs)
            except ValueError:
                got = None
            if merged.returncode != 0 or got != [0, 1]:
                extra.append(f"tools/unstall-report: exit {merged.returncode}, ranks {got}")
        self.compare("ddp", native, shimmed, extra)

    def case_ddp_fail(self):
        """The two-rank job whose rank 1 raises at step 100: torchrun ends rank 0
        with SIGTERM. Every rank's report is there, and the merged view says how
        each rank ended (rank 1 exited; rank 0 by SIGTERM, or exited where NCCL
        failed it first)."""
        count = self.gpu_count()
        if count < 2:
            self.skip("ddp_fail", f"{count} GPU: the two-process torchrun job needs two")
            return
        torchrun = [self.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                    CASES_PY, "ddp", "--fail-at", "100"]
        r = self.run("ddp_fail", "unstall", shim=True, cmd=torchrun)
        problems = []
        if r.rc == 0:
            problems.append("the job succeeded, though rank 1 raised")
        ranks = sorted(p for p in r.reports if re.search(r"unstall-\d+-\d+\.json$", p))
        merged = subprocess.run([sys.executable, REPORT_TOOL, "--json", *ranks], capture_output=True, text=True)
        try:
            procs = json.loads(merged.stdout).get("processes", []) if ranks else []
        except ValueError:
            procs = []
        ended = {p.get("rank"): p.get("ended") for p in procs}
        path = os.path.join(self.out, "ddp-fail-merged-report.txt")
        with open(path, "w") as f:
            f.write(subprocess.run([sys.executable, REPORT_TOOL, *ranks], capture_output=True, text=True).stdout
                    if ranks else "no rank report\n")
        if sorted(ended) != [0, 1]:
            problems.append(f"rank reports {[os.path.basename(p) for p in r.reports]}, 2 expected")
        elif ended.get(1) != "exited" or ended.get(0) not in ("SIGTERM", "exited"):
            problems.append(f"how the ranks ended: {ended}")
        self.verdict("ddp_fail", problems, f"ranks ended: {ended}; merged: {path}")

    def case_strict(self):
        r = self.run("strict", "strict", shim=True, strict=True)
        problems = [f"exit {r.rc}"] if r.rc != 0 else []
        problems += r.failed_checks()
        if not r.checks:
            problems.append("no check ran")
        said = [l[2:] for l in r.out.splitlines() if l.startswith("# strict mode said:")]
        self.verdict("strict", problems, said[0][:160] if said else "")

    def case_pytest(self):
        """tools/pytest_unstall.py through pytest over torch, where pytest is here."""
        if subprocess.run([self.python, "-c", "import pytest"], capture_output=True).returncode != 0:
            self.skip("pytest", "pytest is not installed for this python (the strict case checks the same export)")
            return
        test_file = os.path.join(self.out, "test_torch_strict.py")
        with open(test_file, "w") as f:
            f.write("import torch\n\n\n"
                    "def test_pinned_copy_passes():\n"
                    "    x = torch.ones(1 << 20, device='cuda')\n"
                    "    p = torch.empty(1 << 20, pin_memory=True)\n"
                    "    p.copy_(x, non_blocking=True)\n"
                    "    torch.cuda.synchronize()\n"
                    "    assert p.sum().item() == 1 << 20\n\n\n"
                    "def test_pageable_cpu_fails():\n"
                    "    x = torch.ones(1 << 20, device='cuda')\n"
                    "    try:\n"
                    "        x.cpu()  # the error swallowed: the plugin fails the test\n"
                    "    except Exception:\n"
                    "        pass\n")
        with open(test_file) as f:
            line = next(i for i, text in enumerate(f, 1) if "x.cpu()" in text)
        env_path = os.path.join(ROOT, "tools")
        cmd = ["env", f"PYTHONPATH={env_path}", self.python, "-m", "pytest", "-p", "pytest_unstall",
               "-p", "no:cacheprovider", test_file]
        r = self.run("pytest", "strict", shim=True, strict=True, cmd=cmd)
        problems = []
        if r.rc != 1:
            problems.append(f"pytest exit {r.rc}, 1 expected")
        if "1 failed, 1 passed" not in r.out:
            problems.append("not '1 failed, 1 passed'")
        if sys.version_info[:2] in ((3, 11), (3, 12)) and f"test_torch_strict.py:{line}" not in r.out:
            problems.append(f"the failing line test_torch_strict.py:{line} is not named")
        self.verdict("pytest", problems, "the pageable .cpu() test failed at its line, the pinned one passed")

    def gpu_count(self):
        p = subprocess.run([self.python, "-c", "import torch; print(torch.cuda.device_count())"],
                           capture_output=True, text=True)
        try:
            return int(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return 0

    # --- the summary ------------------------------------------------------------------

    def fig(self, name, label, fmt="{:.1f}"):
        v = self.figures.get((name, label))
        return fmt.format(v) if v is not None else "-"

    def summary(self, header):
        print()
        print(f"torch-test: {header}")
        print(f"{'case':<13} {'result':<6} detail")
        for case, verdict, detail in self.rows:
            print(f"{case:<13} {verdict:<6} {detail}")
        print()
        print(f"{'figure':<46} {'native':>10} {'unstall':>10} {'pin_memory':>11} {'unstall+pin':>12}")
        rows = [
            ("D2H vs launch: worst launch, ms", "d2h_vs_launch_worst_launch_ms", "{:.3f}"),
            ("D2H vs launch: launch p99, ms", "d2h_vs_launch_p99_launch_ms", "{:.3f}"),
            ("D2H vs launch: D2H into fresh tensors, GB/s", "d2h_vs_launch_d2h_gbps", "{:.2f}"),
            ("DataLoader CNN, steps/s", "cnn_steps_per_s", "{:.1f}"),
            ("DDP rank 0, steps/s", "ddp_steps_per_s_rank0", "{:.1f}"),
            ("DDP rank 1, steps/s", "ddp_steps_per_s_rank1", "{:.1f}"),
            ("training loop (train), steps/s", "train_steps_per_s", "{:.1f}"),
        ]
        for title, name, fmt in rows:
            print(f"{title:<46} {self.fig(name, 'native', fmt):>10} {self.fig(name, 'unstall', fmt):>10} "
                  f"{self.fig(name, 'pinned', fmt):>11} {self.fig(name, 'unstall+pin', fmt):>12}")
        print("(unstall+pin: under unstall with --pin-dataloader, the program unchanged: pin_memory=False)")
        again = self.figures.get(("train_steps_per_s", "native2"))
        if again is not None:
            print(f"training loop (train), a second native process: {again:.1f} steps/s (each figure above is one "
                  f"process: read unstall's against the spread between the two native ones)")
        un, pin = self.figures.get(("cnn_steps_per_s", "unstall")), self.figures.get(("cnn_steps_per_s", "pinned"))
        pin_dl = self.figures.get(("cnn_steps_per_s", "unstall+pin"))
        if un and pin:
            print(f"DataLoader CNN under unstall: {100.0 * un / pin:.1f}% of pin_memory=True")
        if pin_dl and pin:
            share = 100.0 * pin_dl / pin
            print(f"DataLoader CNN under unstall + pin_dataloader: {share:.1f}% of pin_memory=True "
                  f"(target: >= 95%: {'met' if share >= 95.0 else 'not met'})")
        merged = getattr(self, "merged_report", None)
        if merged:
            print(f"merged report of the torchrun job (tools/unstall-report): {merged}")
            with open(merged) as f:
                for line in f.read().splitlines()[:12]:
                    print("  " + line)
        print(f"outputs: {self.out}")
        print(f"torch-test: {self.passed} passed, {self.failed} failed, {self.skipped} skipped")


def probe(python):
    """None when torch and a GPU are here, else why not."""
    # TORCH_TEST_DEVICE=cpu (cases.py): development without a GPU only
    code = ("import os, sys, torch\n"
            "print(torch.__version__, torch.cuda.device_count(),"
            " torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-', sep='|')\n"
            "sys.exit(0 if torch.cuda.is_available() or os.environ.get('TORCH_TEST_DEVICE') == 'cpu' else 3)\n")
    try:
        p = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{python} did not run: {e}", None
    if p.returncode == 3:
        return "torch sees no GPU (torch.cuda.is_available() is False)", None
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        return f"torch is not importable by {python}: {last}", None
    return None, p.stdout.strip().split("|")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.environ.get("BUILD", os.path.join(ROOT, "build")))
    ap.add_argument("--out", default=os.environ.get("TORCH_TEST_OUT"), help="outputs (default BUILD/torch-test)")
    ap.add_argument("--python", default=os.environ.get("PYTHON", sys.executable))
    ap.add_argument("--only", default="", help="comma-separated cases: " + ",".join(ALL))
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    args.out = os.path.abspath(args.out or os.path.join(args.build, "torch-test"))
    why, info = probe(args.python)
    if why:
        print(f"torch-test: SKIP: {why}; the PyTorch checks need torch and a GPU (make check covers the rest)")
        return 0
    lib = os.path.join(args.build, "libunstall.so")
    if not os.path.isfile(lib):
        print(f"torch-test: {lib} not found: build it (make shim) or carry the build folder (BUILD=...)")
        return 2
    only = [c for c in args.only.split(",") if c] or ALL
    unknown = [c for c in only if c not in ALL]
    if unknown:
        print(f"torch-test: unknown case(s) {unknown}; cases: {ALL}")
        return 2
    os.makedirs(args.out, exist_ok=True)
    header = (f"torch {info[0]}, {info[1]} GPU(s): {info[2]}; python {sys.version.split()[0]}; "
              f"shim {lib} ({time.strftime('%Y-%m-%d %H:%M', time.localtime(os.path.getmtime(lib)))})")
    print(f"torch-test: {header}")
    t = Tester(args)
    for case in only:
        method = getattr(t, f"case_{case}", None)
        if method is not None:
            method()
        elif case == "d2h_vs_launch":
            t.plain(case, ["--seconds", "3"])
        else:
            t.plain(case)
    t.summary(header)
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
