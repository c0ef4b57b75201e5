"""The DataLoader patch of option pin_dataloader (tools/python/sitecustomize.py
loads this file when torch imports torch.utils.data.dataloader; it is not
read at start-up).

patch(module, cap, say) changes four things of torch, all or none:

- DataLoader.__init__: a loader made without pinning and without a
  pin_memory_device, where torch sees a CUDA device (torch.cuda.device_count()),
  gets pin_memory=True, every other argument as the program gave it, and is
  marked as pinned by us; the first such loader is named once.
- DataLoader._get_iterator: for a loader of ours, the iterator is marked, and
  while torch makes it (which starts the pin thread of a loader with workers),
  a thread-local flag says so.
- torch.utils.data._utils.pin_memory: its class gets a property
  _pin_memory_loop that, read while that flag is set (in the thread making
  our iterator: torch reads it there, as the pin thread's target), gives the
  loop wrapped so that the pin thread knows it pins for one of our loaders;
  read anywhere else, the loop as it is. Its function pin_memory (which the
  pin thread, a loader without workers and pin_memory's own recursion call
  through the module) becomes a dispatcher: in our pin threads and in our
  iterators' _next_data it pins a batch safely (below); everywhere else it is
  torch's own. A loader the program pinned itself is never touched.
- _SingleProcessDataLoaderIter._next_data: sets the flag "pinning for us" in
  the calling thread for a marked iterator (a loader without workers pins
  there, as torch does).

Safe pinning of one batch: the bytes of its tensors are counted first; if
the batches pinned this way and still alive in the process would then pass
the cap (option pin_dataloader_max), the batch is delivered unpinned. Else
torch pins it; any exception (page-locked memory exhausted, a limit, an
allocator error) delivers the batch unpinned, the very object the worker
made, as without pinning; the first failure and the first time the cap is
reached are said once each. A pinned batch's tensors count until Python frees
them (weakref.finalize).

Standard library only; Python 3.8 and later.
"""
import collections.abc
import inspect
import os
import sys
import threading
import weakref

MARK = "_unstall_pin_dataloader"  # on the wrapped functions (and sitecustomize's finder), on our loaders and iterators
LOOP = "_pin_memory_loop"
WALK_DEPTH = 8  # how deep a batch is searched for tensors

_local = threading.local()  # creating: making our iterator; ours: pinning for us; inside: in torch's pin_memory
_lock = threading.RLock()   # re-entrant: a finalizer may run in a thread that holds it
_pinned = [0]               # bytes of our pinned batches' tensors alive now
_state = {"cap": 1 << 31, "say": None, "cap_text": "2g"}
_once = {"note": [True], "failure": [True], "cap": [True]}  # each popped once (atomically) per process


def default_say(message):
    """One line on stderr, as the shim's own messages begin: 'unstall: '."""
    try:
        sys.stderr.write("unstall: %s\n" % message)
        sys.stderr.flush()
    except Exception:  # no stderr (pythonw, closed): say nothing
        pass


def say_once(key, message):
    try:
        _once[key].pop()
    except IndexError:
        return
    try:
        (_state["say"] or default_say)(message)
    except Exception:
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


def copy_names(wrapper, wrapped):
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        try:
            setattr(wrapper, attr, getattr(wrapped, attr))
        except (AttributeError, TypeError):
            pass
    wrapper.__wrapped__ = wrapped
    setattr(wrapper, MARK, True)
    return wrapper


# --- the loader: pin_memory=True where the program did not pin ---------------------------------

