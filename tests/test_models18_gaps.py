"""Gaps found by the models18 public programs (time-series and long-sequence
models), each compared with torch."""
import re

import pytest
import torch

import tracec


def _err(fn):
    try:
        fn()
    except Exception as e:      # noqa: BLE001 - the type and message are what is compared
        return type(e).__name__, str(e)
    return None


def test_complex_python_scalar_with_zero_part_promotes_like_torch():
    # FEDformer/S4-style `torch.arange(n) + 0j`: a complex zero operand
    for v in (0j, -0j, complex(0.0, -0.0), complex(-0.0, 0.0), 1 + 2j):
        want = torch.arange(3) + v
        got = tracec.arange(3) + v
        assert str(got.dtype) == str(want.dtype).replace("torch.", "tracec.")
        assert torch.view_as_real(want).tolist() == tracec.view_as_real(got).tolist()
    # the operand cache keeps the parts' signs apart (1-0j == 1+0j in Python)
    for v in (complex(1.0, -0.0), complex(1.0, 0.0), complex(-0.0, 2.0), complex(0.0, 2.0)):
        want = torch.view_as_real(torch.tensor([0.0, -2.0]) * v)
        got = tracec.view_as_real(tracec.tensor([0.0, -2.0]) * v)
        assert [[str(a) for a in r] for r in got.tolist()] == [[str(a) for a in r] for r in want.tolist()]


def test_autograd_grad_inputs_like_torch():
    def run(lib, inputs, **kw):
        x = lib.ones(2, requires_grad=True)
        y = lib.ones(2, requires_grad=True)
        out = (x * 2 + y * 3).sum()
        return lib.autograd.grad(out, inputs(x, y), **kw)

    for lib in (torch, tracec):
        got = run(lib, lambda x, y: {"a": x, "b": y})
        assert list(got) == ["a", "b"] and got["a"].tolist() == [2.0, 2.0] and got["b"].tolist() == [3.0, 3.0]
    assert _err(lambda: run(tracec, lambda x, y: [])) == _err(lambda: run(torch, lambda x, y: [])) == \
        ("RuntimeError", "`inputs` argument to `grad()` cannot be empty.")
    kw = dict(allow_unused=False, materialize_grads=True)
    assert _err(lambda: run(tracec, lambda x, y: x, **kw)) == _err(lambda: run(torch, lambda x, y: x, **kw))
    assert _err(lambda: run(tracec, lambda x, y: x, **kw))[0] == "ValueError"
    from types import MappingProxyType
    assert _err(lambda: run(tracec, lambda x, y: MappingProxyType({"a": x}))) == \
        _err(lambda: run(torch, lambda x, y: MappingProxyType({"a": x})))


def test_backward_inputs_accumulate_only_into_inputs_like_torch():
    def run(lib):
        x = lib.ones(2, requires_grad=True)
        y = lib.ones(2, requires_grad=True)
        out = (x * 2 + y * 3).sum()
        seen = []
        lib.autograd.backward(out, inputs=[x], retain_graph=True)
        seen.append((x.grad.tolist(), y.grad))
        out.backward(inputs=y, retain_graph=True)
        seen.append((x.grad.tolist(), y.grad.tolist()))
        out.backward(inputs={"b": y})
        seen.append((x.grad.tolist(), y.grad.tolist()))
        errs = [_err(lambda: lib.autograd.backward(out, inputs=[])),
                _err(lambda: (x * y).sum().backward(inputs=[]))]
        return seen, errs

    assert run(tracec) == run(torch)
    assert run(tracec)[0][0] == ([2.0, 2.0], None)


def test_view_as_real_of_conj_message_like_torch():
    want = _err(lambda: torch.view_as_real(torch.fft.ihfft(torch.ones(4))))
    got = _err(lambda: tracec.view_as_real(tracec.fft.ihfft(tracec.ones(4))))
    assert got == want
    assert re.search("NOT alias the original", got[1])


