"""The functional pieces the other functional files build on: the input
check, in-place application, ``linear`` / ``bilinear`` and the dropout
family.  ``functional`` re-exports them; ``_attention`` imports them from
here (it cannot import ``functional``, which re-exports it).

Invariant: random ops (dropout) draw from tracec's generator, whose state
is a tensor.
"""
from __future__ import annotations

import warnings

import numpy as np

from tracec.ops.elementwise import quiet_fp
from tracec import creation, torch_rng
from tracec import dtypes as dt
from tracec import functions as TF
from tracec import autocast_mode, graph, ops
from tracec import shape_ops as S
from tracec.tensor import Tensor, apply_direct, eager_direct, weak_scalar
from tracec.ops.core import normalize_axis
from tracec.wrapper_dispatch import dispatching_operand
from tracec import aten_report

_ADD = ops.elementwise.add_p
_HALF = (dt.bfloat16, dt.float16)


def _tensor(x, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return x


# --- linear ------------------------------------------------------------------------------

def _linear_calls(out, input, weight, bias=None):
    """ATen's ``linear``: one ``addmm`` on the flattened input when there is
    a bias and the input is 2-D or contiguous (``_flatten_nd_linear``),
    else ``matmul(input, weight.t())``."""
    if not (isinstance(input, Tensor) and isinstance(weight, Tensor)) or weight.ndim != 2:
        return []
    rx, rw = input.requires_grad, weight.requires_grad
    w_t = (weight.shape[1], weight.shape[0])
    if bias is not None and (input.ndim == 2 or input.is_contiguous()
                             and getattr(bias, "ndim", 0) == 1):
        rows = int(np.prod(input.shape[:-1]))
        return [aten_report.AtenCall("addmm", ((rows, input.shape[-1]), w_t), (rx, rw))]
    return aten_report.matmul_calls(tuple(input.shape), w_t, rx, rw,
                                    input.stride() if input.ndim >= 3 else None)


@aten_report.reports(_linear_calls)
def linear(input, weight, bias=None):
    """``input @ weight.T + bias``."""
    w = dispatching_operand(input, weight, bias)
    if w is not None:
        return w.__tracec_dispatch__(linear, (input, weight, bias), {})
    _tensor(input, "linear")
    if autocast_mode.ACTIVE:
        input, weight, bias = autocast_mode.lower_precision(input, weight, bias)
    TF.addmm_dtype_check(bias, input, weight)   # (it does not promote as ``@`` would)
    if (bias is not None and isinstance(bias, Tensor) and input.dtype in _HALF
            and weight.dtype is input.dtype and bias.dtype is input.dtype):
        # PyTorch's half-precision addmm accumulates the product and the bias
        # in float32 and rounds once; rounding the product, then the sum,
        # can land one ulp away.
        with autocast_mode.autocast("cpu", enabled=False):
            # (the weight cast before its transpose: the product sees a
            # column-major operand, whose gradient mm's backward makes
            # column-major, so the weight's comes back contiguous)
            w32 = ops.cast(weight, dt.float32)
            y = TF.matmul(ops.cast(input, dt.float32), S.t(w32) if weight.ndim == 2 else w32)
            out = ops.cast(TF.add(y, ops.cast(bias, dt.float32)), input.dtype)
        if out._node is not None and input.ndim >= 2:
            out._node._name = "AddmmBackward0" if input.ndim == 2 else "ViewBackward0"
        return out
    if weight.ndim == 2 and input.ndim != 2 and input.ndim >= 1:
        return _linear_folded(input, weight, bias)
    return _linear_2d(input, weight, bias)


def _named_node(t, name: str):
    if t._node is not None:
        t._node._name = name
    return t


def _linear_folded(input, weight, bias):
    """ATen's ``linear`` of a 1-D or N-D input by a 2-D weight, in its
    steps, so that ``grad_fn`` and ``next_functions`` are PyTorch's: with
    a bias and a contiguous input, ``addmm`` on the input viewed as
    ``(-1, in)`` and a view back (ViewBackward0 -> AddmmBackward0 ->
    ViewBackward0); otherwise ``matmul``'s folding: the input unsqueezed
    (1-D), viewed, or copied and viewed (non-contiguous), ``mm``, then
    ``squeeze`` (SqueezeBackward4) or ``_unsafe_view`` back, and the bias
    added after (AddBackward0).  The values are those of one matmul."""
    k = input.shape[-1]
    lead = tuple(input.shape[:-1])
    addmm = isinstance(bias, Tensor) and bias.ndim == 1 and (
        input.ndim == 1 or input.is_contiguous())
    if input.ndim == 1:
        x2 = _named_node(S.reshape(input, (1, k)),
                         "ViewBackward0" if addmm else "UnsqueezeBackward0")
    elif input.is_contiguous():
        x2 = _named_node(S.reshape(input, (-1, k)), "ViewBackward0")
    else:
        x2 = _named_node(S.reshape(S.contiguous(input), (-1, k)), "UnsafeViewBackward0")
    y2 = _linear_2d(x2, weight, bias if addmm else None)
    out_shape = lead + (weight.shape[0],)
    y = _named_node(S.reshape(y2, out_shape), "ViewBackward0" if addmm else
                    "SqueezeBackward4" if input.ndim == 1 else "UnsafeViewBackward0")
    if bias is not None and not addmm:
        y = TF.add(y, bias)
    return y


def _linear_2d(input, weight, bias):
    """``input @ weight.T + bias`` (a 2-D input, or a weight of other
    than 2 dims)."""
    y = TF.matmul(input, S.t(weight) if weight.ndim == 2 else weight)
    if bias is not None:
        if (isinstance(bias, Tensor) and bias.dtype is y.dtype and bias.ndim <= y.ndim
                and y.ndim >= 2 and eager_direct(y) and eager_direct(bias)
                and y.dtype.is_floating_point and bias.shape[-1:] == y.shape[-1:]
                and all(d == 1 for d in bias.shape[:-1])):
            # The bias added into the product's fresh buffer (the add's
            # value, as addmm): no other tensor reads it, the matmul keeps
            # its operands only, and add keeps nothing; a fresh result
            # would cost a page-faulted [.., out_features] array per call.
            yd = y._data
            with quiet_fp():
                np.add(yd, bias._data.reshape(bias.shape[-1:]), out=yd)
            return _linear_named(apply_direct(_ADD, {}, (y, bias), yd, y.dtype), input.ndim,
                                 True, weight.ndim)
        y = TF.add(y, bias)
    return _linear_named(y, input.ndim, bias is not None, weight.ndim)


def _linear_named(y, ndim: int, bias: bool, wdim: int):
    """PyTorch's ``grad_fn`` name for ``F.linear``: addmm / mm on a 2-D
    input, a view of them otherwise."""
    if y._node is not None and wdim == 2:
        if ndim == 2:
            y._node._name = "AddmmBackward0" if bias else "MmBackward0"
        elif ndim == 1:
            y._node._name = "ViewBackward0" if bias else "SqueezeBackward4"
        else:
            y._node._name = "ViewBackward0" if bias else "UnsafeViewBackward0"
    return y


def _bilinear_checks(input1, input2, weight, bias):
    """PyTorch's refusals of mismatched ``bilinear`` operands, in its order
    and words (a size read past ``weight``'s dims is its IndexError)."""
    def size(t, i):
        return t.shape[normalize_axis(i, t.ndim)] if t.ndim else 1
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.ndim} and "
                           f"{input2.ndim}")
    for i in range(input1.ndim - 1):
        if input1.shape[i] != input2.shape[i]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {i}: got "
                               f"{input1.shape[i]} and {input2.shape[i]}")
    if size(input1, -1) != size(weight, 1):
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got "
                           f"{size(input1, -1)} but expected {size(weight, 1)}")
    if size(input2, -1) != size(weight, 2):
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got "
                           f"{size(input2, -1)} but expected {size(weight, 2)}")
    if bias is not None and size(bias, 0) != size(weight, 0):
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got "
                           f"{size(bias, 0)} but expected {size(weight, 0)}")


