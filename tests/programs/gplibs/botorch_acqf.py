"""BoTorch's acquisition-function zoo and model utilities on one fitted
SingleTaskGP, in double precision: analytic EI / LogEI / PI / LogPI /
UCB / posterior standard deviation / constrained and noisy EI, Monte-Carlo
qEI / qPI / qSimpleRegret / qLogEI with a scalarized posterior transform,
fixed-feature wrappers, fantasize / condition_on_observations,
subset_output, leave-one-out cross-validation,
gen_candidates_torch (Adam over the acquisition), prune_inferior_points,
and special functions of botorch.utils.probability / safe_math."""
import torch
from botorch.acquisition import (ExpectedImprovement, FixedFeatureAcquisitionFunction,
                                 LogExpectedImprovement, ProbabilityOfImprovement,
                                 UpperConfidenceBound, qExpectedImprovement,
                                 qLogExpectedImprovement, qProbabilityOfImprovement,
                                 qSimpleRegret)
from botorch.acquisition.analytic import (ConstrainedExpectedImprovement,
                                          LogNoisyExpectedImprovement,
                                          LogProbabilityOfImprovement,
                                          PosteriorStandardDeviation)
from botorch.acquisition.objective import ScalarizedPosteriorTransform
from botorch.acquisition.utils import prune_inferior_points
from botorch.cross_validation import batch_cross_validation, gen_loo_cv_folds
from botorch.fit import fit_gpytorch_mll
from botorch.generation import gen_candidates_torch
from botorch.models import SingleTaskGP
from botorch.sampling import SobolQMCNormalSampler
from botorch.utils.probability.utils import log_ndtr, log_phi, ndtr
from botorch.utils.safe_math import fatmax, log_fatplus, logmeanexp, smooth_amax
from gpytorch.mlls import ExactMarginalLogLikelihood

torch.manual_seed(0)
dtype = torch.double


def fmt(t, d=4):
    return [f"{v:.{d}f}" for v in t.detach().flatten().tolist()]


X = torch.rand(12, 2, dtype=dtype)
Y1 = torch.sin(6 * X[:, :1]) + torch.cos(4 * X[:, 1:]) + 0.05 * torch.randn(12, 1, dtype=dtype)
Y2 = X.sum(-1, keepdim=True) - 1.0
Y = torch.cat([Y1, Y2], -1)
model = SingleTaskGP(X, Y)
# fixed hyperparameters (as after a fit), so the acquisitions see a known model
model.covar_module.lengthscale = torch.tensor([[[0.3, 0.4]], [[0.8, 0.9]]], dtype=dtype)
model.likelihood.noise = torch.tensor([[1e-3], [1e-3]], dtype=dtype)
model.eval()
m1 = SingleTaskGP(X, Y1)
fit_gpytorch_mll(ExactMarginalLogLikelihood(m1.likelihood, m1))
Xt = torch.rand(5, 1, 2, dtype=dtype)
best = Y1.max()

for acq in (ExpectedImprovement(m1, best_f=best), LogExpectedImprovement(m1, best_f=best),
            ProbabilityOfImprovement(m1, best_f=best), LogProbabilityOfImprovement(m1, best_f=best),
            UpperConfidenceBound(m1, beta=0.5), PosteriorStandardDeviation(m1)):
    print(type(acq).__name__, fmt(acq(Xt), 5))
# known noise: the fantasy-based noisy EI
mk = SingleTaskGP(X, Y1, train_Yvar=torch.full_like(Y1, 1e-3))
fit_gpytorch_mll(ExactMarginalLogLikelihood(mk.likelihood, mk))
print("LogNoisyExpectedImprovement", fmt(LogNoisyExpectedImprovement(mk, X_observed=X, num_fantasies=8)(Xt), 5))
cei = ConstrainedExpectedImprovement(model, best_f=best, objective_index=0, constraints={1: (None, 0.0)})
print("constrained EI", fmt(cei(Xt), 5))

sampler = SobolQMCNormalSampler(torch.Size([64]), seed=1)
pt = ScalarizedPosteriorTransform(weights=torch.tensor([1.0, -0.5], dtype=dtype))
Xq = torch.rand(3, 2, 2, dtype=dtype)
for cls in (qExpectedImprovement, qProbabilityOfImprovement, qLogExpectedImprovement):
    acq = cls(model, best_f=1.0, sampler=sampler, posterior_transform=pt)
    print(cls.__name__, fmt(acq(Xq), 5))
print("qSimpleRegret", fmt(qSimpleRegret(model, sampler=sampler, posterior_transform=pt)(Xq), 5))
ff = FixedFeatureAcquisitionFunction(UpperConfidenceBound(m1, beta=0.2), d=2, columns=[1],
                                     values=torch.tensor([0.5], dtype=dtype))
print("fixed feature", fmt(ff(Xt[..., :1]), 5))

# fantasies and conditioning
fm = m1.fantasize(Xt[:2, 0], sampler=SobolQMCNormalSampler(torch.Size([3]), seed=2))
print("fantasy model", tuple(fm.posterior(Xt[:2, 0]).mean.shape), fmt(fm.posterior(Xt[:1, 0]).mean, 4))
m1.posterior(X[:1])   # (the prediction caches are built before conditioning)
cm = m1.condition_on_observations(torch.tensor([[0.5, 0.5]], dtype=dtype), torch.tensor([[1.0]], dtype=dtype))
print("conditioned", fmt(cm.posterior(torch.tensor([[0.5, 0.5]], dtype=dtype)).mean, 4))
sub = model.subset_output([1])
print("subset", fmt(sub.posterior(Xt[:, 0]).mean, 4))

# leave-one-out cross-validation
cv_folds = gen_loo_cv_folds(train_X=X, train_Y=Y1)
cv = batch_cross_validation(model_cls=SingleTaskGP, mll_cls=ExactMarginalLogLikelihood,
                            cv_folds=cv_folds, fit_args={"optimizer_kwargs": {"options": {"maxiter": 5}}})
print("loo", tuple(cv.posterior.mean.shape), fmt(cv.posterior.mean.flatten()[:4], 3),
      "mse", f"{((cv.posterior.mean - cv.observed_Y) ** 2).mean().item():.3f}")

# Adam over the acquisition, pruning
ucb = UpperConfidenceBound(m1, beta=0.3)
init = torch.rand(3, 1, 2, dtype=dtype)
cands, vals = gen_candidates_torch(init, ucb, lower_bounds=0.0, upper_bounds=1.0,
                                   options={"maxiter": 15, "lr": 0.05})
print("gen_candidates_torch", fmt(cands, 4), fmt(vals, 4))
pruned = prune_inferior_points(model=m1, X=X, sampler=SobolQMCNormalSampler(torch.Size([32]), seed=3))
print("pruned", tuple(pruned.shape))

# special functions
z = torch.linspace(-40, 6, 9, dtype=dtype)
print("log_ndtr", fmt(log_ndtr(z), 6))
print("ndtr", fmt(ndtr(z[-4:]), 6), "log_phi", fmt(log_phi(z[-4:]), 6))
print("log_fatplus", fmt(log_fatplus(z[-4:], tau=0.1), 6))
w = torch.randn(3, 4, dtype=dtype)
print("fatmax", fmt(fatmax(w, dim=-1, tau=0.1), 5), "smooth_amax", fmt(smooth_amax(w, dim=-1, tau=0.1), 5))
print("logmeanexp", fmt(logmeanexp(w, dim=-1), 5))
