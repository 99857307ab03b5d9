"""Backends: run optimized tracec IR (interp: NumPy; cpu: LLVM).

As ``torch.backends`` it also holds the flag modules (``cudnn``, ``mkldnn``, ``mkl``,
``mps``, ``openmp``, ``opt_einsum``) and the context manager below."""
from contextlib import contextmanager

_allow_nonbracketed_mutation_flag = True


@contextmanager
def __allow_nonbracketed_mutation():
    """PyTorch's: lets code set ``torch.backends.<flag>`` attributes outside
    their ``flags()`` context (MONAI's ``set_determinism`` uses it); tracec's
    flags are plain attributes, always settable."""
    global _allow_nonbracketed_mutation_flag
    old = _allow_nonbracketed_mutation_flag
    _allow_nonbracketed_mutation_flag = True
    try:
        yield
    finally:
        _allow_nonbracketed_mutation_flag = old
