"""``Tensor.type()``: PyTorch's legacy tensor-type names.

``t.type()`` gives the name (``'torch.FloatTensor'``, ``'torch.cuda.LongTensor'``:
the strings PyTorch scripts compare against), ``t.type(dtype)`` /
``t.type('torch.LongTensor')`` converts, as ``t.to(dtype)`` does (``t``
itself when the type already matches).
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec.shape_ops import to
from tracec.tensor import Tensor

_NAMES = {dt.float32: "FloatTensor", dt.float64: "DoubleTensor", dt.float16: "HalfTensor",
          dt.bfloat16: "BFloat16Tensor", dt.int32: "IntTensor", dt.int64: "LongTensor",
          dt.bool_: "BoolTensor", dt.uint8: "ByteTensor", dt.int8: "CharTensor",
          dt.int16: "ShortTensor"}
#: dtypes PyTorch names in ``t.type()`` / ``torch.typename`` and accepts as
#: ``t.type('torch.ComplexFloatTensor')``, but has no legacy class for
#: (no ``torch.ComplexFloatTensor`` attribute): not in LEGACY
_TYPE_ONLY_NAMES = {dt.complex64: "ComplexFloatTensor", dt.complex128: "ComplexDoubleTensor",
                    dt.uint16: "UInt16Tensor", dt.uint32: "UInt32Tensor",
                    dt.uint64: "UInt64Tensor"}
_BY_NAME = {name: d for d, name in (*_NAMES.items(), *_TYPE_ONLY_NAMES.items())}


def type_name(t: Tensor) -> str:
    prefix = "torch.cuda." if t.device.type == "cuda" else "torch."
    return prefix + (_NAMES.get(t.dtype) or _TYPE_ONLY_NAMES[t.dtype])


def typename(obj) -> str:
    """``torch.typename``, also what PyTorch's error messages name objects by:
    a tensor's legacy type (``torch.FloatTensor``, a Parameter's too), a
    builtin's bare name, else the class with its module, tracec's own
    modules under the name tracec goes by (``torch.nn.modules.linear.Linear``
    once installed as torch)."""
    if isinstance(obj, Tensor):
        return type_name(obj)
    module, name = type(obj).__module__, type(obj).__qualname__
    if module in ("builtins", "__builtin__"):
        return name
    if module == "tracec" or module.startswith("tracec."):
        module = dt.PUBLIC_NAME[0] + module[len("tracec"):]
    return f"{module}.{name}"


def _parse(name: str):
    """``'torch.LongTensor'`` / ``'torch.cuda.LongTensor'`` -> (dtype, device or None)."""
    parts = name.split(".")
    if parts[:1] == ["torch"] and len(parts) in (2, 3) and parts[-1] in _BY_NAME \
            and (len(parts) == 2 or parts[1] == "cuda"):
        return _BY_NAME[parts[-1]], ("cuda" if len(parts) == 3 else "cpu")
    raise ValueError(f"invalid type: '{name}'")


class LegacyTensorType(type):
    """The type of ``torch.FloatTensor``, ``torch.LongTensor`` and friends
    (PyTorch's ``torch.tensortype``): calling one is the legacy constructor
    (``(data)`` or ``(sizes)``, always of its own dtype, whatever the
    default dtype), ``Tensor.type`` accepts one as the type, and
    ``isinstance(t, torch.FloatTensor)`` holds exactly for a CPU tensor of
    that dtype (a float64 or a CUDA tensor is not a ``torch.FloatTensor``)."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"

    def __subclasscheck__(cls, sub):
        return sub is cls

    def __call__(cls, *data, device=None):
        if device is not None:
            from tracec.device import to_device
            kind = to_device(device).type
            if kind != "cpu":
                raise RuntimeError(f"legacy constructor expects device type: cpu but device "
                                   f"type: {kind} was passed")
        if len(data) == 1 and isinstance(data[0], Tensor) and data[0].dtype is not cls.dtype:
            # (a tensor's own dtype only: the legacy constructors do not convert)
            raise TypeError(f"expected {_options(cls.dtype)} (got {_options(data[0].dtype)})")
        return Tensor(*data, dtype=cls.dtype)

    def __repr__(cls):
        return f"<class 'torch.{cls.__name__}'>"


def _options(d) -> str:
    """PyTorch's printed TensorOptions of a CPU tensor of dtype ``d``."""
    from tracec.shape_ops import _C_TYPE_NAMES
    name = _C_TYPE_NAMES.get(d.name, d.name)
    return (f"TensorOptions(dtype={name}, device=cpu, layout=Strided, requires_grad=false "
            f"(default), pinned_memory=false (default), memory_format=(nullopt))")


def _legacy(d):
    return LegacyTensorType(_NAMES[d], (), {"dtype": d, "legacy_dtype": d, "is_cuda": False,
                                             "is_sparse": False, "__module__": "torch"})


LEGACY = {name: _legacy(d) for d, name in _NAMES.items()}


class CudaLegacyTensorType(LegacyTensorType):
    """``torch.cuda.FloatTensor`` and friends: ``isinstance`` holds for a
    CUDA tensor of the dtype, ``t.type(torch.cuda.FloatTensor)`` moves to
    CUDA, and calling one without eager CUDA tensors
    (``tracec.device.EAGER_CUDA``) is PyTorch's CPU-build TypeError.
    Scripts name them on CPU (``torch.cuda.FloatTensor if x.is_cuda else
    torch.FloatTensor``, ``isinstance(t, torch.cuda.FloatTensor)``)."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cuda"

    def __call__(cls, *data, device=None):
        from tracec.device import EAGER_CUDA
        if not EAGER_CUDA:
            raise TypeError(f"type torch.cuda.{cls.__name__} not available. Torch not compiled "
                            f"with CUDA enabled.")
        return to(LEGACY[cls.__name__](*data), device="cuda")

    def __repr__(cls):
        return f"<class 'torch.cuda.{cls.__name__}'>"


#: torch.cuda.FloatTensor, ... (exported by tracec.cuda)
CUDA_LEGACY = {name: CudaLegacyTensorType(name, (), {"dtype": d, "legacy_dtype": d, "is_cuda": True,
                                                      "is_sparse": False, "__module__": "torch.cuda"})
               for d, name in _NAMES.items()}


def _no_aten_cuda():
    """PyTorch's error for ``t.type(torch.cuda.FloatTensor)`` in a CPU build
    (a RuntimeError, where ``.cuda()`` raises an AssertionError)."""
    from tracec.device import EAGER_CUDA
    if not EAGER_CUDA:
        raise RuntimeError(
            "Cannot initialize CUDA without ATen_cuda library. PyTorch splits its backend into "
            "two shared libraries: a CPU library and a CUDA library; this error has occurred "
            "because you are trying to use some CUDA functionality, but the CUDA library has "
            "not been loaded by the dynamic linker for some reason.  The CUDA library MUST be "
            "loaded, EVEN IF you don't directly use any symbols from the CUDA library! One "
            "common culprit is a lack of -Wl,--no-as-needed in your link arguments; many "
            "dynamic linkers will delete dynamic library dependencies if you don't depend on "
            "any of their symbols.  You can check if this has occurred by using ldd on your "
            "binary to see if there is a dependency on *_cuda.so library.")


def tensor_type(self: Tensor, dtype=None, non_blocking: bool = False, **kwargs):
    if dtype is None:
        return type_name(self)
    if dtype is Tensor:          # torch.Tensor as a type: the float32 FloatTensor
        dtype = dt.float32
    if getattr(dtype, "is_cuda", False):           # torch.cuda.FloatTensor, ...
        _no_aten_cuda()
        return to(self, device="cuda", dtype=dtype.legacy_dtype)
    dtype = getattr(dtype, "legacy_dtype", dtype)
    if isinstance(dtype, str):
        d, device = _parse(dtype)
        if device == "cuda":
            _no_aten_cuda()
        return to(self, device=device, dtype=d)
    d = dt.to_dtype(dtype)
    return self if d == self.dtype else to(self, d)


Tensor.type = tensor_type


def set_default_tensor_type(t) -> None:
    """``torch.set_default_tensor_type('torch.DoubleTensor')`` (or the type
    itself): PyTorch's deprecated spelling of ``set_default_dtype`` (and of
    the default device, for the ``torch.cuda.*`` names)."""
    import warnings
    warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use "
                  "torch.set_default_dtype() and torch.set_default_device() as alternatives.",
                  UserWarning, stacklevel=2)
    if t is Tensor:
        d, device = dt.float32, "cpu"
    elif hasattr(t, "legacy_dtype"):
        d, device = t.legacy_dtype, "cpu"
    elif isinstance(t, str):
        d, device = _parse(t)
    else:
        raise TypeError(f"invalid type object: only floating-point types are supported as the "
                        f"default type, got {t!r}")
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type "
                        f"(got torch.{_NAMES[d]})")
    if device == "cuda":
        from tracec.device import to_device
        to_device("cuda")          # the clear "no CUDA here" error, before changing anything
    dt.set_default_dtype(d)
