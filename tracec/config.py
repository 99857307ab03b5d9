"""PyTorch's constants and global configuration: ``pi e inf nan newaxis``,
``finfo iinfo promote_types can_cast is_complex is_nonzero is_same_size
typename``, thread counts, determinism and
matmul-precision flags, ``inference_mode``, the default device, anomaly
detection and ``set_warn_always``.

Invariant: a setting either changes what tracec does or reports honestly
that it does not: thread counts set ``TRACEC_NUM_THREADS``, which the cpu
backend reads when it loads a compiled function (functions loaded before keep
theirs); ``set_flush_denormal``
returns False (tracec cannot switch the FPU mode, as PyTorch answers on a CPU
without the feature); the determinism, precision, anomaly and warn flags are
recorded and reported back (tracec's kernels are deterministic and compute
float32 matmuls in float32, so "highest" is what they always do).
"""
from __future__ import annotations

import contextlib
import functools
import math
import os

import numpy as np

from tracec import autograd, graph
from tracec import dtypes as dt
from tracec.device import device as _device
from tracec.tensor import INFERENCE, Tensor
from tracec.tensor_type import typename  # noqa: F401  (torch.typename)

__all__ = ["pi", "e", "inf", "nan", "newaxis", "finfo", "iinfo", "promote_types", "can_cast",
           "is_complex", "is_nonzero", "is_same_size", "typename",
           "set_num_threads", "get_num_threads", "set_num_interop_threads",
           "get_num_interop_threads", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_float32_matmul_precision",
           "get_float32_matmul_precision", "set_flush_denormal", "inference_mode",
           "is_inference_mode_enabled", "set_default_device", "get_default_device",
           "set_warn_always", "is_warn_always_enabled", "set_anomaly_enabled",
           "is_anomaly_enabled", "detect_anomaly", "set_detect_anomaly",
           "set_deterministic_debug_mode", "get_deterministic_debug_mode",
           "is_anomaly_check_nan_enabled"]

pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
newaxis = None


# --- dtype information ------------------------------------------------------------------

def _dtype_arg(type, name):  # noqa: A002
    if type is None:
        return dt.get_default_dtype()
    try:
        return dt.to_dtype(type)
    except (TypeError, ValueError, KeyError):
        raise TypeError(f"{name}(): argument 'type' must be torch.dtype, not "
                        f"{type.__class__.__name__}") from None


class finfo:  # noqa: N801 - PyTorch's name
    """Machine limits of a float dtype: ``bits eps max min tiny smallest_normal
    resolution dtype``."""

    def __init__(self, type=None):  # noqa: A002
        if isinstance(type, dt.NoTensorDType):      # (the 8-bit floats: PyTorch's values)
            if type.finfo is None:      # (only its width is known: PyTorch's)
                self.bits, self._unknown = 8, type.name[0].upper() + type.name[1:]
                return
            self.dtype = type.name
            self.bits, self.eps, self.max, self.min, self.tiny = type.finfo
            self.smallest_normal, self.resolution = self.tiny, 1.0
            return
        d = dt.real_of(_dtype_arg(type, "finfo"))   # a complex type's: its components'
        if not d.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use "
                            "torch.iinfo to handle 'torch.finfo'")
        self.dtype = d.name
        if d is dt.bfloat16:
            self.bits, self.eps, self.max = 16, 2.0 ** -7, 3.3895313892515355e38
            self.tiny, self.resolution = 2.0 ** -126, 0.01
        else:
            f = np.finfo(d.np)
            self.bits, self.eps, self.max = int(f.bits), float(f.eps), float(f.max)
            self.tiny, self.resolution = float(f.tiny), 10.0 ** -int(f.precision)
        self.min = -self.max
        self.smallest_normal = self.tiny

    def __getattr__(self, name):
        # a NoTensorDType without limits (float4_e2m1fn_x2): PyTorch's refusal
        unknown = self.__dict__.get("_unknown")
        if unknown is None or name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f'"{"epsilon" if name == "eps" else name}" not implemented '
                                  f"for '{unknown}'")

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:  # noqa: N801
    """Machine limits of an integer dtype: ``bits max min dtype``."""

    def __init__(self, type):  # noqa: A002
        d = _dtype_arg(type, "iinfo")
        if d.is_floating_point:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo "
                            "to handle 'torch.iinfo'")
        if d is dt.bool_:
            raise TypeError(f"{d} is not supported by torch.iinfo")
        self.dtype = d.name
        i = np.iinfo(d.np)
        self.bits, self.min, self.max = int(i.bits), int(i.min), int(i.max)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def promote_types(type1, type2):
    return dt.promote_types(dt.to_dtype(type1), dt.to_dtype(type2))


