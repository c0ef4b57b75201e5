"""The options pin_dataloader and pin_dataloader_max (tools/python/sitecustomize.py,
tools/python/unstall_pin_dataloader.py, the launcher's --no-pin-dataloader)
without torch or a GPU: each test runs a small program in a fresh python3 over
the stand-in torch package in stub/ (torch.cuda.device_count() from STUB_CUDA;
is_available() counted; a DataLoader in torch's shape, with workers started by
fork, spawn or forkserver, persistent workers, iterable datasets, and a Tensor
of bytes whose pin_memory() fails where STUB_PIN_FAIL or STUB_PIN_LIMIT say:
stub/torch/_faults.py). iterate.py is the program that iterates a loader.

Run by tests/run-all.sh (make check) with BUILD set to the build folder (the
launcher's tests preload BUILD/libunstall.so, as tools/unstall always does).
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYDIR = os.path.join(ROOT, "tools", "python")
LAUNCHER = os.path.join(ROOT, "tools", "unstall")
BUILD = os.path.abspath(os.environ.get("BUILD", os.path.join(ROOT, "build")))
SHIM = os.path.join(BUILD, "libunstall.so")
STUB_DIR = os.path.join(HERE, "stub")
ITERATE = os.path.join(HERE, "iterate.py")
NOTE = "unstall: pin_dataloader: DataLoader at "
NOTE_TAIL = " pins its batches (pin_memory=True; up to pin_dataloader_max=2g pinned at once; --no-pin-dataloader turns it off)"
FAILURE = "unstall: pin_dataloader: a batch could not be pinned ("
CAP_NOTE = "unstall: pin_dataloader: pinned batches reached pin_dataloader_max="
SEED = int(os.environ.get("PIN_DATALOADER_SEED", random.randrange(1 << 30)))

# a torch whose DataLoader takes no pin_memory: the patch must give up quietly
BAD_DATALOADER = (
    "class DataLoader:\n"
    "    def __init__(self, dataset, batch_size=1):\n"
    "        self.dataset = dataset\n"
)

# a sitecustomize that the environment had before ours: it must still run
OTHER_SITECUSTOMIZE = (
    "import builtins\n"
    "builtins._other_sitecustomize_runs = getattr(builtins, '_other_sitecustomize_runs', 0) + 1\n"
)

# The program under test. Its last line: PROBE {json}. The '# LINE:' markers
# name the lines that the note may name.
PROBE = '''\
import builtins, json, os, sys
MARK = "_unstall_pin_dataloader"
result = {
    "torch_at_start": "torch" in sys.modules,
    "finder_at_start": sum(1 for f in sys.meta_path if getattr(f, MARK, False)),
    "other_runs": getattr(builtins, "_other_sitecustomize_runs", 0),
    "pythonpath": os.environ.get("PYTHONPATH", ""),
}
import torch
from torch.utils.data import DataLoader


class Sub(DataLoader):
    def __init__(self, ds):
        super().__init__(ds, 4, pin_memory=False)


loaders = {}
loaders["subclass"] = Sub([1])  # LINE:subclass
loaders["keyword_false"] = DataLoader([1], batch_size=2, pin_memory=False)  # LINE:keyword
loaders["positional_false"] = DataLoader([1], 2, None, None, None, 0, None, False)
loaders["default"] = DataLoader([1])
loaders["true"] = DataLoader([1], pin_memory=True, pin_memory_device="cuda:1")
loaders["device_only"] = DataLoader([1], pin_memory_device="cuda")
result["is_available_calls"] = torch.cuda.is_available_calls[0]
result["pin_memory"] = {k: v.pin_memory for k, v in loaders.items()}
result["pin_memory_device"] = loaders["true"].pin_memory_device
result["batch_size"] = {k: getattr(v, "batch_size", None) for k, v in loaders.items()}
result["finder_after"] = sum(1 for f in sys.meta_path if getattr(f, MARK, False))
init = DataLoader.__init__
result["wrapped"] = bool(getattr(init, MARK, False))
result["wrapped_twice"] = bool(getattr(getattr(init, "__wrapped__", None), MARK, False))
print("PROBE " + json.dumps(result))
'''

UNPINNED = {"subclass": False, "keyword_false": False, "positional_false": False, "default": False, "true": True,
            "device_only": False}
PINNED = {"subclass": True, "keyword_false": True, "positional_false": True, "default": True, "true": True,
          "device_only": False}  # a loader naming its pin_memory_device is left as the program made it


def marker_line(name):
    for number, text in enumerate(PROBE.splitlines(), 1):
        if "# LINE:%s" % name in text:
            return number
    raise AssertionError("no LINE:%s marker" % name)


class PinDataLoader(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pin-dataloader-")
        cls.stub = STUB_DIR
        cls.badstub = os.path.join(cls.tmp, "badstub")
        shutil.copytree(STUB_DIR, cls.badstub, ignore=shutil.ignore_patterns("__pycache__"))
        with open(os.path.join(cls.badstub, "torch", "utils", "data", "dataloader.py"), "a") as f:
            f.write("\n\n" + BAD_DATALOADER)
        cls.other = os.path.join(cls.tmp, "other")
        os.makedirs(cls.other)
        with open(os.path.join(cls.other, "sitecustomize.py"), "w") as f:
            f.write(OTHER_SITECUSTOMIZE)
        cls.probe = os.path.join(cls.tmp, "probe.py")
        with open(cls.probe, "w") as f:
            f.write(PROBE)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def config(self, text):
        path = os.path.join(self.tmp, "unstall-%s.conf" % self.id().rsplit(".", 1)[-1])
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_python(self, args, path=None, env=None, launcher=None):
        """python3 ARGS with PYTHONPATH = path (default: ours, then the stub),
        the environment cleared of unstall's variables; (exit code, stdout,
        stderr). launcher: tools/unstall's options, the program run under it."""
        full = {k: v for k, v in os.environ.items()
                if not k.startswith("UNSTALL_") and k not in ("PYTHONPATH", "LD_PRELOAD", "PYTHONSTARTUP")}
        full["PYTHONDONTWRITEBYTECODE"] = "1"
        full["PYTHONNOUSERSITE"] = "1"
        entries = [PYDIR, self.stub] if path is None else path
        if entries:
            full["PYTHONPATH"] = os.pathsep.join(entries)
        full.update(env or {})
        cmd = [sys.executable, *args]
        if launcher is not None:
            cmd = [LAUNCHER, "--lib", SHIM, *launcher, "--", *cmd]
        p = subprocess.run(cmd, capture_output=True, text=True, env=full, cwd=self.tmp, timeout=120)
        return p.returncode, p.stdout, p.stderr

    def probe_run(self, path=None, env=None, launcher=None):
        """The probe program's result, its stderr; fails the test if it did not run."""
        rc, out, err = self.run_python([self.probe], path, env, launcher)
        lines = [l for l in out.splitlines() if l.startswith("PROBE ")]
        self.assertEqual(rc, 0, "probe exit %d\nstdout: %s\nstderr: %s" % (rc, out, err))
        self.assertEqual(len(lines), 1, out + err)
        return json.loads(lines[0][6:]), err

    def unstall_lines(self, err):
        return [l for l in err.splitlines() if l.startswith("unstall")]

    def notes(self, err):
        return [l for l in err.splitlines() if l.startswith(NOTE)]

    # --- on by default, off where asked --------------------------------------------------

    def test_on_by_default(self):
        r, err = self.probe_run()
        self.assertEqual(r["pin_memory"], PINNED)
        self.assertEqual(r["finder_at_start"], 1)
        self.assertTrue(r["wrapped"])
        self.assertEqual(len(self.notes(err)), 1, err)

    def test_off_spellings(self):
        for value in ("0", "off", "No", "FALSE"):
            r, err = self.probe_run(env={"UNSTALL_PIN_DATALOADER": value})
            self.assertEqual(r["pin_memory"], UNPINNED, value)
            self.assertEqual(r["finder_at_start"], 0, value)
            self.assertFalse(r["wrapped"], value)
            self.assertEqual(self.unstall_lines(err), [], value)

    def test_disable_turns_it_off(self):
        r, err = self.probe_run(env={"UNSTALL_PIN_DATALOADER": "1", "UNSTALL_DISABLE": "1"})
        self.assertEqual(r["pin_memory"], UNPINNED)
        self.assertEqual(r["finder_at_start"], 0)

    def test_on_pins_every_loader(self):
        for value in ("1", "true", "Yes", "ON"):
            r, err = self.probe_run(env={"UNSTALL_PIN_DATALOADER": value})
            self.assertEqual(r["pin_memory"], PINNED, value)
        # the other arguments as given, pin_memory_device untouched
        self.assertEqual(r["batch_size"], {"subclass": 4, "keyword_false": 2, "positional_false": 2,
                                           "default": 1, "true": 1, "device_only": 1})
        self.assertEqual(r["pin_memory_device"], "cuda:1")
        # CUDA asked through device_count(), never is_available() (which initialises the driver)
        self.assertEqual(r["is_available_calls"], 0)
        # the finder waits for torch, then leaves; __init__ wrapped once
        self.assertEqual(r["finder_at_start"], 1)
        self.assertEqual(r["finder_after"], 0)
        self.assertTrue(r["wrapped"])
        self.assertFalse(r["wrapped_twice"])

    def test_a_program_without_torch_is_left_alone(self):
        r, _ = self.probe_run()
        self.assertFalse(r["torch_at_start"])
        # nothing imported at start beyond what the option off imports: not torch, not the patch
        code = "import json, sys; print(json.dumps(sorted(sys.modules)))"
        modules = {}
        for value in ("0", None):
            env = {"UNSTALL_PIN_DATALOADER": value} if value else {}
            rc, out, err = self.run_python(["-c", code], env=env)
            self.assertEqual((rc, err), (0, ""))
            modules[value] = set(json.loads(out))
        self.assertNotIn("torch", modules[None])
        self.assertNotIn("unstall_pin_dataloader", modules[None])
        self.assertEqual(modules[None] - modules["0"], set())
        # a program that imports other things (json, threading, multiprocessing) runs as natively
        code = ("import json, threading, multiprocessing, sys\n"
                "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('torch', 'unstall')))))\n")
        rc, out, err = self.run_python(["-c", code])
        self.assertEqual((rc, out.strip(), err), (0, "[]", ""))

    def test_no_cuda_changes_nothing(self):
        r, err = self.probe_run(env={"STUB_CUDA": "0"})
        self.assertEqual(r["pin_memory"], UNPINNED)
        self.assertEqual(self.unstall_lines(err), [])

    def test_note_once_naming_the_programs_line(self):
        r, err = self.probe_run()
        notes = self.notes(err)
        self.assertEqual(len(notes), 1, err)
        # the first loader is a subclass's: the line that made it, not its super().__init__
        self.assertEqual(notes[0], "%sprobe.py:%d%s" % (NOTE, marker_line("subclass"), NOTE_TAIL))
        self.assertEqual(self.unstall_lines(err), notes)

    def test_no_note_when_nothing_was_pinned(self):
        code = ("from torch.utils.data import DataLoader\n"
                "d = DataLoader([1], pin_memory=True)\n"
                "print(d.pin_memory)\n")
        rc, out, err = self.run_python(["-c", code])
        self.assertEqual((rc, out.strip()), (0, "True"), err)
        self.assertEqual(self.unstall_lines(err), [])

    def test_note_names_the_line_of_a_plain_loader(self):
        code = ("import torch.utils.data as tud\n"
                "\n"
                "d = tud.DataLoader([1])\n")
        rc, out, err = self.run_python(["-c", code])
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.unstall_lines(err), [NOTE + "<string>:3" + NOTE_TAIL])

    def test_messages_go_to_the_log_file(self):
        log = os.path.join(self.tmp, "log-%p-%r.txt")
        r, err = self.probe_run(env={"UNSTALL_LOG": log, "RANK": "3", "STUB_PIN_FAIL": "1"})
        self.assertEqual(self.unstall_lines(err), [])
        files = [f for f in os.listdir(self.tmp) if f.startswith("log-") and f.endswith("-3.txt")]
        self.assertEqual(len(files), 1, os.listdir(self.tmp))
        with open(os.path.join(self.tmp, files[0])) as f:
            self.assertEqual(len(self.notes(f.read())), 1)

    # --- the option's sources ----------------------------------------------------------------

    def test_bad_value_warns_once_and_keeps_on(self):
        r, err = self.probe_run(env={"UNSTALL_PIN_DATALOADER": "maybe"})
        self.assertEqual(r["pin_memory"], PINNED)
        self.assertEqual([l for l in self.unstall_lines(err) if not l.startswith(NOTE)], [
            'unstall: UNSTALL_PIN_DATALOADER="maybe": not a boolean (expected 1/0, true/false, yes/no, on/off); '
            'keeping 1'])

    def test_config_file_turns_it_off(self):
        conf = self.config("# pin_dataloader = 1\nmode = report\n  pin_dataloader =  No  # comment\n")
        r, err = self.probe_run(env={"UNSTALL_CONFIG": conf})
        self.assertEqual(r["pin_memory"], UNPINNED)
        self.assertEqual(self.unstall_lines(err), [])

    def test_commented_line_is_no_setting(self):
        conf = self.config("# pin_dataloader = 0\npin_dataloader_x = 0\n")
        r, err = self.probe_run(env={"UNSTALL_CONFIG": conf})
        self.assertEqual(r["pin_memory"], PINNED)

    def test_environment_wins_over_the_file(self):
        conf = self.config("pin_dataloader = 1\n")
        r, _ = self.probe_run(env={"UNSTALL_CONFIG": conf, "UNSTALL_PIN_DATALOADER": "off"})
        self.assertEqual(r["pin_memory"], UNPINNED)
        conf = self.config("pin_dataloader = 0\n")
        r, _ = self.probe_run(env={"UNSTALL_CONFIG": conf, "UNSTALL_PIN_DATALOADER": "on"})
        self.assertEqual(r["pin_memory"], PINNED)

    def test_bad_values_keep_what_was_there(self):
        # as config.c: a bad environment value keeps the file's; a bad line keeps the line before
        conf = self.config("pin_dataloader = 0\npin_dataloader = 1#x\n")
        r, err = self.probe_run(env={"UNSTALL_CONFIG": conf, "UNSTALL_PIN_DATALOADER": "sure"})
        self.assertEqual(r["pin_memory"], UNPINNED)
        self.assertEqual(self.unstall_lines(err), [
            'unstall: %s:2: pin_dataloader="1#x": not a boolean (expected 1/0, true/false, yes/no, on/off); '
            'keeping 0' % conf,
            'unstall: UNSTALL_PIN_DATALOADER="sure": not a boolean (expected 1/0, true/false, yes/no, on/off); '
            'keeping 0'])

    def test_cap_values(self):
        conf = self.config("pin_dataloader_max = 64k\n")
        cases = [({"UNSTALL_CONFIG": conf}, "64k", []),
                 ({"UNSTALL_CONFIG": conf, "UNSTALL_PIN_DATALOADER_MAX": "3MiB"}, "3MiB", []),
                 ({"UNSTALL_PIN_DATALOADER_MAX": "lots"}, "2g",
                  ['unstall: UNSTALL_PIN_DATALOADER_MAX="lots": not a size in 0..1t (expected e.g. 2g, 512m); '
                   'keeping 2g']),
                 ({"UNSTALL_PIN_DATALOADER_MAX": "2t"}, "2g",
                  ['unstall: UNSTALL_PIN_DATALOADER_MAX="2t": not a size in 0..1t (expected e.g. 2g, 512m); '
                   'keeping 2g'])]
        for env, shown, warnings in cases:
            _, err = self.probe_run(env=env)
            self.assertEqual([l for l in self.unstall_lines(err) if not l.startswith(NOTE)], warnings, env)
            self.assertEqual(self.notes(err), [NOTE + "probe.py:%d" % marker_line("subclass")
                                               + NOTE_TAIL.replace("=2g", "=" + shown)], env)

    # --- the sitecustomize it would hide -------------------------------------------------------

    def test_existing_sitecustomize_still_runs(self):
        for value in ("0", "1"):
            r, err = self.probe_run(path=[PYDIR, self.stub, self.other], env={"UNSTALL_PIN_DATALOADER": value})
            self.assertEqual(r["other_runs"], 1, value + err)
            self.assertEqual(r["pin_memory"], PINNED if value == "1" else UNPINNED)
        # it takes its place in sys.modules, as without us
        code = "import sitecustomize; print(sitecustomize.__file__)"
        rc, out, err = self.run_python(["-c", code], path=[PYDIR, self.other])
        self.assertEqual((rc, out.strip()), (0, os.path.join(self.other, "sitecustomize.py")), err)

    def test_our_folder_twice_runs_everything_once(self):
        path = [PYDIR, self.stub, PYDIR, self.other]
        r, err = self.probe_run(path=path)
        self.assertEqual(r["other_runs"], 1, err)
        self.assertEqual(r["finder_at_start"], 1)
        self.assertTrue(r["wrapped"])
        self.assertFalse(r["wrapped_twice"])
        self.assertEqual(r["pin_memory"], PINNED)
        self.assertEqual(len(self.notes(err)), 1, err)

    def test_another_copy_of_ours_adds_nothing(self):
        # an installed copy and a checkout's both on the path: one finder, one wrap, one note
        copy = os.path.join(self.tmp, "copy")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(PYDIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
        r, err = self.probe_run(path=[PYDIR, self.stub, copy, self.other])
        self.assertEqual(r["other_runs"], 1, err)
        self.assertEqual(r["finder_at_start"], 1)
        self.assertFalse(r["wrapped_twice"])
        self.assertEqual(r["pin_memory"], PINNED)
        self.assertEqual(len(self.notes(err)), 1, err)

    def test_run_again_after_torch_wraps_nothing_twice(self):
        # torch's module already there: patched at once, and only once
        code = ("import runpy, sys\n"
                "import torch\n"
                "from torch.utils.data import DataLoader\n"
                "first = DataLoader.__init__\n"
                "runpy.run_path(sys.argv[1])\n"
                "print(DataLoader.__init__ is first, DataLoader([1]).pin_memory)\n")
        script = os.path.join(PYDIR, "sitecustomize.py")
        for path, want in (([PYDIR, self.stub], "True True"), ([self.stub], "False True")):
            rc, out, err = self.run_python(["-c", code, script], path=path)
            self.assertEqual((rc, out.strip()), (0, want), err)

    # --- failures stay out of the program -------------------------------------------------------

    def test_a_torch_it_cannot_patch_is_left_alone(self):
        code = ("from torch.utils.data import DataLoader\n"
                "d = DataLoader([1], 3)\n"
                "print(d.dataset, hasattr(d, 'pin_memory'))\n")
        rc, out, err = self.run_python(["-c", code], path=[PYDIR, self.badstub])
        self.assertEqual((rc, out.strip()), (0, "[1] False"), err)
        lines = self.unstall_lines(err)
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("unstall: pin_dataloader: cannot wrap torch's DataLoader"), lines[0])

    def test_a_torch_without_the_pin_thread_hook_is_left_alone(self):
        # each piece the patch needs, missing in turn: nothing is pinned, one line says why
        for piece, code in (("_get_iterator", "del DataLoader._get_iterator"),
                            ("_pin_memory_loop", "del _utils.pin_memory._pin_memory_loop"),
                            ("_next_data", "del _SingleProcessDataLoaderIter._next_data")):
            stub = os.path.join(self.tmp, "stub-without" + piece)
            shutil.rmtree(stub, ignore_errors=True)
            shutil.copytree(STUB_DIR, stub, ignore=shutil.ignore_patterns("__pycache__"))
            with open(os.path.join(stub, "torch", "utils", "data", "dataloader.py"), "a") as f:
                f.write("\n" + code + "\n")
            program = "from torch.utils.data import DataLoader\nprint(DataLoader([1]).pin_memory)\n"
            rc, out, err = self.run_python(["-c", program], path=[PYDIR, stub])
            self.assertEqual((rc, out.strip()), (0, "False"), piece + err)
            lines = self.unstall_lines(err)
            self.assertEqual(len(lines), 1, err)
            self.assertIn(piece, lines[0])

    def test_program_errors_stay_the_programs(self):
        code = "from torch.utils.data import DataLoader\nDataLoader()\n"
        rc, _, err = self.run_python(["-c", code])
        self.assertEqual(rc, 1)
        self.assertRegex(err, r"TypeError: (DataLoader\.)?__init__\(\) missing 1 required positional argument: 'dataset'")
        self.assertEqual(self.unstall_lines(err), [])

    # --- iterating: every mode as natively, pinned ---------------------------------------------

    def iterate(self, spec, env=None, path=None, launcher=None, ok=True):
        """iterate.py's RESULT and its stderr (ok: it must exit 0)."""
        rc, out, err = self.run_python([ITERATE, json.dumps(spec)], path=path, env=env, launcher=launcher)
        lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
        if not ok:
            return rc, err
        self.assertEqual(rc, 0, "%s %s: exit %d\n%s" % (spec, env, rc, err))
        self.assertEqual(len(lines), 1, out + err)
        return json.loads(lines[0][7:]), err

    @staticmethod
    def data_of(result):
        """The batches' bytes, epoch by epoch: what the program computes with."""
        return [[batch[0] for batch in epoch] for epoch in result["epochs"]]

    @staticmethod
    def pinned_of(result):
        """Per batch: True all pinned, False none, None some (never wanted)."""
        flags = [batch[1] for epoch in result["epochs"] for batch in epoch]
        return [all(f) if all(f) or not any(f) else None for f in flags]

    MODES = [
        {"workers": 0},
        {"workers": 0, "iterable": True, "shape": "dict"},
        {"workers": 2, "context": "fork"},
        {"workers": 2, "context": "spawn", "iterable": True},
        {"workers": 3, "context": "forkserver", "shape": "dict"},
        {"workers": 2, "context": "fork", "persistent": True, "epochs": 2, "iterable": True},
        {"workers": 2, "context": "spawn", "persistent": True, "epochs": 2},
    ]

    def test_every_mode_pins_as_pin_memory_does(self):
        for spec in self.MODES:
            native, err0 = self.iterate(spec, env={"UNSTALL_PIN_DATALOADER": "0"})
            ours, err = self.iterate(spec)
            pinned_natively, _ = self.iterate(dict(spec, pin_memory=True), env={"UNSTALL_PIN_DATALOADER": "0"})
            self.assertEqual(self.data_of(ours), self.data_of(native), spec)
            self.assertEqual(self.data_of(pinned_natively), self.data_of(native), spec)
            n = sum(len(e) for e in native["epochs"])
            self.assertGreater(n, 4, spec)
            self.assertEqual(self.pinned_of(native), [False] * n, spec)
            self.assertEqual(self.pinned_of(ours), [True] * n, spec)
            self.assertEqual(self.pinned_of(pinned_natively), [True] * n, spec)
            self.assertEqual((native["loader_pin_memory"], ours["loader_pin_memory"]), (False, True), spec)
            self.assertEqual(ours["is_available_at_init"], 0, spec)
            self.assertEqual(self.unstall_lines(err0), [], spec)
            self.assertEqual(len(self.notes(err)), 1, (spec, err))
            self.assertEqual(self.unstall_lines(err), self.notes(err), (spec, err))
            self.assertEqual(ours["option_pinned_at_end"], 0, spec)  # every pinned batch counted back

    def test_failures_at_random_batches(self):
        rng = random.Random(SEED)
        kinds = ["RuntimeError", "MemoryError", "OSError", "ValueError"]
        for spec in self.MODES:
            native, _ = self.iterate(spec, env={"UNSTALL_PIN_DATALOADER": "0"})
            n = sum(len(e) for e in native["epochs"])
            calls = sorted(rng.sample(range(1, 2 * n), rng.randint(1, 4)))
            kind = rng.choice(kinds)
            env = {"STUB_PIN_FAIL": ",".join(map(str, calls)), "STUB_PIN_FAIL_KIND": kind}
            why = "seed %d: %s, pin calls %s fail with %s" % (SEED, spec, calls, kind)
            ours, err = self.iterate(spec, env=env)
            # every batch arrives, in order, the same bytes
            self.assertEqual(self.data_of(ours), self.data_of(native), why)
            pinned = self.pinned_of(ours)
            self.assertNotIn(None, pinned, why)  # a batch is pinned whole or delivered as the worker made it
            self.assertTrue(1 <= pinned.count(False) <= len(calls), (why, pinned))
            failures = [l for l in self.unstall_lines(err) if l.startswith(FAILURE)]
            self.assertEqual(len(failures), 1, (why, err))
            self.assertIn("(%s: CUDA error: injected pinning failure at call %d)" % (kind, calls[0]), failures[0])
            self.assertIn("--no-pin-dataloader", failures[0])
            self.assertEqual(len(self.unstall_lines(err)), 2, (why, err))  # the note and the failure
            self.assertEqual(ours["option_pinned_at_end"], 0, why)

    def test_page_locked_memory_exhausted(self):
        # the stub's page-locked memory smaller than what the loader holds ready: pins fail, the job goes on
        for spec in ({"workers": 0, "hold": True}, {"workers": 3, "context": "fork", "hold": True}):
            native, _ = self.iterate(spec, env={"UNSTALL_PIN_DATALOADER": "0"})
            ours, err = self.iterate(spec, env={"STUB_PIN_LIMIT": "200"})
            self.assertEqual(self.data_of(ours), self.data_of(native), spec)
            pinned = self.pinned_of(ours)
            self.assertIn(True, pinned, spec)
            self.assertIn(False, pinned, spec)
            self.assertNotIn(None, pinned, spec)
            self.assertLessEqual(ours["peak_pinned"], 200)
            self.assertEqual(len([l for l in self.unstall_lines(err) if l.startswith(FAILURE)]), 1, err)

    def test_a_loader_the_program_pins_fails_as_natively(self):
        # not ours: a failure is torch's own error, the cap does not apply
        spec = {"workers": 2, "context": "fork", "pin_memory": True}
        for env in ({"UNSTALL_PIN_DATALOADER": "0"}, {}):
            rc, err = self.iterate(spec, env=dict(env, STUB_PIN_FAIL="3"), ok=False)
            self.assertNotEqual(rc, 0, env)
            self.assertIn("Caught in pin memory thread for device 0 RuntimeError: CUDA error: injected", err)
            self.assertEqual(self.unstall_lines(err), [], env)
        for spec in ({"workers": 0, "pin_memory": True, "hold": True},
                     {"workers": 2, "context": "fork", "pin_memory": True, "hold": True}):
            r, err = self.iterate(spec, env={"UNSTALL_PIN_DATALOADER_MAX": "1"})
            self.assertEqual(set(self.pinned_of(r)), {True}, spec)
            self.assertEqual(self.unstall_lines(err), [], spec)

    # --- the cap ---------------------------------------------------------------------------------

    def test_cap_bounds_the_pinned_batches_alive(self):
        # batches of 3 items: 16-20 bytes each and 3 label bytes, 51-63 bytes a batch
        spec = {"workers": 0, "hold": True}
        native, _ = self.iterate(spec, env={"UNSTALL_PIN_DATALOADER": "0"})
        sizes = [sum(len(t) // 2 for t in batch) for batch in self.data_of(native)[0]]
        ours, err = self.iterate(spec, env={"UNSTALL_PIN_DATALOADER_MAX": "200b"})
        self.assertEqual(self.data_of(ours), self.data_of(native))
        # held by the program: the first batches up to 200 bytes pinned, then none
        want, total = [], 0
        for size in sizes:
            want.append(total + size <= 200)
            total += size if want[-1] else 0
        self.assertEqual(self.pinned_of(ours), want)
        self.assertLessEqual(ours["peak_pinned"], 200)
        caps = [l for l in self.unstall_lines(err) if l.startswith(CAP_NOTE)]
        self.assertEqual(caps, [CAP_NOTE + "200b in this process: batches stay unpinned until earlier ones are "
                                "freed (UNSTALL_PIN_DATALOADER_MAX sets it)"], err)
        self.assertEqual(ours["option_pinned_at_end"], 0)
        # dropped as the program goes: every batch pinned, still within the cap
        ours, err = self.iterate({"workers": 0}, env={"UNSTALL_PIN_DATALOADER_MAX": "200b"})
        self.assertEqual(set(self.pinned_of(ours)), {True})
        self.assertEqual([l for l in self.unstall_lines(err) if l.startswith(CAP_NOTE)], [])

    def test_cap_with_workers_prefetching(self):
        for spec in ({"workers": 4, "context": "fork", "items": 60},
                     {"workers": 2, "context": "spawn", "items": 60, "hold": True}):
            native, _ = self.iterate(spec, env={"UNSTALL_PIN_DATALOADER": "0"})
            ours, err = self.iterate(spec, env={"UNSTALL_PIN_DATALOADER_MAX": "150"})
            self.assertEqual(self.data_of(ours), self.data_of(native), spec)
            self.assertLessEqual(ours["peak_pinned"], 150, spec)
            self.assertIn(True, self.pinned_of(ours), spec)
            self.assertNotIn(None, self.pinned_of(ours), spec)
            if spec.get("hold"):
                self.assertIn(False, self.pinned_of(ours), spec)
            self.assertEqual([l for l in self.unstall_lines(err) if l.startswith(FAILURE)], [], spec)

    def test_cap_zero_pins_nothing(self):
        ours, err = self.iterate({"workers": 2, "context": "fork"}, env={"UNSTALL_PIN_DATALOADER_MAX": "0"})
        self.assertEqual(set(self.pinned_of(ours)), {False})
        self.assertEqual(ours["pin_calls"], 0)

    # --- the launcher --------------------------------------------------------------------------

    def require_shim(self):
        if not os.path.exists(SHIM):
            raise AssertionError(f"{SHIM} missing: run make first")

    def test_launcher_pins_by_default(self):
        self.require_shim()
        for flags in ([], ["--pin-dataloader"]):
            r, err = self.probe_run(path=[self.stub], launcher=flags)
            self.assertEqual(r["pin_memory"], PINNED, err)
            self.assertEqual(r["pythonpath"], os.pathsep.join([PYDIR, self.stub]))
            self.assertEqual(len(self.notes(err)), 1, err)
        r, err = self.iterate({"workers": 2, "context": "spawn"}, path=[self.stub], launcher=[])
        self.assertEqual(set(self.pinned_of(r)), {True})

    def test_launcher_off_leaves_pythonpath_alone(self):
        self.require_shim()
        for flags, env in ((["--no-pin-dataloader"], {}), ([], {"UNSTALL_PIN_DATALOADER": "0"}),
                           (["--disable"], {}), (["--no-pin-dataloader"], {"UNSTALL_PIN_DATALOADER": "1"})):
            r, err = self.probe_run(path=[self.stub], launcher=flags, env=env)
            self.assertEqual(r["pin_memory"], UNPINNED, (flags, env))
            self.assertEqual(r["pythonpath"], self.stub, (flags, env))
            self.assertEqual(self.notes(err), [], (flags, env))
        r, err = self.iterate({"workers": 2, "context": "fork"}, path=[self.stub], launcher=["--no-pin-dataloader"])
        self.assertEqual(set(self.pinned_of(r)), {False})

    def test_launcher_reads_environment_and_file(self):
        self.require_shim()
        cases = [
            ({"UNSTALL_PIN_DATALOADER": "yes"}, "", True),
            ({}, "pin_dataloader = off   # comment\r\n", False),
            ({}, "pin_dataloader = 0\npin_dataloader = on\n", True),
            ({}, "pin_dataloader = 0\npin_dataloader = 1#x\n", False),
            ({}, "\tpin_dataloader=FALSE", False),
            ({}, "#pin_dataloader = 0\n", True),
            ({"UNSTALL_PIN_DATALOADER": "1"}, "pin_dataloader = 0\n", True),
            ({"UNSTALL_PIN_DATALOADER": "sure"}, "pin_dataloader = 0\n", False),
        ]
        for env, conf, on in cases:
            launcher = ["--config", self.config(conf)] if conf else []
            r, err = self.probe_run(path=[self.stub], env=env, launcher=launcher)
            self.assertEqual(r["pin_memory"], PINNED if on else UNPINNED, (env, conf, err))
            want = os.pathsep.join([PYDIR, self.stub]) if on else self.stub
            self.assertEqual(r["pythonpath"], want, (env, conf))

    def test_launcher_does_not_repeat_the_folder(self):
        self.require_shim()
        r, _ = self.probe_run(path=[PYDIR, self.stub], launcher=[])
        self.assertEqual(r["pythonpath"], os.pathsep.join([PYDIR, self.stub]))

    def test_launcher_runs_a_program_without_python(self):
        self.require_shim()
        rc, out, err = self.run_python(["-c", "import sys; print(sorted(m for m in sys.modules if 'torch' in m))"],
                                       path=[self.stub], launcher=[])
        self.assertEqual((rc, out.strip()), (0, "[]"), err)
        p = subprocess.run([LAUNCHER, "--lib", SHIM, "--", "sh", "-c", "echo ok"], capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stdout), (0, "ok\n"), p.stderr)

    def test_launcher_without_the_folder(self):
        # an install without unstall's python folder: by default said and run; asked for: an error
        self.require_shim()
        tools = os.path.join(self.tmp, "tools-without-python")
        shutil.rmtree(tools, ignore_errors=True)
        os.makedirs(tools)
        shutil.copy(LAUNCHER, tools)
        launcher = os.path.join(tools, "unstall")
        p = subprocess.run([launcher, "--lib", SHIM, "--", "sh", "-c", "echo ok"], capture_output=True, text=True)
        self.assertEqual((p.returncode, p.stdout), (0, "ok\n"), p.stderr)
        self.assertIn("sitecustomize.py is not there; DataLoaders are left as the program made them", p.stderr)
        p = subprocess.run([launcher, "--lib", SHIM, "--pin-dataloader", "--", "true"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2, p.stderr)

    def test_launcher_compare_pins_the_unstall_run_only(self):
        self.require_shim()
        rc, out, err = self.run_python([self.probe], path=[self.stub], launcher=["--compare"])
        probes = [json.loads(l[6:]) for l in out.splitlines() if l.startswith("PROBE ")]
        self.assertEqual(rc, 0, out + err)
        self.assertEqual([p["pin_memory"] for p in probes], [UNPINNED, PINNED], out + err)

    def test_launcher_help_names_the_flags(self):
        p = subprocess.run([LAUNCHER, "--help"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0)
        self.assertTrue(re.search(r"^  --no-pin-dataloader$", p.stdout, re.M), p.stdout)
        self.assertTrue(re.search(r"^  --pin-dataloader ", p.stdout, re.M), p.stdout)


if __name__ == "__main__":
    unittest.main()
