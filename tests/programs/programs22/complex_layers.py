"""Complex-valued networks with wavefrontshaping/complexPyTorch
(complexPyTorch/complexLayers.py, complexFunctions.py and the README's MNIST
example): complex64 tensors built from real parts with ``.type(torch.complex64)
+ 1j * ...``, apply_complex over pairs of real Conv2d / Linear /
ConvTranspose2d layers, complex_relu / sigmoid / tanh on the real and
imaginary parts, complex max pooling on the modulus with the phase gathered
through the pooling indices (atan2, gather, view_as), ComplexBatchNorm2d /
1d whitening the (real, imag) covariance with running statistics kept in a
complex buffer and a (C, 3) buffer written by column, complex_matmul,
complex_upsample, the modulus into log_softmax and nll_loss, Adam; then an
eval pass with the running statistics. Changes for a CPU test: random
28 x 28 images in place of MNIST, narrower layers, a few batches."""
from typing import Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import (BatchNorm1d, BatchNorm2d, Conv2d, ConvTranspose2d,
                      Linear, Module, Parameter, init)
from torch.nn.functional import (avg_pool2d, dropout, dropout2d, interpolate,
                                 max_pool2d, relu, sigmoid, tanh)


# ---- complexPyTorch/complexFunctions.py ----
def complex_matmul(A, B):
    """
    Performs the matrix product between two complex matrices
    """

    outp_real = torch.matmul(A.real, B.real) - torch.matmul(A.imag, B.imag)
    outp_imag = torch.matmul(A.real, B.imag) + torch.matmul(A.imag, B.real)

    return outp_real.type(torch.complex64) + 1j * outp_imag.type(torch.complex64)


def complex_avg_pool2d(inp, *args, **kwargs):
    absolute_value_real = avg_pool2d(inp.real, *args, **kwargs)
    absolute_value_imag = avg_pool2d(inp.imag, *args, **kwargs)

    return absolute_value_real.type(torch.complex64) + 1j * absolute_value_imag.type(
        torch.complex64
    )


def complex_normalize(inp):
    real_value, imag_value = inp.real, inp.imag
    real_norm = (real_value - real_value.mean()) / real_value.std()
    imag_norm = (imag_value - imag_value.mean()) / imag_value.std()

    return real_norm.type(torch.complex64) + 1j * imag_norm.type(torch.complex64)


def complex_relu(inp):
    return relu(inp.real).type(torch.complex64) + 1j * relu(inp.imag).type(
        torch.complex64
    )


def complex_sigmoid(inp):
    return sigmoid(inp.real).type(torch.complex64) + 1j * sigmoid(inp.imag).type(
        torch.complex64
    )


def complex_tanh(inp):
    return tanh(inp.real).type(torch.complex64) + 1j * tanh(inp.imag).type(
        torch.complex64
    )


def complex_opposite(inp):
    return -inp.real.type(torch.complex64) + 1j * (-inp.imag.type(torch.complex64))


def complex_stack(inp, dim):
    inp_real = [x.real for x in inp]
    inp_imag = [x.imag for x in inp]
    return torch.stack(inp_real, dim).type(torch.complex64) + 1j * torch.stack(
        inp_imag, dim
    ).type(torch.complex64)


def _retrieve_elements_from_indices(tensor, indices):
    flattened_tensor = tensor.flatten(start_dim=-2)
    output = flattened_tensor.gather(
        dim=-1, index=indices.flatten(start_dim=-2)
    ).view_as(indices)
    return output


def complex_upsample(inp, size=None, scale_factor=None, mode="nearest",
                     align_corners=None, recompute_scale_factor=None):
    outp_real = interpolate(inp.real, size=size, scale_factor=scale_factor, mode=mode,
                            align_corners=align_corners,
                            recompute_scale_factor=recompute_scale_factor)
    outp_imag = interpolate(inp.imag, size=size, scale_factor=scale_factor, mode=mode,
                            align_corners=align_corners,
                            recompute_scale_factor=recompute_scale_factor)

    return outp_real.type(torch.complex64) + 1j * outp_imag.type(torch.complex64)


