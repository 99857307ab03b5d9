"""The 784-512-512-10 MLP training step on the cpu backend, measured
robustly on a noisy machine: every measurement runs in a fresh child
process, tracec and PyTorch children alternate for several rounds, and the
medians are compared.

Per configuration (SGD momentum / Adam, batch 32 / 256, both cores / one
core: ``taskset``-style affinity plus ``TRACEC_NUM_THREADS=1``,
``OMP_NUM_THREADS=1``, ``OPENBLAS_NUM_THREADS=1``) it prints, in ms: the
compiled step (``tracec.compile``), its executable alone (the native call,
arrays prepared), PyTorch eager, and PyTorch / tracec (> 1: tracec is
faster).  Then the cold compile of the step (a fresh process and cache: the
call that compiles, and the backend's share of it).

    python benchmarks/cpu_mlp_step.py [--rounds 3] [--time 1.0] [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

# Child processes write and reuse bytecode, as on a user's machine: with
# PYTHONDONTWRITEBYTECODE set, each one compiled tracec from source (~0.5 s).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r"""
import json, os, sys, time
cfg = json.loads(sys.argv[1])
if cfg["one_core"]:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
import numpy as np

def timeit(fn, min_time):
    for _ in range(4):
        fn()
    best = []
    for _ in range(3):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            el = time.perf_counter() - t0
            if el >= min_time / 3 and n >= 5:
                break
        best.append(el / n * 1e3)
    return min(best)

out = {}


def tracec_step(seed):
    # The compiled 784-512-512-10 step of cfg, and its batch.
    import tracec
    import tracec.nn.functional as F
    from tracec import nn
    tracec.manual_seed(seed)
    x = tracec.randn(cfg["batch"], 784)
    y = tracec.randint(0, 10, (cfg["batch"],))
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = (tracec.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if cfg["opt"] == "sgd"
           else tracec.optim.Adam(model.parameters(), lr=1e-3))

    @tracec.compile(backend="cpu")
    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step, x


if cfg["what"] == "tracec":
    step, x = tracec_step(1)
    out["step_ms"] = timeit(step, cfg["time"])
    e = step._last
    arrays = [x._data if s.kind == "arg" else s.source._data if s.kind == "state"
              else s.source._grad._data for s in e.trace.inputs]
    exe = e.executable
    out["exe_ms"] = timeit(lambda: exe(arrays), cfg["time"])
elif cfg["what"] == "torch":
    import torch
    if cfg["one_core"]:
        torch.set_num_threads(1)
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    xt = torch.from_numpy(rng.standard_normal((cfg["batch"], 784), dtype=np.float32))
    yt = torch.from_numpy(rng.integers(0, 10, cfg["batch"]))
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10))
    opt = (torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if cfg["opt"] == "sgd"
           else torch.optim.Adam(model.parameters(), lr=1e-3))

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        loss.backward()
        opt.step()
        return loss
    out["step_ms"] = timeit(step, cfg["time"])
else:  # cold compile ("cold"), or a new process reusing its cache ("warm")
    os.environ["TRACEC_CACHE_DIR"] = cfg["cache"]
    t0 = time.perf_counter()
    import tracec  # noqa: F401  (timed: what a user's script imports)
    import tracec.nn.functional  # noqa: F401
    out["import_s"] = time.perf_counter() - t0
    t_import = time.perf_counter()
    step, _ = tracec_step(0)
    calls, ends = [], []
    while step._last is None or step._last.executable is None:
        t = time.perf_counter()
        step()
        calls.append(time.perf_counter() - t)
        ends.append(time.perf_counter() - t_import)
    # From the end of the imports: model built, first call (eager, traced),
    # later calls until one ran compiled code (loaded from the cache when warm).
    out["first_result_s"] = ends[0]
    out["first_compiled_s"] = ends[-1]
    out["compile_call_s"] = calls[-1]
    timings = step.cache_info().timings
    out["backend_s"] = timings.get("backend_s")
    out["passes_s"] = timings.get("passes_s", 0.0)
    out["cache"] = timings.get("cache")
    out["cache_load_s"] = timings.get("cache_load_s")
print("RESULT " + json.dumps(out))
"""


def _child(cfg: dict, one_core: bool) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if one_core:
        env.update(TRACEC_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(dict(cfg, one_core=one_core))],
                       capture_output=True, text=True, env=env, timeout=600)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"child failed: {r.stderr[-2000:]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--time", type=float, default=1.0)
    ap.add_argument("--quick", action="store_true", help="batch 32 SGD, both cores only")
    ap.add_argument("--cores", choices=["all", "1", "both"], default="both",
                    help="run the steps on all cores, on one, or both (default)")
    ap.add_argument("--cold", action="store_true",
                    help="only the cold compile and the new-process cache load")
    args = ap.parse_args()
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    configs = [("sgd", 32)] if args.quick else [("sgd", 32), ("sgd", 256), ("adam", 32),
                                                 ("adam", 256)]
    modes = [False] if args.quick else [False, True]
    print(f"{'cores':<6}{'step':<6}{'batch':>6}{'tracec step':>13}{'executable':>12}"
          f"{'torch':>9}{'torch/tracec':>14}   (ms, medians of {args.rounds} rounds)")
    if args.cores != "both":
        modes = [args.cores == "1"]
    for one_core in [] if args.cold else modes:
        for opt, batch in configs:
            cfg = {"what": "tracec", "opt": opt, "batch": batch, "time": args.time}
            ours, theirs = [], []
            for _ in range(args.rounds):
                ours.append(_child(cfg, one_core))
                if have_torch:
                    theirs.append(_child(dict(cfg, what="torch"), one_core))
            step = statistics.median(o["step_ms"] for o in ours)
            exe = statistics.median(o["exe_ms"] for o in ours)
            torch_ms = statistics.median(t["step_ms"] for t in theirs) if theirs else float("nan")
            print(f"{'1' if one_core else 'all':<6}{opt:<6}{batch:>6}{step:>13.3f}{exe:>12.3f}"
                  f"{torch_ms:>9.3f}{torch_ms / step:>13.2f}x", flush=True)
    for opt in ("sgd", "adam"):
        runs, warm = [], []
        for _ in range(args.rounds):
            cfg = {"what": "cold", "opt": opt, "batch": 32, "cache": tempfile.mkdtemp()}
            runs.append(_child(cfg, False))
            warm.append(_child(dict(cfg, what="warm"), False))

        def med(rs, k):
            return statistics.median(r[k] for r in rs)
        print(f"cold compile ({opt}, batch 32): compiling call {med(runs, 'compile_call_s'):.2f} s"
              f" = passes {med(runs, 'passes_s'):.2f} s + backend {med(runs, 'backend_s'):.2f} s"
              f" (+ running the step); medians of {args.rounds} fresh processes", flush=True)
        misses = [w for w in warm if w["cache"] != "hit"]
        if misses:  # the package's source changed between the two processes
            print(f"  ({len(misses)} of the new processes missed the cache; left out)")
            warm = [w for w in warm if w["cache"] == "hit"] or warm
        print(f"new process, cache filled ({opt}): import {med(warm, 'import_s') * 1e3:.0f} ms; "
              f"after import: first result {med(warm, 'first_result_s') * 1e3:.0f} ms, first "
              f"compiled result {med(warm, 'first_compiled_s') * 1e3:.0f} ms (cache load "
              f"{med(warm, 'cache_load_s') * 1e3:.0f} ms)", flush=True)


if __name__ == "__main__":
    main()
