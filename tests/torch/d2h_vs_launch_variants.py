#!/usr/bin/env python3
"""d2h_vs_launch_variants.py - the D2H-versus-launch case (tests/torch/cases.py
d2h_vs_launch) with what it needs to tell causes apart, one line per run (a GPU
and torch needed):

    python3 tests/torch/d2h_vs_launch_variants.py gpu|cpu [seconds]

gpu: one thread copies a 256 MiB CUDA tensor into fresh CPU tensors, as a
user's PyTorch program did;
cpu: the same from a CPU tensor, no CUDA in the copy: the floor that Python,
torch and the host set. Another thread launches small kernels. Prints the
launching thread's worst and p99 call, the copies' GB/s, and how long
dropping the previous tensor took (a free() made holding the GIL). Run it
natively, under the shim (LD_PRELOAD), with THP_MEM_ALLOC_ENABLE=1 (torch's
own huge-page CPU allocator) or UNSTALL_COPY_THREADS=N."""
import sys, time, threading, os
import torch
MiB = 1 << 20
mode = sys.argv[1]
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
DEV = torch.device("cuda:0")
src = torch.empty(64 * MiB, dtype=torch.float32, device=DEV)
src.uniform_(0, 1)
csrc = src.cpu() if mode == "cpu" else None
launch_x = torch.randn(1024, device=DEV)
for _ in range(5):
    torch.sin(launch_x)
torch.cuda.synchronize()
start, stop = threading.Event(), threading.Event()
lat, copies, ct, frees = [], [0], [0.0], []
def d2h():
    start.wait()
    t0 = time.perf_counter()
    dst = None
    while not stop.is_set():
        t = time.perf_counter(); dst = None; frees.append(time.perf_counter() - t)
        dst = torch.empty(src.shape, dtype=src.dtype, device="cpu")
        dst.copy_(csrc if csrc is not None else src)
        copies[0] += 1
    ct[0] = time.perf_counter() - t0
def launcher():
    start.wait()
    while not stop.is_set():
        t = time.perf_counter(); torch.sin(launch_x); lat.append(time.perf_counter() - t)
a = threading.Thread(target=d2h); b = threading.Thread(target=launcher)
a.start(); b.start(); start.set(); time.sleep(seconds); stop.set(); a.join(); b.join()
lat.sort(); frees.sort()
slow = sum(1 for x in lat if x > 1e-3)
print(f"D2H_VS_LAUNCH mode={mode} thp={os.environ.get('THP_MEM_ALLOC_ENABLE','0')} shim={'LD_PRELOAD' in os.environ} "
      f"worst_ms={lat[-1]*1e3:.2f} p99_ms={lat[int(0.99*(len(lat)-1))]*1e3:.3f} over1ms={slow} launches={len(lat)} "
      f"gbps={copies[0]*256*MiB/ct[0]/1e9:.2f} copies={copies[0]} free_ms_worst={frees[-1]*1e3:.2f} free_ms_med={frees[len(frees)//2]*1e3:.2f}", flush=True)
