# A consistent Koopman autoencoder after erichson/koopmanAE
# (https://github.com/erichson/koopmanAE, model.py and train.py, Azencot
# et al. 2020), as written there: gaussian_init_, the forward dynamics
# nn.Linear(b, b, bias=False) initialised orthogonal through torch.svd
# (U V^T * init_scale), the backward dynamics initialised to
# torch.pinverse of its transpose, the encoder / decoder MLPs with Tanh,
# the training loss of multi-step forward predictions, backward
# predictions, the identity loss, and the consistency loss summed over the
# leading k x k blocks of B A and A B against torch.eye(k), gradient
# clipping with clip_grad_norm_, AdamW and the step-wise lr decay. Written
# for this test: a damped pendulum integrated in numpy, 8 steps of
# 4-step-ahead training on 24 windows; one compiled training step against
# eager.
import copy

import numpy as np
import torch
from torch import nn


def gaussian_init_(n_units, std=1):
    sampler = torch.distributions.Normal(torch.Tensor([0]), torch.Tensor([std / n_units]))
    Omega = sampler.sample((n_units, n_units))[..., 0]
    return Omega


class encoderNet(nn.Module):
    def __init__(self, m, n, b, ALPHA=1):
        super(encoderNet, self).__init__()
        self.N = m * n
        self.tanh = nn.Tanh()

        self.fc1 = nn.Linear(self.N, 16 * ALPHA)
        self.fc2 = nn.Linear(16 * ALPHA, 16 * ALPHA)
        self.fc3 = nn.Linear(16 * ALPHA, b)

        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_normal_(m.weight)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0.0)

    def forward(self, x):
        x = x.view(-1, 1, self.N)
        x = self.tanh(self.fc1(x))
        x = self.tanh(self.fc2(x))
        x = self.fc3(x)

        return x


class decoderNet(nn.Module):
    def __init__(self, m, n, b, ALPHA=1):
        super(decoderNet, self).__init__()

        self.m = m
        self.n = n
        self.b = b

        self.tanh = nn.Tanh()

        self.fc1 = nn.Linear(b, 16 * ALPHA)
        self.fc2 = nn.Linear(16 * ALPHA, 16 * ALPHA)
        self.fc3 = nn.Linear(16 * ALPHA, m * n)

        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_normal_(m.weight)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0.0)

    def forward(self, x):
        x = x.view(-1, 1, self.b)
        x = self.tanh(self.fc1(x))
        x = self.tanh(self.fc2(x))
        x = self.tanh(self.fc3(x))
        x = x.view(-1, 1, self.m, self.n)
        return x


class dynamics(nn.Module):
    def __init__(self, b, init_scale):
        super(dynamics, self).__init__()
        self.dynamics = nn.Linear(b, b, bias=False)
        self.dynamics.weight.data = gaussian_init_(b, std=1)
        U, S, V = torch.svd(self.dynamics.weight.data)
        self.dynamics.weight.data = torch.mm(U, V.t()) * init_scale

    def forward(self, x):
        x = self.dynamics(x)
        return x


class dynamics_back(nn.Module):
    def __init__(self, b, omega):
        super(dynamics_back, self).__init__()
        self.dynamics = nn.Linear(b, b, bias=False)
        self.dynamics.weight.data = torch.pinverse(omega.dynamics.weight.data.t())

    def forward(self, x):
        x = self.dynamics(x)
        return x


class koopmanAE(nn.Module):
    def __init__(self, m, n, b, steps, steps_back, alpha=1, init_scale=1):
        super(koopmanAE, self).__init__()
        self.steps = steps
        self.steps_back = steps_back

        self.encoder = encoderNet(m, n, b, ALPHA=alpha)
        self.dynamics = dynamics(b, init_scale)
        self.backdynamics = dynamics_back(b, self.dynamics)
        self.decoder = decoderNet(m, n, b, ALPHA=alpha)

    def forward(self, x, mode='forward'):
        out = []
        out_back = []
        z = self.encoder(x.contiguous())
        q = z.contiguous()

        if mode == 'forward':
            for _ in range(self.steps):
                q = self.dynamics(q)
                out.append(self.decoder(q))

            out.append(self.decoder(z.contiguous()))
            return out, out_back

        if mode == 'backward':
            for _ in range(self.steps_back):
                q = self.backdynamics(q)
                out_back.append(self.decoder(q))

            out_back.append(self.decoder(z.contiguous()))
            return out, out_back


