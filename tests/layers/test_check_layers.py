"""tools/check-layers: the shim's tree passes, and a tree with an upward
include or a loop fails, naming it; with --objects, the built shim's objects
pass (BUILD, when set) and objects with an upward call, or a loader call
outside base/resolve, fail."""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
TOOL = os.path.join(ROOT, 'tools', 'check-layers')


def run(shim):
    return subprocess.run([sys.executable, TOOL, shim], capture_output=True, text=True)


def tree(files):
    """A shim tree in a temporary folder: {"layer/name": text}."""
    top = tempfile.mkdtemp()
    for name, text in files.items():
        os.makedirs(os.path.join(top, os.path.dirname(name)), exist_ok=True)
        with open(os.path.join(top, name), 'w') as f:
            f.write(text)
    return top


class CheckLayers(unittest.TestCase):
    def test_the_shim_is_layered_and_acyclic(self):
        r = run(os.path.join(ROOT, 'shim'))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_clean_tree_passes(self):
        r = run(tree({'base/a.h': '', 'base/a.c': '#include "a.h"\n',
                      'fix/b.h': '#include "a.h"\n', 'entry/e.c': '#include "b.h"\n'}))
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_an_upward_include_fails(self):
        r = run(tree({'base/a.c': '#include "b.h"\n', 'fix/b.h': ''}))
        self.assertEqual(r.returncode, 1)
        self.assertIn('base/a.c: includes b.h of the higher layer fix', r.stdout)

    def test_an_entry_header_is_for_its_entry_only(self):
        r = run(tree({'chain/a.c': '#include "export.h"\n', 'entry/export.h': ''}))
        self.assertEqual(r.returncode, 1)
        self.assertIn('higher layer entry', r.stdout)

    def test_a_loop_within_a_layer_fails(self):
        r = run(tree({'fix/a.h': '', 'fix/a.c': '#include "b.h"\n',
                      'fix/b.h': '', 'fix/b.c': '#include "a.h"\n'}))
        self.assertEqual(r.returncode, 1)
        self.assertIn('cycle: fix/a -> fix/b -> fix/a', r.stdout)

    def test_no_loop_is_allowed_not_even_config_and_log(self):
        r = run(tree({'base/config.h': '', 'base/config.c': '#include "log.h"\n',
                      'base/log.h': '', 'base/log.c': '#include "config.h"\n'}))
        self.assertEqual(r.returncode, 1)
        self.assertIn('cycle: base/config -> base/log -> base/config', r.stdout)

    def test_an_unknown_folder_fails(self):
        r = run(tree({'core/a.c': ''}))
        self.assertEqual(r.returncode, 1)
        self.assertIn('shim/core/: not a layer', r.stdout)


def objects(sources):
    """Objects compiled from {"layer/name": C text} in a temporary folder,
    each beside its source (a shim tree and its objects in one)."""
    top = tempfile.mkdtemp()
    for name, text in sources.items():
        os.makedirs(os.path.join(top, os.path.dirname(name)), exist_ok=True)
        src = os.path.join(top, name + '.c')
        with open(src, 'w') as f:
            f.write(text)
        subprocess.run(['cc', '-c', src, '-o', os.path.join(top, name + '.o')], check=True)
    return top


class CheckObjects(unittest.TestCase):
    def run_objects(self, objs):
        return subprocess.run([sys.executable, TOOL, objs, '--objects', objs], capture_output=True, text=True)

    @unittest.skipUnless(os.environ.get('BUILD'), 'BUILD not set: the built shim is not checked')
    def test_the_built_shim_calls_no_higher_layer(self):
        objs = os.path.join(os.environ['BUILD'], 'shim')
        r = subprocess.run([sys.executable, TOOL, os.path.join(ROOT, 'shim'), '--objects', objs],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_call_downward_passes(self):
        r = self.run_objects(objects({'base/a': 'int low(void) { return 1; }',
                                      'fix/b': 'int low(void); int high(void) { return low(); }'}))
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_an_upward_call_fails(self):
        r = self.run_objects(objects({'base/a': 'int high(void); int low(void) { return high(); }',
                                      'fix/b': 'int high(void) { return 2; }'}))
        self.assertEqual(r.returncode, 1)
        self.assertIn('shim/base/a.c: calls high of the higher layer fix (shim/fix/b.c)', r.stdout)

    def test_dlsym_by_name_binds_to_the_interposed_one(self):
        r = self.run_objects(objects({
            'base/real': '#include <dlfcn.h>\nvoid *f(void) { return dlsym(RTLD_NEXT, "x"); }',
            'entry_driver/dlsym': 'void *dlsym(void *h, const char *n) { (void)h; (void)n; return 0; }'}))
        self.assertEqual(r.returncode, 1)
        self.assertIn('shim/base/real.c: refers to dlsym; only shim/base/resolve.c may', r.stdout)

    def test_only_resolve_loads(self):
        src = '#include <dlfcn.h>\nvoid *f(void) { return dlopen("x", RTLD_NOW); }'
        self.assertEqual(self.run_objects(objects({'base/resolve': src})).returncode, 0)
        r = self.run_objects(objects({'report/srcline': src}))
        self.assertEqual(r.returncode, 1)
        self.assertIn('shim/report/srcline.c: refers to dlopen', r.stdout)


if __name__ == '__main__':
    unittest.main()
