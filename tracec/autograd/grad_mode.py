"""``torch.autograd.grad_mode``: the gradient-mode context managers."""
from __future__ import annotations

from tracec.config import inference_mode  # noqa: F401
from tracec.graph import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled"]
