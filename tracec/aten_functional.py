"""The ``torch.*`` forms of ``nn.functional`` ops: ``torch.conv2d``,
``torch.dropout(x, p, train)``, ``torch.embedding(weight, indices)``...

They are ATen's signatures, which differ from ``F``'s: positional
``train``/``training`` flags with no default, ``embedding`` takes the weight
first, losses take ``reduction`` as ATen's integer (0 none, 1 mean, 2 sum)
and, called from Python without it, do not reduce (PyTorch 2.13's
bindings default these to 0, whatever the schema says: measured),
``max_pool1d_with_indices`` and ``adaptive_max_pool1d`` return
``(values, indices)``.  Each is a thin adapter over the one ``F``
implementation (one definition per op); nothing here computes.
"""
from __future__ import annotations

from tracec.nn import functional as F

__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "avg_pool1d",
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "batch_norm", "layer_norm", "group_norm",
    "instance_norm", "rms_norm", "dropout", "dropout_", "alpha_dropout", "alpha_dropout_",
    "feature_dropout", "feature_dropout_", "feature_alpha_dropout", "feature_alpha_dropout_",
    "embedding", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
    "native_channel_shuffle", "prelu", "celu", "celu_", "selu", "selu_", "relu_", "rrelu",
    "rrelu_", "threshold", "threshold_", "hardshrink", "bilinear", "cosine_similarity",
    "pairwise_distance", "pdist", "kl_div", "binary_cross_entropy_with_logits",
    "margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
    "poisson_nll_loss", "triplet_margin_loss", "ctc_loss", "constant_pad_nd",
]

_REDUCTION = {0: "none", 1: "mean", 2: "sum"}


def _reduction(r) -> str:
    """ATen's ``reduction`` enum (an int); PyTorch's Python layer also
    passes the strings through."""
    if isinstance(r, str):
        return r
    if r not in _REDUCTION:
        raise ValueError(f"{r} is not a valid value for reduction")
    return _REDUCTION[r]


def _pool_stride(stride):
    # ATen's default stride is the empty list: "same as the kernel".
    return None if stride == [] or stride == () else stride


conv1d, conv2d, conv3d = F.conv1d, F.conv2d, F.conv3d
conv_transpose1d, conv_transpose2d, conv_transpose3d = (
    F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)
avg_pool1d, adaptive_avg_pool1d = F.avg_pool1d, F.adaptive_avg_pool1d
pixel_shuffle, pixel_unshuffle, channel_shuffle = (
    F.pixel_shuffle, F.pixel_unshuffle, F.channel_shuffle)
native_channel_shuffle = F.channel_shuffle
prelu, hardshrink, bilinear = F.prelu, F.hardshrink, F.bilinear
cosine_similarity, pairwise_distance, pdist = F.cosine_similarity, F.pairwise_distance, F.pdist


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):  # noqa: A002
    return F.max_pool1d(input, kernel_size, _pool_stride(stride), padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):  # noqa: A002
    return F.max_pool2d(input, kernel_size, _pool_stride(stride), padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):  # noqa: A002
    return F.max_pool3d(input, kernel_size, _pool_stride(stride), padding, dilation, ceil_mode)


def max_pool1d_with_indices(input, kernel_size, stride=(), padding=0, dilation=1,  # noqa: A002
                            ceil_mode=False):
    return F.max_pool1d(input, kernel_size, _pool_stride(stride), padding, dilation, ceil_mode,
                        return_indices=True)


def adaptive_max_pool1d(input, output_size):  # noqa: A002
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,  # noqa: A002
               cudnn_enabled):
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05,  # noqa: A002
               cudnn_enable=True):
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):  # noqa: A002
    return F.group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,  # noqa: A002
                  momentum, eps, cudnn_enabled):
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):  # noqa: A002
    return F.rms_norm(input, normalized_shape, weight, eps)


def dropout(input, p, train):  # noqa: A002
    return F.dropout(input, p, train)


def dropout_(input, p, train):  # noqa: A002
    return F.dropout(input, p, train, inplace=True)


def alpha_dropout(input, p, train):  # noqa: A002
    return F.alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):  # noqa: A002
    return F.alpha_dropout(input, p, train, inplace=True)


def feature_dropout(input, p, train):  # noqa: A002
    """Whole channels (dim 1) zeroed, for inputs of any rank >= 2."""
    return F.dropout1d(input, p, train) if input.dim() <= 3 else (
        F.dropout2d(input, p, train) if input.dim() == 4 else F.dropout3d(input, p, train))


def feature_dropout_(input, p, train):  # noqa: A002
    return input.copy_(feature_dropout(input, p, train))


def feature_alpha_dropout(input, p, train):  # noqa: A002
    return F.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p, train):  # noqa: A002
    return F.feature_alpha_dropout(input, p, train, inplace=True)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return F.embedding(indices, weight, None if padding_idx == -1 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def celu(input, alpha=1.0):  # noqa: A002
    return F.celu(input, alpha)


def celu_(input, alpha=1.0):  # noqa: A002
    return F.celu(input, alpha, inplace=True)


def selu(input):  # noqa: A002
    return F.selu(input)


def selu_(input):  # noqa: A002
    return F.selu(input, inplace=True)


def relu_(input):  # noqa: A002
    return F.relu(input, inplace=True)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):  # noqa: A002
    return F.rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):  # noqa: A002
    return F.rrelu(input, lower, upper, training, inplace=True)


def threshold(input, threshold, value):  # noqa: A002
    return F.threshold(input, threshold, value)


def threshold_(input, threshold, value):  # noqa: A002
    return F.threshold(input, threshold, value, inplace=True)


def kl_div(input, target, reduction=0, log_target=False):  # noqa: A002
    return F.kl_div(input, target, reduction=_reduction(reduction), log_target=log_target)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,  # noqa: A002
                                     reduction=0):
    return F.binary_cross_entropy_with_logits(input, target, weight,
                                              reduction=_reduction(reduction),
                                              pos_weight=pos_weight)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    return F.margin_ranking_loss(input1, input2, target, margin,
                                 reduction=_reduction(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=0):  # noqa: A002
    return F.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    return F.cosine_embedding_loss(input1, input2, target, margin,
                                   reduction=_reduction(reduction))


def poisson_nll_loss(input, target, log_input, full, eps, reduction):  # noqa: A002
    return F.poisson_nll_loss(input, target, log_input, full, eps=eps,
                              reduction=_reduction(reduction))


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False,
                        reduction=0):
    return F.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                 reduction=_reduction(reduction))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=0,
             zero_infinity=False):
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
                      _reduction(reduction), zero_infinity)


def constant_pad_nd(input, pad, value=0):  # noqa: A002
    return F.pad(input, pad, "constant", value)
