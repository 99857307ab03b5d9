"""NumPy array arguments of a compiled function are inputs, as tensors are
(``tracec.arg_arrays``): the trace reads each call's array where the
function converts it (``from_numpy``, ``tensor``, ``as_tensor``), and the
key holds its shape and dtype, not its identity.  Before, arrays were keyed
by identity: a fresh array at every call (an observation, a NumPy batch)
retraced at every call, and one past the guards' 4096-element content
limit changed in place between calls was reused with the values the trace
had read (WRONG numbers).  A function whose trace reads an array's values
otherwise (NumPy arithmetic, ``np.asarray(a, dtype)``, indexing) runs that
call eagerly and keys arrays by their contents from then on."""
import numpy as np
import pytest
import torch

import tracec


def _f(lib):
    def f(a, x):
        return (lib.from_numpy(a).float() * x).sum() + lib.tensor(a).sum()
    return f


def test_large_array_changed_in_place_is_read_at_each_call():
    a = np.zeros(5000, dtype=np.float64)
    fn = tracec.compile(_f(tracec))
    x, xt = tracec.ones(5000), torch.ones(5000)
    for i in range(4):
        a[:] = i
        assert float(fn(a, x)) == pytest.approx(float(_f(torch)(a, xt))), i
    assert fn.cache_info().traces == 1


def test_fresh_arrays_reuse_the_trace():
    fn = tracec.compile(_f(tracec))
    x, xt = tracec.ones(6), torch.ones(6)
    for i in range(5):
        a = np.random.default_rng(i).standard_normal(6).astype(np.float32)
        assert float(fn(a, x)) == pytest.approx(float(_f(torch)(a, xt)), rel=1e-6)
    info = fn.cache_info()
    assert info.traces == 1 and info.hits == 4, info.reasons


@pytest.mark.parametrize("conv", ["from_numpy", "tensor", "tensor_f32", "as_tensor", "asarray",
                                  "FloatTensor", "operand", "astype", "np_asarray_dtype",
                                  "np_array", "stack"])
def test_conversions_are_inputs(conv):
    def c(lib, a):
        if conv == "from_numpy":
            return lib.from_numpy(a)
        if conv == "tensor":
            return lib.tensor(a)
        if conv == "tensor_f32":
            return lib.tensor(a, dtype=lib.float32)
        if conv == "as_tensor":
            return lib.as_tensor(a)
        if conv == "asarray":
            return lib.asarray(a)
        if conv == "FloatTensor":
            return lib.FloatTensor(a)
        if conv == "operand":
            return lib.ones(3, dtype=lib.float64) * a
        if conv == "astype":
            return lib.from_numpy(a.astype(np.float32))
        if conv == "np_asarray_dtype":
            return lib.as_tensor(np.asarray(a, dtype=np.float32))
        if conv == "np_array":
            return lib.from_numpy(np.array(a))
        return lib.stack([lib.from_numpy(a), lib.from_numpy(a)])

    def f(lib):
        return lambda a, x: (c(lib, a).float() * x).sum()
    fn = tracec.compile(f(tracec))
    for i in range(4):
        a = np.arange(3, dtype=np.float64) + 0.25 * i
        assert float(fn(a, tracec.ones(3))) == pytest.approx(float(f(torch)(a, torch.ones(3))))
    info = fn.cache_info()
    assert info.traces == 1 and info.hits == 3, info.reasons


@pytest.mark.parametrize("read", ["ufunc", "asarray", "index", "method", "tolist"])
def test_arrays_read_by_numpy_are_keyed_by_contents(read):
    """Values the trace would bake in: that call runs eagerly, later ones
    key the array by its contents; every call is right."""
    def f(a, x):
        if read == "ufunc":
            b = a / 2
        elif read == "asarray":
            b = np.asarray(a, dtype=np.float32) * 1.5
        elif read == "index":
            b = a[1:]
        elif read == "method":
            b = a.clip(-1, 1)
        else:
            b = np.array(a.tolist())
        return tracec.as_tensor(b, dtype=tracec.float32).sum() * x
    fn = tracec.compile(f)
    x = tracec.ones(2)
    vals = [0.5, 0.25, 0.5, 0.75, 0.5]
    for v in vals:
        a = np.full(3, v)
        assert fn(a, x).tolist() == pytest.approx(f(a, x).tolist())
    info = fn.cache_info()
    assert info.traces == 3, info.reasons          # 0.25, 0.5 and 0.75
    assert "keyed by their contents" in info.reasons[0]


def test_array_in_a_container_argument_and_a_shape_change():
    def step(batch, w):
        obs = tracec.as_tensor(batch["obs"], dtype=tracec.float32)
        return (obs @ w).sum()
    fn = tracec.compile(step)
    w = tracec.ones(4, 2)
    for n in (3, 3, 5, 3):
        obs = np.random.default_rng(n).standard_normal((n, 4))
        want = float((torch.as_tensor(obs, dtype=torch.float32) @ torch.ones(4, 2)).sum())
        assert float(fn({"obs": obs}, w)) == pytest.approx(want, rel=1e-5)
    assert fn.cache_info().traces == 2


