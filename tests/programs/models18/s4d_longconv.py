# state-spaces/s4's minimal S4D (models/s4/s4d.py) and its example.py
# model: the diagonal SSM kernel computed from complex parameters (C stored
# with torch.view_as_real, read back with torch.view_as_complex, A = -exp(log
# A_real) + 1j * A_imag, torch.exp of a complex tensor, the einsum's .real),
# the long convolution through torch.fft.rfft / irfft with n=2L, the
# S4Model stack (prenorm LayerNorm, DropoutNd, GLU output), the per-parameter
# `_optim` hyperparameters turned into AdamW groups by setup_optimizer with
# CosineAnnealingLR; next to the Hyena-style fftconv (norm="forward") and a
# direct causal convolution. Changes for a CPU test: small sizes, weights
# and data from numpy, a few steps; then one training step under
# torch.compile against the same step eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from einops import rearrange, repeat


class DropoutNd(nn.Module):
    def __init__(self, p: float = 0.5, tie=True, transposed=True):
        """
        tie: tie dropout mask across sequence lengths (Dropout1d/2d/3d)
        """
        super().__init__()
        if p < 0 or p >= 1:
            raise ValueError("dropout probability has to be in [0, 1), " "but got {}".format(p))
        self.p = p
        self.tie = tie
        self.transposed = transposed
        self.binomial = torch.distributions.binomial.Binomial(probs=1 - self.p)

    def forward(self, X):
        """X: (batch, dim, lengths...)."""
        if self.training:
            if not self.transposed:
                X = rearrange(X, 'b ... d -> b d ...')
            # binomial = torch.distributions.binomial.Binomial(probs=1-self.p) # This is incredibly slow because of CPU -> GPU copying
            mask_shape = X.shape[:2] + (1,) * (X.ndim - 2) if self.tie else X.shape
            # mask = self.binomial.sample(mask_shape)
            mask = torch.rand(*mask_shape, device=X.device) < 1. - self.p
            X = X * mask * (1.0 / (1 - self.p))
            if not self.transposed:
                X = rearrange(X, 'b d ... -> b ... d')
            return X
        return X