def test_integer_pow_negative_tensor_exponent_truncates_like_torch():
    # torchscale's RetNet decay `2 ** (-5 - torch.arange(heads))` before .float()
    b = [1, -1, 2, 0, -2, 3, -1, 1, 0]
    e = [-1, -1, -2, -1, -3, 0, -2, -7, 0]
    for name in ("int64", "int32", "int16", "int8"):
        want = torch.pow(torch.tensor(b, dtype=getattr(torch, name)), torch.tensor(e, dtype=getattr(torch, name)))
        got = tracec.pow(tracec.tensor(b, dtype=getattr(tracec, name)), tracec.tensor(e, dtype=getattr(tracec, name)))
        assert got.tolist() == want.tolist() == [1, -1, 0, 0, 0, 1, 1, 1, 1]
    assert (2 ** (-5 - tracec.arange(4))).tolist() == (2 ** (-5 - torch.arange(4))).tolist()
    assert (tracec.tensor([3]) ** tracec.tensor(-1)).tolist() == (torch.tensor([3]) ** torch.tensor(-1)).tolist()
    # a negative Python-int exponent of an integer tensor is refused, as in torch
    for lib in (torch, tracec):
        for f in (lambda: lib.tensor([2]) ** -1, lambda: lib.tensor([True]) ** -1,
                  lambda: lib.tensor([2]).pow_(-2), lambda: lib.pow(lib.tensor([2]), -1)):
            assert _err(f) == ("RuntimeError", "Integers to negative integer powers are not allowed.")
    assert (tracec.tensor([2]) ** -1.0).tolist() == [0.5]
    c = tracec.compile(lambda a, b: a ** b + 2 ** (-b))
    got = c(tracec.tensor([1, -1, 2, 0, 3]), tracec.tensor([-1, -3, -2, -1, 2]))
    assert got.tolist() == (lambda a, b: a ** b + 2 ** (-b))(torch.tensor([1, -1, 2, 0, 3]),
                                                              torch.tensor([-1, -3, -2, -1, 2])).tolist()


def test_tensor_infers_dtype_from_numpy_scalars_arrays_and_tensors_like_torch():
    # Time-Series-Library style `torch.tensor([np.float64(...), ...])`: each
    # item's own dtype, promoted (tensor_new.cpp's infer_scalar_type)
    import numpy as np
    import warnings
    cases = [[np.float64(1.0), np.float32(2.0)], [np.float32(1.0), 2.0], [np.float32(1), np.int64(2)],
             [1, np.float64(2.0)], [np.int32(1), 2], [np.int32(1), np.int16(2)],
             [np.ones(2, np.float32), np.zeros(2)], [np.ones(2, np.int32), np.zeros(2, np.int32)],
             [[np.float64(1.0), 2.0], [3.0, 4.0]], [np.bool_(True), False], [np.float16(1.0)],
             [np.uint8(1), np.int8(2)], [np.complex64(1j), 2.0], [np.complex128(1j)], [True, 2],
             np.float64(3.0), np.int32(3), np.bool_(True), [], [[], []]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for c in cases:
            want, got = torch.tensor(c), tracec.tensor(c)
            assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], c
            assert got.tolist() == want.tolist()
            assert str(tracec.as_tensor(c).dtype).split(".")[-1] == str(torch.as_tensor(c).dtype).split(".")[-1]
        # tensors inside a list keep their dtype too
        want = torch.tensor([torch.tensor(1.0, dtype=torch.float64), 2.0])
        got = tracec.tensor([tracec.tensor(1.0, dtype=tracec.float64), 2.0])
        assert str(got.dtype) == "tracec.float64" and str(want.dtype) == "torch.float64"
        # the legacy constructor stays at the default dtype
        assert str(tracec.Tensor([np.float64(1.0)]).dtype) == "tracec.float32"


def _hippo_legs_s(lib, n=4):
    # state-spaces/s4's NPLR setup: S = A + P^T P of HiPPO-LegS, eigh of S * -1j
    import numpy as np
    q = np.arange(n, dtype=np.float64)
    col, row = np.meshgrid(q, q)
    m = -(np.where(row >= col, 2 * q + 1, 0) - np.diag(q))
    t = np.sqrt(np.diag(2 * q + 1))
    a = lib.from_numpy(t @ m @ np.linalg.inv(t)).float()
    p = lib.sqrt(.5 + lib.arange(n, dtype=lib.float)).unsqueeze(0)
    return a + p.T @ p


