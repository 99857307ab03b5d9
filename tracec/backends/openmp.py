"""``tracec.backends.openmp`` and the answer PyTorch scripts ask of it:
tracec's cpu kernels run their own threads (pthreads), not OpenMP.
Imports nothing (backends layer)."""


def is_available() -> bool:
    return False
