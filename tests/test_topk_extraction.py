"""Eager ``topk`` with ``k`` small against the row (the argmax-extraction
path of ``sorting._head``): values and indices equal PyTorch's, ties,
infinities, integer extremes and every dim included."""
import numpy as np
import pytest

import tracec
from tracec import sorting

torch = pytest.importorskip("torch")


def _cases():
    rng = np.random.default_rng(3)
    f = rng.standard_normal((7, 200)).astype(np.float32)
    ties = rng.integers(0, 4, (6, 120)).astype(np.float32)
    infs = rng.standard_normal((5, 64)).astype(np.float32)
    infs[0, :62] = -np.inf          # fewer finite values than k + 1
    infs[1, ::3] = np.inf
    infs[2, :] = -np.inf
    infs[3, 5:] = np.inf
    zeros = np.zeros((3, 50), np.float64)
    zeros[0, ::2] = -0.0
    ints = rng.integers(-3, 3, (4, 5, 90))
    extremes = rng.integers(-5, 5, (3, 70)).astype(np.int32)
    extremes[0, :] = np.iinfo(np.int32).min
    extremes[1, 10:] = np.iinfo(np.int32).max
    u8 = rng.integers(0, 3, (2, 3, 40)).astype(np.uint8)
    return {"float": f, "ties": ties, "infs": infs, "zeros": zeros, "ints": ints,
            "extremes": extremes, "uint8": u8, "float64": f.astype(np.float64)}


@pytest.mark.parametrize("name", list(_cases()))
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("k", [1, 3, 7])
def test_topk_small_k_equals_torch(name, largest, k):
    a = _cases()[name]
    for dim in range(-a.ndim, a.ndim):
        if a.shape[dim] < 4 * (k + 1):
            continue
        v, i = tracec.tensor(a).topk(k, dim, largest=largest)
        tv, ti = torch.tensor(a).topk(k, dim, largest=largest)
        np.testing.assert_array_equal(v.numpy(), tv.numpy())
        np.testing.assert_array_equal(i.numpy(), ti.numpy(), err_msg=f"{name} dim={dim}")


def test_extraction_is_the_stable_order_or_declines():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, (9, 100)).astype(np.float32)
    for largest in (True, False):
        got = sorting._head_by_extraction(x, 6, largest)
        ref = np.argsort(-x if largest else x, axis=-1, kind="stable")[:, :6]
        np.testing.assert_array_equal(got, ref)
    x[4, :96] = -np.inf                # a round would meet the sentinel
    assert sorting._head_by_extraction(x, 6, True) is None
    assert sorting._head_by_extraction(x.astype(np.float16), 6, True) is None
