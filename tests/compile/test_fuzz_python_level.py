"""Differential fuzzer: random Python-level program shapes, eager vs compiled.

Hypothesis draws a small program (a list of ops over the tensors of a
container argument, a captured tensor, a captured Python number, a captured
list of tensors, a Python number argument, in-place updates of arguments and
of captured tensors) and a schedule of calls, with changes between calls
(the captured number changes, the captured tensor is rebound or updated in
place, a list element is replaced, the number argument changes, the same
tensor is passed twice).  Two copies of the program's world run it, one
eagerly and one through ``tracec.compile``; after every call the results,
the arguments and the captured tensors must agree.

In CI it runs a bounded number of examples; a longer run:

    TRACEC_FUZZ_EXAMPLES=2000 python -m pytest tests/compile/test_fuzz_python_level.py
"""
import os
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracec

EXAMPLES = int(os.environ.get("TRACEC_FUZZ_EXAMPLES", "30"))
CPU_EXAMPLES = int(os.environ.get("TRACEC_FUZZ_CPU_EXAMPLES", "4"))
N = 3
Pair = namedtuple("Pair", "a b")


@dataclass
class Box:
    a: object
    b: object


CONTAINERS = ["bare", "tuple", "list", "dict", "namedtuple", "dataclass", "nested"]


def pack(kind, a, b):
    return {"bare": lambda: (a, b), "tuple": lambda: ((a, b),), "list": lambda: ([a, b],),
            "dict": lambda: ({"a": a, "b": b},), "namedtuple": lambda: (Pair(a, b),),
            "dataclass": lambda: (Box(a, b),),
            "nested": lambda: ({"xs": [(a,), {"b": b}]},)}[kind]()


def unpack(kind, args):
    if kind == "bare":
        return args[0], args[1]
    c = args[0]
    if kind in ("tuple", "list", "namedtuple"):
        return c[0], c[1]
    if kind == "dict":
        return c["a"], c["b"]
    if kind == "dataclass":
        return c.a, c.b
    return c["xs"][0][0], c["xs"][1]["b"]


OPS = st.sampled_from(["add_a", "mul_b", "add_cap", "scale_k", "scale_s", "add_store",
                       "inplace_a", "inplace_cap", "tanh", "sum_b"])
CHANGES = st.sampled_from(["none", "k", "rebind_cap", "cap_inplace", "store_item", "s",
                           "alias", "new_values"])


def world(seed):
    """The program's captured state (one copy per run)."""
    rng = np.random.default_rng(seed)
    return {"k": 1.5, "cap": tracec.tensor(rng.standard_normal(N).astype(np.float32)),
            "store": [tracec.tensor(rng.standard_normal(N).astype(np.float32))
                      for _ in range(2)]}


def build(ops, kind, w, ret, grad=False):
    k = w["k"]
    cap = w["cap"]
    store = w["store"]

    def f(*args):
        nonlocal cap
        *targs, s = args
        a, b = unpack(kind, targs)
        acc = a * 0.5
        for op in ops:
            if op == "add_a":
                acc = acc + a
            elif op == "mul_b":
                acc = acc * b
            elif op == "add_cap":
                acc = acc + cap
            elif op == "scale_k":
                acc = acc * k
            elif op == "scale_s":
                acc = acc * s
            elif op == "add_store":
                acc = acc + store[1]
            elif op == "inplace_a" and not grad:   # (a leaf that requires grad: eager refuses)
                a.add_(acc * 0.25)
            elif op == "inplace_cap":
                cap.mul_(0.9)
            elif op == "tanh":
                acc = acc.tanh()
            elif op == "sum_b":
                acc = acc + b.sum()
        if grad:
            (acc * acc).sum().backward()
            acc = acc.detach()
        if ret == "tensor":
            return acc
        if ret == "tuple":
            return acc, (a * 1, s)
        return {"acc": acc, "pair": Pair(acc.sum(), b)}

    def change(what, step):
        nonlocal k, cap
        if what == "k":
            k = k + 0.25
        elif what == "rebind_cap":
            cap = tracec.full((N,), 0.1 * step)
        elif what == "cap_inplace":
            cap.add_(1.0)
        elif what == "store_item":
            store[1] = tracec.full((N,), -0.5 * step)
    return f, change, (lambda: cap), store


def flat(x):
    if isinstance(x, tracec.Tensor):
        return [x.detach().numpy().copy()]
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in flat(x[k])]
    if isinstance(x, (tuple, list)):
        return [v for e in x for v in flat(e)]
    return [np.asarray(x)]


def run(ops, kind, ret, schedule, backend, grad=False):
    we, wc = world(0), world(0)
    fe, change_e, cap_e, store_e = build(ops, kind, we, ret, grad)
    fc, change_c, cap_c, store_c = build(ops, kind, wc, ret, grad)
    comp = tracec.compile(fc, backend=backend)
    rng = np.random.default_rng(1)
    s = 2.0
    for step, what in enumerate(schedule):
        change_e(what, step)
        change_c(what, step)
        if what == "s":
            s += 1.0
        va = rng.standard_normal(N).astype(np.float32)
        vb = va if what == "alias" else rng.standard_normal(N).astype(np.float32)
        calls = []
        for _ in range(2):
            a = tracec.tensor(va, requires_grad=grad)
            b = a if what == "alias" else tracec.tensor(vb, requires_grad=grad and step % 2 == 0)
            calls.append((a, b))
        (ae, be), (ac, bc) = calls
        want = fe(*pack(kind, ae, be), s)
        got = comp(*pack(kind, ac, bc), s)
        for x, y in zip(flat(got), flat(want)):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5,
                                       err_msg=f"call {step} ({what}) of {ops} {kind} {ret}")
        grads_c = [t.grad for t in (ac, bc) if t.grad is not None]
        grads_e = [t.grad for t in (ae, be) if t.grad is not None]
        assert len(grads_c) == len(grads_e)
        for x, y in zip(flat([ac, bc, cap_c(), store_c, grads_c]),
                        flat([ae, be, cap_e(), store_e, grads_e])):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5,
                                       err_msg=f"state after call {step} ({what}) of {ops}")


PROGRAMS = dict(ops=st.lists(OPS, min_size=1, max_size=6),
                kind=st.sampled_from(CONTAINERS),
                ret=st.sampled_from(["tensor", "tuple", "dict"]),
                schedule=st.lists(CHANGES, min_size=2, max_size=6))


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(**PROGRAMS)
def test_fuzz_eager_equals_compiled_interp(ops, kind, ret, schedule):
    run(ops, kind, ret, schedule, "interp")


@settings(max_examples=EXAMPLES // 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(**PROGRAMS)
def test_fuzz_eager_equals_compiled_with_argument_gradients(ops, kind, ret, schedule):
    """The same programs with arguments that require grad (some calls) and a
    backward inside: every argument's .grad must be this call's."""
    run(ops, kind, ret, schedule, "interp", grad=True)


@settings(max_examples=CPU_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(**PROGRAMS)
def test_fuzz_eager_equals_compiled_cpu(ops, kind, ret, schedule):
    run(ops, kind, ret, schedule, "cpu")
