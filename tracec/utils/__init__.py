"""``tracec.utils``: PyTorch's ``torch.utils`` namespace (data loading)."""
from tracec.utils import data  # noqa: F401
