"""A warm start (issue 12, goal 2) across real processes: a process that
finds a training step in the disk cache another one filled computes what
that one did, and whatever changed in between (a shape, a dtype, a
parameter replaced, a module attribute, a global the function reads,
requires_grad, train/eval mode, the function's source, an optimizer
hyper-parameter, the optimizer's state present before the first call)
either keeps the same trace, whose code is loaded (``loads``), or makes
another one, which is compiled (``compiles``); in both cases the results
equal eager ones.

These pin the contract a faster warm start (serving the first call from
the cache without tracing it) must keep."""
import os

import numpy as np
from program_runner import python_c

# Variants keep every line where they are: the cache key holds the trace's
# source locations.  (No linear layer's bias right before the batch norm:
# its gradient is zero up to rounding, which Adam scales up to whole steps.)  ``python -c PROGRAM MODE VARIANT...``: MODE "compiled",
# or "both" (each variant eagerly, then compiled, from the same seed).
PROGRAM = '''
import hashlib
import sys
import numpy as np
import tracec
import tracec.nn as nn
import tracec.nn.functional as F
SCALE = 1.0


def build(v):
    global SCALE
    SCALE = 2.0 if v == "global" else 1.0
    tracec.manual_seed(0)
    model = nn.Sequential(nn.BatchNorm1d(6), nn.Linear(6, 8),
                          nn.LeakyReLU(0.2 if v == "attr" else 0.01), nn.Linear(8, 3))
    if v == "dtype":
        model = model.double()
    if v == "param":
        model[1].weight = nn.Parameter(tracec.ones(8, 6) * 0.1)
    if v == "rg":
        model[1].weight.requires_grad_(False)
    if v == "eval":
        model.eval()
    opt = tracec.optim.AdamW([p for p in model.parameters() if p.requires_grad],
                             lr=0.05 if v == "lr" else 0.1,
                             weight_decay=0.5 if v == "wd" else 0.01)
    n = 7 if v == "shape" else 5
    x = tracec.randn(n, 6, dtype=tracec.float64 if v == "dtype" else tracec.float32)
    y = tracec.randint(0, 3, (n,))
    return model, opt, x, y


def run(v, compiled):
    model, opt, x, y = build(v)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x) * SCALE, y)
        loss.backward()
        opt.step()
        return loss
    if v == "state":           # the optimizer's state exists before the first call
        step(x, y)
    fn = tracec.compile(step) if compiled else step
    losses = [fn(x, y).item() for _ in range(3)]
    h = hashlib.sha256()
    sums = []
    for t in list(model.parameters()) + [s[k] for s in opt.state.values() for k in sorted(s)]:
        a = np.asarray(t.detach().numpy())
        h.update(a.tobytes())
        sums.append(float(np.abs(a.astype(np.float64)).sum()))
    info = fn.cache_info() if compiled else None
    counts = f"{info.traces} {info.compiles} {info.loads}" if compiled else "- - -"
    print(v, "compiled" if compiled else "eager", counts, h.hexdigest()[:16],
          " ".join(repr(v) for v in losses + sums))


for v in sys.argv[2:]:
    for c in ((False, True) if sys.argv[1] == "both" else (sys.argv[1] == "compiled",)):
        run(v, c)
'''

#: What changes between the process that filled the cache and the one
#: that reads it, and whether the trace stays the same (its code loaded)
#: or not (compiled): a replaced parameter, the learning rate (read as an
#: input) and optimizer state made earlier leave the trace as it was.
VARIANTS = {"base": "load", "shape": "compile", "dtype": "compile", "param": "load",
            "attr": "compile", "global": "compile", "rg": "compile", "eval": "compile",
            "lr": "load", "wd": "compile", "state": "load"}


def _run(code, cache, mode, *variants) -> dict:
    r = python_c(code, mode, *variants, timeout=300,
                 env={**os.environ, "TRACEC_CACHE_DIR": str(cache)})
    assert r.returncode == 0, r.stderr[-3000:]
    out = {}
    for line in r.stdout.splitlines():
        v, kind, traces, compiles, loads, digest, *numbers = line.split()
        out[v, kind] = {"counts": (traces, compiles, loads), "digest": digest,
                        "numbers": [float(n) for n in numbers]}
    return out


def _check(got: dict, v: str, expect: str) -> None:
    eager, compiled = got[v, "eager"], got[v, "compiled"]
    np.testing.assert_allclose(compiled["numbers"], eager["numbers"], rtol=2e-5, atol=1e-6,
                               err_msg=f"variant {v}: compiled differs from eager")
    want = ("1", "0", "1") if expect == "load" else ("1", "1", "0")
    assert compiled["counts"] == want, (v, compiled["counts"], expect)


def test_a_process_reading_the_cache_matches_one_that_traced_whatever_changed(tmp_path):
    filled = _run(PROGRAM, tmp_path, "compiled", "base")
    assert filled["base", "compiled"]["counts"] == ("1", "1", "0")
    got = _run(PROGRAM, tmp_path, "both", *VARIANTS)
    # The same program: the same parameters and optimizer state, bit for bit.
    assert got["base", "compiled"]["digest"] == filled["base", "compiled"]["digest"]
    assert got["base", "compiled"]["numbers"] == filled["base", "compiled"]["numbers"]
    for v, expect in VARIANTS.items():
        _check(got, v, expect)


def test_a_changed_source_is_compiled_again(tmp_path):
    """The function's source changed (same lines, same file name): the
    trace differs, so its code is compiled, never the old code loaded."""
    _run(PROGRAM, tmp_path, "compiled", "base")
    old = "loss = F.cross_entropy(model(x) * SCALE, y)"
    assert PROGRAM.count(old) == 1
    changed = PROGRAM.replace(old, "loss = F.cross_entropy((model(x) * SCALE).tanh(), y)")
    got = _run(changed, tmp_path, "both", "base")
    _check(got, "base", "compile")
    assert got["base", "eager"]["numbers"] != _run(PROGRAM, tmp_path, "both", "base")[
        "base", "eager"]["numbers"]
