"""The cpu backend's kernels against NumPy and the memory system.

Reports, for one core (``taskset -c 0``, BLAS on one thread) and for all
cores:

* a fused elementwise chain ``relu(x * a + b) * 0.5 + x`` on 16M float32
  (one tracec kernel) vs NumPy (which makes temporaries) vs a plain memory
  copy of the same array (``np.copyto``), in GB/s of compulsory traffic;
* a row sum and a softmax-style ``exp(x - max) / sum`` on [4096, 4096];
* f32 matmul 512 / 1024 / 2048 in GFLOP/s vs NumPy's BLAS.  NumPy is timed
  in a child process with ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE``
  unset (set on some machines, they halve OpenBLAS's GEMM);
* the per-call overhead of a tiny compiled function;
* the cold compile time of an MLP training step (a fresh process).

    python benchmarks/cpu_kernels.py            # both configurations
    python benchmarks/cpu_kernels.py --child 1  # one configuration, 1 thread
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

# Child processes write and reuse bytecode, as on a user's machine: with
# PYTHONDONTWRITEBYTECODE set, each one compiled tracec from source (~0.5 s).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _best(fn, reps):
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_elementwise(results):
    import numpy as np
    import tracec
    n = 16 * 1024 * 1024
    rng = np.random.default_rng(0)
    xa = rng.standard_normal(n, dtype=np.float32)
    x = tracec.from_numpy(xa)
    a, b = tracec.tensor(1.5), tracec.tensor(-0.25)

    def chain(x):
        return tracec.relu(x * a + b) * 0.5 + x
    f = tracec.compile(chain, backend="cpu")
    f(x)
    f(x)
    t_ours = _best(lambda: f(x), 7)
    t_np = _best(lambda: np.maximum(xa * np.float32(1.5) + np.float32(-0.25), 0) * 0.5 + xa, 5)
    dst = np.empty_like(xa)
    t_copy = _best(lambda: np.copyto(dst, xa), 7)
    t_copy_new = _best(lambda: np.copy(xa), 7)
    traffic = 2 * 4 * n  # read x, write y
    results["elementwise_16M"] = {
        "tracec_GBps": traffic / t_ours / 1e9, "numpy_GBps": traffic / t_np / 1e9,
        "copy_GBps": traffic / t_copy / 1e9, "tracec_ms": t_ours * 1e3,
        "numpy_ms": t_np * 1e3, "copy_ms": t_copy * 1e3,
        "copy_new_ms": t_copy_new * 1e3, "copy_new_GBps": traffic / t_copy_new / 1e9,
        "kernels": f.ir("optimized").count("tracec.kernel"),
    }


def bench_reductions(results):
    import numpy as np
    import tracec
    rng = np.random.default_rng(1)
    xa = rng.standard_normal((4096, 4096), dtype=np.float32)
    x = tracec.from_numpy(xa)
    fsum = tracec.compile(lambda x: x.sum(dim=1), backend="cpu")
    fsm = tracec.compile(lambda x: tracec.softmax(x, dim=1), backend="cpu")
    for _ in range(2):
        fsum(x)
        fsm(x)
    t_sum = _best(lambda: fsum(x), 7)
    t_sum_np = _best(lambda: xa.sum(axis=1), 7)

    def np_softmax():
        e = np.exp(xa - xa.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    t_sm = _best(lambda: fsm(x), 5)
    t_sm_np = _best(np_softmax, 5)
    results["rowsum_4096x4096"] = {"tracec_ms": t_sum * 1e3, "numpy_ms": t_sum_np * 1e3,
                                   "tracec_GBps": xa.nbytes / t_sum / 1e9}
    results["softmax_4096x4096"] = {"tracec_ms": t_sm * 1e3, "numpy_ms": t_sm_np * 1e3}


def bench_matmul(results, sizes):
    import numpy as np
    from tracec import dtypes as dt
    from tracec import ir
    from tracec.backends import cpu
    out = {}
    for n in sizes:
        fn = ir.new_function("mm", [((n, n), dt.float32), ((n, n), dt.float32)])
        a, b = fn.body.block.args
        op = ir.make_op("matmul", [a, b], {}, ((n, n), dt.float32))
        fn.body.block.add_op(op)
        ir.set_returns(fn, [op])
        exe = cpu.compile_module(ir.new_module([fn]), asm=False)
        rng = np.random.default_rng(n)
        xa = rng.standard_normal((n, n), dtype=np.float32)
        xb = rng.standard_normal((n, n), dtype=np.float32)
        exe([xa, xb])
        t = _best(lambda: exe([xa, xb]), 5 if n < 2048 else 3)
        out[str(n)] = 2 * n ** 3 / t / 1e9
    results["matmul_f32_GFLOPs"] = out


NUMPY_MATMUL = """
import json, sys, time
import numpy as np
out = {}
for n in %r:
    a = np.random.default_rng(n).standard_normal((n, n), dtype=np.float32)
    b = np.random.default_rng(n + 1).standard_normal((n, n), dtype=np.float32)
    a @ b
    best = float("inf")
    for _ in range(5 if n < 2048 else 3):
        t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)
    out[str(n)] = 2 * n ** 3 / best / 1e9