def pendulum_lin(n=200, dt=0.1, theta0=0.8, damping=0.05):
    """a damped pendulum's (theta, omega), lifted to 2x2 by a fixed random rotation"""
    rng = np.random.RandomState(1)
    X = np.zeros((n, 2))
    th, om = theta0, 0.0
    for i in range(n):
        X[i] = th, om
        for _ in range(10):
            om += dt / 10 * (-np.sin(th) - damping * om)
            th += dt / 10 * om
    Q = np.linalg.qr(rng.standard_normal((4, 4)))[0][:, :2]
    return (X @ Q.T).reshape(n, 2, 2) / 1.2


steps, steps_back, bottleneck = 4, 4, 3
lamb, nu, eta = 1.0, 1e-1, 1e-2
data = torch.from_numpy(pendulum_lin()).float()
windows = torch.stack([data[i:i + steps + 1] for i in range(0, 120, 5)])     # (24, steps+1, 2, 2)
windows = windows.unsqueeze(2)                                                # (24, steps+1, 1, 2, 2)

torch.manual_seed(1)
model = koopmanAE(2, 2, bottleneck, steps, steps_back)
print("A orthogonal", torch.allclose(model.dynamics.dynamics.weight @ model.dynamics.dynamics.weight.t(),
                                     torch.eye(bottleneck), atol=1e-5))
print("B A^T = I", torch.allclose(model.backdynamics.dynamics.weight @ model.dynamics.dynamics.weight.t(),
                                  torch.eye(bottleneck), atol=1e-4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
criterion = nn.MSELoss()
gradclip = 0.05


def lr_scheduler(optimizer, epoch, lr_decay_rate=0.8, decayEpoch=[4]):
    """Decay learning rate by a factor of lr_decay_rate every lr_decay_epoch epochs"""
    if epoch in decayEpoch:
        for param_group in optimizer.param_groups:
            param_group['lr'] *= lr_decay_rate
        return optimizer
    else:
        return optimizer


def train_step(data_list):
    model.train()
    out, out_back = model(data_list[0], mode='forward')

    loss_fwd, loss_identity = 0.0, 0.0
    for k in range(steps):
        loss_fwd += criterion(out[k], data_list[k + 1])
    loss_identity = criterion(out[-1], data_list[0]) * steps

    out, out_back = model(data_list[-1], mode='backward')
    loss_bwd = 0.0
    for k in range(steps_back):
        loss_bwd += criterion(out_back[k], data_list[::-1][k + 1])

    A = model.dynamics.dynamics.weight
    B = model.backdynamics.dynamics.weight

    K = A.shape[-1]
    loss_consist = 0.0
    for k in range(1, K + 1):
        As1 = A[:, :k]
        Bs1 = B[:k, :]
        As2 = A[:k, :]
        Bs2 = B[:, :k]

        Ik = torch.eye(k).float()

        if k == 1:
            loss_consist = (torch.sum((torch.mm(Bs1, As1) - Ik) ** 2) +
                            torch.sum((torch.mm(As2, Bs2) - Ik) ** 2)) / (2.0 * k)
        else:
            loss_consist += (torch.sum((torch.mm(Bs1, As1) - Ik) ** 2) +
                             torch.sum((torch.mm(As2, Bs2) - Ik) ** 2)) / (2.0 * k)

    loss = loss_fwd + lamb * loss_identity + nu * loss_bwd + eta * loss_consist

    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), gradclip)  # gradient clip
    optimizer.step()
    return loss, loss_consist


for epoch in range(8):
    lr_scheduler(optimizer, epoch)
    batch = [windows[:, k] for k in range(steps + 1)]
    loss, loss_consist = train_step(batch)
    print(f"epoch {epoch}: loss {loss.item():.6f} consist {loss_consist.item():.6f} "
          f"lr {optimizer.param_groups[0]['lr']:.5f}")

with torch.no_grad():
    w = torch.linalg.eigvals(model.dynamics.dynamics.weight)
print("Koopman eigenvalue moduli", sorted(round(v, 4) for v in w.abs().tolist()))

batch = [windows[:, k] for k in range(steps + 1)]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c, _ = torch.compile(train_step)(batch)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e, _ = train_step(batch)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
