"""The worker processes' loop, in torch's shape."""
import queue

from . import MP_STATUS_CHECK_INTERVAL


class ExceptionWrapper:
    def __init__(self, where, exc):
        self.where = where
        self.text = "%s: %s" % (type(exc).__name__, exc)
        self.exc_type = type(exc)

    def reraise(self):
        raise self.exc_type("Caught %s %s" % (self.where, self.text))


class _ResumeIteration:
    pass


class _IterableDatasetStopIteration:
    def __init__(self, worker_id):
        self.worker_id = worker_id


class WorkerInfo:
    def __init__(self, id, num_workers):
        self.id, self.num_workers = id, num_workers


_worker_info = None


def _worker_loop(dataset, iterable, index_queue, data_queue, done_event, collate, worker_id, num_workers):
    global _worker_info
    _worker_info = WorkerInfo(worker_id, num_workers)
    it = iter(dataset) if iterable else None
    exhausted = False
    while True:
        try:
            r = index_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
        except queue.Empty:
            if done_event.is_set():
                return
            continue
        if r is None:
            return
        if isinstance(r, _ResumeIteration):
            data_queue.put((r, None))
            it = iter(dataset) if iterable else None
            exhausted = False
            continue
        if done_event.is_set() or exhausted:
            continue
        idx, indices = r
        try:
            if iterable:
                samples = []
                for _ in range(len(indices)):
                    try:
                        samples.append(next(it))
                    except StopIteration:
                        break
                if not samples:
                    exhausted = True
                    data_queue.put((idx, _IterableDatasetStopIteration(worker_id)))
                    continue
            else:
                samples = [dataset[i] for i in indices]
            data = collate(samples)
        except Exception as e:
            data = ExceptionWrapper("in DataLoader worker process %d" % worker_id, e)
        data_queue.put((idx, data))
