# A BoTorch-free Bayesian optimization loop on Branin, the way "BO from
# scratch" repos and the BoTorch tutorials' plain-torch baselines write it:
# torch.quasirandom.SobolEngine(dimension, scramble=True, seed=0) for the
# initial design and the acquisition's restarts (.draw, .fast_forward,
# .reset, draw_base2), an exact GP with an RBF or Matern-5/2 kernel on
# torch.cdist of lengthscale-scaled inputs, softplus-constrained raw
# hyperparameters fitted by Adam on the exact marginal log likelihood
# (torch.linalg.cholesky, torch.cholesky_solve, the log-diagonal
# determinant), the posterior through torch.linalg.solve_triangular,
# Expected Improvement from torch.distributions.Normal(0, 1).cdf / log_prob,
# and the acquisition maximized with optim.LBFGS(..., line_search_fn=
# "strong_wolfe") from the best Sobol starts; inputs in the unit square,
# outputs standardized, float64 throughout (tkwargs = {"dtype": torch.double}).
# Changes for a CPU test: 6 initial points, 4 BO iterations, few Adam and
# L-BFGS iterations; then one hyperparameter-fitting step under
# torch.compile against the same step eagerly.
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal
from torch.quasirandom import SobolEngine

tkwargs = {"dtype": torch.double, "device": torch.device("cpu")}


def branin(X):
    """Branin on [0, 1]^2 (rescaled to [-5, 10] x [0, 15]); minimum 0.397887."""
    x1 = 15.0 * X[..., 0] - 5.0
    x2 = 15.0 * X[..., 1]
    a, b, c = 1.0, 5.1 / (4 * math.pi ** 2), 5.0 / math.pi
    r, s, t = 6.0, 10.0, 1.0 / (8 * math.pi)
    return a * (x2 - b * x1 ** 2 + c * x1 - r) ** 2 + s * (1 - t) * torch.cos(x1) + s


class ExactGP(nn.Module):
    def __init__(self, train_X, train_Y, kernel="matern52"):
        super().__init__()
        self.train_X, self.train_Y = train_X, train_Y
        self.kernel_name = kernel
        d = train_X.shape[-1]
        self.raw_lengthscale = nn.Parameter(torch.zeros(d, **tkwargs))
        self.raw_outputscale = nn.Parameter(torch.tensor(0.0, **tkwargs))
        self.raw_noise = nn.Parameter(torch.tensor(-4.0, **tkwargs))

    @property
    def lengthscale(self):
        return F.softplus(self.raw_lengthscale)

    @property
    def outputscale(self):
        return F.softplus(self.raw_outputscale)

    @property
    def noise(self):
        return F.softplus(self.raw_noise) + 1e-6

    def covar(self, X1, X2):
        dist = torch.cdist(X1 / self.lengthscale, X2 / self.lengthscale)
        if self.kernel_name == "rbf":
            return self.outputscale * torch.exp(-0.5 * dist.pow(2))
        sqrt5d = math.sqrt(5) * dist
        return self.outputscale * (1 + sqrt5d + 5.0 / 3.0 * dist.pow(2)) * torch.exp(-sqrt5d)

    def _cholesky(self):
        n = self.train_X.shape[0]
        K = self.covar(self.train_X, self.train_X) + self.noise * torch.eye(n, **tkwargs)
        return torch.linalg.cholesky(K)

    def mll(self):
        """The exact marginal log likelihood per data point."""
        y = self.train_Y
        n = y.shape[0]
        L = self._cholesky()
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
        data_fit = -0.5 * (y * alpha).sum()
        complexity = -torch.log(torch.diagonal(L)).sum()
        return (data_fit + complexity - 0.5 * n * math.log(2 * math.pi)) / n

    def posterior(self, X):
        L = self._cholesky()
        alpha = torch.cholesky_solve(self.train_Y.unsqueeze(-1), L)
        K_xs = self.covar(self.train_X, X)
        mean = (K_xs.transpose(-1, -2) @ alpha).squeeze(-1)
        v = torch.linalg.solve_triangular(L, K_xs, upper=False)
        var = self.outputscale - v.pow(2).sum(-2)
        return mean, var.clamp_min(1e-9)


