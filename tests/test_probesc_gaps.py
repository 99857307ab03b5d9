"""Gaps found by probing autograd graphs, strides and layouts, torch.func
and neighbouring APIs, each checked against torch 2.13 in the same process."""
import pytest
import torch

import tracec


def _layouts(lib):
    cl = lib.channels_last
    out = [lib.empty(0, 3).stride(), lib.zeros(2, 0, 3).stride(), lib.empty(3, 0).stride(),
           lib.randn(8, 1, 3, 3).to(memory_format=cl).stride(),
           lib.randn(8, 3, 1, 1).to(memory_format=cl).stride(),
           lib.randn(8, 1, 3, 3).contiguous(memory_format=cl).stride(),
           lib.empty(2, 1, 4, 4, memory_format=cl).stride(),
           lib.empty_like(lib.empty(2, 3, 1, 1, memory_format=cl)).stride(),
           lib.zeros_like(lib.empty(2, 1, 4, 4, memory_format=cl)).stride(),
           lib.empty(2, 1, 4, 4, memory_format=cl).clone().stride(),
           lib.randn(2, 1, 4, 4).clone(memory_format=cl).stride(),
           lib.nn.Conv2d(1, 8, 3).to(memory_format=cl).weight.stride(),
           lib.randn(2, 1, 2, 1, 2).to(memory_format=lib.channels_last_3d).stride()]
    t = lib.randn(3, 4).t()
    u = t.to(memory_format=lib.contiguous_format)
    out += [u is t, u.stride()]
    return out


def test_empty_and_size_one_strides_follow_torch():
    """An empty tensor's strides are its dense layout's ((0, 0) before:
    NumPy 2 zeroes them); a channels-last tensor made by ``empty``, ``to``,
    ``clone``, ``*_like`` or ``Module.to`` has PyTorch's strides at its
    size-one dimensions (row-major ones before); ``to(memory_format=)``
    aliases a tensor whose suggested format is the one asked for, as
    PyTorch's (a transposed matrix stays transposed)."""
    assert _layouts(tracec) == _layouts(torch)


def _meta_step(lib, name, **kw):
    """Two differentiable steps of ``name`` on a clone of ``w``, then the
    gradient of a loss of the stepped parameter with respect to ``w``."""
    lib.manual_seed(0)
    w = lib.randn(3, requires_grad=True)
    x = lib.randn(3)
    p = w.clone()
    opt = getattr(lib.optim, name)([p], lr=0.1, differentiable=True, **kw)
    for _ in range(2):
        p.grad, = lib.autograd.grad(((p - x) ** 2).sum(), p, create_graph=True)
        opt.step()
    gw, = lib.autograd.grad((p ** 3).sum(), w)
    return p.detach().tolist(), gw.tolist()


@pytest.mark.parametrize("name,kw", [("SGD", dict(momentum=0.9, nesterov=True)),
                                     ("Adam", {}), ("AdamW", {}), ("RAdam", {})])
def test_differentiable_optimizer_steps_pass_gradients(name, kw):
    """``differentiable=True`` runs the update with grad enabled, as
    PyTorch's ``_use_grad_for_differentiable`` (NotImplementedError
    before); Adam takes PyTorch's differentiable formula (tensor bias
    corrections folded into the denominator); RAdam's gradient through
    its early, unrectified steps is finite (NaN: the rectification term
    of a negative, masked by ``where``, poisoned the gradient)."""
    got, want = _meta_step(tracec, name, **kw), _meta_step(torch, name, **kw)
    assert got[0] == pytest.approx(want[0], rel=1e-6, abs=1e-6)
    assert got[1] == pytest.approx(want[1], rel=1e-5, abs=1e-5)


def _storage_facts(lib, path):
    d = lib.load(path)
    b = d["base"]
    facts = [(k, v.storage_offset(), v.untyped_storage().nbytes(),
              v.untyped_storage().data_ptr() == b.untyped_storage().data_ptr(),
              k == "other" or v.data_ptr() - b.data_ptr()) for k, v in sorted(d.items())]
    x = lib.arange(10.)
    z = lib.empty(0).set_(x.untyped_storage(), 2, (2, 2), (2, 1))
    facts.append((z.storage_offset(), z.tolist(), x.untyped_storage().element_size()))
    return facts


