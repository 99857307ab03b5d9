"""More of BoTorch's tutorials, small and in double precision: noisy and
knowledge-gradient acquisition (qLogNoisyExpectedImprovement,
qKnowledgeGradient, PosteriorMean), optimize_acqf with linear inequality
constraints and fixed features, optimize_acqf_discrete, multi-output
models (ModelListGP, batched SingleTaskGP, MultiTaskGP), multi-objective
BO (qLogNoisyExpectedHypervolumeImprovement on BraninCurrin, Pareto front
and hypervolume), a GP fitted with fit_gpytorch_mll_torch (Adam), posterior
samples with a seeded sampler, save / load of a model's state dict, and
Hartmann6."""
import io

import torch
from botorch.acquisition import (PosteriorMean, qKnowledgeGradient,
                                 qLogNoisyExpectedImprovement, qUpperConfidenceBound)
from botorch.acquisition.multi_objective.logei import qLogNoisyExpectedHypervolumeImprovement
from botorch.fit import fit_gpytorch_mll
from botorch.models import ModelListGP, MultiTaskGP, SingleTaskGP
from botorch.models.transforms import Normalize, Standardize
from botorch.optim import optimize_acqf, optimize_acqf_discrete
from botorch.optim.fit import fit_gpytorch_mll_torch
from botorch.sampling import IIDNormalSampler, SobolQMCNormalSampler
from botorch.test_functions import BraninCurrin, Hartmann
from botorch.utils.multi_objective.box_decompositions.dominated import DominatedPartitioning
from botorch.utils.multi_objective.pareto import is_non_dominated
from botorch.utils.sampling import draw_sobol_samples
from gpytorch.mlls import ExactMarginalLogLikelihood, SumMarginalLogLikelihood

torch.manual_seed(0)
dtype = torch.double


def fmt(t, d=4):
    return [f"{v:.{d}f}" for v in t.detach().flatten().tolist()]


# --- Hartmann6, a noisy GP, qLogNEI / qUCB / KG ------------------------------
hart = Hartmann(dim=6, negate=True).to(dtype)
bounds6 = hart.bounds
X = draw_sobol_samples(bounds=bounds6, n=12, q=1, seed=0).squeeze(-2)
Y = (hart(X) + 0.05 * torch.randn(12, dtype=dtype)).unsqueeze(-1)
print("sobol X", tuple(X.shape), fmt(X[:2], 4))
print("hartmann Y", fmt(Y[:4], 4), "optimum", f"{hart.optimal_value:.5f}")
gp = SingleTaskGP(X, Y, outcome_transform=Standardize(m=1))
fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
print("lengthscales", fmt(gp.covar_module.lengthscale, 3))

qnei = qLogNoisyExpectedImprovement(gp, X_baseline=X, sampler=SobolQMCNormalSampler(torch.Size([32]), seed=1))
print("qlognei", fmt(qnei(X[:3].unsqueeze(-2)), 4))
cand, val = optimize_acqf(qnei, bounds=bounds6, q=2, num_restarts=2, raw_samples=16,
                          options={"maxiter": 20, "batch_limit": 2})
# (the candidate's coordinates are an L-BFGS-B optimum: last-bit differences
# of float32 exp move them by 0.01 between the libraries)
print("qlognei cand", tuple(cand.shape), f"{val.item():.2f}")
qucb = qUpperConfidenceBound(gp, beta=2.0, sampler=SobolQMCNormalSampler(torch.Size([32]), seed=2))
print("qucb", fmt(qucb(X[:4].reshape(2, 2, 6)), 4))
pm = PosteriorMean(gp)
print("posterior mean acq", fmt(pm(X[:3].unsqueeze(-2)), 4))
kg = qKnowledgeGradient(gp, num_fantasies=4)
xkg = torch.cat([X[:2], torch.rand(2, 4, 6, dtype=dtype).reshape(2, 4, 6)[:, :, :].reshape(8, 6)], 0)
print("kg", fmt(kg(xkg.reshape(2, 5, 6)), 4))

# constraints: x0 + x1 <= 0.5 and a fixed feature
A = (torch.tensor([0, 1], dtype=torch.long), torch.tensor([-1.0, -1.0], dtype=dtype), -0.5)
# (raw samples from the constrained polytope: a short hit-and-run chain)
cand, val = optimize_acqf(pm, bounds=bounds6, q=1, num_restarts=2, raw_samples=16,
                          inequality_constraints=[A],
                          options={"maxiter": 30, "n_burnin": 200, "n_thinning": 4})
print("constrained cand", fmt(cand, 3), "x0+x1", f"{(cand[0, 0] + cand[0, 1]).item():.4f}")
cand, val = optimize_acqf(pm, bounds=bounds6, q=1, num_restarts=2, raw_samples=16,
                          fixed_features={5: 0.25}, options={"maxiter": 30})
