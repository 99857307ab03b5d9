"""GPyTorch's kernels in ExactGP regression, as its kernel examples write
them: Matern (nu 1/2, 3/2, 5/2), Periodic, SpectralMixture (initialized
from data), additive and product kernels, RBF with ARD on 2-d inputs,
in float64 too; each trained a few Adam steps on the exact marginal log
likelihood, then the predictive mean / variance; and the settings that
switch exact inference from Cholesky to CG / Lanczos (max_cholesky_size,
cg_tolerance, num_trace_samples, fast_pred_var / skip_posterior_variances)."""

import torch
import gpytorch

torch.manual_seed(0)


def fmt(t, d=5):
    return [f"{v:.{d}f}" for v in t.detach().flatten().tolist()]


class GP(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood, kernel, mean=None):
        super().__init__(x, y, likelihood)
        self.mean_module = mean if mean is not None else gpytorch.means.ConstantMean()
        self.covar_module = kernel

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def train(model, x, y, iters=8, lr=0.1):
    model.train()
    model.likelihood.train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    losses = []
    for _ in range(iters):
        opt.zero_grad()
        loss = -mll(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def predict(model, x):
    model.eval()
    model.likelihood.eval()
    with torch.no_grad():
        pred = model.likelihood(model(x))
    return pred.mean, pred.variance


x1 = torch.linspace(0, 1, 25)
y1 = torch.sin(x1 * 6.0) + 0.1 * torch.randn(25)
xt = torch.linspace(-0.1, 1.1, 7)

kernels = {
    "matern12": gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=0.5)),
    "matern32": gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=1.5)),
    "matern52": gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=2.5)),
    "periodic": gpytorch.kernels.ScaleKernel(gpytorch.kernels.PeriodicKernel()),
    "rq": gpytorch.kernels.ScaleKernel(gpytorch.kernels.RQKernel()),
    "linear+rbf": gpytorch.kernels.LinearKernel() + gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel()),
    "rbf*periodic": gpytorch.kernels.ScaleKernel(
        gpytorch.kernels.RBFKernel() * gpytorch.kernels.PeriodicKernel()),
    "poly2": gpytorch.kernels.PolynomialKernel(power=2),
    "cosine": gpytorch.kernels.ScaleKernel(gpytorch.kernels.CosineKernel()),
}
for name, k in kernels.items():
    m = GP(x1, y1, gpytorch.likelihoods.GaussianLikelihood(), k)
    losses = train(m, x1, y1)
    mean, var = predict(m, xt)
    print(name, "loss", fmt(torch.tensor(losses[::3]), 5))
    print(name, "mean", fmt(mean, 4), "var", fmt(var, 5))

# spectral mixture kernel, initialized from the data, as its tutorial does
sm = gpytorch.kernels.SpectralMixtureKernel(num_mixtures=3)
sm.initialize_from_data(x1, y1)
print("sm init", fmt(sm.mixture_weights), fmt(sm.mixture_means, 4), fmt(sm.mixture_scales, 4))
m = GP(x1, y1, gpytorch.likelihoods.GaussianLikelihood(), sm)
losses = train(m, x1, y1, iters=10)
mean, var = predict(m, xt)
print("sm loss", fmt(torch.tensor(losses[::3])))
print("sm mean", fmt(mean, 4), "var", fmt(var, 5))

# ARD on 2-d inputs, float64, with a linear mean and a prior on the lengthscale
x2 = torch.rand(40, 2, dtype=torch.float64)
y2 = torch.sin(3 * x2[:, 0]) + 0.2 * x2[:, 1] ** 2 + 0.05 * torch.randn(40, dtype=torch.float64)
k = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(
    ard_num_dims=2, lengthscale_prior=gpytorch.priors.GammaPrior(3.0, 6.0)),
    outputscale_prior=gpytorch.priors.GammaPrior(2.0, 0.15))
lik = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=gpytorch.constraints.Interval(1e-4, 0.5))
m = GP(x2, y2, lik, k, gpytorch.means.LinearMean(2)).double()
losses = train(m, x2, y2, iters=12, lr=0.05)
print("ard loss", fmt(torch.tensor(losses[::4]), 6))
print("ard lengthscale", fmt(m.covar_module.base_kernel.lengthscale, 5), "noise", fmt(m.likelihood.noise, 6))
xt2 = torch.rand(5, 2, dtype=torch.float64)
mean, var = predict(m, xt2)
print("ard mean", mean.dtype, fmt(mean, 5), "var", fmt(var, 6))

# additive structure over dimensions and the kernel matrix itself
add = gpytorch.kernels.AdditiveStructureKernel(gpytorch.kernels.RBFKernel(), num_dims=2).double()
K = add(x2[:6]).to_dense()
print("additive K", tuple(K.shape), f"{K.sum().item():.6f}", f"{torch.linalg.eigvalsh(K).min().item():.6e}")
prod = gpytorch.kernels.ProductStructureKernel(gpytorch.kernels.RBFKernel(), num_dims=2).double()
print("product K", f"{prod(x2[:6]).to_dense().sum().item():.6f}")
print("diag", fmt(k(x2[:4], diag=True), 6))
print("cross", tuple(k(x2[:4], x2[:3]).shape), f"{k(x2[:4], x2[:3]).to_dense().sum().item():.6f}")

# Cholesky against CG / Lanczos: larger problem, switched with max_cholesky_size
x3 = torch.linspace(0, 4, 100, dtype=torch.float64)
y3 = torch.sin(2 * x3) + 0.1 * torch.randn(100, dtype=torch.float64)
m = GP(x3, y3, gpytorch.likelihoods.GaussianLikelihood(),
       gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())).double()
m.covar_module.base_kernel.lengthscale = 0.5
m.likelihood.noise = 0.1
mll = gpytorch.mlls.ExactMarginalLogLikelihood(m.likelihood, m)
m.train()
with gpytorch.settings.max_cholesky_size(1000):
    loss = -mll(m(x3), y3)
    loss.backward()
print("cholesky loss", f"{loss.item():.6f}", "grads", [f"{p.grad.item():.5f}" for p in m.parameters()])
m.zero_grad()
torch.manual_seed(1)
with gpytorch.settings.max_cholesky_size(0), gpytorch.settings.cg_tolerance(1e-6), \
        gpytorch.settings.num_trace_samples(64), gpytorch.settings.max_cg_iterations(300):
    loss = -mll(m(x3), y3)
    loss.backward()
print("cg loss", f"{loss.item():.3f}", "grads", [f"{p.grad.item():.2f}" for p in m.parameters()])
m.eval()
xt3 = torch.linspace(0, 4, 9, dtype=torch.float64)
with torch.no_grad(), gpytorch.settings.max_cholesky_size(1000):
    p = m(xt3)
    print("cholesky pred", fmt(p.mean, 5), fmt(p.variance, 6))
m.prediction_strategy = None
with torch.no_grad(), gpytorch.settings.max_cholesky_size(0), gpytorch.settings.fast_pred_var(), \
        gpytorch.settings.cg_tolerance(1e-8), gpytorch.settings.max_cg_iterations(400):
    p = m(xt3)
    print("cg pred", fmt(p.mean, 4), fmt(p.variance, 4))
with torch.no_grad(), gpytorch.settings.skip_posterior_variances():
    p = m(xt3)
    print("skip var", fmt(p.mean, 4), fmt(p.variance, 4))
