"""``tracec demo``: train a small MLP on the shipped 8x8 digits, eagerly and
then under ``tracec.compile``, from the same initial weights, and report
accuracy, speed, compile time and where the IR was dumped.

Invariant: both runs see the same batches in the same order, so their final
weights agree to float tolerance (the demo prints the largest difference).
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np
from tqdm import tqdm

import tracec
from tracec import nn
from tracec.data import digits_split
import tracec.nn.functional as F

BATCH = 64
WARMUP = 5


def _model(seed: int):
    tracec.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def _batches(n: int, epochs: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        perm = rng.permutation(n)
        for i in range(0, n - BATCH + 1, BATCH):
            yield perm[i:i + BATCH]


def _accuracy(model, x, y) -> float:
    with tracec.no_grad():
        pred = model(x).argmax(dim=1)
    return float((pred == y).float().mean().item())


def _train(model, step, data, idx_stream, total, label, echo):
    x_train, y_train = data
    t0 = time.perf_counter()
    first = None
    loss = None
    for k, idx in enumerate(tqdm(idx_stream, total=total, desc=label, unit="step",
                                 leave=False, mininterval=0.2)):
        xb = tracec.from_numpy(x_train[idx])
        yb = tracec.from_numpy(y_train[idx])
        loss = step(xb, yb)
        if k == 0:
            first = time.perf_counter() - t0
        if k == WARMUP - 1:
            t_warm = time.perf_counter()
    # Steps/s of the steady state: after the first WARMUP steps (tracing,
    # retracing once the optimizer has state, compiling).
    rate = (total - WARMUP) / max(time.perf_counter() - t_warm, 1e-9)
    return rate, first, float(loss.item())


def run_demo(epochs=None, backend=None, dump_dir=None, echo=print):
    epochs = epochs or 20
    split = digits_split(test_fraction=0.2, seed=0)
    x_train, y_train = split.x_train.astype(np.float32), split.y_train.astype(np.int64)
    x_test = tracec.from_numpy(split.x_test.astype(np.float32))
    y_test = tracec.from_numpy(split.y_test.astype(np.int64))
    steps_per_epoch = len(x_train) // BATCH
    total = steps_per_epoch * epochs
    echo(f"tracec demo: MLP 64-128-10 on the 8x8 digits ({len(x_train)} train / "
         f"{len(split.x_test)} test images), batch {BATCH}, {epochs} epochs, SGD momentum")

    def make_step(model, opt):
        def train_step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return train_step

    eager_model = _model(0)
    eager_opt = tracec.optim.SGD(eager_model.parameters(), lr=0.1, momentum=0.9)
    e_rate, _, e_loss = _train(eager_model, make_step(eager_model, eager_opt),
                               (x_train, y_train), _batches(len(x_train), epochs, 1), total,
                               "eager", echo)
    e_acc = _accuracy(eager_model, x_test, y_test)
    echo(f"  eager:    test accuracy {e_acc:6.2%}  final loss {e_loss:.4f}  "
         f"{e_rate:8.1f} steps/s")

    dump_dir = dump_dir or os.path.join(tempfile.gettempdir(), "tracec-demo-ir")
    comp_model = _model(0)
    comp_opt = tracec.optim.SGD(comp_model.parameters(), lr=0.1, momentum=0.9)
    step = tracec.compile(make_step(comp_model, comp_opt), backend=backend, dump=dump_dir)
    c_rate, c_first, c_loss = _train(comp_model, step, (x_train, y_train),
                                     _batches(len(x_train), epochs, 1), total, "compiled", echo)
    c_acc = _accuracy(comp_model, x_test, y_test)
    info = step.cache_info()
    echo(f"  compiled: test accuracy {c_acc:6.2%}  final loss {c_loss:.4f}  "
         f"{c_rate:8.1f} steps/s  ({c_rate / e_rate:.2f}x eager, backend "
         f"{step.backend})")
    t = info.timings
    echo(f"  compile:  first call {c_first * 1e3:.0f} ms (eager run + trace "
         f"{t.get('trace_s', 0) * 1e3:.0f} ms, autodiff and passes {t.get('passes_s', 0) * 1e3:.0f}"
         f" ms); {info.traces} trace(s): {'; '.join(info.reasons)}")
    if t.get("cache") == "hit":
        echo(f"  cache:    native code loaded from the disk cache in "
             f"{t['cache_load_s'] * 1e3:.1f} ms (tracec cache info)")
    elif "backend_s" in t:
        echo(f"  backend:  cold compile of the step to native code {t['backend_s'] * 1e3:.0f} ms;"
             " cached on disk for the next run (tracec cache info)")
    diff = max(float(np.abs(a.detach().numpy() - b.detach().numpy()).max())
               for a, b in zip(eager_model.parameters(), comp_model.parameters()))
    echo(f"  eager vs compiled weights: max abs difference {diff:.2e}")
    echo(f"  IR of the compiled step dumped to {dump_dir}")
    return {"eager_acc": e_acc, "compiled_acc": c_acc, "eager_rate": e_rate,
            "compiled_rate": c_rate, "max_diff": diff, "dump_dir": dump_dir}
