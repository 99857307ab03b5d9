"""``torch.library.opcheck``: PyTorch's four test names and result
dictionary, each check reduced to what tracec can observe (``opcheck``'s
docstring says how).  Takes the ``tracec.library.Operator`` to check.
"""
from __future__ import annotations

from tracec import graph
from tracec.tensor import Tensor
from tracec.utils._pytree import tree_leaves

__all__ = ["OPCHECK_TESTS", "OpCheckError", "opcheck"]


OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor",
                 "test_aot_dispatch_dynamic")


def _clone_args(args, kwargs):
    def c(a):
        if isinstance(a, Tensor):
            return a.detach().clone().requires_grad_(a.requires_grad)
        if isinstance(a, (list, tuple)):
            return type(a)(c(x) for x in a)
        return a
    return tuple(c(a) for a in args), {k: c(v) for k, v in kwargs.items()}


def _tensors(x) -> list:
    return [t for t in tree_leaves(x) if isinstance(t, Tensor)]


def _close(a, b, atol, rtol) -> bool:
    import numpy as np
    x, y = a.detach().numpy(), b.detach().numpy()
    return x.shape == y.shape and np.allclose(x, y, atol=atol or 1e-5, rtol=rtol or 1.3e-6,
                                              equal_nan=True)


def opcheck(o, args, kwargs=None, *, test_utils=OPCHECK_TESTS, raise_exception=True,
            atol=None, rtol=None) -> dict:
    """``torch.library.opcheck``: the same four test names and result
    dictionary as PyTorch, each a reduced check:

    - ``test_schema``: inputs the schema does not mark as mutated keep
      their values, and no output is an input;
    - ``test_autograd_registration``: when an input requires grad, the op
      has an autograd formula (``register_autograd``) or is a kernel that
      autograd records through;
    - ``test_faketensor``: the fake implementation, called on copies of
      the real inputs (tracec has no FakeTensor), gives outputs of the
      kernel's shapes, dtypes and (significant) strides;
    - ``test_aot_dispatch_dynamic``: ``tracec.compile`` (its reference
      interpreter) of a call gives the eager outputs and, with an autograd
      formula, the eager gradients.
    """
    kwargs = kwargs or {}
    results = {}
    for name in ([test_utils] if isinstance(test_utils, str) else test_utils):
        if name not in OPCHECK_TESTS:
            raise ValueError(f"test_utils={name} is not a valid test; choose from "
                             f"{OPCHECK_TESTS}")
        try:
            _CHECKS[name](o, args, kwargs, atol, rtol)
            results[name] = "SUCCESS"
        except Exception as e:
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {name} failed with {e} (scroll up for "
                                   "stack trace)") from e
            results[name] = e
    return results


class OpCheckError(Exception):
    pass


def _test_schema(o, args, kwargs, atol, rtol):
    a, k = _clone_args(args, kwargs)
    b = o.schema.bind(a, k)
    before = {n: [t.detach().clone() for t in _tensors(v)] for n, v in b.arguments.items()}
    with graph.no_grad():
        out = o(*a, **k)
    for n, v in b.arguments.items():
        if n in o.schema.mutated:
            continue
        for t0, t1 in zip(before[n], _tensors(v)):
            if not _close(t0, t1, 0, 0):
                raise RuntimeError(f"{o.qualname}: argument {n} is not defined as mutable but "
                                   "was mutated")
    ins = {id(t) for t in _tensors(list(b.arguments.values()))}
    if any(id(t) in ins for t in _tensors(out)):
        raise RuntimeError(f"{o.qualname}: an output is also an input")


def _test_autograd_registration(o, args, kwargs, atol, rtol):
    if any(t.requires_grad for t in _tensors(list(args) + list(kwargs.values()))) and \
            o.opaque_autograd and o.backward is None:
        raise AssertionError(
            f"{o.qualname}: an input requires grad but no autograd formula was registered. "
            "Please use register_autograd to add one.")


def _test_faketensor(o, args, kwargs, atol, rtol):
    fake_fn = o.fake
    if fake_fn is None and o.schema.returns.strip() == "()" and o.schema.mutated:
        # PyTorch generates the trivial fake of an op that only mutates
        # its inputs and returns nothing
        def fake_fn(*a, **k):
            return None
    if fake_fn is None:
        raise RuntimeError(f"There was no fake impl registered for {o.qualname}. This is "
                           "necessary for torch.compile/export/fx tracing to work. Please use "
                           "`register_fake` to add an fake impl.")
    a, k = _clone_args(args, kwargs)
    with graph.no_grad():
        real = _tensors(o(*a, **k))
        a, k = _clone_args(args, kwargs)
        fake = _tensors(fake_fn(*a, **k))
    if len(real) != len(fake) or any(tuple(r.shape) != tuple(f.shape) or r.dtype != f.dtype
                                     for r, f in zip(real, fake)):
        raise RuntimeError(f"{o.qualname}: the fake implementation gives "
                           f"{[(f.dtype, list(f.shape)) for f in fake]}, the kernel "
                           f"{[(r.dtype, list(r.shape)) for r in real]}")
    for r, f in zip(real, fake):
        at = _stride_mismatch(r, f)
        if at is not None:
            raise RuntimeError(
                f"When comparing the output of {o.namespace}.{o.name}.default on FakeTensor "
                "and concrete Tensors, found mismatched tensor metadata: Stride mismatch! "
                f"Strides are {r.stride()} and {f.stride()} (mismatched at {at})!")


def _stride_mismatch(real: Tensor, fake: Tensor):
    """The first dim where the strides differ, PyTorch's significant-strides
    rule (dims of size 1 and empty tensors do not count); None when none."""
    if real.numel() == 0:
        return None
    for i, (n, a, b) in enumerate(zip(real.shape, real.stride(), fake.stride())):
        if n > 1 and a != b:
            return i
    return None


def _test_aot_dispatch_dynamic(o, args, kwargs, atol, rtol):
    import warnings
    from tracec.compiler import compile as compile_

    def run(compiled):
        a, k = _clone_args(args, kwargs)
        leaves = [t for t in _tensors(list(a) + list(k.values())) if t.requires_grad]

        def call(*a_, **k_):
            out = o(*a_, **k_)
            outs = [t for t in _tensors(out) if t.requires_grad]
            if outs and leaves and o.backward is not None:
                sum(t.sum() for t in outs).backward()
            return out
        f = compile_(call, backend="interp") if compiled else call
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = f(*a, **k)
        return _tensors(out), [t.grad for t in leaves]
    (eo, eg), (co, cg) = run(False), run(True)
    for x, y in list(zip(eo, co)) + [(g, h) for g, h in zip(eg, cg) if g is not None]:
        if y is None or not _close(x, y, atol, rtol):
            raise AssertionError(f"{o.qualname}: compiled and eager results differ")


_CHECKS = {"test_schema": _test_schema, "test_autograd_registration": _test_autograd_registration,
           "test_faketensor": _test_faketensor,
           "test_aot_dispatch_dynamic": _test_aot_dispatch_dynamic}
