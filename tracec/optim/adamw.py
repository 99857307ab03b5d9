"""``tracec.optim.adamw`` (PyTorch's module name): ``AdamW`` lives in ``adam``."""
from tracec.optim.adam import AdamW

__all__ = ["AdamW"]
