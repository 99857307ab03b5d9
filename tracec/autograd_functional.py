"""``tracec.autograd.functional``: PyTorch's ``jacobian``, ``hessian``,
``vjp``, ``jvp``, ``hvp`` and ``vhp``, built on ``tracec.autograd.grad``
with one reverse pass per output element.  Inside ``tracec.compile`` they
trace like any ``autograd.grad`` call (the recorded passes are the compiled
code).

Invariants (PyTorch's): results mirror the tuple-ness of ``inputs`` and of
what ``func`` returns (a Jacobian of output ``i`` with respect to input
``j`` has shape ``out_i.shape + in_j.shape``); an output that does not
depend on an input gives zeros (``strict=True``: an error instead); with
``create_graph=False`` every result is detached, with ``create_graph=True``
results stay differentiable with respect to the (grad-requiring) inputs.
``vectorize`` is accepted and changes nothing but speed in PyTorch; here
the loop is always used.  ``strategy="forward-mode"`` needs
``vectorize=True`` (and neither ``strict`` nor ``create_graph``) as in
PyTorch and gives the same values, nested in lists where PyTorch's are.
"""
from __future__ import annotations

import sys

import numpy as np

from tracec import autograd, graph
from tracec.shape_ops import stack
from tracec.tensor import Tensor

__all__ = ["jacobian", "hessian", "vjp", "jvp", "hvp", "vhp"]


def _as_tuple(x, arg: str, fn: str):
    is_tuple = isinstance(x, (tuple, list))
    xs = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, Tensor):
            kind = f"{arg}[{i}]" if is_tuple else arg
            raise TypeError(f"The {kind} given to {fn} must be a Tensor, not "
                            f"{type(t).__name__}")
    return is_tuple, xs


def _prepare(inputs, create_graph):
    """Leaves to differentiate with respect to (connected to the caller's
    graph when ``create_graph`` and the input already requires grad)."""
    return tuple(x.view_as(x) if create_graph and x.requires_grad
                 else x.detach().requires_grad_(True) for x in inputs)


def _finish(t, create_graph):
    return t if create_graph or t is None else t.detach()


def _zeros(x: Tensor) -> Tensor:
    return Tensor._make(np.zeros(x.shape, x.dtype.np), x.dtype)


