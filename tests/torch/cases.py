#!/usr/bin/env python3
"""cases.py - the PyTorch programs of make torch-test, one case per run:

    python3 cases.py CASE [--pin 0|1] [--steps N] [--seconds S]

tests/torch/run.py runs each case natively and under the shim and compares.
A case prints, one per line:

    DIGEST name value     a value that must be the same natively and under the
                          shim (an exact checksum of a result's bytes)
    CHECK name ok|FAIL detail   a check the run makes of itself
    FIGURE name value unit      a measurement
    # text                      information

and exits 0 when every CHECK is ok, 1 when one is not, 77 when torch or a
GPU is missing. Cases:

    copies      every copy form: .cpu(), .to() both ways with and without
                non_blocking, copy_ into pageable and pinned tensors, slices and
                non-contiguous tensors, odd sizes, dtype changes, .item(),
                .tolist(), torch.save/torch.load of CUDA tensors, across GPUs
    dataloader  a DataLoader without pin_memory (2 workers), batches to the GPU
    train       a training loop; its weights must be bit-identical
    graph       CUDA graph capture and replay, inputs copied in, outputs out
    d2h_vs_launch
                one thread copies 256 MiB tensors to fresh CPU tensors, another
                launches small kernels (as a user's program did): worst
                launch, D2H GB/s
    cnn         a DataLoader CNN job: 64x3x64x64 batches, 2
                workers, pin_memory per --pin, .to('cuda', non_blocking=True),
                loss.item() each step: steps/s, the weights, and whether the
                loader pins (under tools/unstall --pin-dataloader it does with
                --pin 0)
    ddp         under torchrun, one process per GPU: DDP with pageable batches
                and a .cpu() per step: steps/s and the weights per rank
    strict      under the shim's strict mode: a pageable .cpu() fails, named by
                its line (tools/pytest_unstall.strict_section), .item() and
                pinned copies pass

Results are checked with checksum(): an exact, position-weighted sum of a
tensor's bytes computed where the tensor is (CPU or GPU), so that checking a
copy does not need another copy.
"""
import argparse
import hashlib
import io
import os
import sys
import tempfile
import threading
import time

T_START = time.perf_counter()  # the process's start, near enough: for the time to a first step

# cuBLAS is deterministic on one stream only with a fixed workspace
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    print(f"# torch not importable: {e}")
    sys.exit(77)

# The device under test; TORCH_TEST_DEVICE=cpu runs what can run without a
# GPU (development only: run.py never sets it).
DEV = torch.device(os.environ.get("TORCH_TEST_DEVICE", "cuda:0"))
ON_GPU = DEV.type == "cuda"
MiB = 1 << 20
failures = 0


def say(kind, name, *rest):
    print(kind, name, *rest, flush=True)


def check(name, ok, detail=""):
    global failures
    if not ok:
        failures += 1
    say("CHECK", name, "ok" if ok else "FAIL", detail)


def figure(name, value, unit):
    say("FIGURE", name, f"{value:.6g}" if isinstance(value, float) else value, unit)


def checksum(t):
    """An exact checksum of t's bytes, computed on t's device: the sum of its
    16-bit words and their sum weighted by position (mod 65521, plus 1). No
    sum can overflow int64 below 2^31 words, so CPU and GPU agree exactly."""
    b = t.detach().contiguous().reshape(-1).view(torch.uint8)
    if b.numel() % 2:
        b = torch.cat([b, b.new_zeros(1)])
    w = b.view(torch.int16).to(torch.int64)
    idx = torch.arange(w.numel(), device=w.device, dtype=torch.int64)
    s1 = int(w.sum().item())
    s2 = int((w * (idx % 65521 + 1)).sum().item())
    return f"{t.numel()}:{s1:x}:{s2:x}"


def same(name, got, want_sum):
    """DIGEST of a result and a CHECK that it equals the expected checksum."""
    got_sum = checksum(got)
    say("DIGEST", name, got_sum)
    check(name, got_sum == want_sum, "" if got_sum == want_sum else f"got {got_sum} want {want_sum}")


def sync():
    if ON_GPU:
        torch.cuda.synchronize()


def pinned(t):
    return t.pin_memory() if ON_GPU else t.clone()