def test_complex_hermitian_eigh_inv_solve_like_torch():
    for name in ("eigh", "eigvalsh"):
        want = getattr(torch.linalg, name)(_hippo_legs_s(torch) * -1j)
        got = getattr(tracec.linalg, name)(_hippo_legs_s(tracec) * -1j)
        w_want, w_got = (want[0], got[0]) if name == "eigh" else (want, got)
        assert str(w_got.dtype) == "tracec.float32" and str(w_want.dtype) == "torch.float32"
        assert torch.allclose(torch.tensor(w_got.tolist()), w_want, atol=1e-5)
        if name == "eigh":
            assert str(got[1].dtype) == "tracec.complex64"
            assert torch.allclose(torch.tensor(got[1].abs().tolist()), want[1].abs(), atol=1e-5)
    with pytest.raises(NotImplementedError, match="linalg.eigh: the derivative for complex"):
        tracec.linalg.eigh(tracec.eye(2, dtype=tracec.complex64).requires_grad_())

    import numpy as np
    a = np.array([[2 + 1j, 0.5 - 1j], [0.25j, 1 - 0.5j]], np.complex64)
    b = np.array([[1 - 1j, 2j], [0.5, -1 + 0.25j]], np.complex64)

    def run(lib):
        ta = lib.from_numpy(a.copy()).requires_grad_()
        tb = lib.from_numpy(b.copy()).requires_grad_()
        x = lib.linalg.solve(ta, tb)
        y = lib.linalg.inv(ta)
        loss = (x * lib.tensor([[1 + 2j, -1j], [0.5, 2]])).real.sum() + (y.abs() ** 2).sum()
        loss.backward()
        return [lib.view_as_real(t).tolist() for t in (x.detach(), y.detach(), ta.grad, tb.grad)]

    for g, w in zip(run(tracec), run(torch)):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-5, atol=1e-5)
    # still refused: complex det (NotImplementedError), integer input (torch's message)
    with pytest.raises(NotImplementedError):
        tracec.linalg.det(tracec.eye(2, dtype=tracec.complex64))
    assert _err(lambda: tracec.linalg.inv(tracec.eye(2, dtype=tracec.int64))) == \
        _err(lambda: torch.linalg.inv(torch.eye(2, dtype=torch.int64)))


def test_mH_H_adjoint_conjugate_complex_like_torch():
    import numpy as np
    import warnings
    a = np.array([[[1 + 2j, 3 - 1j], [0.5j, 2]], [[-1j, 0.25], [1 + 1j, -2j]]], np.complex64)
    for name in ("mH", "adjoint"):
        want = getattr(torch.from_numpy(a), name)
        got = getattr(tracec.from_numpy(a), name)
        want, got = (want(), got()) if name == "adjoint" else (want, got)
        assert got.is_conj() and want.is_conj()
        assert tracec.view_as_real(got.resolve_conj()).tolist() == torch.view_as_real(want.resolve_conj()).tolist()
    assert tracec.view_as_real(tracec.from_numpy(a[0]).H.resolve_conj()).tolist() == \
        torch.view_as_real(torch.from_numpy(a[0]).H.resolve_conj()).tolist()
    assert tracec.adjoint(tracec.from_numpy(a)).is_conj()
    assert not tracec.ones(2, 2).mH.is_conj()

    def grads(lib):
        x = lib.from_numpy(a.copy()).requires_grad_()
        (lib.bmm(x, x.mH) * lib.from_numpy(a)).real.sum().backward()
        return lib.view_as_real(x.grad).tolist(), lib.view_as_real(lib.bmm(x, x.mH).detach()).tolist()
    for g, w in zip(grads(tracec), grads(torch)):
        np.testing.assert_allclose(np.array(g), np.array(w), rtol=1e-5, atol=1e-5)

    errs = [lambda lib: lib.ones(3).H, lambda lib: lib.ones(2, 2, 2).H, lambda lib: lib.ones(2).mH,
            lambda lib: lib.ones(2).adjoint()]
    for f in errs:
        assert _err(lambda: f(tracec)) == _err(lambda: f(torch))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        z = tracec.tensor(1j).mH
    assert z.resolve_conj().item() == -1j and "Tensor.mH is deprecated on 0-D tensors" in str(w[0].message)
    # linspace with a complex end point is complex, as in torch
    want, got = torch.linspace(0, 1 + 1j, 3), tracec.linspace(0, 1 + 1j, 3)
    assert str(got.dtype) == "tracec.complex64" and got.tolist() == want.tolist()


