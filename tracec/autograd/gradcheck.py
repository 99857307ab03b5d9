"""``torch.autograd.gradcheck``, the module (``from torch.autograd.gradcheck
import gradcheck, GradcheckError``): the functions live in
``tracec.autograd``; ``tracec.autograd.gradcheck`` stays the function, as
in PyTorch."""
from tracec.autograd import GradcheckError, gradcheck, gradgradcheck  # noqa: F401

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]
