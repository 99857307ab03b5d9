# zongyi-li/fourier_neural_operator: fourier_1d.py and fourier_2d.py
# (SpectralConv1d / SpectralConv2d with complex weights made by
# torch.rand(..., dtype=torch.cfloat), torch.fft.rfft / rfft2, the complex
# einsum of compl_mul1d / compl_mul2d into a zeroed torch.cfloat out_ft, the
# corner slices out_ft[:, :, -modes1:, :modes2], irfft(n=) / irfft2(s=);
# FNO1d / FNO2d with get_grid over np.linspace, F.pad of the non-periodic 2-D
# domain, the 1x1 convolutions and F.gelu), utilities3.py (LpLoss's rel /
# abs, UnitGaussianNormalizer), and the training loops: Adam with
# weight_decay, StepLR, the relative L2 loss backward, the MSE monitor,
# evaluation under no_grad.
# Changes for a CPU test: width 8, 4 (1-D) and 3x3 (2-D) modes, a grid of 16
# (1-D) and 8x8 (2-D), 8 training samples, weights and data from numpy (the
# torch.rand draws differ in tracec: the [rng] lines).  Then the 2-D training
# step (the complex weights' gradients, Adam through view_as_real) under
# torch.compile against the same step run eagerly.
import copy
from functools import reduce
import operator
from timeit import default_timer

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Adam

torch.manual_seed(0)
np.random.seed(0)


# ---- utilities3.py ----
class UnitGaussianNormalizer(object):
    def __init__(self, x, eps=0.00001):
        super(UnitGaussianNormalizer, self).__init__()

        # x could be in shape of ntrain*n or ntrain*T*n or ntrain*n*T
        self.mean = torch.mean(x, 0)
        self.std = torch.std(x, 0)
        self.eps = eps

    def encode(self, x):
        x = (x - self.mean) / (self.std + self.eps)
        return x

    def decode(self, x, sample_idx=None):
        if sample_idx is None:
            std = self.std + self.eps # n
            mean = self.mean
        else:
            if len(self.mean.shape) == len(sample_idx[0].shape):
                std = self.std[sample_idx] + self.eps  # batch*n
                mean = self.mean[sample_idx]
            if len(self.mean.shape) > len(sample_idx[0].shape):
                std = self.std[:,sample_idx]+ self.eps # T*batch*n
                mean = self.mean[:,sample_idx]

        # x is in shape of batch*n or T*batch*n
        x = (x * std) + mean
        return x


#loss function with rel/abs Lp loss
class LpLoss(object):
    def __init__(self, d=2, p=2, size_average=True, reduction=True):
        super(LpLoss, self).__init__()

        #Dimension and Lp-norm type are postive
        assert d > 0 and p > 0

        self.d = d
        self.p = p
        self.reduction = reduction
        self.size_average = size_average

    def abs(self, x, y):
        num_examples = x.size()[0]

        #Assume uniform mesh
        h = 1.0 / (x.size()[1] - 1.0)

        all_norms = (h**(self.d/self.p))*torch.norm(x.view(num_examples,-1) - y.view(num_examples,-1), self.p, 1)

        if self.reduction:
            if self.size_average:
                return torch.mean(all_norms)
            else:
                return torch.sum(all_norms)

        return all_norms

    def rel(self, x, y):
        num_examples = x.size()[0]

        diff_norms = torch.norm(x.reshape(num_examples,-1) - y.reshape(num_examples,-1), self.p, 1)
        y_norms = torch.norm(y.reshape(num_examples,-1), self.p, 1)

        if self.reduction:
            if self.size_average:
                return torch.mean(diff_norms/y_norms)
            else:
                return torch.sum(diff_norms/y_norms)

        return diff_norms/y_norms

    def __call__(self, x, y):
        return self.rel(x, y)


# print the number of parameters
def count_params(model):
    c = 0
    for p in list(model.parameters()):
        c += reduce(operator.mul, list(p.size()+(2,) if p.is_complex() else p.size()))
    return c


