"""Gaps the public programs of ``tests/programs/models4`` found, each
against torch: a custom ``autograd.Function``'s ``grad_fn`` class named
``<Function>Backward`` (EfficientNet-PyTorch's SwishImplementation), and the
convolution layers keeping ``stride`` / ``padding`` / ``dilation`` as given
(EfficientNet's same-padding convolutions read ``self.stride`` back and
widen a one-element list themselves), and the gradients of
``torch.linalg.lstsq`` and ``pinv`` (efficient-kan's curve2coeff)."""
import numpy as np
import pytest
import torch

import tracec


def _swish(lib):
    class SwishImplementation(lib.autograd.Function):
        @staticmethod
        def forward(ctx, i):
            result = i * lib.sigmoid(i)
            ctx.save_for_backward(i)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            i = ctx.saved_tensors[0]
            sigmoid_i = lib.sigmoid(i)
            return grad_output * (sigmoid_i * (1 + i * (1 - sigmoid_i)))
    return SwishImplementation


def test_custom_function_grad_fn_class_is_named_like_torch():
    a = np.linspace(-2, 2, 6, dtype=np.float32)
    outs = []
    for lib in (tracec, torch):
        f = _swish(lib)
        x = lib.tensor(a, requires_grad=True)
        y = f.apply(x)
        z = f.apply(y)
        assert type(y.grad_fn) is type(z.grad_fn) is f._backward_cls
        z.sum().backward()
        outs.append((type(y.grad_fn).__name__, y.grad_fn.name(), x.grad.numpy()))
    assert outs[0][:2] == outs[1][:2] == ("SwishImplementationBackward",) * 2
    assert repr(_swish(tracec)._backward_cls) == \
        repr(_swish(torch)._backward_cls).replace("torch", "tracec")
    np.testing.assert_allclose(outs[0][2], outs[1][2], rtol=1e-6)
    # each Function class has its own
    g1, g2 = _swish(tracec), _swish(tracec)
    x = tracec.ones(2, requires_grad=True)
    assert type(g1.apply(x).grad_fn) is not type(g2.apply(x).grad_fn)


@pytest.mark.parametrize("cls, args", [
    ("Conv2d", dict(stride=[2])), ("Conv2d", dict(stride=(2, 1), padding=[1], dilation=[2])),
    ("Conv2d", dict(stride=2, padding=1, dilation=1)), ("Conv1d", dict(stride=[3], padding=(2,))),
    ("Conv2d", dict(padding="same")), ("ConvTranspose2d", dict(stride=[2, 2], padding=1)),
    ("Conv3d", dict(stride=[1], padding=[1]))])
def test_conv_keeps_stride_padding_dilation_as_given(cls, args):
    tc, tt = getattr(tracec.nn, cls)(4, 4, 3, **args), getattr(torch.nn, cls)(4, 4, 3, **args)
    for k in ("stride", "padding", "dilation", "kernel_size"):
        assert getattr(tc, k) == getattr(tt, k), k
    assert repr(tc) == repr(tt)
    tc.load_state_dict({k: tracec.tensor(v.detach().numpy()) for k, v in tt.state_dict().items()})
    nsp = {"1": 1, "2": 2, "3": 3}[cls[-2]]
    x = np.random.default_rng(0).standard_normal((2, 4) + (7,) * nsp).astype(np.float32)
    np.testing.assert_allclose(tc(tracec.tensor(x)).detach().numpy(),
                               tt(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_same_padding_conv_subclass_reads_stride_back():
    """EfficientNet's Conv2dDynamicSamePadding: a one-element stride list
    widened by the layer itself, padding computed from self.stride."""
    import math

    def make(nn, F):
        class Conv2dDynamicSamePadding(nn.Conv2d):
            def __init__(self, in_channels, out_channels, kernel_size, stride=1, dilation=1,
                         groups=1, bias=True):
                super().__init__(in_channels, out_channels, kernel_size, stride, 0, dilation,
                                 groups, bias)
                self.stride = self.stride if len(self.stride) == 2 else [self.stride[0]] * 2

            def forward(self, x):
                ih, iw = x.size()[-2:]
                kh, kw = self.weight.size()[-2:]
                sh, sw = self.stride
                oh, ow = math.ceil(ih / sh), math.ceil(iw / sw)
                pad_h = max((oh - 1) * self.stride[0] + (kh - 1) * self.dilation[0] + 1 - ih, 0)
                pad_w = max((ow - 1) * self.stride[1] + (kw - 1) * self.dilation[1] + 1 - iw, 0)
                if pad_h > 0 or pad_w > 0:
                    x = F.pad(x, [pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2])
                return F.conv2d(x, self.weight, self.bias, self.stride, self.padding,
                                self.dilation, self.groups)
        return Conv2dDynamicSamePadding(6, 6, 3, stride=[2], groups=6, bias=False)

    tc, tt = make(tracec.nn, tracec.nn.functional), make(torch.nn, torch.nn.functional)
    assert tc.stride == tt.stride == [2, 2]
    assert repr(tc) == repr(tt)
    tc.weight.data = tracec.tensor(tt.weight.detach().numpy())
    x = np.random.default_rng(1).standard_normal((1, 6, 9, 8)).astype(np.float32)
    np.testing.assert_allclose(tc(tracec.tensor(x)).detach().numpy(),
                               tt(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)


def _linalg_grads(lib, a, b, fn):
    A = lib.tensor(a, requires_grad=True)
    B = lib.tensor(b, requires_grad=True) if b is not None else None
    X = fn(lib, A, B)
    w = np.linspace(0.5, 1.5, X.numel()).reshape(tuple(X.shape)).astype(np.float32)
    (X ** 2 * lib.tensor(w)).sum().backward()
    return [X.detach().numpy(), A.grad.numpy()] + ([B.grad.numpy()] if b is not None else [])


@pytest.mark.parametrize("sa, sb", [((2, 6, 3), (2, 6, 2)), ((2, 3, 6), (2, 3, 2)), ((5, 3), (5,)),
                                    ((1, 5, 3), (3, 5, 2)), ((3, 5, 3), (1, 5, 2))])
def test_lstsq_gradients_match_torch(sa, sb):
    """efficient-kan's curve2coeff solves with torch.linalg.lstsq; its
    solution is differentiable in A and B (through pinv, as PyTorch's
    linalg_lstsq_backward), over- and under-determined, batched, broadcast."""
    r = np.random.RandomState(sum(sa) + sum(sb))
    a, b = r.randn(*sa).astype(np.float32), r.randn(*sb).astype(np.float32)
    solve = lambda lib, A, B: lib.linalg.lstsq(A, B).solution  # noqa: E731
    for got, want in zip(_linalg_grads(tracec, a, b, solve), _linalg_grads(torch, a, b, solve)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("name", ["linalg.pinv", "pinverse"])
def test_pinv_gradients_match_torch(shape, name):
    a = np.random.RandomState(len(shape) + shape[-1]).randn(*shape).astype(np.float32)

    def fn(lib, A, B):
        return lib.linalg.pinv(A) if name == "linalg.pinv" else lib.pinverse(A)
    for got, want in zip(_linalg_grads(tracec, a, None, fn), _linalg_grads(torch, a, None, fn)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
