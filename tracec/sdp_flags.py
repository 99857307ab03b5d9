"""Which scaled-dot-product-attention kernels may run: PyTorch's switches
(``torch.backends.cuda.enable_math_sdp`` ..., the ``sdp_kernel`` and
``torch.nn.attention.sdpa_kernel`` context managers), read by
``F.scaled_dot_product_attention``.  tracec has one attention composite,
which counts as both the math and the (CPU) flash kernel, as PyTorch's CPU
build has both: with neither enabled attention raises as PyTorch's does.
Imports nothing (the frontend and the ``torch.backends.cuda`` namespace
share this state)."""
from __future__ import annotations

import contextlib

#: Kernel -> enabled (PyTorch's defaults: all).
STATE = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True,
         "overrideable": True}

NO_KERNEL = ("No viable backend for scaled_dot_product_attention was found. This is likely "
             "due to turning off both the math kernel and the fused kernels.")


def runnable() -> bool:
    """Whether a kernel tracec has on this device is enabled."""
    return STATE["math"] or STATE["flash"]


def flash_sdp_enabled() -> bool:
    return STATE["flash"]


def enable_flash_sdp(enabled: bool) -> None:
    STATE["flash"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    return STATE["mem_efficient"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    STATE["mem_efficient"] = bool(enabled)


def math_sdp_enabled() -> bool:
    return STATE["math"]


def enable_math_sdp(enabled: bool) -> None:
    STATE["math"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    return STATE["cudnn"]


def enable_cudnn_sdp(enabled: bool) -> None:
    STATE["cudnn"] = bool(enabled)


@contextlib.contextmanager
def only(enabled: dict):
    """The switches set to ``enabled`` (kernel -> bool) inside the block."""
    before = dict(STATE)
    STATE.update(enabled)
    try:
        yield
    finally:
        STATE.clear()
        STATE.update(before)


def sdp_kernel(enable_flash=True, enable_math=True, enable_mem_efficient=True,
               enable_cudnn=True):
    """The (deprecated) context manager selecting attention kernels."""
    return only({"flash": bool(enable_flash), "math": bool(enable_math),
                 "mem_efficient": bool(enable_mem_efficient), "cudnn": bool(enable_cudnn)})
