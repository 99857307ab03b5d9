"""torchcde's README / time-series example: a neural CDE over natural cubic,
Hermite (backward differences), linear and rectilinear interpolations,
cdeint with rk4 / dopri5 / the adjoint / torchsde's reversible Heun,
trained two steps on a spiral-like toy classification; einx's operations
(dot, sum, id, get_at, set_at, softmax, ...) on torch tensors and its
torch.vmap adapters; weight EMAs with ema-pytorch's EMA and torch-ema's
ExponentialMovingAverage around a small training loop, and ema-pytorch's
PostHocEMA synthesizing a profile from its checkpoints."""
import math
import random

import torch
import torch.nn as nn

import einx
import einx.torch
import torchcde
from ema_pytorch import EMA, PostHocEMA
from torch_ema import ExponentialMovingAverage

torch.manual_seed(0)
random.seed(0)


def fmt(t):
    return [f"{v:.5f}" for v in t.detach().reshape(-1).tolist()]


# ---------------- torchcde
batch, length, input_channels, hidden_channels = 4, 6, 3, 5


class CDEFunc(nn.Module):
    def __init__(self, input_channels, hidden_channels):
        super().__init__()
        self.input_channels = input_channels
        self.hidden_channels = hidden_channels
        self.linear1 = nn.Linear(hidden_channels, 16)
        self.linear2 = nn.Linear(16, input_channels * hidden_channels)

    def forward(self, t, z):
        z = self.linear1(z).relu()
        z = self.linear2(z).tanh()
        return z.view(z.size(0), self.hidden_channels, self.input_channels)


class NeuralCDE(nn.Module):
    def __init__(self, input_channels, hidden_channels, output_channels, interpolation="cubic"):
        super().__init__()
        self.func = CDEFunc(input_channels, hidden_channels)
        self.initial = nn.Linear(input_channels, hidden_channels)
        self.readout = nn.Linear(hidden_channels, output_channels)
        self.interpolation = interpolation

    def forward(self, coeffs, **kw):
        if self.interpolation == "cubic":
            X = torchcde.CubicSpline(coeffs)
        else:
            X = torchcde.LinearInterpolation(coeffs)
        z0 = self.initial(X.evaluate(X.interval[0]))
        z_T = torchcde.cdeint(X=X, z0=z0, func=self.func, t=X.interval, **kw)
        return self.readout(z_T[:, 1])


t = torch.linspace(0, 4 * math.pi, length)
start = torch.rand(batch) * 2 * math.pi
xs = torch.stack([torch.cos(start[:, None] + t) * (1 + t / 10),
                  torch.sin(start[:, None] + t) * (1 + t / 10)], dim=2)
xs[:2, :, 0] *= -1
ys = torch.tensor([1.0, 1.0, 0.0, 0.0])
X_data = torch.cat([t.unsqueeze(0).repeat(batch, 1).unsqueeze(-1), xs], dim=2)
X_data[0, 2, 1] = float("nan")                  # a missing observation

cubic = torchcde.natural_cubic_coeffs(X_data)
print("natural cubic", tuple(cubic.shape), fmt(cubic[1, :2]))
herm = torchcde.hermite_cubic_coefficients_with_backward_differences(X_data)
print("hermite", tuple(herm.shape), fmt(herm[1, :2]))
lin = torchcde.linear_interpolation_coeffs(X_data)
print("linear", tuple(lin.shape), fmt(lin[0, :4]))
rect = torchcde.linear_interpolation_coeffs(X_data, rectilinear=0)
print("rectilinear", tuple(rect.shape), fmt(rect[0, :3]))
spline = torchcde.CubicSpline(cubic)
print("spline eval", fmt(spline.evaluate(torch.tensor(1.3))[1]), fmt(spline.derivative(torch.tensor(1.3))[1]))
print("grid points", fmt(spline.grid_points), "interval", fmt(spline.interval))

model = NeuralCDE(input_channels, 8, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for step in range(2):
    pred = model(cubic, method="rk4", options=dict(step_size=0.5)).squeeze(-1)
    loss = nn.functional.binary_cross_entropy_with_logits(pred, ys)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"cde step {step} loss {loss.item():.5f}")

hcoeffs = torchcde.hermite_cubic_coefficients_with_backward_differences(X_data)
out = model(hcoeffs, method="dopri5", rtol=1e-3, atol=1e-5)
print("hermite dopri5", fmt(out))
lmodel = NeuralCDE(input_channels, 8, 1, interpolation="linear")
out = lmodel(lin, method="rk4", options=dict(step_size=0.5))
print("linear rk4", fmt(out))
lout = lmodel(lin, method="dopri5", rtol=1e-4, atol=1e-6,
              options=dict(jump_t=torchcde.LinearInterpolation(lin).grid_points))
print("linear dopri5 jump_t", fmt(lout))
# the torchsde backend: reversible Heun and its adjoint (torchcde's recommended solver)
z0 = torch.rand(batch, 8, requires_grad=True)
zs = torchcde.cdeint(X=spline, func=model.func, z0=z0, t=spline.interval, backend="torchsde",
                     method="reversible_heun", adjoint_method="adjoint_reversible_heun", dt=0.5)
zs[:, -1].square().sum().backward()
print("sde reversible_heun", fmt(zs[:2, -1, :3]), "z0 grad", fmt(z0.grad[0, :4]))
z0 = torch.rand(batch, 8, requires_grad=True)
zt = torchcde.cdeint(X=spline, func=model.func, z0=z0, t=spline.grid_points, adjoint=True,
                     method="rk4", options=dict(step_size=1.0))
zt.sum().backward()
print("adjoint zt", tuple(zt.shape), fmt(zt[:, -1, :2]), "z0 grad", fmt(z0.grad[0]))

