"""``tracec.func``: PyTorch's function transforms (``grad``,
``grad_and_value``, ``vjp``, ``jacrev``, ``jacfwd``, ``hessian``, ``vmap``,
``functional_call``).  Inside ``tracec.compile`` they trace as the
``autograd.grad`` calls and per-example loops they are made of (the
tutorials' compiled ``jvp(grad(f))`` hvp), as ``torch.compile`` traces
``torch.func``.

Invariants: a transformed function gives PyTorch's values and structure
(``argnums`` tuple -> tuple of results; ``has_aux`` -> aux returned
alongside, untouched).  Differentiating transforms compose (``grad`` of
``grad``): each runs its inner derivative with a graph, and returns a
detached result unless a caller's input already required grad.  ``vmap``
slices each mapped input along its ``in_dims``, calls the function once per
example and stacks the results along ``out_dims``: exact for pure
functions; ``randomness`` as PyTorch's: ``"error"`` (the default) raises
at a draw, ``"same"`` gives every example the same draws, ``"different"``
lets each example draw its own.  ``jacfwd`` uses reverse mode
(same values).
"""
from __future__ import annotations

import contextlib
import functools

import numpy as np

from tracec import _C, autograd, graph
from tracec.autograd import forward_ad
from tracec.autograd_functional import _zeros
from tracec.nn.utils.stateless import call_with
from tracec.shape_ops import stack
from tracec.tensor import Tensor

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "hessian", "vmap",
           "functional_call", "stack_module_state", "replace_all_batch_norm_modules_",
           "functionalize"]


def replace_all_batch_norm_modules_(root):
    """``root`` with every batch norm in it (``root`` included) switched to
    batch statistics: running mean, variance and batch count None,
    ``track_running_stats`` False (what vmap over a model's batch needs)."""
    from tracec.nn.modules.batchnorm import _BatchNorm
    for m in root.modules():
        if isinstance(m, _BatchNorm) and m.track_running_stats:
            m.running_mean = None
            m.running_var = None
            m.num_batches_tracked = None
            m.track_running_stats = False
    return root


def _leaves(tree):
    if isinstance(tree, Tensor):
        return [tree]
    if isinstance(tree, (tuple, list)):
        return [x for t in tree for x in _leaves(t)]
    if isinstance(tree, dict):
        return [x for t in tree.values() for x in _leaves(t)]
    return []


def _map(fn, tree):
    if isinstance(tree, Tensor):
        return fn(tree)
    if isinstance(tree, (tuple, list)):
        return type(tree)(_map(fn, t) for t in tree)
    if isinstance(tree, dict):
        return {k: _map(fn, v) for k, v in tree.items()}
    return tree


def _unit(o, k: int) -> Tensor:
    """A fresh constant of ``o``'s shape and dtype: 1 at flat index ``k``,
    0 elsewhere (no write into another tensor's data: inside a trace that
    data is not what the compiled code reads)."""
    a = np.zeros(tuple(o.shape), o.dtype.np)
    a.reshape(-1)[k] = 1
    return Tensor._make(a, o.dtype)


def _argnums(argnums, n, fn):
    nums = argnums if isinstance(argnums, tuple) else (argnums,)
    for a in nums:
        if not isinstance(a, int) or not -n <= a < n:
            raise RuntimeError(f"{fn}: Got argnums={argnums} but only {n} positional "
                               "inputs")
    return tuple(a % n for a in nums)


def _track(args, nums):
    """Args with those at ``nums`` made fresh graph inputs (connected to the
    caller's graph where they already require grad); their leaves too."""
    args = list(args)
    for a in nums:
        args[a] = _map(lambda x: x.view_as(x) if x.requires_grad
                       else x.detach().requires_grad_(True), args[a])
    return args


def _keep_graph(args, nums) -> bool:
    return graph.is_grad_enabled() and any(x.requires_grad for a in nums
                                           for x in _leaves(args[a]))


def _reaches_outside(outs, inside) -> bool:
    """Whether the graph of ``outs`` reaches a leaf other than the tracked
    arguments ``inside``: a tensor ``func`` closes over that requires grad (a
    module's parameters).  torch.func's results then stay in the caller's
    graph (MeanFlow's ``u, dudt = jvp(model, ...)`` trained through ``u``; a
    gradient penalty through ``func.grad``), as with an argument that
    requires grad."""
    ids = {id(x) for x in inside}
    return any(id(leaf) not in ids
               for leaf in graph.reached_leaves([o for o in outs if isinstance(o, Tensor)]))


