"""``torch.nn.modules.utils``: the tuple helpers custom layers import
(``from torch.nn.modules.utils import _pair``), as PyTorch writes them."""
from __future__ import annotations

import collections.abc
from itertools import repeat

__all__ = ["_single", "_pair", "_triple", "_quadruple", "_ntuple", "_reverse_repeat_tuple",
           "_list_with_default"]


def _ntuple(n, name="parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable):
            return tuple(x)
        return tuple(repeat(x, n))
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t, n):
    """Reverse ``t`` and repeat each element ``n`` times (conv padding for F.pad)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults):
    if isinstance(out_size, (int, type(None))) and not isinstance(out_size, bool):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d
            for v, d in zip(out_size, defaults[-len(out_size):])]