def test_loaded_views_report_their_storage(tmp_path):
    """Tensors loaded from one storage of a torch checkpoint report it:
    ``storage_offset`` from its start, one ``untyped_storage`` (each
    reported offset 0 and its own bytes before); ``set_(storage, offset,
    ...)`` counts the offset from the storage's start."""
    base = torch.arange(24.).reshape(4, 6)
    torch.save({"base": base, "sub": base[1:3, 2:5], "row": base[2], "flat": base.view(-1)[5:],
                "other": torch.ones(3)}, tmp_path / "v.pt")
    assert _storage_facts(tracec, tmp_path / "v.pt") == _storage_facts(torch, tmp_path / "v.pt")


def _vmap_randomness(lib):
    out = []
    try:
        lib.vmap(lambda a: a + lib.rand(3))(lib.ones(2, 3))
    except RuntimeError as e:
        out.append(str(e))
    try:
        lib.func.jacfwd(lambda a: a * lib.rand(3))(lib.ones(3))
    except RuntimeError as e:
        out.append(str(e))
    lib.manual_seed(0)
    same = lib.vmap(lambda a: lib.randn(20)[:3] + a, randomness="same")(lib.zeros(2, 3))
    out.append([round(v, 5) for v in same.flatten().tolist()] + [round(lib.rand(1).item(), 5)])
    lib.manual_seed(0)
    drop = lib.vmap(lambda a: lib.nn.functional.dropout(lib.ones(8), 0.5), randomness="same")(
        lib.zeros(2, 3))
    out.append(drop.tolist())
    for f in (lambda a: a * 2, lambda a: 3.0):
        try:
            lib.func.grad(f)(lib.ones(3))
        except RuntimeError as e:
            out.append(str(e))
    return out


def test_vmap_randomness_follows_torch():
    """vmap's default ``randomness="error"`` raises at a draw (every
    example drew before), also in ``jacfwd``; ``"same"`` gives each
    example the same draws (each drew its own before: different dropout
    masks); ``grad``'s messages are PyTorch's."""
    assert _vmap_randomness(tracec) == _vmap_randomness(torch)


def _second_derivatives(lib):
    lib.manual_seed(0)
    m0 = lib.randn(3, 3, dtype=lib.float64)
    eye = lib.eye(3, dtype=lib.float64)
    ones = lib.ones(3, 1, dtype=lib.float64)
    spd = lambda m: m @ m.t() + eye                              # noqa: E731
    fns = [lib.det, lib.linalg.inv, lambda m: lib.logdet(spd(m)),
           lambda m: lib.linalg.slogdet(spd(m)).logabsdet,
           lambda m: lib.linalg.solve(m, ones),
           lambda m: lib.linalg.cholesky(spd(m)),
           lambda m: lib.cholesky_solve(ones, lib.linalg.cholesky(spd(m))),
           lambda m: lib.linalg.solve_triangular(m.triu() + 3 * eye, ones, upper=True),
           lambda m: lib.linalg.matrix_power(m, -2),
           lambda m: lib.linalg.svdvals(spd(m)) * lib.arange(3.),
           lambda m: lib.linalg.eigvalsh(spd(m)) * lib.arange(3.),
           lambda m: lib.linalg.eigh(spd(m)).eigenvectors[:, 1:] ** 3,
           lambda m: lib.linalg.pinv(spd(m)),
           lambda m: lib.linalg.lstsq(spd(m), ones).solution,
           lambda m: lib.linalg.lu_solve(*lib.linalg.lu_factor(spd(m)), ones),
           lambda m: lib.linalg.qr(spd(m)).R + lib.linalg.qr(spd(m)).Q ** 2]
    v = lib.arange(9.0, dtype=lib.float64).reshape(3, 3) / 9
    out = []
    for f in fns:
        m = m0.clone().requires_grad_()
        g, = lib.autograd.grad(f(m).sum(), m, create_graph=True)
        gg, = lib.autograd.grad((g * v).sum(), m)
        out.append((g.detach().flatten().tolist(), gg.flatten().tolist()))
    return out


