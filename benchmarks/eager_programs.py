"""Eager training-step time of public programs under tests/programs, with
their own model, batch and ``train_step``: each program's source up to the
line that compiles its step runs once (prints silenced, in a temporary
directory: the programs write artifacts), then the eager ``train_step`` is
timed (best CPU ms per step over rounds; ``--threads`` threads, default 1).
One child process per program and library (``import torch`` is tracec in
the tracec child, as ``tracec run`` gives); ratio tracec / torch.

    python benchmarks/eager_programs.py [--programs mobilenet_v2,efficientnet,...]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# name: (program, the text its eager part ends before, the eager step call)
PROGRAMS = {
    "mobilenet_v2": ("models4/mobilenet_v2.py", "cstep = torch.compile(train_step)",
                     "train_step(images[:16], labels[:16])"),
    "efficientnet": ("models4/efficientnet.py", "net.train()\nfor memory_efficient",
                     "(net.train(), train_step(images[:8], targets[:8]))"),
    "mobilenetv3": ("models10/mobilenetv3.py", "cstep = torch.compile(train_step)",
                    "train_step(images[0:8], labels[0:8])"),
    "diffusion_1d": ("models12/diffusion_1d.py", "cstep = torch.compile(train_step)",
                     "train_step(batches[0], *steps[2])"),
}

CHILD = r"""
import contextlib, io, os, sys, time, warnings
lib, path, cut, call, budget = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
if lib == "tracec":
    from tracec.as_torch import install_as_torch
    install_as_torch()
import torch
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
src = open(path).read()
src = src[:src.index(cut)]
g = {"__name__": "__main__", "__file__": os.path.join(os.getcwd(), os.path.basename(path))}
warnings.simplefilter("ignore")
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    exec(compile(src, path, "exec"), g)
step = lambda: eval(call, g)
step(); step()
best = float("inf")
for _ in range(5):
    t, n = time.process_time(), 0
    while time.process_time() - t < budget or n < 2:
        step()
        n += 1
    best = min(best, (time.process_time() - t) / n * 1e3)
print(best)
"""


def _time(lib: str, name: str, threads: int, budget: float) -> float | None:
    path, cut, call = PROGRAMS[name]
    env = dict(os.environ, **{v: str(threads) for v in (
        "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TRACEC_NUM_THREADS")})
    with tempfile.TemporaryDirectory() as cwd:
        r = subprocess.run([sys.executable, "-c", CHILD, lib,
                            os.path.join(ROOT, "tests", "programs", path), cut, call,
                            str(budget)], cwd=cwd, env=env, capture_output=True, text=True)
    if r.returncode:
        print(f"{name} ({lib}) failed:\n{r.stderr[-2000:]}", file=sys.stderr)
        return None
    return float(r.stdout.split()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--programs", default=",".join(PROGRAMS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--time", type=float, default=0.4, help="CPU seconds per round (5 rounds)")
    args = p.parse_args()
    try:
        import torch  # noqa: F401
        libs = ("tracec", "torch")
    except ImportError:  # pragma: no cover - torch is optional here
        libs = ("tracec",)
    print(f"eager train_step, CPU ms per step (best of 5 rounds), {args.threads} thread(s)")
    print(f"{'program':14s} {'tracec':>10s} {'torch':>10s} {'tracec/torch':>13s}")
    for name in [n for n in args.programs.split(",") if n]:
        t = {lib: _time(lib, name, args.threads, args.time) for lib in libs}
        tc, tt = t["tracec"], t.get("torch")
        cells = [f"{v:10.1f}" if v is not None else f"{'-':>10s}" for v in (tc, tt)]
        ratio = f"{tc / tt:13.2f}" if tc and tt else f"{'-':>13s}"
        print(f"{name:14s} {cells[0]} {cells[1]} {ratio}")


if __name__ == "__main__":
    main()
