"""unstall's sitecustomize: the options pin_dataloader and pin_dataloader_max
(docs/options.md).

Python imports this module at start-up when its folder (tools/python in a
checkout, PREFIX/share/unstall/python once installed) is on PYTHONPATH;
tools/unstall puts it there unless pin_dataloader is off. With the option on
(its default), every torch.utils.data.DataLoader made in the process without
pinning pins its batches, as DataLoader(..., pin_memory=True) does, where
torch.cuda.device_count() > 0: torch's pin thread then receives the workers'
batches off the training thread. A batch that cannot be pinned, or that
would take the process's pinned batches past pin_dataloader_max, is delivered
unpinned (unstall_pin_dataloader.py). The options are read as the shim reads
them: the default, then the lines "name = value" of the file named by
UNSTALL_CONFIG, then UNSTALL_<NAME>; a value that does not parse warns once
and keeps what it had. UNSTALL_DISABLE=1 turns it off too. Messages go where
the shim's go (option log: stderr, or a file, %p %r %h expanded as the shim
does).

It never imports torch: a finder on sys.meta_path waits for torch to import
torch.utils.data.dataloader and, once that module has run, patches it with
unstall_pin_dataloader.py, beside this file, read only then. A failure to do
so prints one line and leaves torch alone; nothing here raises into the
program.

The sitecustomize that Python would have loaded without this folder on the
path (conda's, Debian's: the next one on sys.path) is loaded after, and takes
its place in sys.modules, so adding this folder hides nothing.

Standard library only; Python 3.8 and later.
"""
import os
import stat
import sys

OPTION = "pin_dataloader"
CAP_OPTION = "pin_dataloader_max"
CAP_DEFAULT = "2g"  # as in shim/base/options.def
CAP_RANGE_MAX = 1 << 40  # its range: 0..1t
TARGET = "torch.utils.data.dataloader"
PATCHER = "unstall_pin_dataloader"  # the patch itself, beside this file
MARK = "_unstall_pin_dataloader"  # on our finder and on the wrapped functions
CONFIG_FILE_MAX = 1 << 20  # the shim reads no larger config file (config.c)
VALUE_MAX = 255  # nor a longer value
BLANKS = " \t\r"
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
RANK_VARS = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "LOCAL_RANK")  # config.c's

_log = [None]  # the log option's value, read once


def expand_path(template):
    """%p, %r, %h and %% as the shim's us_expand_path expands them."""
    rank = "norank"
    for name in RANK_VARS:
        value = os.environ.get(name)
        if value is not None and value.isdigit() and value.isascii() and int(value) < 1 << 32:
            rank = str(int(value))
            break
    try:
        host = "".join(c if c.isascii() and (c.isalnum() or c in ".-_") else "_" for c in os.uname().nodename)
    except Exception:
        host = ""
    pieces = {"p": str(os.getpid()), "r": rank, "h": host or "unknown-host", "%": "%"}
    out, i = [], 0
    while i < len(template):
        if template[i] == "%" and template[i + 1:i + 2] in pieces:
            out.append(pieces[template[i + 1]])
            i += 2
        else:
            out.append(template[i])
            i += 1
    return "".join(out)


