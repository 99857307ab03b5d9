"""``tracec.nn.utils.memory_format``: PyTorch's
``convert_conv2d_weight_memory_format`` / ``convert_conv3d_weight_memory_format``.

Invariant: the convolution weights (``Conv2d``/``ConvTranspose2d``, resp.
the 3-d ones) of the module tree get fresh data cloned with the requested
``memory_format``; values, shapes and Parameter identities are unchanged.
tracec's storage has one layout, so the format changes nothing observable
beyond that copy, as PyTorch's contract promises.
"""
from __future__ import annotations

from tracec.nn.modules.conv import Conv2d, Conv3d, ConvTranspose2d, ConvTranspose3d

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module, kinds, memory_format):
    if isinstance(module, kinds):
        module.weight.data = module.weight.detach().clone(memory_format=memory_format)
    for child in module.children():
        _convert(child, kinds, memory_format)
    return module


def convert_conv2d_weight_memory_format(module, memory_format):
    """Re-lay the weights of every 2-d (transposed) convolution in ``module``."""
    return _convert(module, (Conv2d, ConvTranspose2d), memory_format)


def convert_conv3d_weight_memory_format(module, memory_format):
    """Re-lay the weights of every 3-d (transposed) convolution in ``module``."""
    return _convert(module, (Conv3d, ConvTranspose3d), memory_format)
