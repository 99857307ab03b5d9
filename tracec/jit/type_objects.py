"""``torch.Type`` / ``torch.TensorType``: TorchScript's type objects, which
public code imports from ``torch`` to annotate with (open_clip's
``attention_mask: TensorType``).  tracec runs such code as Python, so they
are plain classes; ``TensorType.get()`` is the one TensorType instance,
which prints ``Tensor`` as PyTorch's does."""
from __future__ import annotations


class Type:
    """The base of TorchScript's types (``torch.Type``)."""

    def __repr__(self) -> str:
        return self.annotation_str

    __str__ = __repr__


class TensorType(Type):
    """TorchScript's type of a tensor (``torch.TensorType``)."""

    annotation_str = "Tensor"
    _instance: "TensorType | None" = None

    @classmethod
    def get(cls) -> "TensorType":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance


Type.__module__ = TensorType.__module__ = "torch"
