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
