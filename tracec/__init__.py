"""tracec: eager PyTorch-style tensors that compile.

``import tracec as torch`` runs a PyTorch script that stays inside the
subset API.md describes.  This module only gathers the public names.
"""
from tracec import dtypes as _dt
from tracec.dtypes import (DType as dtype, bfloat16, bool_, double, float, float16,  # noqa: F401,A004
                           float32, float64, get_default_dtype, half, iinfo, int, int8, int16,
                           int32, int64, long, set_default_dtype, short, uint8, uint16, uint32,
                           uint64)
from tracec.device import device  # noqa: F401
from tracec.streams import Event, Stream  # noqa: F401
from tracec.graph import enable_grad, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401
from tracec.tensor import Size, Tensor  # noqa: F401
from tracec import methods as _methods  # noqa: F401  (attaches Tensor methods)
from tracec.functions import *  # noqa: F401,F403
from tracec.functions import (abs, max, min, pow, sum)  # noqa: F401,A004
from tracec.shape_ops import (broadcast_to, cat, chunk, clone, concat, concatenate,  # noqa: F401
                              expand, flatten, gather, masked_fill, permute, reshape,
                              scatter_add, split, squeeze, stack, t, transpose, unbind,
                              unflatten, unsqueeze, view_as)
from tracec.creation import (Generator, arange, as_tensor, asarray, bernoulli, empty, empty_like,  # noqa: F401
                             empty_permuted,
                             eye, from_numpy, full, full_like, get_rng_state, initial_seed,
                             linspace, manual_seed, ones, ones_like, rand, rand_like,
                             randint, randint_like, randn, randn_like, randperm, seed,
                             set_rng_state,
                             tensor, zeros, zeros_like)
from tracec import autograd  # noqa: F401

bool = bool_  # noqa: A001 - PyTorch's name for the dtype

from tracec.torch_version import __version__  # noqa: E402,F401
from tracec import torch_version  # noqa: E402,F401


def is_tensor(obj) -> "builtins.bool":
    return isinstance(obj, Tensor)


def numel(input) -> "builtins.int":
    return input.numel()


def is_floating_point(input) -> "builtins.bool":
    return input.dtype.is_floating_point


def _assert(condition, message):
    """``torch._assert``: a scriptable ``assert condition, message``; a
    condition with ``__torch_function__`` (an FX Proxy) gets the call, as
    in PyTorch, so traced code may check shapes with it."""
    if type(condition) is not Tensor and overrides.has_torch_function((condition,)):
        return overrides.handle_torch_function(_assert, (condition,), condition, message)
    assert condition, message

from tracec import nn, optim  # noqa: E402,F401
from tracec.serialization import load, save  # noqa: E402,F401
from tracec.torch_checkpoint import PyTorchFileReader  # noqa: E402,F401
from tracec import utils  # noqa: E402,F401
from tracec import _C  # noqa: E402,F401  (torch._C's names that Python code calls)
from tracec.nn import _aten_nn  # noqa: E402
# torch.lstm / gru / rnn_tanh / rnn_relu and their cells (flat-weight functional RNNs)
# torch.native_layer_norm / native_batch_norm / native_group_norm / native_dropout /
# convolution / norm_except_dim (ATen-level entry points code calls directly)
from tracec.nn.native_ops import (convolution, native_batch_norm, native_dropout,  # noqa: E402,F401
                                  native_group_norm, native_layer_norm, norm_except_dim)
from tracec.nn.rnn_functional import (gru, gru_cell, lstm, lstm_cell, rnn_relu,  # noqa: E402,F401
                                      rnn_relu_cell, rnn_tanh, rnn_tanh_cell)
_C._nn = _aten_nn  # torch._C._nn: F's ATen functions (tracec.nn._aten_nn)
from tracec._C import DeviceObjType, StreamObjType, TensorType, Type  # noqa: E402,F401  (TorchScript types)
from tracec import accelerator, cuda  # noqa: E402,F401
from tracec.backends import cudnn as _cudnn, mps as _mps  # noqa: E402,F401  (tracec.backends.*)

