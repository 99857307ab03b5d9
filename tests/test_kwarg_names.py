"""PyTorch's keyword argument names on tracec's functions and methods.

``torch.overrides.get_testing_overrides()`` maps each torch function and
method to a lambda with its parameter names.  For every entry whose tracec
counterpart exists (``tracec.X``, ``tracec.nn.functional.X``,
``tracec.Tensor.X``), tracec must accept each name by keyword, at the same
position where PyTorch takes it positionally.  The lambdas are hand-written
and sometimes wrong, so each name is checked against torch itself first (the
Python signature where torch has one, else the ATen schemas, with ``self``
named ``input`` in functions and bound in methods); a name torch does not
take is replaced by the one torch takes at that position, or dropped.
The behavioral tests call tracec and torch with those keywords and compare.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np
import pytest

import tracec
import tracec.nn.functional as CF

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402
from torch.overrides import get_testing_overrides  # noqa: E402

from tests._torch_ref import rnd, run_both  # noqa: E402

_VAR = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)

# Entries whose names truly cannot match, and why.  The test fails when one
# of these starts matching (so the list cannot go stale).
ALLOWED = {
    # ``out_dtype`` is the ``mm.dtype`` overload, which PyTorch runs on CUDA
    # only (its CPU build raises "Could not run 'aten::mm.dtype' ... CPU").
    "torch.mm": ("out_dtype",), "torch.bmm": ("out_dtype",), "torch.spmm": ("out_dtype",),
    "torch.dsmm": ("out_dtype",),
    "Tensor.mm": ("out_dtype",), "Tensor.bmm": ("out_dtype",),
    # torch.norm takes out= as its 5th positional parameter, Tensor.norm
    # takes dtype there; tracec shares one function, so out= is keyword-only.
    "torch.norm": ("dtype",),
    # tracec.trace(fn, *example_args) is tracec's tracing API; given only a
    # Tensor it is torch.trace, positionally.
    "torch.trace": ("input",),
    # Tensor.to is PyTorch's overloaded to(dtype) / to(device, dtype) /
    # to(other): its keywords go through **kwargs (dtype=, device=,
    # non_blocking=, copy=, memory_format=), tested below.
    "Tensor.to": ("dtype", "non_blocking", "copy", "memory_format"),
    # ``from`` is a Python keyword: no Python parameter can have that name
    # (uniform_(**{"from": a}) works through **kwargs, tested below).
    "Tensor.uniform_": ("from",),
    # torch.lstm's lambda describes its packed overload (data, batch_sizes,
    # hx, ...); tracec's names are the unpacked overload's (input, hx,
    # params, ...), and it tells the two apart by the second argument's type
    # as torch does; both are tested in tests/test_rnn_functional.py.
    "torch.lstm": ("data", "batch_sizes", "hx", "params", "has_biases", "num_layers",
                   "dropout", "train", "bidirectional"),
}

# (entry, name): the lambda and ATen's out overload list ``out``, but torch's
# Python binding rejects it; test_oracle_errors_are_torch_errors checks that.
ORACLE_WRONG = {
    ("torch.diag_embed", "out"): lambda T: T.diag_embed(T.ones(2), out=T.empty(2, 2)),
    ("torch.full_like", "out"): lambda T: T.full_like(T.ones(2), 1.0, out=T.empty(2)),
}


@functools.lru_cache(None)
def _aten(name):
    base = name[:-1] if name.endswith("_") else name
    found = []
    for n in {name, base}:
        found += list(torch._C._jit_get_schemas_for_operator("aten::" + n))
    return found


def _real_params(ns, name, obj):
    """torch's overloads for the entry, each a list of (name, keyword-only)."""
    try:
        ps = list(inspect.signature(obj).parameters.values())
        if not any(p.kind in _VAR for p in ps):
            return [[(p.name, p.kind == p.KEYWORD_ONLY) for p in ps[ns == "Tensor":]]]
    except (TypeError, ValueError):
        pass
    if ns == "F":   # boolean_dispatch wrappers take *args: their _with_indices form
        alt = getattr(TF, name + "_with_indices", None)
        return _real_params(ns, name + "_with_indices", alt) if alt is not None else None
    schemas = _aten(name)
    if not schemas:
        return None
    res = []
    for sc in schemas:
        if ns == "Tensor" and any(a.name == "out" for a in sc.arguments):
            continue   # methods take no out=
        rets = {r.name for r in sc.returns}
        args = [(a.name, a.kwarg_only) for a in sc.arguments
                if not (a.kwarg_only and a.name != "out" and a.name in rets)]
        if ns == "Tensor":
            args = [a for a in args if a[0] != "self"]
        else:
            args = [("input" if n == "self" else n, k) for n, k in args]
        res.append(args)
    return res


