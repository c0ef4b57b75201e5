"""A DataLoader program for test_pin_dataloader.py, over the stub torch:
iterates one loader (the spec, JSON in argv[1]) and prints its last line
RESULT {json}: per batch the bytes of each tensor (hex) and whether each is
pinned; the stub's pin calls and the most pinned bytes alive at once; the
option's pinned bytes alive at the end; is_available() calls made while the
loader was made.

spec keys: workers (0), context (fork|spawn|forkserver), iterable (false),
persistent (false), epochs (1), pin_memory (false: the program's own),
batch (3), items (20), shape (tuple|dict), hold (false: keep every batch
until the end)."""
import json
import sys

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


def sample(i, shape):
    x, y = torch.Tensor(bytes([i % 256]) * (16 + i % 5)), i
    return {"x": x, "y": y, "meta": "s%d" % i} if shape == "dict" else (x, y)


class MapData:
    def __init__(self, items, shape):
        self.items, self.shape = items, shape

    def __len__(self):
        return self.items

    def __getitem__(self, i):
        return sample(i, self.shape)


class IterData(IterableDataset):
    def __init__(self, items, shape):
        self.items, self.shape = items, shape

    def __iter__(self):
        info = get_worker_info()
        first, step = (info.id, info.num_workers) if info else (0, 1)
        for i in range(first, self.items, step):
            yield sample(i, self.shape)


def describe(batch):
    tensors = list(batch.values()) if isinstance(batch, dict) else list(batch)
    tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
    return [[t.tobytes().hex() for t in tensors], [t.is_pinned() for t in tensors]]


def main():
    spec = json.loads(sys.argv[1])
    shape = spec.get("shape", "tuple")
    data = (IterData if spec.get("iterable") else MapData)(spec.get("items", 20), shape)
    workers = spec.get("workers", 0)
    kwargs = {"num_workers": workers, "pin_memory": spec.get("pin_memory", False)}
    if workers:
        kwargs.update(multiprocessing_context=spec.get("context", "fork"),
                      persistent_workers=spec.get("persistent", False))
    loader = DataLoader(data, spec.get("batch", 3), **kwargs)
    made_asks = torch.cuda.is_available_calls[0]
    epochs, held = [], []
    for _ in range(spec.get("epochs", 1)):
        batches = []
        for batch in loader:
            batches.append(describe(batch))
            if spec.get("hold"):
                held.append(batch)
            del batch
        epochs.append(batches)
    patcher = sys.modules.get("unstall_pin_dataloader")
    del held
    result = {
        "epochs": epochs,
        "loader_pin_memory": loader.pin_memory,
        "pin_calls": torch._faults.calls[0],
        "peak_pinned": torch._faults.peak[0],
        "option_pinned_at_end": patcher.pinned_bytes() if patcher else None,
        "is_available_at_init": made_asks,
    }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
