"""``torch.optim.adamax``: ``from torch.optim.adamax import Adamax`` (the class is
defined with its family in ``tracec/optim/adam_variants.py``)."""
from tracec.optim.adam_variants import Adamax

__all__ = ["Adamax"]