@contextlib.contextmanager
def _transformed():
    """The function a transform runs is inside it (``torch._C.
    _are_functorch_transforms_active()`` is True there)."""
    _C.FUNCTORCH_DEPTH[0] += 1
    try:
        yield
    finally:
        _C.FUNCTORCH_DEPTH[0] -= 1


@contextlib.contextmanager
def _randomness(mode: str):
    """vmap's ``randomness``: ``"error"`` makes a draw raise (PyTorch's
    message); ``"same"`` starts every example from the default
    generator's state at the call, so each draws what one unbatched call
    draws, and the generator ends as after one; ``"different"`` lets the
    examples draw in turn.  Yields what runs before each example."""
    from tracec import creation, torch_rng
    old = torch_rng.VMAP_NO_RANDOM[0]
    # (the innermost vmap's mode decides)
    torch_rng.VMAP_NO_RANDOM[0] = 1 if mode == "error" else 0
    gen = creation.default_generator
    state = gen.get_state() if mode == "same" and gen._eager() is not None else None
    try:
        yield (lambda: None) if state is None else (lambda: gen.set_state(state))
    finally:
        torch_rng.VMAP_NO_RANDOM[0] = old


def _grad_and_value(func, argnums, has_aux, args, kwargs, name):
    nums = _argnums(argnums, len(args), name)
    outer = graph.is_grad_enabled()
    keep = _keep_graph(args, nums)
    with graph.enable_grad():
        targs = _track(args, nums)
        with _transformed():
            out = func(*targs, **kwargs)
        aux = None
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise RuntimeError(f"{name}(f)(*args): output of function f should be a tuple: "
                                   "(output, aux) if has_aux is True")
            out, aux = out
        # (PyTorch's grad is its grad_and_value: its messages name that)
        if not isinstance(out, Tensor):
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a "
                               f"Tensor, got {type(out)}")
        if out.dim() != 0:
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a "
                               f"scalar Tensor, got tensor with {out.dim()} dims. Maybe you "
                               "wanted to use the vjp or jacrev APIs instead?")
        leaves = [x for a in nums for x in _leaves(targs[a])]
        keep = keep or (outer and _reaches_outside([out], leaves))
        gs = (autograd.grad(out, leaves, create_graph=True, allow_unused=True)
              if out.requires_grad else [None] * len(leaves))
    gs = iter([(_zeros(x) if g is None else g) if keep else
               (_zeros(x) if g is None else g.detach()) for x, g in zip(leaves, gs)])
    per_arg = tuple(_map(lambda _: next(gs), targs[a]) for a in nums)
    result = per_arg if isinstance(argnums, tuple) else per_arg[0]
    value = out if keep else out.detach()
    if has_aux:
        aux = aux if keep else _map(Tensor.detach, aux)
        return result, (value, aux)
    return result, value


def grad_and_value(func, argnums=0, has_aux=False):
    def wrapper(*args, **kwargs):
        return _grad_and_value(func, argnums, has_aux, args, kwargs, "grad_and_value")
    return wrapper


def grad(func, argnums=0, has_aux=False):
    def wrapper(*args, **kwargs):
        g, value = _grad_and_value(func, argnums, has_aux, args, kwargs, "grad")
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux=False):
    """``(output, vjp_fn[, aux])``; ``vjp_fn(cotangents)`` returns a tuple
    with one gradient per primal."""
    nums = tuple(range(len(primals)))
    outer = graph.is_grad_enabled()
    keep = _keep_graph(primals, nums)
    with graph.enable_grad():
        targs = _track(primals, nums)
        with _transformed():
            out = func(*targs)
        aux = None
        if has_aux:
            out, aux = out
    leaves = [x for a in targs for x in _leaves(a)]
    outs = _leaves(out)
    keep = keep or (outer and _reaches_outside(outs, leaves))

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        cots = _leaves(cotangents)
        if len(cots) != len(outs):
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as "
                               f"pytree structure of outputs to the function ({len(outs)} "
                               f"tensors, got {len(cots)})")
        pairs = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
        with graph.enable_grad():
            gs = (autograd.grad([o for o, _ in pairs], leaves, [c for _, c in pairs],
                                retain_graph=True, create_graph=True, allow_unused=True)
                  if pairs else [None] * len(leaves))
        it = iter([_zeros(x) if g is None else (g if keep else g.detach())
                   for x, g in zip(leaves, gs)])
        return tuple(_map(lambda _: next(it), a) for a in targs)

    value = out if keep else _map(Tensor.detach, out)
    if has_aux:
        return value, vjp_fn, (aux if keep else _map(Tensor.detach, aux))
    return value, vjp_fn


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """Jacobian of each output with respect to each ``argnums`` input:
    shape ``out.shape + in.shape``; nesting follows the outputs, then the
    argnums tuple."""
    return _jacobian(func, argnums, has_aux, forward=False)


