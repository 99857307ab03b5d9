"""``torch.storage``: the storage classes (``from torch.storage import
UntypedStorage, TypedStorage``), which tracec defines with the tensor's
memory bookkeeping (``tracec.tensor_meta``)."""
from __future__ import annotations

from tracec.tensor_meta import TypedStorage, UntypedStorage

__all__ = ["TypedStorage", "UntypedStorage"]