print("fixed cand", fmt(cand, 3))
choices = torch.rand(20, 6, dtype=dtype)
cand, val = optimize_acqf_discrete(qucb, q=2, choices=choices)
print("discrete cand", fmt(cand, 4), fmt(val, 4))

# --- posterior samples -------------------------------------------------------
post = gp.posterior(X[:3])
s1 = SobolQMCNormalSampler(torch.Size([4]), seed=3)(post)
s2 = IIDNormalSampler(torch.Size([4]), seed=4)(post)
print("qmc samples", tuple(s1.shape), fmt(s1.mean(0), 4), "iid", fmt(s2.mean(0), 4))

# --- multi-output: model list, batched, multitask ----------------------------
bc = BraninCurrin(negate=True).to(dtype)
Xm = draw_sobol_samples(bounds=bc.bounds, n=10, q=1, seed=5).squeeze(-2)
Ym = bc(Xm)
print("branin-currin Y", fmt(Ym[:3], 3))
models = [SingleTaskGP(Xm, Ym[:, i:i + 1], input_transform=Normalize(d=2),
                       outcome_transform=Standardize(m=1)) for i in range(2)]
mlist = ModelListGP(*models)
fit_gpytorch_mll(SumMarginalLogLikelihood(mlist.likelihood, mlist))
p = mlist.posterior(Xm[:3])
print("model list mean", tuple(p.mean.shape), fmt(p.mean, 3))
batched = SingleTaskGP(Xm, Ym, input_transform=Normalize(d=2), outcome_transform=Standardize(m=2))
fit_gpytorch_mll(ExactMarginalLogLikelihood(batched.likelihood, batched))
print("batched mean", fmt(batched.posterior(Xm[:3]).mean, 3),
      "lengthscales", fmt(batched.covar_module.lengthscale, 3))

# pareto front and hypervolume
ref_point = torch.tensor([-200.0, -13.0], dtype=dtype)
pareto = Ym[is_non_dominated(Ym)]
hv = DominatedPartitioning(ref_point=ref_point, Y=Ym).compute_hypervolume()
print("pareto", tuple(pareto.shape), "hypervolume", f"{hv.item():.3f}")
acq = qLogNoisyExpectedHypervolumeImprovement(
    model=mlist, ref_point=ref_point, X_baseline=Xm, prune_baseline=True,
    sampler=SobolQMCNormalSampler(torch.Size([16]), seed=6))
# (away from the baseline: there the improvement is a rounding error over tau = 1e-6)
Xq = draw_sobol_samples(bounds=bc.bounds, n=3, q=1, seed=7)
print("qlognehvi", fmt(acq(Xq), 3))
cand, val = optimize_acqf(acq, bounds=bc.bounds, q=1, num_restarts=2, raw_samples=16,
                          options={"maxiter": 20})
print("nehvi cand", fmt(cand, 2))

# multitask GP: two tasks in a task column
Xt = torch.cat([torch.rand(8, 2, dtype=dtype), torch.cat([torch.zeros(4, 1), torch.ones(4, 1)]).to(dtype)], -1)
Yt = (torch.sin(4 * Xt[:, :1]) + 0.3 * Xt[:, 2:]).to(dtype)
mt = MultiTaskGP(Xt, Yt, task_feature=-1)
fit_gpytorch_mll(ExactMarginalLogLikelihood(mt.likelihood, mt), optimizer_kwargs={"options": {"maxiter": 20}})
print("multitask posterior", fmt(mt.posterior(torch.rand(3, 2, dtype=dtype)).mean, 3))

# --- fit with torch's Adam (fit_gpytorch_mll_torch), save / load -----------
gp2 = SingleTaskGP(X, Y, outcome_transform=Standardize(m=1))
mll2 = ExactMarginalLogLikelihood(gp2.likelihood, gp2)
result = fit_gpytorch_mll(mll2, optimizer=fit_gpytorch_mll_torch,
                          optimizer_kwargs={"step_limit": 15})
print("torch fit", type(result).__name__, fmt(gp2.covar_module.lengthscale, 3),
      fmt(gp2.likelihood.noise, 5))
buf = io.BytesIO()
torch.save(gp2.state_dict(), buf)
buf.seek(0)
gp3 = SingleTaskGP(X, Y, outcome_transform=Standardize(m=1))
gp3.load_state_dict(torch.load(buf))
gp3.eval()
gp2.eval()
print("reloaded", fmt(gp3.posterior(X[:3]).mean, 4), fmt(gp2.posterior(X[:3]).mean, 4))
