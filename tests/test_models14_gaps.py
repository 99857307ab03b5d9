"""What the public programs of ``tests/programs/models14`` needed, checked
against torch 2.13 (the oracle)."""
import numpy as np
import pytest
import torch

import tracec

rng = np.random.default_rng(0)


def both(a):
    a = np.asarray(a)
    return tracec.from_numpy(a.copy()), torch.from_numpy(a.copy())


def close(t, r, atol=1e-5, rtol=1e-4):
    np.testing.assert_allclose(np.asarray(t.detach().numpy()), r.detach().numpy(),
                               atol=atol, rtol=rtol)


# --- indexing with numpy arrays in a tuple key (pytorch-flows' Reverse) ------------

@pytest.mark.parametrize("key", [
    lambda: (slice(None), np.array([3, 2, 1, 0])),
    lambda: (np.array([1, 0]), Ellipsis),
    lambda: (Ellipsis, np.array([2, 0])),
    lambda: (np.array([1, 0]), slice(1, 3)),
])
def test_tuple_key_with_numpy_array_like_torch(key):
    t, r = both(rng.standard_normal((3, 4)).astype(np.float32))
    close(t[key()], r[key()])
    t2, r2 = both(np.zeros((3, 4), np.float32))
    t2[key()] = 1.0
    r2[key()] = 1.0
    close(t2, r2)


# --- torch.__version__ compares as a version (Autoformer's TokenEmbedding) ---------

def test_version_is_a_torch_version_comparing_like_torch():
    from tracec.torch_version import TorchVersion
    t = torch.__version__
    v = tracec.__version__
    assert isinstance(v, str) and isinstance(v, TorchVersion)
    assert type(tracec.torch_version.__version__) is TorchVersion
    # the PyTorch API version tracec follows: the oracle's release
    assert v.split("+")[0] == t.split("+")[0]
    for other in ["1.5.0", "1.10", "2.2", "2.13", "2.13.0", "2.13.1", "2.14.0a0", "2.13.0a0",
                  "2.13.0.dev20250101", "2.13.0.post1", "3", (2, 0), (2, 13), (2, 13, 1), [1, 9]]:
        for op in ("__lt__", "__le__", "__gt__", "__ge__"):
            assert getattr(v, op)(other) == getattr(t, op)(other), (op, other)
    # 'parrot' is no version: compared as strings
    assert (v > "parrot") == (t > "parrot")
    assert TorchVersion("1.10.0a") > (1, 2, 1) and TorchVersion("1.10.0a") > "1.2"
    assert TorchVersion("1.10.0") == "1.10" and TorchVersion("1.10.0") == (1, 10)
    assert v == str(v) and hash(v) == hash(str(v))
    # plain string methods, as scripts use them
    assert int(v.split(".")[0]) >= 2 and v.startswith("2.")


def test_cli_version_is_tracecs_own():
    from click.testing import CliRunner
    from tracec import cli
    out = CliRunner().invoke(cli.main, ["--version"]).output
    assert tracec.version.__version__ in out and "2.13" not in out


# --- a float item() compared with a number inside tracec.compile (Sinkhorn) --------

def _sinkhorn_like(lib, x, thresh=1e-2, max_iter=40):
    u = lib.zeros_like(x[:, 0])
    n = 0
    for _ in range(max_iter):
        u1 = u
        u = 0.5 * (u + lib.logsumexp(x + u.unsqueeze(-1), dim=-1).neg())
        err = (u - u1).abs().sum()
        n += 1
        if err.item() < thresh:
            break
    return u.sum() * 1.0, n


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_compiled_float_item_comparison_is_a_speculated_decision(backend):
    xs = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2)]
    xs = [xs[0], xs[0] * 1.0001, xs[1], xs[1]]      # same iteration counts, then others
    f = tracec.compile(lambda x: _sinkhorn_like(tracec, x), backend=backend)
    for a in xs:
        got, n = f(tracec.from_numpy(a.copy()))
        want, m = _sinkhorn_like(torch, torch.from_numpy(a.copy()))
        assert n == m
        close(got, want)
    info = f.cache_info()
    assert info.eager_signatures == 0 and info.traces == 1 and info.hits == 3, info
    assert info.speculated and "test_models14_gaps.py:" in info.speculated[0][0]


def test_compiled_float_item_comparisons_all_forms():
    def g(x):
        v = (x * 2).sum().item()
        w = x.max().item()
        return [v < 1.5, 1.5 > v, v >= 0, v == w, w != v, v <= True, v > w]
    f = tracec.compile(g)
    for a in ([0.25, 0.5], [0.25, 0.5], [1.0, 2.0], [0.0, 0.0]):
        want = g(torch.tensor(a))
        assert f(tracec.tensor(a)) == want
    # other uses stay refused
    h = tracec.compile(lambda x: float(x.sum().item()) + 1.0, fallback=None)
    with pytest.raises(Exception, match="float"):
        h(tracec.ones(2))
