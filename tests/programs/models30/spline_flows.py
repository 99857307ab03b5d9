# Neural spline flows the way bayesiains/nflows writes them, in plain torch
# (the library's classes copied down to what a 4-d density needs):
# nflows/utils/torchutils.py (searchsorted as torch.sum(inputs[..., None] >=
# bin_locations, dim=-1) - 1 after an in-place `bin_locations[..., -1] +=
# eps`, sum_except_batch), transforms/splines/rational_quadratic.py
# (unconstrained_rational_quadratic_spline: the inside / outside interval
# masks, F.pad(unnormalized_derivatives, pad=(1, 1)) with the constant tails
# written in place, the tuple assignment into outputs[inside_interval_mask];
# rational_quadratic_spline: InputOutsideDomain, F.softmax widths with
# min_bin_width, torch.cumsum + F.pad(cumwidths, pad=(1, 0), mode="constant",
# value=0.0), the in-place endpoints, softplus derivatives,
# .gather(-1, bin_idx)[..., 0], the inverse's quadratic with
# `discriminant = b.pow(2) - 4 * a * c` and `assert (discriminant >=
# 0).all()`, the log-abs-det), transforms/coupling.py (CouplingTransform's
# identity_features / transform_features buffers from masked_select, the
# torch.empty_like outputs written by index, AffineCouplingTransform's
# sigmoid(x + 2) + 1e-3 scale, PiecewiseRationalQuadraticCouplingTransform
# dividing the width / height slices of the net's output in place by
# np.sqrt(hidden_features)), transforms/normalization.py (BatchNorm with the
# softplus-constrained weight, running statistics via mul_ / add_, the
# eval-only inverse and its InverseNotAvailable), transforms/permutations.py
# (ReversePermutation by index_select, its argsort inverse),
# transforms/base.py (CompositeTransform's cascade, reversed through
# ModuleList[::-1] for the inverse), distributions/normal.py (StandardNormal
# with its non-persistent float64 _log_z buffer), flows/base.py (log_prob,
# sample, transform_to_noise), nn/nets/resnet.py (ResidualNet with the
# near-zero uniform init of each block's last layer) and the examples'
# maximum-likelihood loop with Adam + CosineAnnealingLR and
# clip_grad_norm_. Also the masked (torch.where) affine coupling of RealNVP
# written in plain torch, as many flow tutorials do. Changes for a CPU test:
# a 4-d two-moons-times-gaussian data set and the weights from numpy, small
# nets, a few steps; sampling noise from numpy (torch.randn samples are only
# checked for shape). Then the RealNVP flow's training step under
# torch.compile against the same step eagerly (the spline flow's
# data-dependent masks would break the graph).
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import init

DEFAULT_MIN_BIN_WIDTH = 1e-3
DEFAULT_MIN_BIN_HEIGHT = 1e-3
DEFAULT_MIN_DERIVATIVE = 1e-3


class InputOutsideDomain(Exception):
    """Exception to be thrown when the input to a transform is not within its domain."""
    pass


class InverseNotAvailable(Exception):
    """Exception to be raised when a transform does not have an inverse."""
    pass


# ---------------------------------------------------------------- utils/torchutils.py
def sum_except_batch(x, num_batch_dims=1):
    """Sums all elements of `x` except for the first `num_batch_dims` dimensions."""
    reduce_dims = list(range(num_batch_dims, x.ndimension()))
    return torch.sum(x, dim=reduce_dims)


def searchsorted(bin_locations, inputs, eps=1e-6):
    bin_locations[..., -1] += eps
    return torch.sum(inputs[..., None] >= bin_locations, dim=-1) - 1