def _expected(ns, name, obj, lam):
    """[(name, position or None)]: PyTorch's names for the entry."""
    ps = [p for p in inspect.signature(lam).parameters.values() if p.kind not in _VAR]
    if ns == "Tensor":
        ps = [p for p in ps[1:] if p.name != "out"]
    real = _real_params(ns, name, obj)
    exp = []
    for i, p in enumerate(ps):
        pos = i if p.kind == p.POSITIONAL_OR_KEYWORD else None
        if (f"{ns}.{name}", p.name) in ORACLE_WRONG:
            continue
        if real is None:
            exp.append((p.name, pos))
            continue
        if any(n == p.name for ov in real for n, _ in ov):
            positional = pos is not None and any(
                i < len(ov) and ov[i][0] == p.name and not ov[i][1] for ov in real)
            exp.append((p.name, i if positional else None))
            continue
        at_i = {ov[i][0] for ov in real if i < len(ov) and not ov[i][1]}
        if pos is not None and len(at_i) == 1:
            exp.append((at_i.pop(), i))
    return exp


def _entries():
    overrides = get_testing_overrides()
    out = []
    for ns, tmod, cmod in (("torch", torch, tracec), ("F", TF, CF),
                           ("Tensor", torch.Tensor, tracec.Tensor)):
        for name in dir(tmod):
            if name.startswith("_"):
                continue   # private names and operator dunders (called positionally)
            try:
                obj = getattr(tmod, name)
                if obj not in overrides or isinstance(obj, type):
                    continue
            except (AttributeError, TypeError, RuntimeError):
                continue
            mine = getattr(cmod, name, None)
            if mine is None or not callable(mine) or isinstance(mine, type):
                continue
            out.append((ns, name, obj, overrides[obj], mine))
    return out


def _problems(ns, name, obj, lam, mine):
    try:
        ps = list(inspect.signature(mine).parameters.values())
    except (TypeError, ValueError):
        return ["no signature"]
    if ns == "Tensor" and ps and ps[0].kind in (ps[0].POSITIONAL_ONLY,
                                                ps[0].POSITIONAL_OR_KEYWORD):
        ps = ps[1:]
    f, has_out = mine, False
    while f is not None:   # out= comes from tracec.out_arg.with_out
        has_out = has_out or hasattr(f, "__wrapped_without_out__")
        f = getattr(f, "__wrapped__", None)
    by_kw = [p.name for p in ps if p.kind not in _VAR and p.kind != p.POSITIONAL_ONLY]
    names = [p.name for p in ps]
    probs = []
    for n, i in _expected(ns, name, obj, lam):
        if n == "out" and has_out:
            continue
        if n not in by_kw:
            probs.append(f"no keyword {n!r}")
        elif i is not None:
            j = names.index(n)
            if j != i and not any(p.kind == p.VAR_POSITIONAL for p in ps[:j]):
                probs.append(f"{n!r} at position {j}, PyTorch's {i}")
    return probs


