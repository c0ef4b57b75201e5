"""A stand-in for torch, just enough of it for tests/pin_dataloader: the
DataLoader's structure as torch has it (the pin thread's target read as
_utils.pin_memory._pin_memory_loop, pin_memory called through its module,
workers started by fork, spawn or forkserver, persistent workers, iterable
datasets), over a Tensor of bytes whose pin_memory() can be made to fail
(torch/_faults.py)."""
from torch import cuda
from torch._tensor import Tensor, tensor
import torch.utils.data  # as real torch does