# ---------------- einx
a = torch.randn(2, 3, 4)
b = torch.randn(4, 5)
print("dot", fmt(einx.dot("b s [c], [c] d -> b s d", a, b)[0, 0]))
print("sum", fmt(einx.sum("b [s] c", a)[0]))
print("mean", fmt(einx.mean("b s [c]", a)[1]))
print("max", fmt(einx.max("[b] s c", a)[0]))
print("id", tuple(einx.id("b s c -> c (b s)", a).shape), fmt(einx.id("b s c -> c (b s)", a)[0]))
print("add", fmt(einx.add("b s c, c", a, torch.arange(4.0))[0, 0]))
print("softmax", fmt(einx.softmax("b s [c]", a)[0, 0]))
idx = torch.tensor([[0, 2], [1, 3]])
print("get_at", fmt(einx.get_at("b s [c], b i -> b s i", a, idx)[0]))
print("set_at", fmt(einx.set_at("b s [c], b i, b s i -> b s [c]", a, idx, torch.zeros(2, 3, 2))[0, 0]))
print("argmax", einx.argmax("b s [c]", a).tolist())
print("flip", fmt(einx.flip("b s [c]", a)[0, 0]))
print("where", fmt(einx.where("b s c, , b s c", a > 0, 0.0, a)[0, 0]))
q, k, v = torch.randn(3, 2, 4, 2, 3).unbind(0)          # b t h c
att = einx.dot("b q h c, b k h c -> b h q k", q, k) / math.sqrt(3)
att = einx.softmax("b h q [k]", att)
o = einx.dot("b h q k, b k h c -> b q (h c)", att, v)
print("attention", tuple(o.shape), fmt(o[0, 0]))
w = torch.randn(4, 6, requires_grad=True)
y = einx.dot("b s [c], [c] d -> b s d", a, w)
y.square().mean().backward()
print("dot grad", fmt(w.grad[0]))
print("logsumexp", fmt(einx.logsumexp("b s [c]", a)[0]))
print("var std", fmt(einx.var("b [s] c", a)[0]), fmt(einx.std("[b s] c", a)))
print("sort", fmt(einx.sort("b s [c]", a)[1, 2]), "argsort", einx.argsort("b s [c]", a)[1, 2].tolist())
print("roll", fmt(einx.roll("b s [c]", a, shift=1)[1, 2]))
print("multiply", fmt(einx.multiply("b s c, s", a, torch.tensor([1.0, -2.0, 3.0]))[1, 2]))
print("add_at", fmt(einx.add_at("[n] c, b, b c -> [n] c", torch.zeros(3, 2), torch.tensor([0, 2, 0]),
                                torch.ones(3, 2))))
print("matches", einx.matches("b s c", a), einx.matches("b c", a))

# einx.torch's adapters: a per-item function vmapped (torch.vmap) over the named axes
torch.manual_seed(5)
x = torch.randn(3, 4); y = torch.randn(3, 4)
vdot = einx.torch.adapt_with_vmap(lambda a, b: torch.dot(a, b))
print("vmap dot", fmt(vdot("b [c], b [c] -> b", x, y)))
def attn(q, k, v):
    return torch.softmax(q @ k.T, -1) @ v
vattn = einx.torch.adapt_with_vmap(attn)
q = torch.randn(2, 3, 5, 4, requires_grad=True)
o = vattn("b h [s c], b h [t c], b h [t d] -> b h [s d]", q, torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 2))
o.sum().backward()
print("vmap attention", tuple(o.shape), fmt(o[0, 0, 0]), fmt(q.grad[0, 0, 0]))
rsum = einx.torch.adapt_numpylike_reduce(lambda a, axis: torch.sum(a, dim=axis))
print("reduce", fmt(rsum("b [c]", x)))
emax = einx.torch.adapt_numpylike_elementwise(lambda a, b: torch.maximum(a, b))
print("elementwise", fmt(emax("b c, c", x, y[0])[0]))

# ---------------- EMAs of weights
net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
ema = EMA(net, beta=0.9, update_after_step=1, update_every=1)
tema = ExponentialMovingAverage(net.parameters(), decay=0.8)
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
data, target = torch.randn(16, 4), torch.randn(16, 2)
for step in range(4):
    loss = nn.functional.mse_loss(net(data), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    ema.update()
    tema.update()
    print(f"ema step {step} loss {loss.item():.5f} ema_step {int(ema.step)}")
net.eval()
ema.eval()
print("online", fmt(net(data[:2])))
print("ema_pytorch", fmt(ema(data[:2])))
print("ema model bn", fmt(ema.ema_model[1].running_mean[:4]))
with tema.average_parameters():
    print("torch_ema", fmt(net(data[:2])))
print("restored", fmt(net(data[:2])))
state = tema.state_dict()
tema.copy_to(net.parameters())
print("copied", fmt(net(data[:2])), state["decay"], state["num_updates"])
torch.save(ema.state_dict(), "ema.pt")
ema2 = EMA(net, beta=0.9)
ema2.load_state_dict(torch.load("ema.pt"))
print("ema loaded", fmt(ema2(data[:2])), int(ema2.step))

# post-hoc EMA (Karras et al.): two EMA profiles checkpointed, a third synthesized
net.train()
emas = PostHocEMA(net, sigma_rels=(0.05, 0.28), update_every=1, checkpoint_every_num_steps=2,
                  checkpoint_folder="./post-hoc-ema-checkpoints")
for step in range(4):
    loss = nn.functional.mse_loss(net(data), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
    emas.update()
net.eval()
emas.eval()
print("post-hoc", [fmt(out) for out in emas(data[:2])])
synth = emas.synthesize_ema_model(sigma_rel=0.15)
synth.eval()
print("synthesized", fmt(synth(data[:2])))
