"""python -m unstall [options] -- program [args...]
   python -m unstall [options] script.py [args...]   (the script runs with this Python)

The same as the unstall command (tools/unstall): unstall --help lists the options."""
import sys

from unstall import _cli

if __name__ == "__main__":
    sys.exit(_cli.exec_launcher(_cli.module_args(sys.argv[1:])))