@aten_report.reports(lambda *args, **kwargs: [])   # (ATen's _trilinear: no flop formula)
def bilinear(input1, input2, weight, bias=None):
    _bilinear_checks(input1, input2, weight, bias)
    # y[n, o] = sum_ij x1[n, i] W[o, i, j] x2[n, j]
    t = TF.matmul(S.unsqueeze(S.unsqueeze(input1, -2), -3), weight)      # [..., O, 1, J]
    y = S.squeeze(TF.matmul(t, S.unsqueeze(S.unsqueeze(input2, -2), -1)), (-1, -2))
    return y if bias is None else TF.add(y, bias)


def half_once(composite, node_name: str, fallback):
    """``x -> composite(x)`` for an elementwise activation: a bfloat16 /
    float16 ``x`` through float32, rounded once at the end, as PyTorch's CPU
    kernels compute it (rounding each primitive's result moved a quarter
    to a third of the values by an ulp); other dtypes by ``fallback``.  The
    casts' VJPs make the backward do the same."""
    def f(x):
        if isinstance(x, Tensor) and x.dtype in (dt.bfloat16, dt.float16):
            y = ops.cast(composite(ops.cast(x, dt.float32)), x.dtype)
            return TF._named(y, node_name)
        return fallback(x)
    return f


def _apply(fn, x: Tensor, inplace: bool, node: str | None = None,
           saves_result: bool = False) -> Tensor:
    """``fn(x)``, or written into ``x`` for ``inplace=True``.  In place, the
    math reads a copy when autograd records it, so the values its backward
    saved are not the ones overwritten (PyTorch's in-place activations
    backpropagate the same way); ``node`` is then the name PyTorch gives the
    in-place op's node (``EluBackward1``), and ``saves_result`` says that
    node saves the result, so changing ``x`` in place again before the
    backward raises, as there."""
    if not inplace:
        return fn(x)
    src = x
    if graph.is_grad_enabled() and x.requires_grad:
        # A copy whose node saves nothing.  (S.clone would do, but the cast
        # primitive saves its operand, which copy_ then bumps.)  x + -0.0 is
        # x for every x (x + 0.0 turns -0.0 into 0.0, and the activation's
        # value at -0.0 with it).
        src = ops.add(x, -0.0)
        y = fn(src)
        if (isinstance(y, Tensor) and y.dtype is x.dtype
                and tuple(y.shape) == tuple(x.shape)):
            # x takes y's history, as PyTorch's in-place activation rebases
            # x onto its node: the old x's gradient is the activation's
            # (copy_'s where(True, y, x) would add a zero gradient to it, and
            # cost a copy forward and two passes back: MobileNetV2's ReLU6)
            x._assign(y, "copy_")
            saved = x._node
            if saved.__class__ is graph.Node and saved.saved.__class__ is dict \
                    and saved.saved.get("out", (None,))[0] is y:
                # (a saved result is x now: x changed in place again before
                # the backward raises, as after PyTorch's relu_)
                saved.saved["out"] = (x, x._vbox[0])
            if node is not None and x._node is not None:
                TF._named(x, node)
            return graph.saves_result(x) if saves_result else x
        return x.copy_(y)
    return x.copy_(fn(src))


