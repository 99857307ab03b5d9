# Two scientific-code layers written the way their public repos write them:
# SynodicMusic/ChebyKAN's ChebyKANLayer (cheby_coeffs initialized by
# nn.init.normal_(std=1 / (input_dim * (degree + 1))), the "arange" buffer,
# torch.tanh, view / expand to degree + 1 copies, x.acos(), the in-place
# `x *= self.arange`, .cos(), torch.einsum("bid,iod->bo", ...)) fitted to the
# KAN paper's toy function exp(sin(pi x) + y^2) with LayerNorm between
# layers, its Chebyshev features checked against
# torch.special.chebyshev_polynomial_t; and DimeNet's radial basis as
# pytorch_geometric's dimenet.py writes it (Envelope's polynomial cutoff,
# BesselBasisLayer's freq Parameter filled by torch.arange(..., out=
# self.freq).mul_(PI) under no_grad, then requires_grad_(), sin(freq * d) /
# the envelope) on random interatomic distances, checked against
# torch.special.spherical_bessel_j0, with the other torch.special Bessel
# functions and orthogonal polynomials physics codes call (bessel_j0 / j1 /
# y0 / y1, modified_bessel_i0 / i1 / k0 / k1 and the scaled K's, hermite /
# laguerre / legendre / the shifted Chebyshev kinds, tensor or scalar n).
# Changes for a CPU test: small layers and data, a few Adam steps; then one
# ChebyKAN training step under torch.compile against the same step eagerly.
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

PI = math.pi


# SynodicMusic/ChebyKAN: ChebyKANLayer.py
class ChebyKANLayer(nn.Module):
    def __init__(self, input_dim, output_dim, degree):
        super(ChebyKANLayer, self).__init__()
        self.inputdim = input_dim
        self.outdim = output_dim
        self.degree = degree

        self.cheby_coeffs = nn.Parameter(torch.empty(input_dim, output_dim, degree + 1))
        nn.init.normal_(self.cheby_coeffs, mean=0.0, std=1 / (input_dim * (degree + 1)))
        self.register_buffer("arange", torch.arange(0, degree + 1, 1))

    def forward(self, x):
        # Since Chebyshev polynomial is defined in [-1, 1]
        # We need to normalize x to [-1, 1] using tanh
        x = torch.tanh(x)
        # View and repeat input degree + 1 times
        x = x.view((-1, self.inputdim, 1)).expand(
            -1, -1, self.degree + 1
        )  # shape = (batch_size, inputdim, self.degree + 1)
        # Apply acos
        x = x.acos()
        # Multiply by arange [0 .. degree]
        x *= self.arange
        # Apply cos
        x = x.cos()
        # Compute the Chebyshev interpolation
        y = torch.einsum(
            "bid,iod->bo", x, self.cheby_coeffs
        )  # shape = (batch_size, outdim)
        y = y.view(-1, self.outdim)
        return y


class ChebyKAN(nn.Module):
    def __init__(self):
        super(ChebyKAN, self).__init__()
        self.chebykan1 = ChebyKANLayer(2, 8, 4)
        self.ln1 = nn.LayerNorm(8)
        self.chebykan2 = ChebyKANLayer(8, 1, 4)

    def forward(self, x):
        x = self.chebykan1(x)
        x = self.ln1(x)
        x = self.chebykan2(x)
        return x


# pytorch_geometric: torch_geometric/nn/models/dimenet.py
class Envelope(torch.nn.Module):
    def __init__(self, exponent: int):
        super().__init__()
        self.p = exponent + 1
        self.a = -(self.p + 1) * (self.p + 2) / 2
        self.b = self.p * (self.p + 2)
        self.c = -self.p * (self.p + 1) / 2

    def forward(self, x):
        p, a, b, c = self.p, self.a, self.b, self.c
        x_pow_p0 = x.pow(p - 1)
        x_pow_p1 = x_pow_p0 * x
        x_pow_p2 = x_pow_p1 * x
        return (1.0 / x + a * x_pow_p0 + b * x_pow_p1 +
                c * x_pow_p2) * (x < 1.0).to(x.dtype)


class BesselBasisLayer(torch.nn.Module):
    def __init__(self, num_radial: int, cutoff: float = 5.0,
                 envelope_exponent: int = 5):
        super().__init__()
        self.cutoff = cutoff
        self.envelope = Envelope(envelope_exponent)

        self.freq = torch.nn.Parameter(torch.empty(num_radial))

        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            torch.arange(1, self.freq.numel() + 1, out=self.freq).mul_(PI)
        self.freq.requires_grad_()

    def forward(self, dist):
        dist = dist.unsqueeze(-1) / self.cutoff
        return self.envelope(dist) * (self.freq * dist).sin()


