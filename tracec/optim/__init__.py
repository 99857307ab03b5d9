"""``tracec.optim``: PyTorch's optimizers (``SGD``, ``Adam``, ``AdamW``) and
learning-rate schedulers, written with tracec tensor ops and in-place
methods so that ``tracec.compile`` can trace ``opt.step()``."""
from tracec.optim import lr_scheduler  # noqa: F401
from tracec.optim.adam import Adam, AdamW
from tracec.optim.optimizer import Optimizer
from tracec.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
