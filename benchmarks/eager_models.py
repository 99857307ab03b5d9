"""Eager training steps (no compile): ``import tracec as torch`` against
PyTorch eager on the three public programs of ``models.py`` (the
word-language-model LSTM, a 4-layer nanoGPT, the MNIST CNN with Adadelta),
with the same model code, batch and optimizer.

Prints, per model, the best CPU time per step (``time.process_time``:
steadier than wall time on a shared machine) of tracec and of PyTorch and
their ratio tracec / torch (lower is better; 1.0 is parity).  Both run on
``--threads`` BLAS / intra-op threads (default 1, so that process time is
the work done); the libraries' runs alternate so that a busy spell slows
both alike.  ``--profile MODEL`` prints tracec's cProfile of one step.

    python benchmarks/eager_models.py [--models mnist,gpt,lstm] [--threads 1]
        [--rounds 5] [--time 1.0] [--profile mnist]
"""
from __future__ import annotations

import argparse
import os
import sys

_p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
_p.add_argument("--models", default="mnist,gpt,lstm")
_p.add_argument("--threads", type=int, default=1)
_p.add_argument("--rounds", type=int, default=5)
_p.add_argument("--time", type=float, default=1.0, help="CPU seconds per library and round")
_p.add_argument("--profile", default=None, help="print tracec's profile of this model's step")
ARGS = _p.parse_args()

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
           "TRACEC_NUM_THREADS"):
    os.environ[_v] = str(ARGS.threads)   # before NumPy loads its BLAS

import cProfile  # noqa: E402
import pstats  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402  (the programs, written once against ``torch``)

import tracec  # noqa: E402

try:
    import torch
    torch.set_num_threads(ARGS.threads)
except ImportError:  # pragma: no cover - torch is optional here
    torch = None


def _round(call, step, budget: float) -> float:
    """CPU ms per step over one round of at least ``budget`` CPU seconds."""
    n, t0 = 0, time.process_time()
    while True:
        call(step)
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
            step, call = models.build(mod, name)
            for _ in range(2):
                call(step)            # warm up (first-call caches, allocator)
            runs[lib] = (step, call)
        if ARGS.profile == name:
            step, call = runs["tracec"]
            prof = cProfile.Profile()
            prof.runcall(call, step)
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        best = {lib: float("inf") for lib in runs}
        for _ in range(ARGS.rounds):
            for lib, (step, call) in runs.items():
                best[lib] = min(best[lib], _round(call, step, ARGS.time / ARGS.rounds))
        t = best["tracec"]
        if "torch" in best:
            print(f"{name:8s} {t:10.1f} {best['torch']:10.1f} {t / best['torch']:13.2f}")
        else:
            print(f"{name:8s} {t:10.1f} {'-':>10s} {'-':>13s}")


if __name__ == "__main__":
    main()
