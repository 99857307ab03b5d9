"""Matmuls whose N leaves a narrow edge (not a multiple of the 32-wide
register tile), against torch: the word-language-model decoder's
products (batch 20 x bptt 35 = 700 rows, 200 hidden, 10000 words).

    fwd   [700, 200] @ W.T        W [10000, 200]: M 700,   K 200,   N 10000 (edge 16)
    dx    [700, 10000] @ W        M 700,   K 10000, N 200   (edge 8)
    dW    dY.T @ X                M 10000, K 700,   N 200   (edge 8, A transposed)

One core: run under ``taskset -c 0``; tracec and torch on one thread.
Times are CPU time (``time.process_time``), the best of alternated
rounds in one process (the machine may be shared).

    taskset -c 0 python benchmarks/gemm_edges.py [--rounds 5] [--profile]

2026-12-02, AVX-512 Xeon shared by other jobs, CPU time, us (tracec / torch
2.13 MKL), three alternated runs of each tree: before the edge kernel and
the unsplit narrow N, fwd 19100-19600 / ~16100, dx 23800-24000 / ~18300,
dW 25200-27100 / ~19000; after, fwd 19000-20000 / ~16500 (unchanged: an
aligned 1024^3 is 1.18x torch too), dx 19500-20400 / ~18500, dW
19700-21100 / ~18400.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TRACEC_NUM_THREADS", "1")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    import numpy as np
    import torch
    import tracec
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    m, h, v = 700, 200, 10000
    xa = rng.standard_normal((m, h), dtype=np.float32)
    wa = rng.standard_normal((v, h), dtype=np.float32)
    ga = rng.standard_normal((m, v), dtype=np.float32)
    cases = {
        "fwd x@W.T  700x200x10000": (lambda x, w: x @ w.t(), (xa, wa)),
        "dx  g@W    700x10000x200": (lambda g, w: g @ w, (ga, wa)),
        "dW  g.T@x  10000x700x200": (lambda g, x: g.t() @ x, (ga, xa)),
    }
    rows = []
    for name, (fn, arrs) in cases.items():
        ours = tracec.compile(fn, backend="cpu")
        targs = [tracec.from_numpy(a) for a in arrs]
        oargs = [torch.from_numpy(a) for a in arrs]
        got = np.asarray(ours(*targs))
        want = fn(*oargs).numpy()
        err = float(np.abs(got - want).max() / np.abs(want).max())
        if args.profile:
            print(name)
            ours.profile(*targs, repeat=3)     # prints its table
        best = {"tracec": float("inf"), "torch": float("inf")}
        for _ in range(args.rounds):
            for who, f, a in (("tracec", ours, targs), ("torch", fn, oargs)):
                f(*a)
                t = time.process_time()
                for _ in range(args.reps):
                    f(*a)
                best[who] = min(best[who], (time.process_time() - t) / args.reps)
        rows.append((name, best["tracec"] * 1e6, best["torch"] * 1e6, err))
    print(f"{'product (M x K x N)':28s} {'tracec us':>10s} {'torch us':>10s} {'ratio':>6s}  rel.err")
    for name, a, b, e in rows:
        print(f"{name:28s} {a:10.0f} {b:10.0f} {a / b:6.2f}  {e:.1e}")


if __name__ == "__main__":
    main()