@contextlib.contextmanager
def _vmapped():
    """Inside ``vmap`` (a custom Function there needs a vmap rule)."""
    _C.VMAP_DEPTH[0] += 1
    try:
        yield
    finally:
        _C.VMAP_DEPTH[0] -= 1


def _jacobian(func, argnums, has_aux, forward: bool):
    """``jacrev``; with ``forward``, ``jacfwd``'s: ``func`` runs as under
    PyTorch's vmap of a jvp, and the Jacobian's rows come from tangent passes
    (a custom Function contributes its jvp)."""
    name = "jacfwd" if forward else "jacrev"

    def wrapper(*args, **kwargs):
        nums = _argnums(argnums, len(args), name)
        outer = graph.is_grad_enabled()
        keep = _keep_graph(args, nums)
        with graph.enable_grad():
            targs = _track(args, nums)
            tracked = [x for a in nums for x in _leaves(targs[a])]
            with _transformed(), contextlib.ExitStack() as scope:
                if forward:
                    scope.enter_context(_vmapped())
                    scope.enter_context(forward_ad.func_tangents(tracked))
                out = func(*targs, **kwargs)
            aux = None
            if has_aux:
                out, aux = out
            ins = [targs[a] for a in nums]
            keep = keep or (outer and _reaches_outside(
                _leaves(out), [x for a in ins for x in _leaves(a)]))

            # the inputs' leaves: an argument may be a pytree (NTK's
            # functional_call parameter dict), its Jacobian the same pytree
            flat = [x for a in ins for x in _leaves(a)]

            def jac_of(o):
                rows = [[] for _ in flat]
                for k in range(o.numel()):
                    with forward_ad.tangent_pass() if forward else contextlib.nullcontext():
                        gs = (autograd.grad(o, flat, _unit(o, k), retain_graph=True,
                                            create_graph=True, allow_unused=True)
                              if o.requires_grad else [None] * len(flat))
                    for r, x, g in zip(rows, flat, gs):
                        g = _zeros(x) if g is None else g
                        r.append(g if keep else g.detach())
                it = iter([stack(r).reshape(*o.shape, *x.shape) if r
                           else _zeros(x).reshape(*o.shape, *x.shape).detach()
                           for r, x in zip(rows, flat)])
                per = tuple(_map(lambda _: next(it), a) for a in ins)
                return per if isinstance(argnums, tuple) else per[0]
            result = _map(jac_of, out)
        if has_aux:
            return result, (aux if keep else _map(Tensor.detach, aux))
        return result
    return wrapper


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(output, J @ tangents[, aux])`` by reverse mode twice: ``J^T u`` for a
    dummy cotangent ``u``, then the gradient of ``<J^T u, v>`` in ``u``."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have "
                           f"the same python structure, got {len(primals)} and "
                           f"{len(tangents)} elements")
    nums = tuple(range(len(primals)))
    outer = graph.is_grad_enabled()
    keep = _keep_graph(primals, nums)
    with graph.enable_grad():
        targs = _track(primals, nums)
        leaves = [x for a in targs for x in _leaves(a)]
        with _transformed(), forward_ad.func_tangents(leaves):
            out = func(*targs)
        aux = None
        if has_aux:
            out, aux = out
        tans = [t for a in tangents for t in _leaves(a)]
        outs = _leaves(out)
        keep = keep or (outer and _reaches_outside(outs, leaves))
        us = [_zeros(o).requires_grad_() for o in outs]
        pairs = [(o, u) for o, u in zip(outs, us) if o.requires_grad]
        with forward_ad.tangent_pass():
            gs = (autograd.grad([o for o, _ in pairs], leaves, [u for _, u in pairs],
                                create_graph=True, allow_unused=True)
                  if pairs else [None] * len(leaves))
            terms = [(g * t).sum() for g, t in zip(gs, tans) if g is not None]
            total = sum(terms[1:], terms[0]) if terms else None
            jv = (autograd.grad(total, us, create_graph=keep, allow_unused=True)
                  if total is not None and total.requires_grad else [None] * len(us))
    it = iter([_zeros(o) if j is None else (j if keep else j.detach())
               for o, j in zip(outs, jv)])
    tangent_out = _map(lambda _: next(it), out)
    value = out if keep else _map(Tensor.detach, out)
    if has_aux:
        return value, tangent_out, (aux if keep else _map(Tensor.detach, aux))
    return value, tangent_out