print(json.dumps(out))
"""


def bench_numpy_matmul(results, sizes, threads):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    cmd = [sys.executable, "-c", NUMPY_MATMUL % (sizes,)]
    if threads == 1:
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        cmd = ["taskset", "-c", "0"] + cmd
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    results["numpy_matmul_f32_GFLOPs"] = json.loads(res.stdout.strip().splitlines()[-1])


def bench_overhead(results):
    import timeit
    import numpy as np
    from tracec import dtypes as dt
    from tracec import ir
    from tracec.backends import cpu
    fn = ir.new_function("tiny", [((4,), dt.float32), ((4,), dt.float32)])
    a, b = fn.body.block.args
    op = ir.make_op("add", [a, b], {}, ((4,), dt.float32))
    fn.body.block.add_op(op)
    ir.set_returns(fn, [op])
    exe = cpu.compile_module(ir.new_module([fn]), asm=False)
    x = np.ones(4, np.float32)
    args = [x, x]
    exe(args)
    n = 20000
    per_call = min(timeit.repeat(lambda: exe(args), number=n, repeat=5)) / n
    np_add = min(timeit.repeat(lambda: np.add(x, x), number=n, repeat=5)) / n
    results["tiny_call_us"] = {"tracec_executable": per_call * 1e6, "numpy_add": np_add * 1e6}

    import tracec
    xt = tracec.ones(4)
    g = tracec.compile(lambda u: u + u, backend="cpu")
    g(xt)
    results["tiny_call_us"]["tracec_compiled_function"] = min(
        timeit.repeat(lambda: g(xt), number=n // 4, repeat=5)) / (n // 4) * 1e6


COLD_COMPILE = """
import time
t0 = time.perf_counter()
import tracec
t1 = time.perf_counter()
tracec.manual_seed(0)
model = tracec.nn.Sequential(tracec.nn.Linear(784, 128), tracec.nn.ReLU(),
                             tracec.nn.Linear(128, 10))
opt = tracec.optim.SGD(model.parameters(), lr=0.1)
x, y = tracec.randn(32, 784), tracec.randint(0, 10, (32,))

def step(x, y):
    opt.zero_grad()
    loss = tracec.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss

f = tracec.compile(step, backend="cpu")
t2 = time.perf_counter()
f(x, y)          # eager run while tracing; passes
t3 = time.perf_counter()
f(x, y)          # first reuse: the cpu backend compiles (no disk cache: TRACEC_NO_CACHE)
t4 = time.perf_counter()
best = float("inf")
for _ in range(20):
    t = time.perf_counter(); f(x, y); best = min(best, time.perf_counter() - t)