def say(message):
    """One line where the shim's messages go (option log), as they begin:
    'unstall: '; stderr when the log is stderr or cannot be opened."""
    line = "unstall: %s\n" % message
    try:
        if _log[0] is None:
            _log[0] = read_option("log", "stderr", lambda text: text, warn=False)
        destination = _log[0]
        if destination and destination.lower() != "stderr":
            fd = os.open(expand_path(destination), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
            try:
                os.write(fd, line.encode("utf-8", "replace"))
            finally:
                os.close(fd)
            return
    except Exception:
        pass
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except Exception:  # no stderr (pythonw, closed): say nothing
        pass


# --- the options, read as shim/base/config.c reads them ---------------------------------------

def parse_bool(text):
    """True or False for the shim's boolean spellings (any case), None otherwise."""
    word = text.lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


def parse_size(text):
    """Bytes for a size as config.c's us_parse_size reads it (4096, 64k, 8m,
    8MiB, 2gb, 1t: powers of 1024) within 0..1t, None otherwise."""
    digits = len(text) - len(text.lstrip("0123456789"))
    if digits == 0:
        return None
    value, rest = int(text[:digits]), text[digits:].lower()
    shift = {"k": 10, "m": 20, "g": 30, "t": 40}.get(rest[:1], 0)
    if shift:
        rest = rest[1:]
    if rest not in ("", "b") + (("ib",) if shift else ()):
        return None
    value <<= shift
    return value if value <= CAP_RANGE_MAX else None


def config_file_values(path, key):
    """(line number, value) of every line 'key = value' of the config file, in
    order, split as config.c splits them: blanks around key and value, a '#'
    after a blank ends the value. A file the shim would not read gives none
    (the shim warns about it)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > CONFIG_FILE_MAX:
            return []
        with open(path, "rb") as f:
            text = f.read(CONFIG_FILE_MAX + 1).decode("latin-1")
    except (OSError, ValueError):
        return []
    values = []
    for number, line in enumerate(text.split("\n"), 1):
        line = line.strip(BLANKS)
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        if name.rstrip(BLANKS) != key:
            continue
        value = value.lstrip(BLANKS)
        for i in range(1, len(value)):
            if value[i] == "#" and value[i - 1] in BLANKS:
                value = value[:i]
                break
        values.append((number, value.rstrip(BLANKS)))
    return values


def read_option(name, default, parse, warn, expected="", show=None):
    """The option name: its default, then the config file, then the
    environment, each value that parses (parse gives not None) replacing the
    one before. With warn, a value that does not parse prints the shim's
    warning, naming what is kept."""
    value = default
    config = os.environ.get("UNSTALL_CONFIG", "")
    sources = []
    if config:
        sources = [("%s:%d: %s" % (config, number, name), text) for number, text in config_file_values(config, name)]
    env_name = "UNSTALL_" + name.upper()
    if env_name in os.environ:
        sources.append((env_name, os.environ[env_name]))
    for where, text in sources:
        parsed = parse(text) if len(text) <= VALUE_MAX else None
        if parsed is not None:
            value = parsed
        elif warn:
            shown = "".join(c if " " <= c < "\x7f" else "?" for c in text[:64]) + ("..." if len(text) > 64 else "")
            kept = show(value) if show else "%d" % value if isinstance(value, bool) else str(value)
            say('%s="%s": %s; keeping %s' % (where, shown, expected, kept))
    return value


def read_bool_option(name, default, warn):
    return read_option(name, default, parse_bool, warn,
                       "not a boolean (expected 1/0, true/false, yes/no, on/off)")


def enabled():
    """Is pin_dataloader on (its default)? Not when unstall is disabled
    (which says nothing, as the shim then says nothing); a bad value warns
    once."""
    if read_bool_option("disable", False, warn=False):
        return False
    return read_bool_option(OPTION, True, warn=True)


def cap():
    """(bytes, text) of pin_dataloader_max; a bad value warns once and keeps
    the default."""
    text = [CAP_DEFAULT]

    def parse(value):
        size = parse_size(value)
        if size is not None:
            text[0] = value
        return size

    size = read_option(CAP_OPTION, parse_size(CAP_DEFAULT), parse, warn=True,
                       expected="not a size in 0..1t (expected e.g. 2g, 512m)", show=lambda value: text[0])
    return size, text[0]


# --- the import of torch's DataLoader, watched -------------------------------------------------

def patch(module):
    """Patch torch's DataLoader module (PATCHER.patch, that module loaded
    from this folder now: it is not read at start-up); any failure is one
    line, torch untouched."""
    try:
        patcher = sys.modules.get(PATCHER)
        if patcher is None:
            import importlib.util
            path = os.path.join(os.path.dirname(os.path.abspath(__file__)), PATCHER + ".py")
            spec = importlib.util.spec_from_file_location(PATCHER, path)
            patcher = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(patcher)
            sys.modules[PATCHER] = patcher
        patcher.patch(module, _cap[0], _cap[1], say)
    except Exception as e:
        say("pin_dataloader: cannot wrap torch's DataLoader (%s: %s); loaders are left as the program made them"
            % (type(e).__name__, e))


class DataLoaderFinder:
    """On sys.meta_path, first: finds nothing itself. For TARGET it asks the
    finders after it for the module's spec and wraps that loader's
    exec_module, so that DataLoader is patched as soon as the module has
    run; then it leaves sys.meta_path."""

    _unstall_pin_dataloader = True

    def find_spec(self, fullname, path=None, target=None):
        if fullname != TARGET:
            return None
        spec = None
        for finder in list(sys.meta_path):
            if getattr(finder, MARK, False):
                continue
            find_spec = getattr(finder, "find_spec", None)
            if find_spec is None:
                continue
            spec = find_spec(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec  # None: the import goes on as it would have
        try:
            exec_module = spec.loader.exec_module

            def exec_and_patch(module):
                exec_module(module)
                if getattr(module, "__name__", None) == TARGET:  # a loader may serve several modules
                    patch(module)
                    remove_finder()

            spec.loader.exec_module = exec_and_patch
        except Exception as e:
            say("pin_dataloader: cannot watch the import of %s (%s: %s); loaders are left as the program made them"
                % (TARGET, type(e).__name__, e))
        return spec


def remove_finder():
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, MARK, False)]


_cap = [1 << 31, CAP_DEFAULT]  # pin_dataloader_max: (bytes, as written), read at start-up


def install():
    """The finder, once per process (another copy of this file included); or,
    where torch's module is already loaded, the patch at once."""
    module = sys.modules.get(TARGET)
    if module is not None:
        patch(module)
        return
    if not any(getattr(f, MARK, False) for f in sys.meta_path):
        sys.meta_path.insert(0, DataLoaderFinder())


# --- the sitecustomize this one would hide ------------------------------------------------------

def load_next_sitecustomize():
    """Run the first sitecustomize on sys.path after this file's folder (not
    another entry naming this folder), under the name sitecustomize, as
    Python would have without this folder; its errors are its own (site
    reports them as it would have)."""
    try:
        here = os.path.dirname(os.path.realpath(__file__))
        entries = [os.path.realpath(p or os.curdir) if isinstance(p, str) else None for p in sys.path]
        if here not in entries:
            return
        start = entries.index(here) + 1
        rest = [p for p, real in zip(sys.path[start:], entries[start:]) if real != here]
        import importlib.machinery
        import importlib.util
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
    except Exception as e:
        say("cannot look for the next sitecustomize on sys.path (%s: %s)" % (type(e).__name__, e))
        return
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def main():
    try:
        if enabled():
            _cap[:] = cap()
            install()
    except Exception as e:  # never into the program
        say("pin_dataloader: not applied (%s: %s)" % (type(e).__name__, e))
    load_next_sitecustomize()


main()
