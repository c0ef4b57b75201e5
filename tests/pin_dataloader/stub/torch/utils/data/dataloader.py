"""torch's DataLoader in its shape (torch/utils/data/dataloader.py): the
same signature, __iter__ through _get_iterator (one iterator kept with
persistent_workers), a loader without workers pinning in _next_data through
_utils.pin_memory.pin_memory, one with workers pinning in a thread whose
target is read as _utils.pin_memory._pin_memory_loop, batches delivered in
order, iterable datasets ending worker by worker."""
import itertools
import multiprocessing
import queue
import threading

import torch

from . import _utils
from ._utils.worker import ExceptionWrapper, _IterableDatasetStopIteration, _ResumeIteration


class IterableDataset:
    def __iter__(self):
        raise NotImplementedError


def get_worker_info():
    return _utils.worker._worker_info


def default_collate(samples):
    first = samples[0]
    if isinstance(first, torch.Tensor):
        return torch.Tensor(b"".join(s.tobytes() for s in samples))
    if isinstance(first, dict):
        return {k: default_collate([s[k] for s in samples]) for k in first}
    if isinstance(first, tuple):
        return tuple(default_collate(list(column)) for column in zip(*samples))
    if isinstance(first, int):
        return torch.Tensor(bytes(s % 256 for s in samples))
    return samples


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device=''):
        self.dataset = dataset
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.collate_fn = collate_fn or default_collate
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = prefetch_factor if prefetch_factor is not None else (2 if num_workers else None)
        self.persistent_workers = persistent_workers
        self._iterable = isinstance(dataset, IterableDataset)
        self._iterator = None

    def _index_batches(self):
        if self._iterable:
            return itertools.repeat(list(range(self.batch_size)))
        n = len(self.dataset)
        return iter([list(range(i, min(i + self.batch_size, n))) for i in range(0, n, self.batch_size)])

    def __iter__(self):
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        return _MultiProcessingDataLoaderIter(self)


class _BaseDataLoaderIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._iterable = loader._iterable
        self._num_workers = loader.num_workers
        self._collate = loader.collate_fn
        self._persistent = loader.persistent_workers
        self._pin_memory = loader.pin_memory and torch.cuda.is_available()
        self._pin_memory_device = loader.pin_memory_device or None
        self._sampler_iter = loader._index_batches()

    def __iter__(self):
        return self

    def __next__(self):
        return self._next_data()


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._it = iter(self._dataset) if self._iterable else None

    def _next_data(self):
        indices = next(self._sampler_iter)
        if self._iterable:
            samples = list(itertools.islice(self._it, len(indices)))
            if not samples:
                raise StopIteration
        else:
            samples = [self._dataset[i] for i in indices]
        data = self._collate(samples)
        if self._pin_memory:
            data = _utils.pin_memory.pin_memory(data, self._pin_memory_device)
        return data


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        ctx = loader.multiprocessing_context
        if ctx is None:
            ctx = multiprocessing
        elif isinstance(ctx, str):
            ctx = multiprocessing.get_context(ctx)
        self._prefetch_factor = loader.prefetch_factor
        self._shutdown = False
        self._worker_result_queue = ctx.Queue()
        self._workers_done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        for i in range(self._num_workers):
            index_queue = ctx.Queue()
            w = ctx.Process(target=_utils.worker._worker_loop,
                            args=(self._dataset, self._iterable, index_queue, self._worker_result_queue,
                                  self._workers_done_event, self._collate, i, self._num_workers))
            w.daemon = True
            w.start()
            self._index_queues.append(index_queue)
            self._workers.append(w)
        if self._pin_memory:
            self._pin_memory_thread_done_event = threading.Event()
            self._data_queue = queue.Queue()
            t = threading.Thread(target=_utils.pin_memory._pin_memory_loop,
                                 args=(self._worker_result_queue, self._data_queue, torch.cuda.current_device(),
                                       self._pin_memory_thread_done_event, self._pin_memory_device))
            t.daemon = True
            t.start()
            self._pin_memory_thread = t
        else:
            self._data_queue = self._worker_result_queue
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter=False):
        self._sampler_iter = loader._index_batches()
        self._send_idx = self._rcvd_idx = 0
        self._task_info = {}
        self._workers_status = [True] * self._num_workers
        self._worker_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            for q in self._index_queues:
                q.put(_ResumeIteration())
            remaining = self._num_workers
            while remaining:
                r, _ = self._data_queue.get(timeout=30)
                if isinstance(r, _ResumeIteration):
                    remaining -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_put_index(self):
        try:
            indices = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(self._num_workers):
            w = next(self._worker_cycle)
            if self._workers_status[w]:
                break
        else:
            return
        self._index_queues[w].put((self._send_idx, indices))
        self._task_info[self._send_idx] = (w,)
        self._send_idx += 1

    def _next_data(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info[self._rcvd_idx]
                if len(info) == 2 or self._workers_status[info[0]]:
                    break
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            if len(self._task_info[self._rcvd_idx]) == 2:
                return self._process_data(self._task_info.pop(self._rcvd_idx)[1])
            idx, data = self._data_queue.get(timeout=30)
            if isinstance(data, _IterableDatasetStopIteration):
                self._workers_status[data.worker_id] = False
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                self._task_info[idx] += (data,)
                continue
            del self._task_info[idx]
            return self._process_data(data)

    def _process_data(self, data):
        self._rcvd_idx += 1
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return data

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        if self._pin_memory:
            self._pin_memory_thread_done_event.set()
            self._pin_memory_thread.join()
        self._workers_done_event.set()
        for q in self._index_queues:
            q.put(None)
        for w in self._workers:
            w.join(timeout=10)
            if w.is_alive():
                w.terminate()
        for q in self._index_queues + [self._worker_result_queue]:
            q.cancel_join_thread()
            q.close()

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:
            pass
