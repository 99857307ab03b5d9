"""``default_collate`` / ``WeightedRandomSampler`` / ``torch.multinomial``
as PyTorch behaves, checked against torch: dict samples collate by the
first sample's keys (tracec refused other keys), a mutable mapping's type
survives (defaultdict), mismatched tensors give torch.stack's errors and
ragged lists PyTorch's message (tracec had its own), bad sampler weights
fail when drawn, not when the sampler is built, and multinomial names the
bad entry as PyTorch's CPU kernel does."""
import collections

import pytest
import torch

import tracec


def _outcome(fn):
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001 - the exception is what is compared
        return type(e).__name__, str(e)
    if isinstance(r, dict):
        return type(r).__name__, {k: v.tolist() for k, v in r.items()}
    return r.tolist() if hasattr(r, "tolist") else r


def _cases(lib):
    dc = lib.utils.data.default_collate
    W = lib.utils.data.WeightedRandomSampler
    dd = collections.defaultdict(list, {"a": 1})
    return {
        "extra_keys": lambda: dc([{"a": 1}, {"a": 2, "b": 3}]),
        "missing_key": lambda: dc([{"a": 1, "b": 2}, {"a": 2}]),
        "defaultdict": lambda: dc([dd, {"a": 2}]),
        "shapes": lambda: dc([lib.ones(2), lib.ones(3)]),
        "not_tensor": lambda: dc([lib.ones(2), 3]),
        "ragged": lambda: dc([[1, 2], [3]]),
        "no_len": lambda: dc([[1, 2], 5]),
        "negative_weight_built": lambda: type(W([-1.0, 2.0], 3)).__name__,
        "negative_weight_drawn": lambda: list(W([-1.0, 2.0], 3)),
        "zero_weights_drawn": lambda: list(W([0.0, 0.0], 3)),
        "too_many_drawn": lambda: list(W([1.0, 2.0], 3, replacement=False)),
        "multinomial_nan": lambda: lib.multinomial(lib.tensor([float("nan"), 1.0]), 1),
        "multinomial_inf": lambda: lib.multinomial(lib.tensor([float("inf"), 1.0]), 1),
    }


@pytest.mark.parametrize("case", sorted(_cases(torch)))
def test_collate_and_sampler_match_torch(case):
    assert _outcome(_cases(tracec)[case]) == _outcome(_cases(torch)[case])
