"""``torch.optim.nadam``: ``from torch.optim.nadam import NAdam`` (the class is
defined with its family in ``tracec/optim/adam_variants.py``)."""
from tracec.optim.adam_variants import NAdam

__all__ = ["NAdam"]