def empty_pinned(shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, pin_memory=ON_GPU)


# --- copies ------------------------------------------------------------------------------------

# float32 elements: 4 B to 64 MiB, around the shim's 2 MiB H2D threshold and
# its 8 MiB slots, and sizes that are not a multiple of a slot
SIZES = [1, 3, 1025, MiB // 4, (2 * MiB - 4) // 4, 2 * MiB // 4, (2 * MiB + 4) // 4,
         (8 * MiB + 12) // 4, (33 * MiB + 20) // 4, 64 * MiB // 4]


def case_copies(args):
    g = torch.Generator(device=DEV)
    g.manual_seed(1234)
    cpu_g = torch.Generator().manual_seed(4321)
    t0 = time.perf_counter()
    for n in SIZES:
        tag = f"n{n}"
        x = torch.randn(n, device=DEV, generator=g)
        want = checksum(x)
        # D2H
        same(f"{tag}.cpu", x.cpu(), want)
        same(f"{tag}.to_cpu", x.to("cpu"), want)
        y = x.to("cpu", non_blocking=True)
        sync()
        same(f"{tag}.to_cpu_non_blocking", y, want)
        dst = torch.empty(n)
        dst.copy_(x)
        same(f"{tag}.copy_into_pageable", dst, want)
        # read at once, without a sync: a pageable D2H returns with the data in place
        dst = torch.full((n,), -7.0)
        dst.copy_(x, non_blocking=True)
        same(f"{tag}.copy_into_pageable_non_blocking_read_at_once", dst, want)
        dst = empty_pinned(n)
        dst.copy_(x)
        same(f"{tag}.copy_into_pinned", dst, want)
        dst = empty_pinned(n)
        dst.copy_(x, non_blocking=True)
        sync()
        same(f"{tag}.copy_into_pinned_non_blocking", dst, want)
        # H2D
        h = torch.randn(n, generator=cpu_g)
        hwant = checksum(h)
        same(f"{tag}.to_cuda", h.to(DEV), hwant)
        d = h.to(DEV, non_blocking=True)
        h.fill_(-1.0)  # the source may be reused at once: the copy took it
        sync()
        same(f"{tag}.to_cuda_non_blocking_source_reused", d, hwant)
        h = torch.randn(n, generator=cpu_g)
        hwant = checksum(h)
        d = torch.empty(n, device=DEV)
        d.copy_(h)
        same(f"{tag}.copy_from_pageable", d, hwant)
        d = torch.zeros(n, device=DEV)
        d.copy_(h, non_blocking=True)
        h.fill_(-2.0)
        sync()
        same(f"{tag}.copy_from_pageable_non_blocking_source_reused", d, hwant)
        p = pinned(torch.randn(n, generator=cpu_g))
        pwant = checksum(p)
        d = p.to(DEV, non_blocking=True)
        sync()
        same(f"{tag}.pinned_to_cuda_non_blocking", d, pwant)
        # round trip behind queued work on the stream: stream order kept
        if n >= MiB // 4:
            a = torch.randn(2048, 2048, device=DEV, generator=g)
            for _ in range(8):
                a = torch.tanh(a @ a)
            h = torch.randn(n, generator=cpu_g)
            hwant = checksum(h)
            d = h.to(DEV, non_blocking=True)
            d.add_(1.0)
            d.sub_(1.0)
            back = d.cpu()
            check(f"{tag}.roundtrip_behind_work", torch.equal(back, (h + 1.0) - 1.0))
            say("DIGEST", f"{tag}.roundtrip_behind_work", checksum(back))
            del a
    figure("copies_sizes_seconds", time.perf_counter() - t0, "s")

    # slices and non-contiguous tensors, both ways
    rows, cols = 1531, 2053  # about 12 MiB of float32, odd strides
    x = torch.randn(rows, cols, device=DEV, generator=g)
    xc = x.cpu()
    check("full_2d.cpu", checksum(xc) == checksum(x))
    views = {
        "slice_offset": lambda t: t.reshape(-1)[7:7 + 3 * MiB // 4 + 5],
        "row_block": lambda t: t[100:900],
        "column": lambda t: t[:, 3],
        "columns_strided": lambda t: t[::2, 1::3],
        "transpose": lambda t: t.t(),
        "narrow_tail": lambda t: t[:, cols - 17:],
    }
    for name, view in views.items():
        v = view(x)
        want = checksum(v)
        same(f"{name}.cpu", v.cpu(), want)
        y = v.to("cpu", non_blocking=True)
        sync()
        same(f"{name}.to_cpu_non_blocking", y, want)
        dst = torch.full(tuple(v.shape), 3.0)
        dst.copy_(v)
        same(f"{name}.copy_into_pageable", dst, want)
        # copy_ into a view of a larger CPU tensor: the bytes outside stay
        big = torch.full((rows, cols), 5.0)
        view(big).copy_(v)
        expect = torch.full((rows, cols), 5.0)
        view(expect).copy_(view(xc))
        same(f"{name}.copy_into_cpu_view", big, checksum(expect))
        # H2D of the same view of a CPU tensor, and into a view of a GPU tensor
        hv = view(xc)
        same(f"{name}.cpu_view_to_cuda", hv.to(DEV), checksum(hv))
        same(f"{name}.cpu_view_to_cuda_non_blocking", hv.to(DEV, non_blocking=True), checksum(hv))
        gbig = torch.zeros(rows, cols, device=DEV)
        view(gbig).copy_(hv, non_blocking=True)
        gexpect = torch.zeros(rows, cols)
        view(gexpect).copy_(hv)
        same(f"{name}.copy_into_cuda_view", gbig, checksum(gexpect))

    # odd byte counts and dtype changes on the way
    for n in (1, 3, 4097, 3 * MiB + 1, 9 * MiB + 7):
        u = torch.randint(0, 256, (n,), dtype=torch.uint8, device=DEV, generator=g)
        same(f"u8_{n}.cpu", u.cpu(), checksum(u))
        hu = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=cpu_g)
        same(f"u8_{n}.to_cuda_non_blocking", hu.to(DEV, non_blocking=True), checksum(hu))
    x = torch.randn(5 * MiB // 4 + 3, device=DEV, generator=g)
    same("float_to_cpu_double", x.to("cpu", torch.float64), checksum(x.double()))
    y = x.to("cpu", torch.float16, non_blocking=True)
    sync()
    same("float_to_cpu_half_non_blocking", y, checksum(x.half()))
    h = torch.randn(5 * MiB // 4 + 3, generator=cpu_g)
    same("cpu_float_to_cuda_bfloat16", h.to(DEV, torch.bfloat16), checksum(h.bfloat16()))

    # .item() and .tolist()
    v = torch.arange(1000, dtype=torch.float64, device=DEV)
    s = v.sum().item()
    check("item_sum", s == 499500.0, f"{s}")
    say("DIGEST", "item_sum", repr(s))
    i = int(torch.argmax(v).item())
    check("item_argmax", i == 999, f"{i}")
    small = torch.tensor([1.5, -2.25, 3.0], device=DEV)
    check("tolist_small", small.tolist() == [1.5, -2.25, 3.0], f"{small.tolist()}")
    x = torch.randn(3 * MiB // 4, device=DEV, generator=g)
    lst = x.tolist()
    ref = x.cpu()
    check("tolist_3MiB", len(lst) == ref.numel() and lst[::4099] == ref[::4099].tolist())
    say("DIGEST", "tolist_3MiB", hashlib.sha256(repr(lst[::97]).encode()).hexdigest()[:32])
    m = torch.randn(37, 53, device=DEV, generator=g)
    check("tolist_2d", m.tolist() == m.cpu().tolist())
    check("bool_of_cuda_tensor", bool((v > 998).any()) is True)

    # torch.save / torch.load of CUDA tensors, to memory and to a file
    state = {
        "a": torch.randn(9 * MiB // 4 + 1, device=DEV, generator=g),
        "b": torch.randn(1000, 333, device=DEV, generator=g)[:, ::3],
        "c": torch.randint(0, 256, (4 * MiB + 3,), dtype=torch.uint8, device=DEV, generator=g),
        "small": torch.tensor([7], device=DEV),
    }
    want = {k: checksum(v) for k, v in state.items()}
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded = torch.load(buf, map_location="cpu")
    for k in state:
        same(f"save_load_cpu.{k}", loaded[k], want[k])
    buf.seek(0)
    loaded = torch.load(buf)  # back onto the GPU: H2D copies
    for k in state:
        check(f"save_load_device.{k}", loaded[k].device == state[k].device)
        same(f"save_load_cuda.{k}", loaded[k], want[k])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "state.pt")
        torch.save(state, path)
        loaded = torch.load(path, map_location="cpu")
        for k in state:
            same(f"save_file.{k}", loaded[k], want[k])

    # across GPUs
    if ON_GPU and torch.cuda.device_count() >= 2:
        d1 = torch.device("cuda:1")
        for n in (MiB // 4, 33 * MiB // 4 + 5):
            x = torch.randn(n, device=DEV, generator=g)
            want = checksum(x)
            same(f"peer_{n}.to_cuda1", x.to(d1), want)
            y = x.to(d1, non_blocking=True)
            torch.cuda.synchronize(0)
            torch.cuda.synchronize(1)
            same(f"peer_{n}.to_cuda1_non_blocking", y, want)
            z = torch.empty(n, device=d1)
            z.copy_(x)
            same(f"peer_{n}.copy_into_cuda1", z, want)
            same(f"peer_{n}.back_to_cuda0", z.to(DEV), want)
            same(f"peer_{n}.cuda1.cpu", z.cpu(), want)
    else:
        say("#", "one GPU: the cross-GPU copies are left out")


# --- a DataLoader without pin_memory -----------------------------------------------------------

class Synthetic(torch.utils.data.Dataset):
    """Samples made from their index: the same in every process."""

    def __init__(self, count, shape):
        self.count, self.shape = count, shape

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(1000 + i)
        return torch.randn(self.shape, generator=g), i % 10


def case_dataloader(args):
    ds = Synthetic(64 * 24, (3, 64, 64))
    loader = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=2, pin_memory=False, shuffle=True,
                                         generator=torch.Generator().manual_seed(7))
    sums = []
    ok = True
    for step, (xb, yb) in enumerate(loader):
        want = checksum(xb)
        if step % 2:
            xd = xb.to(DEV, non_blocking=True)
            yd = yb.to(DEV, non_blocking=True)
        else:
            xd = xb.to(DEV)
            yd = yb.to(DEV)
        got = checksum(xd)
        ok = ok and got == want and torch.equal(yd.cpu(), yb)
        sums.append(got)
        sums.append(float((xd * xd).sum(dtype=torch.float64).item()))
    check("dataloader_batches", ok and len(sums) == 2 * 24, f"{len(sums) // 2} batches")
    say("DIGEST", "dataloader_batches", hashlib.sha256(repr(sums).encode()).hexdigest()[:32])


# --- a training loop ---------------------------------------------------------------------------

def deterministic():
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)


def weights_digest(model):
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        c = p.detach().cpu().contiguous()
        h.update(name.encode())
        h.update(checksum(c).encode())
    return h.hexdigest()[:32]


def one_hot_loss(out, target):
    """Cross entropy through a one-hot mask: no scatter, so the backward pass
    has no atomics and the weights are bit-reproducible."""
    return -(F.log_softmax(out, dim=1) * target).sum(dim=1).mean()


def case_train(args):
    deterministic()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    cpu_g = torch.Generator().manual_seed(11)
    steps = args.steps or 200
    losses = []
    t0 = time.perf_counter()
    for step in range(steps):
        xb = torch.randn(1024, 512, generator=cpu_g)  # 2 MiB, pageable
        yb = F.one_hot(torch.randint(0, 10, (1024,), generator=cpu_g), 10).float()
        xd = xb.to(DEV, non_blocking=True)
        yd = yb.to(DEV, non_blocking=True)
        loss = one_hot_loss(model(xd), yd)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if step % 10 == 0:
            losses.append(float(model[0].weight.detach().cpu()[0, 0]))
    figure("train_steps_per_s", steps / (time.perf_counter() - t0), "steps/s")
    check("train_loss_finite", all(v == v for v in losses))
    say("DIGEST", "train_losses", hashlib.sha256(repr(losses).encode()).hexdigest()[:32])
    say("DIGEST", "train_weights", weights_digest(model))


# --- CUDA graph capture and replay -------------------------------------------------------------

def case_graph(args):
    if not ON_GPU:
        say("#", "graphs need a GPU")
        return
    deterministic()
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1024)).to(DEV)
    static_in = torch.zeros(1024, 1024, device=DEV)  # 4 MiB: the shim stages its pageable H2D
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad():
        with torch.cuda.stream(side):
            for _ in range(3):
                model(static_in)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(static_in)
            static_copy = static_out * 2.0
    cpu_g = torch.Generator().manual_seed(5)
    outs = []
    ok = True
    for i in range(20):
        host = torch.randn(1024, 1024, generator=cpu_g)  # pageable
        keep = host.clone()
        if i % 2:
            static_in.copy_(host, non_blocking=True)  # must land before the replay reads it
            host.fill_(0.0)
        else:
            static_in.copy_(host)
        graph.replay()
        out = static_out.cpu()
        ok = ok and torch.equal(static_copy.cpu(), out * 2.0)
        # the same input again, copied with nothing pending: the same output
        static_in.zero_()
        static_in.copy_(keep)
        graph.replay()
        ok = ok and torch.equal(static_out.cpu(), out)
        outs.append(checksum(out))
    check("graph_replay_ordered_after_copies", ok)
    say("DIGEST", "graph_outputs", hashlib.sha256(repr(outs).encode()).hexdigest()[:32])
    # a second graph, replayed between replays of the first
    g2 = torch.cuda.CUDAGraph()
    a = torch.randn(512, 512, device=DEV)
    with torch.cuda.graph(g2):
        b = a * 3.0 + 1.0
    g2.replay()
    graph.replay()
    torch.cuda.synchronize()
    check("graph_second_capture", torch.equal(b.cpu(), (a * 3.0 + 1.0).cpu()))


# --- d2h_vs_launch: a D2H thread and a launching thread ---------------------------------------

def case_d2h_vs_launch(args):
    if not ON_GPU:
        say("#", "d2h_vs_launch needs a GPU")
        return
    seconds = args.seconds or 3.0
    src = torch.empty(64 * MiB, dtype=torch.float32, device=DEV)  # 256 MiB
    src.uniform_(0, 1, generator=torch.Generator(device=DEV).manual_seed(2))
    launch_x = torch.randn(1024, device=DEV)
    for _ in range(5):
        torch.sin(launch_x)  # the kernel warmed up; no copy yet: the first copies count
    torch.cuda.synchronize()
    sample_idx = torch.arange(0, src.numel(), 4099, device=DEV)
    start, stop = threading.Event(), threading.Event()
    lat, copies, copy_time, bad = [], [0], [0.0], []
    first_dst = []

    def d2h():
        start.wait()
        t_begin = time.perf_counter()
        while not stop.is_set():
            dst = torch.empty_like(src, device="cpu")  # fresh pageable memory
            dst.copy_(src, non_blocking=False)
            copies[0] += 1
            if not first_dst:
                first_dst.append(dst)
            elif copies[0] % 8 == 0:
                bad.append(dst[::4099].clone())
        copy_time[0] = time.perf_counter() - t_begin

    def launcher():
        start.wait()
        while not stop.is_set():
            t = time.perf_counter()
            torch.sin(launch_x)
            lat.append(time.perf_counter() - t)

    ta = threading.Thread(target=d2h)
    tb = threading.Thread(target=launcher)
    ta.start()
    tb.start()
    start.set()
    time.sleep(seconds)
    stop.set()
    ta.join()
    tb.join()
    torch.cuda.synchronize()
    ref = src.cpu()
    ok = bool(first_dst) and torch.equal(first_dst[0], ref)
    ref_sample = src[sample_idx].cpu()
    ok = ok and all(torch.equal(s, ref_sample) for s in bad)
    check("d2h_vs_launch_copies_equal", ok, f"{copies[0]} copies, the first in full, {len(bad)} sampled")
    lat.sort()
    figure("d2h_vs_launch_worst_launch_ms", lat[-1] * 1e3 if lat else -1.0, "ms")
    figure("d2h_vs_launch_p99_launch_ms", lat[int(0.99 * (len(lat) - 1))] * 1e3 if lat else -1.0, "ms")
    figure("d2h_vs_launch_launches", len(lat), "launches")
    figure("d2h_vs_launch_copies", copies[0], "copies")
    gbps = copies[0] * src.numel() * 4 / copy_time[0] / 1e9 if copy_time[0] > 0 else 0.0
    figure("d2h_vs_launch_d2h_gbps", gbps, "GB/s")
    say("DIGEST", "d2h_vs_launch_source", checksum(ref))


# --- the DataLoader CNN job ----------------------------------------------------------------------

class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.c3 = nn.Conv2d(64, 128, 3, stride=2, padding=1)
        self.c4 = nn.Conv2d(128, 128, 3, stride=2, padding=1)
        self.fc = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.c1(x))
        x = F.relu(self.c2(x))
        x = F.relu(self.c3(x))
        x = F.relu(self.c4(x))
        return self.fc(x.mean(dim=(2, 3)))  # no pooling kernel: a deterministic backward


