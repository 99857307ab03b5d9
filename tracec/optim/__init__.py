"""``tracec.optim``: PyTorch's optimizers (``SGD``, ``Adam``, ``AdamW``,
``RMSprop``, ``Adagrad``, ``Adadelta``, ``Adamax``, ``NAdam``, ``RAdam``,
``ASGD``, ``Rprop``, ``SparseAdam``, ``Adafactor``, ``Muon``, ``LBFGS``) and learning-rate
schedulers, written with tracec tensor ops and in-place methods so that
``tracec.compile`` can trace ``opt.step()`` (``LBFGS`` runs eagerly: see
``tracec.optim.lbfgs``)."""
from tracec.optim import lr_scheduler, swa_utils  # noqa: F401
from tracec.optim.adadelta import Adadelta
from tracec.optim.adafactor import Adafactor
from tracec.optim.adagrad import Adagrad
from tracec.optim.adam import Adam, AdamW
from tracec.optim.adam_variants import Adamax, NAdam, RAdam
from tracec.optim.asgd import ASGD
from tracec.optim.lbfgs import LBFGS
from tracec.optim.muon import Muon
from tracec.optim.optimizer import Optimizer
from tracec.optim.rmsprop import RMSprop
from tracec.optim.rprop import Rprop
from tracec.optim.sgd import SGD
from tracec.optim.sparse_adam import SparseAdam

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "LBFGS",
           "Adamax", "NAdam", "RAdam", "ASGD", "Rprop", "SparseAdam", "Adafactor", "Muon", "lr_scheduler", "swa_utils"]
