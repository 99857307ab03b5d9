"""``torch.nn.modules.utils``: the tuple helpers custom layers import
(``from torch.nn.modules.utils import _pair``), as PyTorch writes them, and
``consume_prefix_in_state_dict_if_present`` (a DataParallel / DDP
checkpoint's ``module.`` prefix stripped before loading it)."""
from __future__ import annotations

import collections.abc
from itertools import repeat

__all__ = ["_single", "_pair", "_triple", "_quadruple", "_ntuple", "_reverse_repeat_tuple",
           "_list_with_default", "consume_prefix_in_state_dict_if_present"]


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


def consume_prefix_in_state_dict_if_present(state_dict, prefix: str) -> None:
    """Strip ``prefix`` from the keys of ``state_dict`` that have it, in place
    (each renamed key moves to the end, as in PyTorch), and from its
    ``_metadata`` keys (``''``, the wrapper's own entry, is skipped;
    ``'module'`` and ``'module.x'`` lose the prefix)."""
    for key in list(state_dict.keys()):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata.keys()):
            if len(key) == 0:
                continue
            if key == prefix.replace(".", "") or key.startswith(prefix):
                metadata[key[len(prefix):]] = metadata.pop(key)