from tracec.rearrange import (cumprod, cumsum, diag, flip, fliplr, flipud,  # noqa: E402,F401
                              index_select, narrow, repeat_interleave, roll, tril, triu)
from tracec.sorting import argsort, msort, multinomial, sort, topk  # noqa: E402,F401
from tracec.contraction import addmm, baddbmm, dsmm, einsum, sparse_coo_tensor, spmm  # noqa: E402,F401
from tracec.methods_extra import (clamp_max, clamp_min, isfinite, isinf,  # noqa: E402,F401
                                  isneginf, isposinf)
from tracec.methods_compat import adjoint as _adjoint  # noqa: E402


def adjoint(input):  # noqa: A002  (torch.adjoint's keyword)
    return _adjoint(input)
from tracec import sparse  # noqa: E402,F401
from tracec import quasirandom  # noqa: E402,F401
from tracec import signal  # noqa: E402,F401  (torch.signal.windows)
from tracec import amp, cpu, jit, _dynamo, _inductor  # noqa: E402,F401
from tracec.jit import ScriptFunction, ScriptModule  # noqa: E402,F401  (torch.ScriptModule)
from tracec import version  # noqa: E402,F401  (torch.version.cuda)
from tracec.reductions_bool import all, any  # noqa: E402,F401,A004
from tracec import tensor_type as _tensor_type  # noqa: E402,F401  (Tensor.type)
from tracec.as_torch import install_as_torch, uninstall_as_torch  # noqa: E402,F401

globals().update(_tensor_type.LEGACY)   # FloatTensor, LongTensor, ... (legacy constructors / types)
vars(cuda).update(_tensor_type.CUDA_LEGACY)   # torch.cuda.FloatTensor, ... (names; no eager CUDA)



from tracec import tensor_meta as _tensor_meta  # noqa: E402,F401  (Tensor.stride, ...)
from tracec.tensor_meta import (UntypedStorage, TypedStorage, channels_last, channels_last_3d, contiguous_format,  # noqa: E402,F401
                                get_device, is_inference, is_signed, layout,
                                legacy_contiguous_format, memory_format, preserve_format,
                                jagged, sparse_bsc, sparse_bsr, sparse_coo, sparse_csc,
                                sparse_csr, strided, UntypedStorage)
from tracec.sparse_compressed import sparse_csc_tensor, sparse_csr_tensor  # noqa: E402,F401
from tracec import masked, nested  # noqa: E402,F401  (torch.masked, torch.nested)
from tracec.shape_extra import (atleast_1d, atleast_2d, atleast_3d, block_diag,  # noqa: E402,F401
                                broadcast_shapes, broadcast_tensors, cartesian_prod,
                                column_stack, combinations, diag_embed, diagflat, diagonal,
                                dsplit, dstack, hsplit, hstack, meshgrid, moveaxis, movedim,
                                narrow_copy, ravel, rot90, row_stack, split_with_sizes,
                                swapaxes, swapdims, tensor_split, tile, unsafe_chunk,
                                unsafe_split, vsplit, vstack)
from tracec.shape_ops import unflatten  # noqa: E402,F401
from tracec.scatter_ops import (index_add, index_copy, index_fill, index_put,  # noqa: E402,F401
                                index_put_, index_reduce, scatter, scatter_add,
                                scatter_reduce)
from tracec.select_ops import (argwhere, diagonal_scatter, masked_scatter, nonzero_static,  # noqa: E402,F401
                               masked_select, nonzero, put, select, select_scatter,
                               slice_scatter, take, take_along_dim)
from tracec.search_ops import (bucketize, histogram, histogramdd, searchsorted, unique,  # noqa: E402,F401
                               unique_consecutive)
from tracec.strided_views import as_strided, as_strided_, empty_strided  # noqa: E402,F401


def resize_as_(input, the_template, memory_format=None):
    return input.resize_as_(the_template)


