# A differentiable Kalman filter after filterpy's KalmanFilter
# (https://github.com/rlabbe/filterpy, filterpy/kalman/kalman_filter.py),
# its predict / update equations written in torch: x = F x, P = F P F' + Q;
# the innovation y = z - H x, S = H P H' + R, the gain K = P H' inv(S),
# the Joseph-form covariance update P = (I-KH) P (I-KH)' + K R K', and the
# log-likelihood of the innovation (filterpy's log_likelihood, here
# torch.distributions.MultivariateNormal(..).log_prob); the process and
# measurement noise (Q from filterpy.common.Q_discrete_white_noise's
# piecewise white-noise model, R diagonal) learned by maximising the
# likelihood with Adam, as in the "learn the noise by backpropagating the
# filter" examples. Written for this test: a 2-D constant-velocity track of
# 24 noisy position fixes (numpy), 25 Adam steps; the filter run under
# torch.compile and one compiled training step checked against eager.
import copy

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import MultivariateNormal


def Q_discrete_white_noise(dim, dt, var):
    """filterpy.common.Q_discrete_white_noise for dim=2 (one axis), in torch."""
    q = torch.tensor([[.25 * dt ** 4, .5 * dt ** 3],
                      [.5 * dt ** 3, dt ** 2]])
    return q * var


class KalmanFilter(nn.Module):
    def __init__(self, dim_x, dim_z, dt=1.0):
        super().__init__()
        self.dim_x, self.dim_z = dim_x, dim_z
        F1 = torch.tensor([[1., dt], [0., 1.]])
        self.register_buffer("F", torch.block_diag(F1, F1))
        self.register_buffer("H", torch.tensor([[1., 0., 0., 0.], [0., 0., 1., 0.]]))
        self.dt = dt
        self.log_q = nn.Parameter(torch.tensor(0.0))         # process noise variance
        self.log_r = nn.Parameter(torch.zeros(dim_z))         # measurement noise variances

    def Q(self):
        q = Q_discrete_white_noise(dim=2, dt=self.dt, var=self.log_q.exp())
        return torch.block_diag(q, q)

    def R(self):
        return torch.diag(self.log_r.exp())

    def predict(self, x, P, Q):
        x = self.F @ x
        P = self.F @ P @ self.F.T + Q
        return x, P

    def update(self, x, P, z, R):
        y = z - self.H @ x
        PHT = P @ self.H.T
        S = self.H @ PHT + R
        SI = torch.linalg.inv(S)
        K = PHT @ SI
        x = x + K @ y
        I_KH = torch.eye(self.dim_x) - K @ self.H
        P = I_KH @ P @ I_KH.T + K @ R @ K.T
        log_likelihood = MultivariateNormal(torch.zeros(self.dim_z), covariance_matrix=S).log_prob(y)
        return x, P, log_likelihood

    def forward(self, zs, x0, P0):
        Q, R = self.Q(), self.R()
        x, P = x0, P0
        xs, ll = [], 0.0
        for z in zs:
            x, P = self.predict(x, P, Q)
            x, P, l = self.update(x, P, z, R)
            ll = ll + l
            xs.append(x)
        return torch.stack(xs), P, ll


rng = np.random.RandomState(0)
T, dt = 24, 1.0
true = np.zeros((T, 4))
state = np.array([0., 1., 0., 0.5])
for t in range(T):
    state = np.array([[1, dt, 0, 0], [0, 1, 0, 0], [0, 0, 1, dt], [0, 0, 0, 1]]) @ state
    state[[1, 3]] += rng.normal(0, 0.1, 2)
    true[t] = state
zs = torch.tensor(true[:, [0, 2]] + rng.normal(0, 0.7, (T, 2)), dtype=torch.float32)
truth = torch.tensor(true, dtype=torch.float32)

kf = KalmanFilter(dim_x=4, dim_z=2, dt=dt)
x0 = torch.zeros(4)
P0 = torch.eye(4) * 10.0
optimizer = torch.optim.Adam(kf.parameters(), lr=0.1)


def train_step(zs):
    optimizer.zero_grad()
    xs, P, ll = kf(zs, x0, P0)
    loss = -ll / len(zs)
    loss.backward()
    optimizer.step()
    return loss


with torch.no_grad():
    xs, P, ll = kf(zs, x0, P0)
print("initial log-likelihood", round(ll.item(), 5),
      "rmse", round(((xs - truth)[:, [0, 2]] ** 2).mean().sqrt().item(), 5))
for step in range(25):
    loss = train_step(zs)
    if step % 5 == 0 or step == 24:
        print(f"step {step}: nll {loss.item():.6f} q {kf.log_q.exp().item():.5f} "
              f"r {[round(v, 5) for v in kf.log_r.exp().tolist()]}")

with torch.no_grad():
    xs, P, ll = torch.compile(kf)(zs, x0, P0)
print("final log-likelihood", round(ll.item(), 5),
      "rmse", round(((xs - truth)[:, [0, 2]] ** 2).mean().sqrt().item(), 5))
print("P diag", [round(v, 5) for v in P.diagonal().tolist()])

state, opt_state = copy.deepcopy(kf.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(zs)
after_c = copy.deepcopy(kf.state_dict())
kf.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(zs)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in kf.state_dict().items()))
