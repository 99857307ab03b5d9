"""Eager per-op overhead: tracec vs PyTorch on tiny tensors.

Prints µs per op (add, mul, matmul 8x8, sum, relu, indexing), with and
without requires_grad (the latter includes building the backward node, and
a "fwd+bwd" row runs backward too), and µs per training step of an MLP
784-128-10 on a batch of 32 with manual SGD, for tracec and (if installed)
torch in the same run, with the ratio tracec / torch.

Both libraries run BLAS on one thread (OPENBLAS_NUM_THREADS /
torch.set_num_threads), since this measures overhead, not BLAS scaling.

    python benchmarks/eager_overhead.py [--repeat 30] [--number 250] [--profile]
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # before NumPy loads its BLAS

import argparse  # noqa: E402
import cProfile  # noqa: E402
import pstats  # noqa: E402
import time  # noqa: E402
import timeit  # noqa: E402

import numpy as np  # noqa: E402

import tracec  # noqa: E402

try:
    import torch
    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is optional here
    torch = None


def _best(fns, number, repeat):
    """Best of ``repeat`` runs of each of ``fns``, in CPU µs per call
    (process time is steadier than wall time on a shared machine).  The
    libraries' runs alternate, so that a busy spell on the machine slows
    both alike instead of skewing their ratio."""
    for fn in fns:
        fn()  # warm up
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            best[i] = min(best[i], timeit.timeit(fn, number=number, timer=time.process_time))
    return [b / number * 1e6 for b in best]


def op_cases(L, requires_grad):
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((8, 8)).astype(np.float32)
    b_np = rng.standard_normal((8, 8)).astype(np.float32)
    a = L.tensor(a_np, requires_grad=requires_grad)
    b = L.tensor(b_np, requires_grad=requires_grad)
    idx = L.tensor([0, 3, 5])
    relu = (lambda t: L.relu(t))
    cases = {
        "add": lambda: a + b,
        "mul": lambda: a * b,
        "mul scalar": lambda: a * 2.0,
        "matmul 8x8": lambda: a @ b,
        "sum": lambda: a.sum(),
        "relu": lambda: relu(a),
        "index [1:3]": lambda: a[1:3],
        "index [idx]": lambda: a[idx],
        "view(-1)": lambda: a.view(-1),
    }
    if requires_grad:
        def fwd_bwd():
            (a * b).sum().backward()
        cases["fwd+bwd mul.sum"] = fwd_bwd
    return cases


def mlp_step(L):
    """One manual-SGD step of 784-128-10 on a batch of 32."""
    rng = np.random.default_rng(0)
    x = L.tensor(rng.standard_normal((32, 784)).astype(np.float32))
    y = L.tensor(rng.integers(0, 10, 32))
    w1 = L.tensor((rng.standard_normal((784, 128)) * 0.03).astype(np.float32),
                  requires_grad=True)
    b1 = L.zeros(128, requires_grad=True)
    w2 = L.tensor((rng.standard_normal((128, 10)) * 0.1).astype(np.float32),
                  requires_grad=True)
    b2 = L.zeros(10, requires_grad=True)
    params = [w1, b1, w2, b2]
    onehot = L.zeros(32, 10)
    onehot[L.arange(32), y] = 1.0

    def step():
        h = L.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        loss = -(L.log_softmax(logits, 1) * onehot).sum() / 32
        loss.backward()
        with L.no_grad():
            for p in params:
                p -= 0.01 * p.grad
                p.grad = None
        return loss
    return step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--number", type=int, default=250)
    ap.add_argument("--profile", action="store_true",
                    help="cProfile tracec's requires_grad ops and the MLP step")
    args = ap.parse_args(argv)
    libs = [("tracec", tracec)] + ([("torch", torch)] if torch is not None else [])
    print(f"{'op':<22}{'grad':>6}" + "".join(f"{n + ' µs':>12}" for n, _ in libs)
          + ("   ratio" if torch is not None else ""))
    for rg in (False, True):
        per_lib = {name: op_cases(L, rg) for name, L in libs}
        for case in per_lib["tracec"]:
            times = _best([per_lib[name][case] for name, _ in libs], args.number, args.repeat)
            line = f"{case:<22}{str(rg):>6}" + "".join(f"{t:12.2f}" for t in times)
            if torch is not None:
                line += f"{times[0] / times[1]:8.1f}x"
            print(line)
    times = _best([mlp_step(L) for _, L in libs], max(args.number // 50, 5), args.repeat)
    line = f"{'MLP step 784-128-10':<22}{'b=32':>6}" + "".join(f"{t:12.1f}" for t in times)
    if torch is not None:
        line += f"{times[0] / times[1]:8.1f}x"
    print(line)
    if args.profile:
        cases = op_cases(tracec, True)
        step = mlp_step(tracec)

        def work():
            for _ in range(2000):
                for fn in cases.values():
                    fn()
            for _ in range(100):
                step()
        prof = cProfile.Profile()
        prof.runcall(work)
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