def wrap_init(init, signature):
    """DataLoader.__init__ that passes pin_memory=True where the program did
    not ask for pinning nor name a pin_memory_device, and CUDA is available;
    everything else as given. The loader is marked as ours."""
    device_param = signature.parameters.get("pin_memory_device")

    def __init__(self, *args, **kwargs):
        pinned = False
        try:
            bound = signature.bind(self, *args, **kwargs)
            asked = bound.arguments.get("pin_memory", signature.parameters["pin_memory"].default)
            device = bound.arguments.get("pin_memory_device", device_param.default if device_param else "")
            if not asked and not device and cuda_available():
                bound.arguments["pin_memory"] = True
                args, kwargs = bound.args[1:], bound.kwargs
                pinned = True
        except Exception:  # arguments the original refuses: let it say so
            pass
        init(self, *args, **kwargs)
        if not pinned:
            return
        try:
            object.__setattr__(self, MARK, True)
        except Exception:
            pass
        if _once["note"]:
            try:
                site = caller_site(self)
            except Exception:
                site = "?"
            say_once("note", "pin_dataloader: DataLoader at %s pins its batches (pin_memory=True; up to "
                     "pin_dataloader_max=%s pinned at once; --no-pin-dataloader turns it off)"
                     % (site, _state["cap_text"]))

    return copy_names(__init__, init)


def wrap_get_iterator(get_iterator):
    """DataLoader._get_iterator: for our loader, the iterator marked, and the
    flag 'creating' set while torch makes it (its pin thread's target is read
    then)."""

    def _get_iterator(self):
        if not getattr(self, MARK, False) or not getattr(self, "pin_memory", False):
            return get_iterator(self)
        before = getattr(_local, "creating", False)
        _local.creating = True
        try:
            it = get_iterator(self)
        finally:
            _local.creating = before
        try:
            object.__setattr__(it, MARK, True)
        except Exception:
            pass
        return it

    return copy_names(_get_iterator, get_iterator)


def wrap_next_data(next_data):
    """_SingleProcessDataLoaderIter._next_data: a marked iterator pins (in
    this thread, as torch does without workers) for us."""

    def _next_data(self):
        if not getattr(self, MARK, False) or getattr(_local, "ours", False):
            return next_data(self)
        _local.ours = True
        try:
            return next_data(self)
        finally:
            _local.ours = False

    return copy_names(_next_data, next_data)


def ours_loop(loop):
    """torch's pin loop, run in a pin thread that knows it pins for us (the
    same name, so the thread is named as natively)."""

    def _pin_memory_loop(*args, **kwargs):
        _local.ours = True
        return loop(*args, **kwargs)

    return copy_names(_pin_memory_loop, loop)


def module_class(base):
    """base (the pin_memory module's class) with the property _pin_memory_loop:
    the loop as the module holds it, wrapped when read while our iterator is
    being made; setting it (another tool's patch) sets the module's own."""

    def get_loop(module):
        loop = module.__dict__[LOOP]
        if getattr(_local, "creating", False) and callable(loop):
            return ours_loop(loop)
        return loop

    def set_loop(module, value):
        module.__dict__[LOOP] = value

    return type(base.__name__, (base,), {LOOP: property(get_loop, set_loop), MARK: True,
                                          "__module__": __name__})


# --- one batch, pinned safely ------------------------------------------------------------------

def tensors_of(data, tensor_type, found, seen, depth=0):
    """found[id] = tensor for every tensor in data: in mappings, sequences,
    and the attributes of other objects (a batch class with its own
    pin_memory), WALK_DEPTH deep."""
    if isinstance(data, tensor_type):
        found[id(data)] = data
        return
    if depth >= WALK_DEPTH or isinstance(data, (str, bytes, bytearray, int, float, bool, type(None))):
        return
    if id(data) in seen:
        return
    seen.add(id(data))
    if isinstance(data, collections.abc.Mapping):
        items = list(data.values())
    elif isinstance(data, (tuple, list)):
        items = list(data)
    else:
        items = list(getattr(data, "__dict__", {}).values())
    for item in items:
        tensors_of(item, tensor_type, found, seen, depth + 1)


def nbytes(t):
    try:
        return int(t.numel()) * int(t.element_size())
    except Exception:
        return 0


def release(n):
    with _lock:
        _pinned[0] -= n


def pinned_bytes():
    """Bytes of our pinned batches alive now (the tests read it)."""
    with _lock:
        return _pinned[0]


