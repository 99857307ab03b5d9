# Gaussian process regression written from scratch with torch.linalg, the
# way the GPyTorch-free "GP from scratch" tutorials and repositories do it
# (e.g. the solve_gp_linear_system / neg_log_marginal_likelihood pair of
# public GP code, and Rasmussen & Williams' Algorithm 2.1): an RBF kernel
# with softplus-constrained hyperparameters, K + sigma^2 I factored by
# torch.linalg.cholesky, alpha by torch.cholesky_solve, the predictive
# variance by torch.linalg.solve_triangular, the log marginal likelihood
# from the Cholesky diagonal, hyperparameters fitted by Adam, the posterior
# sampled with MultivariateNormal(scale_tril=...), then the same quantities
# by the older torch.triangular_solve / cholesky_inverse and cholesky_ex.
# Changes for a CPU test: data from numpy, float64, a few optimiser steps;
# then one training step under torch.compile against the same step eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def softplus_inv(y):
    return y + torch.log(-torch.expm1(-y))


class RBFKernel(nn.Module):
    def __init__(self, lengthscale=1.0, outputscale=1.0):
        super().__init__()
        self.raw_lengthscale = nn.Parameter(softplus_inv(torch.tensor(lengthscale)))
        self.raw_outputscale = nn.Parameter(softplus_inv(torch.tensor(outputscale)))

    @property
    def lengthscale(self):
        return F.softplus(self.raw_lengthscale)

    @property
    def outputscale(self):
        return F.softplus(self.raw_outputscale)

    def forward(self, x1, x2):
        x1 = x1 / self.lengthscale
        x2 = x2 / self.lengthscale
        sq = (x1.pow(2).sum(-1, keepdim=True) - 2 * x1 @ x2.transpose(-2, -1)
              + x2.pow(2).sum(-1, keepdim=True).transpose(-2, -1))
        return self.outputscale * torch.exp(-0.5 * sq.clamp_min(0))


class ConstantMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.constant = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        return self.constant.expand(x.shape[0]).unsqueeze(-1)


class ExactGP(nn.Module):
    def __init__(self, train_x, train_y, noise=0.1):
        super().__init__()
        self.train_x, self.train_y = train_x, train_y
        self.mean_module = ConstantMean()
        self.covar_module = RBFKernel(lengthscale=0.5, outputscale=1.0)
        self.raw_noise = nn.Parameter(softplus_inv(torch.tensor(noise)))

    @property
    def noise(self):
        return F.softplus(self.raw_noise) + 1e-4

    def _chol(self):
        n = self.train_x.shape[0]
        K = self.covar_module(self.train_x, self.train_x) + self.noise * torch.eye(n)
        return torch.linalg.cholesky(K)

    def neg_log_marginal_likelihood(self):
        L = self._chol()
        delta = self.train_y - self.mean_module(self.train_x)
        alpha = torch.cholesky_solve(delta, L)
        n = len(self.train_y)
        nll = (0.5 * (delta.T @ alpha).squeeze()
               + torch.log(torch.diagonal(L)).sum()
               + 0.5 * n * math.log(2 * math.pi))
        return nll / n

    def predict(self, test_x, full_cov=False):
        L = self._chol()
        delta = self.train_y - self.mean_module(self.train_x)
        alpha = torch.cholesky_solve(delta, L, upper=False)
        Ks = self.covar_module(self.train_x, test_x)
        mean = self.mean_module(test_x) + Ks.T @ alpha
        v = torch.linalg.solve_triangular(L, Ks, upper=False)
        if full_cov:
            cov = self.covar_module(test_x, test_x) - v.T @ v
            return mean.squeeze(-1), cov
        var = self.covar_module.outputscale - v.pow(2).sum(0)
        return mean.squeeze(-1), var


rng = np.random.default_rng(0)
train_x = torch.from_numpy(np.sort(rng.uniform(-3, 3, (24, 1)), axis=0))
train_y = torch.sin(2 * train_x) + 0.1 * torch.from_numpy(rng.standard_normal((24, 1)))
test_x = torch.linspace(-3.5, 3.5, 9).unsqueeze(-1)

