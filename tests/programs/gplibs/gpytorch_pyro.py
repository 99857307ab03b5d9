"""GPyTorch with Pyro, as its "Pyro integration" and "Fully Bayesian GPs"
tutorials write it: a PyroGP (variational GP whose likelihood is a Pyro
model) trained with pyro.infer.SVI and Trace_ELBO; an ExactGP whose
hyperparameters carry priors, sampled with NUTS (pyro_sample_from_prior,
pyro_load_from_samples; a few warm-up steps), then batch predictions over
the samples; observations with NaNs under observation_nan_policy("mask")
and ("fill"); Interval constraints and priors' sampling."""
import math

import gpytorch
import pyro
import torch
from pyro.infer.mcmc import MCMC, NUTS

torch.manual_seed(0)
pyro.set_rng_seed(0)
dtype = torch.float64


def fmt(t, d=4):
    return [f"{v:.{d}f}" for v in t.detach().flatten().tolist()]


train_x = torch.linspace(0.0, 1.0, 21, dtype=dtype)
train_y = torch.sin(train_x * 2 * math.pi) + 0.1 * torch.randn(21, dtype=dtype)


# --- PyroGP with SVI ----------------------------------------------------------
class PVGPRegressionModel(gpytorch.models.PyroGP):
    def __init__(self, train_x, train_y, likelihood):
        variational_distribution = gpytorch.variational.CholeskyVariationalDistribution(
            num_inducing_points=7)
        variational_strategy = gpytorch.variational.VariationalStrategy(
            self, train_x[::3].clone().unsqueeze(-1), variational_distribution,
            learn_inducing_locations=True)
        super().__init__(variational_strategy, likelihood, num_data=train_y.numel(),
                         name_prefix="simple_regression_model")
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


likelihood = gpytorch.likelihoods.GaussianLikelihood()
model = PVGPRegressionModel(train_x, train_y, likelihood).double()
optimizer = pyro.optim.Adam({"lr": 0.05})
elbo = pyro.infer.Trace_ELBO(num_particles=1, vectorize_particles=True, retain_graph=True)
svi = pyro.infer.SVI(model.model, model.guide, optimizer, elbo)
model.train()
for i in range(12):
    model.zero_grad()
    loss = svi.step(train_x.unsqueeze(-1), train_y)
    if i % 4 == 3:
        print(f"svi iter {i + 1} loss {loss:.4f}")
model.eval()
with torch.no_grad():
    out = model.likelihood(model(torch.linspace(0, 1, 6, dtype=dtype).unsqueeze(-1)))
    print("pyro gp mean", fmt(out.mean, 3), "var", fmt(out.variance, 3))
print("[rng] param store", sorted(pyro.get_param_store().keys())[:2])


# --- NUTS over the hyperparameters -------------------------------------------
class ExactGPModel(gpytorch.models.ExactGP):
    def __init__(self, train_x, train_y, likelihood):
        super().__init__(train_x, train_y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


likelihood = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=gpytorch.constraints.Positive())
model = ExactGPModel(train_x, train_y, likelihood).double()
model.mean_module.register_prior("mean_prior", gpytorch.priors.UniformPrior(-1, 1), "constant")
model.covar_module.base_kernel.register_prior(
    "lengthscale_prior", gpytorch.priors.UniformPrior(0.01, 0.5), "lengthscale")
model.covar_module.register_prior("outputscale_prior", gpytorch.priors.UniformPrior(1, 2), "outputscale")
likelihood.register_prior("noise_prior", gpytorch.priors.UniformPrior(0.01, 0.5), "noise")
mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)


def pyro_model(x, y):
    with gpytorch.settings.fast_computations(False, False, False):
        sampled_model = model.pyro_sample_from_prior()
        output = sampled_model.likelihood(sampled_model(x))
        pyro.sample("obs", output, obs=y)
    return y


nuts_kernel = NUTS(pyro_model, adapt_step_size=True, max_tree_depth=3)
mcmc_run = MCMC(nuts_kernel, num_samples=4, warmup_steps=4, disable_progbar=True)
mcmc_run.run(train_x, train_y)
samples = mcmc_run.get_samples()
print("nuts sites", sorted(samples.keys()))
for k in sorted(samples):
    print(k, tuple(samples[k].shape), fmt(samples[k], 4))
model.pyro_load_from_samples(samples)
model.eval()
test_x = torch.linspace(0, 1, 5, dtype=dtype).unsqueeze(-1).unsqueeze(0).repeat(4, 1, 1)
with torch.no_grad():
    expanded = model(test_x)
    print("batch predictions", tuple(expanded.mean.shape), fmt(expanded.mean[:, 2], 4))

# --- missing observations ----------------------------------------------------
y_nan = train_y.clone()
y_nan[[3, 10, 17]] = float("nan")
lik = gpytorch.likelihoods.GaussianLikelihood()
m = ExactGPModel(train_x, y_nan, lik).double()
mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, m)
opt = torch.optim.Adam(m.parameters(), lr=0.1)
m.train()
with gpytorch.settings.observation_nan_policy("mask"):
    for i in range(6):
        opt.zero_grad()
        loss = -mll(m(train_x), y_nan)
        loss.backward()
        opt.step()
print("mask loss", f"{loss.item():.5f}")
m.eval()
for policy in ("mask", "fill"):
    m.prediction_strategy = None
    with torch.no_grad(), gpytorch.settings.observation_nan_policy(policy):
        p = m(torch.linspace(0, 1, 5, dtype=dtype))
    print(policy, "mean", fmt(p.mean, 4), "var", fmt(p.variance, 5))

# --- constraints and priors ---------------------------------------------------
c = gpytorch.constraints.Interval(0.1, 2.0)
raw = torch.tensor([-3.0, 0.0, 3.0], dtype=dtype)
print("interval", fmt(c.transform(raw)), fmt(c.inverse_transform(c.transform(raw))))
torch.manual_seed(4)
for prior in (gpytorch.priors.GammaPrior(2.0, 3.0), gpytorch.priors.NormalPrior(0.0, 2.0),
              gpytorch.priors.LogNormalPrior(0.0, 0.5), gpytorch.priors.HalfCauchyPrior(1.0),
              gpytorch.priors.SmoothedBoxPrior(0.0, 1.0, sigma=0.1)):
    x = torch.tensor([0.3, 0.8], dtype=dtype)
    print(type(prior).__name__, fmt(prior.log_prob(x), 4))
print("[rng] gamma sample", fmt(gpytorch.priors.GammaPrior(2.0, 3.0).sample(torch.Size([3])), 4))
