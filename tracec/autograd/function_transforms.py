"""What a user ``autograd.Function`` needs under the ``torch.func``
transforms, checked as PyTorch checks it (torch/autograd/function.py's
``Function.apply``, torch/_functorch/autograd_function.py):

- under any transform (``_C.FUNCTORCH_DEPTH``) it overrides
  ``setup_context`` (a ``forward(ctx, ...)`` Function is refused);
- under ``vmap`` (``_C.VMAP_DEPTH``; ``jacfwd`` / ``hessian`` are a vmap of a
  jvp) it has a ``vmap`` staticmethod or ``generate_vmap_rule = True``, not
  both;
- where a tangent reaches it (a forward_ad dual, ``torch.func.jvp`` /
  ``jacfwd``: ``forward_ad.has_tangent``) it has a ``jvp`` staticmethod.

tracec's vmap runs the function once per sample, so a Function's ``vmap``
staticmethod is required, as in PyTorch, but not called: PyTorch's docs ask
that it keep the Function's per-sample semantics.  tracec's own Functions
(PyTorch's built-in ops) are exempt.
"""
from __future__ import annotations

from tracec import _C

_DOCS = "https://pytorch.org/docs/main/notes/extending.func.html"


def is_user_function(cls) -> bool:
    """A Function the program (or a library) defines, not one of tracec's."""
    return cls.__module__.split(".")[0] != "tracec"


def check_under_transforms(cls, base) -> None:
    """Raise PyTorch's error if ``cls`` (a subclass of ``base``, tracec's
    ``Function``) cannot run under the transforms enclosing this call."""
    if not _C.FUNCTORCH_DEPTH[0] or not is_user_function(cls):
        return
    if cls.setup_context is base.setup_context:
        raise RuntimeError("In order to use an autograd.Function with functorch transforms "
                           "(vmap, grad, jvp, jacrev, ...), it must override the setup_context "
                           f"staticmethod. For more details, please see {_DOCS}")
    if not _C.VMAP_DEPTH[0]:
        return
    own_rule = cls.vmap is not base.vmap
    if cls.generate_vmap_rule and own_rule:
        raise RuntimeError(f"You tried to vmap over {cls.__name__}, but it has both "
                           "generate_vmap_rule=True and an overridden vmap staticmethod. Please "
                           "set generate_vmap_rule=False or delete the overridden vmap "
                           f"staticmethod to avoid ambiguity. For more details, please see {_DOCS}")
    if not cls.generate_vmap_rule and not own_rule:
        raise RuntimeError(f"You tried to vmap over {cls.__name__}, but it does not have vmap "
                           "support. Please override and implement the vmap staticmethod or set "
                           f"generate_vmap_rule=True. For more details, please see {_DOCS}")