def test_array_written_in_place_by_the_call_runs_eagerly():
    """A write through from_numpy's shared memory is a side effect on the
    user's array: eager calls (one warning), never a skipped write."""
    def f(a, x):
        tracec.from_numpy(a).add_(1.0)
        return x * 2
    fn = tracec.compile(f, fallback="eager")
    x = tracec.ones(2)
    for i in range(3):
        a = np.zeros(3)
        with pytest.warns(UserWarning) if i == 1 else _nowarn():
            fn(a, x)
        assert a.tolist() == [1.0, 1.0, 1.0]


def test_returned_array_is_the_users():
    def g(a):
        return a, tracec.from_numpy(a).sum()
    fn = tracec.compile(g, fallback="eager")
    for i in range(3):
        a = np.full(3, float(i))
        with pytest.warns(UserWarning) if i == 1 else _nowarn():
            r, s = fn(a)
        assert r is a and type(r) is np.ndarray and float(s) == 3.0 * i


def test_uint8_arrays_are_keyed_by_contents():
    def f(img):
        return tracec.from_numpy(img).float().mean()
    fn = tracec.compile(f)
    for v in (1, 2, 2):
        img = np.full((2, 2), v, dtype=np.uint8)
        assert float(fn(img)) == pytest.approx(float(v))
    assert fn.cache_info().traces == 2


def test_policy_gradient_step_on_numpy_observations():
    """REINFORCE in the style of public code: observations and returns
    arrive as NumPy arrays, a new one each step."""
    def run(lib, compiled):
        lib.manual_seed(0)
        pi = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 2))
        opt = lib.optim.Adam(pi.parameters(), lr=1e-2)

        def step(obs, actions, returns):
            opt.zero_grad()
            logp = lib.log_softmax(pi(lib.from_numpy(obs).float()), -1)
            chosen = logp.gather(1, lib.as_tensor(actions).long().unsqueeze(1)).squeeze(1)
            ret = lib.tensor(returns, dtype=lib.float32)
            loss = -(chosen * (ret - ret.mean())).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        fn = tracec.compile(step) if compiled else step
        g = np.random.default_rng(0)
        out = [float(fn(g.standard_normal((5, 4)), g.integers(0, 2, 5), g.standard_normal(5)))
               for _ in range(5)]
        return np.array(out), [p.detach().numpy().copy() for p in pi.parameters()], fn
    lt, pt, _ = run(torch, False)
    le, pe, _ = run(tracec, False)
    lc, pc, fn = run(tracec, True)
    np.testing.assert_allclose(le, lt, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lc, le, rtol=1e-5, atol=1e-6)
    for a, b, c in zip(pt, pe, pc):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c, b, rtol=1e-5, atol=1e-6)
    assert fn.cache_info().traces == 1, fn.cache_info().reasons


class _nowarn:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


@pytest.mark.parametrize("kind", ["transposed", "read_only"])
def test_non_contiguous_and_read_only_arrays(kind):
    def f(a):
        return tracec.from_numpy(a).sum(0) * 2
    fn = tracec.compile(f)
    for i in range(4):
        a = np.random.default_rng(i).standard_normal((3, 4))
        if kind == "transposed":
            a = a.T
        else:
            a.flags.writeable = False
        with _quiet():
            got = fn(a).tolist()
        assert got == pytest.approx((np.asarray(a).sum(0) * 2).tolist())
    assert fn.cache_info().traces == 1


class _quiet:
    """(PyTorch's warning for a read-only array, once per program)"""

    def __enter__(self):
        import warnings
        self.w = warnings.catch_warnings()
        self.w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *a):
        return self.w.__exit__(*a)


def test_arrays_inside_tuples_namedtuples_frozen_dataclasses_and_lists():
    """The traced call gets its arrays' stand-ins inside rebuilt tuples and
    set into lists, dicts and objects (a frozen dataclass too), and the
    user's containers hold their own arrays again afterwards."""
    import collections
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Batch:
        obs: np.ndarray
        act: np.ndarray
    Pair = collections.namedtuple("Pair", "obs act")

    def f(batch, x):
        if isinstance(batch, dict):
            o, a = batch["p"][0], batch["p"][1]
        else:
            o, a = batch.obs, batch.act
        return (tracec.from_numpy(o) * x).sum() + tracec.as_tensor(a).float().sum()
    fn = tracec.compile(f)
    x = tracec.ones(3)
    makers = [Batch, Pair, lambda o, a: {"p": (o, a)}, lambda o, a: {"p": [o, a]}]
    for make in makers:
        for i in range(3):
            o, a = np.full(3, float(i), dtype=np.float32), np.arange(2) + i
            b = make(o, a)
            assert float(fn(b, x)) == pytest.approx(float(f(b, x)))
            held = b["p"] if isinstance(b, dict) else (b.obs, b.act)
            assert held[0] is o and held[1] is a
    assert fn.cache_info().traces == len(makers)
