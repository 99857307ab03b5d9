"""``functorch.*`` (``torch._functorch.deprecated``): the ``torch.func``
transforms and the module helpers of ``make_functional``, each warning
PyTorch's FutureWarning that it moved (to ``torch.func.X``, ``torch.vmap``,
``torch.func.functional_call`` or ``torch.func.stack_module_state``)."""
from __future__ import annotations

import warnings

from tracec import func as _func
from tracec._functorch import make_functional as _nn

__all__ = ["vmap", "grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
           "functionalize", "make_functional", "make_functional_with_buffers",
           "combine_state_for_ensemble"]


def get_warning(api: str, new_api: str | None = None, replace_newlines: bool = False) -> str:
    new_api = new_api or f"torch.func.{api}"
    text = (f"We've integrated functorch into PyTorch. As the final step of the \n"
            f"integration, `functorch.{api}` is deprecated as of PyTorch \n"
            f"2.0 and will be deleted in a future version of PyTorch >= 2.3. \n"
            f"Please use `{new_api}` instead; see the PyTorch 2.0 release notes \n"
            f"and/or the `torch.func` migration guide for more details \n"
            f"https://pytorch.org/docs/main/func.migrating.html")
    return text.replace("\n", "") if replace_newlines else text


def warn_deprecated(api: str, new_api: str | None = None) -> None:
    warnings.warn(get_warning(api, new_api, replace_newlines=True), FutureWarning, stacklevel=3)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    warn_deprecated("vmap", "torch.vmap")
    return _func.vmap(func, in_dims, out_dims, randomness, chunk_size=chunk_size)


def grad(func, argnums=0, has_aux=False):
    warn_deprecated("grad")
    return _func.grad(func, argnums, has_aux)


def grad_and_value(func, argnums=0, has_aux=False):
    warn_deprecated("grad_and_value")
    return _func.grad_and_value(func, argnums, has_aux)


def vjp(func, *primals, has_aux=False):
    warn_deprecated("vjp")
    return _func.vjp(func, *primals, has_aux=has_aux)


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    warn_deprecated("jvp")
    return _func.jvp(func, primals, tangents, strict=strict, has_aux=has_aux)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    warn_deprecated("jacrev")
    return _func.jacrev(func, argnums, has_aux=has_aux, chunk_size=chunk_size)


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    warn_deprecated("jacfwd")
    return _func.jacfwd(func, argnums, has_aux, randomness=randomness)


def hessian(func, argnums=0):
    warn_deprecated("hessian")
    return _func.hessian(func, argnums=argnums)


def functionalize(func, *, remove="mutations"):
    warn_deprecated("functionalize")
    return _func.functionalize(func, remove=remove)


def make_functional(model, disable_autograd_tracking=False):
    warn_deprecated("make_functional", "torch.func.functional_call")
    return _nn.make_functional(model, disable_autograd_tracking)


def make_functional_with_buffers(model, disable_autograd_tracking=False):
    warn_deprecated("make_functional_with_buffers", "torch.func.functional_call")
    return _nn.make_functional_with_buffers(model, disable_autograd_tracking)


def combine_state_for_ensemble(models):
    warn_deprecated("combine_state_for_ensemble", "torch.func.stack_module_state")
    return _nn.combine_state_for_ensemble(models)