def complex_upsample2(inp, size=None, scale_factor=None, mode="nearest",
                      align_corners=None, recompute_scale_factor=None):
    outp_abs = interpolate(inp.abs(), size=size, scale_factor=scale_factor, mode=mode,
                           align_corners=align_corners,
                           recompute_scale_factor=recompute_scale_factor)
    angle = torch.atan2(inp.imag, inp.real)
    outp_angle = interpolate(angle, size=size, scale_factor=scale_factor, mode=mode,
                             align_corners=align_corners,
                             recompute_scale_factor=recompute_scale_factor)

    return outp_abs * (
        torch.cos(outp_angle).type(torch.complex64)
        + 1j * torch.sin(outp_angle).type(torch.complex64)
    )


def complex_max_pool2d(inp, kernel_size, stride=None, padding=0, dilation=1,
                       ceil_mode=False, return_indices=False):
    absolute_value, indices = max_pool2d(
        inp.abs(),
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        dilation=dilation,
        ceil_mode=ceil_mode,
        return_indices=True,
    )
    # performs the selection on the absolute values
    absolute_value = absolute_value.type(torch.complex64)
    # retrieve the corresponding phase value using the indices
    # unfortunately, the derivative for 'angle' is not implemented
    angle = torch.atan2(inp.imag, inp.real)
    # get only the phase values selected by max pool
    angle = _retrieve_elements_from_indices(angle, indices)
    return absolute_value * (
        torch.cos(angle).type(torch.complex64)
        + 1j * torch.sin(angle).type(torch.complex64)
    )


# ---- complexPyTorch/complexLayers.py ----
def apply_complex(fr, fi, inp, dtype=torch.complex64):
    return (fr(inp.real) - fi(inp.imag)).type(dtype) + 1j * (
        fr(inp.imag) + fi(inp.real)
    ).type(dtype)


class ComplexReLU(Module):
    @staticmethod
    def forward(inp):
        return complex_relu(inp)


class ComplexTanh(Module):
    @staticmethod
    def forward(inp):
        return complex_tanh(inp)


class ComplexConvTranspose2d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros"):

        super(ComplexConvTranspose2d, self).__init__()

        self.conv_tran_r = ConvTranspose2d(in_channels, out_channels, kernel_size, stride,
                                           padding, output_padding, groups, bias, dilation,
                                           padding_mode)
        self.conv_tran_i = ConvTranspose2d(in_channels, out_channels, kernel_size, stride,
                                           padding, output_padding, groups, bias, dilation,
                                           padding_mode)

    def forward(self, inp):
        return apply_complex(self.conv_tran_r, self.conv_tran_i, inp)


class ComplexConv2d(Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=0,
                 dilation=1, groups=1, bias=True):
        super(ComplexConv2d, self).__init__()
        self.conv_r = Conv2d(in_channels, out_channels, kernel_size, stride, padding,
                             dilation, groups, bias)
        self.conv_i = Conv2d(in_channels, out_channels, kernel_size, stride, padding,
                             dilation, groups, bias)

    def forward(self, inp):
        return apply_complex(self.conv_r, self.conv_i, inp)


class ComplexLinear(Module):
    def __init__(self, in_features, out_features):
        super(ComplexLinear, self).__init__()
        self.fc_r = Linear(in_features, out_features)
        self.fc_i = Linear(in_features, out_features)

    def forward(self, inp):
        return apply_complex(self.fc_r, self.fc_i, inp)


