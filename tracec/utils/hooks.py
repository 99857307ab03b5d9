"""``torch.utils.hooks``: ``RemovableHandle`` (defined in
``tracec.removable_handle``, below the autograd engine, which returns it)."""
from tracec.removable_handle import RemovableHandle

__all__ = ["RemovableHandle"]