def pin_safely(original, data, args, kwargs):
    """data pinned by torch's pin_memory, or data itself where the cap is
    reached or pinning raised."""
    tensor_type = getattr(sys.modules.get("torch"), "Tensor", None)
    inputs = {}
    if isinstance(tensor_type, type):
        tensors_of(data, tensor_type, inputs, set())
    need = sum(nbytes(t) for t in inputs.values())
    with _lock:
        fits = _pinned[0] + need <= _state["cap"] and not (need == 0 and _state["cap"] == 0)
        if fits:
            _pinned[0] += need  # reserved until the pinned tensors are counted
    if not fits:
        say_once("cap", "pin_dataloader: pinned batches reached pin_dataloader_max=%s in this process: "
                 "batches stay unpinned until earlier ones are freed (UNSTALL_PIN_DATALOADER_MAX sets it)"
                 % _state["cap_text"])
        return data
    _local.inside = True
    try:
        pinned = original(data, *args, **kwargs)
    except Exception as e:
        release(need)
        text = str(e).strip().splitlines()
        say_once("failure", "pin_dataloader: a batch could not be pinned (%s: %s): delivered unpinned, as "
                 "without pinning; later failures are not reported (--no-pin-dataloader or "
                 "pin_dataloader = 0 turns pinning off)" % (type(e).__name__, (text[0] if text else "")[:160]))
        return data
    finally:
        _local.inside = False
    try:
        found = {}
        if isinstance(tensor_type, type):
            tensors_of(pinned, tensor_type, found, set())
        for key, t in found.items():
            if key in inputs:
                continue  # the batch's own tensor (already pinned): not ours
            n = nbytes(t)
            with _lock:
                _pinned[0] += n
            try:
                weakref.finalize(t, release, n)
            except TypeError:
                release(n)
    except Exception:
        pass
    release(need)
    return pinned


def wrap_pin_memory(original):
    """The module's pin_memory: ours pinned safely, everything else as torch
    does (its own recursion included)."""

    def pin_memory(data, *args, **kwargs):
        if not getattr(_local, "ours", False) or getattr(_local, "inside", False):
            return original(data, *args, **kwargs)
        return pin_safely(original, data, args, kwargs)

    return copy_names(pin_memory, original)


# --- the patch ---------------------------------------------------------------------------------

def patch(module, cap=1 << 31, cap_text="2g", say=None):
    """Patch torch's DataLoader (module: torch.utils.data.dataloader), once (a
    patched one is left as it is): all four pieces, or none. Raises when torch
    is not what this expects: the caller says so and nothing is pinned."""
    cls = getattr(module, "DataLoader", None)
    init = getattr(cls, "__init__", None)
    if cls is None or init is None:
        raise LookupError("no DataLoader.__init__ in %s" % module.__name__)
    if getattr(init, MARK, False):
        return
    signature = inspect.signature(init)
    if "pin_memory" not in signature.parameters:
        raise LookupError("DataLoader.__init__ takes no pin_memory")
    get_iterator = getattr(cls, "_get_iterator", None)
    single = getattr(module, "_SingleProcessDataLoaderIter", None)
    next_data = getattr(single, "_next_data", None)
    pm = sys.modules.get(module.__name__.rsplit(".", 1)[0] + "._utils.pin_memory")
    if pm is None:
        pm = getattr(getattr(module, "_utils", None), "pin_memory", None)
    missing = [name for name, value in (("DataLoader._get_iterator", get_iterator),
                                        ("_SingleProcessDataLoaderIter._next_data", next_data),
                                        ("_utils.pin_memory.pin_memory", getattr(pm, "pin_memory", None)),
                                        ("_utils.pin_memory." + LOOP, getattr(pm, LOOP, None)))
               if not callable(value)]
    if missing:
        raise LookupError("no " + ", ".join(missing))
    _state.update(cap=cap, cap_text=cap_text, say=say)
    if not getattr(type(pm), MARK, False):
        pm.__class__ = module_class(type(pm))  # first: the one step that may refuse (TypeError)
    if not getattr(pm.__dict__["pin_memory"], MARK, False):
        pm.pin_memory = wrap_pin_memory(pm.__dict__["pin_memory"])
    single._next_data = wrap_next_data(next_data)
    cls._get_iterator = wrap_get_iterator(get_iterator)
    cls.__init__ = wrap_init(init, signature)
