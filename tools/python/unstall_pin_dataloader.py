"""The DataLoader patch of option pin_dataloader (tools/python/sitecustomize.py
loads this file when torch imports torch.utils.data.dataloader; it is not
read at start-up).

patch(module) wraps DataLoader.__init__ so that a loader made without
pinning, where torch sees a CUDA device (torch.cuda.device_count()), gets pin_memory=True, every other
argument as the program gave it, and says once which loader it pinned.

Standard library only; Python 3.8 and later.
"""
import inspect
import os
import sys

MARK = "_unstall_pin_dataloader"  # on the wrapped __init__ (and sitecustomize's finder)

_note = [True]  # popped (atomically) by the first loader pinned: one note per process


def say(message):
    """One line on stderr, as the shim's own messages begin: 'unstall: '."""
    try:
        sys.stderr.write("unstall: %s\n" % message)
        sys.stderr.flush()
    except Exception:  # no stderr (pythonw, closed): say nothing
        pass


def cuda_available():
    """Whether torch sees a CUDA device, False when it cannot say. Asked with
    torch.cuda.device_count(), which counts through NVML where it can: unlike
    is_available(), it does not initialise the CUDA driver in this process,
    which a program that later forks CUDA-using children must not have done
    (pin_memory=True asks is_available() only when the loader is iterated)."""
    try:
        return sys.modules["torch"].cuda.device_count() > 0
    except Exception:
        return False


def caller_site(loader):
    """file:line of the program's line that made the loader: the first frame
    outward that is not this file, not an __init__ of the loader itself (a
    subclass's) and not inside torch."""
    try:
        torch_dir = os.path.dirname(os.path.abspath(sys.modules["torch"].__file__)) + os.sep
    except Exception:
        torch_dir = None
    here = os.path.abspath(__file__)
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        full = os.path.abspath(path) if not path.startswith("<") else path
        inside = full == here or (torch_dir is not None and full.startswith(torch_dir))
        if not inside and frame.f_locals.get("self") is not loader:
            shown = path
            if not path.startswith("<"):
                relative = os.path.relpath(full)
                shown = relative if not relative.startswith("..") else full
            return "%s:%d" % (shown, frame.f_lineno)
        frame = frame.f_back
    return "?"


def wrap_init(init, signature):
    """DataLoader.__init__ that passes pin_memory=True where the program did
    not ask for pinning and CUDA is available; everything else as given."""

    def __init__(self, *args, **kwargs):
        pinned = False
        try:
            bound = signature.bind(self, *args, **kwargs)
            asked = bound.arguments.get("pin_memory", signature.parameters["pin_memory"].default)
            if not asked and cuda_available():
                bound.arguments["pin_memory"] = True
                args, kwargs = bound.args[1:], bound.kwargs
                pinned = True
        except Exception:  # arguments the original refuses: let it say so
            pass
        init(self, *args, **kwargs)
        if pinned and _note:
            try:
                _note.pop()
            except IndexError:  # another thread's loader was first
                return
            try:
                site = caller_site(self)
            except Exception:
                site = "?"
            say("pin_dataloader: DataLoader at %s pins its batches (pin_memory=True)" % site)

    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(__init__, attr, getattr(init, attr))
        except (AttributeError, TypeError):
            pass
    __init__.__wrapped__ = init
    setattr(__init__, MARK, True)
    return __init__


def patch(module):
    """Wrap module.DataLoader.__init__, once (a wrapped one is left as it is).
    Raises when torch's DataLoader is not what this expects: the caller says so."""
    cls = getattr(module, "DataLoader", None)
    init = getattr(cls, "__init__", None)
    if cls is None or init is None:
        raise LookupError("no DataLoader.__init__ in %s" % module.__name__)
    if getattr(init, MARK, False):
        return
    signature = inspect.signature(init)
    if "pin_memory" not in signature.parameters:
        raise LookupError("DataLoader.__init__ takes no pin_memory")
    cls.__init__ = wrap_init(init, signature)
