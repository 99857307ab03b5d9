"""Complex tensors against PyTorch: dtypes and promotion, creation, views,
elementwise ops, matmul/einsum, reductions, printing, save/load, and
gradients under PyTorch's conjugate Wirtinger convention; complex values
inside tracec.compile fail naming the op and line; an FNO SpectralConv2d
trains three steps as under PyTorch."""
import io

import numpy as np
import pytest
import torch

import tracec
from tracec import dtypes as dt


def _np(t):
    return t.resolve_conj().detach().numpy()


def _c(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


# --- dtypes ---------------------------------------------------------------------------------

def test_promotion_table_with_complex_matches_torch():
    ds = dt.all_dtypes + dt.complex_dtypes
    for a in ds:
        for b in ds:
            if a.category == 3 or b.category == 3:
                try:
                    want = str(torch.promote_types(getattr(torch, a.name),
                                                   getattr(torch, b.name)))
                except RuntimeError:
                    with pytest.raises(RuntimeError, match="Promotion for uint16"):
                        tracec.promote_types(a, b)
                    continue
                assert repr(tracec.promote_types(a, b)).split(".")[1] == want.split(".")[1]


@pytest.mark.parametrize("fn", [
    lambda L: L.ones(2) * 1j, lambda L: L.ones(2, dtype=L.float64) * 1j,
    lambda L: L.ones(2, dtype=L.int64) * 1j, lambda L: L.ones(2) + L.tensor(1j, dtype=L.cdouble),
    lambda L: L.ones(2, dtype=L.int32) + L.tensor(1j, dtype=L.cdouble),
    lambda L: L.ones(2, dtype=L.cfloat) + L.ones(2, dtype=L.float64),
    lambda L: L.tensor([1 + 2j]), lambda L: L.tensor(np.array([1j])),
    lambda L: L.full((2,), 1j), lambda L: L.ones(2, dtype=L.cfloat) / 2,
])
def test_result_dtypes(fn):
    assert repr(fn(tracec).dtype).split(".")[1] == repr(fn(torch).dtype).split(".")[1]


def test_dtype_attributes_and_aliases():
    assert tracec.cfloat is tracec.complex64 and tracec.cdouble is tracec.complex128
    assert tracec.complex64.is_complex and not tracec.complex64.is_floating_point
    assert tracec.complex64.itemsize == 8 and not tracec.float32.is_complex
    z = tracec.zeros(2, dtype=tracec.cfloat)
    assert z.is_complex() and tracec.is_complex(z) and not z.is_floating_point()
    assert tracec.result_type(tracec.ones(2), 1j) is tracec.complex64
    assert tracec.finfo(tracec.complex64).eps == torch.finfo(torch.complex64).eps
    assert tracec.tensor([1 + 2j])[0].item() == 1 + 2j and complex(tracec.tensor(3j)) == 3j


def test_creation():
    for name in ("zeros", "ones", "empty"):
        for d in ("cfloat", "cdouble"):
            t = getattr(tracec, name)(2, 3, dtype=getattr(tracec, d))
            assert t.dtype is getattr(tracec, d) and tuple(t.shape) == (2, 3)
    assert tracec.ones(2, dtype=tracec.cfloat).tolist() == [1 + 0j, 1 + 0j]
    tracec.manual_seed(0)
    z = tracec.randn(200000, dtype=tracec.cfloat)
    assert z.dtype is tracec.complex64
    # Each part N(0, 1/2), as PyTorch's complex randn.
    assert abs(z.real.var().item() - 0.5) < 0.01 and abs(z.imag.var().item() - 0.5) < 0.01
    assert abs(z.real.mean().item()) < 0.01
    u = tracec.rand(100000, dtype=tracec.cdouble)
    assert u.dtype is tracec.complex128
    assert 0 <= u.real.min().item() and u.imag.max().item() < 1
    assert abs(u.imag.mean().item() - 0.5) < 0.01


def test_printing_as_torch():
    vals = [[1 + 2j, 3 - 1j], [[1.5 + 2j, -3.25 - 1j], [0.001 + 1e5j, 2]], 1 + 2j,
            [0.2565 - 0.3861j, -0.1409 + 1.0521j], list(np.arange(30) * (1.5 + 0.5j)),
            list(np.arange(2000) * (1 + 1j)), [complex(float("nan"), 1), complex(1, float("inf"))]]
    for v in vals:
        for d in ("complex64", "complex128"):
            a = repr(torch.tensor(v, dtype=getattr(torch, d))).replace("torch.", "")
            b = repr(tracec.tensor(v, dtype=getattr(tracec, d))).replace("tracec.", "")
            assert a == b
    z = tracec.tensor([1 + 2j], requires_grad=True)
    assert repr(z * 2) == "tensor([2.+4.j], grad_fn=<MulBackward0>)"


# --- views ----------------------------------------------------------------------------------

def test_views_share_memory_and_write_through():
    z = tracec.tensor([1 + 2j, 3 - 4j])
    r = z.real
    r[0] = 10.0
    z.imag.mul_(2)
    assert z.tolist() == [10 + 4j, 3 - 8j]
    v = tracec.view_as_real(z)
    assert tuple(v.shape) == (2, 2) and v.tolist() == [[10, 4], [3, -8]]
    v[1, 0] = -1.0
    assert z[1].item() == -1 - 8j
    x = tracec.tensor([[1.0, 2.0], [3.0, 4.0]])
    c = tracec.view_as_complex(x)
    assert c.tolist() == [1 + 2j, 3 + 4j]
    c.mul_(1j)
    assert x.tolist() == [[-2.0, 1.0], [-4.0, 3.0]]
    z.real = tracec.tensor([5.0, 6.0])
    assert z.real.tolist() == [5.0, 6.0]


def test_write_through_a_view_of_a_tensor_in_the_graph_is_refused():
    z = tracec.tensor([1 + 2j], requires_grad=True)
    with pytest.raises(RuntimeError, match="in-place write through a real/complex view"):
        z.real.mul_(2)
    with tracec.no_grad():
        z.real.mul_(2)
    assert z.tolist() == [2 + 2j]


def test_conj_bit_and_errors_as_torch():
    for L in (torch, tracec):
        z = L.tensor([1 + 2j])
        assert z.conj().is_conj() and not z.is_conj()
        assert not z.conj().resolve_conj().is_conj()
        assert z.conj().resolve_conj().tolist() == [1 - 2j]
        assert not L.ones(2).conj().is_conj()
        with pytest.raises(RuntimeError, match="view_as_real doesn't work on unresolved "
                                               "conjugated tensors"):
            L.view_as_real(z.conj())
        with pytest.raises(RuntimeError, match="Tensor must have a last dimension of size 2"):
            L.view_as_complex(L.ones(3))
        with pytest.raises(RuntimeError, match="Tensor must have a last dimension with stride 1"):
            L.view_as_complex(L.ones(2, 2).t())
        with pytest.raises(RuntimeError, match="view_as_real is only supported for complex"):
            L.view_as_real(L.ones(2))


# --- values and gradients against torch ------------------------------------------------------

def _run(L, fn, arrays, w):
    xs = [L.tensor(a, requires_grad=True) for a in arrays]
    y = fn(L, *xs)
    yr = L.view_as_real(y.resolve_conj()) if y.is_complex() else y
    (yr * L.tensor(w[: yr.numel()].reshape(tuple(yr.shape)))).sum().backward()
    return y, [x.grad for x in xs]


OPS = {
    "add": (lambda L, a, b: a + b, 2), "sub": (lambda L, a, b: a - b * 2, 2),
    "mul": (lambda L, a, b: a * b, 2), "div": (lambda L, a, b: a / b, 2),
    "mul_real": (lambda L, a, r: a * r, "cr"), "div_by_real": (lambda L, a, r: a / r, "cr"),
    "scalar": (lambda L, a: (a * (2 - 1j) + 1j) / (0.5 + 2j), 1),
    "matmul": (lambda L, a, b: a.reshape(3, 4) @ b.reshape(4, 3), 2),
    "einsum": (lambda L, a, b: L.einsum("bix,iox->box", a.reshape(2, 3, 2),
                                         b.reshape(3, 4, 1).expand(3, 4, 2)), 2),
    "abs": (lambda L, a: a.abs(), 1), "angle": (lambda L, a: a.angle(), 1),
    "exp": (lambda L, a: L.exp(a), 1), "log": (lambda L, a: L.log(a), 1),
    "sqrt": (lambda L, a: L.sqrt(a), 1), "sin": (lambda L, a: L.sin(a), 1),
    "tanh": (lambda L, a: L.tanh(a), 1), "pow": (lambda L, a: a ** 2, 1),
    "sgn": (lambda L, a: L.sgn(a), 1),
    "conj": (lambda L, a: a.conj() * a, 1), "conj_physical": (lambda L, a: L.conj_physical(a), 1),
    "real": (lambda L, a: a.real * 3, 1), "imag": (lambda L, a: a.imag * 3, 1),
    "view_as_real": (lambda L, a: L.view_as_real(a) ** 2, 1),
    "view_as_complex": (lambda L, r: L.view_as_complex(r.reshape(6, 2)) ** 2, "r"),
    "complex": (lambda L, r, s: L.complex(r, s) ** 2, "rr"),
    "polar": (lambda L, r, s: L.polar(r, s), "rr"),
    "sum_mean": (lambda L, a: a.sum(0) * a.mean(), 1),
    "reshape_index": (lambda L, a: a.reshape(3, 4).t()[1:, ::2] * a[0], 1),
    "cat_stack": (lambda L, a, b: L.stack([L.cat([a, b]), L.cat([b, a])]), 2),
    "to_real": (lambda L, a: a.abs() ** 2 + a.real * a.imag, 1),
    "real_to_complex": (lambda L, r: (r * 1j + r) ** 2, "r"),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_values_and_gradients_match_torch(name):
    fn, kind = OPS[name]
    rng = np.random.default_rng(3)
    kinds = "c" * kind if isinstance(kind, int) else kind
    arrays = [_c(rng, 12) if k == "c" else rng.uniform(0.5, 2.0, 12) for k in kinds]
    w = rng.standard_normal(200)
    ty, tg = _run(torch, fn, arrays, w)
    cy, cg = _run(tracec, fn, arrays, w)
    assert repr(cy.dtype).split(".")[1] == repr(ty.dtype).split(".")[1]
    np.testing.assert_allclose(_np(cy), _np(ty), rtol=1e-10, atol=1e-12)
    for a, b in zip(cg, tg):
        assert repr(a.dtype).split(".")[1] == repr(b.dtype).split(".")[1]
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-9, atol=1e-12)


def test_grad_fn_names():
    z = tracec.tensor([1 + 2j], requires_grad=True)
    assert z.real.grad_fn.name() == "RealBackward0"
    assert tracec.view_as_real(z).grad_fn.name() == "ViewAsRealBackward0"
    assert z.abs().grad_fn.name() == "AbsBackward0"


def test_save_load_round_trip(tmp_path):
    z = tracec.randn(3, 2, dtype=tracec.cfloat)
    d = tracec.randn(4, dtype=tracec.cdouble)
    tracec.save({"z": z, "d": d, "re": z.real}, tmp_path / "c.pt")
    back = tracec.load(tmp_path / "c.pt")
    assert back["z"].dtype is tracec.complex64 and back["d"].dtype is tracec.complex128
    np.testing.assert_array_equal(back["z"].numpy(), z.numpy())
    np.testing.assert_array_equal(back["d"].numpy(), d.numpy())
    np.testing.assert_array_equal(back["re"].numpy(), z.real.numpy())
    buf = io.BytesIO()
    torch.save({"w": torch.randn(2, 2, dtype=torch.cfloat)}, buf)
    buf.seek(0)
    w = tracec.load(buf)["w"]
    assert w.dtype is tracec.complex64


# --- inside tracec.compile ---------------------------------------------------------------------

def test_complex_op_without_a_decomposition_inside_compile_fails_naming_the_line():
    w = tracec.randn(4, dtype=tracec.cfloat)

    def step(x):
        y = x * 2.0
        return (y * w).angle().sum()   # the complex op with no real decomposition

    line = step.__code__.co_firstlineno + 2
    f = tracec.compile(step, backend="interp")
    with pytest.raises(tracec.TraceError, match=rf"test_complex.py:{line}: angle\(\) cannot "
                                               r"be compiled: complex tensors.*eager only"):
        f(tracec.randn(4))
    g = tracec.compile(step, backend="interp", fallback="eager")
    x = tracec.randn(4)
    with pytest.warns(UserWarning, match="complex"):
        got = g(x)
    assert got.item() == pytest.approx(step(x).item())


def test_complex_argument_to_compile_is_refused():
    def double(z):
        return z * 2

    f = tracec.compile(double, backend="interp")
    with pytest.raises(tracec.TraceError, match="argument .* is a tracec.complex64 tensor; "
                                               "complex values are eager only"):
        f(tracec.ones(2, dtype=tracec.cfloat))


# --- a Fourier Neural Operator layer, trained -------------------------------------------------------

FNO = '''
class SpectralConv2d(L.nn.Module):
    def __init__(self, cin, cout, m1, m2):
        super().__init__()
        self.m1, self.m2 = m1, m2
        scale = 1 / (cin * cout)
        self.weights1 = L.nn.Parameter(scale * L.rand(cin, cout, m1, m2, dtype=L.cfloat))
        self.weights2 = L.nn.Parameter(scale * L.rand(cin, cout, m1, m2, dtype=L.cfloat))

    def compl_mul2d(self, input, weights):
        return L.einsum("bixy,ioxy->boxy", input, weights)

    def forward(self, x):
        b = x.shape[0]
        x_ft = L.fft.rfft2(x)
        out_ft = L.zeros(b, self.weights1.shape[1], x.size(-2), x.size(-1) // 2 + 1,
                         dtype=L.cfloat)
        out_ft[:, :, :self.m1, :self.m2] = self.compl_mul2d(x_ft[:, :, :self.m1, :self.m2],
                                                            self.weights1)
        out_ft[:, :, -self.m1:, :self.m2] = self.compl_mul2d(x_ft[:, :, -self.m1:, :self.m2],
                                                             self.weights2)
        return L.fft.irfft2(out_ft, s=(x.size(-2), x.size(-1)))


class Net(L.nn.Module):
    def __init__(self):
        super().__init__()
        self.lift = L.nn.Conv2d(1, 4, 1)
        self.spec = SpectralConv2d(4, 4, 3, 3)
        self.w = L.nn.Conv2d(4, 4, 1)
        self.proj = L.nn.Conv2d(4, 1, 1)

    def forward(self, x):
        x = self.lift(x)
        x = L.nn.functional.gelu(self.spec(x) + self.w(x))
        return self.proj(x)
'''


def _fno(L):
    ns = {"L": L}
    exec(FNO, ns)
    return ns["Net"]()


def test_fno_spectral_conv_trains_as_torch():
    tnet, cnet = _fno(torch), _fno(tracec)
    with torch.no_grad():
        for (name, tp), (cname, cp) in zip(tnet.named_parameters(), cnet.named_parameters()):
            assert name == cname and cp.dtype.name == str(tp.dtype).split(".")[1]
            cp.data = tracec.tensor(tp.detach().numpy().copy())
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 1, 8, 10)).astype(np.float32)
    y = rng.standard_normal((2, 1, 8, 10)).astype(np.float32)
    topt = torch.optim.Adam(tnet.parameters(), lr=1e-2)
    copt = tracec.optim.Adam(cnet.parameters(), lr=1e-2)
    for _ in range(3):
        losses = []
        for L, net, opt in ((torch, tnet, topt), (tracec, cnet, copt)):
            opt.zero_grad()
            loss = L.nn.functional.mse_loss(net(L.tensor(x)), L.tensor(y))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    for tp, cp in zip(tnet.parameters(), cnet.parameters()):
        np.testing.assert_allclose(cp.detach().numpy(), tp.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


@pytest.mark.parametrize("opt,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1)), ("AdamW", dict(lr=0.05)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5)), ("Adagrad", dict(lr=0.1)),
])
def test_optimizers_update_complex_parameters_as_torch(opt, kw):
    rng = np.random.default_rng(5)
    w0, a = _c(rng, 3, 4), _c(rng, 5, 3)
    got = {}
    for L in (torch, tracec):
        w = L.nn.Parameter(L.tensor(w0))
        o = getattr(L.optim, opt)([w], **kw)
        x = L.tensor(a)
        for _ in range(3):
            o.zero_grad()
            ((x @ w).abs() ** 2).mean().backward()
            o.step()
        got[L] = w.detach().numpy()
    np.testing.assert_allclose(got[tracec], got[torch], rtol=1e-9, atol=1e-12)


def test_prod_of_complex_stays_complex_with_gradients():
    """prod over complex values is complex (it was cast to int64)."""
    rng = np.random.default_rng(5)
    a = _c(rng, 3, 5).astype(np.complex64)
    g = rng.standard_normal(3).astype(np.float32)
    got = []
    for L in (tracec, torch):
        re = L.tensor(a.real.copy(), requires_grad=True)
        im = L.tensor(a.imag.copy(), requires_grad=True)
        z = L.complex(re, im)
        p, q = z.prod(1), z.prod()
        loss = (L.view_as_real(p).sum(-1) * L.tensor(g)).sum() + q.abs()
        loss.backward()
        assert str(p.dtype).endswith("complex64") and str(q.dtype).endswith("complex64")
        got.append([_np(p), _np(q), _np(re.grad), _np(im.grad)])
    for x, y in zip(*got):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)