from tracec.autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled  # noqa: E402,F401
from tracec.autocast_mode import get_autocast_cpu_dtype, is_autocast_cpu_enabled  # noqa: E402,F401
from tracec.autocast_mode import (autocast_decrement_nesting, autocast_increment_nesting,  # noqa: E402,F401
                                  clear_autocast_cache, get_autocast_gpu_dtype,
                                  is_autocast_cache_enabled, set_autocast_cache_enabled,
                                  set_autocast_cpu_dtype, set_autocast_cpu_enabled,
                                  set_autocast_dtype, set_autocast_enabled,
                                  set_autocast_gpu_dtype)
from tracec.tensor_str import get_printoptions, printoptions, set_printoptions  # noqa: E402,F401


# Elementwise math, reductions, linear algebra and global configuration
# (math_extra, math_trig, math_special, math_int, reductions_extra, binning,
# differences, linalg, special, config).
from tracec.math_extra import *  # noqa: E402,F401,F403
from tracec.math_extra import round  # noqa: E402,F401,A004
from tracec.math_trig import *  # noqa: E402,F401,F403
from tracec.math_special import *  # noqa: E402,F401,F403
from tracec.fake_quant import *  # noqa: E402,F401,F403
from tracec.math_igamma import igamma, igammac  # noqa: E402,F401
from tracec.math_int import *  # noqa: E402,F401,F403
from tracec import math_methods as _math_methods  # noqa: E402,F401  (Tensor methods)
globals().update(_math_methods.TOP_LEVEL_INPLACE)
from tracec.reductions_extra import *  # noqa: E402,F401,F403
from tracec.binning import *  # noqa: E402,F401,F403
from tracec.differences import *  # noqa: E402,F401,F403
from tracec import linalg  # noqa: E402,F401
from tracec.lowrank import pca_lowrank, svd_lowrank  # noqa: E402,F401
from tracec.linalg import (addmv, addr, cdist, chain_matmul, det, dist, ger, inner,  # noqa: E402,F401
                           inverse, kron, logdet, matrix_power, mv, pinverse,
                           tensordot, vdot)
from tracec.linalg import _torch_slogdet as slogdet  # noqa: E402,F401
from tracec.linalg import trace as _matrix_trace  # noqa: E402
from tracec.linalg import _torch_cholesky as cholesky, _torch_cross as cross  # noqa: E402,F401
from tracec.linalg import _torch_norm as norm, _torch_qr as qr, _torch_svd as svd  # noqa: E402,F401
from tracec.linalg import (addbmm, cholesky_inverse, cholesky_solve, lstsq,  # noqa: E402,F401
                           matrix_exp, triangular_solve, _torch_vander as vander,
                           frobenius_norm, nuclear_norm, renorm)
from tracec.linalg_lapack import matrix_rank, lu_unpack  # noqa: E402,F401
from tracec.linalg_householder import orgqr  # noqa: E402,F401
from tracec.linalg_lapack import _torch_lu as lu, _torch_lu_solve as lu_solve  # noqa: E402,F401
from tracec import special  # noqa: E402,F401
from tracec.config import *  # noqa: E402,F401,F403
# torch.* forms of nn.functional ops, sampling, seeding and windows.
from tracec.complex_ops import (angle, complex, conj, conj_physical,  # noqa: E402,F401,A004
                                imag, is_conj, polar, real, resolve_conj, sgn, view_as_complex,
                                view_as_real)
from tracec.dtypes import (cdouble, cfloat, complex64, complex128)  # noqa: E402,F401
from tracec.dtypes import (float8_e4m3fn, float8_e5m2, float8_e4m3fnuz,  # noqa: E402,F401
                           float8_e5m2fnuz, float8_e8m0fnu, float4_e2m1fn_x2, complex32, chalf)