def _grads(outputs, inputs, grad_outputs, create_graph, strict, what):
    """``autograd.grad`` that gives zeros (or, ``strict``, an error) for
    inputs the outputs do not reach."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        grads = [None] * len(inputs)
    else:
        grads = autograd.grad([o for o, _ in pairs], inputs, [g for _, g in pairs],
                              retain_graph=True, create_graph=create_graph, allow_unused=True)
    out = []
    for i, (x, g) in enumerate(zip(inputs, grads)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent "
                                   f"of input {i}. This is not allowed in strict mode{what}.")
            g = _zeros(x)
        out.append(g)
    return tuple(out)


def _post(res, tuple_flags):
    """Unwrap the tuple levels the caller did not give as tuples."""
    if len(tuple_flags) == 1:
        return res if tuple_flags[0] else res[0]
    outer, inner = tuple_flags       # (PyTorch's _tuple_postprocess: a list stays a list)
    if not inner:
        res = tuple(r[0] for r in res)
    return res if outer else res[0]


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                             'Hint: If your function has more outputs than inputs, '
                             '"forward-mode" tends to be more performant. Otherwise, prefer to '
                             'use "reverse-mode".')
    forward = strategy == "forward-mode"
    if forward:
        if create_graph:
            raise NotImplementedError('torch.autograd.functional.jacobian: `create_graph=True` '
                                      'and `strategy="forward-mode"` are not supported together '
                                      '(yet). Please either set `create_graph=False` or '
                                      '`strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError('torch.autograd.functional.jacobian: `strict=True` and '
                               '`strategy="forward-mode"` are not supported together (yet). '
                               'Please either set `strict=False` or `strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse "
                                      "Hessian isonly implemented for `vectorize=True`.")
    with graph.enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", "jacobian")
        xs = _prepare(xs, create_graph)
        out_tuple, outs = _as_tuple(func(*xs), "outputs of the user-provided function",
                                    "jacobian")
        jac = []
        for o in outs:
            rows = [[] for _ in xs]
            for k in range(o.numel()):
                seed = np.zeros(o.numel(), o.dtype.np)
                seed[k] = 1
                seed = Tensor._make(seed.reshape(o.shape), o.dtype)
                gs = _grads([o], xs, [seed], create_graph, strict, " (jacobian)")
                for r, g in zip(rows, gs):
                    r.append(g)
            per_in = []
            for x, r in zip(xs, rows):
                if r:
                    j = stack(r).reshape(*o.shape, *x.shape)
                else:
                    j = Tensor._make(np.zeros((*o.shape, *x.shape), x.dtype.np), x.dtype)
                per_in.append(_finish(j, create_graph))
            # (PyTorch's forward mode collects lists, which its post-processing keeps)
            jac.append(per_in if forward else tuple(per_in))
    return _post(jac if forward else tuple(jac), (out_tuple, in_tuple))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    in_tuple, xs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def scalar(*a):
        out = func(*a)
        if isinstance(out, tuple) or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        return out.squeeze()

    def jac(*a):
        return jacobian(scalar, a, create_graph=True)

    res = jacobian(jac, xs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _post(res, (in_tuple, in_tuple))


def _check_v(v, outs, fn):
    if v is None:
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError(f"The vector v can only be None if the user-provided function "
                               f"returns a single Tensor with a single element ({fn}).")
        return (Tensor._make(np.ones(outs[0].shape, outs[0].dtype.np), outs[0].dtype),)
    _, vs = _as_tuple(v, "v", fn)
    if len(vs) != len(outs):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(outs)} but got "
                           f"{len(vs)} ({fn}).")
    for i, (a, b) in enumerate(zip(vs, outs)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"Entry {i} in v has invalid size: should be {tuple(b.shape)} "
                               f"but got {tuple(a.shape)} ({fn}).")
    return vs


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    with graph.enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", "vjp")
        xs = _prepare(xs, create_graph)
        out_tuple, outs = _as_tuple(func(*xs), "outputs of the user-provided function", "vjp")
        vs = _check_v(v, outs, "vjp")
        res = _grads(outs, xs, vs, create_graph, strict, " (vjp)")
    outs = tuple(_finish(o, create_graph) for o in outs)
    return (_post(outs, (out_tuple,)),
            _post(tuple(_finish(g, create_graph) for g in res), (in_tuple,)))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``J v`` as the contraction of the Jacobian with ``v``."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "jvp")
    if v is None:
        if len(xs) != 1 or xs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the "
                               "user-provided function is a single Tensor with a single "
                               "element.")
        vs = (Tensor._make(np.ones(xs[0].shape, xs[0].dtype.np), xs[0].dtype),)
    else:
        vs = _check_v(v, xs, "jvp")
    with graph.enable_grad():
        outs = func(*_prepare(xs, create_graph))
    out_tuple = isinstance(outs, (tuple, list))
    outs = tuple(outs) if out_tuple else (outs,)
    jac = jacobian(func, xs, create_graph=create_graph, strict=strict)
    jac = _normalise(jac, out_tuple, True)
    res = []
    for o, row in zip(outs, jac):
        total = None
        for j, vv in zip(row, vs):
            term = (j.reshape(o.numel(), vv.numel()) @ vv.reshape(-1).to(j.dtype)).reshape(
                *o.shape)
            total = term if total is None else total + term
        res.append(_finish(total, create_graph))
    outs = tuple(_finish(o, create_graph) for o in outs)
    return _post(outs, (out_tuple,)), _post(tuple(res), (out_tuple,))


def _normalise(jac, out_tuple, in_tuple):
    jac = jac if out_tuple else (jac,)
    return tuple(r if in_tuple else (r,) for r in jac)


def _second(func, inputs, v, create_graph, strict, fn):
    with graph.enable_grad():
        in_tuple, xs = _as_tuple(inputs, "inputs", fn)
        xs = _prepare(xs, create_graph)
        out_tuple, outs = _as_tuple(func(*xs), "outputs of the user-provided function", fn)
        if out_tuple or outs[0].numel() != 1:
            raise RuntimeError(f"The function given to {fn} should return a single Tensor "
                               "containing a single element")
        vs = _check_v(v, xs, fn)
        first = _grads(outs, xs, [_ones(outs[0])], True, strict,
                       f" ({fn})")
        dot = None
        for g, vv in zip(first, vs):
            term = (g * vv).sum()
            dot = term if dot is None else dot + term
        res = _grads([dot], xs, [None], create_graph, strict, f" ({fn})")
    out = _finish(outs[0], create_graph)
    return out, _post(tuple(_finish(g, create_graph) for g in res), (in_tuple,))


def _ones(t: Tensor) -> Tensor:
    return Tensor._make(np.ones(t.shape, t.dtype.np), t.dtype)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``v^T H`` (a gradient of ``grad(func) . v``)."""
    return _second(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``H v``; the Hessian of a twice-differentiable function is
    symmetric, so this is ``vhp``'s value."""
    return _second(func, inputs, v, create_graph, strict, "hvp")


# ``tracec.autograd.functional`` (tracec.autograd is a module, not a package).
autograd.functional = sys.modules[__name__]
sys.modules["tracec.autograd.functional"] = sys.modules[__name__]
