"""Pinning failures for the tests, from the environment:
STUB_PIN_FAIL      pin_memory() calls (1-based, per process) that raise, e.g. "3,8"
STUB_PIN_FAIL_KIND the exception raised: RuntimeError (default), MemoryError, OSError, ValueError
STUB_PIN_LIMIT     bytes of pinned tensors alive beyond which pin_memory() raises
                   RuntimeError (page-locked memory exhausted)
Counts (pin calls, pinned bytes alive, the most alive) are read by the probes."""
import os
import threading
import weakref

_lock = threading.Lock()
calls = [0]
alive = [0]
peak = [0]
_fail = {int(x) for x in os.environ.get("STUB_PIN_FAIL", "").split(",") if x.strip()}
_kind = {"RuntimeError": RuntimeError, "MemoryError": MemoryError, "OSError": OSError,
         "ValueError": ValueError}[os.environ.get("STUB_PIN_FAIL_KIND", "RuntimeError")]
_limit = int(os.environ.get("STUB_PIN_LIMIT", "0")) or None


def _free(n):
    with _lock:
        alive[0] -= n


def before_pin(nbytes):
    """Raise where this call must fail; else count nbytes as pinned."""
    with _lock:
        calls[0] += 1
        if calls[0] in _fail:
            raise _kind("CUDA error: injected pinning failure at call %d" % calls[0])
        if _limit is not None and alive[0] + nbytes > _limit:
            raise RuntimeError("CUDA error: out of memory (pinned %d of %d bytes)" % (alive[0], _limit))
        alive[0] += nbytes
        peak[0] = max(peak[0], alive[0])


def pinned(t, nbytes):
    weakref.finalize(t, _free, nbytes)
