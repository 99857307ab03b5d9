"""``torch.autocast`` on the CPU: PyTorch's automatic mixed precision.

Inside ``autocast(device_type="cpu", dtype=torch.bfloat16)`` (the default
dtype; float16 also accepted) the ops of PyTorch's CPU "lower precision"
list -- matmul, mm, bmm, addmm, baddbmm, linear, conv and conv_transpose --
cast their floating inputs to that dtype and return it; the losses of its
"fp32" list (cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss,
huber_loss, binary_cross_entropy(_with_logits), kl_div) compute in float32.
Everything else runs in the dtypes it is given, as in PyTorch.
``device_type="cuda"`` without a GPU warns and disables itself, as PyTorch
does.  PyTorch's state functions (``set_autocast_enabled``,
``set_autocast_dtype``, the nesting counter...) read and write the same
state.  Invariants: ``ACTIVE`` is empty while CPU autocast is off (outside
every enabled region, or after ``set_autocast_enabled("cpu", False)``), so
the checks cost one list test; the state is part of a compiled
function's call key (a trace made inside autocast is never reused outside
it).
"""
from __future__ import annotations

import functools
import warnings

from tracec import dtypes as dt

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "lower_precision",
           "fp32_inputs", "ACTIVE", "state", "set_autocast_enabled", "set_autocast_dtype",
           "set_autocast_cpu_enabled", "set_autocast_cpu_dtype", "set_autocast_gpu_dtype",
           "get_autocast_gpu_dtype", "autocast_increment_nesting", "autocast_decrement_nesting",
           "clear_autocast_cache", "is_autocast_cache_enabled", "set_autocast_cache_enabled"]

# The CPU's autocast state: [its lower-precision dtype] while enabled, else [].
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
        # (no dtype: the device's current setting, set_autocast_dtype's)
        self.fast_dtype = dt.to_dtype(dtype) if dtype is not None else (
            _DTYPE.get(device_type, dt.float16))
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
        # PyTorch's: save the device's (enabled, dtype), set this region's,
        # restore on exit; a disabled CPU region inside an enabled one turns
        # it off until it exits.
        self._prev = (is_autocast_enabled(self.device), get_autocast_dtype(self.device))
        if self.device in ("cpu", "cuda"):
            set_autocast_dtype(self.device, self.fast_dtype)
            set_autocast_enabled(self.device, self._enabled)
        autocast_increment_nesting()
        return self

    def __exit__(self, *exc):
        autocast_decrement_nesting()
        if self.device in ("cpu", "cuda"):
            set_autocast_enabled(self.device, self._prev[0])
            set_autocast_dtype(self.device, self._prev[1])
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)
        return wrapper


#: each device's autocast dtype setting (``set_autocast_dtype``), kept
#: while autocast is off; for "cpu", ``ACTIVE`` holds it while on
_DTYPE = {"cpu": dt.bfloat16, "cuda": dt.float16, "xpu": dt.bfloat16, "ipu": dt.float16,
          "xla": dt.bfloat16, "hpu": dt.bfloat16, "mps": dt.float16}
#: the enabled flags of the devices other than the CPU (state only: no op
#: here runs on them), and the cache flag and nesting depth PyTorch keeps
_ENABLED: dict = {}
_CACHE = [True]
_NESTING = [0]
_DEVICES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
            "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
            "privateuseone")


def _device(device_type) -> str:
    if not isinstance(device_type, str) or device_type.split(":")[0] not in _DEVICES:
        raise RuntimeError(f"Expected one of {', '.join(_DEVICES)} device type at start of "
                           f"device string: {device_type}")
    return device_type.split(":")[0]


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` (PyTorch's default, None,
    asks about CUDA)."""
    if device_type is None:
        return _ENABLED.get("cuda", False)
    device_type = _device(device_type)
    return bool(ACTIVE) if device_type == "cpu" else _ENABLED.get(device_type, False)


def get_autocast_dtype(device_type: str = "cpu"):
    device_type = _device(device_type)
    if device_type == "cpu" and ACTIVE:
        return ACTIVE[-1]
    return _DTYPE.get(device_type, dt.float16)


def set_autocast_enabled(device_type, enabled=None) -> None:
    """``set_autocast_enabled(device_type, enabled)``, or PyTorch's older
    ``set_autocast_enabled(enabled)`` (CUDA).  On the CPU it switches the
    casts of the ops listed above; elsewhere it records the flag."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    device_type = _device(device_type)
    if device_type != "cpu":
        _ENABLED[device_type] = bool(enabled)
    elif enabled:
        ACTIVE[:] = [_DTYPE["cpu"]]
    else:
        ACTIVE.clear()


def set_autocast_dtype(device_type: str, dtype) -> None:
    device_type = _device(device_type)
    _DTYPE[device_type] = dtype
    if device_type == "cpu" and ACTIVE:
        ACTIVE[-1] = dtype


def set_autocast_cpu_enabled(enabled: bool) -> None:
    set_autocast_enabled("cpu", enabled)


def set_autocast_cpu_dtype(dtype) -> None:
    set_autocast_dtype("cpu", dtype)


def set_autocast_gpu_dtype(dtype) -> None:
    set_autocast_dtype("cuda", dtype)


def get_autocast_gpu_dtype():
    return get_autocast_dtype("cuda")


def autocast_increment_nesting() -> int:
    _NESTING[0] += 1
    return _NESTING[0]


def autocast_decrement_nesting() -> int:
    _NESTING[0] -= 1
    return _NESTING[0]


def clear_autocast_cache() -> None:
    """PyTorch drops the casts of weights it cached inside a region; tracec
    caches none, so there is nothing to drop."""


def is_autocast_cache_enabled() -> bool:
    return _CACHE[0]


def set_autocast_cache_enabled(enabled: bool) -> None:
    _CACHE[0] = bool(enabled)


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
