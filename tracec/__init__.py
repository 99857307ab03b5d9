"""tracec: eager PyTorch-style tensors that compile.

``import tracec as torch`` runs a PyTorch script that stays inside the
subset API.md describes.  This module only gathers the public names.
"""
from tracec import dtypes as _dt
from tracec.dtypes import (DType as dtype, bfloat16, bool_, double, float, float16,  # noqa: F401,A004
                           float32, float64, get_default_dtype, half, int, int32, int64, long,
                           set_default_dtype)
from tracec.device import device  # noqa: F401
from tracec.graph import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401
from tracec.tensor import Tensor  # noqa: F401
from tracec import methods as _methods  # noqa: F401  (attaches Tensor methods)
from tracec.functions import *  # noqa: F401,F403
from tracec.functions import (abs, max, min, pow, sum)  # noqa: F401,A004
from tracec.shape_ops import (broadcast_to, cat, chunk, clone, concat, concatenate,  # noqa: F401
                              expand, flatten, gather, masked_fill, permute, reshape,
                              scatter_add, split, squeeze, stack, t, transpose, unbind,
                              unflatten, unsqueeze, view_as)
from tracec.creation import (Generator, arange, as_tensor, bernoulli, empty, empty_like,  # noqa: F401
                             eye, from_numpy, full, full_like, get_rng_state, initial_seed,
                             linspace, manual_seed, ones, ones_like, rand, rand_like, randint,
                             randint_like, randn, randn_like, randperm, seed, set_rng_state,
                             tensor, zeros, zeros_like)
from tracec import autograd  # noqa: F401

bool = bool_  # noqa: A001 - PyTorch's name for the dtype
FloatTensor = Tensor

from tracec.version import __version__  # noqa: E402,F401


def is_tensor(x) -> "builtins.bool":
    return isinstance(x, Tensor)


def numel(x) -> "builtins.int":
    return x.numel()


def is_floating_point(x) -> "builtins.bool":
    return x.dtype.is_floating_point

from tracec import nn, optim  # noqa: E402,F401
from tracec.serialization import load, save  # noqa: E402,F401
from tracec import utils  # noqa: E402,F401
from tracec import distributions  # noqa: E402,F401
from tracec import accelerator, cuda  # noqa: E402,F401
from tracec.backends import cudnn as _cudnn, mps as _mps  # noqa: E402,F401  (tracec.backends.*)

from tracec.rearrange import (cumprod, cumsum, diag, flip, fliplr, flipud,  # noqa: E402,F401
                              index_select, narrow, repeat_interleave, roll, tril, triu)
from tracec.sorting import argsort, msort, multinomial, sort, topk  # noqa: E402,F401
from tracec.contraction import addmm, baddbmm, einsum, sparse_coo_tensor, spmm  # noqa: E402,F401
from tracec.methods_extra import (clamp_max, clamp_min, isfinite, isinf,  # noqa: E402,F401
                                  isneginf, isposinf)
from tracec import sparse  # noqa: E402,F401
from tracec import amp  # noqa: E402,F401
from tracec.reductions_bool import all, any  # noqa: E402,F401,A004
from tracec import tensor_type as _tensor_type  # noqa: E402,F401  (Tensor.type)
from tracec.as_torch import install_as_torch, uninstall_as_torch  # noqa: E402,F401


def LongTensor(*data):  # noqa: N802 - PyTorch's legacy constructor
    """``torch.LongTensor(data)`` / ``(sizes)``: an int64 tensor."""
    return Tensor(*data, dtype=int64)


class Size(tuple):
    """``torch.Size``: a tuple of sizes (``Tensor.shape`` stays a plain tuple)."""

    def __repr__(self):
        return f"tracec.Size({list(self)})"

    def numel(self) -> "builtins.int":
        n = 1
        for s in self:
            n *= s
        return n


# The compiler's names load on first use, so that ``import tracec`` (the eager
# library) does not import xDSL and LLVM: they cost more than everything else
# together (issue 12).  ``tests/test_layers.py`` checks that a plain import
# leaves them out of ``sys.modules``.
_LAZY = {
    "TraceError": ("tracec.tracing", "TraceError"),
    "compile": ("tracec.compiler", "compile"),
    "trace": ("tracec.compiler", "trace"),
    "mark_dynamic": ("tracec.sym_shapes", "mark_dynamic"),
    "ir": ("tracec.ir", None),
    "compiler": ("tracec.compiler", None),
}


def __getattr__(name: str):
    """PEP 562: import a compiler-side name the first time it is asked for."""
    if name not in _LAZY:
        raise AttributeError(f"module 'tracec' has no attribute {name!r}")
    import importlib
    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
