"""``torch.autocast`` on the CPU: PyTorch's automatic mixed precision.

Inside ``autocast(device_type="cpu", dtype=torch.bfloat16)`` (the default
dtype; float16 also accepted) the ops of PyTorch's CPU "lower precision"
list -- matmul, mm, bmm, addmm, baddbmm, linear, conv and conv_transpose --
cast their floating inputs to that dtype and return it; the losses of its
"fp32" list (cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss,
huber_loss, binary_cross_entropy(_with_logits), kl_div) compute in float32.
Everything else runs in the dtypes it is given, as in PyTorch.
``device_type="cuda"`` without a GPU warns and disables itself, as PyTorch
does.  Invariants: ``ACTIVE`` is empty outside every enabled autocast
region, so the checks cost one list test; the state is part of a compiled
function's call key (a trace made inside autocast is never reused outside
it).
"""
from __future__ import annotations

import functools
import warnings

from tracec import dtypes as dt

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "lower_precision",
           "fp32_inputs", "ACTIVE", "state"]

# The stack of enabled regions' lower-precision dtypes (innermost last).
ACTIVE: list = []
_SUPPORTED = {"cpu": (dt.bfloat16, dt.float16)}


def state() -> tuple:
    """What a compiled function's call key records: the active dtype or ()."""
    return (ACTIVE[-1].name,) if ACTIVE else ()


class autocast:  # noqa: N801 - PyTorch's name
    """``torch.autocast(device_type, dtype=None, enabled=True,
    cache_enabled=None)``: a context manager and a decorator."""

    def __init__(self, device_type: str, dtype=None, enabled: bool = True,
                 cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device = device_type
        self.fast_dtype = dt.to_dtype(dtype) if dtype is not None else (
            dt.bfloat16 if device_type == "cpu" else dt.float16)
        self._enabled = bool(enabled)
        if device_type == "cuda" and self._enabled:
            from tracec.cuda import is_available
            if not is_available():
                warnings.warn("CUDA is not available or torch_xla is imported. Disabling "
                              "autocast.", stacklevel=2)
                self._enabled = False
        elif device_type == "cpu" and self._enabled and \
                self.fast_dtype not in _SUPPORTED["cpu"]:
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling "
                          "autocast.\nCPU Autocast only supports dtype of torch.bfloat16, "
                          "torch.float16 currently.", stacklevel=2)
            self._enabled = False
        elif device_type not in ("cpu", "cuda") and self._enabled:
            raise RuntimeError(f"User specified an unsupported autocast device_type "
                               f"'{device_type}'")

    def __enter__(self):
        # A disabled CPU region turns an enclosing one off until it exits
        # (PyTorch's autocast(enabled=False) inside autocast): ACTIVE is
        # emptied and given back on exit.
        self._pushed = self._enabled and self.device == "cpu"
        self._saved = None
        if self._pushed:
            ACTIVE.append(self.fast_dtype)
        elif self.device == "cpu" and ACTIVE:
            self._saved = ACTIVE[:]
            ACTIVE.clear()
        return self

    def __exit__(self, *exc):
        if self._pushed:
            ACTIVE.pop()
        elif self._saved is not None:
            ACTIVE[:] = self._saved
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)
        return wrapper


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` (PyTorch's default, None,
    asks about CUDA, which is never on here)."""
    return bool(ACTIVE) and device_type == "cpu"


def get_autocast_dtype(device_type: str = "cpu"):
    return ACTIVE[-1] if ACTIVE else (dt.bfloat16 if device_type == "cpu" else dt.float16)


def lower_precision(*xs):
    """``xs`` with floating tensors cast to the active autocast dtype;
    float64 ones are left as they are (PyTorch's ``is_eligible`` excludes
    Double, so a float64 input meets a lower-precision weight and fails)."""
    d = ACTIVE[-1]
    from tracec.tensor import Tensor
    return tuple(x.to(d) if isinstance(x, Tensor) and x.dtype.is_floating_point
                 and x.dtype is not d and x.dtype is not dt.float64 else x for x in xs)


def fp32_inputs(fn):
    """``fn`` (a loss) with its floating tensor arguments cast to float32
    inside an autocast region."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if ACTIVE:
            from tracec.tensor import Tensor

            def up(x):
                return x.float() if isinstance(x, Tensor) and x.dtype in (
                    dt.bfloat16, dt.float16) else x
            args = tuple(up(a) for a in args)
            kwargs = {k: up(v) for k, v in kwargs.items()}
        return fn(*args, **kwargs)
    return wrapper


def is_autocast_cpu_enabled() -> bool:
    """PyTorch's older spelling of ``is_autocast_enabled("cpu")``."""
    return is_autocast_enabled("cpu")


def get_autocast_cpu_dtype():
    return get_autocast_dtype("cpu")