class NaiveComplexBatchNorm1d(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super(NaiveComplexBatchNorm1d, self).__init__()
        self.bn_r = BatchNorm1d(num_features, eps, momentum, affine, track_running_stats)
        self.bn_i = BatchNorm1d(num_features, eps, momentum, affine, track_running_stats)

    def forward(self, inp):
        return self.bn_r(inp.real).type(torch.complex64) + 1j * self.bn_i(
            inp.imag
        ).type(torch.complex64)


class _ComplexBatchNorm(Module):
    running_mean: Optional[torch.Tensor]

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super(_ComplexBatchNorm, self).__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = Parameter(torch.Tensor(num_features, 3))
            self.bias = Parameter(torch.Tensor(num_features, 2))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer(
                "running_mean", torch.zeros(num_features, dtype=torch.complex64)
            )
            self.register_buffer("running_covar", torch.zeros(num_features, 3))
            self.running_covar[:, 0] = 1.4142135623730951
            self.running_covar[:, 1] = 1.4142135623730951
            self.register_buffer(
                "num_batches_tracked", torch.tensor(0, dtype=torch.long)
            )
        else:
            self.register_parameter("running_mean", None)
            self.register_parameter("running_covar", None)
            self.register_parameter("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_covar.zero_()
            self.running_covar[:, 0] = 1.4142135623730951
            self.running_covar[:, 1] = 1.4142135623730951
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.constant_(self.weight[:, :2], 1.4142135623730951)
            init.zeros_(self.weight[:, 2])
            init.zeros_(self.bias)


class ComplexBatchNorm2d(_ComplexBatchNorm):
    def forward(self, inp):
        exponential_average_factor = 0.0

        if self.training and self.track_running_stats:
            if self.num_batches_tracked is not None:
                self.num_batches_tracked += 1
                if self.momentum is None:  # use cumulative moving average
                    exponential_average_factor = 1.0 / float(self.num_batches_tracked)
                else:  # use exponential moving average
                    exponential_average_factor = self.momentum

        if self.training or (not self.track_running_stats):
            # calculate mean of real and imaginary part
            # mean does not support automatic differentiation for outputs with complex dtype.
            mean_r = inp.real.mean([0, 2, 3]).type(torch.complex64)
            mean_i = inp.imag.mean([0, 2, 3]).type(torch.complex64)
            mean = mean_r + 1j * mean_i
        else:
            mean = self.running_mean

        if self.training and self.track_running_stats:
            # update running mean
            with torch.no_grad():
                self.running_mean = (
                    exponential_average_factor * mean
                    + (1 - exponential_average_factor) * self.running_mean
                )

        inp = inp - mean[None, :, None, None]

        if self.training or (not self.track_running_stats):
            # Elements of the covariance matrix (biased for train)
            n = inp.numel() / inp.size(1)
            Crr = 1.0 / n * inp.real.pow(2).sum(dim=[0, 2, 3]) + self.eps
            Cii = 1.0 / n * inp.imag.pow(2).sum(dim=[0, 2, 3]) + self.eps
            Cri = (inp.real.mul(inp.imag)).mean(dim=[0, 2, 3])
        else:
            Crr = self.running_covar[:, 0] + self.eps
            Cii = self.running_covar[:, 1] + self.eps
            Cri = self.running_covar[:, 2]  # +self.eps

        if self.training and self.track_running_stats:
            with torch.no_grad():
                self.running_covar[:, 0] = (
                    exponential_average_factor * Crr * n / (n - 1)  #
                    + (1 - exponential_average_factor) * self.running_covar[:, 0]
                )

                self.running_covar[:, 1] = (
                    exponential_average_factor * Cii * n / (n - 1)
                    + (1 - exponential_average_factor) * self.running_covar[:, 1]
                )

                self.running_covar[:, 2] = (
                    exponential_average_factor * Cri * n / (n - 1)
                    + (1 - exponential_average_factor) * self.running_covar[:, 2]
                )

        # calculate the inverse square root the covariance matrix
        det = Crr * Cii - Cri.pow(2)
        s = torch.sqrt(det)
        t = torch.sqrt(Cii + Crr + 2 * s)
        inverse_st = 1.0 / (s * t)
        Rrr = (Cii + s) * inverse_st
        Rii = (Crr + s) * inverse_st
        Rri = -Cri * inverse_st

        inp = (
            Rrr[None, :, None, None] * inp.real + Rri[None, :, None, None] * inp.imag
        ).type(torch.complex64) + 1j * (
            Rii[None, :, None, None] * inp.imag + Rri[None, :, None, None] * inp.real
        ).type(
            torch.complex64
        )

        if self.affine:
            inp = (
                self.weight[None, :, 0, None, None] * inp.real
                + self.weight[None, :, 2, None, None] * inp.imag
                + self.bias[None, :, 0, None, None]
            ).type(torch.complex64) + 1j * (
                self.weight[None, :, 2, None, None] * inp.real
                + self.weight[None, :, 1, None, None] * inp.imag
                + self.bias[None, :, 1, None, None]
            ).type(
                torch.complex64
            )

        return inp


class ComplexBatchNorm1d(_ComplexBatchNorm):
    def forward(self, inp):

        exponential_average_factor = 0.0

        if self.training and self.track_running_stats:
            if self.num_batches_tracked is not None:
                self.num_batches_tracked += 1
                if self.momentum is None:  # use cumulative moving average
                    exponential_average_factor = 1.0 / float(self.num_batches_tracked)
                else:  # use exponential moving average
                    exponential_average_factor = self.momentum

        if self.training or (not self.track_running_stats):
            # calculate mean of real and imaginary part
            mean_r = inp.real.mean(dim=0).type(torch.complex64)
            mean_i = inp.imag.mean(dim=0).type(torch.complex64)
            mean = mean_r + 1j * mean_i
        else:
            mean = self.running_mean

        if self.training and self.track_running_stats:
            # update running mean
            with torch.no_grad():
                self.running_mean = (
                    exponential_average_factor * mean
                    + (1 - exponential_average_factor) * self.running_mean
                )

        inp = inp - mean[None, ...]

        if self.training or (not self.track_running_stats):
            # Elements of the covariance matrix (biased for train)
            n = inp.numel() / inp.size(1)
            Crr = inp.real.var(dim=0, unbiased=False) + self.eps
            Cii = inp.imag.var(dim=0, unbiased=False) + self.eps
            Cri = (inp.real.mul(inp.imag)).mean(dim=0)
        else:
            Crr = self.running_covar[:, 0] + self.eps
            Cii = self.running_covar[:, 1] + self.eps
            Cri = self.running_covar[:, 2]

        if self.training and self.track_running_stats:
            with torch.no_grad():
                self.running_covar[:, 0] = (
                    exponential_average_factor * Crr * n / (n - 1)
                    + (1 - exponential_average_factor) * self.running_covar[:, 0]
                )

                self.running_covar[:, 1] = (
                    exponential_average_factor * Cii * n / (n - 1)
                    + (1 - exponential_average_factor) * self.running_covar[:, 1]
                )

                self.running_covar[:, 2] = (
                    exponential_average_factor * Cri * n / (n - 1)
                    + (1 - exponential_average_factor) * self.running_covar[:, 2]
                )

        # calculate the inverse square root the covariance matrix
        det = Crr * Cii - Cri.pow(2)
        s = torch.sqrt(det)
        t = torch.sqrt(Cii + Crr + 2 * s)
        inverse_st = 1.0 / (s * t)
        Rrr = (Cii + s) * inverse_st
        Rii = (Crr + s) * inverse_st
        Rri = -Cri * inverse_st

        inp = (Rrr[None, :] * inp.real + Rri[None, :] * inp.imag).type(
            torch.complex64
        ) + 1j * (Rii[None, :] * inp.imag + Rri[None, :] * inp.real).type(
            torch.complex64
        )

        if self.affine:
            inp = (
                self.weight[None, :, 0] * inp.real
                + self.weight[None, :, 2] * inp.imag
                + self.bias[None, :, 0]
            ).type(torch.complex64) + 1j * (
                self.weight[None, :, 2] * inp.real
                + self.weight[None, :, 1] * inp.imag
                + self.bias[None, :, 1]
            ).type(
                torch.complex64
            )

        del Crr, Cri, Cii, Rrr, Rii, Rri, det, s, t
        return inp


# ---- README.md's example (narrower) ----
class ComplexNet(nn.Module):

    def __init__(self):
        super(ComplexNet, self).__init__()
        self.conv1 = ComplexConv2d(1, 6, 5, 1)
        self.bn = ComplexBatchNorm2d(6)
        self.conv2 = ComplexConv2d(6, 8, 5, 1)
        self.fc1 = ComplexLinear(4 * 4 * 8, 32)
        self.bn1d = ComplexBatchNorm1d(32)
        self.fc2 = ComplexLinear(32, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = complex_relu(x)
        x = complex_max_pool2d(x, 2, 2)
        x = self.bn(x)
        x = self.conv2(x)
        x = complex_relu(x)
        x = complex_max_pool2d(x, 2, 2)
        x = x.view(-1, 4 * 4 * 8)
        x = self.fc1(x)
        x = self.bn1d(x)
        x = complex_relu(x)
        x = self.fc2(x)
        x = x.abs()
        x = F.log_softmax(x, dim=1)
        return x


class ComplexAutoencoder(nn.Module):
    """A small complex encoder / decoder on the same layers (transposed
    convolutions, tanh, naive batch norm, upsampling)."""

    def __init__(self):
        super().__init__()
        self.enc = ComplexConv2d(1, 4, 3, 2, 1)
        self.bn = NaiveComplexBatchNorm1d(4)
        self.dec = ComplexConvTranspose2d(4, 1, 3, 2, 1, 1)

    def forward(self, x):
        z = complex_tanh(self.enc(x))
        b, c, h, w = z.shape
        z = self.bn(z.permute(0, 2, 3, 1).reshape(-1, c)).reshape(b, h, w, c).permute(0, 3, 1, 2)
        return self.dec(z), complex_upsample(z, scale_factor=2)


def train(model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device).type(torch.complex64), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        print('Train Epoch: {:3} [{:6}/{:6} ({:3.0f}%)]\tLoss: {:.6f}'.format(
            epoch,
            batch_idx * len(data),
            len(train_loader.dataset),
            100. * batch_idx / len(train_loader),
            loss.item())
        )


def main():
    torch.manual_seed(0)
    rs = np.random.RandomState(0)
    images = torch.tensor(rs.rand(48, 1, 28, 28).astype(np.float32))
    labels = torch.tensor(rs.randint(0, 10, 48))
    train_set = torch.utils.data.TensorDataset(images, labels)
    train_loader = torch.utils.data.DataLoader(train_set, batch_size=16, shuffle=False)
    device = torch.device("cpu")
    model = ComplexNet().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(2):
        train(model, device, train_loader, optimizer, epoch)
    print("num_batches_tracked:", model.bn.num_batches_tracked.item(),
          "running_mean:", model.bn.running_mean.dtype, model.bn.running_mean.abs().sum().item())
    print("running_covar:", model.bn.running_covar.sum(0).tolist())
    model.eval()
    with torch.no_grad():
        out = model(images[:8].type(torch.complex64))
    print("eval log-probs sum: {:.5f}, argmax {}".format(out.sum().item(), out.argmax(1).tolist()))

    ae = ComplexAutoencoder()
    x = torch.complex(images[:4], images[4:8].flip(-1))
    rec, up = ae(x)
    print("autoencoder:", rec.shape, rec.dtype, up.shape)
    loss = (rec - x).abs().pow(2).mean()
    loss.backward()
    print("ae loss: {:.5f} enc grad: {:.5f} dec grad: {:.5f}".format(
        loss.item(), ae.enc.conv_r.weight.grad.norm().item(),
        ae.dec.conv_tran_i.weight.grad.norm().item()))
    a = torch.complex(torch.tensor(rs.randn(3, 4).astype(np.float32)),
                      torch.tensor(rs.randn(3, 4).astype(np.float32)))
    b = torch.complex(torch.tensor(rs.randn(4, 2).astype(np.float32)),
                      torch.tensor(rs.randn(4, 2).astype(np.float32)))
    m = complex_matmul(a, b)
    print("complex_matmul == a @ b:", torch.allclose(m, a @ b, atol=1e-5), m[0])
    print("normalize:", complex_normalize(a).real.std().item(), complex_opposite(a)[0, :2])
    print("stack:", complex_stack([a, a.conj()], 0).shape,
          complex_avg_pool2d(x, 2).abs().sum().item())
    up2 = complex_upsample2(x, scale_factor=2, mode="bilinear", align_corners=False)
    print("upsample2:", up2.shape, "{:.4f}".format(up2.abs().mean().item()))
    print("sigmoid:", complex_sigmoid(a)[1, :2], ComplexTanh()(a).imag.sum().item(),
          ComplexReLU()(a).real.sum().item())


if __name__ == '__main__':
    main()
