"""uint8, int8, int16 (and the uint16/32/64 names) against PyTorch.

Promotion (the full ``promote_types`` table), wraparound arithmetic, scalar
operands out of range, casts, reductions, masks, repr and serialization are
compared with torch; compiled programs (cpu and interp) must equal eager on
values at both ends of each range.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tracec
from tracec import dtypes as dt
from _torch_ref import run_both, torch

SMALL = ("uint8", "int8", "int16")
R = np.random.default_rng(7)


def edges(name: str, n: int = 24) -> np.ndarray:
    """``n`` values of dtype ``name`` crowding both ends of its range."""
    info = np.iinfo(name)
    lo, hi = int(info.min), int(info.max)
    v = [lo, lo + 1, hi, hi - 1, 0, 1, 2, 3, min(hi, 127), min(hi, 128), max(lo, -1), 100]
    return np.array([x % (1 << 64) if x < 0 else x for x in (v * n)[:n]],
                    np.uint64).astype(name)[R.permutation(n)]


def _th(d: dt.DType):
    return getattr(torch, d.name)


# --- dtypes and promotion -----------------------------------------------------

def test_promotion_table_matches_torch():
    for a in dt.all_dtypes:
        for b in dt.all_dtypes:
            try:
                want = str(torch.promote_types(_th(a), _th(b))).removeprefix("torch.")
            except RuntimeError:
                with pytest.raises(RuntimeError, match="Promotion for uint16, uint32, uint64"):
                    dt.promote_types(a, b)
                continue
            assert dt.promote_types(a, b).name == want, (a, b)


@pytest.mark.parametrize("fn", [
    lambda L, x, y: x + 1, lambda L, x, y: x * 2.5, lambda L, x, y: x + True,
    lambda L, x, y: x + L.tensor(300), lambda L, x, y: x + y.to(L.int64),
    lambda L, x, y: x + y.to(L.int8), lambda L, x, y: x.to(L.bool) + x,
    lambda L, x, y: x / y, lambda L, x, y: x + L.tensor(1.5, dtype=L.float64),
])
def test_result_types(fn):
    x, y = edges("uint8"), edges("uint8")
    y[y == 0] = 5
    run_both(fn, x, y, grad=False)


def test_names_aliases_info():
    assert tracec.short is tracec.int16 and tracec.uint8.short == "ui8"
    for d in (tracec.uint8, tracec.int8, tracec.int16, tracec.uint16, tracec.uint32,
              tracec.uint64):
        th = _th(d)
        assert d.is_signed == th.is_signed and d.itemsize == th.itemsize
        assert (tracec.iinfo(d).min, tracec.iinfo(d).max) == (torch.iinfo(th).min,
                                                              torch.iinfo(th).max)
        assert tracec.from_numpy(np.zeros(2, d.np)).dtype is d   # never widened
    t = tracec.tensor([1.5, 300.0])
    assert (t.byte().dtype, t.char().dtype, t.short().dtype) == (tracec.uint8, tracec.int8,
                                                                 tracec.int16)
    assert t.byte().type() == "torch.ByteTensor" and not t.byte().is_signed()
    assert t.type("torch.CharTensor").dtype is tracec.int8


# --- eager arithmetic vs torch -------------------------------------------------------

BINARY = {
    "add": lambda L, x, y: x + y, "sub": lambda L, x, y: x - y, "mul": lambda L, x, y: x * y,
    "div": lambda L, x, y: x / y, "max": lambda L, x, y: L.maximum(x, y),
    "min": lambda L, x, y: L.minimum(x, y), "lt": lambda L, x, y: x < y,
    "ge": lambda L, x, y: x >= y, "eq": lambda L, x, y: x == y,
    # Python scalars take the tensor's dtype and wrap, as in torch
    "add300": lambda L, x, y: x + 300, "mul-1": lambda L, x, y: x * -1,
    "sub_r": lambda L, x, y: 5 - x, "lt300": lambda L, x, y: x < 300,
    "gt-1": lambda L, x, y: x > -1, "neg": lambda L, x, y: -x, "abs": lambda L, x, y: x.abs(),
    "where": lambda L, x, y: L.where(x > y, x, y),
}


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_arithmetic_wraps_like_torch(op, name):
    x, y = edges(name), edges(name)[::-1].copy()
    if op == "div":
        y[y == 0] = 7
    run_both(BINARY[op], x, y, grad=False)


@pytest.mark.parametrize("name", SMALL)
def test_casts_like_torch(name):
    f = np.array([300.7, -1.5, 255.9, -128.0, 127.9, -0.5, 40000.5, 2.0, -70000.25], np.float32)
    run_both(lambda L, x: x.to(getattr(L, name)), f, grad=False)
    x = edges(name)
    for to in ("float32", "float64", "float16", "int64", "int32", "bool", *SMALL):
        run_both(lambda L, x: x.to(getattr(L, to)), x, grad=False)


@pytest.mark.parametrize("name", SMALL)
def test_reductions_like_torch(name):
    x = edges(name).reshape(4, 6)
    run_both(lambda L, x: (x.sum(), x.sum(1), x.max(), x.min(1).values, x.argmax(1),
                           x.amax(0), x.cumsum(1)), x, grad=False)


@pytest.mark.parametrize("fn", [
    lambda L, x: x.clamp(10, 200), lambda L, x: x.masked_fill(x > 0, 300),
    lambda L, x: L.full((2,), 300, dtype=L.uint8)])
def test_fill_values_do_not_wrap(fn):
    # Unlike arithmetic operands, bounds and fill values are range-checked.
    for lib in (tracec, torch):
        with pytest.raises(RuntimeError, match="value cannot be converted to type u?int8_t "
                                               "without overflow"):
            fn(lib, lib.tensor([1, 100, -5], dtype=lib.int8))


def test_uint8_masks_like_torch():
    x = np.arange(6, dtype=np.float32)
    m = np.array([1, 0, 1, 0, 0, 1], np.uint8)
    for lib in (tracec, torch):
        with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
            got = lib.tensor(x)[lib.tensor(m)]
        assert got.tolist() == [0.0, 2.0, 5.0]
        t = lib.tensor(x)
        with pytest.warns(UserWarning, match="uint8"):
            t[lib.tensor(m)] = lib.tensor([-1.0, -2.0, -3.0])
        assert t.tolist() == [-1.0, 1.0, -2.0, 3.0, 4.0, -3.0]
        with pytest.raises(RuntimeError, match="masked_fill_ only supports boolean masks"):
            t[lib.tensor(m)] = 5.0
        with pytest.warns(UserWarning, match="where received a uint8 condition"):
            assert lib.where(lib.tensor(m), 1, 0).tolist() == [1, 0, 1, 0, 0, 1]
        with pytest.raises(RuntimeError, match="masked_fill_? only supports boolean masks"):
            lib.tensor(x).masked_fill(lib.tensor(m), 0.0)
    # The Annotated Transformer's mask
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_both(lambda L: L.triu(L.ones(1, 3, 3), diagonal=1).type(L.uint8) == 0, grad=False)


def test_item_tolist_repr_like_torch():
    for name in SMALL:
        v = edges(name, 5)
        a, b = tracec.tensor(v), torch.tensor(v)
        assert a.tolist() == b.tolist() and type(a[0].item()) is type(b[0].item()) is int
        assert repr(a).replace("tracec.", "torch.") == repr(b)
        assert repr(a[0]).replace("tracec.", "torch.") == repr(b[0])


def test_save_load_roundtrip(tmp_path):
    obj = {name: tracec.tensor(edges(name)) for name in (*SMALL, "uint16", "uint32", "uint64")}
    tracec.save(obj, tmp_path / "s.pt")
    got = tracec.load(tmp_path / "s.pt")
    for k, v in obj.items():
        assert got[k].dtype is v.dtype and got[k].tolist() == v.tolist()
    ref = {k: edges(k) for k in SMALL}
    torch.save({k: torch.tensor(v) for k, v in ref.items()}, tmp_path / "t.pt")
    got = tracec.load(tmp_path / "t.pt")
    for k, v in ref.items():
        assert got[k].dtype.name == k and got[k].tolist() == v.tolist()


# --- compiled == eager ---------------------------------------------------------------

def _program(x, y, f):
    """Elementwise, compare, cast and reduction ops on one small-int dtype."""
    d = x.dtype
    return (x + y, x - y * 3, x * y + 7, -x, x.abs(), torch_max(x, y), x < y, x >= 100,
            x == y, (x > y) & (y > 1), x.to(tracec.int64) * 5, x.float() / 3,
            (f * 97.3).to(d), x.to(tracec.uint8), x.to(tracec.int8), x.to(tracec.int16),
            x.sum(), x.sum(0), x.max(), x.amin(0), x.argmax(1), tracec.where(x > y, x, y))


def torch_max(x, y):
    return tracec.maximum(x, y)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("name", SMALL)
def test_compiled_equals_eager(name, backend):
    x = tracec.tensor(edges(name).reshape(4, 6))
    y = tracec.tensor(edges(name)[::-1].copy().reshape(4, 6))
    f = tracec.tensor(R.uniform(-3, 3, (4, 6)).astype(np.float32))
    want = _program(x, y, f)
    fn = tracec.compile(_program, backend=backend)
    fn(x, y, f)
    got = fn(x, y, f)   # the compiled code (the first call records)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype is w.dtype, (i, g.dtype, w.dtype)
        np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=f"output {i}")
    text = fn.ir("trace")
    assert f"x{dt.to_dtype(name).short}>" in text
    assert tracec.ir.print_module(tracec.ir.parse_module(text)) == text
