"""``tracec.backends.mkldnn``: PyTorch's oneDNN switch, as scripts read and
set it (``torch.backends.mkldnn.enabled = False``). tracec's cpu kernels
are its own LLVM code, not oneDNN, so the library is never available and
the flag changes nothing. Imports nothing (backends layer)."""
import contextlib

enabled = True
deterministic = False
allow_tf32 = False


def is_available() -> bool:
    return False


@contextlib.contextmanager
def flags(enabled=False, deterministic=False):
    """Set the flags inside the block, as PyTorch's context manager."""
    g = globals()
    old = (g["enabled"], g["deterministic"])
    g["enabled"], g["deterministic"] = enabled, deterministic
    try:
        yield
    finally:
        g["enabled"], g["deterministic"] = old
