"""``DataParallel`` and ``data_parallel`` on one device: tracec runs a
module on the device its tensors live on, so both call the wrapped module
directly (PyTorch does the same when it finds no GPUs).  The wrapper keeps
PyTorch's ``module.`` prefix in state dicts and its attributes."""
from __future__ import annotations

from tracec.nn.modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


class DataParallel(Module):
    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        self.module = module
        self.dim = dim
        self.device_ids = [] if device_ids is None else list(device_ids)
        self.output_device = output_device if output_device is not None else (
            self.device_ids[0] if self.device_ids else None)

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim: int = 0,
                  module_kwargs=None):
    """``module(*inputs, **module_kwargs)`` (one device: nothing to scatter)."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))
