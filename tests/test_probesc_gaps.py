"""Gaps found by probing autograd graphs, strides and layouts, torch.func
and neighbouring APIs, each checked against torch 2.13 in the same process."""
import torch

import tracec


def _layouts(lib):
    cl = lib.channels_last
    out = [lib.empty(0, 3).stride(), lib.zeros(2, 0, 3).stride(), lib.empty(3, 0).stride(),
           lib.randn(8, 1, 3, 3).to(memory_format=cl).stride(),
           lib.randn(8, 3, 1, 1).to(memory_format=cl).stride(),
           lib.randn(8, 1, 3, 3).contiguous(memory_format=cl).stride(),
           lib.empty(2, 1, 4, 4, memory_format=cl).stride(),
           lib.empty_like(lib.empty(2, 3, 1, 1, memory_format=cl)).stride(),
           lib.zeros_like(lib.empty(2, 1, 4, 4, memory_format=cl)).stride(),
           lib.empty(2, 1, 4, 4, memory_format=cl).clone().stride(),
           lib.randn(2, 1, 4, 4).clone(memory_format=cl).stride(),
           lib.nn.Conv2d(1, 8, 3).to(memory_format=cl).weight.stride(),
           lib.randn(2, 1, 2, 1, 2).to(memory_format=lib.channels_last_3d).stride()]
    t = lib.randn(3, 4).t()
    u = t.to(memory_format=lib.contiguous_format)
    out += [u is t, u.stride()]
    return out


def test_empty_and_size_one_strides_follow_torch():
    """An empty tensor's strides are its dense layout's ((0, 0) before:
    NumPy 2 zeroes them); a channels-last tensor made by ``empty``, ``to``,
    ``clone``, ``*_like`` or ``Module.to`` has PyTorch's strides at its
    size-one dimensions (row-major ones before); ``to(memory_format=)``
    aliases a tensor whose suggested format is the one asked for, as
    PyTorch's (a transposed matrix stays transposed)."""
    assert _layouts(tracec) == _layouts(torch)
