"""Compile latency of a training step: trace + autodiff + passes (+ backend).

Prints, for MLPs of growing depth (784-512-...-512-10, SGD momentum and
Adam), the first call of a compiled step (an eager run while tracing), then,
done at the first reuse, autodiff and the passes and the backend's cold
compile (identical kernels of repeated layers are compiled once, so it stays
nearly flat with depth), the eager time of one step for reference, and the
op count.  Goal (issue 3): trace + passes under 200 ms for the
784-512-512-10 step, flat as the number of parameters grows; (issue 4) cold
backend compile of that step <= 1.5 s.

Then (issue 12, goals 1-3) calls 1-3 of two steps in a fresh process, from
an empty cache (cold) and from the cache that run filled (warm), after
import and setup: the 784-512-512-10 MLP with SGD momentum, and a 2-block
transformer (d_model 64, 4 heads, feed-forward 128, batch 8 x 32 tokens)
with AdamW.  Goals: cold <= 0.4 s (MLP) and <= 1.0 s (transformer); warm
<= 60 ms.  Noisy on a shared machine: "cold cpu ms" is the CPU time of
all the process's threads over calls 1-3 (the cold compile runs LLVM on
several threads where cores are idle: ``TRACEC_COMPILE_JOBS``).

    python benchmarks/compile_latency.py [--backend interp] [--no-fresh] [--warm-breakdown]
                                         [--cold N]
"""
from __future__ import annotations

import argparse
import os
import time

# Child processes write and reuse bytecode, as on a user's machine: with
# PYTHONDONTWRITEBYTECODE set, each one compiled tracec from source (~0.5 s).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import tracec
import tracec.nn.functional as F


def make_step(depth: int, opt_name: str):
    tracec.manual_seed(0)
    sizes = [784] + [512] * depth + [10]
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params.append((tracec.randn(a, b) * (1 / a ** 0.5)).requires_grad_())
        params.append(tracec.zeros(b, requires_grad=True))
    opt = (tracec.optim.SGD(params, lr=0.01, momentum=0.9) if opt_name == "sgd"
           else tracec.optim.Adam(params, lr=1e-3))

    def step(x, y):
        opt.zero_grad()
        h = x
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            if i + 2 < len(params):
                h = h.relu()
        loss = F.cross_entropy(h, y)
        loss.backward()
        opt.step()
        return loss
    return step, sum(p.numel() for p in params)


FRESH = r"""
import sys, time
import tracec
import tracec.nn as nn
import tracec.nn.functional as F
tracec.manual_seed(0)
if sys.argv[1] == "mlp":
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = tracec.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = tracec.randn(32, 784), tracec.randint(0, 10, (32,))
    head = lambda h: h
else:
    model = nn.Sequential(nn.TransformerEncoder(nn.TransformerEncoderLayer(
        64, 4, 128, dropout=0.0, batch_first=True), 2), nn.Linear(64, 10))
    opt = tracec.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = tracec.randn(8, 32, 64), tracec.randint(0, 10, (8,))
    head = lambda h: h.mean(1)


@tracec.compile
def step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(head(model(x)), y)
    loss.backward()
    opt.step()
    return loss


PHASES = {}
if len(sys.argv) > 2:
    # --warm-breakdown: CPU time of this thread in the parts of calls 1-3
    # (nested parts are included in their callers'); the wrappers cost ~1 us a call.
    import tracec.backends.cache as cache_mod
    import tracec.backends.cpu.runtime as runtime_mod
    import tracec.compiler as compiler_mod
    import tracec.compiled_entry as entry_mod
    import tracec.tracing as tracing_mod

    def timed(owner, name, label):
        f = getattr(owner, name)

        def w(*a, **k):
            t = time.thread_time()
            try:
                return f(*a, **k)
            finally:
                PHASES[label] = PHASES.get(label, 0.0) + time.thread_time() - t
        setattr(owner, name, w)
    timed(compiler_mod, "record", "call 1: eager run + trace")
    timed(tracing_mod.Recording, "on_primitive", "  of which recording primitives")
    timed(cache_mod, "fingerprint", "key: trace fingerprint")
    timed(cache_mod, "source_digest", "key: tracec source digest")
    timed(cache_mod.DiskCache, "get", "disk cache read")
    timed(runtime_mod, "load_object", "load the object code")
    timed(entry_mod.Entry, "ensure_compiled", "first reuse: key, read, load")
    timed(entry_mod.Entry, "fast_runner", "specialized call (fast_run) made")

t0, c0 = time.perf_counter(), time.process_time()
for i in range(3):
    t1 = time.thread_time()
    step(x, y).item()
    PHASES[f"call {i + 1}"] = time.thread_time() - t1
print(time.perf_counter() - t0, step.cache_info().traces, time.process_time() - c0)
for k, v in PHASES.items():
    print(f"  {k:<40}{v * 1e3:8.1f} ms")
"""


