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
    """The return type ``name`` with ``fields`` (made once per name)."""
    module = sys.modules[__name__]
    existing = getattr(module, name, None)
    if existing is not None:
        return existing
    cls = type(name, (namedtuple(name, fields),), {"__slots__": (), "__repr__": _repr,
                                                     "__module__": __name__})
    setattr(module, name, cls)
    return cls
