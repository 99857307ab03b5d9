"""``torch.ao.nn.quantized.dynamic``: ``Linear`` and ``LSTM``."""
from tracec.ao.nn.quantized.dynamic.linear import Linear  # noqa: F401
from tracec.ao.nn.quantized.dynamic.rnn import LSTM  # noqa: F401

__all__ = ["Linear", "LSTM"]