# ---------------------------------------------------------------- transforms/splines/rational_quadratic.py
def unconstrained_rational_quadratic_spline(
    inputs,
    unnormalized_widths,
    unnormalized_heights,
    unnormalized_derivatives,
    inverse=False,
    tails="linear",
    tail_bound=1.0,
    min_bin_width=DEFAULT_MIN_BIN_WIDTH,
    min_bin_height=DEFAULT_MIN_BIN_HEIGHT,
    min_derivative=DEFAULT_MIN_DERIVATIVE,
):
    inside_interval_mask = (inputs >= -tail_bound) & (inputs <= tail_bound)
    outside_interval_mask = ~inside_interval_mask

    outputs = torch.zeros_like(inputs)
    logabsdet = torch.zeros_like(inputs)

    if tails == "linear":
        unnormalized_derivatives = F.pad(unnormalized_derivatives, pad=(1, 1))
        constant = np.log(np.exp(1 - min_derivative) - 1)
        unnormalized_derivatives[..., 0] = constant
        unnormalized_derivatives[..., -1] = constant

        outputs[outside_interval_mask] = inputs[outside_interval_mask]
        logabsdet[outside_interval_mask] = 0
    else:
        raise RuntimeError("{} tails are not implemented.".format(tails))

    if torch.any(inside_interval_mask):
        (
            outputs[inside_interval_mask],
            logabsdet[inside_interval_mask],
        ) = rational_quadratic_spline(
            inputs=inputs[inside_interval_mask],
            unnormalized_widths=unnormalized_widths[inside_interval_mask, :],
            unnormalized_heights=unnormalized_heights[inside_interval_mask, :],
            unnormalized_derivatives=unnormalized_derivatives[inside_interval_mask, :],
            inverse=inverse,
            left=-tail_bound,
            right=tail_bound,
            bottom=-tail_bound,
            top=tail_bound,
            min_bin_width=min_bin_width,
            min_bin_height=min_bin_height,
            min_derivative=min_derivative,
        )

    return outputs, logabsdet


def rational_quadratic_spline(
    inputs,
    unnormalized_widths,
    unnormalized_heights,
    unnormalized_derivatives,
    inverse=False,
    left=0.0,
    right=1.0,
    bottom=0.0,
    top=1.0,
    min_bin_width=DEFAULT_MIN_BIN_WIDTH,
    min_bin_height=DEFAULT_MIN_BIN_HEIGHT,
    min_derivative=DEFAULT_MIN_DERIVATIVE,
):
    if torch.min(inputs) < left or torch.max(inputs) > right:
        raise InputOutsideDomain()

    num_bins = unnormalized_widths.shape[-1]

    if min_bin_width * num_bins > 1.0:
        raise ValueError("Minimal bin width too large for the number of bins")
    if min_bin_height * num_bins > 1.0:
        raise ValueError("Minimal bin height too large for the number of bins")

    widths = F.softmax(unnormalized_widths, dim=-1)
    widths = min_bin_width + (1 - min_bin_width * num_bins) * widths
    cumwidths = torch.cumsum(widths, dim=-1)
    cumwidths = F.pad(cumwidths, pad=(1, 0), mode="constant", value=0.0)
    cumwidths = (right - left) * cumwidths + left
    cumwidths[..., 0] = left
    cumwidths[..., -1] = right
    widths = cumwidths[..., 1:] - cumwidths[..., :-1]

    derivatives = min_derivative + F.softplus(unnormalized_derivatives)

    heights = F.softmax(unnormalized_heights, dim=-1)
    heights = min_bin_height + (1 - min_bin_height * num_bins) * heights
    cumheights = torch.cumsum(heights, dim=-1)
    cumheights = F.pad(cumheights, pad=(1, 0), mode="constant", value=0.0)
    cumheights = (top - bottom) * cumheights + bottom
    cumheights[..., 0] = bottom
    cumheights[..., -1] = top
    heights = cumheights[..., 1:] - cumheights[..., :-1]

    if inverse:
        bin_idx = searchsorted(cumheights, inputs)[..., None]
    else:
        bin_idx = searchsorted(cumwidths, inputs)[..., None]

    input_cumwidths = cumwidths.gather(-1, bin_idx)[..., 0]
    input_bin_widths = widths.gather(-1, bin_idx)[..., 0]

    input_cumheights = cumheights.gather(-1, bin_idx)[..., 0]
    delta = heights / widths
    input_delta = delta.gather(-1, bin_idx)[..., 0]

    input_derivatives = derivatives.gather(-1, bin_idx)[..., 0]
    input_derivatives_plus_one = derivatives[..., 1:].gather(-1, bin_idx)[..., 0]

    input_heights = heights.gather(-1, bin_idx)[..., 0]

    if inverse:
        a = (inputs - input_cumheights) * (
            input_derivatives + input_derivatives_plus_one - 2 * input_delta
        ) + input_heights * (input_delta - input_derivatives)
        b = input_heights * input_derivatives - (inputs - input_cumheights) * (
            input_derivatives + input_derivatives_plus_one - 2 * input_delta
        )
        c = -input_delta * (inputs - input_cumheights)

        discriminant = b.pow(2) - 4 * a * c
        assert (discriminant >= 0).all()

        root = (2 * c) / (-b - torch.sqrt(discriminant))
        # root = (- b + torch.sqrt(discriminant)) / (2 * a)
        outputs = root * input_bin_widths + input_cumwidths

        theta_one_minus_theta = root * (1 - root)
        denominator = input_delta + (
            (input_derivatives + input_derivatives_plus_one - 2 * input_delta)
            * theta_one_minus_theta
        )
        derivative_numerator = input_delta.pow(2) * (
            input_derivatives_plus_one * root.pow(2)
            + 2 * input_delta * theta_one_minus_theta
            + input_derivatives * (1 - root).pow(2)
        )
        logabsdet = torch.log(derivative_numerator) - 2 * torch.log(denominator)

        return outputs, -logabsdet
    else:
        theta = (inputs - input_cumwidths) / input_bin_widths
        theta_one_minus_theta = theta * (1 - theta)

        numerator = input_heights * (
            input_delta * theta.pow(2) + input_derivatives * theta_one_minus_theta
        )
        denominator = input_delta + (
            (input_derivatives + input_derivatives_plus_one - 2 * input_delta)
            * theta_one_minus_theta
        )
        outputs = input_cumheights + numerator / denominator

        derivative_numerator = input_delta.pow(2) * (
            input_derivatives_plus_one * theta.pow(2)
            + 2 * input_delta * theta_one_minus_theta
            + input_derivatives * (1 - theta).pow(2)
        )
        logabsdet = torch.log(derivative_numerator) - 2 * torch.log(denominator)

        return outputs, logabsdet