# ---- fourier_1d.py ----
class SpectralConv1d(nn.Module):
    def __init__(self, in_channels, out_channels, modes1):
        super(SpectralConv1d, self).__init__()

        """
        1D Fourier layer. It does FFT, linear transform, and Inverse FFT.    
        """

        self.in_channels = in_channels
        self.out_channels = out_channels
        self.modes1 = modes1  #Number of Fourier modes to multiply, at most floor(N/2) + 1

        self.scale = (1 / (in_channels*out_channels))
        self.weights1 = nn.Parameter(self.scale * torch.rand(in_channels, out_channels, self.modes1, dtype=torch.cfloat))

    # Complex multiplication
    def compl_mul1d(self, input, weights):
        # (batch, in_channel, x ), (in_channel, out_channel, x) -> (batch, out_channel, x)
        return torch.einsum("bix,iox->box", input, weights)

    def forward(self, x):
        batchsize = x.shape[0]
        #Compute Fourier coeffcients up to factor of e^(- something constant)
        x_ft = torch.fft.rfft(x)

        # Multiply relevant Fourier modes
        out_ft = torch.zeros(batchsize, self.out_channels, x.size(-1)//2 + 1,  device=x.device, dtype=torch.cfloat)
        out_ft[:, :, :self.modes1] = self.compl_mul1d(x_ft[:, :, :self.modes1], self.weights1)

        #Return to physical space
        x = torch.fft.irfft(out_ft, n=x.size(-1))
        return x


class FNO1d(nn.Module):
    def __init__(self, modes, width):
        super(FNO1d, self).__init__()

        """
        The overall network. It contains 4 layers of the Fourier layer.
        1. Lift the input to the desire channel dimension by self.fc0 .
        2. 4 layers of the integral operators u' = (W + K)(u).
            W defined by self.w; K defined by self.conv .
        3. Project from the channel space to the output space by self.fc1 and self.fc2 .
        
        input: the solution of the initial condition and location (a(x), x)
        input shape: (batchsize, x=s, c=2)
        output: the solution of a later timestep
        output shape: (batchsize, x=s, c=1)
        """

        self.modes1 = modes
        self.width = width
        self.padding = 2 # pad the domain if input is non-periodic
        self.fc0 = nn.Linear(2, self.width) # input channel is 2: (a(x), x)

        self.conv0 = SpectralConv1d(self.width, self.width, self.modes1)
        self.conv1 = SpectralConv1d(self.width, self.width, self.modes1)
        self.conv2 = SpectralConv1d(self.width, self.width, self.modes1)
        self.conv3 = SpectralConv1d(self.width, self.width, self.modes1)
        self.w0 = nn.Conv1d(self.width, self.width, 1)
        self.w1 = nn.Conv1d(self.width, self.width, 1)
        self.w2 = nn.Conv1d(self.width, self.width, 1)
        self.w3 = nn.Conv1d(self.width, self.width, 1)

        self.fc1 = nn.Linear(self.width, 128)
        self.fc2 = nn.Linear(128, 1)

    def forward(self, x):
        grid = self.get_grid(x.shape, x.device)
        x = torch.cat((x, grid), dim=-1)
        x = self.fc0(x)
        x = x.permute(0, 2, 1)
        # x = F.pad(x, [0,self.padding]) # pad the domain if input is non-periodic

        x1 = self.conv0(x)
        x2 = self.w0(x)
        x = x1 + x2
        x = F.gelu(x)

        x1 = self.conv1(x)
        x2 = self.w1(x)
        x = x1 + x2
        x = F.gelu(x)

        x1 = self.conv2(x)
        x2 = self.w2(x)
        x = x1 + x2
        x = F.gelu(x)

        x1 = self.conv3(x)
        x2 = self.w3(x)
        x = x1 + x2

        # x = x[..., :-self.padding] # pad the domain if input is non-periodic
        x = x.permute(0, 2, 1)
        x = self.fc1(x)
        x = F.gelu(x)
        x = self.fc2(x)
        return x

    def get_grid(self, shape, device):
        batchsize, size_x = shape[0], shape[1]
        gridx = torch.tensor(np.linspace(0, 1, size_x), dtype=torch.float)
        gridx = gridx.reshape(1, size_x, 1).repeat([batchsize, 1, 1])
        return gridx.to(device)


# ---- fourier_2d.py ----
class SpectralConv2d(nn.Module):
    def __init__(self, in_channels, out_channels, modes1, modes2):
        super(SpectralConv2d, self).__init__()

        """
        2D Fourier layer. It does FFT, linear transform, and Inverse FFT.    
        """

        self.in_channels = in_channels
        self.out_channels = out_channels
        self.modes1 = modes1 #Number of Fourier modes to multiply, at most floor(N/2) + 1
        self.modes2 = modes2

        self.scale = (1 / (in_channels * out_channels))
        self.weights1 = nn.Parameter(self.scale * torch.rand(in_channels, out_channels, self.modes1, self.modes2, dtype=torch.cfloat))
        self.weights2 = nn.Parameter(self.scale * torch.rand(in_channels, out_channels, self.modes1, self.modes2, dtype=torch.cfloat))

    # Complex multiplication
    def compl_mul2d(self, input, weights):
        # (batch, in_channel, x,y ), (in_channel, out_channel, x,y) -> (batch, out_channel, x,y)
        return torch.einsum("bixy,ioxy->boxy", input, weights)

    def forward(self, x):
        batchsize = x.shape[0]
        #Compute Fourier coeffcients up to factor of e^(- something constant)
        x_ft = torch.fft.rfft2(x)

        # Multiply relevant Fourier modes
        out_ft = torch.zeros(batchsize, self.out_channels,  x.size(-2), x.size(-1)//2 + 1, dtype=torch.cfloat, device=x.device)
        out_ft[:, :, :self.modes1, :self.modes2] = \
            self.compl_mul2d(x_ft[:, :, :self.modes1, :self.modes2], self.weights1)
        out_ft[:, :, -self.modes1:, :self.modes2] = \
            self.compl_mul2d(x_ft[:, :, -self.modes1:, :self.modes2], self.weights2)

        #Return to physical space
        x = torch.fft.irfft2(out_ft, s=(x.size(-2), x.size(-1)))
        return x


class FNO2d(nn.Module):
    def __init__(self, modes1, modes2,  width):
        super(FNO2d, self).__init__()

        self.modes1 = modes1
        self.modes2 = modes2
        self.width = width
        self.padding = 9 # pad the domain if input is non-periodic
        self.fc0 = nn.Linear(3, self.width) # input channel is 3: (a(x, y), x, y)

        self.conv0 = SpectralConv2d(self.width, self.width, self.modes1, self.modes2)
        self.conv1 = SpectralConv2d(self.width, self.width, self.modes1, self.modes2)
        self.conv2 = SpectralConv2d(self.width, self.width, self.modes1, self.modes2)
        self.conv3 = SpectralConv2d(self.width, self.width, self.modes1, self.modes2)
        self.w0 = nn.Conv2d(self.width, self.width, 1)
        self.w1 = nn.Conv2d(self.width, self.width, 1)
        self.w2 = nn.Conv2d(self.width, self.width, 1)
        self.w3 = nn.Conv2d(self.width, self.width, 1)

        self.fc1 = nn.Linear(self.width, 128)
        self.fc2 = nn.Linear(128, 1)

    def forward(self, x):
        grid = self.get_grid(x.shape, x.device)
        x = torch.cat((x, grid), dim=-1)
        x = self.fc0(x)
        x = x.permute(0, 3, 1, 2)
        x = F.pad(x, [0,self.padding, 0,self.padding])

        x1 = self.conv0(x)
        x2 = self.w0(x)
        x = x1 + x2
        x = F.gelu(x)

        x1 = self.conv1(x)
        x2 = self.w1(x)
        x = x1 + x2
        x = F.gelu(x)

        x1 = self.conv2(x)
        x2 = self.w2(x)
        x = x1 + x2
        x = F.gelu(x)

        x1 = self.conv3(x)
        x2 = self.w3(x)
        x = x1 + x2

        x = x[..., :-self.padding, :-self.padding]
        x = x.permute(0, 2, 3, 1)
        x = self.fc1(x)
        x = F.gelu(x)
        x = self.fc2(x)
        return x

    def get_grid(self, shape, device):
        batchsize, size_x, size_y = shape[0], shape[1], shape[2]
        gridx = torch.tensor(np.linspace(0, 1, size_x), dtype=torch.float)
        gridx = gridx.reshape(1, size_x, 1, 1).repeat([batchsize, 1, size_y, 1])
        gridy = torch.tensor(np.linspace(0, 1, size_y), dtype=torch.float)
        gridy = gridy.reshape(1, 1, size_y, 1).repeat([batchsize, size_x, 1, 1])
        return torch.cat((gridx, gridy), dim=-1).to(device)


def numpy_init(module, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.is_complex():
                scale = 1 / (p.shape[0] * p.shape[1])
                w = scale * (r.random(tuple(p.shape)) + 1j * r.random(tuple(p.shape)))
                p.copy_(torch.from_numpy(w.astype(np.complex64)))
            else:
                fan = p[0].numel() if p.dim() > 1 else 4
                p.copy_(torch.from_numpy((r.standard_normal(tuple(p.shape)) / np.sqrt(fan)).astype(np.float32)))
    return module


# ---- the 1-D Burgers training (data: smooth random fields and a nonlinear map) ----
ntrain, ntest = 8, 4
batch_size = 4
learning_rate = 0.001
epochs = 2
step_size = 1
gamma = 0.5
modes = 4
width = 8
s = 16

g = np.random.default_rng(1)
xs = np.linspace(0, 1, s)
coef = g.standard_normal((ntrain + ntest, 3))
a = sum(coef[:, k:k + 1] * np.sin((k + 1) * np.pi * xs[None]) for k in range(3)).astype(np.float32)
u = (np.tanh(a) + 0.1 * np.roll(a, 1, axis=1)).astype(np.float32)
x_train, y_train = torch.from_numpy(a[:ntrain]), torch.from_numpy(u[:ntrain])
x_test, y_test = torch.from_numpy(a[-ntest:]), torch.from_numpy(u[-ntest:])
x_train = x_train.reshape(ntrain,s,1)
x_test = x_test.reshape(ntest,s,1)

train_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_train, y_train), batch_size=batch_size, shuffle=False)
test_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_test, y_test), batch_size=batch_size, shuffle=False)

