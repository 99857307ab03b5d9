"""More of GPyTorch's tutorials, small: KISS-GP (GridInterpolationKernel)
with LOVE predictive variances, SGPR (InducingPointKernel), deep kernel
learning (a torch.nn feature extractor under a GP), a batch-independent
multi-output GP, heteroskedastic noise (FixedNoiseGaussianLikelihood),
Dirichlet-based GP classification, natural-gradient SVGP (NGD optimizer
with NaturalVariationalDistribution), an LMC multitask SVGP, and priors
sampled in prior mode."""
import math

import torch
import gpytorch

torch.manual_seed(0)


def fmt(t, d=4):
    return [f"{v:.{d}f}" for v in t.detach().flatten().tolist()]


class GP(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood, covar, mean=None):
        super().__init__(x, y, likelihood)
        self.mean_module = mean if mean is not None else gpytorch.means.ConstantMean()
        self.covar_module = covar

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def fit(model, x, y, iters, lr=0.1):
    model.train()
    model.likelihood.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    out = []
    for _ in range(iters):
        opt.zero_grad()
        loss = -mll(model(x), y)
        loss.backward()
        opt.step()
        out.append(loss.item())
    model.eval()
    model.likelihood.eval()
    return out


dtype = torch.float64
x = torch.linspace(0, 1, 60, dtype=dtype)
y = torch.sin(x * 2 * math.pi) + 0.1 * torch.randn(60, dtype=dtype)
xt = torch.linspace(0, 1, 7, dtype=dtype)

# KISS-GP / SKI with LOVE
grid_size = gpytorch.utils.grid.choose_grid_size(x, 1.0)
print("grid size", grid_size)
ski = GP(x, y, gpytorch.likelihoods.GaussianLikelihood(), gpytorch.kernels.ScaleKernel(
    gpytorch.kernels.GridInterpolationKernel(gpytorch.kernels.RBFKernel(), grid_size=grid_size,
                                             num_dims=1))).double()
losses = fit(ski, x, y, 8)
print("ski loss", fmt(torch.tensor(losses[::2]), 4))
with torch.no_grad(), gpytorch.settings.fast_pred_var(), gpytorch.settings.max_root_decomposition_size(30):
    p = ski.likelihood(ski(xt))
    print("ski mean", fmt(p.mean, 3), "var", fmt(p.variance, 3))

# SGPR
sgpr = GP(x, y, gpytorch.likelihoods.GaussianLikelihood(), gpytorch.kernels.InducingPointKernel(
    gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel()), inducing_points=torch.linspace(0.05, 0.95, 10, dtype=dtype),
    likelihood=gpytorch.likelihoods.GaussianLikelihood())).double()
sgpr.covar_module.likelihood = sgpr.likelihood
sgpr.covar_module.base_kernel.base_kernel.lengthscale = 0.1
losses = fit(sgpr, x, y, 10)
print("sgpr loss", fmt(torch.tensor(losses[::3]), 5))
with torch.no_grad():
    p = sgpr.likelihood(sgpr(xt))
    print("sgpr mean", fmt(p.mean), "var", fmt(p.variance, 5))
    print("sgpr inducing", fmt(sgpr.covar_module.inducing_points[:4]))

# deep kernel learning: a feature extractor under the GP
x2 = torch.rand(50, 3, dtype=dtype)
y2 = torch.sin(2 * x2[:, 0]) * torch.cos(x2[:, 1]) + 0.05 * torch.randn(50, dtype=dtype)


class DKL(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood):
        super().__init__(x, y, likelihood)
        self.feature_extractor = torch.nn.Sequential(
            torch.nn.Linear(3, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
        self.scale_to_bounds = gpytorch.utils.grid.ScaleToBounds(-1.0, 1.0)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=2))

    def forward(self, x):
        z = self.scale_to_bounds(self.feature_extractor(x))
        return gpytorch.distributions.MultivariateNormal(self.mean_module(z), self.covar_module(z))


dkl = DKL(x2, y2, gpytorch.likelihoods.GaussianLikelihood()).double()
losses = fit(dkl, x2, y2, 10, lr=0.05)
print("dkl loss", fmt(torch.tensor(losses[::3]), 5))
with torch.no_grad():
    p = dkl(x2[:5])
    print("dkl mean", fmt(p.mean), "var", fmt(p.variance, 5))

# batch-independent multi-output GP
yb = torch.stack([y, torch.cos(x * 2 * math.pi) + 0.1 * torch.randn(60, dtype=dtype)], -1)


class BatchIndependentMultitaskGPModel(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean(batch_shape=torch.Size([2]))
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(batch_shape=torch.Size([2])), batch_shape=torch.Size([2]))

    def forward(self, x):
        return gpytorch.distributions.MultitaskMultivariateNormal.from_batch_mvn(
            gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x)))


bim = BatchIndependentMultitaskGPModel(x, yb, gpytorch.likelihoods.MultitaskGaussianLikelihood(2)).double()
losses = fit(bim, x, yb, 8)
print("batch-indep loss", fmt(torch.tensor(losses[::2]), 5))
with torch.no_grad():
    p = bim.likelihood(bim(xt))
    print("batch-indep mean", tuple(p.mean.shape), fmt(p.mean, 4))
    print("lengthscales", fmt(bim.covar_module.base_kernel.lengthscale, 4))

# heteroskedastic (known) noise
noise = 0.01 + 0.05 * x
fixed = GP(x, y, gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise=noise, learn_additional_noise=True),
           gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=2.5))).double()
losses = fit(fixed, x, y, 8)
print("fixed-noise loss", fmt(torch.tensor(losses[::2]), 5))
with torch.no_grad():
    p = fixed.likelihood(fixed(xt), noise=0.01 + 0.05 * xt)
    print("fixed-noise mean", fmt(p.mean), "var", fmt(p.variance, 5))