# ---------------------------------------------------------------- transforms/base.py
class Transform(nn.Module):
    """Base class for all transform objects."""

    def forward(self, inputs, context=None):
        raise NotImplementedError()

    def inverse(self, inputs, context=None):
        raise InverseNotAvailable()


class CompositeTransform(Transform):
    """Composes several transforms into one, in the order they are given."""

    def __init__(self, transforms):
        super().__init__()
        self._transforms = nn.ModuleList(transforms)

    @staticmethod
    def _cascade(inputs, funcs, context):
        batch_size = inputs.shape[0]
        outputs = inputs
        total_logabsdet = inputs.new_zeros(batch_size)
        for func in funcs:
            outputs, logabsdet = func(outputs, context)
            total_logabsdet += logabsdet
        return outputs, total_logabsdet

    def forward(self, inputs, context=None):
        funcs = self._transforms
        return self._cascade(inputs, funcs, context)

    def inverse(self, inputs, context=None):
        funcs = (transform.inverse for transform in self._transforms[::-1])
        return self._cascade(inputs, funcs, context)


# ---------------------------------------------------------------- transforms/permutations.py
class Permutation(Transform):
    """Permutes inputs on a given dimension using a given permutation."""

    def __init__(self, permutation, dim=1):
        if permutation.ndimension() != 1:
            raise ValueError("Permutation must be a 1D tensor.")

        super().__init__()
        self._dim = dim
        self.register_buffer("_permutation", permutation)

    @property
    def _inverse_permutation(self):
        return torch.argsort(self._permutation)

    @staticmethod
    def _permute(inputs, permutation, dim):
        if dim >= inputs.ndimension():
            raise ValueError("No dimension {} in inputs.".format(dim))
        if inputs.shape[dim] != len(permutation):
            raise ValueError(
                "Dimension {} in inputs must be of size {}.".format(
                    dim, len(permutation)
                )
            )
        batch_size = inputs.shape[0]
        outputs = torch.index_select(inputs, dim, permutation)
        logabsdet = inputs.new_zeros(batch_size)
        return outputs, logabsdet

    def forward(self, inputs, context=None):
        return self._permute(inputs, self._permutation, self._dim)

    def inverse(self, inputs, context=None):
        return self._permute(inputs, self._inverse_permutation, self._dim)


class ReversePermutation(Permutation):
    """Reverses the elements of the input. Only works with 1D inputs."""

    def __init__(self, features, dim=1):
        super().__init__(torch.arange(features - 1, -1, -1), dim)


