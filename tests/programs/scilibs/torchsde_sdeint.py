# google-research/torchsde, from PyPI, as its README and examples use it:
# the README's general-noise Ito SDE solved by sdeint; diagonal-noise SDEs
# through euler / milstein / srk (with a BrownianInterval carrying space-time
# Levy area) and a Stratonovich one through reversible_heun; a small neural
# SDE fitted a few Adam steps by sdeint_adjoint (gradients through the
# adjoint SDE) and by plain backprop, with logqp's KL term as in
# examples/latent_sde.py; examples/sde_gan.py's generator through
# reversible_heun and its exact adjoint; log_ode, scalar and additive noise,
# extra solver state; float64 adaptive solves forward and adjoint.  Seeded: torch, and numpy (BrownianInterval's
# default entropy); fixed steps (dt) so each solve is a few dozen steps.
import numpy as np
import torch
import torchsde

torch.manual_seed(0)
np.random.seed(0)

batch_size, state_size, brownian_size = 4, 3, 2
t_size = 6


class SDE(torch.nn.Module):
    noise_type = 'general'
    sde_type = 'ito'

    def __init__(self):
        super().__init__()
        self.mu = torch.nn.Linear(state_size, state_size)
        self.sigma = torch.nn.Linear(state_size, state_size * brownian_size)

    # Drift
    def f(self, t, y):
        return self.mu(y)  # shape (batch_size, state_size)

    # Diffusion
    def g(self, t, y):
        return self.sigma(y).view(batch_size, state_size, brownian_size)


sde = SDE()
y0 = torch.full((batch_size, state_size), 0.1)
ts = torch.linspace(0, 1, t_size)
with torch.no_grad():
    ys = torchsde.sdeint(sde, y0, ts, dt=0.05)
print('readme', tuple(ys.shape), [f"{v:.5f}" for v in ys[-1].flatten().tolist()])


# BrownianInterval directly: increments, the Levy area, reproducible queries
bm = torchsde.BrownianInterval(t0=0., t1=1., size=(batch_size, brownian_size),
                               entropy=1234, levy_area_approximation='space-time')
w = bm(0.25, 0.75)
w2, a = bm(0.25, 0.75, return_U=True)
print('bm', [f"{v:.5f}" for v in w.flatten().tolist()], torch.equal(w, w2),
      [f"{v:.5f}" for v in a.flatten().tolist()])
print('bm sum', f"{(bm(0., 0.5) + bm(0.5, 1.)).sum().item():.5f}", f"{bm(0., 1.).sum().item():.5f}")
tree = torchsde.BrownianTree(t0=0., w0=torch.zeros(2, 2), t1=1., entropy=7, tol=1e-3)
print('tree', [f"{v:.5f}" for v in tree(0.3, 0.6).flatten().tolist()])
path = torchsde.BrownianPath(t0=0., w0=torch.zeros(2, 2))  # entropy from numpy
print('path', [f"{v:.5f}" for v in path(0.2, 0.9).flatten().tolist()])


class Diagonal(torch.nn.Module):
    noise_type = 'diagonal'

    def __init__(self, sde_type):
        super().__init__()
        self.sde_type = sde_type
        self.theta = torch.nn.Parameter(torch.tensor([0.5, 1.0, 1.5]))
        self.sigma = torch.nn.Parameter(torch.tensor([0.3, 0.2, 0.1]))

    def f(self, t, y):
        return -self.theta * y + torch.sin(t) * 0.1

    def g(self, t, y):
        return self.sigma * torch.cos(y)


y0 = torch.tensor([[1.0, 0.5, -0.5]]).repeat(batch_size, 1)
bm = torchsde.BrownianInterval(t0=0., t1=1., size=(batch_size, state_size),
                               entropy=42, levy_area_approximation='space-time')
for method in ('euler', 'milstein', 'srk'):
    with torch.no_grad():
        ys = torchsde.sdeint(Diagonal('ito'), y0, ts, bm=bm, method=method, dt=0.05)
    print(method, [f"{v:.5f}" for v in ys[-1].flatten().tolist()])
for method in ('midpoint', 'heun', 'reversible_heun'):
    with torch.no_grad():
        ys = torchsde.sdeint(Diagonal('stratonovich'), y0, ts, bm=bm, method=method, dt=0.05)
    print(method, [f"{v:.5f}" for v in ys[-1].flatten().tolist()])
