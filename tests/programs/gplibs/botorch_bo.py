"""BoTorch as its "Getting started" and closed-loop BO tutorials write it:
a SingleTaskGP (input Normalize, outcome Standardize) fitted with
fit_gpytorch_mll (scipy's L-BFGS-B through torch tensors), its posterior,
UpperConfidenceBound / LogExpectedImprovement / qLogExpectedImprovement
(quasi-Monte-Carlo Sobol sampler) maximized by optimize_acqf with a few
restarts, and a short Bayesian-optimization loop on botorch's Branin test
function, in double precision."""
import torch
from botorch.acquisition import (LogExpectedImprovement, UpperConfidenceBound,
                                 qLogExpectedImprovement)
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from botorch.test_functions import Branin
from botorch.utils.transforms import unnormalize
from gpytorch.mlls import ExactMarginalLogLikelihood

torch.manual_seed(0)
dtype = torch.double


def fmt(t, d=4):
    return [f"{v:.{d}f}" for v in t.detach().flatten().tolist()]


# --- getting started --------------------------------------------------------
train_X = torch.rand(10, 2, dtype=dtype)
Y = 1 - (train_X - 0.5).norm(dim=-1, keepdim=True)
Y = Y + 0.1 * torch.randn_like(Y)
train_Y = Y

gp = SingleTaskGP(train_X=train_X, train_Y=train_Y,
                  input_transform=Normalize(d=2), outcome_transform=Standardize(m=1))
mll = ExactMarginalLogLikelihood(gp.likelihood, gp)
fit_gpytorch_mll(mll)
print("lengthscale", fmt(gp.covar_module.lengthscale), "noise", fmt(gp.likelihood.noise, 5))
print("mean const", fmt(gp.mean_module.constant))

test_X = torch.rand(4, 2, dtype=dtype)
post = gp.posterior(test_X)
print("posterior mean", fmt(post.mean), "var", fmt(post.variance, 5))

UCB = UpperConfidenceBound(gp, beta=0.1)
print("ucb", fmt(UCB(test_X.unsqueeze(-2))))
bounds = torch.stack([torch.zeros(2), torch.ones(2)]).to(dtype)
candidate, acq_value = optimize_acqf(UCB, bounds=bounds, q=1, num_restarts=3, raw_samples=16)
print("ucb candidate", fmt(candidate), fmt(acq_value))

LogEI = LogExpectedImprovement(model=gp, best_f=train_Y.max())
print("logei", fmt(LogEI(test_X.unsqueeze(-2))))
candidate, acq_value = optimize_acqf(LogEI, bounds=bounds, q=1, num_restarts=3, raw_samples=16)
print("logei candidate", fmt(candidate), fmt(acq_value))

sampler = SobolQMCNormalSampler(sample_shape=torch.Size([64]), seed=0)
qLogEI = qLogExpectedImprovement(model=gp, best_f=train_Y.max(), sampler=sampler)
print("qlogei", fmt(qLogEI(test_X.reshape(2, 2, 2)), 4))
candidates, acq_value = optimize_acqf(qLogEI, bounds=bounds, q=2, num_restarts=2, raw_samples=16,
                                      options={"batch_limit": 2, "maxiter": 30})
print("qlogei candidates", fmt(candidates, 3), fmt(acq_value, 3))

# --- a closed BO loop on Branin (minimized: maximize its negation) -----------
branin = Branin(negate=True).to(dtype)
print("branin optimum", fmt(torch.tensor(branin.optimal_value)), branin.dim, fmt(branin.bounds, 1))


def observe(x01):
    return branin(unnormalize(x01, branin.bounds)).unsqueeze(-1)


X = torch.rand(6, 2, dtype=dtype)
Y = observe(X)
unit = torch.stack([torch.zeros(2, dtype=dtype), torch.ones(2, dtype=dtype)])
for it in range(4):
    model = SingleTaskGP(X, Y, outcome_transform=Standardize(m=1))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    acq = qLogExpectedImprovement(model, best_f=Y.max(),
                                  sampler=SobolQMCNormalSampler(torch.Size([32]), seed=it))
    x_next, val = optimize_acqf(acq, bounds=unit, q=1, num_restarts=2, raw_samples=16,
                                options={"maxiter": 30})
    y_next = observe(x_next)
    X = torch.cat([X, x_next])
    Y = torch.cat([Y, y_next])
    print(f"bo iter {it} x {fmt(x_next, 3)} y {y_next.item():.3f} best {Y.max().item():.3f}")
print("best point", fmt(unnormalize(X[Y.argmax()], branin.bounds), 3))
