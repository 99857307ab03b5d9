"""``torch.nn.grad``: the gradients of a convolution with respect to its
input (``convNd_input``) and its weight (``convNd_weight``), given the
gradient of its output.

Each is the vector-Jacobian product of the convolution itself (the
convolution is linear in either argument, so the other argument's values,
zeros here, do not matter): one definition of the convolution's gradient,
the one ``backward`` uses.  The results stay differentiable in
``grad_output`` and the given tensor when those require grad, as
PyTorch's."""
from __future__ import annotations

from tracec import autograd, graph
from tracec.nn import functional as F

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight",
           "conv3d_input", "conv3d_weight"]


def _conv_input(conv, input_size, weight, grad_output, stride, padding, dilation, groups):
    with graph.enable_grad():
        x = weight.new_zeros(tuple(input_size)).requires_grad_(True)
        out = conv(x, weight, None, stride, padding, dilation, groups)
        g, = autograd.grad(out, x, grad_output,
                           create_graph=weight.requires_grad or grad_output.requires_grad)
    return g


def _conv_weight(conv, input, weight_size, grad_output, stride, padding, dilation, groups):
    with graph.enable_grad():
        w = input.new_zeros(tuple(weight_size)).requires_grad_(True)
        out = conv(input, w, None, stride, padding, dilation, groups)
        g, = autograd.grad(out, w, grad_output,
                           create_graph=input.requires_grad or grad_output.requires_grad)
    return g


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _conv_input(F.conv1d, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _conv_weight(F.conv1d, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _conv_input(F.conv2d, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _conv_weight(F.conv2d, input, weight_size, grad_output, stride, padding, dilation, groups)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _conv_input(F.conv3d, input_size, weight, grad_output, stride, padding, dilation, groups)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    return _conv_weight(F.conv3d, input, weight_size, grad_output, stride, padding, dilation, groups)