def test_complex_norms_and_eigvals_like_torch():
    import numpy as np
    r = np.random.default_rng(0)
    a = (r.normal(size=(2, 3, 3)) + 1j * r.normal(size=(2, 3, 3))).astype(np.complex64)
    A, tA = torch.from_numpy(a), tracec.from_numpy(a)
    pairs = [(lambda L, X: L.linalg.vector_norm(X, o, dim=-1)) for o in (2, 1, 0, float("inf"), -float("inf"), 3.5)]
    pairs += [(lambda L, X: L.linalg.matrix_norm(X, o)) for o in ("fro", 1, -1, float("inf"))]
    pairs += [lambda L, X: L.linalg.norm(X), lambda L, X: L.norm(X, dim=-1), lambda L, X: X.norm(p=1, dim=1),
              lambda L, X: L.linalg.vector_norm(X, dtype=L.complex128)]
    for f in pairs:
        want, got = f(torch, A), f(tracec, tA)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_allclose(np.array(got.tolist()), want.numpy(), rtol=1e-5, atol=1e-6)
    for dtype in ("complex64", "float32"):
        x = (A.real if dtype == "complex64" else A, tA.real if dtype == "complex64" else tA)
        assert _err(lambda: tracec.linalg.vector_norm(x[1], dtype=getattr(tracec, dtype))) == \
            _err(lambda: torch.linalg.vector_norm(x[0], dtype=getattr(torch, dtype)))

    def grad(lib, X):
        x = X.clone().requires_grad_()
        lib.linalg.vector_norm(x, dim=-1).sum().backward()
        return lib.view_as_real(x.grad).tolist()
    np.testing.assert_allclose(np.array(grad(tracec, tA)), np.array(grad(torch, A)), rtol=1e-5, atol=1e-6)
    want, got = torch.linalg.eigvals(A), tracec.linalg.eigvals(tA)
    assert str(got.dtype) == "tracec.complex64"
    np.testing.assert_allclose(np.sort_complex(np.array(got.tolist()).ravel()),
                               np.sort_complex(want.numpy().ravel()), rtol=1e-4, atol=1e-5)


def test_fft_functions_take_out_like_torch():
    x = [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]
    for lib in (torch, tracec):
        o = lib.empty(2, 4, dtype=lib.complex64)
        assert lib.fft.fft(lib.tensor(x), out=o) is o
    got = tracec.empty(0, dtype=tracec.complex64)
    tracec.fft.rfft(tracec.tensor(x), out=got)
    assert tracec.view_as_real(got).tolist() == torch.view_as_real(torch.fft.rfft(torch.tensor(x))).tolist()
    assert tracec.fft.irfft(tracec.fft.rfft(tracec.tensor(x)), out=tracec.empty(2, 4)).tolist() == x
    assert tracec.fft.fftfreq(4, out=tracec.empty(4)).tolist() == torch.fft.fftfreq(4).tolist()
    for f in (lambda L: L.fft.rfft(L.tensor(x), out=L.empty(2, 3)),
              lambda L: L.fft.irfft(L.fft.rfft(L.tensor(x)), out=L.empty(2, 4, dtype=L.complex64)),
              lambda L: L.fft.fftn(L.tensor(x), out=L.empty(2, 4, dtype=L.int64))):
        assert _err(lambda: f(tracec)) == _err(lambda: f(torch))
    # out= and a result that is complex: a real out is refused (out_arg's categories)
    assert _err(lambda: tracec.mul(tracec.ones(2, dtype=tracec.complex64), 2, out=tracec.empty(2))) == \
        _err(lambda: torch.mul(torch.ones(2, dtype=torch.complex64), 2, out=torch.empty(2)))
