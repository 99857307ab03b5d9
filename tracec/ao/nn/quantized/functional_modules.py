"""``torch.ao.nn.quantized.FloatFunctional``: tensor operations as a module
(``add cat mul add_relu add_scalar mul_scalar matmul``), so that quantization
can attach an observer to their outputs (``activation_post_process``, an
``nn.Identity`` until then).  Its ``forward`` is not meant to be called and
raises PyTorch's error; scalar operations bypass the observer, as in PyTorch.
"""
from __future__ import annotations

from tracec import functions, nn, shape_ops

__all__ = ["FloatFunctional"]


class FloatFunctional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.activation_post_process = nn.Identity()

    def forward(self, x):
        raise RuntimeError("FloatFunctional is not intended to use the "
                           + "'forward'. Please use the underlying operation")

    def add(self, x, y):
        return self.activation_post_process(functions.add(x, y))

    def add_scalar(self, x, y: float):
        return functions.add(x, y)

    def mul(self, x, y):
        return self.activation_post_process(functions.mul(x, y))

    def mul_scalar(self, x, y: float):
        return functions.mul(x, y)

    def cat(self, x, dim: int = 0):
        return self.activation_post_process(shape_ops.cat(x, dim=dim))

    def add_relu(self, x, y):
        return self.activation_post_process(nn.functional.relu(functions.add(x, y)))

    def matmul(self, x, y):
        return self.activation_post_process(functions.matmul(x, y))