class InMemory(torch.utils.data.Dataset):
    """Images held by the parent: the workers read them (copy-on-write after
    fork) and collate each batch into fresh shared memory, as a real loader
    of decoded images does."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return self.images.shape[0]

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


def case_cnn(args):
    deterministic()
    steps = args.steps or 400
    warmup = 30
    g = torch.Generator().manual_seed(3)
    images = torch.randn(64 * 40, 3, 64, 64, generator=g)
    labels = torch.randint(0, 10, (64 * 40,), generator=g)
    loader = torch.utils.data.DataLoader(InMemory(images, labels), batch_size=64, num_workers=2,
                                         pin_memory=bool(args.pin), shuffle=True, drop_last=True,
                                         generator=torch.Generator().manual_seed(4), persistent_workers=True)
    # what the loader does, whatever --pin asked: option pin_dataloader may have changed it
    figure("cnn_loader_pin_memory", 1 if loader.pin_memory else 0, "bool")
    torch.manual_seed(0)
    model = SmallCNN().to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    eye = torch.eye(10, device=DEV)
    step = 0
    t0 = None
    losses = []
    # --profile: the measured steps' time by part (the loader's next batch,
    # the two H2D calls, the model's work as issued, loss.item()'s wait)
    parts = {"next": 0.0, "to": 0.0, "issue": 0.0, "item": 0.0}
    clock = time.perf_counter
    while step < steps + warmup:
        it = iter(loader)
        while True:
            ta = clock()
            try:
                xb, yb = next(it)
            except StopIteration:
                break
            if step == warmup:
                t0 = clock()
            if step == steps + warmup:
                break
            tb = clock()
            xd = xb.to(DEV, non_blocking=True)
            yd = yb.to(DEV, non_blocking=True)
            tc = clock()
            loss = one_hot_loss(model(xd), eye[yd])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            td = clock()
            losses.append(loss.item())
            te = clock()
            if step == 0:
                figure("cnn_first_step_s", te - T_START, "s")
            if step >= warmup:
                for k, v in (("next", tb - ta), ("to", tc - tb), ("issue", td - tc), ("item", te - td)):
                    parts[k] += v
            step += 1
        if step == steps + warmup:
            break
    elapsed = clock() - t0
    figure("cnn_steps_per_s", steps / elapsed, "steps/s")
    if args.profile:
        for k, v in parts.items():
            figure(f"cnn_ms_{k}", 1e3 * v / steps, "ms/step")
    check("cnn_loss_finite", all(v == v for v in losses))
    say("DIGEST", "cnn_losses", hashlib.sha256(repr(losses).encode()).hexdigest()[:32])
    say("DIGEST", "cnn_weights", weights_digest(model))


# --- DDP under torchrun ------------------------------------------------------------------------

def case_ddp(args):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    rank = int(os.environ["RANK"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    try:
        dist.init_process_group("nccl", device_id=dev)
    except TypeError:  # torch before 2.3
        dist.init_process_group("nccl")
    deterministic()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 10)).to(dev), device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    cpu_g = torch.Generator().manual_seed(100 + rank)
    steps = args.steps or 300
    warmup = 20
    outs = []
    for step in range(steps + warmup):
        if step == warmup:
            dist.barrier()
            t0 = time.perf_counter()
        if args.fail_at and rank == 1 and step == args.fail_at:
            # a rank that fails: torchrun then ends the other one with SIGTERM
            raise RuntimeError(f"rank 1 fails on purpose at step {step}")
        xb = torch.randn(1024, 1024, generator=cpu_g)  # 4 MiB pageable batch
        yb = F.one_hot(torch.randint(0, 10, (1024,), generator=cpu_g), 10).float()
        out = model(xb.to(dev, non_blocking=True))
        loss = one_hot_loss(out, yb.to(dev, non_blocking=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        outs.append(checksum(out.detach().cpu()))  # a .cpu() per step
    elapsed = time.perf_counter() - t0
    figure(f"ddp_steps_per_s_rank{rank}", steps / elapsed, "steps/s")
    say("DIGEST", f"ddp_outputs_rank{rank}", hashlib.sha256(repr(outs).encode()).hexdigest()[:32])
    say("DIGEST", f"ddp_weights_rank{rank}", weights_digest(model.module))
    dist.barrier()
    dist.destroy_process_group()


# --- strict mode ---------------------------------------------------------------------------------

def case_strict(args):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    import pytest_unstall
    if not pytest_unstall.shim_loaded():
        check("strict_shim_loaded", False, "run under tools/unstall --strict")
        return
    x = torch.randn(4 * MiB, device=DEV)
    torch.cuda.synchronize()
    raised = None
    try:
        with pytest_unstall.strict_section(__file__):
            x.cpu()  # STRICT-LINE: a pageable D2H
    except pytest_unstall.ImplicitSyncError as e:
        raised = str(e)
        cause = repr(e.__cause__)
    else:
        cause = "nothing"
    print("# torch raised:", cause)
    check("strict_torch_raised", "not permitted" in cause, "torch's error for cudaErrorNotPermitted")
    marker = "# STRICT" + "-LINE"
    with open(__file__) as f:
        line = next(i for i, text in enumerate(f, 1) if marker in text)
    print("# strict mode said:", (raised or "nothing").replace("\n", " | "))
    check("strict_pageable_cpu_fails", raised is not None and "pageable_d2h" in raised)
    if sys.version_info[:2] in ((3, 11), (3, 12)):
        check("strict_names_the_line", raised is not None and f"cases.py:{line}" in raised,
              f"cases.py:{line} expected")
    else:  # PyTorch releases the GIL: the shim reads the frames of 3.11 and 3.12 only
        print(f"# Python {sys.version_info[0]}.{sys.version_info[1]}: the line is not named (3.11, 3.12 only)")
    count = pytest_unstall.strict_failures()[0]
    with pytest_unstall.strict_section(__file__):
        p = torch.empty(4 * MiB, pin_memory=True)
        p.copy_(x, non_blocking=True)
        torch.cuda.synchronize()
        s = x.sum().item()  # explicit_sync: low, allowed at the default strict_severity
    check("strict_pinned_and_item_pass", pytest_unstall.strict_failures()[0] == count and s == s)


CASES = {
    "copies": case_copies, "dataloader": case_dataloader, "train": case_train, "graph": case_graph,
    "d2h_vs_launch": case_d2h_vs_launch, "cnn": case_cnn, "ddp": case_ddp, "strict": case_strict,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--pin", type=int, default=0, help="cnn: pin_memory")
    ap.add_argument("--steps", type=int, default=0, help="train, cnn, ddp: steps measured")
    ap.add_argument("--fail-at", type=int, default=0, help="ddp: rank 1 raises at this step (0: never)")
    ap.add_argument("--seconds", type=float, default=0.0, help="d2h_vs_launch: how long the threads run")
    ap.add_argument("--profile", type=int, default=0,
                    help="cnn: also where each measured step's time goes (mean ms of each part)")
    args = ap.parse_args()
    if ON_GPU and not torch.cuda.is_available():
        print("# torch sees no GPU")
        return 77
    if ON_GPU and args.case != "ddp":
        print(f"# torch {torch.__version__}, {torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}")
    CASES[args.case](args)
    print(f"# {args.case}: {failures} check(s) failed", flush=True)
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
