from torch import _faults


class Tensor:
    """Bytes, pinned or not; pin_memory() copies them into a pinned tensor."""

    def __init__(self, data=b"", pinned=False):
        self._data = bytes(data)
        self._pinned = pinned

    def numel(self):
        return len(self._data)

    def element_size(self):
        return 1

    def is_pinned(self):
        return self._pinned

    def tobytes(self):
        return self._data

    def pin_memory(self, device=None):
        if self._pinned:
            return self
        _faults.before_pin(len(self._data))
        t = Tensor(self._data, pinned=True)
        _faults.pinned(t, len(self._data))
        return t

    def __reduce__(self):  # to another process: unpinned, as shared memory is
        return (Tensor, (self._data,))

    def __repr__(self):
        return "Tensor(%d bytes%s)" % (len(self._data), ", pinned" if self._pinned else "")


def tensor(data):
    return Tensor(data)