# ---------------------------------------------------------------- transforms/normalization.py
class BatchNorm(Transform):
    """Transform that performs batch normalization."""

    def __init__(self, features, eps=1e-5, momentum=0.1, affine=True):
        super().__init__()

        self.momentum = momentum
        self.eps = eps
        constant = np.log(np.exp(1 - eps) - 1)
        self.unconstrained_weight = nn.Parameter(constant * torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))

        self.register_buffer("running_mean", torch.zeros(features))
        self.register_buffer("running_var", torch.zeros(features))

    @property
    def weight(self):
        return F.softplus(self.unconstrained_weight) + self.eps

    def forward(self, inputs, context=None):
        if inputs.dim() != 2:
            raise ValueError(
                "Expected 2-dim inputs, got inputs of shape: {}".format(inputs.shape)
            )

        if self.training:
            mean, var = inputs.mean(0), inputs.var(0)
            self.running_mean.mul_(1 - self.momentum).add_(mean.detach() * self.momentum)
            self.running_var.mul_(1 - self.momentum).add_(var.detach() * self.momentum)
        else:
            mean, var = self.running_mean, self.running_var

        outputs = (
            self.weight * ((inputs - mean) / torch.sqrt((var + self.eps)))
            + self.bias
        )

        logabsdet_ = torch.log(self.weight) - 0.5 * torch.log(var + self.eps)
        logabsdet = torch.sum(logabsdet_) * inputs.new_ones(inputs.shape[0])

        return outputs, logabsdet

    def inverse(self, inputs, context=None):
        # Can only invert when in eval mode.
        if self.training:
            raise InverseNotAvailable(
                "Batch norm inverse is only available in eval mode, not in training mode."
            )
        if inputs.dim() != 2:
            raise ValueError(
                "Expected 2-dim inputs, got inputs of shape: {}".format(inputs.shape)
            )

        outputs = (
            torch.sqrt(self.running_var + self.eps)
            * ((inputs - self.bias) / self.weight)
            + self.running_mean
        )

        logabsdet_ = -torch.log(self.weight) + 0.5 * torch.log(self.running_var + self.eps)
        logabsdet = torch.sum(logabsdet_) * inputs.new_ones(inputs.shape[0])

        return outputs, logabsdet


# ---------------------------------------------------------------- nn/nets/resnet.py
class ResidualBlock(nn.Module):
    """A general-purpose residual block. Works only with 1-dim inputs."""

    def __init__(self, features, context_features, activation=F.relu, dropout_probability=0.0,
                 use_batch_norm=False, zero_initialization=True):
        super().__init__()
        self.activation = activation

        self.use_batch_norm = use_batch_norm
        if use_batch_norm:
            self.batch_norm_layers = nn.ModuleList(
                [nn.BatchNorm1d(features, eps=1e-3) for _ in range(2)]
            )
        if context_features is not None:
            self.context_layer = nn.Linear(context_features, features)
        self.linear_layers = nn.ModuleList(
            [nn.Linear(features, features) for _ in range(2)]
        )
        self.dropout = nn.Dropout(p=dropout_probability)
        if zero_initialization:
            init.uniform_(self.linear_layers[-1].weight, -1e-3, 1e-3)
            init.uniform_(self.linear_layers[-1].bias, -1e-3, 1e-3)

    def forward(self, inputs, context=None):
        temps = inputs
        if self.use_batch_norm:
            temps = self.batch_norm_layers[0](temps)
        temps = self.activation(temps)
        temps = self.linear_layers[0](temps)
        if self.use_batch_norm:
            temps = self.batch_norm_layers[1](temps)
        temps = self.activation(temps)
        temps = self.dropout(temps)
        temps = self.linear_layers[1](temps)
        if context is not None:
            temps = F.glu(torch.cat((temps, self.context_layer(context)), dim=1), dim=1)
        return inputs + temps


class ResidualNet(nn.Module):
    """A general-purpose residual network. Works only with 1-dim inputs."""

    def __init__(self, in_features, out_features, hidden_features, context_features=None,
                 num_blocks=2, activation=F.relu, dropout_probability=0.0, use_batch_norm=False):
        super().__init__()
        self.hidden_features = hidden_features
        self.context_features = context_features
        if context_features is not None:
            self.initial_layer = nn.Linear(in_features + context_features, hidden_features)
        else:
            self.initial_layer = nn.Linear(in_features, hidden_features)
        self.blocks = nn.ModuleList(
            [
                ResidualBlock(
                    features=hidden_features,
                    context_features=context_features,
                    activation=activation,
                    dropout_probability=dropout_probability,
                    use_batch_norm=use_batch_norm,
                )
                for _ in range(num_blocks)
            ]
        )
        self.final_layer = nn.Linear(hidden_features, out_features)

    def forward(self, inputs, context=None):
        if context is None:
            temps = self.initial_layer(inputs)
        else:
            temps = self.initial_layer(torch.cat((inputs, context), dim=1))
        for block in self.blocks:
            temps = block(temps, context=context)
        outputs = self.final_layer(temps)
        return outputs


