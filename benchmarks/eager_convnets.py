"""Eager training steps (no compile) of two small convolutional networks:
``import tracec as torch`` against PyTorch eager, the same model code, batch
and optimizer.

- ``mbv2``: a MobileNetV2-like stack of inverted residual blocks (1x1
  expansion, 3x3 depthwise convolution with stride 1 or 2, 1x1 projection,
  each followed by BatchNorm in training mode, ReLU6 between, residual adds
  where shapes allow), global average pooling, a linear head,
  cross-entropy, SGD with momentum; batch 16 of 3x32x32.
- ``conv1d``: a residual stack of 1-D convolution blocks like a diffusion
  U-Net's (Conv1d k=3, GroupNorm, SiLU, a dilated and a grouped Conv1d, a
  1x1 residual projection where the width changes, a stride-2 Conv1d
  downsample), MSE loss, Adam; batch 16 of 8x64.

Prints, per model, the best CPU time per step (``time.process_time``) of
tracec and of PyTorch and their ratio tracec / torch (lower is better).
Both run on ``--threads`` threads (default 1); the libraries' runs alternate
so that a busy spell slows both alike.  ``--profile MODEL`` prints
tracec's cProfile of one step.

    python benchmarks/eager_convnets.py [--models mbv2,conv1d] [--threads 1]
        [--rounds 5] [--time 1.0] [--profile mbv2]

Measured 2026-11-30 (2 cores shared with three other jobs: +-10%; CPU ms
per step, tracec / torch), before and after the native depthwise
convolution and group-norm kernels (``backends/cpu/depthwise_kernels.py``,
``batch_norm_kernels.py``), in-place activations rebased onto their node
and where's 0-d condition as a copy:

    model    threads   before                after
    mbv2     1         155.5 / 57.7  2.70   106.8 / 62.2  1.72
    mbv2     1  TRACEC_NATIVE_BATCH_NORM=1:   67.1 / 65.2  1.03
    conv1d   1          18.5 / 10.0  1.84    14.1 / 10.6  1.33
    mbv2     2         450.5 / 306.8 1.47   261.3 / 516.8 0.51
    conv1d   2          53.4 / 80.9  0.66    70.2 / 895.2 0.08

With 2 threads on the busy box PyTorch's CPU time grows far more than its
wall time saves (spinning threads); tracec's native kernels run on one
thread.  MobileNetV2's step by part, tracec before -> after, 1 thread:
depthwise convolutions ~48 -> ~22 ms (PyTorch: ~7), where (ReLU6 in
place) 21 -> 5 ms, batch norm 41 ms (14 ms with its native kernels, which
are off by default: see ``_batch_norm_eager.NATIVE_BATCH_NORM``).
"""
from __future__ import annotations

import argparse
import os

_p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
_p.add_argument("--models", default="mbv2,conv1d")
_p.add_argument("--threads", type=int, default=1)
_p.add_argument("--rounds", type=int, default=5)
_p.add_argument("--time", type=float, default=1.0, help="CPU seconds per library and round")
_p.add_argument("--profile", default=None, help="print tracec's profile of this model's step")
_p.add_argument("--sort", default="tottime", help="the profile's sort key")
ARGS = _p.parse_args()

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
           "TRACEC_NUM_THREADS"):
    os.environ[_v] = str(ARGS.threads)   # before NumPy loads its BLAS

import cProfile  # noqa: E402
import pstats  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import tracec  # noqa: E402

try:
    import torch
    torch.set_num_threads(ARGS.threads)
except ImportError:  # pragma: no cover - torch is optional here
    torch = None


