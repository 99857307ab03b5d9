# dfdazac/wassdistance: layers.py (SinkhornDistance, adapted from
# gpeyre/SinkhornAutoDiff: the log-domain Sinkhorn iterations with
# torch.logsumexp, the early stop on err.item() < thresh, the transport plan
# and the cost, the 'none' / 'mean' / 'sum' reductions, _cost_matrix with
# ** p) and sinkhorn.ipynb (two point clouds on lines, a batch of them, the
# distance of a cloud to itself), then the usual use of the layer as a loss:
# gradient descent moving one point cloud onto another.
# Changes for a CPU test: point clouds from numpy, few points, a few Adam
# steps; then the loss step under torch.compile (err.item() < thresh decides
# the iterations in Python) against the same steps run eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn


# Adapted from https://github.com/gpeyre/SinkhornAutoDiff
class SinkhornDistance(nn.Module):
    r"""
    Given two empirical measures each with :math:`P_1` locations
    :math:`x\in\mathbb{R}^{D_1}` and :math:`P_2` locations :math:`y\in\mathbb{R}^{D_2}`,
    outputs an approximation of the regularized OT cost for point clouds.

    Args:
        eps (float): regularization coefficient
        max_iter (int): maximum number of Sinkhorn iterations
        reduction (string, optional): Specifies the reduction to apply to the output:
            'none' | 'mean' | 'sum'. 'none': no reduction will be applied,
            'mean': the sum of the output will be divided by the number of
            elements in the output, 'sum': the output will be summed. Default: 'none'

    Shape:
        - Input: :math:`(N, P_1, D_1)`, :math:`(N, P_2, D_2)`
        - Output: :math:`(N)` or :math:`()`, depending on `reduction`
    """
    def __init__(self, eps, max_iter, reduction='none'):
        super(SinkhornDistance, self).__init__()
        self.eps = eps
        self.max_iter = max_iter
        self.reduction = reduction

    def forward(self, x, y):
        # The Sinkhorn algorithm takes as input three variables :
        C = self._cost_matrix(x, y)  # Wasserstein cost function
        x_points = x.shape[-2]
        y_points = y.shape[-2]
        if x.dim() == 2:
            batch_size = 1
        else:
            batch_size = x.shape[0]

        # both marginals are fixed with equal weights
        mu = torch.empty(batch_size, x_points, dtype=x.dtype, device=x.device,
                         requires_grad=False).fill_(1.0 / x_points).squeeze()
        nu = torch.empty(batch_size, y_points, dtype=x.dtype, device=x.device,
                         requires_grad=False).fill_(1.0 / y_points).squeeze()

        u = torch.zeros_like(mu)
        v = torch.zeros_like(nu)
        # To check if algorithm terminates because of threshold
        # or max iterations reached
        actual_nits = 0
        # Stopping criterion
        thresh = 1e-1

        # Sinkhorn iterations
        for i in range(self.max_iter):
            u1 = u  # useful to check the update
            u = self.eps * (torch.log(mu+1e-8) - torch.logsumexp(self.M(C, u, v), dim=-1)) + u
            v = self.eps * (torch.log(nu+1e-8) - torch.logsumexp(self.M(C, u, v).transpose(-2, -1), dim=-1)) + v
            err = (u - u1).abs().sum(-1).mean()

            actual_nits += 1
            if err.item() < thresh:
                break

        U, V = u, v
        # Transport plan pi = diag(a)*K*diag(b)
        pi = torch.exp(self.M(C, U, V))
        # Sinkhorn distance
        cost = torch.sum(pi * C, dim=(-2, -1))

        if self.reduction == 'mean':
            cost = cost.mean()
        elif self.reduction == 'sum':
            cost = cost.sum()

        return cost, pi, C

    def M(self, C, u, v):
        "Modified cost for logarithmic updates"
        "$M_{ij} = (-c_{ij} + u_i + v_j) / \epsilon$"
        return (-C + u.unsqueeze(-1) + v.unsqueeze(-2)) / self.eps

    @staticmethod
    def _cost_matrix(x, y, p=2):
        "Returns the matrix of $|x_i-y_j|^p$."
        x_col = x.unsqueeze(-2)
        y_lin = y.unsqueeze(-3)
        C = torch.sum((torch.abs(x_col - y_lin)) ** p, -1)
        return C

    @staticmethod
    def ave(u, u1, tau):
        "Barycenter subroutine, used by kinetic acceleration through extrapolation."
        return tau * u + (1 - tau) * u1