def test_parameter_names_match_pytorch():
    entries = _entries()
    assert len(entries) > 900
    bad, allowed_hit = [], set()
    for ns, name, obj, lam, mine in entries:
        probs = _problems(ns, name, obj, lam, mine)
        key = f"{ns}.{name}"
        if key in ALLOWED and probs and all(any(repr(n) in p for n in ALLOWED[key])
                                            for p in probs):
            allowed_hit.add(key)
            continue
        if probs:
            bad.append(f"{key}{inspect.signature(lam)}: {'; '.join(probs)}")
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad)
    assert allowed_hit == set(ALLOWED), f"allow-listed but matching: {set(ALLOWED) - allowed_hit}"


@pytest.mark.parametrize("key", sorted(ORACLE_WRONG))
def test_oracle_errors_are_torch_errors(key):
    with pytest.raises(TypeError, match="out"):
        ORACLE_WRONG[key](torch)


# --- behavior: PyTorch's keywords, compared with torch ----------------------------

def _f(lib):
    return lib.nn.functional


A = (3, 4)
CASES = {
    # top-level functions
    "add": (lambda T, x, y: T.add(input=x, other=y, alpha=2), [A, A]),
    "sub": (lambda T, x, y: T.sub(input=x, other=y), [A, A]),
    "mul": (lambda T, x, y: T.mul(input=x, other=y), [A, A]),
    "div": (lambda T, x, y: T.div(input=x, other=y), [A, A]),
    "pow": (lambda T, x: T.pow(x, exponent=2), [A]),
    "matmul": (lambda T, x, y: T.matmul(input=x, other=y), [(3, 4), (4, 2)]),
    "mm": (lambda T, x, y: T.mm(input=x, mat2=y), [(3, 4), (4, 2)]),
    "bmm": (lambda T, x, y: T.bmm(input=x, mat2=y), [(2, 3, 4), (2, 4, 2)]),
    "dot": (lambda T, x, y: T.dot(input=x, tensor=y), [(4,), (4,)]),
    "outer": (lambda T, x, y: T.outer(input=x, vec2=y), [(3,), (4,)]),
    "mv": (lambda T, x, y: T.mv(input=x, vec=y), [(3, 4), (4,)]),
    "cat": (lambda T, x, y: T.cat(tensors=[x, y], dim=0), [A, A]),
    "stack": (lambda T, x, y: T.stack(tensors=[x, y], dim=1), [A, A]),
    "where": (lambda T, x, y: T.where(condition=x > 0, input=x, other=y), [A, A]),
    "clamp": (lambda T, x: T.clamp(x, min=0), [A]),
    "clamp_kw": (lambda T, x: T.clamp(input=x, min=-0.5, max=0.5), [A]),
    "sum": (lambda T, x: T.sum(input=x, dim=1, keepdim=True), [A]),
    "mean": (lambda T, x: T.mean(input=x, dim=0), [A]),
    "amax": (lambda T, x: T.amax(input=x, dim=1), [A]),
    "softmax": (lambda T, x: T.softmax(input=x, dim=1), [A]),
    "logsumexp": (lambda T, x: T.logsumexp(input=x, dim=1, keepdim=True), [A]),
    "maximum": (lambda T, x, y: T.maximum(input=x, other=y), [A, A]),
    "exp": (lambda T, x: T.exp(input=x), [A]),
    "tanh": (lambda T, x: T.tanh(input=x), [A]),
    "abs": (lambda T, x: T.abs(input=x), [A]),
    "reshape": (lambda T, x: T.reshape(input=x, shape=(4, 3)), [A]),
    "permute": (lambda T, x: T.permute(x, dims=(1, 0)), [A]),
    "transpose": (lambda T, x: T.transpose(input=x, dim0=0, dim1=1), [A]),
    "swapaxes": (lambda T, x: T.swapaxes(x, axis0=0, axis1=1), [A]),
    "flatten": (lambda T, x: T.flatten(input=x, start_dim=0), [(2, 3, 4)]),
    "unsqueeze": (lambda T, x: T.unsqueeze(input=x, dim=0), [A]),
    "tril": (lambda T, x: T.tril(input=x, diagonal=1), [A]),
    "flip": (lambda T, x: T.flip(input=x, dims=(0,)), [A]),
    "roll": (lambda T, x: T.roll(input=x, shifts=1, dims=1), [A]),
    "cumsum": (lambda T, x: T.cumsum(input=x, dim=1), [A]),
    "zeros_like": (lambda T, x: T.zeros_like(input=x, layout=T.strided), [A]),
    "full_like": (lambda T, x: T.full_like(input=x, fill_value=2.0), [A]),
    "addmm": (lambda T, x, y, z: T.addmm(input=x, mat1=y, mat2=z, beta=0.5, alpha=2),
              [(3, 2), (3, 4), (4, 2)]),
    "det": (lambda T, x: T.det(input=x), [(3, 3)]),
    "allclose": (lambda T, x: T.tensor(T.allclose(input=x, other=x)), [A]),
    # nn.functional
    "F.linear": (lambda T, x, w, b: _f(T).linear(input=x, weight=w, bias=b),
                 [(2, 4), (3, 4), (3,)]),
    "F.relu": (lambda T, x: _f(T).relu(input=x), [A]),
    "F.gelu": (lambda T, x: _f(T).gelu(input=x, approximate="tanh"), [A]),
    "F.softmax": (lambda T, x: _f(T).softmax(input=x, dim=-1), [A]),
    "F.layer_norm": (lambda T, x: _f(T).layer_norm(input=x, normalized_shape=(4,)), [A]),
    "F.mse_loss": (lambda T, x, y: _f(T).mse_loss(input=x, target=y, reduction="sum"),
                   [A, A]),
    "F.normalize": (lambda T, x: _f(T).normalize(input=x, p=2.0, dim=1), [A]),
    "F.pad": (lambda T, x: _f(T).pad(input=x, pad=(1, 1), value=0.5), [A]),
    "F.conv1d": (lambda T, x, w: _f(T).conv1d(input=x, weight=w, padding=1),
                 [(1, 2, 5), (3, 2, 3)]),
    "F.dropout": (lambda T, x: _f(T).dropout(input=x, p=0.5, training=False), [A]),
    # Tensor methods
    "Tensor.add": (lambda T, x, y: x.add(other=y, alpha=2), [A, A]),
    "Tensor.mul": (lambda T, x, y: x.mul(other=y), [A, A]),
    "Tensor.pow": (lambda T, x: x.pow(exponent=3), [A]),
    "Tensor.matmul": (lambda T, x, y: x.matmul(other=y), [(3, 4), (4, 2)]),
    "Tensor.mm": (lambda T, x, y: x.mm(mat2=y), [(3, 4), (4, 2)]),
    "Tensor.sum": (lambda T, x: x.sum(dim=0, keepdim=True), [A]),
    "Tensor.clamp": (lambda T, x: x.clamp(min=-1.0), [A]),
    "Tensor.reshape": (lambda T, x: x.reshape(shape=(2, 6)), [A]),
    "Tensor.view": (lambda T, x: x.view(size=(12,)), [A]),
    "Tensor.permute": (lambda T, x: x.permute(dims=(1, 0)), [A]),
    "Tensor.expand": (lambda T, x: x.expand(size=(2, 3, 4)), [A]),
    "Tensor.transpose": (lambda T, x: x.transpose(dim0=0, dim1=1), [A]),
    "Tensor.swapaxes": (lambda T, x: x.swapaxes(axis0=0, axis1=1), [A]),
    "Tensor.split": (lambda T, x: x.split(split_size=2, dim=1), [A]),
    "Tensor.masked_fill": (lambda T, x: x.masked_fill(mask=x > 0, value=0.0), [A]),
    "Tensor.softmax": (lambda T, x: x.softmax(dim=-1), [A]),
    "Tensor.to": (lambda T, x: x.to(dtype=T.float64, copy=True, non_blocking=False), [A]),
    "Tensor.add_": (lambda T, x, y: (x * 1).add_(other=y, alpha=3), [A, A]),
    "Tensor.clamp_": (lambda T, x: (x * 1).clamp_(min=0.0, max=1.0), [A]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pytorch_keywords_behave_as_torch(name):
    fn, shapes = CASES[name]
    rng = np.random.default_rng(0)
    run_both(fn, *[rnd(rng, s) for s in shapes], grad=False)


def test_gather_index_select_and_forwarders_take_pytorch_keywords():
    x = np.arange(12.0).reshape(3, 4)
    idx = np.array([[0, 1], [2, 3], [1, 0]])
    for T in (tracec, torch):
        a, i = T.tensor(x), T.tensor(idx)
        np.testing.assert_array_equal(T.gather(input=a, dim=1, index=i, sparse_grad=False)
                                      .numpy(), np.take_along_axis(x, idx, 1))
        np.testing.assert_array_equal(T.index_select(input=a, dim=0, index=T.tensor([2, 0]))
                                      .numpy(), x[[2, 0]])
        np.testing.assert_array_equal(T.permute_copy(a, dims=(1, 0)).numpy(), x.T)
        np.testing.assert_array_equal(T.abs_(a.clone() - 5).numpy(), np.abs(x - 5))
        b = a.clone()
        b.transpose_(dim0=0, dim1=1)
        np.testing.assert_array_equal(b.numpy(), x.T)
        g = T.Generator().manual_seed(0)
        u = T.empty(1000).uniform_(**{"from": 2.0}, to=3.0, generator=g).numpy()
        assert 2.0 <= u.min() and u.max() <= 3.0 and u.std() > 0.2
    with pytest.raises(NotImplementedError, match="sparse_grad"):
        tracec.gather(tracec.tensor(x), 1, tracec.tensor(idx), sparse_grad=True)
    with pytest.raises(TypeError, match="multiple values"):
        tracec.ones(2, 3).reshape(6, shape=(6,))


def test_out_keyword_on_added_functions():
    x = np.array([[0.2, 0.9], [0.4, 0.1]], dtype=np.float32)
    for T in (tracec, torch):
        o = T.empty(2, 2)
        assert T.clamp_min(T.tensor(x), 0.3, out=o) is o
        np.testing.assert_allclose(o.numpy(), np.maximum(x, 0.3))
        o = T.empty(2, 2)
        T.msort(T.tensor(x), out=o)
        np.testing.assert_allclose(o.numpy(), np.sort(x, 0))
        o = T.empty(2)
        T.diag(T.tensor(x), out=o)
        np.testing.assert_allclose(o.numpy(), np.diag(x))


def test_like_functions_take_pytorchs_keywords_and_memory_formats():
    """``*_like``: PyTorch's full keyword set; ``memory_format`` lays the
    new tensor out as PyTorch does (``preserve_format`` keeps a
    channels-last input's layout), with its rank error."""
    import torch
    for lib in (torch, tracec):
        x = lib.ones(2, 3, 4, 5)
        cl = x.contiguous(memory_format=lib.channels_last)
        got = [lib.zeros_like(x, memory_format=lib.channels_last).stride(),
               lib.empty_like(cl).stride(),
               lib.ones_like(cl, memory_format=lib.contiguous_format).stride(),
               lib.full_like(cl, 3.0).stride(),
               lib.randn_like(x, requires_grad=True).is_leaf,
               lib.rand_like(input=x, dtype=lib.float64, layout=lib.strided).dtype.is_floating_point,
               str(lib.randint_like(x, 3, 5, requires_grad=False).dtype)]
        with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last"):
            lib.zeros_like(lib.ones(2, 3), memory_format=lib.channels_last)
        if lib is torch:
            want = got
        else:
            assert got[:6] == want[:6] and got[6].split(".")[-1] == want[6].split(".")[-1]
