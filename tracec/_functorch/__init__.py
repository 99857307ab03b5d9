"""``torch._functorch``: what the ``functorch`` package (installed with
torch) imports from torch, so that ``import functorch`` /
``from functorch import make_functional, vmap, grad`` work under tracec:
``deprecated`` (the ``functorch.*`` transforms, warning PyTorch's
FutureWarning) and ``make_functional``."""