def test_linalg_second_derivatives_follow_torch():
    """A ``create_graph`` backward through det, inv, slogdet / logdet,
    solve, cholesky, solve_triangular, svdvals, eigvalsh, eigh, pinv,
    lstsq, lu_factor and qr gives a gradient with a graph (it had none:
    an error, or, composed with other ops, WRONG second derivatives:
    logdet, cholesky, cholesky_solve, svdvals, eigh, pinv, lstsq,
    lu_solve, qr of m @ m.T)."""
    got, want = _second_derivatives(tracec), _second_derivatives(torch)
    for (g1, gg1), (g2, gg2) in zip(got, want):
        assert g1 == pytest.approx(g2, rel=1e-9, abs=1e-9)
        assert gg1 == pytest.approx(gg2, rel=1e-9, abs=1e-9)


def _sdpa_dtype_message(lib):
    try:
        lib.nn.functional.scaled_dot_product_attention(
            lib.ones(1, 2, 2), lib.ones(1, 2, 2, dtype=lib.float16), lib.ones(1, 2, 2))
    except RuntimeError as e:
        return str(e)


def test_sdpa_dtype_mismatch_message_names_cpp_types():
    """PyTorch's message names the C++ types (``float``, ``c10::Half``)."""
    assert _sdpa_dtype_message(tracec) == _sdpa_dtype_message(torch)


def _sparse_grads(lib):
    d = lib.tensor([[0., 2., 0.], [3., 0., 4.], [0., 0., 5.]])
    out = []
    for f in (lambda a: lib.sparse.mm(a, d).pow(2).sum(), lambda a: lib.sparse.sum(a * 3),
              lambda a: (a.to_dense() + 1).pow(2).sum(),
              lambda a: lib.sparse.addmm(lib.ones(3, 3), a, d).sum()):
        a = d.to_sparse().requires_grad_()
        f(a).backward()
        out.append(a.grad.to_dense().tolist())
    a = d.clone().requires_grad_()
    (a.to_sparse().to_dense() * lib.arange(9.).reshape(3, 3)).sum().backward()
    out.append(a.grad.tolist())
    return out


def test_sparse_input_gradients_are_masked_to_the_pattern():
    """The gradient ``to_dense``, ``sparse.sum``, ``sparse.mm`` and
    ``sparse.addmm`` give a COO input is zero off its specified entries,
    as PyTorch's (WRONG values there before: the dense stand-in's
    gradient everywhere)."""
    assert _sparse_grads(tracec) == _sparse_grads(torch)


def _complex_seed(lib):
    z = lib.ones(3, dtype=lib.complex64, requires_grad=True)
    out = []
    for f in (lambda: z.sum().backward(), lambda: lib.autograd.grad(z.sum(), z)):
        try:
            f()
            out.append(None)
        except RuntimeError as e:
            out.append(str(e).replace("tracec.", "torch."))    # (the dtype's module)
    return out


def test_backward_of_a_complex_scalar_needs_a_gradient():
    """PyTorch creates the implicit gradient only for a real scalar (a
    complex loss went through with a gradient of ones)."""
    assert _complex_seed(tracec) == _complex_seed(torch)


def _masked_more(lib):
    x = lib.tensor([[1., 2., 3.], [4., 5., 6.]])
    m = lib.tensor([[True, False, True], [False, False, True]])
    M = lib.masked
    rs = [M.cumsum(x, 1, mask=m), M.cumprod(x, 1, mask=m), M.logsumexp(x, 1, mask=m),
          M.logaddexp(x, x.flip(1), input_mask=m, other_mask=m.flip(0)),
          M.median(x, 0, mask=m), M.median(lib.tensor([[1, 2, 3], [4, 5, 6]]), 1, mask=m),
          M.normalize(x, 2.0, 1, mask=m)]
    return [(str(r.dtype).split(".")[-1], repr(r.tolist())) for r in rs]    # (repr: nan == nan)


def test_masked_cumulative_logsumexp_median_normalize_exist():
    """torch.masked's cumsum, cumprod, logsumexp, logaddexp, median and
    normalize (missing before: AttributeError)."""
    assert _masked_more(tracec) == _masked_more(torch)