# Dirichlet GP classification
cx = torch.rand(40, 2, dtype=dtype)
cy = ((cx[:, 0] - 0.5) * (cx[:, 1] - 0.5) > 0).long()
dlik = gpytorch.likelihoods.DirichletClassificationLikelihood(cy, learn_additional_noise=True)


class DirichletGPModel(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood, num_classes):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean(batch_shape=torch.Size((num_classes,)))
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(batch_shape=torch.Size((num_classes,))),
            batch_shape=torch.Size((num_classes,)))

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


dm = DirichletGPModel(cx, dlik.transformed_targets, dlik, dlik.num_classes).double()
print("transformed targets", fmt(dlik.transformed_targets[:, :3], 4))
dm.train()
dlik.train()
opt = torch.optim.Adam(dm.parameters(), lr=0.1)
mll = gpytorch.mlls.ExactMarginalLogLikelihood(dlik, dm)
for i in range(10):
    opt.zero_grad()
    loss = -mll(dm(cx), dlik.transformed_targets).sum()
    loss.backward()
    opt.step()
print("dirichlet loss", f"{loss.item():.5f}")
dm.eval()
dlik.eval()
tx = torch.tensor([[0.1, 0.1], [0.9, 0.1], [0.2, 0.8], [0.8, 0.9]], dtype=dtype)
with torch.no_grad(), gpytorch.settings.fast_pred_var():
    d = dm(tx)
    print("dirichlet logits mean", fmt(d.mean, 4))
    torch.manual_seed(5)
    probs = d.sample(torch.Size((64,))).exp()
    probs = (probs / probs.sum(-2, keepdim=True)).mean(0)
    print("dirichlet probs", fmt(probs, 3), "classes", probs.argmax(0).tolist())

# natural-gradient SVGP
class NGDModel(gpytorch.models.ApproximateGP):
    def __init__(self, z):
        vd = gpytorch.variational.NaturalVariationalDistribution(z.size(0))
        super().__init__(gpytorch.variational.VariationalStrategy(self, z, vd, learn_inducing_locations=True))
        self.mean_module = gpytorch.means.ZeroMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


ngm = NGDModel(torch.linspace(0, 1, 8, dtype=dtype).unsqueeze(-1)).double()
nglik = gpytorch.likelihoods.GaussianLikelihood().double()
variational_ngd_optimizer = gpytorch.optim.NGD(ngm.variational_parameters(), num_data=60, lr=0.1)
hyperparameter_optimizer = torch.optim.Adam([
    {'params': ngm.hyperparameters()}, {'params': nglik.parameters()}], lr=0.05)
ngm.train()
nglik.train()
mll = gpytorch.mlls.VariationalELBO(nglik, ngm, num_data=60)
for i in range(8):
    variational_ngd_optimizer.zero_grad()
    hyperparameter_optimizer.zero_grad()
    loss = -mll(ngm(x.unsqueeze(-1)), y)
    loss.backward()
    variational_ngd_optimizer.step()
    hyperparameter_optimizer.step()
    if i % 3 == 2:
        print(f"ngd iter {i + 1} loss {loss.item():.5f}")
ngm.eval()
with torch.no_grad():
    p = nglik(ngm(xt.unsqueeze(-1)))
    print("ngd mean", fmt(p.mean), "var", fmt(p.variance, 5))

# LMC multitask SVGP
class LMCModel(gpytorch.models.ApproximateGP):
    def __init__(self):
        z = torch.rand(3, 8, 1, dtype=dtype)
        vd = gpytorch.variational.CholeskyVariationalDistribution(8, batch_shape=torch.Size([3]))
        vs = gpytorch.variational.LMCVariationalStrategy(
            gpytorch.variational.VariationalStrategy(self, z, vd, learn_inducing_locations=True),
            num_tasks=2, num_latents=3, latent_dim=-1)
        super().__init__(vs)
        self.mean_module = gpytorch.means.ConstantMean(batch_shape=torch.Size([3]))
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(batch_shape=torch.Size([3])), batch_shape=torch.Size([3]))

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


lmc = LMCModel().double()
lmclik = gpytorch.likelihoods.MultitaskGaussianLikelihood(num_tasks=2).double()
opt = torch.optim.Adam([{'params': lmc.parameters()}, {'params': lmclik.parameters()}], lr=0.1)
mll = gpytorch.mlls.VariationalELBO(lmclik, lmc, num_data=60)
lmc.train()
lmclik.train()
for i in range(8):
    opt.zero_grad()
    loss = -mll(lmc(x.unsqueeze(-1)), yb)
    loss.backward()
    opt.step()
print("lmc loss", f"{loss.item():.5f}", "lmc coeffs", fmt(lmc.variational_strategy.lmc_coefficients, 4))
lmc.eval()
with torch.no_grad():
    p = lmclik(lmc(xt.unsqueeze(-1)))
    print("lmc mean", tuple(p.mean.shape), fmt(p.mean, 4))

# priors
pm = GP(x, y, gpytorch.likelihoods.GaussianLikelihood(), gpytorch.kernels.ScaleKernel(
    gpytorch.kernels.RBFKernel(lengthscale_prior=gpytorch.priors.LogNormalPrior(0.0, 1.0)),
    outputscale_prior=gpytorch.priors.GammaPrior(2.0, 2.0))).double()
print("log prior", f"{sum(p.log_prob(c(m)).sum() for _, m, p, c, _ in pm.named_priors()).item():.5f}")
torch.manual_seed(7)
sampled = pm.covar_module.base_kernel.lengthscale_prior.sample(torch.Size([3]))
print("prior samples", fmt(sampled, 4))
