"""MoCo's queue update compiled: a pointer read from a buffer at run time.

facebookresearch/moco's ``_dequeue_and_enqueue`` (``ptr =
int(self.queue_ptr)``; ``self.queue[:, ptr:ptr + B] = keys.T``;
``self.queue_ptr[0] = (ptr + B) % K``) compiled on the cpu backend for
``--calls`` calls of batch ``B`` with queue sizes ``K``: traces, native
compiles (from an empty disk cache) and the wall time of all the calls,
compiles included, then the steady-state time of one compiled call and of
one eager call.  With the pointer read at run time (guards.md row 24g) one
trace and one compile serve every value; before, each value of the pointer
was a guard: K / B traces, and past the trace limit every call eager.

    python benchmarks/runtime_offsets.py [--calls 40] [--K 16 128 1024]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

os.environ.setdefault("TRACEC_CACHE_DIR", tempfile.mkdtemp(prefix="tracec-bench-"))

import tracec  # noqa: E402
import tracec.nn as nn  # noqa: E402


class Queue(nn.Module):
    def __init__(self, dim: int, K: int):
        super().__init__()
        self.K = K
        gen = np.random.default_rng(1)
        self.register_buffer("queue", tracec.tensor(gen.standard_normal((dim, K)).astype(
            np.float32)))
        self.register_buffer("queue_ptr", tracec.zeros(1, dtype=tracec.long))

    @tracec.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0
        self.queue[:, ptr:ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K
        self.queue_ptr[0] = ptr

    def forward(self, keys):
        self._dequeue_and_enqueue(keys)
        return self.queue_ptr


def run(K: int, calls: int, B: int = 4, dim: int = 8) -> None:
    gen = np.random.default_rng(0)
    keys = [tracec.tensor(gen.standard_normal((B, dim)).astype(np.float32))
            for _ in range(calls)]
    compiled, eager = Queue(dim, K), Queue(dim, K)
    f = tracec.compile(compiled, backend="cpu")
    t0 = time.perf_counter()
    for k in keys:
        f(k)
    wall = time.perf_counter() - t0
    for k in keys:
        eager(k)
    assert np.array_equal(compiled.queue.numpy(), eager.queue.numpy())
    info = f.cache_info()
    per = {}
    for name, fn in (("compiled", f), ("eager", eager)):
        t0 = time.perf_counter()
        for k in keys:
            fn(k)
        per[name] = (time.perf_counter() - t0) / calls * 1e6
    print(f"K={K:5d} calls={calls}: traces={info.traces} compiles={info.compiles} "
          f"eager signatures={info.eager_signatures} wall={wall:.2f}s | "
          f"steady: compiled {per['compiled']:.0f} us/call, eager {per['eager']:.0f} us/call")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--K", type=int, nargs="+", default=[16, 128, 1024])
    args = ap.parse_args()
    for K in args.K:
        run(K, args.calls)


if __name__ == "__main__":
    main()