# milstein's derivative-free variant and adaptive stepping
with torch.no_grad():
    ys = torchsde.sdeint(Diagonal('ito'), y0, ts, bm=bm, method='milstein', dt=0.05,
                         options={'grad_free': True})
    print('grad_free', [f"{v:.5f}" for v in ys[-1].flatten().tolist()])
    ys = torchsde.sdeint(Diagonal('ito'), y0, ts, bm=bm, method='srk', dt=0.1, adaptive=True,
                         rtol=1e-2, atol=1e-3)
    print('adaptive', [f"{v:.5f}" for v in ys[-1].flatten().tolist()])


class NeuralSDE(torch.nn.Module):
    """Latent-SDE-like: a learnt posterior drift, a fixed prior drift, logqp."""
    noise_type = 'diagonal'
    sde_type = 'ito'

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(state_size + 1, 16), torch.nn.Tanh(),
                                       torch.nn.Linear(16, state_size))
        self.log_sigma = torch.nn.Parameter(torch.full((state_size,), -1.0))

    def f(self, t, y):
        tt = torch.ones_like(y[:, :1]) * t
        return self.net(torch.cat([y, tt], dim=1))

    def h(self, t, y):
        return -y

    def g(self, t, y):
        return self.log_sigma.exp().expand_as(y) * torch.ones_like(y)


target = torch.tensor([0.2, -0.1, 0.3])
for adjoint in (False, True):
    torch.manual_seed(1)
    model = NeuralSDE()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ts2 = torch.linspace(0, 0.5, 3)
    for step in range(3):
        # logqp augments the state by one channel (the KL's), and its noise too
        channels = state_size if adjoint else state_size + 1
        bm = torchsde.BrownianInterval(t0=0., t1=0.5, size=(batch_size, channels), entropy=step)
        opt.zero_grad()
        if adjoint:
            ys = torchsde.sdeint_adjoint(model, y0, ts2, bm=bm, dt=0.1, method='euler',
                                         adjoint_method='euler')
            kl = torch.zeros(())
        else:
            ys, logqp = torchsde.sdeint(model, y0, ts2, bm=bm, dt=0.1, logqp=True, method='euler')
            kl = logqp.sum(0).mean()
        loss = ((ys[-1] - target) ** 2).mean() + 0.1 * kl
        loss.backward()
        opt.step()
        print('adjoint' if adjoint else 'backprop', step, f"{loss.item():.6f}",
              f"{model.log_sigma.grad.norm().item():.6f}")


# examples/sde_gan.py's generator: a Stratonovich general-noise SDE solved
# by reversible_heun, gradients by its exact adjoint
class Generator(torch.nn.Module):
    sde_type = 'stratonovich'
    noise_type = 'general'

    def __init__(self, hidden=4, noise=2):
        super().__init__()
        self.hidden, self.noise = hidden, noise
        self.drift = torch.nn.Sequential(torch.nn.Linear(hidden + 1, 8), torch.nn.SiLU(),
                                         torch.nn.Linear(8, hidden), torch.nn.Tanh())
        self.diffusion = torch.nn.Sequential(torch.nn.Linear(hidden + 1, 8), torch.nn.SiLU(),
                                             torch.nn.Linear(8, hidden * noise), torch.nn.Tanh())

    def f_and_g(self, t, x):
        tx = torch.cat([torch.full_like(x[:, :1], float(t)), x], dim=1)
        return self.drift(tx), self.diffusion(tx).view(x.size(0), self.hidden, self.noise)


torch.manual_seed(5)
gen = Generator()
x0 = torch.randn(batch_size, 4, requires_grad=True)
ts3 = torch.linspace(0, 1, 5)
bm = torchsde.BrownianInterval(t0=0., t1=1., size=(batch_size, 2), entropy=9)
xs = torchsde.sdeint_adjoint(gen, x0, ts3, bm=bm, dt=0.125, method='reversible_heun',
                             adjoint_method='adjoint_reversible_heun')
xs.pow(2).mean().backward()
print('sde_gan', [f"{v:.5f}" for v in xs[-1, 0].tolist()], f"{x0.grad.norm().item():.6f}",
      f"{sum(p.grad.norm().item() for p in gen.parameters()):.6f}")
x0.grad = None
for p in gen.parameters():
    p.grad = None
