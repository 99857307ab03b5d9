"""``tracec.optim``: PyTorch's optimizers (``SGD``, ``Adam``, ``AdamW``,
``RMSprop``, ``Adagrad``, ``Adadelta``, ``LBFGS``) and learning-rate
schedulers, written with tracec tensor ops and in-place methods so that
``tracec.compile`` can trace ``opt.step()`` (``LBFGS`` runs eagerly: see
``tracec.optim.lbfgs``)."""
from tracec.optim import lr_scheduler  # noqa: F401
from tracec.optim.adadelta import Adadelta
from tracec.optim.adagrad import Adagrad
from tracec.optim.adam import Adam, AdamW
from tracec.optim.lbfgs import LBFGS
from tracec.optim.optimizer import Optimizer
from tracec.optim.rmsprop import RMSprop
from tracec.optim.sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "LBFGS",
           "lr_scheduler"]
