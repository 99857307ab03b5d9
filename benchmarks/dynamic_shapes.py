"""Changing shapes (API.md §4 "Shapes may change"), on the cpu backend.

(a) 200 steps of a small causal LM training step fed batches of random
    sequence length (5 to 40): wall time including every trace and compile,
    for tracec.compile's default (dynamic=None), dynamic=False, and PyTorch
    eager; with the traces and backend compiles tracec made.
(b) steady-state steps/s of the 784-512-512-10 MLP SGD step with a symbolic
    batch (mark_dynamic: one trace and one size-generic native compile
    serving every batch size) against dynamic=False (one trace and one
    static compile per size), at batch 32 and 256: both in one process,
    timed in alternating short windows (a shared machine's load changes
    from second to second), the best window of each and the median ratio
    of adjacent windows.

Every measurement runs in a fresh child process with a fresh compile cache.

    python benchmarks/dynamic_shapes.py [--steps 200] [--quick] [--part a|b]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

# Child processes write and reuse bytecode, as on a user's machine: with
# PYTHONDONTWRITEBYTECODE set, each one compiled tracec from source (~0.5 s).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

LM_CHILD = r"""
import importlib, json, sys, time
import numpy as np
cfg = json.loads(sys.argv[1])
lib = importlib.import_module(cfg["lib"])
nn, F = lib.nn, lib.nn.functional

class TinyLM(nn.Module):
    def __init__(self, V=64, C=32, Tmax=48):
        super().__init__()
        self.tok = nn.Embedding(V, C)
        self.pos = nn.Parameter(lib.randn(1, Tmax, C) * 0.02)
        self.qkv = nn.Linear(C, 3 * C)
        self.head = nn.Linear(C, V)

    def forward(self, idx):
        B, T = idx.shape
        x = self.tok(idx) + self.pos[:, :T]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / np.sqrt(q.size(-1)))
        mask = lib.tril(lib.ones(T, T))
        att = att.masked_fill(mask == 0, float("-inf")).softmax(dim=-1)
        return self.head(x + att @ v)

lib.manual_seed(0)
model = TinyLM()
opt = lib.optim.Adam(model.parameters(), lr=1e-3)

def step(idx, tgt):
    opt.zero_grad()
    logits = model(idx)
    B, T = idx.shape
    loss = F.cross_entropy(logits.view(B * T, -1), tgt.view(-1))
    loss.backward()
    opt.step()
    return loss

if cfg["lib"] == "tracec":
    step = lib.compile(step, dynamic=cfg["dynamic"])
rng = np.random.default_rng(0)
data = []
for _ in range(cfg["steps"]):
    T = int(rng.integers(5, 41))
    data.append((lib.tensor(rng.integers(0, 64, (8, T))), lib.tensor(rng.integers(0, 64, (8, T)))))
import warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
for idx, tgt in data:
    loss = step(idx, tgt).item()
out = {"wall_s": time.perf_counter() - t0, "loss": loss}
if cfg["lib"] == "tracec":
    info = step.cache_info()
    out.update(traces=info.traces, compiles=info.compiles, eager=info.eager_signatures)
print(json.dumps(out))
"""

MLP_CHILD = r"""
import json, statistics, sys, time
import numpy as np
cfg = json.loads(sys.argv[1])
import tracec
nn, F = tracec.nn, tracec.nn.functional

def make(dynamic):
    tracec.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = tracec.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    @tracec.compile(dynamic=None if dynamic else False)
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step

rng = np.random.default_rng(0)
def batch(n, dynamic):
    x = tracec.tensor(rng.standard_normal((n, 784)).astype(np.float32))
    y = tracec.tensor(rng.integers(0, 10, n))
    if dynamic:      # the batch dimension symbolic from the first trace
        tracec.mark_dynamic(x, 0, "B")
        tracec.mark_dynamic(y, 0, "B")
    return x, y
steps = {"symbolic": make(True), "specialized": make(False)}
for name, step in steps.items():
    for n in (48, 32, 256, 48, 32, 256, 32, 256, 32, 256):   # traces, and compiles
        step(*batch(n, name == "symbolic"))

def rate(step, args, seconds):
    k, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step(*args)
        k += 1
    return k / (time.perf_counter() - t0)

out = {}
for n in (32, 256):
    args = {name: batch(n, name == "symbolic") for name in steps}
    # Short windows of the two alternate (ABBA), so that both see the same
    # machine: a shared one's load changes from second to second.
    rates = {name: [] for name in steps}
    order = list(steps)
    for w in range(cfg["windows"]):
        for name in (order if w % 2 == 0 else order[::-1]):
            rates[name].append(rate(steps[name], args[name], cfg["time"]))
    pairs = [a / b for a, b in zip(rates["symbolic"], rates["specialized"])]
    out[str(n)] = {"symbolic": max(rates["symbolic"]), "specialized": max(rates["specialized"]),
                   "paired": statistics.median(pairs)}
for name, step in steps.items():
    info = step.cache_info()
    out[name] = {"traces": info.traces, "compiles": info.compiles}
print(json.dumps(out))
"""


def child(script: str, cfg: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT,
               TRACEC_CACHE_DIR=tempfile.mkdtemp(prefix="tracec-bench-dyn-"))
    r = subprocess.run([sys.executable, "-c", script, json.dumps(cfg)], env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--time", type=float, default=1.0)
    ap.add_argument("--quick", action="store_true", help="40 LM steps, 0.3 s per timing")
    ap.add_argument("--part", choices=("a", "b", "all"), default="all",
                    help="run only (a) or (b)")
    a = ap.parse_args()
    steps, t = (40, 0.3) if a.quick else (a.steps, a.time)
    if a.part in ("a", "all"):
        part_a(steps)
    if a.part in ("b", "all"):
        part_b(t)


def part_a(steps: int) -> None:
    print(f"(a) {steps} LM steps, random sequence length 5..40 (batch 8), wall time "
          "including traces and compiles")
    for name, cfg in (("tracec dynamic=None", {"lib": "tracec", "dynamic": None}),
                      ("tracec dynamic=False", {"lib": "tracec", "dynamic": False}),
                      ("PyTorch eager", {"lib": "torch", "dynamic": None})):
        r = child(LM_CHILD, dict(cfg, steps=steps))
        extra = (f"  traces {r['traces']}, backend compiles {r['compiles']}, "
                 f"eager signatures {r['eager']}") if "traces" in r else ""
        print(f"  {name:22s} {r['wall_s']:7.2f} s{extra}")


def part_b(t: float) -> None:
    print("(b) 784-512-512-10 MLP SGD step, steady state, steps/s (best window of each; "
          "paired: median ratio of adjacent windows)")
    r = child(MLP_CHILD, {"time": t / 4, "windows": 12})
    for n in ("32", "256"):
        sym, spec = r[n]["symbolic"], r[n]["specialized"]
        print(f"  batch {n:>3}: symbolic {sym:8.1f}  specialized {spec:8.1f}  "
              f"ratio {sym / spec:.3f}  paired {r[n]['paired']:.3f}")
    sym, spec = r["symbolic"], r["specialized"]
    print(f"  traces: symbolic {sym['traces']}, specialized {spec['traces']}; backend "
          f"compiles: symbolic {sym['compiles']}, specialized {spec['compiles']}")


if __name__ == "__main__":
    main()