# --- dropout ---------------------------------------------------------------------------------

def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(shape, p: float, x: Tensor) -> Tensor:
    """Scale 1/(1-p) where kept (probability 1-p), else 0 (all 0 for
    ``p == 1``, still drawn, as ``native_dropout`` draws); drawn with
    ``tracec.rand`` so the generator state is a tensor."""
    work = x.dtype if x.dtype.is_floating_point else dt.get_default_dtype()
    mt = creation.default_generator.eager_mt()
    if mt is not None and all(isinstance(k, int) for k in shape):
        # PyTorch's mask: empty_like(x).bernoulli_(1 - p).div_(1 - p), filled
        # in x's memory order (a transpose, channels-last); a feature
        # dropout's (N, C, 1, ...) noise is a new contiguous tensor
        def draw(n):
            return torch_rng.bernoulli_scalar(mt, n, 1.0 - p)
        keep = creation.memory_order_draw(x, draw) if tuple(shape) == tuple(x.shape) \
            and type(x._data) is np.ndarray else draw(int(np.prod(shape)))
        # div_(1 - p) in the dtype's opmath (float32 for float16 / bfloat16)
        op = np.float64 if work is dt.float64 else np.float32
        mask = keep.reshape(tuple(shape)).astype(op) * (op(1) / op(1.0 - p) if p < 1 else op(0))
        return creation.drawn(mask, shape, work)
    u = creation.rand(tuple(shape), dtype=work)
    if type(p).__name__ == "SymScalar":
        # A lifted p (Dropout.p set between compiled calls: tracec.lifted_state):
        # TF's ops make it an operand read at each call (ops' would refuse it).
        return TF.mul(ops.cast(TF.lt(u, 1.0 - p), work), 1.0 / (1.0 - p) if p < 1 else 0.0)
    return ops.mul(ops.cast(ops.lt(u, 1.0 - p), work), 1.0 / (1.0 - p) if p < 1 else 0.0)


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    w = dispatching_operand(input, p, training, inplace)
    if w is not None:
        return w.__tracec_dispatch__(dropout, (input, p, training, inplace), {})
    _tensor(input, "dropout")
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _apply(lambda x: TF.mul(x, 0.0), input, inplace)
    mask = _keep_mask(input.shape, p, input)
    return _apply(lambda x: TF.mul(x, mask), input, inplace)