def fmt(t, n=4):
    return [round(v, n) for v in t.detach().reshape(-1).tolist()]


torch.manual_seed(0)

# the KAN toy problem
def f(x):
    return torch.exp(torch.sin(PI * x[:, [0]]) + x[:, [1]] ** 2)


train_x = torch.rand(64, 2) * 2 - 1
train_y = f(train_x)
model = ChebyKAN()
print(model)
print("coeffs", tuple(model.chebykan1.cheby_coeffs.shape), f"{model.chebykan1.cheby_coeffs.std().item():.4f}",
      "buffers", [(n, b.tolist()) for n, b in model.named_buffers()])

# the layer's features are the Chebyshev polynomials T_d(tanh x)
layer = model.chebykan1
t = torch.tanh(train_x[:5])
feat = t.view(-1, 2, 1).expand(-1, -1, 5).acos() * layer.arange
feat = feat.cos()
special = torch.stack([torch.special.chebyshev_polynomial_t(t, d) for d in range(5)], dim=-1)
print("T_d(tanh x)", torch.allclose(feat, special, atol=1e-5), fmt(special[0, 0]),
      fmt(torch.special.chebyshev_polynomial_t(t[:, 0], layer.arange.unsqueeze(-1))[:, 0]))

optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
for step in range(40):
    optimizer.zero_grad()
    loss = F.mse_loss(model(train_x), train_y)
    loss.backward()
    optimizer.step()
    if step % 10 == 9:
        print(f"chebykan step {step + 1} loss {loss.item():.5f}",
              fmt(model.chebykan2.cheby_coeffs.grad[:2, 0], 5))
test_x = torch.rand(16, 2) * 2 - 1
with torch.no_grad():
    print("test mse", f"{F.mse_loss(model(test_x), f(test_x)).item():.5f}")

# DimeNet's radial basis on random distances
rbf = BesselBasisLayer(num_radial=6, cutoff=5.0, envelope_exponent=5)
print("freq", fmt(rbf.freq), rbf.freq.requires_grad, rbf.freq.is_leaf,
      "envelope", rbf.envelope.p, rbf.envelope.a, rbf.envelope.b, rbf.envelope.c)
dist = torch.rand(10) * 6.0 + 0.5          # some beyond the cutoff
basis = rbf(dist)
print("basis", tuple(basis.shape), fmt(basis[dist < 5.0][0]), "beyond cutoff", (dist > 5.0).sum().item(),
      basis[dist > 5.0].abs().sum().item())
d = dist.unsqueeze(-1) / rbf.cutoff
sj0 = torch.special.spherical_bessel_j0(rbf.freq.detach() * d)
print("sin(f d) == f d j0(f d)", torch.allclose((rbf.freq.detach() * d).sin(), rbf.freq.detach() * d * sj0, atol=1e-6))
head = nn.Linear(6, 1)
opt2 = torch.optim.Adam(list(rbf.parameters()) + list(head.parameters()), lr=0.01)
energy = torch.exp(-dist).unsqueeze(-1)
for step in range(5):
    opt2.zero_grad()
    loss = F.mse_loss(head(rbf(dist)), energy)
    loss.backward()
    opt2.step()
print("rbf fit", f"{loss.item():.5f}", "freq", fmt(rbf.freq), "freq grad", fmt(rbf.freq.grad))

# the other torch.special functions scientific codes call
x = torch.tensor([0.1, 0.5, 1.0, 2.5, 4.0, 6.0, 9.5, 20.0], dtype=torch.float64)
for name in ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
             "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
             "scaled_modified_bessel_k1", "spherical_bessel_j0"]:
    v = getattr(torch.special, name)(x)
    print(name, v.dtype, [f"{u:.6e}" for u in v.tolist()])
print("k0 edges", torch.special.modified_bessel_k0(torch.tensor([0.0, -1.0])).tolist(),
      "y0 at 0", torch.special.bessel_y0(torch.tensor(0.0)).item(),
      "int input", torch.special.bessel_j0(torch.tensor([1, 2])).dtype)
u = torch.linspace(-1, 1, 9)
n = torch.arange(0, 9)
for name in ["hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p",
             "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
             "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u"]:
    fn = getattr(torch.special, name)
    print(name, fmt(fn(u, 3)), fmt(fn(0.3, n), 3), fn(u.double(), 2.0).dtype)
xr = torch.tensor([0.25, 0.7], requires_grad=True)
print("no grad", torch.special.bessel_j0(xr).requires_grad, torch.special.chebyshev_polynomial_t(xr, 3).grad_fn)


# one ChebyKAN training step under torch.compile against the same step eagerly
def train_step(x, y):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(train_x, train_y).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(train_x, train_y).item() for _ in range(2)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
