"""Real published Gaussian-process packages run unmodified on tracec
(``tests/programs/gplibs``): GPyTorch with its linear-operator backend, and
BoTorch built on them.

- ``gpytorch_regression.py``: GPyTorch's "Simple GP Regression" tutorial:
  an ExactGP (ConstantMean, ScaleKernel(RBFKernel), GaussianLikelihood)
  trained by Adam on the exact marginal log likelihood, its posterior
  predictive mean / variance / confidence region in eval mode with and
  without fast_pred_var, prior mode, save / load of the state dict, then
  the same model past max_cholesky_size in float32 (CG with a
  pivoted-Cholesky preconditioner, stochastic Lanczos log-determinants);
- ``gpytorch_kernels.py``: Matern, periodic, RQ, linear, polynomial,
  cosine, spectral mixture (initialized from data), sums and products,
  additive / product structure kernels, ARD with priors and an interval
  constraint in float64, and exact inference switched from Cholesky to
  CG / Lanczos by ``max_cholesky_size`` (stochastic trace estimates with
  torch's draws), fast_pred_var and skip_posterior_variances;
- ``gpytorch_variational.py``: an SVGP (VariationalStrategy with learned
  inducing points, CholeskyVariationalDistribution, VariationalELBO)
  trained on shuffled DataLoader minibatches, GP classification with a
  BernoulliLikelihood (UnwhitenedVariationalStrategy), a multitask exact GP
  (MultitaskKernel, MultitaskGaussianLikelihood, confidence regions) and an
  independent multitask SVGP (mean-field, PredictiveLogLikelihood); the
  variational models in float64, as float32 Cholesky factors of nearby
  inducing points round chaotically (tracec's float32 steps agree with
  torch's to 1e-4 at first and drift after a few Adam steps; in float64
  they agree to every printed digit);
- ``gpytorch_scalable.py``: KISS-GP (GridInterpolationKernel, through
  ``torch.dsmm``) with LOVE variances, SGPR (InducingPointKernel), deep
  kernel learning (an nn.Sequential feature extractor, ScaleToBounds), a
  batch-independent multi-output GP, FixedNoiseGaussianLikelihood,
  Dirichlet GP classification, natural-gradient SVGP (gpytorch.optim.NGD),
  an LMC multitask SVGP, priors' log densities and samples;
- ``gpytorch_pyro.py``: GPyTorch with Pyro: a PyroGP trained by
  pyro.infer.SVI (Trace_ELBO, pyro.module), NUTS over an ExactGP's
  hyperparameter priors (pyro_sample_from_prior, pyro_load_from_samples,
  batch predictions over the samples), NaN observations under the "mask"
  and "fill" policies, an Interval constraint and priors' log densities;
- ``linear_operator_ops.py``: linear_operator's structured operators
  (low-rank plus diagonal, Kronecker, Toeplitz, block-diagonal,
  triangular, sums, products) against dense torch.linalg: solves,
  inv_quad_logdet, eigh / svd, root and inverse-root decompositions
  (Cholesky, Lanczos), pivoted Cholesky, linear_cg / minres / Lanczos,
  stochastic log-determinants, gradients in float64 and float32;
- ``botorch_bo.py``: BoTorch's getting-started and closed-loop tutorials:
  SingleTaskGP with Normalize / Standardize transforms fitted by
  fit_gpytorch_mll (scipy L-BFGS-B on tracec tensors), posterior,
  UpperConfidenceBound, LogExpectedImprovement, qLogExpectedImprovement
  with a Sobol QMC sampler, optimize_acqf (raw samples, restarts, q=2), and
  four steps of Bayesian optimization on the Branin test function;
- ``botorch_more.py``: Hartmann6 with Sobol initial points, qLogNEI,
  qUCB, PosteriorMean, qKnowledgeGradient (fantasy models), optimize_acqf
  under linear inequality constraints and fixed features,
  optimize_acqf_discrete, seeded QMC / IID posterior samples, ModelListGP,
  a batched two-output SingleTaskGP, the Pareto front and hypervolume of
  BraninCurrin, qLogNEHVI (its pure-Python path: tracec has no
  cpp_extension; torch's fused kernel computes the same values), a
  MultiTaskGP, fit_gpytorch_mll_torch, and a state dict saved with
  torch.save and loaded back;
- ``botorch_models.py``: input warping (Kumaraswamy), Log + Standardize
  outcome transforms and their untransform, MixedSingleTaskGP with
  optimize_acqf_mixed, SingleTaskMultiFidelityGP, KroneckerMultiTaskGP,
  HigherOrderGP, SingleTaskVariationalGP, qMaxValueEntropy,
  qNegIntegratedPosteriorVariance, Chebyshev scalarization over QMC
  simplex weights.  (BoTorch 0.18's fully Bayesian SAAS models need JAX /
  NumPyro, not Pyro: not covered.)
- ``botorch_acqf.py``: analytic EI / LogEI / PI / LogPI / UCB / posterior
  standard deviation / constrained EI / fantasy-based LogNEI, MC qEI / qPI /
  qLogEI / qSimpleRegret through a scalarized posterior transform,
  fixed-feature wrappers, fantasize / condition_on_observations /
  subset_output, leave-one-out cross-validation, gen_candidates_torch,
  prune_inferior_points, log_ndtr and the smooth maxima of safe_math;

(L-BFGS-B fits stop on a relative-reduction test, so a last-bit
difference moves the fitted hyperparameters by ~1e-5: torch itself moves
them as much for a 1e-15 change of the data.  The programs print fitted
values to a few digits only.)

Each program runs under ``tracec run`` (the packages' own ``import torch``
is tracec) and, as the reference, under torch 2.13 (recorded, keyed by the
packages' installed versions).
"""
import pathlib

import pytest

from library_programs import check_library_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "gplibs"

#: program -> the pip packages it imports (pinned in pyproject's test extra)
CASES = {
    "gpytorch_regression.py": ("gpytorch", "linear-operator"),
    "gpytorch_kernels.py": ("gpytorch", "linear-operator"),
    "gpytorch_variational.py": ("gpytorch", "linear-operator"),
    "gpytorch_scalable.py": ("gpytorch", "linear-operator"),
    "gpytorch_pyro.py": ("gpytorch", "linear-operator", "pyro-ppl"),
    "linear_operator_ops.py": ("linear-operator",),
    "botorch_bo.py": ("botorch", "gpytorch", "linear-operator"),
    "botorch_more.py": ("botorch", "gpytorch", "linear-operator"),
    "botorch_models.py": ("botorch", "gpytorch", "linear-operator"),
    "botorch_acqf.py": ("botorch", "gpytorch", "linear-operator"),
}


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_gplibs_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, CASES[script], tmp_path)