from tracec import fft  # noqa: E402,F401
from tracec.stft import istft, stft  # noqa: E402,F401
from tracec.aten_functional import *  # noqa: E402,F401,F403
from tracec.windows import *  # noqa: E402,F401,F403
from tracec.aten_extra import *  # noqa: E402,F401,F403
from tracec.foreach_ops import *  # noqa: E402,F401,F403  (torch._foreach_*)
from tracec import hub, mps, return_types, testing, xpu  # noqa: E402,F401
from tracec.tensor_type import set_default_tensor_type  # noqa: E402,F401
from tracec.amp import GradScaler  # noqa: E402,F401
from tracec import random  # noqa: E402,F401
from tracec.random import _sample_dirichlet, binomial, default_generator, normal, poisson  # noqa: E402,F401
from tracec.backends import cuda as _backends_cuda, openmp as _openmp  # noqa: E402,F401
from tracec.backends import mkldnn as _mkldnn, opt_einsum as _opt_einsum  # noqa: E402,F401
from tracec.backends import mkl as _mkl  # noqa: E402,F401
from tracec import __config__, fx, onnx, overrides  # noqa: E402,F401  (torch.__config__/fx.wrap/onnx/overrides)
from tracec import __future__  # noqa: E402,F401  (torch.__future__'s conversion switches)
from tracec import library, ops  # noqa: E402,F401  (torch.library; torch.ops.<namespace>)
from tracec import aten_ops as _aten_ops  # noqa: E402
_aten_ops.register()   # torch.ops.aten (tracec/aten_ops.py)
from tracec import ao, quantization  # noqa: E402,F401  (torch.ao / torch.quantization: quantize_dynamic)
from tracec.ao._qparams import (per_channel_affine, per_channel_symmetric,  # noqa: E402,F401
                                per_tensor_affine, per_tensor_symmetric, qint8, qint32, quint8)
from tracec.config import e, inf, nan, pi  # noqa: E402,F401

def get_device_module(device=None):
    """``torch.get_device_module``: the module of a device type
    (``torch.cpu``, ``torch.cuda``, ``torch.mps``, ``torch.xpu``); the
    default device's when none is given."""
    from tracec.device import DEFAULT
    if device is None:
        kind = DEFAULT[-1]
    elif isinstance(device, str) and device.partition(":")[0] in ("mps", "xpu"):
        kind = device.partition(":")[0]
    else:
        kind = globals()["device"](device).type
    module = {"cpu": cpu, "cuda": cuda, "mps": mps, "xpu": xpu}.get(kind)
    if module is None:
        raise RuntimeError(f"Device '{kind}' does not have a corresponding module registered "
                           f"as 'torch.{kind}'.")
    return module


def trace(fn, *args, **kwargs):
    """``tracec.trace(fn, *example_args)``: the traced IR (API.md); given only
    a Tensor, PyTorch's ``torch.trace(input)``: the sum of its diagonal."""
    if isinstance(fn, Tensor) and not args and not kwargs:
        return _matrix_trace(fn)
    from tracec.compiler import trace as trace_ir  # the compiler loads on first use
    return trace_ir(fn, *args, **kwargs)

from tracec import autograd_functional as _autograd_functional, func, random_inplace as _random_inplace  # noqa: E402,F401
from tracec.func import vmap  # noqa: E402,F401


def _add_out_keyword():
    # PyTorch's out= on the functions that take it (tracec/out_arg.py).
    from tracec.out_arg import with_out
    g = globals()
    for name in _OUT_FUNCTIONS:
        if name in g and not hasattr(g[name], "__wrapped_without_out__"):
            g[name] = with_out(g[name])