def fresh_process_rows() -> None:
    """Calls 1-3 in a fresh process: an empty cache ("cold"); a cache that
    holds only what any earlier compile on this machine leaves under
    ``runtime/`` (the worker pool, the GEMM library: "new model", a user's
    second program); then the filled one ("warm")."""
    import shutil
    import subprocess
    import sys
    import tempfile
    print(f"\n{'fresh process, calls 1-3':<28}{'cold ms':>10}{'new model':>10}{'warm ms':>10}"
          f"{'traces':>8}{'cold cpu ms':>13}")
    for name, label in (("mlp", "784-512-512-10 sgd"), ("transformer", "2-block transformer adamw")):
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as other:
            out = []
            for where in (cache, other, cache):
                if where is other:
                    shutil.copytree(os.path.join(cache, "runtime"),
                                    os.path.join(other, "runtime"))
                env = dict(os.environ, TRACEC_CACHE_DIR=where)
                env.pop("TRACEC_NO_CACHE", None)
                r = subprocess.run([sys.executable, "-c", FRESH, name], env=env, text=True,
                                   capture_output=True, check=True)
                out.append(r.stdout.split())
        print(f"{label:<28}{float(out[0][0]) * 1e3:>10.0f}{float(out[1][0]) * 1e3:>10.0f}"
              f"{float(out[2][0]) * 1e3:>10.0f}{out[0][1]:>8}{float(out[0][2]) * 1e3:>13.0f}")


def warm_breakdown(rounds: int = 5) -> None:
    """Where the warm start's calls 1-3 go (issue 12, goal 2): the medians,
    over ``rounds`` fresh processes on one core reading the cache a first
    one filled, of the CPU time of each part (``FRESH``'s wrappers)."""
    import statistics
    import subprocess
    import sys
    import tempfile
    for name in ("mlp", "transformer"):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, TRACEC_CACHE_DIR=cache)
            env.pop("TRACEC_NO_CACHE", None)
            cmd = [sys.executable, "-c", FRESH, name, "breakdown"]
            subprocess.run(cmd, env=env, capture_output=True, check=True)
            rows: dict = {}
            for _ in range(rounds):
                r = subprocess.run(["taskset", "-c", "0"] + cmd if shutil_which("taskset")
                                   else cmd, env=env, text=True, capture_output=True, check=True)
                lines = r.stdout.splitlines()
                rows.setdefault("calls 1-3 (process CPU)", []).append(float(lines[0].split()[2]))
                for ln in lines[1:]:
                    label, ms = ln.rsplit(None, 2)[0].strip(), float(ln.split()[-2])
                    rows.setdefault(label, []).append(ms / 1e3)
        print(f"\nwarm start, {name}: medians of {rounds} fresh processes, CPU ms")
        order = ["calls 1-3 (process CPU)", "call 1", "call 1: eager run + trace",
                 "  of which recording primitives", "call 2", "first reuse: key, read, load",
                 "key: tracec source digest", "key: trace fingerprint", "disk cache read",
                 "load the object code", "call 3", "specialized call (fast_run) made"]
        for label, v in sorted(rows.items(), key=lambda kv: order.index(kv[0])
                               if kv[0] in order else len(order)):
            print(f"  {label:<40}{statistics.median(v) * 1e3:8.1f}")


