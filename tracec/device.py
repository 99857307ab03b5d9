"""``tracec.device``: where a tensor lives.  Eager tensors live on the CPU
(NumPy) or on "meta" (shape and dtype only: ``meta_array.py``); "cuda" is
accepted by name and refused with a clear error where CuPy finds no GPU.

A device is also a context manager, as in PyTorch: inside ``with
tracec.device("meta"):`` factory functions (and so layers' parameters) are
made on that device unless given one.  ``DEFAULT[-1]`` is the default
device's type ("cpu" or "meta"); ``set_default_device`` sets the bottom.
"""
from __future__ import annotations

#: Stack of default device types: the bottom one set_default_device's, one
#: more per ``with device(...)`` block.
DEFAULT = ["cpu"]

#: The device types PyTorch's ``torch.device`` parses, in the order its
#: error message lists them.  All can be named (peft compares a device with
#: ``torch.device("mps")``); tensors live only on cpu and meta
#: (``to_device``).
TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
         "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


class device:
    """A device, as ``tracec.device("cpu")`` or ``tracec.device("cuda:0")``."""

    __slots__ = ("type", "index")

    def __init__(self, spec="cpu", index=None):
        if isinstance(spec, device):
            self.type, self.index = spec.type, spec.index
            return
        if not isinstance(spec, str):
            raise TypeError(f"device(): expected a string like 'cpu' or 'cuda', got {spec!r}")
        kind, _, idx = spec.partition(":")
        if kind not in TYPES:
            raise RuntimeError(f"Expected one of {', '.join(TYPES)} device type at start of "
                               f"device string: {spec}")
        self.type = kind
        self.index = int(idx) if idx else index

    def __eq__(self, other):
        # Only a device equals a device, as in PyTorch (measured, torch 2.13):
        # ``torch.device("cpu") == "cpu"`` is False, a string naming a device
        # this build lacks ("npu", accelerate asks) compares False rather than
        # raising, and device("cpu", 0) != device("cpu").
        if not isinstance(other, device):
            return False
        return self.type == other.type and self.index == other.index

    def __hash__(self):
        return hash((self.type, self.index))

    def __repr__(self):
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.index is not None else ")")

    def __str__(self):
        return self.type + (f":{self.index}" if self.index is not None else "")

    def __enter__(self):
        if self.type != "cuda":   # (PyTorch enters a CUDA device's context; creating a tensor there raises)
            to_device(self)
        DEFAULT.append(self.type)
        return self

    def __exit__(self, *exc):
        DEFAULT.pop()
        return False


cpu = device("cpu")
meta = device("meta")
#: Whether eager tensors can live on "cuda" in this build.  Not yet: so
#: ``tracec.cuda.is_available()`` says False even where CuPy sees a GPU, and
#: scripts choosing ``"cuda" if is_available() else "cpu"`` run on the CPU.
EAGER_CUDA = False


def to_device(spec) -> device:
    """``spec`` as a device this build can hold tensors on (cpu, meta), or
    for "cuda" the error of a PyTorch built without CUDA (``torch.cuda._lazy_init``:
    an AssertionError, which scripts' ``except AssertionError`` fallbacks catch);
    eager CUDA tensors are not supported (``tracec.compile(backend='cuda')`` is)."""
    d = device(spec) if not isinstance(spec, device) else spec
    if d.type == "cuda":
        raise AssertionError("Torch not compiled with CUDA enabled")
    if d.type not in ("cpu", "meta"):
        raise NotImplementedError(f"Could not run 'aten::empty.memory_format' with arguments "
                                  f"from the '{d.type.upper()}' backend: this build of tracec "
                                  f"holds tensors on cpu and meta only")
    return d


def is_meta(spec) -> bool:
    """Does ``spec`` (a device, a string, or None for the default) name "meta"?"""
    if spec is None:
        return DEFAULT[-1] == "meta"
    return (spec.type if isinstance(spec, device) else str(spec).partition(":")[0]) == "meta"
