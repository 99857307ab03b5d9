# Stein Variational Gradient Descent (Liu & Wang 2016) as in the public
# PyTorch SVGD notebook (https://github.com/activatedgeek/svgd, svgd.ipynb),
# as written: the RBF kernel module (XX / XY / YY Gram matrices, the
# squared distances from their diagonals, the median heuristic through
# numpy's np.median of the detached distances), the SVGD class whose phi
# takes the score function with autograd.grad(log_prob.sum(), X) and the
# repulsive term with -autograd.grad(K_XX.sum(), X), and the step that
# sets X.grad = -phi and calls an Adam optimizer over the particles; the
# target a mixture of two MultivariateNormals (the notebook's MoG2, here
# torch.distributions.MixtureSameFamily with Categorical weights).
# Written for this test: 24 particles in 2-D, 60 steps; one compiled SVGD
# step (fixed bandwidth) against eager.
import copy

import numpy as np
import torch
import torch.autograd as autograd
import torch.distributions as D
import torch.optim as optim


class RBF(torch.nn.Module):
    def __init__(self, sigma=None):
        super(RBF, self).__init__()

        self.sigma = sigma

    def forward(self, X, Y):
        XX = X.matmul(X.t())
        XY = X.matmul(Y.t())
        YY = Y.matmul(Y.t())

        dnorm2 = -2 * XY + XX.diag().unsqueeze(1) + YY.diag().unsqueeze(0)

        # Apply the median heuristic (PyTorch does not give true median)
        if self.sigma is None:
            np_dnorm2 = dnorm2.detach().cpu().numpy()
            h = np.median(np_dnorm2) / (2 * np.log(X.size(0) + 1))
            sigma = np.sqrt(h).item()
        else:
            sigma = self.sigma

        gamma = 1.0 / (1e-8 + 2 * sigma ** 2)
        K_XY = (-gamma * dnorm2).exp()

        return K_XY


class SVGD:
    def __init__(self, P, K, optimizer):
        self.P = P
        self.K = K
        self.optim = optimizer

    def phi(self, X):
        X = X.detach().requires_grad_(True)

        log_prob = self.P.log_prob(X)
        score_func = autograd.grad(log_prob.sum(), X)[0]

        K_XX = self.K(X, X.detach())
        grad_K = -autograd.grad(K_XX.sum(), X)[0]

        phi = (K_XX.detach().matmul(score_func) + grad_K) / X.size(0)

        return phi

    def step(self, X):
        self.optim.zero_grad()
        X.grad = -self.phi(X)
        self.optim.step()


mix = D.Categorical(torch.tensor([0.3, 0.7]))
comp = D.MultivariateNormal(torch.tensor([[-2.0, 0.0], [2.0, 1.0]]),
                            covariance_matrix=torch.stack([torch.eye(2) * 0.5,
                                                           torch.tensor([[1.0, 0.3], [0.3, 0.6]])]))
mog2 = D.MixtureSameFamily(mix, comp)

torch.manual_seed(0)
n = 24
X_init = (3 * torch.randn(n, *mog2.event_shape))
print("init mean", [round(v, 5) for v in X_init.mean(0).tolist()])

X = X_init.clone()
svgd = SVGD(mog2, RBF(), optim.Adam([X], lr=1e-1))
for it in range(60):
    svgd.step(X)
    if it % 15 == 0 or it == 59:
        print(f"iter {it}: mean {[round(v, 4) for v in X.mean(0).tolist()]} "
              f"log p {mog2.log_prob(X).mean().item():.5f}")
print("left mode fraction", (X[:, 0] < 0).float().mean().item())
print("particles[:3]", [[round(v, 4) for v in row] for row in X[:3].tolist()])

# one step with a fixed bandwidth, compiled and eager
Y = X.clone()
svgd_fixed = SVGD(mog2, RBF(sigma=1.0), optim.Adam([Y], lr=1e-1))
svgd_fixed.step(Y)
y0, opt_state = Y.detach().clone(), copy.deepcopy(svgd_fixed.optim.state_dict())
torch.compile(svgd_fixed.step)(Y)
after_c = Y.detach().clone()
with torch.no_grad():
    Y.copy_(y0)
svgd_fixed.optim.load_state_dict(opt_state)
svgd_fixed.step(Y)
print("compiled step moved", round((after_c - y0).abs().sum().item(), 6))
print("compiled == eager", torch.allclose(after_c, Y, atol=1e-6))
