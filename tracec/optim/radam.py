"""``torch.optim.radam``: ``from torch.optim.radam import RAdam`` (the class is
defined with its family in ``tracec/optim/adam_variants.py``)."""
from tracec.optim.adam_variants import RAdam

__all__ = ["RAdam"]
