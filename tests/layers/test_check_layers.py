"""tools/check-layers: the shim's tree passes, and a tree with an upward
include or a loop fails, naming it."""
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


if __name__ == '__main__':
    unittest.main()
