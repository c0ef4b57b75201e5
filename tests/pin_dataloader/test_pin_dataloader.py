"""The option pin_dataloader (tools/python/sitecustomize.py, the launcher's
--pin-dataloader) without torch or a GPU: each test runs a small program in a
fresh python3 over a stub torch package that this file writes into a
temporary folder (torch.cuda.device_count() from STUB_CUDA; is_available() fails the test, a DataLoader that
keeps its pin_memory, re-exported by torch.utils.data as real torch does).

Run by tests/run-all.sh (make check) with BUILD set to the build folder (the
launcher's tests preload BUILD/libunstall.so, as tools/unstall always does).
"""
import json
import os
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
NOTE = "unstall: pin_dataloader: DataLoader at "

STUB = {
    "torch/__init__.py": (
        "import os\n"
        "from torch import cuda\n"
        "import torch.utils.data  # as real torch does\n"
    ),
    "torch/cuda/__init__.py": (
        "import os\n\n\n"
        "def is_available():\n"
        "    raise AssertionError('is_available() initialises the CUDA driver: device_count() must be asked')\n\n\n"
        "def device_count():\n"
        "    return 1 if os.environ.get('STUB_CUDA', '1') == '1' else 0\n"
    ),
    "torch/utils/__init__.py": "",
    "torch/utils/data/__init__.py": "from torch.utils.data.dataloader import DataLoader\n",
    # real torch's signature: pin_memory is the eighth argument
    "torch/utils/data/dataloader.py": (
        "class DataLoader:\n"
        "    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,\n"
        "                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,\n"
        "                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,\n"
        "                 prefetch_factor=None, persistent_workers=False, pin_memory_device=''):\n"
        "        self.dataset = dataset\n"
        "        self.batch_size = batch_size\n"
        "        self.pin_memory = pin_memory\n"
        "        self.pin_memory_device = pin_memory_device\n"
    ),
}

