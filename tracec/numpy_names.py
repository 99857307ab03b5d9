"""NumPy's keyword names on PyTorch's reductions and dim-taking functions.

PyTorch's argument parser accepts ``axis=`` for ``dim=`` and ``keepdims=``
for ``keepdim=`` on every native function and method that has them
(``torch.cumprod(a, axis=0)``, ``x.sum(axis=1, keepdims=True)``, as
diffusion notebooks write).  ``install`` wraps exactly those names, both as
``tracec.X`` and as ``Tensor.X``; a call without keywords pays one frame.
Functions PyTorch writes in Python (``norm``, ``split``, ``flatten``'s
``start_dim``) do not take the aliases there either, so they stay unwrapped.
"""
from __future__ import annotations

import functools

__all__ = ["accept_numpy_names", "install", "NUMPY_NAMED"]

_ALIASES = (("axis", "dim"), ("keepdims", "keepdim"))

# torch 2.13's native functions with a ``dim`` (or ``keepdim``) keyword.
NUMPY_NAMED = (
    "sum mean nansum nanmean prod cumsum cumprod cummax cummin logcumsumexp max min amax "
    "amin aminmax argmax argmin std var std_mean var_mean logsumexp softmax log_softmax "
    "all any count_nonzero median nanmedian mode kthvalue quantile nanquantile sort argsort "
    "topk diff cat concat concatenate stack squeeze unsqueeze chunk unbind tensor_split "
    "repeat_interleave cumulative_trapezoid trapezoid"
).split()


def accept_numpy_names(fn):
    """``fn`` that also takes ``axis=`` / ``keepdims=`` for ``dim=`` / ``keepdim=``."""
    if getattr(fn, "__numpy_names__", False):
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs:
            for alias, name in _ALIASES:
                if alias in kwargs:
                    if name in kwargs:
                        raise TypeError(f"{fn.__name__}() got both {name!r} and its alias "
                                        f"{alias!r}")
                    kwargs[name] = kwargs.pop(alias)
        return fn(*args, **kwargs)
    wrapper.__numpy_names__ = True
    return wrapper


def _base(fn):
    return getattr(fn, "__wrapped_without_out__", fn)


def install(namespace: dict, tensor_cls, *aliases) -> None:
    """Wrap ``NUMPY_NAMED`` in ``namespace`` (a module's globals) and on
    ``tensor_cls``; a module in ``aliases`` (``tracec.special``) holding the
    same function under the name (maybe behind its own ``out=``) gets it too."""
    for name in NUMPY_NAMED:
        if name in namespace:
            before = namespace[name]
            namespace[name] = accept_numpy_names(before)
            for mod in aliases:
                theirs = getattr(mod, name, None)
                if theirs is before:
                    setattr(mod, name, namespace[name])
                elif theirs is not None and _base(theirs) is _base(before):
                    setattr(mod, name, accept_numpy_names(theirs))   # keeps its own out=
        method = tensor_cls.__dict__.get(name)
        if method is not None and callable(method):
            setattr(tensor_cls, name, accept_numpy_names(method))