import json
print(json.dumps({"import_s": t1 - t0, "first_call_s": t3 - t2, "second_call_s": t4 - t3,
                  "steady_call_ms": best * 1e3, "timings": f.cache_info().timings,
                  "kernels": f.ir("optimized").count("tracec.kernel")}))
"""


def bench_cold_compile(results):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TRACEC_NO_CACHE="1")
    res = subprocess.run([sys.executable, "-c", COLD_COMPILE], env=env, capture_output=True,
                         text=True, check=True)
    results["mlp_step_cold_compile"] = json.loads(res.stdout.strip().splitlines()[-1])


def child(threads: int) -> dict:
    os.environ["TRACEC_NUM_THREADS"] = str(threads)
    sys.path.insert(0, ROOT)
    results = {"threads": threads}
    bench_elementwise(results)
    bench_reductions(results)
    bench_matmul(results, [512, 1024, 2048])
    bench_numpy_matmul(results, [512, 1024, 2048], threads)
    if threads == 1:
        bench_overhead(results)
        bench_cold_compile(results)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", type=int, help="run one configuration with this many threads")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    ncpu = len(os.sched_getaffinity(0))
    for threads in sorted({1, ncpu}):
        env = dict(os.environ, TRACEC_NUM_THREADS=str(threads))
        cmd = [sys.executable, os.path.abspath(__file__), "--child", str(threads)]
        if threads == 1:
            env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
            cmd = ["taskset", "-c", "0"] + cmd
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        report(json.loads(res.stdout.strip().splitlines()[-1]))


def report(r: dict) -> None:
    print(f"=== {r['threads']} thread(s) ===")
    e = r["elementwise_16M"]
    print(f"fused elementwise 16M f32 ({e['kernels']} kernel): tracec {e['tracec_GBps']:.1f} GB/s "
          f"({e['tracec_ms']:.2f} ms), numpy {e['numpy_GBps']:.1f} GB/s ({e['numpy_ms']:.2f} ms), "
          f"memory copy {e['copy_GBps']:.1f} GB/s ({e['copy_ms']:.2f} ms) into an existing "
          f"array, {e['copy_new_GBps']:.1f} GB/s ({e['copy_new_ms']:.2f} ms) into a new one "
          f"(as tracec and numpy write theirs)")
    s, m = r["rowsum_4096x4096"], r["softmax_4096x4096"]
    print(f"row sum 4096x4096: tracec {s['tracec_ms']:.2f} ms ({s['tracec_GBps']:.1f} GB/s), "
          f"numpy {s['numpy_ms']:.2f} ms")
    print(f"softmax 4096x4096: tracec {m['tracec_ms']:.2f} ms, numpy {m['numpy_ms']:.2f} ms")
    for n, g in r["matmul_f32_GFLOPs"].items():
        npg = r["numpy_matmul_f32_GFLOPs"][n]
        print(f"matmul f32 {n}: tracec {g:.1f} GFLOP/s, numpy {npg:.1f} GFLOP/s "
              f"({100 * g / npg:.0f}%)")
    if "tiny_call_us" in r:
        t = r["tiny_call_us"]
        print(f"tiny call: executable {t['tracec_executable']:.1f} us, compiled function "
              f"{t['tracec_compiled_function']:.1f} us, numpy add {t['numpy_add']:.2f} us")
    if "mlp_step_cold_compile" in r:
        c = r["mlp_step_cold_compile"]
        timings = ", ".join(f"{k} {v:.3f}" for k, v in c["timings"].items()
                            if isinstance(v, float))
        print(f"MLP 784-128-10 SGD step ({c['kernels']} fused kernels), fresh process: import "
              f"{c['import_s']:.2f} s; first call (eager + trace + passes) "
              f"{c['first_call_s']:.2f} s; second call (cpu compile, no disk cache) "
              f"{c['second_call_s']:.2f} s [{timings}]; steady call {c['steady_call_ms']:.2f} ms")


if __name__ == "__main__":
    main()