sc = SpectralConv1d(width, width, modes)
print("cfloat init", sc.weights1.dtype, tuple(sc.weights1.shape), f"{sc.weights1.abs().max().item():.4f}")
print("cfloat init", sc.weights1.dtype, tuple(sc.weights1.shape), sc.weights1.is_complex(),
      bool((sc.weights1.real >= 0).all()), bool((sc.weights1.imag <= sc.scale).all()))
model = numpy_init(FNO1d(modes, width), 0)
print(count_params(model))
xf = torch.fft.rfft(x_train.permute(0, 2, 1))
print("rfft", xf.dtype, tuple(xf.shape), f"{xf.real.sum().item():.5f}", f"{xf.imag.sum().item():.5f}",
      f"{xf.abs().sum().item():.5f}", f"{torch.angle(xf[0, 0, 1]).item():.5f}")
print("irfft roundtrip", torch.allclose(torch.fft.irfft(xf, n=s), x_train.permute(0, 2, 1), atol=1e-5))
with torch.no_grad():
    out = model.conv0(model.fc0(torch.cat((x_train, model.get_grid(x_train.shape, x_train.device)), -1)).permute(0, 2, 1))
print("spectral conv", tuple(out.shape), f"{out.sum().item():.5f}", f"{out.abs().sum().item():.5f}")