model = ExactGP(train_x, train_y)
print("params", [(n, tuple(p.shape)) for n, p in model.named_parameters()])
print("initial nll", f"{model.neg_log_marginal_likelihood().item():.6f}")

optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
for i in range(12):
    optimizer.zero_grad()
    loss = model.neg_log_marginal_likelihood()
    loss.backward()
    optimizer.step()
    if i % 3 == 0:
        print(f"Iter {i + 1:d}/12 - Loss: {loss.item():.5f}  lengthscale: "
              f"{model.covar_module.lengthscale.item():.4f}  noise: {model.noise.item():.4f}")

model.eval()
with torch.no_grad():
    mean, var = model.predict(test_x)
    lower, upper = mean - 2 * var.clamp_min(1e-10).sqrt(), mean + 2 * var.clamp_min(1e-10).sqrt()
print("mean", [f"{v:.4f}" for v in mean.tolist()])
print("var", [f"{v:.5f}" for v in var.tolist()])
print("band", [f"{v:.4f}" for v in (upper - lower).tolist()])

# posterior samples from the full covariance
with torch.no_grad():
    fmean, fcov = model.predict(test_x, full_cov=True)
    fcov = 0.5 * (fcov + fcov.T) + 1e-6 * torch.eye(len(test_x))
    Lf, info = torch.linalg.cholesky_ex(fcov)
    print("cholesky_ex info", info.item(), torch.allclose(Lf @ Lf.T, fcov))
    post = torch.distributions.MultivariateNormal(fmean, scale_tril=Lf)
    print("post entropy", f"{post.entropy().item():.5f}", "log_prob(mean)", f"{post.log_prob(fmean).item():.5f}")
    torch.manual_seed(0)
    samples = post.sample((5,))
    print("samples", tuple(samples.shape))
    eps = torch.from_numpy(rng.standard_normal((3, len(test_x))))
    draws = fmean + eps @ Lf.T
    print("draws", [f"{v:.4f}" for v in draws.mean(0).tolist()])

# the same solves by the older API and by an explicit inverse
with torch.no_grad():
    L = model._chol()
    U = torch.linalg.cholesky(L @ L.T, upper=True)
    print("upper", torch.allclose(U, L.T))
    delta = train_y - model.mean_module(train_x)
    a1 = torch.cholesky_solve(delta, U, upper=True)
    z, _ = torch.triangular_solve(delta, L, upper=False)
    a2, _ = torch.triangular_solve(z, L.T, upper=True)
    a3 = torch.cholesky_inverse(L) @ delta
    a4 = torch.linalg.solve(L @ L.T, delta)
    print("solves agree", torch.allclose(a1, a2), torch.allclose(a2, a3), torch.allclose(a3, a4))
    ld = 2 * torch.log(torch.diagonal(L)).sum()
    sign, lad = torch.linalg.slogdet(L @ L.T)
    print("logdet", f"{ld.item():.6f}", f"{torch.logdet(L @ L.T).item():.6f}", sign.item(), f"{lad.item():.6f}")
    Xr = torch.linalg.solve_triangular(L.T, delta.T, upper=True, left=False)
    print("right solve", torch.allclose(Xr @ L.T, delta.T))
    batch = torch.stack([L, 2 * L])
    bs = torch.cholesky_solve(delta.expand(2, -1, -1), batch)
    print("batched", tuple(bs.shape), f"{(bs[0] / bs[1]).mean().item():.4f}")
    bad = torch.tensor([[1.0, 2.0], [2.0, 1.0]])
    _, info = torch.linalg.cholesky_ex(bad)
    print("not positive definite info", info.item())
    try:
        torch.linalg.cholesky(bad)
    except torch.linalg.LinAlgError as e:
        print("LinAlgError", str(e).split(":")[0])


# one hyperparameter step under torch.compile against the same step eagerly
def train_step():
    optimizer.zero_grad()
    loss = model.neg_log_marginal_likelihood()
    loss.backward()
    optimizer.step()
    return loss


model.train()
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step().item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep().item() for _ in range(2)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-6, atol=1e-8) for k in after))
torch.set_default_dtype(torch.float32)
print("default dtype", torch.get_default_dtype(), torch.tensor(1.0).dtype)