_OUT_FUNCTIONS = (
    "abs absolute add sub subtract mul multiply div divide true_divide matmul mm bmm dot outer "
    "addmm baddbmm exp expm1 log log1p log2 log10 sqrt rsqrt sin cos tan tanh sigmoid neg "
    "negative pow square reciprocal sign erf floor ceil round trunc frac remainder fmod clamp "
    "clip maximum minimum where sum mean prod amax amin argmax argmin max min logsumexp std var "
    "cumsum cumprod eq ne lt le gt ge greater greater_equal less less_equal not_equal "
    "logical_and logical_or logical_not logical_xor cat concat concatenate stack gather "
    "index_select sort topk tril triu isnan isfinite isinf "
    "hstack vstack dstack column_stack row_stack narrow_copy index_add index_copy index_fill "
    "index_reduce scatter scatter_add scatter_reduce masked_select take take_along_dim "
    "nonzero argwhere bucketize searchsorted unique_consecutive histogram "
    "acos asin atan acosh asinh atanh arccos arcsin arctan arccosh arcsinh arctanh sinh cosh "
    "atan2 arctan2 hypot fix exp2 logaddexp logaddexp2 fmax fmin floor_divide copysign "
    "heaviside xlogy logit erfc erfinv lgamma digamma polygamma mvlgamma i0 sinc deg2rad "
    "rad2deg nan_to_num float_power lerp addcmul addcdiv sgn gcd lcm bitwise_and bitwise_or "
    "bitwise_xor bitwise_not bitwise_left_shift bitwise_right_shift isin ldexp frexp "
    "nextafter signbit nansum nanmean median nanmedian mode kthvalue quantile nanquantile "
    "aminmax cummax cummin logcumsumexp diff histc bincount "
    "any bernoulli chain_matmul cholesky clamp_max clamp_min conj_physical diag isneginf "
    "isposinf msort multinomial lu lu_solve "
    "mv addmv addr ger inner kron igamma igammac tensordot det logdet slogdet inverse "
    "matrix_power cross cdist vdot norm addbmm cholesky_solve cholesky_inverse angle renorm "
    "frobenius_norm nuclear_norm triangular_solve matrix_rank "
    "zeros ones empty full rand randn randint arange linspace eye"
).split()
_add_out_keyword()


def _compile_module_call(fn, *args, **kwargs):
    # ``nn.Module.compile()``: the compiler loads on first use.
    from tracec.compiler import compile as _compile
    return _compile(fn, *args, **kwargs)


nn.Module._compile_fn = staticmethod(_compile_module_call)


def _eager_kernels(key, composite, dtype, ranks, examples):
    # Native kernels for eager composites (tracec/fused_eager.py): the
    # compiler loads on the first activation large enough to want them.
    from tracec.eager_kernels import kernels
    return kernels(key, composite, dtype, ranks, examples)


from tracec import fused_eager as _fused_eager  # noqa: E402
_fused_eager.PROVIDERS.append(_eager_kernels)


def _native_maker(module: str):
    """A maker of the cpu backend's hand-written native kernels in
    ``tracec.backends.cpu.<module>`` (its ``load()``, None on failure with
    the reason in ``INFO``), registered where a lower layer asks for them:
    the backend is imported (and the kernels loaded or compiled) only when a
    program's draws or ops first want them."""
    def make():
        import importlib
        mod = importlib.import_module(f"tracec.backends.cpu.{module}")
        kernels = mod.load()
        if kernels is None:
            raise RuntimeError(mod.INFO.get("error", "not made"))
        return kernels
    make.__name__ = f"_{module}"
    return make


from tracec import torch_rng as _torch_rng  # noqa: E402
from tracec.nn import _conv_depthwise_eager as _dw_eager  # noqa: E402
from tracec.nn import _batch_norm_eager as _bn_eager  # noqa: E402
# PyTorch's random transforms (tracec/torch_rng.py), eager depthwise
# convolution (nn/_conv_depthwise_eager.py), eager batch norm (nn/_batch_norm_eager.py).
_torch_rng.NATIVE.append(_native_maker("rng_kernels"))
_dw_eager.NATIVE.makers.append(_native_maker("depthwise_kernels"))
_bn_eager.NATIVE.makers.append(_native_maker("batch_norm_kernels"))

from tracec import numpy_names as _numpy_names  # noqa: E402
_numpy_names.install(globals(), Tensor, special)  # axis= / keepdims=, after out= and methods


# The compiler's names load on first use, so that ``import tracec`` (the eager
# library) does not import xDSL and LLVM: they cost more than everything else
# together (issue 12).  ``tests/test_layers.py`` checks that a plain import
# leaves them out of ``sys.modules``.
_LAZY = {
    # Loaded on first use (``tracec.distributions`` / ``import torch.distributions``):
    # ~20 ms of every import otherwise.
    "distributions": ("tracec.distributions", None),
    # ``torch.multiprocessing.set_start_method(...)`` after a plain ``import
    # torch`` (PyTorch imports it eagerly); ~8 ms, so on first use here.
    "multiprocessing": ("tracec.multiprocessing", None),
    "types": ("tracec.types", None),
    "futures": ("tracec.futures", None),
    "Future": ("tracec.futures", "Future"),     # torch.Future (torch._C.Future's name)
    "_ops": ("tracec._ops", None),
    "_VF": ("tracec._VF", None),            # torch._VF: the ATen functions by name
    "functional": ("tracec.functional", None),  # torch.functional (einsum, stft, norm...)
    "_tensor_str": ("tracec._tensor_str", None),
    "TraceError": ("tracec.tracing", "TraceError"),
    "compile": ("tracec.compiler", "compile"),
    "mark_dynamic": ("tracec.sym_shapes", "mark_dynamic"),
    "ir": ("tracec.ir", None),
    "compiler": ("tracec.compiler", None),
    "export": ("tracec.export", None),     # torch.export: it records, so it loads the compiler
}


