"""``torch.nn.attention``: ``SDPBackend`` and ``sdpa_kernel``, the context
manager choosing which kernels ``F.scaled_dot_product_attention`` may use
(``tracec.sdp_flags``).  tracec's one attention composite stands for the
math and the CPU flash kernels: a block that enables neither makes
attention raise PyTorch's error; results never depend on the choice."""
from __future__ import annotations

import contextlib
import enum

from tracec import sdp_flags

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

#: PyTorch's switch for warnings on why fused kernels were not used.
WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(enum.IntEnum):
    """The attention kernels, with PyTorch's values."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __str__(self):      # PyTorch's (IntEnum prints the number since 3.11)
        return f"SDPBackend.{self.name}"

    __format__ = object.__format__


_SWITCH = {SDPBackend.MATH: "math", SDPBackend.FLASH_ATTENTION: "flash",
           SDPBackend.EFFICIENT_ATTENTION: "mem_efficient",
           SDPBackend.CUDNN_ATTENTION: "cudnn", SDPBackend.OVERRIDEABLE: "overrideable"}


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Inside the block, only ``backends`` (an ``SDPBackend`` or a list of
    them) may run ``scaled_dot_product_attention``; the switches are
    restored after.  ``set_priority`` orders them (one kernel here)."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    if not isinstance(backends, (list, tuple)) or not all(
            isinstance(b, SDPBackend) for b in backends):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of "
                             f"SDPBackend instances, got {type(backends).__name__}")
    with sdp_flags.only({name: b in backends for b, name in _SWITCH.items()}):
        yield