def can_cast(from_, to):
    return dt.can_cast(dt.to_dtype(from_), dt.to_dtype(to))


def is_complex(input) -> bool:  # noqa: A002
    return input.dtype.category == 3


def is_nonzero(input) -> bool:  # noqa: A002
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(input)


def is_same_size(input, other) -> bool:  # noqa: A002
    return tuple(input.shape) == tuple(other.shape)


# --- threads -------------------------------------------------------------------------------

_THREADS_ENV = "TRACEC_NUM_THREADS"
_interop = [0]


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def set_num_threads(n: int) -> None:
    """Threads of the compiled cpu kernels (``TRACEC_NUM_THREADS``)."""
    if not isinstance(n, int) or n <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    os.environ[_THREADS_ENV] = str(n)


def get_num_threads() -> int:
    env = os.environ.get(_THREADS_ENV)
    return max(1, int(env)) if env else _cores()


def set_num_interop_threads(n: int) -> None:
    if not isinstance(n, int) or n <= 0:
        raise RuntimeError("Expected positive number of threads")
    if _interop[0]:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work "
                           "has started or set_num_interop_threads called")
    _interop[0] = n


def get_num_interop_threads() -> int:
    return _interop[0] or _cores()


# --- flags ------------------------------------------------------------------------------------

_flags = {"deterministic": False, "warn_only": False, "matmul_precision": "highest",
          "warn_always": False, "anomaly": False, "anomaly_check_nan": True,
          "inference": False, "default_device": "cpu"}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    _flags["deterministic"] = bool(mode)
    _flags["warn_only"] = bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _flags["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _flags["warn_only"]


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode) -> None:
    """0/"default", 1/"warn" or 2/"error": ``use_deterministic_algorithms``
    off, on with warn_only, on (tracec's kernels are deterministic)."""
    mode = _DEBUG_MODES.get(debug_mode, debug_mode)
    if mode not in (0, 1, 2):
        raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, "
                           f"`error`, but got {debug_mode}")
    use_deterministic_algorithms(mode > 0, warn_only=mode == 1)


def get_deterministic_debug_mode() -> int:
    if not _flags["deterministic"]:
        return 0
    return 1 if _flags["warn_only"] else 2


def set_float32_matmul_precision(precision: str) -> None:
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision}: expected 'highest', 'high' or "
                           "'medium'")
    _flags["matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    return _flags["matmul_precision"]


def set_flush_denormal(mode: bool) -> bool:
    return False


def set_warn_always(b: bool) -> None:
    _flags["warn_always"] = bool(b)


def is_warn_always_enabled() -> bool:
    return _flags["warn_always"]


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    _flags["anomaly"] = bool(enabled)
    _flags["anomaly_check_nan"] = bool(check_nan)


def is_anomaly_enabled() -> bool:
    return _flags["anomaly"]


def is_anomaly_check_nan_enabled() -> bool:
    return _flags["anomaly_check_nan"]


class _FlagContext(contextlib.ContextDecorator):
    def __init__(self, key, value):
        self.key, self.value = key, value

    def __enter__(self):
        self.prev = _flags[self.key]
        _flags[self.key] = self.value
        return self

    def __exit__(self, *exc):
        _flags[self.key] = self.prev
        return False


class detect_anomaly(_FlagContext):  # noqa: N801
    """Accepted as in PyTorch: records the flag (tracec does not trace the
    forward call stacks of failing backward nodes)."""

    def __init__(self, check_nan: bool = True):
        super().__init__("anomaly", True)
        self.check_nan = bool(check_nan)
        import warnings
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self):
        self.prev_nan = _flags["anomaly_check_nan"]
        _flags["anomaly_check_nan"] = self.check_nan
        return super().__enter__()

    def __exit__(self, *exc):
        _flags["anomaly_check_nan"] = self.prev_nan
        return super().__exit__(*exc)