def fit_gp(model, iters=25, lr=0.1):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for i in range(iters):
        optimizer.zero_grad()
        loss = -model.mll()
        loss.backward()
        optimizer.step()
    return loss.item()


def expected_improvement(model, X, best_f):
    """EI for minimization of the standardized objective."""
    mean, var = model.posterior(X)
    sigma = var.sqrt()
    u = (best_f - mean) / sigma
    normal = Normal(torch.zeros_like(u), torch.ones_like(u))
    ucdf = normal.cdf(u)
    updf = torch.exp(normal.log_prob(u))
    return sigma * (updf + u * ucdf)


def optimize_acqf(model, best_f, sobol, raw_samples=64, num_restarts=2):
    with torch.no_grad():
        X_raw = sobol.draw(raw_samples, dtype=torch.double)
        ei = expected_improvement(model, X_raw, best_f)
    starts = X_raw[ei.topk(num_restarts).indices]
    best_x, best_val = None, -float("inf")
    for x0 in starts:
        x = x0.clone().unsqueeze(0).requires_grad_(True)
        opt = torch.optim.LBFGS([x], lr=1, max_iter=12, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = -expected_improvement(model, x.clamp(0.0, 1.0), best_f).sum()
            loss.backward()
            return loss
        opt.step(closure)
        with torch.no_grad():
            x_c = x.clamp(0.0, 1.0)
            val = expected_improvement(model, x_c, best_f).item()
        if val > best_val:
            best_x, best_val = x_c.detach(), val
    return best_x, best_val


torch.manual_seed(0)

# the Sobol engine
sobol = SobolEngine(dimension=2, scramble=True, seed=0)
print(sobol)
print("first", sobol.draw(1).tolist(), sobol.num_generated)
print("next", [[round(v, 6) for v in r] for r in sobol.draw(3, dtype=torch.double).tolist()])
sobol.fast_forward(4)
print("after ff", sobol.num_generated, sobol.draw(2).dtype)
sobol.reset()
base2 = sobol.draw_base2(3)
print("base2", tuple(base2.shape), base2.dtype, [round(v, 6) for v in base2.mean(0).tolist()])
try:
    sobol.draw_base2(2)
except ValueError as e:
    print("ValueError:", e)
plain = SobolEngine(3)
print(plain, plain.draw(4).tolist())
print("state", tuple(plain.sobolstate.shape), plain.sobolstate.dtype, plain.sobolstate[1, :4].tolist(),
      plain.quasi.tolist())
print("unscrambled ff == draw", torch.equal(SobolEngine(3).fast_forward(5).draw(3), SobolEngine(3).draw(8)[5:]))

# initial design
sobol = SobolEngine(dimension=2, scramble=True, seed=0)
train_X = sobol.draw(6).to(**tkwargs)
train_obj = branin(train_X)
print("initial best", f"{train_obj.min().item():.4f}")

acq_sobol = SobolEngine(dimension=2, scramble=True, seed=1)
for kernel in ("rbf", "matern52"):
    X, obj = train_X.clone(), train_obj.clone()
    for iteration in range(4):
        Y = (obj - obj.mean()) / obj.std()
        model = ExactGP(X, Y, kernel)
        loss = fit_gp(model)
        best_f = Y.min()
        x_next, ei_val = optimize_acqf(model, best_f, acq_sobol)
        y_next = branin(x_next)
        X = torch.cat([X, x_next])
        obj = torch.cat([obj, y_next])
        print(kernel, "iter", iteration, "mll loss", f"{loss:.4f}",
              "lengthscale", [round(v, 4) for v in model.lengthscale.tolist()],
              "noise", f"{model.noise.item():.2e}", "EI", f"{ei_val:.4f}",
              "x", [round(v, 4) for v in x_next.squeeze(0).tolist()], "y", f"{y_next.item():.4f}",
              "best", f"{obj.min().item():.4f}")
    with torch.no_grad():
        mean, var = model.posterior(X[:3])
    print(kernel, "posterior", [round(v, 4) for v in mean.tolist()], [f"{v:.3e}" for v in var.tolist()])

# one hyperparameter-fitting step under torch.compile against the same step eagerly
model = ExactGP(X, (obj - obj.mean()) / obj.std(), "matern52")
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)


def train_step():
    optimizer.zero_grad()
    loss = -model.mll()
    loss.backward()
    optimizer.step()
    return loss


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