def _mbv2(torch):
    nn = torch.nn

    def conv_bn(cin, cout, k, stride=1, groups=1, act=True):
        layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, nn.ReLU6(inplace=True)) if act else nn.Sequential(*layers)

    class Inverted(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hid = cin * expand
            self.res = stride == 1 and cin == cout
            self.body = nn.Sequential(conv_bn(cin, hid, 1), conv_bn(hid, hid, 3, stride, hid),
                                      conv_bn(hid, cout, 1, act=False))

        def forward(self, x):
            y = self.body(x)
            return x + y if self.res else y

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            cfg = [(16, 1, 1), (24, 2, 6), (24, 1, 6), (32, 2, 6), (32, 1, 6), (64, 2, 6),
                   (64, 1, 6)]
            layers, cin = [conv_bn(3, 16, 3, 1)], 16
            for cout, s, e in cfg:
                layers.append(Inverted(cin, cout, s, e))
                cin = cout
            self.features = nn.Sequential(*layers)
            self.head = nn.Linear(cin, 10)

        def forward(self, x):
            return self.head(self.features(x).mean((2, 3)))

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=4e-5)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((16, 3, 32, 32)).astype(np.float32))
    t = torch.tensor(rng.integers(0, 10, 16))
    lossf = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss = lossf(model(x), t)
        loss.backward()
        opt.step()
        return loss
    return step


def _conv1d(torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin, cout, dilation=1, groups=1):
            super().__init__()
            self.c1 = nn.Conv1d(cin, cout, 3, padding=dilation, dilation=dilation)
            self.n1 = nn.GroupNorm(4, cout)
            self.c2 = nn.Conv1d(cout, cout, 3, padding=1, groups=groups)
            self.n2 = nn.GroupNorm(4, cout)
            self.act = nn.SiLU()
            self.skip = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x):
            h = self.act(self.n1(self.c1(x)))
            h = self.act(self.n2(self.c2(h)))
            return h + self.skip(x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Conv1d(8, 32, 7, padding=3)
            self.b1 = Block(32, 32)
            self.b2 = Block(32, 64, dilation=2, groups=4)
            self.down = nn.Conv1d(64, 64, 4, 2, 1)
            self.b3 = Block(64, 64, groups=64)
            self.b4 = Block(64, 32)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.out = nn.Conv1d(32, 8, 1)

        def forward(self, x):
            h = self.b2(self.b1(self.inp(x)))
            h = self.b4(self.b3(self.down(h)))
            return self.out(self.up(h))

    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((16, 8, 64)).astype(np.float32))
    target = torch.tensor(rng.standard_normal((16, 8, 64)).astype(np.float32))

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
        return loss
    return step


MODELS = {"mbv2": _mbv2, "conv1d": _conv1d}


def _round(step, budget: float) -> float:
    """CPU ms per step over one round of at least ``budget`` CPU seconds."""
    n, t0 = 0, time.process_time()
    while True:
        step()
        n += 1
        el = time.process_time() - t0
        if el >= budget and n >= 2:
            return el / n * 1e3


def main():
    names = [m for m in ARGS.models.split(",") if m]
    print(f"eager training step, CPU ms per step (best of {ARGS.rounds} rounds), "
          f"{ARGS.threads} thread(s)")
    print(f"{'model':8s} {'tracec':>10s} {'torch':>10s} {'tracec/torch':>13s}")
    for name in names:
        libs = [("tracec", tracec)] + ([("torch", torch)] if torch is not None else [])
        runs = {}
        for lib, mod in libs:
            mod.manual_seed(0)
            step = MODELS[name](mod)
            for _ in range(2):
                step()            # warm up (first-call caches, allocator)
            runs[lib] = step
        if ARGS.profile == name:
            prof = cProfile.Profile()
            prof.runcall(runs["tracec"])
            pstats.Stats(prof).sort_stats(ARGS.sort).print_stats(30)
        best = {lib: float("inf") for lib in runs}
        for _ in range(ARGS.rounds):
            for lib, step in runs.items():
                best[lib] = min(best[lib], _round(step, ARGS.time / ARGS.rounds))
        t = best["tracec"]
        if "torch" in best:
            print(f"{name:8s} {t:10.1f} {best['torch']:10.1f} {t / best['torch']:13.2f}")
        else:
            print(f"{name:8s} {t:10.1f} {'-':>10s} {'-':>13s}")


if __name__ == "__main__":
    main()