class set_detect_anomaly:  # noqa: N801
    """PyTorch's: sets both flags when made (so a bare call switches anomaly
    detection on or off) and, as a context manager, puts back on exit the
    flags it found when made."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev, self.prev_check_nan = _flags["anomaly"], _flags["anomaly_check_nan"]
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc):
        set_anomaly_enabled(self.prev, self.prev_check_nan)
        return False


class inference_mode:  # noqa: N801
    """``with inference_mode():`` / ``@inference_mode()``: no autograd
    recording inside (as ``no_grad``); ``mode=False`` leaves grad mode as is."""

    def __new__(cls, mode=True):
        if callable(mode):   # @inference_mode without parentheses
            return cls(True)(mode)
        return super().__new__(cls)

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def __enter__(self):
        self.prev = (graph.is_grad_enabled(), _flags["inference"])
        if self.mode:
            graph._set_grad(False)
        _flags["inference"] = INFERENCE[0] = self.mode   # tensors made now: inference tensors
        return self

    def __exit__(self, *exc):
        graph._set_grad(self.prev[0])
        _flags["inference"] = INFERENCE[0] = self.prev[1]
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            with inference_mode(self.mode):
                return fn(*a, **k)
        return wrapper

    def clone(self):
        return inference_mode(self.mode)


def is_inference_mode_enabled() -> bool:
    return _flags["inference"]


def set_default_device(device) -> None:
    from tracec.device import DEFAULT
    d = "cpu" if device is None else str(_device(device) if not isinstance(device, _device)
                                         else device)
    if d.split(":")[0] not in ("cpu", "meta"):
        raise RuntimeError(f"set_default_device({d!r}): tracec's factory functions create "
                           "cpu tensors only (and meta ones); move tensors with .to(device) "
                           "instead")
    _flags["default_device"] = d
    DEFAULT[0] = d.split(":")[0]


def get_default_device():
    from tracec.device import DEFAULT
    return _device(_flags["default_device"] if len(DEFAULT) == 1 else DEFAULT[-1])


Tensor.is_complex = is_complex
Tensor.is_nonzero = is_nonzero
Tensor.is_same_size = is_same_size
autograd.detect_anomaly = detect_anomaly
autograd.set_detect_anomaly = set_detect_anomaly
autograd.inference_mode = inference_mode
graph.anomaly_enabled = is_anomaly_enabled


# --- build facts and error types ----------------------------------------------------------
# What a CPU build of PyTorch reports, for scripts that branch on them.
has_lapack = True        # tracec.linalg's factorizations (NumPy's LAPACK)
has_mkl = False
has_openmp = True        # tracec's CPU kernels run on a thread pool
has_spectral = False     # no torch.fft


def compiled_with_cxx11_abi() -> bool:
    return True


def is_storage(obj) -> bool:
    """tracec tensors own NumPy storage, not PyTorch Storage objects."""
    return False


class OutOfMemoryError(RuntimeError):
    """``torch.OutOfMemoryError`` (``torch.cuda.OutOfMemoryError``): what
    scripts catch around large allocations."""


class AcceleratorError(RuntimeError):
    """``torch.AcceleratorError``."""


__all__ += ["has_lapack", "has_mkl", "has_openmp", "has_spectral", "compiled_with_cxx11_abi",
            "is_storage", "OutOfMemoryError", "AcceleratorError"]