def linearize(func, *primals):
    """``(func(*primals), jvp_fn)``: ``jvp_fn(*tangents)`` is the
    Jacobian-vector product at ``primals`` (PyTorch's ``torch.func.linearize``;
    each call differentiates ``func`` at the saved primals again)."""
    saved = tuple(_map(Tensor.detach, p) if isinstance(p, Tensor) else p for p in primals)
    output = _map(Tensor.detach, func(*saved))

    def jvp_fn(*tangents):
        if len(tangents) != len(saved):
            raise RuntimeError(f"linearize: Expected {len(saved)} tangents, got "
                               f"{len(tangents)}")
        for p, t in zip(_leaves(saved), _leaves(tangents)):
            if tuple(p.shape) != tuple(t.shape) or p.dtype != t.dtype:
                raise RuntimeError("jvp_fn: Expected tangents to have the same shape and "
                                   f"dtype as primals, got {t.dtype}{list(t.shape)} for "
                                   f"{p.dtype}{list(p.shape)}")
        return jvp(func, saved, tangents)[1]
    return output, jvp_fn


def stack_module_state(models):
    """``(params, buffers)``: each name's tensors from ``models`` stacked on a
    new leading dim (leaves; those of parameters require grad), for
    ``vmap(functional_call(...))`` ensembles."""
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same "
                           "training/eval mode.")
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(tensors, name):
        grads = {t.requires_grad for t in tensors}
        if len(grads) > 1:
            raise RuntimeError(f"Expected {name} from each model to have the same "
                               ".requires_grad")
        out = stack([t.detach() for t in tensors])
        return out.requires_grad_() if grads == {True} else out

    all_params = [dict(m.named_parameters()) for m in models]
    all_buffers = [dict(m.named_buffers()) for m in models]
    return ({k: stacked([p[k] for p in all_params], k) for k in all_params[0]},
            {k: stacked([b[k] for b in all_buffers], k) for k in all_buffers[0]})


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """``jacrev``'s values; ``func`` runs under ``randomness`` as under
    PyTorch's vmap of its jvp (``"error"``: a draw raises)."""
    _check_randomness(randomness)

    def run(*args, **kwargs):
        with _randomness(randomness):
            return func(*args, **kwargs)
    return _jacobian(run, argnums, has_aux, forward=True)


def _check_randomness(randomness) -> None:
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")


def hessian(func, argnums=0):
    return jacfwd(jacrev(func, argnums), argnums)


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """``module(*args, **kwargs)`` with the given parameters and buffers in
    place of its own, for the call only (``tracec.nn.utils.stateless``)."""
    return call_with(module, parameter_and_buffer_dicts, args, kwargs,
                     tie_weights=tie_weights, strict=strict)


# --- vmap ------------------------------------------------------------------------

def _broadcast_dims(dims, tree, where):
    """``dims`` spread over ``tree``'s structure (an int/None applies to
    every leaf of the subtree)."""
    if dims is None or isinstance(dims, int):
        return _map(lambda _: dims, tree) if not isinstance(tree, Tensor) else dims
    if isinstance(tree, (tuple, list)) and isinstance(dims, (tuple, list)) \
            and len(dims) == len(tree):
        return type(tree)(_broadcast_dims(d, t, where) for d, t in zip(dims, tree))
    if isinstance(tree, dict) and isinstance(dims, dict):
        return {k: _broadcast_dims(dims[k], v, where) for k, v in tree.items()}
    raise ValueError(f"vmap({where}): in_dims is not compatible with the structure of "
                     f"inputs: {dims!r} for {type(tree).__name__}")


