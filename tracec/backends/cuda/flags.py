"""``tracec.backends.cuda``'s PyTorch half: the flags scripts set for CUDA math
(``torch.backends.cuda.matmul.allow_tf32 = True``, the scaled-dot-product
attention kernel switches).  tracec's GPU kernels compute float32 matmuls in
float32, so the matmul flags are recorded, reported back, and change
nothing; the attention switches are ``tracec.sdp_flags``' (attention with
none of its kernels enabled raises, as PyTorch's does).  Imports only that
base module (the package re-exports them beside the compiler backend)."""
from __future__ import annotations

from tracec.sdp_flags import (  # noqa: F401
    cudnn_sdp_enabled, enable_cudnn_sdp, enable_flash_sdp, enable_math_sdp,
    enable_mem_efficient_sdp, flash_sdp_enabled, math_sdp_enabled, mem_efficient_sdp_enabled,
    sdp_kernel)


class _MatmulFlags:
    """``torch.backends.cuda.matmul``: settable attributes, PyTorch's defaults."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


matmul = _MatmulFlags()


def is_built() -> bool:
    return False


def preferred_linalg_library(backend=None):
    return "default"
