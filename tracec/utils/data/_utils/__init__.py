"""``torch.utils.data._utils``: the private path under which PyTorch keeps
its DataLoader helpers, which libraries import from (opacus:
``torch.utils.data._utils.collate.default_collate``)."""
from tracec.utils.data._utils import collate  # noqa: F401

__all__ = ["collate"]
