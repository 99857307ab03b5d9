"""``nn.SyncBatchNorm``: batch norm whose statistics PyTorch reduces across
the ranks of a process group while training.

Invariants (PyTorch's): without an initialized process group it is
``BatchNorm`` over any input of at least 2 dims (with the same parameters,
buffers and state-dict keys); with one, training on a CPU tensor raises
PyTorch's ``ValueError``, as torch does; on "cuda" tracec does not reduce
the statistics and says so.  ``convert_sync_batchnorm`` swaps every
``BatchNorm*d`` of a module for one, sharing its parameters and buffers.
"""
from __future__ import annotations

from tracec.nn.modules.normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, _NormBase

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_NormBase):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, process_group=None,
                 device=None, dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input) -> None:
        if input.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {input.ndim}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        if input.shape[1] == 0:
            raise ValueError("SyncBatchNorm number of input channels should be non-zero")
        from tracec import distributed
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        if bn_training and self.training and distributed.is_initialized():
            if input.device.type != "cuda":
                raise ValueError("SyncBatchNorm expected input tensor to be on GPU or XPU or "
                                 "privateuseone")
            if distributed.get_world_size() > 1:
                raise NotImplementedError("SyncBatchNorm: tracec does not reduce batch "
                                          "statistics across ranks; use BatchNorm (per-rank "
                                          "statistics) or a single process")
        return super().forward(input)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        out = module
        if isinstance(module, (BatchNorm1d, BatchNorm2d, BatchNorm3d)):
            out = SyncBatchNorm(module.num_features, module.eps, module.momentum, module.affine,
                                module.track_running_stats, process_group,
                                bias=module.bias is not None)
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            out.running_mean = module.running_mean
            out.running_var = module.running_var
            out.num_batches_tracked = module.num_batches_tracked
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
