"""Issue 12's latency table: tracec beside jax.jit and torch.compile.

One command prints every row, on one core (``taskset``-style affinity and
one thread everywhere) and on all cores, as medians over ``--rounds``
fresh child processes, with a ratio per other library: how many times
better tracec is (> 1: faster, or a higher share of copy bandwidth):

* cold: a fresh process and an empty compile cache, calls 1-3 of the
  784-512-512-10 MLP training step (SGD momentum, batch 32), after import
  and setup;
* warm: the same from a filled cache (the cold child's);
* tracec only, cold on a machine where it compiled before: the cache's
  compiled entries removed but its per-machine runtime kept (the
  shape-generic GEMM library, built once per machine and tracec version:
  ``backends/cpu/gemm_lib.py``), as for every new function after a
  user's first;
* one call of a compiled one-add function on 4-element float32 tensors;
* ``relu(x*w+b)*sigmoid(x)`` on 16M float32, a fresh output every call,
  as a share of this machine's copy bandwidth (``np.copyto``);
* ``import`` of the library in a plain process;
* per-call rows are the best of several runs, in CPU time on one core
  (steadier on a shared machine) and in wall time on all cores;
* tracec only: the dispatch of the MLP step (a compiled call minus its
  native entry alone, on arrays already marshalled; and the call with its
  native entry swapped for one that returns at once, steadier on a busy
  machine) and of a 4-layer transformer AdamW step.

JAX runs where it imports, from ``--jax-python`` (a side virtual
environment: ``python -m venv jaxvenv && jaxvenv/bin/pip install jax``);
PyTorch from this interpreter.  ``--quick``: one round, and no cold
torch.compile (about 11 s a run).

    python benchmarks/latency_table.py [--rounds 3] [--quick] [--jax-python PATH]
                                       [--cores 1|all|both] [--core N]

The figures are noisy on a shared machine: run it on a quiet one.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

# Child processes write and reuse bytecode, as on a user's machine: with
# PYTHONDONTWRITEBYTECODE set, each one compiled tracec from source (~0.5 s).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ONE_CORE_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                "TRACEC_NUM_THREADS": "1",
                "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"}
LIBS = ("tracec", "jax", "torch")

# --- what a child measures ------------------------------------------------------

CHILD = r'''
import json, os, sys, time
row, lib, core = sys.argv[1], sys.argv[2], int(sys.argv[3])
if core >= 0:
    os.sched_setaffinity(0, {core})
if row == "import":                 # a plain process: nothing imported before
    t = time.perf_counter()
    __import__(lib)
    print("RESULT " + json.dumps({"s": time.perf_counter() - t}))
    sys.exit(0)
import numpy as np
SIZES = (784, 512, 512, 10)
out = {}


# One core, one thread: CPU time (steadier than wall time on a shared
# machine); all cores: wall time (CPU time would count idle workers' spinning).
clock = time.process_time if core >= 0 else time.perf_counter


def best(fn, n, reps=7):
    fn()
    b = float("inf")
    for _ in range(reps):
        t = clock()
        for _ in range(n):
            fn()
        b = min(b, (clock() - t) / n)
    return b


def data():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((32, 784), dtype=np.float32),
            rng.integers(0, 10, 32).astype(np.int64))


def mlp_step():
    """calls() -> runs one training step; made after import (not timed)."""
    xa, ya = data()
    if lib == "tracec":
        import tracec
        import tracec.nn.functional as F
        tracec.manual_seed(0)
        model = tracec.nn.Sequential(tracec.nn.Linear(784, 512), tracec.nn.ReLU(),
                                     tracec.nn.Linear(512, 512), tracec.nn.ReLU(),
                                     tracec.nn.Linear(512, 10))
        opt = tracec.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x, y = tracec.from_numpy(xa), tracec.from_numpy(ya)

        @tracec.compile
        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return lambda: step(x, y).item()
    if lib == "torch":
        import torch
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x, y = torch.from_numpy(xa), torch.from_numpy(ya)

        @torch.compile
        def step(x, y):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return lambda: step(x, y).item()
    import functools
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

    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def step(ps, bufs, xb, yb):
        loss, g = jax.value_and_grad(loss_fn)(ps, xb, yb)
        bufs = jax.tree_util.tree_map(lambda m, gi: 0.9 * m + gi, bufs, g)
        ps = jax.tree_util.tree_map(lambda p, m: p - 0.01 * m, ps, bufs)
        return ps, bufs, loss
    state = [params, jax.tree_util.tree_map(jnp.zeros_like, params)]
    xj, yj = jnp.asarray(xa), jnp.asarray(ya)

    def run():
        state[0], state[1], loss = step(state[0], state[1], xj, yj)
        return float(loss)
    return run


def one_add():
    if lib == "tracec":
        import tracec
        f = tracec.compile(lambda a, b: a + b)
        a, b = tracec.ones(4), tracec.ones(4)
        return lambda: f(a, b)
    if lib == "torch":
        import torch
        f = torch.compile(lambda a, b: a + b)
        a, b = torch.ones(4), torch.ones(4)
        return lambda: f(a, b)
    import jax
    import jax.numpy as jnp
    f = jax.jit(lambda a, b: a + b)
    a, b = jnp.ones(4), jnp.ones(4)
    return lambda: f(a, b).block_until_ready()


def chain():
    n = 16 * 1024 * 1024
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(n, dtype=np.float32) for _ in range(3)]
    if lib == "tracec":
        import tracec
        f = tracec.compile(lambda x, w, b: tracec.relu(x * w + b) * tracec.sigmoid(x))
        args = [tracec.from_numpy(a) for a in xs]
        run = lambda: f(*args)
    elif lib == "torch":
        import torch
        f = torch.compile(lambda x, w, b: torch.relu(x * w + b) * torch.sigmoid(x))
        args = [torch.from_numpy(a) for a in xs]
        run = lambda: f(*args)
    else:
        import jax
        import jax.numpy as jnp
        f = jax.jit(lambda x, w, b: jax.nn.relu(x * w + b) * jax.nn.sigmoid(x))
        args = [jnp.asarray(a) for a in xs]
        run = lambda: f(*args).block_until_ready()
    run()
    run()
    t = best(run, 1, 9)
    dst = np.empty_like(xs[0])
    t_copy = best(lambda: np.copyto(dst, xs[0]), 1, 9)
    return (4 * 4 * n / t) / (2 * 4 * n / t_copy)


def dispatch():
    """tracec: a compiled call minus its native entry alone."""
    import tracec
    import tracec.nn as nn
    import tracec.nn.functional as F
    from tracec.pytree import resolve

    def split(c, args, n):
        for _ in range(4):
            c(*args)
        e = c._last
        arrays = [resolve(s.source, args, {})._data if s.kind == "arg" else
                  s.source._data if s.kind == "state" else
                  (s.source if s.arg is None else resolve(s.arg, args, {}))._grad._data
                  for s in e.trace.inputs]
        exe = e.executable
        if getattr(exe, "_fn_py", None) is not None:
            # the native entry alone, on arrays already marshalled
            tin = tuple(arrays)
            tout = tuple(np.empty(shape, npd) for shape, npd in exe._outs)
            ws = exe._workspace()
            native = lambda: exe._fn_py(id(tin) + 24, id(tout) + 24, ws[1], exe.nthreads)
        else:
            native = lambda: exe(arrays)
        # interleaved, best of each: the machine's drift hits both alike
        call = kernel = float("inf")
        for _ in range(3):
            call = min(call, best(lambda: c(*args), n))
            kernel = min(kernel, best(native, n))
        return call - kernel

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
    def noop_kernel(c, args, n):
        """The call with its native entry swapped for one that returns at
        once: guards, marshalling and write-backs alone, without the
        subtraction of two large, noisy times (the kernel's cache misses
        are not counted: the Python work runs with warm caches)."""
        import ctypes
        from tracec.backends.cpu import checked_call, runtime
        e = c._last
        exe = e.executable
        ir = "define i32 @tracec_noop(ptr %a, ptr %b, ptr %c, i64 %d) {\n  ret i32 0\n}\n"
        lib = runtime._link(checked_call.runtime_object("no-op", ir, host=True), ["tracec_noop"])
        addr = lib["tracec_noop"]
        real = exe._tracker
        exe._tracker = {exe.signature["entry_py"]: addr}     # read when e's call is made
        exe._fn_py = exe._fn = runtime._ENTRY_T(addr)
        e._fast_run = None
        try:
            c(*args)
            return best(lambda: c(*args), n)
        finally:
            exe._tracker = real

    xa, ya = data()
    mlp_args = (tracec.from_numpy(xa), tracec.from_numpy(ya))
    mlp_step = tracec.compile(step)
    mlp = split(mlp_step, mlp_args, 50)
    mlp_noop = noop_kernel(mlp_step, mlp_args, 500)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0,
                                                           batch_first=True), 4)
    tmodel = nn.Sequential(enc, nn.Linear(32, 4))
    topt = tracec.optim.AdamW(tmodel.parameters(), lr=1e-3)

    def tstep(x, y):
        topt.zero_grad()
        loss = F.cross_entropy(tmodel(x).mean(1), y)
        loss.backward()
        topt.step()
        return loss
    tr = split(tracec.compile(tstep), (tracec.randn(2, 8, 32), tracec.randint(0, 4, (2,))), 50)
    return mlp, tr, mlp_noop


if row in ("cold", "warm"):
    calls = mlp_step()
    t = time.perf_counter()
    for _ in range(3):
        calls()
    out["s"] = time.perf_counter() - t
elif row == "one_add":
    out["s"] = best(one_add(), 2000)
elif row == "chain":
    out["share"] = chain()
elif row == "dispatch":
    out["mlp_s"], out["transformer_s"], out["mlp_noop_s"] = dispatch()
print("RESULT " + json.dumps(out))
'''


def run_child(row, lib, one_core, python, cache, core=0):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TRACEC_CACHE_DIR=os.path.join(cache, "tracec"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"),
               JAX_COMPILATION_CACHE_DIR=os.path.join(cache, "jax"),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    env.pop("TRACEC_NO_CACHE", None)
    if one_core:
        env.update(ONE_CORE_ENV)
    r = subprocess.run([python, "-c", CHILD, row, lib, str(core if one_core else -1)],
                       capture_output=True, text=True, env=env, timeout=600)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{lib} {row} failed:\n{r.stderr[-2000:]}")


def available(lib, python) -> bool:
    return subprocess.run([python, "-c", f"import {lib}"], capture_output=True).returncode == 0


def measure(libs, pythons, one_core, rounds, quick, core=0):
    rows: dict = {}
    run = functools.partial(run_child, core=core)

    def add(name, lib, value):
        rows.setdefault(name, {}).setdefault(lib, []).append(value)
    for _ in range(rounds):
        for lib in libs:
            py = pythons[lib]
            cache = tempfile.mkdtemp(prefix=f"latency-{lib}-")
            try:
                if not (quick and lib == "torch"):
                    add("cold: MLP SGD step, calls 1-3 (s)", lib,
                        run("cold", lib, one_core, py, cache)["s"])
                    add("warm: the same, filled cache (s)", lib,
                        run("warm", lib, one_core, py, cache)["s"])
                    if lib == "tracec":
                        # A new function on a machine where tracec compiled
                        # before: the compiled entries gone, the per-machine
                        # runtime (the shape-generic GEMM library, built once
                        # per machine and tracec version) kept.
                        shutil.rmtree(os.path.join(cache, "tracec", "v1"), ignore_errors=True)
                        add("cold, machine's GEMM library built before (s)", lib,
                            run("cold", lib, one_core, py, cache)["s"])
                add("one call of a one-add function (us)", lib,
                    run("one_add", lib, one_core, py, cache)["s"] * 1e6)
                add("relu(x*w+b)*sigmoid(x) 16M f32, share of copy bw", lib,
                    run("chain", lib, one_core, py, cache)["share"])
                add("import (s)", lib, run("import", lib, one_core, py, cache)["s"])
                if lib == "tracec":
                    d = run("dispatch", lib, one_core, py, cache)
                    add("dispatch: MLP step (us)", lib, d["mlp_s"] * 1e6)
                    add("dispatch: MLP step, no-op kernel (us)", lib, d["mlp_noop_s"] * 1e6)
                    add("dispatch: 4-layer transformer AdamW step (us)", lib,
                        d["transformer_s"] * 1e6)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
    return {name: {lib: statistics.median(v) for lib, v in per.items()}
            for name, per in rows.items()}


def print_table(title, table, libs):
    print(f"\n{title}")
    head = f"{'':<52}" + "".join(f"{lib:>12}" for lib in libs) + "".join(
        f"{lib + '/tracec':>14}" for lib in libs[1:])
    print(head)
    for name, per in table.items():
        line = f"{name:<52}" + "".join(f"{per[lib]:>12.3g}" if lib in per else f"{'-':>12}"
                                       for lib in libs)
        for lib in libs[1:]:
            if lib in per and "tracec" in per and min(per[lib], per["tracec"]) > 0:
                # how many times better tracec is (a share: higher is better)
                ratio = (per["tracec"] / per[lib] if "share" in name
                         else per[lib] / per["tracec"])
                line += f"{ratio:>13.2f}x"
            else:
                line += f"{'-':>14}"
        print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jax-python", default=os.environ.get("JAX_PYTHON", sys.executable))
    ap.add_argument("--cores", choices=("1", "all", "both"), default="both")
    ap.add_argument("--core", type=int, default=0,
                    help="the core of the one-core runs (taskset -c CORE; default 0)")
    args = ap.parse_args()
    rounds = 1 if args.quick else args.rounds
    pythons = {"tracec": sys.executable, "torch": sys.executable, "jax": args.jax_python}
    libs = [lib for lib in LIBS if lib == "tracec" or available(lib, pythons[lib])]
    missing = [lib for lib in LIBS if lib not in libs]
    if missing:
        print(f"not installed (columns left out): {', '.join(missing)}")
    print("ratios: how many times better tracec is than the other library (> 1: tracec "
          f"faster, or a higher share of copy bandwidth). Medians of {rounds} fresh "
          "processes; noisy on a shared machine.")
    for one_core in ((True, False) if args.cores == "both" else (args.cores == "1",)):
        table = measure(libs, pythons, one_core, rounds, args.quick, args.core)
        print_table(f"one core (taskset -c {args.core}, one thread everywhere)" if one_core
                    else "all cores",
                    table, libs)


if __name__ == "__main__":
    main()