class S4DKernel(nn.Module):
    """Generate convolution kernel from diagonal SSM parameters."""

    def __init__(self, d_model, N=64, dt_min=0.001, dt_max=0.1, lr=None):
        super().__init__()
        # Generate dt
        H = d_model
        log_dt = torch.rand(H) * (
            math.log(dt_max) - math.log(dt_min)
        ) + math.log(dt_min)

        C = torch.randn(H, N // 2, dtype=torch.cfloat)
        self.C = nn.Parameter(torch.view_as_real(C))
        self.register("log_dt", log_dt, lr)

        log_A_real = torch.log(0.5 * torch.ones(H, N // 2))
        A_imag = math.pi * repeat(torch.arange(N // 2), 'n -> h n', h=H)
        self.register("log_A_real", log_A_real, lr)
        self.register("A_imag", A_imag, lr)

    def forward(self, L):
        """
        returns: (..., c, L) where c is number of channels (default 1)
        """

        # Materialize parameters
        dt = torch.exp(self.log_dt)  # (H)
        C = torch.view_as_complex(self.C)  # (H N)
        A = -torch.exp(self.log_A_real) + 1j * self.A_imag  # (H N)

        # Vandermonde multiplication
        dtA = A * dt.unsqueeze(-1)  # (H N)
        K = dtA.unsqueeze(-1) * torch.arange(L, device=A.device)  # (H N L)
        C = C * (torch.exp(dtA) - 1.) / A
        K = 2 * torch.einsum('hn, hnl -> hl', C, torch.exp(K)).real

        return K

    def register(self, name, tensor, lr=None):
        """Register a tensor with a configurable learning rate and 0 weight decay"""

        if lr == 0.0:
            self.register_buffer(name, tensor)
        else:
            self.register_parameter(name, nn.Parameter(tensor))

            optim = {"weight_decay": 0.0}
            if lr is not None:
                optim["lr"] = lr
            setattr(getattr(self, name), "_optim", optim)


class S4D(nn.Module):
    def __init__(self, d_model, d_state=64, dropout=0.0, transposed=True, **kernel_args):
        super().__init__()

        self.h = d_model
        self.n = d_state
        self.d_output = self.h
        self.transposed = transposed

        self.D = nn.Parameter(torch.randn(self.h))

        # SSM Kernel
        self.kernel = S4DKernel(self.h, N=self.n, **kernel_args)

        # Pointwise
        self.activation = nn.GELU()
        # dropout_fn = nn.Dropout2d # NOTE: bugged in PyTorch 1.11
        dropout_fn = DropoutNd
        self.dropout = dropout_fn(dropout) if dropout > 0.0 else nn.Identity()

        # position-wise output transform to mix features
        self.output_linear = nn.Sequential(
            nn.Conv1d(self.h, 2 * self.h, kernel_size=1),
            nn.GLU(dim=-2),
        )

    def forward(self, u, **kwargs):  # absorbs return_output and transformer src mask
        """ Input and output shape (B, H, L) """
        if not self.transposed:
            u = u.transpose(-1, -2)
        L = u.size(-1)

        # Compute SSM Kernel
        k = self.kernel(L=L)  # (H L)

        # Convolution
        k_f = torch.fft.rfft(k, n=2 * L)  # (H L)
        u_f = torch.fft.rfft(u, n=2 * L)  # (B H L)
        y = torch.fft.irfft(u_f * k_f, n=2 * L)[..., :L]  # (B H L)

        # Compute D term in state space equation - essentially a skip connection
        y = y + u * self.D.unsqueeze(-1)

        y = self.dropout(self.activation(y))
        y = self.output_linear(y)
        if not self.transposed:
            y = y.transpose(-1, -2)
        return y, None  # Return a dummy state to satisfy this repo's interface, but this can be modified


class S4Model(nn.Module):

    def __init__(self, d_input, d_output=10, d_model=256, n_layers=4, dropout=0.2, prenorm=False, lr=0.001):
        super().__init__()

        self.prenorm = prenorm

        # Linear encoder (d_input = 1 for grayscale and 3 for RGB)
        self.encoder = nn.Linear(d_input, d_model)

        # Stack S4 layers as residual blocks
        self.s4_layers = nn.ModuleList()
        self.norms = nn.ModuleList()
        self.dropouts = nn.ModuleList()
        for _ in range(n_layers):
            self.s4_layers.append(
                S4D(d_model, dropout=dropout, transposed=True, lr=min(0.001, lr))
            )
            self.norms.append(nn.LayerNorm(d_model))
            self.dropouts.append(DropoutNd(dropout) if dropout > 0.0 else nn.Identity())

        # Linear decoder
        self.decoder = nn.Linear(d_model, d_output)

    def forward(self, x):
        """
        Input x is shape (B, L, d_input)
        """
        x = self.encoder(x)  # (B, L, d_input) -> (B, L, d_model)

        x = x.transpose(-1, -2)  # (B, L, d_model) -> (B, d_model, L)
        for layer, norm, dropout in zip(self.s4_layers, self.norms, self.dropouts):
            # Each iteration of this loop will map (B, d_model, L) -> (B, d_model, L)

            z = x
            if self.prenorm:
                # Prenorm
                z = norm(z.transpose(-1, -2)).transpose(-1, -2)

            # Apply S4 block: we ignore the state input and output
            z, _ = layer(z)

            # Dropout on the output of the S4 block
            z = dropout(z)

            # Residual connection
            x = z + x

            if not self.prenorm:
                # Postnorm
                x = norm(x.transpose(-1, -2)).transpose(-1, -2)

        x = x.transpose(-1, -2)

        # Pooling: average pooling over the sequence length
        x = x.mean(dim=1)

        # Decode the outputs
        x = self.decoder(x)  # (B, d_model) -> (B, d_output)

        return x


def setup_optimizer(model, lr, weight_decay, epochs):
    """
    S4 requires a specific optimizer setup.

    The S4 layer (A, B, C, dt) parameters typically
    require a smaller learning rate (typically 0.001), with no weight decay.

    The rest of the model can be trained with a higher learning rate (e.g. 0.004, 0.01)
    and weight decay (if desired).
    """

    # All parameters in the model
    all_parameters = list(model.parameters())

    # General parameters don't contain the special _optim key
    params = [p for p in all_parameters if not hasattr(p, "_optim")]

    # Create an optimizer with the general parameters
    optimizer = optim.AdamW(params, lr=lr, weight_decay=weight_decay)

    # Add parameters with special hyperparameters
    hps = [getattr(p, "_optim") for p in all_parameters if hasattr(p, "_optim")]
    hps = [
        dict(s) for s in sorted(list(dict.fromkeys(frozenset(hp.items()) for hp in hps)))
    ]  # Unique dicts
    for hp in hps:
        params = [p for p in all_parameters if getattr(p, "_optim", None) == hp]
        optimizer.add_param_group(
            {"params": params, **hp}
        )

    # Create a lr scheduler
    # scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=patience, factor=0.2)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, epochs)

    # Print optimizer info
    keys = sorted(set([k for hp in hps for k in hp.keys()]))
    for i, g in enumerate(optimizer.param_groups):
        group_hps = {k: g.get(k, None) for k in keys}
        print(' | '.join([
            f"Optimizer group {i}",
            f"{len(g['params'])} tensors",
        ] + [f"{k} {v}" for k, v in group_hps.items()]))

    return optimizer, scheduler


# Hyena's fftconv (HazyResearch/safari, models/sequence/hyena.py)
def fftconv(u, k, D):
    seqlen = u.shape[-1]
    fft_size = 2 * seqlen

    k_f = torch.fft.rfft(k, n=fft_size) / fft_size
    u_f = torch.fft.rfft(u.to(dtype=k.dtype), n=fft_size)

    if len(u.shape) > 3:
        k_f = k_f.unsqueeze(1)
    y = torch.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]

    out = y + u * D.unsqueeze(-1)
    return out.to(dtype=u.dtype)


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith('log_dt'):
                p.copy_(torch.from_numpy(r.uniform(math.log(0.001), math.log(0.1), tuple(p.shape)).astype(np.float32)))
            elif name.endswith(('log_A_real', 'A_imag')):
                continue                                   # deterministic init
            else:
                p.copy_(torch.from_numpy(r.normal(0, 0.3, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)

kern = S4DKernel(4, N=8)
load_numpy(kern, r)
print("kernel params", [(n, tuple(p.shape), p.dtype, getattr(p, '_optim', None)) for n, p in kern.named_parameters()])
C = torch.view_as_complex(kern.C)
print("C", C.dtype, tuple(C.shape), C.real.is_contiguous(), f"{C[1, 2].real.item():.4f}", f"{C[1, 2].imag.item():.4f}")
A = -torch.exp(kern.log_A_real) + 1j * kern.A_imag
print("A", A.dtype, fmt(torch.view_as_real(A)[1, 3], 2), f"{A.abs().max().item():.4f}", f"{A.angle()[0, 2].item():.4f}")
k = kern(L=16)
print("K", k.dtype, tuple(k.shape), fmt(k[2], 6))
# the kernel is the SSM's impulse response: K[l] = 2 Re(C' (exp(dt A))^l)
dt = torch.exp(kern.log_dt)
dA = torch.exp(A * dt.unsqueeze(-1))
Cp = C * (dA - 1.) / A
ref = 2 * torch.stack([(Cp * dA ** l).sum(-1).real for l in range(16)], -1)
print("impulse response", torch.allclose(k, ref, atol=1e-5))

# the long convolution three ways
u = torch.from_numpy(r.normal(size=(2, 4, 16)).astype(np.float32))
Dsk = torch.from_numpy(r.normal(size=(4,)).astype(np.float32))
L = u.size(-1)
k_f = torch.fft.rfft(k, n=2 * L)
u_f = torch.fft.rfft(u, n=2 * L)
print("rfft", k_f.dtype, tuple(k_f.shape), tuple(u_f.shape))
y = torch.fft.irfft(u_f * k_f, n=2 * L)[..., :L] + u * Dsk.unsqueeze(-1)
direct = F.conv1d(F.pad(u, (L - 1, 0)), k.flip(-1).unsqueeze(1), groups=4) + u * Dsk.unsqueeze(-1)
hy = fftconv(u, k, Dsk)
print("fft conv", fmt(y[1, 2], 5), torch.allclose(y, direct, atol=1e-4), torch.allclose(y, hy, atol=1e-5))
u4 = u.unsqueeze(2).expand(2, 4, 3, 16)
y4 = fftconv(u4, k, Dsk[:3])
print("fftconv 4d", tuple(y4.shape), torch.allclose(y4[:, :, 1], y + u * (Dsk[1] - Dsk.unsqueeze(-1)), atol=1e-5))

layer = S4D(4, d_state=8, transposed=False)
load_numpy(layer, r)
yl, state = layer(u.transpose(-1, -2))
print("S4D", tuple(yl.shape), state, fmt(yl[0, 3], 4))
drop = DropoutNd(0.25)
xd = torch.ones(2, 4, 16)
torch.manual_seed(0)
md = drop(xd)
print("DropoutNd tied", bool((md == md[..., :1]).all()), md.unique().numel() <= 2, f"{md.max().item():.4f}",
      "[rng]", int((md[..., 0] == 0).sum()))
drop.eval()
print("DropoutNd eval", torch.equal(drop(xd), xd))
try:
    DropoutNd(1.0)
except ValueError as e:
    print("ValueError", e)

# the example.py model on a small sequence classification task
torch.manual_seed(0)
model = S4Model(d_input=1, d_output=3, d_model=8, n_layers=2, dropout=0.0, prenorm=True, lr=0.01)
load_numpy(model, r)
optimizer, scheduler = setup_optimizer(model, lr=0.01, weight_decay=0.01, epochs=4)
print("groups", [(len(g['params']), g['lr'], g['weight_decay']) for g in optimizer.param_groups])
N, Lseq = 24, 32
t = np.arange(Lseq)
labels = r.integers(0, 3, N)
seqs = np.stack([np.sin(t * (0.2 + 0.3 * c)) + 0.3 * r.normal(size=Lseq) for c in labels])[..., None].astype(np.float32)
X, Y = torch.from_numpy(seqs), torch.from_numpy(labels)
criterion = nn.CrossEntropyLoss()
for epoch in range(3):
    model.train()
    train_loss, correct, total = 0, 0, 0
    for i in range(0, N, 8):
        inputs, targets = X[i:i + 8], Y[i:i + 8]
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        train_loss += loss.item()
        _, predicted = outputs.max(1)
        total += targets.size(0)
        correct += predicted.eq(targets).sum().item()
    scheduler.step()
    print('Epoch %d Loss: %.4f | Acc: %.3f%% (%d/%d) | lr %.5f' % (epoch, train_loss / 3, 100. * correct / total,
                                                                   correct, total, scheduler.get_last_lr()[0]))
print("A_imag grad", model.s4_layers[0].kernel.A_imag.grad.abs().sum().item() > 0,
      fmt(model.s4_layers[0].kernel.log_dt, 4))


# one training step under torch.compile against the same step eagerly
def train_step(inputs, targets):
    optimizer.zero_grad(set_to_none=True)
    loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss


xs, ys = X[:8], Y[:8]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(xs, ys).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(xs, ys).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