# ---------------------------------------------------------------- transforms/coupling.py
class CouplingTransform(Transform):
    """A base class for coupling layers. Supports 2D inputs (NxD), as well as 4D inputs for
    images (NxCxHxW). For images the splitting is done on the channel dimension, using the
    provided 1D mask."""

    def __init__(self, mask, transform_net_create_fn):
        mask = torch.as_tensor(mask)
        if mask.dim() != 1:
            raise ValueError("Mask must be a 1-dim tensor.")
        if mask.numel() <= 0:
            raise ValueError("Mask can't be empty.")

        super().__init__()
        self.features = len(mask)
        features_vector = torch.arange(self.features)

        self.register_buffer(
            "identity_features", features_vector.masked_select(mask <= 0)
        )
        self.register_buffer(
            "transform_features", features_vector.masked_select(mask > 0)
        )

        assert self.num_identity_features + self.num_transform_features == self.features

        self.transform_net = transform_net_create_fn(
            self.num_identity_features,
            self.num_transform_features * self._transform_dim_multiplier(),
        )

    @property
    def num_identity_features(self):
        return len(self.identity_features)

    @property
    def num_transform_features(self):
        return len(self.transform_features)

    def forward(self, inputs, context=None):
        if inputs.dim() not in [2, 4]:
            raise ValueError("Inputs must be a 2D or a 4D tensor.")

        if inputs.shape[1] != self.features:
            raise ValueError(
                "Expected features = {}, got {}.".format(self.features, inputs.shape[1])
            )

        identity_split = inputs[:, self.identity_features, ...]
        transform_split = inputs[:, self.transform_features, ...]

        transform_params = self.transform_net(identity_split, context)
        transform_split, logabsdet = self._coupling_transform_forward(
            inputs=transform_split, transform_params=transform_params
        )

        outputs = torch.empty_like(inputs)
        outputs[:, self.identity_features, ...] = identity_split
        outputs[:, self.transform_features, ...] = transform_split

        return outputs, logabsdet

    def inverse(self, inputs, context=None):
        if inputs.dim() not in [2, 4]:
            raise ValueError("Inputs must be a 2D or a 4D tensor.")

        if inputs.shape[1] != self.features:
            raise ValueError(
                "Expected features = {}, got {}.".format(self.features, inputs.shape[1])
            )

        identity_split = inputs[:, self.identity_features, ...]
        transform_split = inputs[:, self.transform_features, ...]

        logabsdet = 0.0

        transform_params = self.transform_net(identity_split, context)
        transform_split, logabsdet_split = self._coupling_transform_inverse(
            inputs=transform_split, transform_params=transform_params
        )
        logabsdet += logabsdet_split

        outputs = torch.empty_like(inputs)
        outputs[:, self.identity_features] = identity_split
        outputs[:, self.transform_features] = transform_split

        return outputs, logabsdet


class AffineCouplingTransform(CouplingTransform):
    """An affine coupling layer that scales and shifts part of the variables."""

    def __init__(self, mask, transform_net_create_fn, scale_activation=None):
        self.scale_activation = scale_activation or (lambda x: torch.sigmoid(x + 2) + 1e-3)
        super().__init__(mask, transform_net_create_fn)

    def _transform_dim_multiplier(self):
        return 2

    def _scale_and_shift(self, transform_params):
        unconstrained_scale = transform_params[:, self.num_transform_features:, ...]
        shift = transform_params[:, :self.num_transform_features, ...]
        scale = self.scale_activation(unconstrained_scale)
        return scale, shift

    def _coupling_transform_forward(self, inputs, transform_params):
        scale, shift = self._scale_and_shift(transform_params)
        log_scale = torch.log(scale)
        outputs = inputs * scale + shift
        logabsdet = sum_except_batch(log_scale, num_batch_dims=1)
        return outputs, logabsdet

    def _coupling_transform_inverse(self, inputs, transform_params):
        scale, shift = self._scale_and_shift(transform_params)
        log_scale = torch.log(scale)
        outputs = (inputs - shift) / scale
        logabsdet = -sum_except_batch(log_scale, num_batch_dims=1)
        return outputs, logabsdet


