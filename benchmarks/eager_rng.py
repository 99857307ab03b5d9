"""Eager random draws: tracec vs PyTorch, one thread, same streams.

tracec draws PyTorch's CPU streams bit for bit (``tracec/torch_rng.py``);
the normals and ``randperm`` run as native kernels
(``tracec/backends/cpu/rng_kernels.py``) once warmed up, else as NumPy
transforms.  Prints, for each draw, the best µs per call of torch, of
tracec with the kernels ("native") and without ("numpy"), and the ratios
tracec / torch (> 1: tracec slower).  Then the one-time cost of the
kernels, each in a fresh process: compiling them (an empty cache folder)
and loading them from the disk cache (a shared library).

    python benchmarks/eager_rng.py [--number 10] [--repeat 5] [--no-one-time]
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TRACEC_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # before NumPy loads its BLAS

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import tracec  # noqa: E402
from tracec import torch_rng  # noqa: E402

import torch  # noqa: E402
torch.set_num_threads(1)


def _dropout(L, n):
    x = L.ones(n)
    return lambda: L.nn.functional.dropout(x, 0.1, training=True)


#: name: f(library) -> the call to time
DRAWS = {
    "rand(1M)": lambda L: lambda: L.rand(1 << 20),
    "randn(1024)": lambda L: lambda: L.randn(1024),
    "randn(4096)": lambda L: lambda: L.randn(4096),
    "randn(64K)": lambda L: lambda: L.randn(1 << 16),
    "randn(1M)": lambda L: lambda: L.randn(1 << 20),
    "randn(1M) float64": lambda L: lambda: L.randn(1 << 20, dtype=L.float64),
    "randn(4096) float64": lambda L: lambda: L.randn(4096, dtype=L.float64),
    "randn(1M+3) bfloat16": lambda L: lambda: L.randn((1 << 20) + 3, dtype=L.bfloat16),
    "normal_(1, 2) 1M": lambda L: (lambda x: lambda: x.normal_(1.0, 2.0))(L.empty(1 << 20)),
    "normal_(1, 2) 1M float64":
        lambda L: (lambda x: lambda: x.normal_(1.0, 2.0))(L.empty(1 << 20, dtype=L.float64)),
    "randperm(1000)": lambda L: lambda: L.randperm(1000),
    "randperm(60000)": lambda L: lambda: L.randperm(60000),
    "randperm(1M)": lambda L: lambda: L.randperm(1 << 20),
    "dropout(1M, 0.1)": lambda L: _dropout(L, 1 << 20),
    "rand(1M) float64": lambda L: lambda: L.rand(1 << 20, dtype=L.float64),
    "randint(0, 10, 1M)": lambda L: lambda: L.randint(0, 10, (1 << 20,)),
}


def _best(fn, number: int, repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t) / number)
    return best * 1e6


def _one_time() -> list[tuple[str, float]]:
    code = ("import time, tracec\n"
            "from tracec.backends.cpu import rng_kernels as K, shared_objects\n"
            "K.load(); shared_objects.wait()\n"
            "print(K.INFO['seconds'], K.INFO['source'])\n")
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, TRACEC_CACHE_DIR=folder, TRACEC_SHARED_OBJECTS="1")
        env.pop("TRACEC_NO_CACHE", None)
        for _ in range(3):
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True, check=True).stdout.split(maxsplit=1)
            rows.append((out[1].strip(), float(out[0]) * 1e3))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--number", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-one-time", action="store_true")
    args = ap.parse_args()
    torch_rng.NATIVE_WARMUP = 0
    native = torch_rng._native(1 << 20) is not None
    print(f"{'draw':26} {'torch µs':>10} {'native µs':>10} {'numpy µs':>10} "
          f"{'native/torch':>13} {'numpy/torch':>12}")
    for name, make in DRAWS.items():
        t = _best(make(torch), args.number, args.repeat)
        mine = {}
        for mode in ("native", "numpy"):
            torch_rng.NATIVE_ON[0] = mode == "native" and native
            mine[mode] = _best(make(tracec), args.number, args.repeat)
        torch_rng.NATIVE_ON[0] = True
        print(f"{name:26} {t:10.1f} {mine['native']:10.1f} {mine['numpy']:10.1f} "
              f"{mine['native'] / t:13.2f} {mine['numpy'] / t:12.2f}")
    if not native:
        print("(no native kernels here: both tracec columns are the NumPy path)")
    if not args.no_one_time:
        print("\none-time cost of the kernels, fresh processes sharing an empty cache folder:")
        for source, ms in _one_time():
            print(f"  {source:12} {ms:8.1f} ms")


if __name__ == "__main__":
    main()
