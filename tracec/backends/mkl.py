"""``tracec.backends.mkl``: PyTorch's oneMKL switch, as scripts read it
(``torch.backends.mkl.is_available()``).  tracec's kernels are its own LLVM
code, not oneMKL, so the library is never available and ``verbose`` has
nothing to report.  Imports nothing (backends layer)."""

VERBOSE_OFF = 0
VERBOSE_ON = 1


def is_available() -> bool:
    return False


class verbose:  # noqa: N801 - PyTorch's name
    """``with torch.backends.mkl.verbose(level):`` (a no-op here)."""

    def __init__(self, enable):
        self.enable = enable

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
