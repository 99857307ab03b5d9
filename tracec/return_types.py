"""``torch.return_types``: the named tuples PyTorch functions return
(``max(dim)``, ``sort``, ``topk``, ``median``, ``slogdet``...).

Invariant: each is a ``collections.namedtuple`` subclass (unpacking,
indexing, ``._fields`` and pytree flattening are a tuple's), whose repr is
PyTorch's: ``torch.return_types.topk(\\nvalues=...,\\nindices=...)``, with
the library's public name (``tracec``, or ``torch`` under
``install_as_torch``).  Every class made here is also an attribute of this
module, as in PyTorch.
"""
from __future__ import annotations

import sys
from collections import namedtuple

from tracec import dtypes as dt

__all__ = ["structseq"]


def _repr(self) -> str:
    body = ",\n".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
    return f"{dt.PUBLIC_NAME[0]}.return_types.{type(self).__name__}(\n{body})"


def structseq(name: str, fields) -> type:
    """The return type ``name`` with ``fields`` (made once per name).  Its
    constructor also takes PyTorch's structseq form, ``cls(sequence, dict)``,
    which PyTorch's pickles call (``torch.return_types.max((v, i), {})``)."""
    module = sys.modules[__name__]
    existing = getattr(module, name, None)
    if existing is not None:
        return existing
    base = namedtuple(name, fields)

    def __new__(cls, *args, **kwargs):
        if len(args) == 2 and not kwargs and isinstance(args[1], dict) and not args[1] and \
                isinstance(args[0], (tuple, list)) and len(args[0]) == len(base._fields):
            args = tuple(args[0])
        return base.__new__(cls, *args, **kwargs)
    cls = type(name, (base,), {"__slots__": (), "__repr__": _repr, "__new__": __new__,
                               "__module__": __name__})
    setattr(module, name, cls)
    return cls
