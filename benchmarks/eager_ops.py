"""Eager ops at training sizes: tracec vs PyTorch, one thread.

Where ``eager_overhead.py`` measures the per-op overhead on tiny tensors,
this measures the ops' own work on the sizes a training step feeds them
(float32: 256 x 1000 logits, 64 x 128 x 512 activations, 64 x 64 x 16 x 16
feature maps), to find ops whose NumPy implementation takes many more
passes than PyTorch's fused kernels.  Prints the best µs per call of each
library (fresh outputs each call, as in a step) and the ratio tracec /
torch (> 1: tracec slower), sorted by ratio with ``--sort``.

    python benchmarks/eager_ops.py [--number 20] [--repeat 5] [--ops gelu,silu] [--sort]
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TRACEC_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # before NumPy loads its BLAS

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import tracec  # noqa: E402

try:
    import torch  # noqa: E402
    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is optional here
    torch = None


def _inputs():
    rng = np.random.default_rng(0)
    return dict(
        A=rng.standard_normal((256, 1000)).astype(np.float32),     # logits
        Y=rng.integers(0, 1000, 256),                               # labels
        H=rng.standard_normal((64, 128, 512)).astype(np.float32),  # activations
        I=rng.standard_normal((64, 64, 16, 16)).astype(np.float32),  # feature maps
        E=rng.integers(0, 5000, (64, 128)),                         # token ids
        W=rng.standard_normal((5000, 256)).astype(np.float32),      # embedding table
        K=(rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32),   # conv weight
        Wl=(rng.standard_normal((512, 512)) / 22).astype(np.float32))      # linear weight


#: name: f(library, inputs as that library's tensors)
OPS = {
    "max(dim) values+indices": lambda L, a: L.max(a["A"], 1),
    "argmax": lambda L, a: a["A"].argmax(1),
    "topk(5) of 1000": lambda L, a: a["A"].topk(5, 1),
    "cross_entropy": lambda L, a: L.nn.functional.cross_entropy(a["A"], a["Y"]),
    "softmax": lambda L, a: L.softmax(a["A"], 1),
    "one_hot": lambda L, a: L.nn.functional.one_hot(a["Y"], 1000),
    "cumsum": lambda L, a: L.cumsum(a["A"], 1),
    "sort": lambda L, a: L.sort(a["A"], 1),
    "layer_norm": lambda L, a: L.nn.functional.layer_norm(a["H"], (512,)),
    "gelu": lambda L, a: L.nn.functional.gelu(a["H"]),
    "silu": lambda L, a: L.nn.functional.silu(a["H"]),
    "tanh": lambda L, a: L.tanh(a["H"]),
    "exp": lambda L, a: L.exp(a["H"]),
    "dropout": lambda L, a: L.nn.functional.dropout(a["H"], 0.1),
    "mean(-1)": lambda L, a: a["H"].mean(-1),
    "var(-1)": lambda L, a: a["H"].var(-1),
    "sum": lambda L, a: a["H"].sum(),
    "norm": lambda L, a: a["H"].norm(),
    "clamp(-1, 1)": lambda L, a: a["H"].clamp(-1, 1),
    "where(x > 0, x, 0)": lambda L, a: L.where(a["H"] > 0, a["H"], 0.0),
    "x ** 2": lambda L, a: a["H"] ** 2,
    "transpose + contiguous": lambda L, a: a["H"].transpose(1, 2).contiguous(),
    "cat": lambda L, a: L.cat([a["H"], a["H"]], 1),
    "batch_norm (training)": lambda L, a: L.nn.functional.batch_norm(a["I"], None, None,
                                                                      training=True),
    "max_pool2d": lambda L, a: L.nn.functional.max_pool2d(a["I"], 2),
    "avg_pool2d": lambda L, a: L.nn.functional.avg_pool2d(a["I"], 2),
    "embedding": lambda L, a: L.nn.functional.embedding(a["E"], a["W"]),
    "gelu(tanh)": lambda L, a: L.nn.functional.gelu(a["H"], approximate="tanh"),
    "mish": lambda L, a: L.nn.functional.mish(a["H"]),
    "softplus": lambda L, a: L.nn.functional.softplus(a["H"]),
    "elu": lambda L, a: L.nn.functional.elu(a["H"]),
    "leaky_relu": lambda L, a: L.nn.functional.leaky_relu(a["H"]),
    "hardswish": lambda L, a: L.nn.functional.hardswish(a["H"]),
    "sigmoid": lambda L, a: L.sigmoid(a["H"]),
    "logsigmoid": lambda L, a: L.nn.functional.logsigmoid(a["H"]),
    "log_softmax": lambda L, a: L.log_softmax(a["A"], 1),
    "erf": lambda L, a: L.erf(a["H"]),
    "relu": lambda L, a: L.relu(a["H"]),
    # forward and backward, the gradient accumulated into .grad as a step does
    "gelu fwd+bwd": lambda L, a: L.nn.functional.gelu(a["Hg"]).backward(a["G"]),
    "silu fwd+bwd": lambda L, a: L.nn.functional.silu(a["Hg"]).backward(a["G"]),
    "layer_norm fwd+bwd": lambda L, a: L.nn.functional.layer_norm(
        a["Hg"], (512,), a["Wg"], a["Bg"]).backward(a["G"]),
    "softmax fwd+bwd": lambda L, a: L.softmax(a["Ag"], 1).backward(a["GA"]),
    "adaptive_avg_pool2d(1)": lambda L, a: L.nn.functional.adaptive_avg_pool2d(a["I"], 1),
    "mean(2 3)": lambda L, a: a["I"].mean((2, 3)),
    "conv2d 3x3 64->64": lambda L, a: L.nn.functional.conv2d(a["I"], a["K"], padding=1),
    "conv2d 3x3 fwd+bwd": lambda L, a: L.nn.functional.conv2d(
        a["Ig"], a["Kg"], padding=1).backward(a["GI"]),
    "linear 512->512 fwd+bwd": lambda L, a: L.nn.functional.linear(
        a["Hg"], a["Wl"]).backward(a["G"]),
    # random draws: PyTorch's streams (tracec/torch_rng.py), same sizes
    "randn 64x128x512": lambda L, a: L.randn(64, 128, 512),
    "rand 64x128x512": lambda L, a: L.rand(64, 128, 512),
    "randint 1M": lambda L, a: L.randint(0, 1000, (1 << 20,)),
    "randperm 60000": lambda L, a: L.randperm(60000),
    "kaiming_uniform_ 512x512": lambda L, a: L.nn.init.kaiming_uniform_(L.empty(512, 512)),
}


def _best(f, number: int, repeat: int) -> float:
    # (the first call builds or loads tracec's eager kernels: see main)
    for _ in range(2):
        f()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            f()
        best = min(best, (time.perf_counter() - t) / number)
    return best * 1e6


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--number", type=int, default=20)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--sort", action="store_true", help="sort by the ratio, worst first")
    args = p.parse_args(argv)
    names = [n for n in OPS if n in args.ops.split(",")]
    libs = [tracec] + ([torch] if torch is not None else [])
    # A training loop's steady state: tracec's eager kernels from the first
    # call (a process otherwise runs an op's first 4M elements in NumPy:
    # fused_eager.WARMUP_NUMEL)
    from tracec import fused_eager
    fused_eager.WARMUP_NUMEL = 0
    data = _inputs()
    times = {}
    for L in libs:
        a = {k: L.from_numpy(v) for k, v in data.items()}
        a["G"] = L.from_numpy(data["H"][::-1].copy())
        a["GA"] = L.from_numpy(data["A"][::-1].copy())
        a["Hg"] = L.from_numpy(data["H"].copy()).requires_grad_()
        a["Ag"] = L.from_numpy(data["A"].copy()).requires_grad_()
        a["Wg"] = L.ones(512, requires_grad=True)
        a["Bg"] = L.zeros(512, requires_grad=True)
        a["K"] = L.from_numpy(data["K"])
        a["Kg"] = L.from_numpy(data["K"].copy()).requires_grad_()
        a["Ig"] = L.from_numpy(data["I"].copy()).requires_grad_()
        a["GI"] = L.from_numpy(data["I"][::-1].copy())
        a["Wl"] = L.from_numpy(data["Wl"]).requires_grad_()
        times[L.__name__] = {n: _best(lambda: OPS[n](L, a), args.number, args.repeat)
                             for n in names}
    rows = []
    for n in names:
        t = times["tracec"][n]
        r = times["torch"][n] if torch is not None else None
        rows.append((n, t, r, t / r if r else None))
    if args.sort and torch is not None:
        rows.sort(key=lambda row: -row[3])
    print("eager ops at training sizes, best µs per call, one thread")
    print(f"{'op':26s} {'tracec':>10s} {'torch':>10s} {'tracec/torch':>13s}")
    for n, t, r, ratio in rows:
        cells = f"{r:10.1f} {ratio:13.2f}" if r else f"{'-':>10s} {'-':>13s}"
        print(f"{n:26s} {t:10.1f} {cells}")


if __name__ == "__main__":
    main()
