"""Data sets shipped inside the package (no download at run time).

``digits``: the UCI optical-recognition handwritten digits, 1,797 grey-scale
8x8 images of the digits 0-9 (CC BY 4.0; see README.md beside this file).
"""

from __future__ import annotations

from importlib import resources
from typing import NamedTuple

import numpy as np

__all__ = ["DigitsSplit", "digits_split", "load_digits", "split_indices"]

_DIGITS_FILE = "digits.npz"
_DIGITS_MAX = 16.0  # pixel values are counts of "on" pixels in 4x4 blocks: 0..16


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """Return ``(X, y)``: ``X`` float32 ``[1797, 64]`` scaled to 0..1 (row-major
    8x8 images), ``y`` int64 ``[1797]`` with labels 0..9. Fresh arrays each call."""
    with resources.files(__name__).joinpath(_DIGITS_FILE).open("rb") as f:
        with np.load(f) as npz:
            images = npz["images"]
            labels = npz["labels"]
    X = images.astype(np.float32) / np.float32(_DIGITS_MAX)
    y = labels.astype(np.int64)
    return X, y


def split_indices(
    labels: np.ndarray, test_fraction: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic stratified split of ``range(len(labels))``.

    Each class contributes ``round(test_fraction * count)`` samples to the test
    part, chosen by a permutation from ``np.random.default_rng(seed)``. Returns
    ``(train_idx, test_idx)``, both sorted int64 arrays, disjoint, covering all
    indices.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    test_parts = []
    for cls in np.unique(labels):
        idx = np.flatnonzero(labels == cls)
        n_test = int(round(test_fraction * idx.size))
        test_parts.append(rng.permutation(idx)[:n_test])
    test_idx = np.sort(np.concatenate(test_parts)).astype(np.int64)
    mask = np.ones(labels.shape[0], dtype=bool)
    mask[test_idx] = False
    train_idx = np.flatnonzero(mask).astype(np.int64)
    return train_idx, test_idx


class DigitsSplit(NamedTuple):
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def digits_split(test_fraction: float = 0.2, seed: int = 0) -> DigitsSplit:
    """The digits data set split into train and test parts, deterministically
    for a given ``(test_fraction, seed)`` and stratified by class.

    Returns ``DigitsSplit(x_train, y_train, x_test, y_test)`` (a named tuple),
    with the dtypes and scaling of :func:`load_digits`.
    """
    X, y = load_digits()
    train_idx, test_idx = split_indices(y, test_fraction=test_fraction, seed=seed)
    return DigitsSplit(X[train_idx], y[train_idx], X[test_idx], y[test_idx])