class PiecewiseRationalQuadraticCouplingTransform(CouplingTransform):
    def __init__(self, mask, transform_net_create_fn, num_bins=10, tails=None, tail_bound=1.0,
                 min_bin_width=DEFAULT_MIN_BIN_WIDTH, min_bin_height=DEFAULT_MIN_BIN_HEIGHT,
                 min_derivative=DEFAULT_MIN_DERIVATIVE):
        self.num_bins = num_bins
        self.min_bin_width = min_bin_width
        self.min_bin_height = min_bin_height
        self.min_derivative = min_derivative
        self.tails = tails
        self.tail_bound = tail_bound
        super().__init__(mask, transform_net_create_fn)

    def _transform_dim_multiplier(self):
        if self.tails == "linear":
            return self.num_bins * 3 - 1
        else:
            return self.num_bins * 3 + 1

    def _coupling_transform_forward(self, inputs, transform_params):
        return self._coupling_transform(inputs, transform_params, inverse=False)

    def _coupling_transform_inverse(self, inputs, transform_params):
        return self._coupling_transform(inputs, transform_params, inverse=True)

    def _coupling_transform(self, inputs, transform_params, inverse=False):
        if inputs.dim() == 4:
            b, c, h, w = inputs.shape
            # For images, reshape transform_params from Bx(C*?)xHxW to BxCxHxWx?
            transform_params = transform_params.reshape(b, c, -1, h, w).permute(0, 1, 3, 4, 2)
        elif inputs.dim() == 2:
            b, d = inputs.shape
            # For 2D data, reshape transform_params from Bx(D*?) to BxDx?
            transform_params = transform_params.reshape(b, d, -1)

        outputs, logabsdet = self._piecewise_cdf(inputs, transform_params, inverse)

        return outputs, sum_except_batch(logabsdet)

    def _piecewise_cdf(self, inputs, transform_params, inverse=False):
        unnormalized_widths = transform_params[..., : self.num_bins]
        unnormalized_heights = transform_params[..., self.num_bins: 2 * self.num_bins]
        unnormalized_derivatives = transform_params[..., 2 * self.num_bins:]

        if hasattr(self.transform_net, "hidden_features"):
            unnormalized_widths /= np.sqrt(self.transform_net.hidden_features)
            unnormalized_heights /= np.sqrt(self.transform_net.hidden_features)

        spline_kwargs = {"tails": self.tails, "tail_bound": self.tail_bound}

        return unconstrained_rational_quadratic_spline(
            inputs=inputs,
            unnormalized_widths=unnormalized_widths,
            unnormalized_heights=unnormalized_heights,
            unnormalized_derivatives=unnormalized_derivatives,
            inverse=inverse,
            min_bin_width=self.min_bin_width,
            min_bin_height=self.min_bin_height,
            min_derivative=self.min_derivative,
            **spline_kwargs
        )


# ---------------------------------------------------------------- distributions/normal.py, flows/base.py
class StandardNormal(nn.Module):
    """A multivariate Normal with zero mean and unit covariance."""

    def __init__(self, shape):
        super().__init__()
        self._shape = torch.Size(shape)

        self.register_buffer("_log_z",
                             torch.tensor(0.5 * np.prod(shape) * np.log(2 * np.pi),
                                          dtype=torch.float64),
                             persistent=False)

    def log_prob(self, inputs, context=None):
        if inputs.shape[1:] != self._shape:
            raise ValueError(
                "Expected input of shape {}, got {}".format(
                    self._shape, inputs.shape[1:]
                )
            )
        neg_energy = -0.5 * \
            sum_except_batch(inputs ** 2, num_batch_dims=1)
        return neg_energy - self._log_z

    def sample(self, num_samples, context=None):
        return torch.randn(num_samples, *self._shape, device=self._log_z.device)


class Flow(nn.Module):
    """Base class for all flow objects."""

    def __init__(self, transform, distribution):
        super().__init__()
        self._transform = transform
        self._distribution = distribution

    def log_prob(self, inputs, context=None):
        noise, logabsdet = self._transform(inputs, context=context)
        log_prob = self._distribution.log_prob(noise, context=context)
        return log_prob + logabsdet

    def sample(self, num_samples, context=None):
        noise = self._distribution.sample(num_samples, context=context)
        samples, _ = self._transform.inverse(noise, context=context)
        return samples

    def transform_to_noise(self, inputs, context=None):
        noise, _ = self._transform(inputs, context=context)
        return noise