def _feature_dropout(input, p, training, inplace, batched):
    """Zero whole channels: one draw per (sample, channel); ``batched``
    says whether dimension 0 is the batch (else the channels)."""
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _apply(lambda x: TF.mul(x, 0.0), input, inplace)
    lead = 2 if batched else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    mask = _keep_mask(shape, p, input)
    return _apply(lambda x: TF.mul(x, mask), input, inplace)


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. "
            "Note that dropout1d exists to provide channel-wise dropout on inputs with 1 "
            "spatial dimension, a channel dimension, and an optional batch dimension "
            "(i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, inplace, input.ndim == 3)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):
    # PyTorch 2.13's behaviour, warnings included: other ranks are deprecated
    # but run (dimension 0 as batch, 1 as channel), and a 3-D input is taken
    # as (N, C, L), not as an unbatched (C, H, W).
    _check_p(p)
    nd = input.ndim
    if nd not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {nd}-D input to dropout2d, which is deprecated "
            "and will result in an error in a future release. To retain the behavior "
            "and silence this warning, please use dropout instead. Note that dropout2d "
            "exists to provide channel-wise dropout on inputs with 2 spatial dimensions, "
            "a channel dimension, and an optional batch dimension (i.e. 3D or 4D inputs).",
            stacklevel=2)
    if nd == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
            "1D dropout behavior is desired - input is interpreted as shape (N, C, L), where C "
            "is the channel dim. This behavior will change in a future release to interpret the "
            "input as one without a batch dimension, i.e. shape (C, H, W). To maintain the 1D "
            "channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2)
    if nd < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return _feature_dropout(input, p, training, inplace, True)


def _elu(x, alpha: float, scale: float = 1.0, input_scale: float = 1.0):
    """PyTorch's elu family: ``x <= 0 ? alpha * expm1(x * input_scale) :
    x * scale`` (NaN takes the second branch, and its gradient there is
    ``scale``); expm1 sees only the non-positive part, so its gradient stays
    finite where the other branch is taken (expm1(inf) * 0 would be NaN),
    and -0.0 stays -0.0."""
    neg = ops.le(x, 0)
    xn = ops.where(neg, x, 0.0)
    if input_scale != 1:
        xn = TF.mul(xn, input_scale)
    pos = TF.mul(x, scale) if scale != 1 else x
    return ops.where(neg, TF.mul(TF.expm1(xn), alpha), pos)


def _hardtanh(x, lo: float, hi: float):
    """PyTorch's hardtanh: clamp's value, gradient 1 strictly inside
    ``(lo, hi)`` and at NaN, 0 at and beyond the bounds (clamp's own
    gradient is 1 at the bounds; relu6 at 0 must give 0)."""
    if not x.dtype.is_floating_point:     # PyTorch truncates the bounds for integers
        lo, hi = int(lo), int(hi)
    if (isinstance(x, Tensor) and x.dtype in (dt.float32, dt.float64) and x.ndim
            and isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo <= hi
            and eager_direct(x)):
        out = _hardtanh_direct(x, lo, hi)
        if out is not None:
            return out
    outside = ops.logical_or(ops.le(x, lo), ops.ge(x, hi))
    return ops.where(outside, ops.stop_gradient(TF.clamp(x, lo, hi)), x)


_WHERE = ops.elementwise.where_p


def _hardtanh_direct(x: Tensor, lo: float, hi: float):
    """``_hardtanh``'s value and node without its eight binds (MobileNet's
    ReLU6 follows every convolution but the last of a block): the value is
    ``np.clip``'s, a vectorized ``min(max(x, lo), hi)`` that is clamp's two
    wheres bit for bit (NaN stays x's) but for a zero of the other sign than
    a zero bound (clamp keeps x's, clip takes the bound's): where a bound is
    zero and ``x`` holds a zero, None (the caller takes the primitives).
    The node is the final where on ``outside``, as the primitives' (the
    gradient is ``where(outside, 0, g)``)."""
    xd = x._data
    d = x.dtype
    lo_a, hi_a = weak_scalar(lo, d), weak_scalar(hi, d)
    if (not lo_a or not hi_a) and not np.all(xd):     # a zero bound, a zero in x
        return None
    value = np.clip(xd, lo_a, hi_a)
    outside = np.less_equal(xd, lo_a)
    outside |= np.greater_equal(xd, hi_a)
    mask = Tensor._make(outside, dt.bool_)
    return apply_direct(_WHERE, {}, (mask, 0.0, x), value, d)


def _logsigmoid(x):
    """PyTorch's ``min(x, 0) - log1p(exp(-|x|))``, with its gradient at 0
    (0.5: |x| differentiated as x there)."""
    neg = ops.lt(x, 0)
    a = ops.where(neg, TF.neg(x), x)
    return TF.sub(ops.where(neg, x, 0.0), TF.log1p(TF.exp(TF.neg(a))))