optimizer = Adam(model.parameters(), lr=learning_rate, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=step_size, gamma=gamma)

myloss = LpLoss(size_average=False)
for ep in range(epochs):
    model.train()
    t1 = default_timer()
    train_mse = 0
    train_l2 = 0
    for x, y in train_loader:
        optimizer.zero_grad()
        out = model(x)

        mse = F.mse_loss(out.view(batch_size, -1), y.view(batch_size, -1), reduction='mean')
        l2 = myloss(out.view(batch_size, -1), y.view(batch_size, -1))
        l2.backward() # use the l2 relative loss

        optimizer.step()
        train_mse += mse.item()
        train_l2 += l2.item()

    scheduler.step()
    model.eval()
    test_l2 = 0.0
    with torch.no_grad():
        for x, y in test_loader:
            out = model(x)
            test_l2 += myloss(out.view(batch_size, -1), y.view(batch_size, -1)).item()

    train_mse /= len(train_loader)
    train_l2 /= ntrain
    test_l2 /= ntest

    t2 = default_timer()
    print(ep, "[time]", train_mse, train_l2, test_l2, scheduler.get_last_lr())
print("complex grad", model.conv0.weights1.grad.dtype, f"{model.conv0.weights1.grad.abs().sum().item():.6f}",
      f"{model.conv0.weights1.grad.real.sum().item():.6f}", f"{model.conv0.weights1.grad.imag.sum().item():.6f}")
