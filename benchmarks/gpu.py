"""GPU benchmarks of backend="cuda" (issue 13), as ratios; runs only where
CuPy sees a CUDA GPU (``pip install 'tracec[cuda]'``), else says why and
exits 0.

* elementwise chain ``relu(a*b + 1) * 0.5 - b`` on 16M and 128M float32: achieved
  GB/s (3 arrays moved) against the card's copy bandwidth (CuPy
  device-to-device copy of the same bytes, 2 arrays moved);
* GEMM (1024^3, 2048^3 and 4096^3 float32): tracec's register-tiled matmul
  kernel against CuPy's ``@`` (cuBLAS);
* the MLP training step (784-512-512-10, SGD momentum, batch 256): compiled
  tracec on cuda against PyTorch CUDA eager where torch sees the GPU.

Usage: ``python benchmarks/gpu.py [--repeat N]``.  Times are medians of
``repeat`` runs after warm-up, synchronized with the device.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np


def _timed(fn, sync, repeat):
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _run_module(fn, args):
    """A ``tracec.compile``d function's executable on device arrays (the
    plan runs on CuPy arrays: no host copies inside the timed loop)."""
    import tracec
    comp = tracec.compile(fn, backend="cuda")
    comp(*args)
    comp(*args)
    return comp._last.executable


def elementwise(cp, repeat):
    """At 16M elements the call's host-side work (buffers, launches, the
    error word's read) shows; at 128M the kernel's bandwidth does."""
    import tracec
    for log2 in (24, 27):
        n = 1 << log2
        a = tracec.randn(n)
        b = tracec.randn(n)
        exe = _run_module(lambda x, y: (x * y + 1.0).relu() * 0.5 - y, (a, b))
        da, db = cp.asarray(a.numpy()), cp.asarray(b.numpy())
        t = _timed(lambda: exe([da, db]), cp.cuda.Device().synchronize, repeat)
        dst = cp.empty_like(da)
        tc = _timed(lambda: dst.__setitem__(Ellipsis, da), cp.cuda.Device().synchronize, repeat)
        gbs, copy = 3 * 4 * n / t / 1e9, 2 * 4 * n / tc / 1e9
        print(f"elementwise chain {n >> 20}M f32: {gbs:.0f} GB/s; device copy {copy:.0f} GB/s; "
              f"ratio {gbs / copy:.2f} ({t * 1e6:.0f} us a call)")


def gemm(cp, repeat):
    import tracec
    for n in (1024, 2048, 4096):
        a, b = tracec.randn(n, n), tracec.randn(n, n)
        exe = _run_module(lambda x, y: x @ y, (a, b))
        da, db = cp.asarray(a.numpy()), cp.asarray(b.numpy())
        t = _timed(lambda: exe([da, db]), cp.cuda.Device().synchronize, repeat)
        tb = _timed(lambda: da @ db, cp.cuda.Device().synchronize, repeat)
        got = exe([da, db])[0]
        err = float(cp.abs(got - da @ db).max())
        print(f"GEMM {n}^3 f32: tracec {2 * n**3 / t / 1e9:.0f} GFLOP/s, cuBLAS "
              f"{2 * n**3 / tb / 1e9:.0f} GFLOP/s, ratio {tb / t:.2f} (max |diff| {err:.1e})")


def mlp(cp, repeat):
    import tracec
    import tracec.nn as nn
    import tracec.nn.functional as F
    tracec.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = tracec.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    comp = tracec.compile(step, backend="cuda")
    x, y = tracec.randn(256, 784), tracec.randint(0, 10, (256,))
    comp(x, y)
    comp(x, y)
    assert comp.cache_info().compiles == 1, comp.cache_info()
    # Host tensors: each call copies parameters to the device and back (no
    # eager CUDA tensors yet), which this figure includes.
    t = _timed(lambda: comp(x, y), cp.cuda.Device().synchronize, repeat)
    print(f"MLP step (batch 256, host tensors): tracec cuda {t * 1e3:.2f} ms")
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("torch sees no GPU")
    except ImportError as e:
        print(f"  PyTorch CUDA: not measured ({e})")
        return
    tm = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                             torch.nn.Linear(512, 512), torch.nn.ReLU(),
                             torch.nn.Linear(512, 10)).cuda()
    topt = torch.optim.SGD(tm.parameters(), lr=0.01, momentum=0.9)
    tx = torch.randn(256, 784, device="cuda")
    ty = torch.randint(0, 10, (256,), device="cuda")

    def tstep():
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tm(tx), ty).backward()
        topt.step()
    tt = _timed(tstep, torch.cuda.synchronize, repeat)
    print(f"  PyTorch CUDA eager {tt * 1e3:.2f} ms; ratio {tt / t:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    try:
        from tracec.backends.cuda.runtime import require_gpu
        cp = require_gpu()
    except Exception as e:  # noqa: BLE001 - no GPU here: nothing to measure
        print(f"benchmarks/gpu.py: skipped: {e}")
        return 0
    print(f"device: {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    np.random.seed(0)
    elementwise(cp, args.repeat)
    gemm(cp, args.repeat)
    mlp(cp, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
