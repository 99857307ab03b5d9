"""The native random kernels (tracec/backends/cpu/rng_kernels.py) draw what
the NumPy transforms of tracec/torch_rng.py draw, bit for bit, and both
what torch 2.13 draws: the same values, and the same words consumed (the
next draw after them still agrees with torch's)."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import tracec
from tracec import torch_rng as R

SIZES = (0, 1, 15, 16, 17, 4095, 4096, 100003)
DTYPES = {"float32": (tracec.float32, torch.float32), "float64": (tracec.float64, torch.float64)}


@pytest.fixture
def modes(monkeypatch):
    """``set_mode("native" | "numpy")`` for the draws that follow."""
    monkeypatch.setattr(R, "NATIVE_WARMUP", 0)
    monkeypatch.setattr(R, "_native_made", [])
    monkeypatch.setattr(R, "NATIVE_ON", [True])
    assert R._native(16) is not None, "the native kernels could not be made"

    def set_mode(mode):
        R.NATIVE_ON[0] = mode == "native"
    return set_mode


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def _tracec_draw(seed, fn):
    tracec.manual_seed(seed)
    out = fn()
    return out, tracec.rand(7).numpy()


def _torch_draw(seed, fn):
    torch.manual_seed(seed)
    out = fn()
    return out, torch.rand(7).numpy()


def _check(seed, tc_fn, torch_fn, set_mode):
    """native == NumPy == torch, and the stream aligned after each."""
    want, want_next = _torch_draw(seed, torch_fn)
    for mode in ("native", "numpy"):
        set_mode(mode)
        got, got_next = _tracec_draw(seed, tc_fn)
        assert got.dtype == want.dtype and got.shape == want.shape, mode
        assert np.array_equal(_bits(got), _bits(want)), \
            (mode, seed, np.flatnonzero(_bits(got) != _bits(want))[:5])
        assert np.array_equal(got_next, want_next), (mode, "stream not aligned after")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_randn_native_numpy_torch(modes, n, dtype):
    tc, th = DTYPES[dtype]
    for seed in (0, 1, 2024):
        _check(seed, lambda: tracec.randn(n, dtype=tc).numpy(),
               lambda: torch.randn(n, dtype=th).numpy(), modes)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mean, std", [(0.5, 2.5), (-3.0, 0.1), (1e3, 1e-3), (0.0, 1.0)])
def test_normal_mean_std(modes, mean, std, dtype):
    tc, th = DTYPES[dtype]
    for n, seed in ((16, 3), (17, 4), (4096, 5), (100003, 6)):
        _check(seed, lambda: tracec.empty(n, dtype=tc).normal_(mean, std).numpy(),
               lambda: torch.empty(n, dtype=th).normal_(mean, std).numpy(), modes)


def test_affine_step_is_one_fma(modes):
    """The kernels' ``z * std + mean`` is the hardware's fused multiply-add,
    as PyTorch's: exact also where the NumPy path's emulated one
    (``torch_rng._fma64``, Dekker's product) is not, a subnormal product."""
    modes("native")
    for mean, std in ((0.0, 1e-310), (1e308, 1e300), (-2.5, 1e-30)):
        tracec.manual_seed(0)
        got = tracec.empty(4096, dtype=tracec.float64).normal_(mean, std).numpy()
        torch.manual_seed(0)
        want = torch.empty(4096, dtype=torch.float64).normal_(mean, std).numpy()
        assert np.array_equal(_bits(got), _bits(want)), (mean, std)


def test_many_seeds(modes):
    for seed in range(40):
        for n in (33, 1000):
            _check(seed, lambda: tracec.randn(n).numpy(), lambda: torch.randn(n).numpy(), modes)
            _check(seed, lambda: tracec.randn(n, dtype=tracec.float64).numpy(),
                   lambda: torch.randn(n, dtype=torch.float64).numpy(), modes)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reduced_normals(modes, dtype):
    tc, th = getattr(tracec, dtype), getattr(torch, dtype)
    for n, seed in ((16, 0), (100, 1), (4099, 2)):
        _check(seed, lambda: tracec.randn(n, dtype=tc).float().numpy(),
               lambda: torch.randn(n, dtype=th).float().numpy(), modes)


@pytest.mark.parametrize("n", (1, 2, 10, 63, 64, 1000, 60000, 100003))
def test_randperm(modes, n):
    for seed in (0, 7):
        _check(seed, lambda: tracec.randperm(n).numpy(), lambda: torch.randperm(n).numpy(),
               modes)


@pytest.mark.parametrize("n", (1023, 1024, 4097, 100003))
def test_uniform_draws(modes, n):
    """rand / uniform_ / dropout / bernoulli_ take their words from the
    native twister from ``WORDS_NATIVE_MIN`` words on."""
    for seed in (0, 8):
        for dtype in DTYPES:
            tc, th = DTYPES[dtype]
            _check(seed, lambda: tracec.rand(n, dtype=tc).numpy(),
                   lambda: torch.rand(n, dtype=th).numpy(), modes)
            _check(seed, lambda: tracec.empty(n, dtype=tc).uniform_(-2.0, 3.0).numpy(),
                   lambda: torch.empty(n, dtype=th).uniform_(-2.0, 3.0).numpy(), modes)
        _check(seed, lambda: tracec.nn.functional.dropout(tracec.ones(n), 0.3).numpy(),
               lambda: torch.nn.functional.dropout(torch.ones(n), 0.3).numpy(), modes)
        _check(seed, lambda: tracec.empty(n).bernoulli_(0.25).numpy(),
               lambda: torch.empty(n).bernoulli_(0.25).numpy(), modes)


@pytest.mark.parametrize("n", (1023, 1024, 4097))
def test_integer_draws(modes, n):
    """randint (32- and 64-bit ranges) and random_ without bounds."""
    for seed in (0, 8):
        _check(seed, lambda: tracec.randint(-5, 1000, (n,)).numpy(),
               lambda: torch.randint(-5, 1000, (n,)).numpy(), modes)
        _check(seed, lambda: tracec.randint(0, 1 << 40, (n,)).numpy(),
               lambda: torch.randint(0, 1 << 40, (n,)).numpy(), modes)
        for name in ("int64", "int32", "float32", "float64", "bool"):
            tc, th = getattr(tracec, name), getattr(torch, name)
            _check(seed, lambda: tracec.empty(n, dtype=tc).random_().numpy(),
                   lambda: torch.empty(n, dtype=th).random_().numpy(), modes)


def test_kernels_on_extreme_words(modes):
    """The kernels against the NumPy transforms on the same uniforms,
    including the extremes (u = 0: log(1) = 0; u = 1 - 2**-24) and a
    million random words."""
    k = R._native(16)
    rng = np.random.default_rng(11)
    w = rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint32)
    w[:16], w[16:32], w[32:64] = 0, 0xFFFFFF, np.arange(32)
    w64 = w.astype(np.uint64)
    f32 = np.dtype(np.float32)
    for mean, std in ((0.0, 1.0), (0.25, 3.0)):
        out = np.empty(w.size, np.float32)
        k.normal(w, out, mean, std)
        u = (w64 & np.uint64(0xFFFFFF)).astype(np.float32) * np.float32(2.0 ** -24)
        ref = R._box_muller16(u.reshape(-1, 2, 8), f32, mean, std)
        assert np.array_equal(_bits(out), _bits(ref)), (mean, std)
        out64 = np.empty(w.size // 2, np.float64)
        k.normal(w, out64, mean, std)
        u64 = (((w64[0::2] << np.uint64(32)) | w64[1::2]) & np.uint64((1 << 53) - 1)) \
            .astype(np.float64) * 2.0 ** -53
        ref64 = R._box_muller16(u64.reshape(-1, 2, 8), np.dtype(np.float64), mean, std)
        assert np.array_equal(_bits(out64), _bits(ref64)), (mean, std)


def test_native_twister(modes):
    """The kernels' Mersenne Twister, on NumPy's state, draws ``random_raw``'s
    words and leaves NumPy's state where ``random_raw`` leaves it, from
    any position (a fresh seed: 624), across several twists."""
    k = R._native(16)
    assert k.native_words
    for seed in (0, 5):
        for before in (0, 1, 623, 624, 700):
            for n in (0, 1, 623, 624, 625, 5000):
                a, b = R.MTState(seed), R.MTState(seed)
                a.random(before), b.random(before)
                got, want = k.words(a, n), b.random(n)
                assert got.dtype == np.uint32 and np.array_equal(got, want), (seed, before, n)
                sa, sb = a.bits.state["state"], b.bits.state["state"]
                assert sa["pos"] == sb["pos"] and np.array_equal(sa["key"], sb["key"])


def test_words_without_the_twister(modes, monkeypatch):
    """Where NumPy's state layout did not check out, the words come from
    ``random_raw``: the same draws."""
    k = R._native(16)
    monkeypatch.setattr(k, "native_words", False)
    _check(9, lambda: tracec.randn(1000).numpy(), lambda: torch.randn(1000).numpy(), modes)
    _check(9, lambda: tracec.randperm(1000).numpy(), lambda: torch.randperm(1000).numpy(),
           modes)


def test_warmup_counts_elements(monkeypatch):
    """Small draws stay on the NumPy path until the warmup is spent."""
    made = []
    monkeypatch.setattr(R, "NATIVE", [lambda: made.append(1) or "kernels"])
    monkeypatch.setattr(R, "_native_made", [])
    monkeypatch.setattr(R, "_native_seen", [0])
    monkeypatch.setattr(R, "NATIVE_ON", [True])
    calls = R.NATIVE_WARMUP // (1000 + R.NATIVE_CALL)
    assert all(R._native(1000) is None for _ in range(calls)) and not made
    assert R._native(1000) == "kernels" and made == [1]
    R.NATIVE_ON[0] = False
    assert R._native(10 ** 6) is None and made == [1]


def test_failed_maker_warns_once_and_falls_back(monkeypatch):
    def broken():
        raise RuntimeError("no LLVM here")
    monkeypatch.setattr(R, "NATIVE", [broken])
    monkeypatch.setattr(R, "NATIVE_WARMUP", 0)
    monkeypatch.setattr(R, "_native_made", [])
    monkeypatch.setattr(R, "NATIVE_ON", [True])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tracec.manual_seed(5)
        a = tracec.randn(4096).numpy()
        b = tracec.randperm(1000).numpy()
    assert [str(w.message) for w in caught if "native random" in str(w.message)] == \
        ["tracec: no native random kernels (RuntimeError: no LLVM here); "
         "the NumPy transforms run instead (same values)"]
    torch.manual_seed(5)
    assert np.array_equal(a, torch.randn(4096).numpy())
    assert np.array_equal(b, torch.randperm(1000).numpy())


_CHILD = r"""
import hashlib, sys, json, numpy as np, tracec
from tracec import torch_rng as R
R.NATIVE_WARMUP = 0
tracec.manual_seed(3)
x = tracec.randn(5000).numpy()
if '--no-llvm' not in sys.argv:
    from tracec.backends.cpu import rng_kernels, shared_objects
    shared_objects.wait()        # the shared library, for the next process
    info = dict(rng_kernels.INFO)
else:
    info = {}
print(json.dumps({"info": info, "sum": hashlib.sha256(x.tobytes()).hexdigest(),
                  "made": [k is not None for k in R._native_made],
                  "llvm": "llvmlite.binding" in sys.modules}))
"""


def _digest(a):
    import hashlib
    return hashlib.sha256(a.tobytes()).hexdigest()


def _child(env, *args):
    import json
    r = subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_second_process_loads_cached_kernels(tmp_path):
    # (conftest turns the shared libraries off for the tests' own processes)
    env = dict(os.environ, TRACEC_CACHE_DIR=str(tmp_path), TRACEC_SHARED_OBJECTS="1")
    env.pop("TRACEC_NO_CACHE", None)
    first, _ = _child(env)
    second, _ = _child(env)
    torch.manual_seed(3)
    want = _digest(torch.randn(5000).numpy())
    assert first["info"]["source"] == "compiled" and first["made"] == [True]
    assert second["info"]["source"] == "disk cache" and second["made"] == [True]
    # loaded as a shared library (linked by the C compiler, where there is
    # one): no LLVM in the second process at all
    from tracec.backends.cpu import shared_objects
    if shared_objects._compiler() is not None:
        assert not second["llvm"]
    assert first["sum"] == second["sum"] == want


def test_no_llvmlite_falls_back(tmp_path):
    """Without llvmlite (and nothing cached) the kernels cannot be made: one
    warning, and the NumPy path's values."""
    env = dict(os.environ, TRACEC_CACHE_DIR=str(tmp_path))
    code = "import sys; sys.modules['llvmlite'] = None\n" + _CHILD
    import json
    r = subprocess.run([sys.executable, "-c", code, "--no-llvm"], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["made"] == [False] and r.stderr.count("no native random kernels") == 1
    torch.manual_seed(3)
    assert out["sum"] == _digest(torch.randn(5000).numpy())


def test_env_switch_off(tmp_path):
    env = dict(os.environ, TRACEC_CACHE_DIR=str(tmp_path), TRACEC_NATIVE_RNG="0")
    out, _ = _child(env, "--no-llvm")
    assert out["made"] == [] and not out["llvm"]
    torch.manual_seed(3)
    assert out["sum"] == _digest(torch.randn(5000).numpy())


def test_small_draws_load_no_compiler(tmp_path):
    """A script drawing a few small tensors never loads the kernels (nor
    llvmlite, xDSL or the cpu backend): the warmup is not spent."""
    code = ("import sys, tracec\n"
            "tracec.manual_seed(0)\n"
            "for _ in range(3):\n"
            "    tracec.randn(1000), tracec.rand(2000), tracec.randperm(500)\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('llvmlite', 'xdsl')\n"
            "               or m.startswith('tracec.backends.cpu'))\n"
            "assert not heavy, heavy\n"
            "from tracec import torch_rng as R\n"
            "assert R._native_made == [] and 0 < R._native_seen[0] < R.NATIVE_WARMUP\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, TRACEC_CACHE_DIR=str(tmp_path)), timeout=300)
    assert r.returncode == 0, r.stderr