xs = torchsde.sdeint(gen, x0, ts3, bm=bm, dt=0.125, method='reversible_heun')
xs.pow(2).mean().backward()
print('sde_gan backprop', f"{x0.grad.norm().item():.6f}",
      f"{sum(p.grad.norm().item() for p in gen.parameters()):.6f}")
with torch.no_grad():
    # (log_ode calls g on its own: the Diagonal Stratonovich SDE above)
    bm_f = torchsde.BrownianInterval(t0=0., t1=1., size=(batch_size, state_size), entropy=9,
                                     levy_area_approximation='foster')
    ys = torchsde.sdeint(Diagonal('stratonovich'), y0, ts3, bm=bm_f, dt=0.1, method='log_ode')
print('log_ode', [f"{v:.5f}" for v in ys[-1, 0].tolist()])


# scalar and additive noise, named drift / diffusion methods, extra state
class Scalar(torch.nn.Module):
    noise_type = 'scalar'
    sde_type = 'ito'

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.tensor(0.7))

    def drift(self, t, y):
        return -self.a * y

    def diffusion(self, t, y):
        return (0.2 * torch.sigmoid(y)).unsqueeze(-1)


class Additive(torch.nn.Module):
    noise_type = 'additive'
    sde_type = 'ito'

    def f(self, t, y):
        return torch.sin(y) - 0.5 * y

    def g(self, t, y):
        return torch.tensor([[0.1, 0.0], [0.05, 0.2], [0.0, 0.1]]).expand(y.size(0), 3, 2)


y0 = torch.tensor([[1.0, 0.5, -0.5]]).repeat(batch_size, 1)
bm1 = torchsde.BrownianInterval(t0=0., t1=1., size=(batch_size, 1), entropy=3,
                                levy_area_approximation='davie')
for method in ('euler', 'milstein', 'srk'):
    ys = torchsde.sdeint(Scalar(), y0, ts, bm=bm1, method=method, dt=0.05,
                         names={'drift': 'drift', 'diffusion': 'diffusion'})
    print('scalar', method, [f"{v:.5f}" for v in ys[-1, 0].tolist()])
bm2 = torchsde.BrownianInterval(t0=0., t1=1., size=(batch_size, 2), entropy=4,
                                levy_area_approximation='foster')
with torch.no_grad():
    for method in ('euler', 'srk'):
        ys = torchsde.sdeint(Additive(), y0, ts, bm=bm2, method=method, dt=0.05)
        print('additive', method, [f"{v:.5f}" for v in ys[-1, 0].tolist()])
    ys, extra = torchsde.sdeint(Diagonal('stratonovich'), y0, ts, bm=bm_f, method='reversible_heun',
                                dt=0.05, extra=True)
    print('extra', len(extra), [f"{v:.5f}" for v in extra[0][0].tolist()])


# float64: an Ornstein-Uhlenbeck SDE, adaptive srk forward, adaptive milstein
# adjoint, a BrownianInterval with a halfway tree
class OU(torch.nn.Module):
    noise_type = 'diagonal'
    sde_type = 'ito'

    def __init__(self):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.tensor([0.5, 1.0], dtype=torch.float64))
        self.mu = torch.nn.Parameter(torch.tensor([0.1, -0.2], dtype=torch.float64))
        self.sigma = torch.nn.Parameter(torch.tensor([0.3, 0.2], dtype=torch.float64))

    def f(self, t, y):
        return self.theta * (self.mu - y)

    def g(self, t, y):
        return self.sigma.expand_as(y)


sde = OU()
y0 = torch.tensor([[1.0, -1.0]] * 3, dtype=torch.float64, requires_grad=True)
ts = torch.linspace(0, 1, 3, dtype=torch.float64)
bm = torchsde.BrownianInterval(t0=0., t1=1., size=(3, 2), dtype=torch.float64, entropy=5,
                               halfway_tree=True, tol=1e-3, levy_area_approximation='space-time')
ys = torchsde.sdeint_adjoint(sde, y0, ts, bm=bm, method='srk', dt=0.1, adaptive=True, rtol=1e-2,
                             atol=1e-3, adjoint_method='milstein', adjoint_adaptive=True)
ys[-1].sum().backward()
print('float64 adaptive adjoint', ys.dtype, [f"{v:.8f}" for v in ys[-1].flatten().tolist()])
print('  grads', [f"{v:.8f}" for v in y0.grad.flatten().tolist()], [f"{p.grad.sum().item():.8f}" for p in sde.parameters()])
