"""Steps per second of the 784-512-512-10 MLP training step (SGD momentum,
Adam) at batch 32 and 256: tracec eager, tracec compiled (cpu), PyTorch
eager, and jax.jit (parameters donated) when installed; the ratios are
compiled steps/s over PyTorch's and over JAX's (> 1: tracec is faster).
For the one-core run JAX needs XLA_FLAGS="--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1" as well.

    python benchmarks/mlp_step.py                  # both cores
    taskset -c 0 env OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \\
        TRACEC_NUM_THREADS=1 python benchmarks/mlp_step.py   # one core
Issue 4's goal: compiled >= 1.5x PyTorch at batch 32, >= 1.0x at 256.
"""
from __future__ import annotations

import argparse
import functools
import time

import numpy as np

import tracec
import tracec.nn.functional as F
from tracec import nn

SIZES = (784, 512, 512, 10)


def _timeit(fn, min_time=1.0, warmup=3):
    for _ in range(warmup):
        fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        el = time.perf_counter() - t0
        if el >= min_time and n >= 5:
            return n / el


def tracec_step(opt_name, compiled, x, y, backend):
    tracec.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = (tracec.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if opt_name == "sgd"
           else tracec.optim.Adam(model.parameters(), lr=1e-3))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    if not compiled:
        return step
    c = tracec.compile(step, backend=backend)
    return c


def torch_step(opt_name, x, y):
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    opt = (torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if opt_name == "sgd"
           else torch.optim.Adam(model.parameters(), lr=1e-3))
    xt, yt = torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy())

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        return loss
    return step


def jax_step(opt_name, x, y):
    import jax
    import jax.numpy as jnp
    key = jax.random.PRNGKey(0)
    params = []
    for a, b in zip(SIZES[:-1], SIZES[1:]):
        key, k = jax.random.split(key)
        params.append((jax.random.normal(k, (a, b)) / np.sqrt(a), jnp.zeros(b)))

    def loss_fn(ps, xb, yb):
        h = xb
        for i, (w, b) in enumerate(ps):
            h = h @ w + b
            if i + 1 < len(ps):
                h = jax.nn.relu(h)
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(h), yb[:, None], 1))

    # Parameters and optimizer state are donated: JAX updates them in place,
    # as tracec does (without donation each step copies them).
    jit = functools.partial(jax.jit, donate_argnums=(0, 1))
    if opt_name == "sgd":
        @jit
        def step(ps, bufs, xb, yb):
            loss, g = jax.value_and_grad(loss_fn)(ps, xb, yb)
            bufs = jax.tree_util.tree_map(lambda m, gi: 0.9 * m + gi, bufs, g)
            ps = jax.tree_util.tree_map(lambda p, m: p - 0.01 * m, ps, bufs)
            return ps, bufs, loss
        state = [params, jax.tree_util.tree_map(jnp.zeros_like, params)]
    else:
        @jit
        def step(ps, st, xb, yb):
            loss, g = jax.value_and_grad(loss_fn)(ps, xb, yb)
            m, v, t = st
            t = t + 1
            m = jax.tree_util.tree_map(lambda a, gi: 0.9 * a + 0.1 * gi, m, g)
            v = jax.tree_util.tree_map(lambda a, gi: 0.999 * a + 0.001 * gi * gi, v, g)
            ps = jax.tree_util.tree_map(
                lambda p, a, b: p - 1e-3 * (a / (1 - 0.9 ** t)) /
                (jnp.sqrt(b / (1 - 0.999 ** t)) + 1e-8), ps, m, v)
            return ps, (m, v, t), loss
        def zeros():
            return jax.tree_util.tree_map(jnp.zeros_like, params)
        state = [params, (zeros(), zeros(), 0)]
    xj, yj = jnp.asarray(x.numpy()), jnp.asarray(y.numpy())

    def run():
        state[0], state[1], loss = step(state[0], state[1], xj, yj)
        loss.block_until_ready()
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--time", type=float, default=1.0)
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    try:
        import jax  # noqa: F401
        have_jax = True
    except ImportError:
        have_jax = False
    print(f"{'step':<14}{'batch':>6}{'tracec eager':>14}{'tracec ' + args.backend:>14}"
          f"{'torch':>10}{'jax.jit':>10}{'compiled/torch':>16}{'compiled/jax':>14}")
    for opt_name in ("sgd", "adam"):
        for batch in (32, 256):
            tracec.manual_seed(1)
            x = tracec.randn(batch, 784)
            y = tracec.randint(0, 10, (batch,))
            e = _timeit(tracec_step(opt_name, False, x, y, args.backend), args.time)
            c = _timeit(tracec_step(opt_name, True, x, y, args.backend), args.time, warmup=4)
            t = _timeit(torch_step(opt_name, x, y), args.time) if have_torch else float("nan")
            j = _timeit(jax_step(opt_name, x, y), args.time) if have_jax else float("nan")
            print(f"{opt_name:<14}{batch:>6}{e:>14.1f}{c:>14.1f}{t:>10.1f}{j:>10.1f}"
                  f"{c / t:>15.2f}x{c / j:>13.2f}x", flush=True)


if __name__ == "__main__":
    main()