def __getattr__(name: str):
    """PEP 562: import a compiler-side name the first time it is asked for."""
    if name not in _LAZY:
        raise AttributeError(f"module '{__name__}' has no attribute {name!r}")
    import importlib
    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    for hook in LAZY_IMPORT_HOOKS:     # (install_as_torch renames the new modules' classes)
        hook()
    return value


#: Callables run after ``__getattr__`` imported a lazy module.
LAZY_IMPORT_HOOKS: list = []


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def _forwarding_signatures():
    # torch.X_copy and torch.X_ forward ``(input, *args, **kwargs)`` to
    # tracec.X / Tensor.X_: give them those keywords' signature (what
    # inspect.signature reports; tests/test_kwarg_names.py checks the names).
    import inspect
    g = globals()
    pairs = [(g[n + "_copy"], g.get(n) if n not in ("view", "unfold", "expand", "split")
              else Tensor.__dict__.get(n))
             for n in ("permute", "transpose", "t", "squeeze", "unsqueeze", "expand",
                       "diagonal", "select", "narrow", "split", "split_with_sizes", "unbind",
                       "unfold", "as_strided", "view")]
    pairs += [(fn, Tensor.__dict__.get(n)) for n, fn in _math_methods.TOP_LEVEL_INPLACE.items()]
    for fn, target in pairs:
        if target is None or not callable(target):
            continue
        try:
            ps = list(inspect.signature(target).parameters.values())
        except (TypeError, ValueError):
            continue
        if ps and ps[0].kind in (ps[0].POSITIONAL_ONLY, ps[0].POSITIONAL_OR_KEYWORD):
            ps[0] = ps[0].replace(name="input")
            fn.__signature__ = inspect.Signature(ps)


_forwarding_signatures()


from tracec.einops_backend import register as _register_einops  # noqa: E402
_register_einops()   # einops serves tracec tensors (tracec/einops_backend.py); imports no einops

# torch.cond, torch.sym_*, and the legacy factories (tracec/control_flow.py);
# last, so that ``range`` shadows the builtin only for users of ``tracec.range``.
from tracec.control_flow import (cond, from_dlpack, frombuffer, sym_float, sym_int,  # noqa: E402,F401
                                 sym_ite, sym_max, sym_min, sym_not, sym_sqrt, sym_sum,
                                 to_dlpack)
from tracec.control_flow import range  # noqa: E402,F401,A004

# The namespaces a Tensor subclass's __torch_function__ reaches, wrapped
# only once such a subclass is defined (tracec/subclass_dispatch.py).
import sys as _sys  # noqa: E402
# ``torch.torch`` is torch itself (PyTorch's package imports its own name; kornia
# annotates with ``torch.torch.Tensor``).
torch = _sys.modules[__name__]
# torch.SymInt is a symbolic size: tracec's is symbolic.Sym (kornia checks
# ``isinstance(n, (int, torch.SymInt))``)
from tracec.symbolic import Sym as SymInt, SymBool, SymFloat  # noqa: E402,F401
from tracec import subclass_dispatch as _subclass_dispatch  # noqa: E402
_subclass_dispatch.register(
    [(_sys.modules[__name__], "torch"), (nn.functional, "torch.nn.functional"),
     (linalg, "torch.linalg"), (fft, "torch.fft"), (special, "torch.special"),
     (nn.init, "torch.nn.init")], autograd)
