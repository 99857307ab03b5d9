"""``tracec.backends.cudnn``: the flags PyTorch scripts set
(``torch.backends.cudnn.benchmark = True``, ``deterministic = True``, or
for a block with ``flags(...)``).  tracec does not use cuDNN, so the flags
are accepted, read back, and have no effect."""
import contextlib

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False


def version():
    return None


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False,
          allow_tf32=True, fp32_precision="none", depthwise_kernel="auto"):
    """``with torch.backends.cudnn.flags(enabled=False):``: the flags set
    for the block, restored after it."""
    g = globals()
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    saved = {n: g[n] for n in names}
    g.update(enabled=enabled, benchmark=benchmark, deterministic=deterministic,
             allow_tf32=allow_tf32)
    try:
        yield
    finally:
        g.update(saved)