# a torch whose DataLoader takes no pin_memory: the patch must give up quietly
BAD_STUB = dict(STUB)
BAD_STUB["torch/utils/data/dataloader.py"] = (
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
result["pin_memory"] = {k: v.pin_memory for k, v in loaders.items()}
result["pin_memory_device"] = loaders["true"].pin_memory_device
result["batch_size"] = {k: getattr(v, "batch_size", None) for k, v in loaders.items()}
result["finder_after"] = sum(1 for f in sys.meta_path if getattr(f, MARK, False))
init = DataLoader.__init__
result["wrapped"] = bool(getattr(init, MARK, False))
result["wrapped_twice"] = bool(getattr(getattr(init, "__wrapped__", None), MARK, False))
print("PROBE " + json.dumps(result))
'''

UNPINNED = {"subclass": False, "keyword_false": False, "positional_false": False, "default": False, "true": True}
PINNED = {"subclass": True, "keyword_false": True, "positional_false": True, "default": True, "true": True}


def marker_line(name):
    for number, text in enumerate(PROBE.splitlines(), 1):
        if "# LINE:%s" % name in text:
            return number
    raise AssertionError("no LINE:%s marker" % name)


class PinDataLoader(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pin-dataloader-")
        for folder, files in (("stub", STUB), ("badstub", BAD_STUB)):
            for rel, text in files.items():
                path = os.path.join(cls.tmp, folder, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
        cls.stub = os.path.join(cls.tmp, "stub")
        cls.badstub = os.path.join(cls.tmp, "badstub")
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

    # --- off ------------------------------------------------------------------------------

    def test_off_by_default_changes_nothing(self):
        r, err = self.probe_run()
        self.assertEqual(r["pin_memory"], UNPINNED)
        self.assertEqual(r["finder_at_start"], 0)
        self.assertFalse(r["wrapped"])
        self.assertEqual(self.unstall_lines(err), [])

    def test_off_spellings(self):
        for value in ("0", "off", "No", "FALSE"):
            r, err = self.probe_run(env={"UNSTALL_PIN_DATALOADER": value})
            self.assertEqual(r["pin_memory"], UNPINNED, value)
            self.assertEqual(r["finder_at_start"], 0, value)
            self.assertEqual(self.unstall_lines(err), [], value)

    def test_disable_turns_it_off(self):
        r, err = self.probe_run(env={"UNSTALL_PIN_DATALOADER": "1", "UNSTALL_DISABLE": "1"})
        self.assertEqual(r["pin_memory"], UNPINNED)
        self.assertEqual(r["finder_at_start"], 0)

    # --- on -------------------------------------------------------------------------------

    def test_on_pins_every_loader(self):
        for value in ("1", "true", "Yes", "ON"):
            r, err = self.probe_run(env={"UNSTALL_PIN_DATALOADER": value})
            self.assertEqual(r["pin_memory"], PINNED, value)
        # the other arguments as given, pin_memory_device untouched
        self.assertEqual(r["batch_size"], {"subclass": 4, "keyword_false": 2, "positional_false": 2,
                                           "default": 1, "true": 1})
        self.assertEqual(r["pin_memory_device"], "cuda:1")
        # the finder waits for torch, then leaves; __init__ wrapped once
        self.assertEqual(r["finder_at_start"], 1)
        self.assertEqual(r["finder_after"], 0)
        self.assertTrue(r["wrapped"])
        self.assertFalse(r["wrapped_twice"])

    def test_on_does_not_import_torch(self):
        r, _ = self.probe_run(env={"UNSTALL_PIN_DATALOADER": "1"})
        self.assertFalse(r["torch_at_start"])
        # nor anything else: the modules at start are those of the option off
        code = "import json, sys; print(json.dumps(sorted(sys.modules)))"
        modules = {}
        for value in ("0", "1"):
            rc, out, err = self.run_python(["-c", code], env={"UNSTALL_PIN_DATALOADER": value})
            self.assertEqual(rc, 0, err)
            modules[value] = set(json.loads(out))
        self.assertNotIn("torch", modules["1"])
        self.assertNotIn("unstall_pin_dataloader", modules["1"])
        self.assertEqual(modules["1"] - modules["0"], set())

    def test_no_cuda_changes_nothing(self):
        r, err = self.probe_run(env={"UNSTALL_PIN_DATALOADER": "1", "STUB_CUDA": "0"})
        self.assertEqual(r["pin_memory"], UNPINNED)
        self.assertEqual(self.unstall_lines(err), [])

    def test_note_once_naming_the_programs_line(self):
        r, err = self.probe_run(env={"UNSTALL_PIN_DATALOADER": "1"})
        notes = [l for l in err.splitlines() if l.startswith(NOTE)]
        self.assertEqual(len(notes), 1, err)
        # the first loader is a subclass's: the line that made it, not its super().__init__
        self.assertEqual(notes[0], "%sprobe.py:%d pins its batches (pin_memory=True)"
                         % (NOTE, marker_line("subclass")))
        self.assertEqual(self.unstall_lines(err), notes)

    def test_no_note_when_nothing_was_pinned(self):
        code = ("from torch.utils.data import DataLoader\n"
                "d = DataLoader([1], pin_memory=True)\n"
                "print(d.pin_memory)\n")
        rc, out, err = self.run_python(["-c", code], env={"UNSTALL_PIN_DATALOADER": "1"})
        self.assertEqual((rc, out.strip()), (0, "True"), err)
        self.assertEqual(self.unstall_lines(err), [])

    def test_note_names_the_line_of_a_plain_loader(self):
        code = ("import torch.utils.data as tud\n"
                "\n"
                "d = tud.DataLoader([1])\n")
        rc, out, err = self.run_python(["-c", code], env={"UNSTALL_PIN_DATALOADER": "1"})
        self.assertEqual(rc, 0, err)
        self.assertEqual(self.unstall_lines(err), [NOTE + "<string>:3 pins its batches (pin_memory=True)"])

    # --- the option's sources ----------------------------------------------------------------

    def test_bad_value_warns_once_and_keeps_off(self):
        r, err = self.probe_run(env={"UNSTALL_PIN_DATALOADER": "maybe"})
        self.assertEqual(r["pin_memory"], UNPINNED)
        self.assertEqual(r["finder_at_start"], 0)
        self.assertEqual(self.unstall_lines(err), [
            'unstall: UNSTALL_PIN_DATALOADER="maybe": not a boolean (expected 1/0, true/false, yes/no, on/off); '
            'keeping 0'])

    def test_config_file_turns_it_on(self):
        conf = self.config("# pin_dataloader = 0\nmode = report\n  pin_dataloader =  Yes  # comment\n")
        r, err = self.probe_run(env={"UNSTALL_CONFIG": conf})
        self.assertEqual(r["pin_memory"], PINNED)
        self.assertEqual(len([l for l in err.splitlines() if l.startswith(NOTE)]), 1, err)

    def test_commented_line_is_no_setting(self):
        conf = self.config("# pin_dataloader = 1\npin_dataloader_x = 1\n")
        r, err = self.probe_run(env={"UNSTALL_CONFIG": conf})
        self.assertEqual(r["pin_memory"], UNPINNED)
        self.assertEqual(self.unstall_lines(err), [])

    def test_environment_wins_over_the_file(self):
        conf = self.config("pin_dataloader = 1\n")
        r, _ = self.probe_run(env={"UNSTALL_CONFIG": conf, "UNSTALL_PIN_DATALOADER": "off"})
        self.assertEqual(r["pin_memory"], UNPINNED)
        conf = self.config("pin_dataloader = 0\n")
        r, _ = self.probe_run(env={"UNSTALL_CONFIG": conf, "UNSTALL_PIN_DATALOADER": "on"})
        self.assertEqual(r["pin_memory"], PINNED)

    def test_bad_values_keep_what_was_there(self):
        # as config.c: a bad environment value keeps the file's; a bad line keeps the line before
        conf = self.config("pin_dataloader = 1\npin_dataloader = 1#x\n")
        r, err = self.probe_run(env={"UNSTALL_CONFIG": conf, "UNSTALL_PIN_DATALOADER": "sure"})
        self.assertEqual(r["pin_memory"], PINNED)
        warnings = [l for l in self.unstall_lines(err) if not l.startswith(NOTE)]
        self.assertEqual(warnings, [
            'unstall: %s:2: pin_dataloader="1#x": not a boolean (expected 1/0, true/false, yes/no, on/off); '
            'keeping 1' % conf,
            'unstall: UNSTALL_PIN_DATALOADER="sure": not a boolean (expected 1/0, true/false, yes/no, on/off); '
            'keeping 1'])

    # --- the sitecustomize it would hide -------------------------------------------------------

    def test_existing_sitecustomize_still_runs(self):
        for value in ("0", "1"):
            r, err = self.probe_run(path=[PYDIR, self.stub, self.other], env={"UNSTALL_PIN_DATALOADER": value})
            self.assertEqual(r["other_runs"], 1, value + err)
            self.assertEqual(r["pin_memory"], PINNED if value == "1" else UNPINNED)
        # it takes its place in sys.modules, as without us
        code = "import sitecustomize; print(sitecustomize.__file__)"
        rc, out, err = self.run_python(["-c", code], path=[PYDIR, self.other], env={"UNSTALL_PIN_DATALOADER": "1"})
        self.assertEqual((rc, out.strip()), (0, os.path.join(self.other, "sitecustomize.py")), err)

    def test_our_folder_twice_runs_everything_once(self):
        path = [PYDIR, self.stub, PYDIR, self.other]
        r, err = self.probe_run(path=path, env={"UNSTALL_PIN_DATALOADER": "1"})
        self.assertEqual(r["other_runs"], 1, err)
        self.assertEqual(r["finder_at_start"], 1)
        self.assertTrue(r["wrapped"])
        self.assertFalse(r["wrapped_twice"])
        self.assertEqual(r["pin_memory"], PINNED)
        self.assertEqual(len([l for l in err.splitlines() if l.startswith(NOTE)]), 1, err)

    def test_another_copy_of_ours_adds_nothing(self):
        # an installed copy and a checkout's both on the path: one finder, one wrap, one note
        copy = os.path.join(self.tmp, "copy")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(PYDIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
        r, err = self.probe_run(path=[PYDIR, self.stub, copy, self.other], env={"UNSTALL_PIN_DATALOADER": "1"})
        self.assertEqual(r["other_runs"], 1, err)
        self.assertEqual(r["finder_at_start"], 1)
        self.assertFalse(r["wrapped_twice"])
        self.assertEqual(r["pin_memory"], PINNED)
        self.assertEqual(len([l for l in err.splitlines() if l.startswith(NOTE)]), 1, err)

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
            rc, out, err = self.run_python(["-c", code, script], path=path, env={"UNSTALL_PIN_DATALOADER": "1"})
            self.assertEqual((rc, out.strip()), (0, want), err)

    # --- failures stay out of the program -------------------------------------------------------

    def test_a_torch_it_cannot_patch_is_left_alone(self):
        code = ("from torch.utils.data import DataLoader\n"
                "d = DataLoader([1], 3)\n"
                "print(d.dataset, hasattr(d, 'pin_memory'))\n")
        rc, out, err = self.run_python(["-c", code], path=[PYDIR, self.badstub], env={"UNSTALL_PIN_DATALOADER": "1"})
        self.assertEqual((rc, out.strip()), (0, "[1] False"), err)
        lines = self.unstall_lines(err)
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("unstall: pin_dataloader: cannot wrap torch's DataLoader"), lines[0])

    def test_program_errors_stay_the_programs(self):
        code = "from torch.utils.data import DataLoader\nDataLoader()\n"
        rc, _, err = self.run_python(["-c", code], env={"UNSTALL_PIN_DATALOADER": "1"})
        self.assertEqual(rc, 1)
        self.assertRegex(err, r"TypeError: (DataLoader\.)?__init__\(\) missing 1 required positional argument: 'dataset'")
        self.assertEqual(self.unstall_lines(err), [])

    # --- the launcher --------------------------------------------------------------------------

    def require_shim(self):
        if not os.path.exists(SHIM):
            raise AssertionError(f"{SHIM} missing: run make first")

    def test_launcher_flag(self):
        self.require_shim()
        r, err = self.probe_run(path=[self.stub], launcher=["--pin-dataloader"])
        self.assertEqual(r["pin_memory"], PINNED, err)
        self.assertEqual(r["pythonpath"], os.pathsep.join([PYDIR, self.stub]))
        self.assertEqual(len([l for l in err.splitlines() if l.startswith(NOTE)]), 1, err)

    def test_launcher_leaves_pythonpath_alone_when_off(self):
        self.require_shim()
        r, _ = self.probe_run(path=[self.stub], launcher=[])
        self.assertEqual(r["pin_memory"], UNPINNED)
        self.assertEqual(r["pythonpath"], self.stub)

    def test_launcher_reads_environment_and_file(self):
        self.require_shim()
        cases = [
            ({"UNSTALL_PIN_DATALOADER": "yes"}, "", True),
            ({}, "pin_dataloader = on   # comment\r\n", True),
            ({}, "pin_dataloader = 1\npin_dataloader = off\n", False),
            ({}, "pin_dataloader = 1\npin_dataloader = 1#x\n", True),
            ({}, "\tpin_dataloader=TRUE", True),
            ({}, "#pin_dataloader = 1\n", False),
            ({"UNSTALL_PIN_DATALOADER": "0"}, "pin_dataloader = 1\n", False),
            ({"UNSTALL_PIN_DATALOADER": "sure"}, "pin_dataloader = 1\n", True),
        ]
        for env, conf, on in cases:
            launcher = ["--config", self.config(conf)] if conf else []
            r, err = self.probe_run(path=[self.stub], env=env, launcher=launcher)
            self.assertEqual(r["pin_memory"], PINNED if on else UNPINNED, (env, conf, err))
            want = os.pathsep.join([PYDIR, self.stub]) if on else self.stub
            self.assertEqual(r["pythonpath"], want, (env, conf))

    def test_launcher_does_not_repeat_the_folder(self):
        self.require_shim()
        r, _ = self.probe_run(path=[PYDIR, self.stub], launcher=["--pin-dataloader"])
        self.assertEqual(r["pythonpath"], os.pathsep.join([PYDIR, self.stub]))

    def test_launcher_compare_pins_the_unstall_run_only(self):
        self.require_shim()
        rc, out, err = self.run_python([self.probe], path=[self.stub], launcher=["--pin-dataloader", "--compare"])
        probes = [json.loads(l[6:]) for l in out.splitlines() if l.startswith("PROBE ")]
        self.assertEqual(rc, 0, out + err)
        self.assertEqual([p["pin_memory"] for p in probes], [UNPINNED, PINNED], out + err)

    def test_launcher_help_names_the_flag(self):
        p = subprocess.run([LAUNCHER, "--help"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0)
        self.assertTrue(re.search(r"^  --pin-dataloader ", p.stdout, re.M), p.stdout)


if __name__ == "__main__":
    unittest.main()