# ---------------------------------------------------------------- RealNVP with torch.where masks
class MaskedAffineCoupling(nn.Module):
    """x_b = mask * x; y = x_b + (1 - mask) * (x * exp(s(x_b)) + t(x_b))."""

    def __init__(self, mask, hidden):
        super().__init__()
        self.register_buffer("mask", torch.as_tensor(mask, dtype=torch.float32))
        d = len(mask)
        self.s = nn.Sequential(nn.Linear(d, hidden), nn.LeakyReLU(), nn.Linear(hidden, d), nn.Tanh())
        self.t = nn.Sequential(nn.Linear(d, hidden), nn.LeakyReLU(), nn.Linear(hidden, d))

    def forward(self, x, context=None):
        x_b = self.mask * x
        s = self.s(x_b) * (1 - self.mask)
        t = self.t(x_b) * (1 - self.mask)
        y = torch.where(self.mask.bool(), x, x * torch.exp(s) + t)
        return y, s.sum(dim=1)

    def inverse(self, y, context=None):
        y_b = self.mask * y
        s = self.s(y_b) * (1 - self.mask)
        t = self.t(y_b) * (1 - self.mask)
        x = torch.where(self.mask.bool(), y, (y - t) * torch.exp(-s))
        return x, -s.sum(dim=1)


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed, std=0.2):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy(r.normal(0, 1.0 / np.sqrt(p.shape[1]), tuple(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


def two_moons_4d(rng, n):
    t = rng.uniform(0, np.pi, n)
    upper = rng.uniform(0, 1, n) < 0.5
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    data = np.stack([x - 0.5, y - 0.25, 0.5 * rng.normal(0, 1, n) + 0.3 * x, rng.normal(0, 0.4, n)], 1)
    return (data + rng.normal(0, 0.05, data.shape)).astype(np.float32)


# the spline on its own
rng = np.random.default_rng(0)
inputs = torch.tensor([[-1.5, -0.9, -0.3, 0.0], [0.2, 0.7, 0.999, 2.0]])
uw = torch.from_numpy(rng.normal(0, 1, (2, 4, 5)).astype(np.float32)).requires_grad_()
uh = torch.from_numpy(rng.normal(0, 1, (2, 4, 5)).astype(np.float32)).requires_grad_()
ud = torch.from_numpy(rng.normal(0, 1, (2, 4, 4)).astype(np.float32)).requires_grad_()
out, lad = unconstrained_rational_quadratic_spline(inputs, uw, uh, ud, tails="linear", tail_bound=1.0)
print("spline", fmt(out, 8), fmt(lad, 8))
back, lad_inv = unconstrained_rational_quadratic_spline(out, uw, uh, ud, inverse=True, tails="linear", tail_bound=1.0)
print("spline inverse", fmt(back, 8), "inverse(f(x)) == x", bool((back - inputs).abs().max() < 1e-4),
      "logdets cancel", bool((lad + lad_inv).abs().max() < 1e-4))
(out.sum() + lad.sum()).backward()
print("spline grads", fmt(uw.grad[0, 1], 5), fmt(uh.grad[1, 0], 5), fmt(ud.grad[0, 2], 4))
locs = torch.tensor([[0.0, 0.25, 0.5, 1.0]])
print("searchsorted", searchsorted(locs, torch.tensor([[0.0, 0.3, 0.99, 1.0]])).tolist(), fmt(locs, 4))
try:
    rational_quadratic_spline(torch.tensor([1.5]), uw[0, :1], uh[0, :1], ud[0, :1], left=-1.0, right=1.0,
                              bottom=-1.0, top=1.0)
except InputOutsideDomain as e:
    print("InputOutsideDomain", type(e).__name__)
try:
    rational_quadratic_spline(torch.tensor([0.5]), uw[0, :1], uh[0, :1], ud[0, :1], min_bin_width=0.3)
except ValueError as e:
    print("ValueError", e)

# the flow: BatchNorm, then spline couplings with reverse permutations between
num_features, hidden = 4, 16
transforms = [BatchNorm(num_features)]
for i in range(2):
    transforms.append(PiecewiseRationalQuadraticCouplingTransform(
        mask=[1, 0, 1, 0] if i % 2 == 0 else [0, 1, 0, 1],
        transform_net_create_fn=lambda in_f, out_f: ResidualNet(in_f, out_f, hidden_features=hidden, num_blocks=1),
        num_bins=4, tails="linear", tail_bound=3.0))
    transforms.append(ReversePermutation(features=num_features))
transform = CompositeTransform(transforms)
flow = Flow(transform, StandardNormal([num_features]))
coupling = transform._transforms[1]
print("coupling buffers", coupling.identity_features.tolist(), coupling.transform_features.tolist(),
      coupling.identity_features.dtype, "net out", coupling.transform_net.final_layer.out_features)
print("near-zero init", bool(coupling.transform_net.blocks[0].linear_layers[-1].weight.abs().max() <= 1e-3))
print("state_dict", [k for k in flow.state_dict() if not k.endswith(("weight", "bias"))])
print("log_z", flow._distribution._log_z.dtype, f"{flow._distribution._log_z.item():.6f}")
load_numpy(flow, 1)

data = two_moons_4d(rng, 384)
x_train = torch.from_numpy(data[:320])
x_test = torch.from_numpy(data[320:])
flow.eval()
with torch.no_grad():
    print("initial test log_prob", f"{flow.log_prob(x_test).mean().item():.4f}",
          "manual log_prob", f"{(torch.sum(-0.5 * flow.transform_to_noise(x_test[:3]) ** 2, dim=1) - 0.5 * num_features * np.log(2 * np.pi) + transform(x_test[:3])[1]).mean().item():.4f}")
flow.train()
try:
    transform._transforms[0].inverse(x_test)
except InverseNotAvailable as e:
    print("InverseNotAvailable", e)

optimizer = torch.optim.Adam(flow.parameters(), lr=3e-3)
num_iter = 8
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, num_iter, 0)
batch_size = 64
for it in range(num_iter):
    x = x_train[(it * batch_size) % 320:(it * batch_size) % 320 + batch_size]
    optimizer.zero_grad()
    loss = -flow.log_prob(inputs=x).mean()
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(flow.parameters(), 5.0)
    optimizer.step()
    scheduler.step()
    if it % 2 == 1:
        print(f"iter {it} loss {loss.item():.4f} grad norm {norm.item():.4f} lr {scheduler.get_last_lr()[0]:.6f}")
bn = transform._transforms[0]
print("running stats", fmt(bn.running_mean), fmt(bn.running_var), "weight", fmt(bn.weight))
print("grads", fmt(coupling.transform_net.final_layer.weight.grad), fmt(bn.unconstrained_weight.grad))

flow.eval()
with torch.no_grad():
    test_lp = flow.log_prob(x_test)
    print("test log_prob", f"{test_lp.mean().item():.4f}", fmt(test_lp, 4))
    z, lad_f = transform(x_test)
    x_rec, lad_i = transform.inverse(z)
    print("inverse(forward(x)) == x", bool((x_rec - x_test).abs().max() < 1e-4),
          "logdets cancel", bool((lad_f + lad_i).abs().max() < 1e-3))
    noise = torch.from_numpy(rng.normal(0, 1, (5, num_features)).astype(np.float32))
    samples, _ = transform.inverse(noise)
    print("samples from numpy noise", fmt(samples, 8))
    torch.manual_seed(0)
    print("sample", tuple(flow.sample(7).shape), bool(torch.isfinite(flow.sample(7)).all()))

# RealNVP with torch.where masks, trained the same way, then its step under
# torch.compile against the same step eagerly
# (BatchNorm first: after the last coupling, the batch mean it subtracts
# would cancel that coupling's shift biases, whose gradients would be
# rounding noise)
realnvp = CompositeTransform([BatchNorm(num_features), MaskedAffineCoupling([1, 1, 0, 0], 16),
                              MaskedAffineCoupling([0, 0, 1, 1], 16), MaskedAffineCoupling([1, 0, 1, 0], 16)])
nvp = Flow(realnvp, StandardNormal([num_features]))
load_numpy(nvp, 2)
nvp_opt = torch.optim.Adam(nvp.parameters(), lr=1e-2)


def nvp_step(x):
    nvp_opt.zero_grad()
    loss = -nvp.log_prob(inputs=x).mean()
    loss.backward()
    nvp_opt.step()
    return loss


for it in range(4):
    loss = nvp_step(x_train[it * 64:(it + 1) * 64])
print("realnvp loss", f"{loss.item():.4f}")
nvp.eval()
with torch.no_grad():
    z, lad_f = realnvp(x_test)
    x_rec, lad_i = realnvp.inverse(z)
print("realnvp inverse(forward(x)) == x", bool((x_rec - x_test).abs().max() < 1e-4),
      "logdets cancel", bool((lad_f + lad_i).abs().max() < 1e-3), fmt(z, 4))
nvp.train()
state, opt_state = copy.deepcopy(nvp.state_dict()), copy.deepcopy(nvp_opt.state_dict())
xb = x_train[:64]
eager = [nvp_step(xb).item() for _ in range(2)]
after = {k: v.clone() for k, v in nvp.state_dict().items()}
nvp.load_state_dict(state)
nvp_opt.load_state_dict(opt_state)
cstep = torch.compile(nvp_step)
compiled = [cstep(xb).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(nvp.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
