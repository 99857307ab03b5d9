"""The data set shipped inside the package loads and splits as documented."""

from importlib import resources

import numpy as np
import pytest

from tracec.data import digits_split, load_digits, split_indices


def test_npz_is_shipped_and_small():
    f = resources.files("tracec.data").joinpath("digits.npz")
    assert f.is_file()
    assert len(f.read_bytes()) < 1_000_000


def test_load_digits_shapes_dtypes_values():
    X, y = load_digits()
    assert X.shape == (1797, 64)
    assert y.shape == (1797,)
    assert X.dtype == np.float32
    assert y.dtype == np.int64
    assert X.min() == 0.0 and X.max() == 1.0
    assert np.all((X >= 0.0) & (X <= 1.0))
    # scaled from integer counts 0..16
    np.testing.assert_array_equal(X * 16, np.round(X * 16))
    assert sorted(np.unique(y).tolist()) == list(range(10))
    counts = np.bincount(y, minlength=10)
    assert counts.sum() == 1797 and counts.min() >= 170


def test_load_digits_returns_fresh_arrays():
    X1, y1 = load_digits()
    X1[0, 0] = 123.0
    y1[0] = 99
    X2, y2 = load_digits()
    assert X2[0, 0] != 123.0 and y2[0] != 99


def test_first_image_is_a_zero():
    X, y = load_digits()
    assert y[0] == 0
    img = (X[0] * 16).reshape(8, 8).astype(int)
    assert img[0].tolist() == [0, 0, 5, 13, 9, 1, 0, 0]


def test_split_is_deterministic_disjoint_and_covering():
    _, y = load_digits()
    tr1, te1 = split_indices(y, test_fraction=0.2, seed=0)
    tr2, te2 = split_indices(y, test_fraction=0.2, seed=0)
    np.testing.assert_array_equal(tr1, tr2)
    np.testing.assert_array_equal(te1, te2)
    assert np.intersect1d(tr1, te1).size == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([tr1, te1])), np.arange(1797))
    assert abs(te1.size - 0.2 * 1797) <= 10
    # stratified: every class appears in the test part in about the same share
    test_counts = np.bincount(y[te1], minlength=10)
    all_counts = np.bincount(y, minlength=10)
    assert np.all(np.abs(test_counts - 0.2 * all_counts) <= 1)
    # a different seed gives a different split
    _, te3 = split_indices(y, test_fraction=0.2, seed=1)
    assert not np.array_equal(te1, te3)


def test_digits_split():
    a = digits_split()
    b = digits_split(test_fraction=0.2, seed=0)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert a.x_train.shape[0] + a.x_test.shape[0] == 1797
    assert a.x_train.shape[1] == a.x_test.shape[1] == 64
    assert a.x_train.shape[0] == a.y_train.shape[0]
    assert a.x_test.shape[0] == a.y_test.shape[0]
    assert a.x_train.dtype == np.float32 and a.y_test.dtype == np.int64
    # the 1,797 images are pairwise distinct, so disjoint rows mean a disjoint split
    train_rows = {r.tobytes() for r in a.x_train}
    test_rows = {r.tobytes() for r in a.x_test}
    assert len(train_rows) == a.x_train.shape[0]
    assert train_rows.isdisjoint(test_rows)
    X, _ = load_digits()
    assert train_rows | test_rows == {r.tobytes() for r in X}
    assert len(set(np.unique(a.y_test).tolist())) == 10


@pytest.mark.parametrize("frac", [0.0, 1.0, -0.1, 1.5])
def test_split_rejects_bad_fraction(frac):
    with pytest.raises(ValueError, match="test_fraction"):
        digits_split(test_fraction=frac)