print("complex weight", f"{model.conv3.weights1.real.sum().item():.6f}", f"{model.conv3.weights1.imag.sum().item():.6f}")
st = optimizer.state[model.conv0.weights1]
print("adam state", st["exp_avg"].dtype, st["exp_avg_sq"].dtype, f"{st['exp_avg_sq'].abs().sum().item():.4e}")
print("abs loss", f"{myloss.abs(out.view(batch_size, -1), y.view(batch_size, -1)).item():.5f}")

# ---- 2-D Darcy flow training ----
r2 = np.random.default_rng(2)
S = 8
a2 = r2.random((8, S, S)).astype(np.float32) + 1.0
u2 = (np.cumsum(a2, axis=1) / S * np.cos(np.linspace(0, 3, S))[None, None, :]).astype(np.float32)
x2_train, y2_train = torch.from_numpy(a2), torch.from_numpy(u2)
x_normalizer = UnitGaussianNormalizer(x2_train)
x2_train = x_normalizer.encode(x2_train)
y_normalizer = UnitGaussianNormalizer(y2_train)
y2_train = y_normalizer.encode(y2_train)
x2_train = x2_train.reshape(8, S, S, 1)
print("normalizer", f"{x_normalizer.std.mean().item():.5f}", f"{y_normalizer.mean.sum().item():.5f}")
xf2 = torch.fft.rfft2(x2_train[..., 0])
print("rfft2", tuple(xf2.shape), f"{xf2.real.sum().item():.5f}", f"{xf2[:, -2:, :3].imag.abs().sum().item():.5f}")
print("irfft2 roundtrip", torch.allclose(torch.fft.irfft2(xf2, s=(S, S)), x2_train[..., 0], atol=1e-5))

model2 = numpy_init(FNO2d(3, 3, width), 1)
print(count_params(model2))
optimizer2 = Adam(model2.parameters(), lr=learning_rate, weight_decay=1e-4)
scheduler2 = torch.optim.lr_scheduler.StepLR(optimizer2, step_size=1, gamma=gamma)
loader2 = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x2_train, y2_train), batch_size=4, shuffle=False)
for ep in range(2):
    model2.train()
    train_l2 = 0
    for x, y in loader2:
        optimizer2.zero_grad()
        out = model2(x).reshape(4, S, S)
        out = y_normalizer.decode(out)
        y = y_normalizer.decode(y)
        loss = myloss(out.view(4,-1), y.view(4,-1))
        loss.backward()
        optimizer2.step()
        train_l2 += loss.item()
    scheduler2.step()
    print(ep, train_l2 / 8, scheduler2.get_last_lr())
print("2d grads", f"{model2.conv0.weights2.grad.abs().sum().item():.6f}", f"{model2.w3.weight.grad.abs().sum().item():.6f}")


# the training steps under torch.compile against the same steps run eagerly
def compare(step, mdl, opt, batches):
    step(*batches[0])
    state, opt_state = copy.deepcopy(mdl.state_dict()), copy.deepcopy(opt.state_dict())
    eager = [step(*b).item() for b in batches[1:]]
    after = copy.deepcopy(mdl.state_dict())
    mdl.load_state_dict(state)
    opt.load_state_dict(opt_state)
    cstep = torch.compile(step)
    compiled = [cstep(*b).item() for b in batches[1:]]
    print("compiled losses", [f"{v:.5f}" for v in compiled])
    print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
          all(torch.allclose(mdl.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))


model2 = numpy_init(FNO2d(3, 3, width), 4)
optimizer2 = Adam(model2.parameters(), lr=learning_rate, weight_decay=1e-4)


def train_step2(x, y):
    optimizer2.zero_grad()
    out = y_normalizer.decode(model2(x).reshape(4, S, S))
    loss = myloss(out.view(4, -1), y_normalizer.decode(y).view(4, -1))
    loss.backward()
    optimizer2.step()
    return loss


compare(train_step2, model2, optimizer2, [(x2_train[i:i + 4], y2_train[i:i + 4]) for i in (0, 4, 0)])
