"""``tracec.nn.utils.fusion``: fold an eval-mode batch norm into the
convolution or linear layer before it (PyTorch's ``fuse_*`` helpers).

Invariant: for eval-mode modules, ``fused(x) == bn(conv(x))`` up to
rounding; the inputs are never modified (the fused module is a deep copy)
and the fused weights are new leaf ``Parameter``s with the original
``requires_grad`` and dtypes.
"""
from __future__ import annotations

import copy

from tracec import creation
from tracec import functions as TF
from tracec import shape_ops as S
from tracec.nn.parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]


def _check_eval(layer, bn) -> None:
    if layer.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")


def fuse_conv_bn_eval(conv, bn, transpose: bool = False):
    """A copy of ``conv`` whose weight and bias absorb ``bn``'s statistics."""
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    _check_eval(conv, bn)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose)
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps: float, bn_w, bn_b,
                         transpose: bool = False):
    """``(W * g / sqrt(v + eps), (b - m) * g / sqrt(v + eps) + beta)`` with
    the scale broadcast over output channels (dim 1 when ``transpose``)."""
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    if conv_b is None:
        conv_b = creation.zeros_like(bn_rm)
    if bn_w is None:
        bn_w = creation.ones_like(bn_rm)
    if bn_b is None:
        bn_b = creation.zeros_like(bn_rm)
    rsqrt = TF.rsqrt(TF.add(bn_rv, bn_eps))
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.ndim - 2)
    fused_w = TF.mul(conv_w, S.reshape(TF.mul(bn_w, rsqrt), tuple(shape))).to(w_dtype)
    fused_b = TF.add(TF.mul(TF.mul(TF.sub(conv_b, bn_rm), rsqrt), bn_w), bn_b).to(b_dtype)
    return (Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, conv_b.requires_grad))


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` whose weight and bias absorb ``bn``'s statistics."""
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(linear)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError("To fuse, linear.out_features == bn.num_features or "
                             f"bn.num_features == 1, got linear.out_features="
                             f"{linear.out_features} and bn.num_features={bn.num_features}")
    _check_eval(linear, bn)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps: float, bn_w, bn_b):
    """``(W * s[:, None], (b - m) * s + beta)`` with ``s = g / sqrt(v + eps)``."""
    w_dtype = linear_w.dtype
    b_dtype = linear_b.dtype if linear_b is not None else w_dtype
    if linear_b is None:
        linear_b = creation.zeros_like(bn_rm)
    scale = TF.mul(bn_w, TF.rsqrt(TF.add(bn_rv, bn_eps)))
    fused_w = TF.mul(linear_w, S.unsqueeze(scale, -1).to(w_dtype))
    fused_b = TF.add(TF.mul(TF.sub(linear_b, bn_rm), scale), bn_b).to(b_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, linear_b.requires_grad)