def cold_rows(rounds: int) -> None:
    """Issue 12 goal 1 alone: calls 1-3 from an empty cache, the medians
    over ``rounds`` fresh processes (a fresh cache each) of the wall time
    and of the CPU time of all the process's threads, on one core
    (``taskset -c 0``, one thread everywhere) and on all cores, with the
    load average the runs saw (the machine may be shared)."""
    import statistics
    import subprocess
    import sys
    import tempfile
    one = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "TRACEC_NUM_THREADS": "1"}
    print(f"\n{'cold, calls 1-3 (medians of ' + str(rounds) + ')':<40}{'wall ms':>9}{'cpu ms':>9}"
          f"{'load':>7}")
    for name, label in (("mlp", "784-512-512-10 sgd"), ("transformer", "2-block transformer adamw")):
        for cores in ("one core", "all cores"):
            walls, cpus, loads = [], [], []
            for _ in range(rounds):
                with tempfile.TemporaryDirectory() as cache:
                    env = dict(os.environ, TRACEC_CACHE_DIR=cache)
                    env.pop("TRACEC_NO_CACHE", None)
                    cmd = [sys.executable, "-c", FRESH, name]
                    if cores == "one core" and shutil_which("taskset"):
                        env.update(one)
                        cmd = ["taskset", "-c", "0"] + cmd
                    r = subprocess.run(cmd, env=env, text=True, capture_output=True, check=True)
                    w, _, c = r.stdout.split()[:3]
                    walls.append(float(w))
                    cpus.append(float(c))
                    loads.append(os.getloadavg()[0])
            print(f"{label + ', ' + cores:<40}{statistics.median(walls) * 1e3:>9.0f}"
                  f"{statistics.median(cpus) * 1e3:>9.0f}{statistics.median(loads):>7.1f}")


def shutil_which(cmd: str):
    import shutil
    return shutil.which(cmd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default=None)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--no-fresh", action="store_true",
                    help="skip the fresh-process rows (calls 1-3, cold and warm)")
    ap.add_argument("--warm-breakdown", action="store_true",
                    help="only where the warm start's calls 1-3 go (one core, CPU time)")
    ap.add_argument("--cold", type=int, default=0, metavar="N",
                    help="only the cold rows: medians of N fresh processes, one core and "
                         "all cores, wall and CPU time")
    args = ap.parse_args()
    if args.cold:
        cold_rows(args.cold)
        return
    if args.warm_breakdown:
        warm_breakdown()
        return
    if not args.no_fresh:
        fresh_process_rows()
    x = tracec.randn(args.batch, 784)
    y = tracec.randint(0, 10, (args.batch,))
    os.environ["TRACEC_NO_CACHE"] = "1"
    print(f"{'model':<28}{'params':>10}{'eager ms':>10}{'first ms':>10}{'trace':>8}"
          f"{'passes':>8}{'backend':>8}{'ops':>6}")
    for opt_name in ("sgd", "adam"):
        for depth in (1, 2, 4, 8):
            step, n = make_step(depth, opt_name)
            step(x, y)  # optimizer state exists: the steady-state step is compiled
            t0 = time.perf_counter()
            step(x, y)
            eager_ms = (time.perf_counter() - t0) * 1e3
            cstep = tracec.compile(step, backend=args.backend)
            t0 = time.perf_counter()
            cstep(x, y)
            first_ms = (time.perf_counter() - t0) * 1e3
            cstep(x, y)  # the first reuse compiles (cold: TRACEC_NO_CACHE=1 is set below)
            t = cstep.cache_info().timings
            ops = cstep.ir("optimized").count(" = tracec.")
            label = f"784-{'512-' * depth}10 {opt_name}"
            print(f"{label:<28}{n:>10}{eager_ms:>10.1f}{first_ms:>10.1f}"
                  f"{t['trace_s'] * 1e3:>8.1f}{t['passes_s'] * 1e3:>8.1f}"
                  f"{t.get('backend_s', 0) * 1e3:>8.1f}{ops:>6}")


if __name__ == "__main__":
    main()