def _pairs(tree, dims):
    if isinstance(tree, Tensor):
        return [(tree, dims)]
    if isinstance(tree, (tuple, list)):
        return [p for t, d in zip(tree, dims) for p in _pairs(t, d)]
    if isinstance(tree, dict):
        return [p for k in tree for p in _pairs(tree[k], dims[k])]
    return []


def _select(tree, dims, i):
    if isinstance(tree, Tensor):
        return tree if dims is None else tree.select(dims, i)
    if isinstance(tree, (tuple, list)):
        return type(tree)(_select(t, d, i) for t, d in zip(tree, dims))
    if isinstance(tree, dict):
        return {k: _select(tree[k], dims[k], i) for k in tree}
    return tree


def _stack_out(outs, dims, where):
    first = outs[0]
    if isinstance(first, Tensor):
        if dims is None:
            return first
        return stack(outs, dim=dims if dims >= 0 else dims + first.dim() + 1)
    if isinstance(first, (tuple, list)):
        ds = dims if isinstance(dims, (tuple, list)) else [dims] * len(first)
        return type(first)(_stack_out([o[k] for o in outs], ds[k], where)
                           for k in range(len(first)))
    if isinstance(first, dict):
        return {k: _stack_out([o[k] for o in outs], dims[k] if isinstance(dims, dict) else dims,
                              where) for k in first}
    raise ValueError(f"vmap({where}, ...): `{where}` must only return Tensors, got type "
                     f"{type(first)}. Did you mean to set out_dims= to None for "
                     "output?")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    _check_randomness(randomness)
    where = getattr(func, "__name__", repr(func))

    def wrapper(*args, **kwargs):
        if isinstance(in_dims, tuple) and len(in_dims) != len(args):
            raise ValueError(f"vmap({where}, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
                             f"compatible with the structure of `inputs`. in_dims has "
                             f"{len(in_dims)} elements, but inputs has {len(args)}.")
        dims = _broadcast_dims(in_dims if isinstance(in_dims, tuple) else
                               (in_dims,) * len(args), tuple(args), where)
        sizes = set()
        order = []      # (each mapped input's size, in order: PyTorch's message lists them)
        norm = []
        for t, d in _pairs(tuple(args), dims):
            if d is not None:
                if not -t.dim() <= d < max(t.dim(), 1) or t.dim() == 0:
                    raise ValueError(f"vmap({where}, in_dims={in_dims}, ...)(<inputs>): Got "
                                     f"in_dim={d} for an input but the input is of type "
                                     f"Tensor with {t.dim()} dims")
                sizes.add(t.shape[d])
                order.append(t.shape[d])
            norm.append(d)
        if not sizes:
            raise ValueError(f"vmap({where}, in_dims={in_dims}, ...)(<inputs>): at least one "
                             "input must be a Tensor mapped over (in_dim not None)")
        if len(sizes) > 1:
            raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                             f"dimension, got sizes {order} for the mapped dimension")
        n = sizes.pop()
        with _transformed(), _vmapped(), _randomness(randomness) as before_each:
            outs = []
            for i in range(n):
                before_each()
                outs.append(func(*_select(tuple(args), dims, i), **kwargs))
        return _stack_out(outs, out_dims, where)
    return wrapper


def functionalize(func, *, remove="mutations"):
    """``torch.func.functionalize``: ``func`` with its mutations (and, with
    ``remove="mutations_and_views"``, its views) rewritten out of place; the
    values it computes, and the writes it makes to its inputs, are the same,
    which is what eager execution observes, so the wrapper calls ``func``."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(
            f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}."
            " Valid options are:\n"
            "     remove='mutations': all inplace and out= operators will be removed from the "
            "program, and replaced with their out-of-place equivalents.\n"
            "     remove='mutations_and_views': In addition to the above, all aliasing operators "
            "{view} will be replaced with their non-aliasing counterparts, {view}_copy.\n")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        with _transformed():
            return func(*args, **kwargs)
    return wrapped
