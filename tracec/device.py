"""``tracec.device``: where a tensor lives.  Eager tensors live on the CPU
(NumPy); "cuda" is accepted by name and refused with a clear error where
CuPy finds no GPU."""
from __future__ import annotations


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
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device "
                               f"string: {spec}")
        self.type = kind
        self.index = int(idx) if idx else index

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and self.type == other.type and \
            (self.index or 0) == (other.index or 0)

    def __hash__(self):
        return hash((self.type, self.index or 0))

    def __repr__(self):
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.index is not None else ")")

    def __str__(self):
        return self.type + (f":{self.index}" if self.index is not None else "")


cpu = device("cpu")
#: Whether eager tensors can live on "cuda" in this build.  Not yet: so
#: ``tracec.cuda.is_available()`` says False even where CuPy sees a GPU, and
#: scripts choosing ``"cuda" if is_available() else "cpu"`` run on the CPU.
EAGER_CUDA = False


def to_device(spec) -> device:
    d = device(spec) if not isinstance(spec, device) else spec
    if d.type == "cuda":
        raise RuntimeError("eager CUDA tensors are not supported by this build of tracec: "
                           "no CUDA device is available (use backend='cuda' of "
                           "tracec.compile on a machine with a GPU)")
    return d
