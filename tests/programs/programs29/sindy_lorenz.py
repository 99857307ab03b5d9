# Sparse identification of nonlinear dynamics (SINDy, Brunton, Proctor &
# Kutz 2016) on the Lorenz system, after the authors' sparsifyDynamics /
# poolData code and PySINDy's STLSQ optimizer
# (https://github.com/dynamicslab/pysindy, pysindy/optimizers/stlsq.py),
# in torch: a degree-2 polynomial library (poolData's column order),
# derivatives by torch.gradient, the sequentially thresholded least-squares
# loop (torch.linalg.lstsq, |Xi| < lambda zeroed, the remaining columns
# re-fitted per state), then the gradient-trained form of SindyAutoencoders
# (https://github.com/kpchamp/SindyAutoencoders: Xi a trainable parameter
# times a coefficient_mask buffer re-thresholded every few epochs, an L1
# regulariser, Adam). Written for this test: 400 samples of a Lorenz
# trajectory integrated by RK4 in numpy, 150 Adam steps; one compiled
# training step against eager.
import copy
import itertools

import numpy as np
import torch
import torch.nn as nn


def lorenz(x, sigma=10.0, beta=8.0 / 3, rho=28.0):
    return np.array([sigma * (x[1] - x[0]), x[0] * (rho - x[2]) - x[1], x[0] * x[1] - beta * x[2]])


dt, n = 0.005, 400
traj = np.zeros((n, 3))
x = np.array([-8.0, 8.0, 27.0])
for i in range(n):
    traj[i] = x
    k1 = lorenz(x)
    k2 = lorenz(x + dt / 2 * k1)
    k3 = lorenz(x + dt / 2 * k2)
    k4 = lorenz(x + dt * k3)
    x = x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

X = torch.tensor(traj, dtype=torch.float64)
dXdt = torch.gradient(X, spacing=dt, dim=0)[0]


def pool_data(X, poly_order=2):
    cols, names = [torch.ones(X.shape[0], dtype=X.dtype)], ["1"]
    var = ["x", "y", "z"]
    for i in range(X.shape[1]):
        cols.append(X[:, i])
        names.append(var[i])
    if poly_order >= 2:
        for i, j in itertools.combinations_with_replacement(range(X.shape[1]), 2):
            cols.append(X[:, i] * X[:, j])
            names.append(var[i] + var[j])
    return torch.stack(cols, dim=1), names


def sparsify_dynamics(Theta, dXdt, lamb, n):
    Xi = torch.linalg.lstsq(Theta, dXdt).solution       # initial guess: least-squares
    for k in range(10):
        smallinds = torch.abs(Xi) < lamb                  # find small coefficients
        Xi[smallinds] = 0                                 # and threshold
        for ind in range(n):                              # n is state dimension
            biginds = ~smallinds[:, ind]
            # regress dynamics onto remaining terms to find sparse Xi
            Xi[biginds, ind] = torch.linalg.lstsq(Theta[:, biginds], dXdt[:, ind:ind + 1]).solution[:, 0]
    return Xi


Theta, names = pool_data(X)
Xi = sparsify_dynamics(Theta, dXdt, 0.5, 3)
print("library", names)
for j, lhs in enumerate(["x'", "y'", "z'"]):
    terms = [f"{Xi[i, j].item():+.3f} {names[i]}" for i in range(len(names)) if Xi[i, j] != 0]
    print(lhs, "=", " ".join(terms))
print("nonzeros", int((Xi != 0).sum().item()))


class SINDy(nn.Module):
    def __init__(self, library_dim, state_dim):
        super().__init__()
        self.sindy_coefficients = nn.Parameter(torch.zeros(library_dim, state_dim))
        nn.init.normal_(self.sindy_coefficients, std=0.1)
        self.register_buffer("coefficient_mask", torch.ones(library_dim, state_dim))

    def forward(self, theta):
        return theta @ (self.sindy_coefficients * self.coefficient_mask)


torch.manual_seed(0)
scale = X.abs().amax(0)                                 # states and derivatives
Xs = (X / scale).float()                                # scaled to [-1, 1]
dXs = (dXdt / dXdt.abs().amax(0)).float()
Theta_s, _ = pool_data(Xs)
model = SINDy(Theta_s.shape[1], 3)
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
l1 = 1e-4


def train_step(theta, target):
    optimizer.zero_grad()
    pred = model(theta)
    loss_dx = ((pred - target) ** 2).mean()
    loss_reg = model.sindy_coefficients.abs().mean()
    loss = loss_dx + l1 * loss_reg
    loss.backward()
    optimizer.step()
    return loss, loss_dx


for epoch in range(150):
    loss, loss_dx = train_step(Theta_s, dXs)
    if epoch % 50 == 49:
        with torch.no_grad():
            model.coefficient_mask.copy_((model.sindy_coefficients.abs() > 0.05).float())
    if epoch % 30 == 0 or epoch == 149:
        print(f"epoch {epoch}: loss {loss.item():.6f} dx {loss_dx.item():.6f} "
              f"active {int(model.coefficient_mask.sum().item())}")
print("mask", model.coefficient_mask.T.int().tolist())

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c, _ = torch.compile(train_step)(Theta_s, dXs)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e, _ = train_step(Theta_s, dXs)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
