"""``Flatten`` and ``Unflatten``."""
from __future__ import annotations

from tracec import shape_ops as S
from tracec.nn.modules.module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return S.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        sizes = list(self.unflattened_size)
        if -1 in sizes:
            rest = 1
            for s in sizes:
                if s != -1:
                    rest *= s
            sizes[sizes.index(-1)] = input.shape[self.dim] // rest
        return S.unflatten(input, self.dim, tuple(sizes))

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