# ---- sinkhorn.ipynb ----
n_points = 5
a = np.array([[i, 0] for i in range(n_points)])
b = np.array([[i, 1] for i in range(n_points)])
x = torch.tensor(a, dtype=torch.float)
y = torch.tensor(b, dtype=torch.float)
sinkhorn = SinkhornDistance(eps=0.1, max_iter=100, reduction=None)
dist, P, C = sinkhorn(x, y)
print("Sinkhorn distance: {:.3f}".format(dist.item()))
print("plan", tuple(P.shape), [f"{v:.4f}" for v in P.sum(0).tolist()], f"{P.diag().sum().item():.4f}")
print("cost matrix", C.tolist()[0])

a = np.array([[i, 0] for i in range(n_points)])
b = np.array([[i, b] for i, b in zip(range(n_points), np.random.default_rng(0).integers(0, 2, n_points))])
x = torch.tensor(a, dtype=torch.float)
y = torch.tensor(b[::-1].copy(), dtype=torch.float)
dist, P, C = sinkhorn(x, y)
print("Sinkhorn distance (permuted): {:.3f}".format(dist.item()), P.argmax(-1).tolist())

# a batch of point clouds, the reductions, the distance of a cloud to itself
r = np.random.default_rng(1)
xb = torch.from_numpy(r.standard_normal((3, 6, 2)).astype(np.float32))
yb = torch.from_numpy((r.standard_normal((3, 7, 2)) + 1.0).astype(np.float32))
for reduction in ('none', 'mean', 'sum'):
    cost, pi, Cb = SinkhornDistance(eps=0.1, max_iter=50, reduction=reduction)(xb, yb)
    print(reduction, tuple(cost.shape), [f"{v:.4f}" for v in cost.reshape(-1).tolist()], tuple(pi.shape))
self_cost, _, _ = SinkhornDistance(eps=0.01, max_iter=100)(xb, xb)
print("self distance", [f"{v:.4f}" for v in self_cost.tolist()])
print("ave", SinkhornDistance.ave(torch.ones(2), torch.zeros(2), 0.25).tolist())

# the Sinkhorn loss: move the cloud y onto x
target = torch.from_numpy(r.standard_normal((16, 2)).astype(np.float32))
moving = torch.from_numpy((r.standard_normal((12, 2)) * 0.5 + 2.0).astype(np.float32)).requires_grad_()
criterion = SinkhornDistance(eps=0.05, max_iter=30, reduction='mean')
optimizer = torch.optim.Adam([moving], lr=0.1)
for step in range(6):
    optimizer.zero_grad()
    loss, _, _ = criterion(moving, target)
    loss.backward()
    optimizer.step()
    print("step", step, f"{loss.item():.5f}", f"{moving.grad.norm().item():.5f}")


# the step under torch.compile against the same steps run eagerly (a
# coarser regularisation: the iterations stop early on the threshold)
criterion = SinkhornDistance(eps=1.0, max_iter=10, reduction='mean')


def train_step():
    optimizer.zero_grad()
    loss, _, _ = criterion(moving, target)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = moving.detach().clone(), copy.deepcopy(optimizer.state_dict())
eager = [train_step().item() for _ in range(3)]
after = moving.detach().clone()
with torch.no_grad():
    moving.copy_(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep().item() for _ in range(3)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      torch.allclose(moving.detach(), after, rtol=1e-4, atol=1e-5))
