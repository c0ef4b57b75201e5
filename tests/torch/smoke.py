#!/usr/bin/env python3
"""smoke.py - PyTorch's copy paths, checked value by value; run natively and
under the shim by tests/gpu/run.sh (make gpu-test).

What PyTorch calls: x.cpu() is a pageable D2H cudaMemcpyAsync
then cudaStreamSynchronize; t.to('cuda') and t.to('cuda', non_blocking=True)
from pageable memory are pageable H2D copies; .item() copies into torch's own
pinned pool and synchronizes; x.to('cuda:1') is a cudaMemcpyAsync across
devices (peer access enabled by torch when it can).

Prints "RESULT case=torch test=<name> ... ok=1|0" lines and exits 1 if a
value is wrong. SMOKE_MB (default 64) sets the large tensors' size.
"""
import os
import sys
import threading
import time

try:
    import torch
except ImportError as e:  # the caller turns this into a SKIP
    print(f"# torch not importable: {e}")
    sys.exit(77)

failures = 0


def result(test, ok, **kv):
    global failures
    if not ok:
        failures += 1
    fields = " ".join(f"{k}={v}" for k, v in kv.items())
    print(f"RESULT case=torch test={test} {fields} ok={int(bool(ok))}", flush=True)


def ms(t0):
    return f"{(time.perf_counter() - t0) * 1e3:.3f}"


def main():
    if not torch.cuda.is_available():
        print("# torch sees no GPU")
        return 77
    mb = int(os.environ.get("SMOKE_MB", "64"))
    n = mb * (1 << 20) // 4
    dev = torch.device("cuda:0")
    print(f"# torch {torch.__version__}, {torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}")

    # D2H: .cpu() of a known tensor
    x = torch.arange(n, dtype=torch.float32, device=dev)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    c = x.cpu()
    t = ms(t0)
    ok = c.dtype == torch.float32 and c.numel() == n and c[0].item() == 0 and c[12345].item() == 12345.0
    ok = ok and torch.equal(c, torch.arange(n, dtype=torch.float32))
    result("cpu", ok, bytes=n * 4, call_ms=t)

    # H2D from pageable memory, blocking
    h = torch.randn(n)
    t0 = time.perf_counter()
    d = h.to(dev)
    t = ms(t0)
    result("to_cuda", torch.equal(d.cpu(), h), bytes=n * 4, call_ms=t)

    # H2D from pageable memory, non_blocking, the source overwritten at once:
    # the copy must have taken the source before returning (as native does)
    h2 = torch.randn(n)
    keep = h2.clone()
    t0 = time.perf_counter()
    d2 = h2.to(dev, non_blocking=True)
    t = ms(t0)
    h2.fill_(-1.0)
    torch.cuda.synchronize()
    result("to_cuda_non_blocking", torch.equal(d2.cpu(), keep), bytes=n * 4, call_ms=t)

    # H2D non_blocking behind a long kernel on the current stream: how long held
    a = torch.randn(4096, 4096, device=dev)
    torch.cuda.synchronize()
    for _ in range(20):
        a = a @ a
        a = a / a.norm()
    h3 = torch.randn(16 * (1 << 20) // 4)
    t0 = time.perf_counter()
    d3 = h3.to(dev, non_blocking=True)
    t = ms(t0)
    torch.cuda.synchronize()
    result("to_cuda_non_blocking_behind_work", torch.equal(d3.cpu(), h3), bytes=h3.numel() * 4, call_ms=t)

    # .item(): pinned pool + synchronize
    s = torch.arange(1000, dtype=torch.float64, device=dev).sum()
    result("item", s.item() == 499500.0, value=s.item())

    # small copies both ways (below any rewrite threshold)
    small = torch.tensor([1.5, 2.5, 3.5], device=dev)
    result("small_roundtrip", small.cpu().tolist() == [1.5, 2.5, 3.5] and small.to("cpu").sum().item() == 7.5)

    # pinned memory, non_blocking both ways
    p = torch.randn(n).pin_memory()
    dp = p.to(dev, non_blocking=True)
    back = torch.empty(n, pin_memory=True)
    back.copy_(dp, non_blocking=True)
    torch.cuda.synchronize()
    result("pinned_roundtrip", torch.equal(back, p), bytes=n * 4)

    # another thread launches while this one does pageable D2H (the
    # D2H-versus-launch case a user reported)
    lat = []
    stop = threading.Event()

    def launcher():
        torch.cuda.set_device(0)
        side = torch.cuda.Stream()
        small_t = torch.ones(16, device=dev)
        with torch.cuda.stream(side):
            while not stop.is_set():
                t1 = time.perf_counter()
                small_t.add_(1.0)
                lat.append(time.perf_counter() - t1)
                if len(lat) % 64 == 0:
                    side.synchronize()
        side.synchronize()

    th = threading.Thread(target=launcher)
    th.start()
    good = True
    t_end = time.perf_counter() + 1.0
    copies = 0
    while time.perf_counter() < t_end:
        good = good and torch.equal(x.cpu()[:1000], torch.arange(1000, dtype=torch.float32))
        copies += 1
    stop.set()
    th.join()
    lat.sort()
    result("launch_under_d2h", good, copies=copies, launches=len(lat),
           p99_ms=f"{lat[int(0.99 * (len(lat) - 1))] * 1e3:.3f}" if lat else "-",
           max_ms=f"{lat[-1] * 1e3:.3f}" if lat else "-")

    # across GPUs
    if torch.cuda.device_count() >= 2:
        t0 = time.perf_counter()
        y = x.to("cuda:1")
        t = ms(t0)
        torch.cuda.synchronize(1)
        result("to_cuda1", torch.equal(y.cpu(), c), bytes=n * 4, call_ms=t)
        y2 = x.to("cuda:1", non_blocking=True)
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
        result("to_cuda1_non_blocking", torch.equal(y2.cpu(), c), bytes=n * 4)
        z = y.to("cuda:0")
        result("back_to_cuda0", torch.equal(z, x))
    else:
        result("to_cuda1", True, skipped="one_gpu")

    print(f"# torch smoke: {failures} failure(s)")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
