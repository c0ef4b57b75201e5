"""torch's pin thread and pin_memory, in their shape: the loop calls
pin_memory through this module's globals, and pin_memory recurses through
them too."""
import collections.abc
import queue

import torch

from . import MP_STATUS_CHECK_INTERVAL
from .worker import ExceptionWrapper


def _pin_memory_loop(in_queue, out_queue, device_id, done_event, device):
    def do_one_step():  # one batch per call: nothing of it is kept to the next (as torch's)
        try:
            r = in_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
        except queue.Empty:
            return
        idx, data = r
        if not done_event.is_set() and not isinstance(data, ExceptionWrapper):
            try:
                data = pin_memory(data, device)
            except Exception as e:
                data = ExceptionWrapper("in pin memory thread for device %d" % device_id, e)
            r = (idx, data)
        while not done_event.is_set():
            try:
                out_queue.put(r, timeout=MP_STATUS_CHECK_INTERVAL)
                break
            except queue.Full:
                continue

    while not done_event.is_set():
        do_one_step()


def pin_memory(data, device=None):
    if isinstance(data, torch.Tensor):
        return data.pin_memory(device)
    if hasattr(data, "pin_memory"):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: pin_memory(v, device) for k, v in data.items()})
    if isinstance(data, tuple):
        return type(data)(pin_memory(v, device) for v in data)
    if isinstance(data, list):
        return [pin_memory(v, device) for v in data]
    return data
