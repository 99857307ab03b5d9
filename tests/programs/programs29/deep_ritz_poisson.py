# The Deep Ritz method (E & Yu 2017, "The Deep Ritz method: a deep
# learning-based numerical algorithm for solving variational problems") for
# the Poisson problem -Laplace(u) = 1 on the unit disk, u = 0 on its
# boundary, in the shape of its public PyTorch implementations (e.g.
# https://github.com/ZhangAustin/DeepRitz style code): the residual
# blocks of two Linear layers with the ReLU^3 activation
# torch.max(x ** 3, torch.tensor(0.)) and identity skips, the input padded
# to the width with zeros, points sampled uniformly in the disk (sqrt of a
# uniform radius, cos / sin of a uniform angle) and on its circle, the Ritz
# energy mean(0.5 |grad u|^2 - f u) * area with grad u from
# torch.autograd.grad(u, x, grad_outputs=torch.ones_like(u),
# create_graph=True), the boundary penalty beta * mean(u^2) * length, Adam
# with MultiStepLR. Written for this test: width 8, 2 blocks, 256 interior
# and 64 boundary points per step (torch.rand), 100 steps; the exact
# solution (1 - r^2) / 4 compared; one compiled training step against
# eager.
import copy
import math

import torch
import torch.nn as nn


class RitzNet(nn.Module):
    def __init__(self, d_in=2, width=8, depth=2):
        super(RitzNet, self).__init__()
        self.width = width
        self.d_in = d_in
        self.linears = nn.ModuleList()
        for _ in range(depth):
            self.linears.append(nn.Linear(width, width))
            self.linears.append(nn.Linear(width, width))
        self.out = nn.Linear(width, 1)

    @staticmethod
    def act(x):
        return torch.max(x ** 3, torch.tensor(0.))

    def forward(self, x):
        x = torch.cat([x, torch.zeros(x.shape[0], self.width - self.d_in)], dim=1)
        for i in range(0, len(self.linears), 2):
            x_temp = self.act(self.linears[i](x))
            x_temp = self.act(self.linears[i + 1](x_temp))
            x = x_temp + x
        return self.out(x)


def sample_disk(n):
    r = torch.sqrt(torch.rand(n, 1))
    theta = 2 * math.pi * torch.rand(n, 1)
    return torch.cat([r * torch.cos(theta), r * torch.sin(theta)], dim=1)


def sample_circle(n):
    theta = 2 * math.pi * torch.rand(n, 1)
    return torch.cat([torch.cos(theta), torch.sin(theta)], dim=1)


torch.manual_seed(0)
model = RitzNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[60, 85], gamma=0.5)
beta = 20.0
area, length = math.pi, 2 * math.pi


def train_step(x_in, x_bd):
    x_in.requires_grad_(True)
    u = model(x_in)
    grad_u = torch.autograd.grad(u, x_in, grad_outputs=torch.ones_like(u), create_graph=True)[0]
    energy = torch.mean(0.5 * torch.sum(grad_u ** 2, dim=1, keepdim=True) - 1.0 * u) * area
    u_bd = model(x_bd)
    penalty = beta * torch.mean(u_bd ** 2) * length
    loss = energy + penalty
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss, energy


for step in range(100):
    loss, energy = train_step(sample_disk(256), sample_circle(64))
    scheduler.step()
    if step % 25 == 0 or step == 99:
        print(f"step {step}: loss {loss.item():.6f} energy {energy.item():.6f} "
              f"lr {scheduler.get_last_lr()[0]:.5f}")

grid = torch.linspace(-0.9, 0.9, 7)
pts = torch.cartesian_prod(grid, grid)
pts = pts[pts.norm(dim=1) < 1]
with torch.no_grad():
    u = model(pts)[:, 0]
exact = (1 - (pts ** 2).sum(1)) / 4
print("points", pts.shape[0], "u(0,0)", round(model(torch.zeros(1, 2)).item(), 5), "exact 0.25")
print("relative L2 error", round(((u - exact).norm() / exact.norm()).item(), 5))
print("exact energy", round(-math.pi / 16, 6))

x_in, x_bd = sample_disk(256), sample_circle(64)
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c, _ = torch.compile(train_step)(x_in.clone(), x_bd)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e, _ = train_step(x_in.clone(), x_bd)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-5),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
