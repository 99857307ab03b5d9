"""BoTorch's other models and transforms, small, in double precision:
input warping (Warp, Kumaraswamy CDF), outcome transforms (Log, Power,
chained with Standardize) and untransform, MixedSingleTaskGP (a
categorical kernel), SingleTaskMultiFidelityGP with a fidelity kernel,
KroneckerMultiTaskGP, HigherOrderGP, a variational SingleTaskVariationalGP,
qMaxValueEntropy, qNegIntegratedPosteriorVariance, optimize_acqf_mixed,
and Chebyshev scalarization with simplex weights.  (The warped and
categorical models are fitted by Adam, fit_gpytorch_mll_torch: L-BFGS-B's
stopping test makes their fitted values depend on the last bits.)"""
import torch
from botorch.acquisition import PosteriorMean, qMaxValueEntropy
from botorch.acquisition.active_learning import qNegIntegratedPosteriorVariance
from botorch.acquisition.objective import GenericMCObjective
from botorch.fit import fit_gpytorch_mll
from botorch.optim.fit import fit_gpytorch_mll_torch
from botorch.models import (HigherOrderGP, KroneckerMultiTaskGP, MixedSingleTaskGP,
                            SingleTaskGP, SingleTaskMultiFidelityGP)
from botorch.models.approximate_gp import SingleTaskVariationalGP
from botorch.models.transforms import ChainedOutcomeTransform, Log, Standardize
from botorch.models.transforms.input import Warp
from botorch.optim import optimize_acqf_mixed
from botorch.utils.multi_objective.scalarization import get_chebyshev_scalarization
from botorch.utils.sampling import draw_sobol_samples, sample_simplex
from gpytorch.mlls import ExactMarginalLogLikelihood, VariationalELBO

torch.manual_seed(0)
dtype = torch.double


def fmt(t, d=3):
    return [f"{v:.{d}f}" for v in t.detach().flatten().tolist()]


bounds = torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], dtype=dtype)
X = draw_sobol_samples(bounds=bounds, n=14, q=1, seed=0).squeeze(-2)
f = torch.sin(5 * X[:, :1]) + X[:, 1:2] ** 2 - 0.5 * X[:, 2:]
Y = f + 0.02 * torch.randn_like(f)
Xt = draw_sobol_samples(bounds=bounds, n=4, q=1, seed=1).squeeze(-2)

# input warping + chained outcome transform
warp = Warp(d=3, indices=[0, 1])
gp = SingleTaskGP(X, Y.exp(), input_transform=warp,
                  outcome_transform=ChainedOutcomeTransform(log=Log(), standardize=Standardize(m=1)))
fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp), optimizer=fit_gpytorch_mll_torch,
                 optimizer_kwargs={"step_limit": 20})
print("warp concentrations", fmt(gp.input_transform.concentration0, 3), fmt(gp.input_transform.concentration1, 3))
post = gp.posterior(Xt)
print("log-transformed posterior mean", fmt(post.mean, 3), "var", fmt(post.variance, 4))
tf = gp.outcome_transform
y_tf, _ = tf(Y.exp())
print("transform / untransform", fmt(y_tf[:3], 4), fmt(tf.untransform(y_tf)[0][:3].log(), 4))

# mixed categorical
Xc = torch.cat([X[:, :2], torch.randint(0, 3, (14, 1)).to(dtype)], -1)
Yc = torch.sin(4 * Xc[:, :1]) + 0.3 * Xc[:, 2:]
mixed = MixedSingleTaskGP(Xc, Yc, cat_dims=[2])
fit_gpytorch_mll(ExactMarginalLogLikelihood(mixed.likelihood, mixed), optimizer=fit_gpytorch_mll_torch,
                 optimizer_kwargs={"step_limit": 20})
print("mixed posterior", fmt(mixed.posterior(Xc[:3]).mean, 3))
cand, val = optimize_acqf_mixed(PosteriorMean(mixed), bounds=torch.tensor([[0., 0., 0.], [1., 1., 2.]], dtype=dtype),
                                q=1, num_restarts=2, raw_samples=16,
                                fixed_features_list=[{2: 0.0}, {2: 1.0}, {2: 2.0}],
                                options={"maxiter": 20})
print("mixed cand", fmt(cand, 2), fmt(val, 3))

# multi-fidelity
Xf = torch.cat([X[:, :2], torch.rand(14, 1, dtype=dtype)], -1)
Yf = torch.sin(5 * Xf[:, :1]) * (0.8 + 0.2 * Xf[:, 2:])
mf = SingleTaskMultiFidelityGP(Xf, Yf, data_fidelities=[2], outcome_transform=Standardize(m=1))
fit_gpytorch_mll(ExactMarginalLogLikelihood(mf.likelihood, mf))
print("multi-fidelity", fmt(mf.posterior(torch.tensor([[0.3, 0.4, 1.0], [0.3, 0.4, 0.2]], dtype=dtype)).mean, 3))

# Kronecker multitask and higher-order GP
Ym = torch.cat([Y, 2 * Y + 0.1 * torch.randn_like(Y)], -1)
kmt = KroneckerMultiTaskGP(X, Ym)
fit_gpytorch_mll(ExactMarginalLogLikelihood(kmt.likelihood, kmt), optimizer_kwargs={"options": {"maxiter": 30}})
kp = kmt.posterior(Xt[:2])
print("kronecker multitask", tuple(kp.mean.shape), fmt(kp.mean, 2), fmt(kp.variance, 3))
Yh = torch.stack([Y.squeeze(-1) * k for k in (1.0, 0.5, -0.5)], -1).unsqueeze(-1).expand(14, 3, 2)
hogp = HigherOrderGP(X, Yh)
fit_gpytorch_mll(ExactMarginalLogLikelihood(hogp.likelihood, hogp), optimizer_kwargs={"options": {"maxiter": 10}})
print("higher-order", tuple(hogp.posterior(Xt[:2]).mean.shape), fmt(hogp.posterior(Xt[:2]).mean[0, :, 0], 2))

# variational
vgp = SingleTaskVariationalGP(X, Y, inducing_points=6)
mll = VariationalELBO(vgp.likelihood, vgp.model, num_data=14)
fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": 15}})
print("variational", fmt(vgp.posterior(Xt).mean, 2))

# information-theoretic and active-learning acquisitions
gp = SingleTaskGP(X, Y)
fit_gpytorch_mll(ExactMarginalLogLikelihood(gp.likelihood, gp))
torch.manual_seed(1)
candidate_set = torch.rand(50, 3, dtype=dtype)
mes = qMaxValueEntropy(gp, candidate_set, num_mv_samples=8)
print("max values", tuple(mes.posterior_max_values.shape), "mes x 1e4", fmt(1e4 * mes(Xt.unsqueeze(-2)), 4))
ipv = qNegIntegratedPosteriorVariance(gp, mc_points=draw_sobol_samples(bounds=bounds, n=16, q=1, seed=2).squeeze(-2))
print("neg integrated variance x 1e3", fmt(1e3 * ipv(Xt.unsqueeze(-2)), 4))

# Chebyshev scalarization
weights = sample_simplex(2, n=3, dtype=dtype, qmc=True, seed=3)
print("simplex", fmt(weights, 4))
scal = get_chebyshev_scalarization(weights=weights[0], Y=Ym)
print("chebyshev", fmt(scal(Ym[:4]), 4))
obj = GenericMCObjective(scal)
print("objective", fmt(obj(Ym[:4].unsqueeze(0)), 4))
