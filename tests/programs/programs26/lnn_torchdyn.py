# Lagrangian neural networks (Cranmer et al., 2020) as torchdyn writes them
# (https://github.com/DiffEqML/torchdyn, torchdyn/models/energy.py, class LNN,
# and its tutorial on a spring): per sample, torch.autograd.functional.
# jacobian and hessian of the learned Lagrangian with create_graph=True,
# the accelerations from hess[n:, n:].pinverse() @ (jac[:n] - hess[n:, :n]
# @ qd), trained by regressing the vector field of a mass-spring system with
# Adam, then rolled out with a fixed-step RK4 (torchdyn's odeint stands
# aside: the solver is the classic four-stage one written out).
# Written for this test: a 2-32-32-1 Softplus MLP, 16 states, 4 steps; one
# training step compiled against eager.
import copy
from functools import partial

import numpy as np
import torch
import torch.nn as nn
from torch.autograd.functional import hessian, jacobian


class LNN(nn.Module):
    """Lagrangian Neural Network.

    :param net: function parametrizing the Lagrangian.
    :type net: nn.Module
    """
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        with torch.set_grad_enabled(True):
            self.n = n = x.shape[1]//2
            bs = x.shape[0]
            x = x.requires_grad_(True)
            qqd_batch = tuple(x[i, :] for i in range(bs))
            jac = tuple(map(partial(jacobian, self._lagrangian, create_graph=True), qqd_batch))
            hess = tuple(map(partial(hessian, self._lagrangian, create_graph=True), qqd_batch))
            qdd_batch = tuple(map(self._qdd, zip(jac, hess, qqd_batch)))
            qd, qdd = x[:, n:], torch.cat([qdd[None] for qdd in qdd_batch])
            return torch.cat([qd, qdd], 1)

    def _lagrangian(self, qqd):
        return self.net(qqd).sum()

    def _qdd(self, inp):
        n = self.n ; jac, hess, qqd = inp
        return hess[n:, n:].pinverse()@(jac[:n] - hess[n:, :n]@qqd[n:])


def spring(x, k=1.0, m=1.0):
    """The mass-spring vector field: q' = p / m, qd' = -k q / m."""
    q, qd = x[:, :1], x[:, 1:]
    return torch.cat([qd, -k * q / m], 1)


def rk4_step(f, x, dt):
    k1 = f(x)
    k2 = f(x + dt / 2 * k1)
    k3 = f(x + dt / 2 * k2)
    k4 = f(x + dt * k3)
    return x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


rng = np.random.RandomState(0)
X = torch.from_numpy(rng.uniform(-1, 1, size=(16, 2)).astype(np.float32))
y = spring(X)
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(2, 32), nn.Softplus(), nn.Linear(32, 32), nn.Softplus(),
                    nn.Linear(32, 1))
model = LNN(net)
print("field", [round(v, 5) for v in model(X[:2].clone()).flatten().tolist()])
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(4):
    opt.zero_grad()
    pred = model(X.clone())
    loss = ((pred - y) ** 2).mean()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f} grad {net[0].weight.grad.norm().item():.6f}")

x = X[:2].clone()
traj = [x]
for _ in range(5):
    x = rk4_step(lambda s: model(s).detach(), x, 0.1)
    traj.append(x)
print("rollout", [round(v, 5) for v in torch.stack(traj)[:, 0].flatten().tolist()])


def train_step(X, y):
    opt.zero_grad()
    loss = ((model(X.clone()) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
loss_c = torch.compile(train_step)(X, y)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
opt.load_state_dict(opt_state)
loss_e = train_step(X, y)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
