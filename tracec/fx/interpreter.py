"""``torch.fx.interpreter``: ``Interpreter`` and ``Transformer`` (``tracec.fx``)."""
from tracec.fx import Interpreter, Transformer  # noqa: F401

__all__ = ["Interpreter", "Transformer"]
