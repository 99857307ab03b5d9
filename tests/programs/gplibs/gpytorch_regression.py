"""GPyTorch's "Simple GP Regression" tutorial, small: an ExactGP with a
ConstantMean and a ScaleKernel(RBFKernel), GaussianLikelihood, trained by
Adam on the exact marginal log likelihood, then the posterior predictive
mean / variance / confidence region in eval mode (fast_pred_var); then
the same model past max_cholesky_size (float32 CG, preconditioned)."""
import math

import torch
import gpytorch

torch.manual_seed(0)

train_x = torch.linspace(0, 1, 30)
train_y = torch.sin(train_x * (2 * math.pi)) + torch.randn(train_x.size()) * math.sqrt(0.04)


class ExactGPModel(gpytorch.models.ExactGP):
    def __init__(self, train_x, train_y, likelihood):
        super(ExactGPModel, self).__init__(train_x, train_y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

    def forward(self, x):
        mean_x = self.mean_module(x)
        covar_x = self.covar_module(x)
        return gpytorch.distributions.MultivariateNormal(mean_x, covar_x)


likelihood = gpytorch.likelihoods.GaussianLikelihood()
model = ExactGPModel(train_x, train_y, likelihood)
print(model)
for name, p in model.named_parameters():
    print(name, tuple(p.shape), [f"{v:.5f}" for v in p.detach().flatten().tolist()])

model.train()
likelihood.train()
optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)

training_iter = 30
for i in range(training_iter):
    optimizer.zero_grad()
    output = model(train_x)
    loss = -mll(output, train_y)
    loss.backward()
    if i % 5 == 0 or i == training_iter - 1:
        print('Iter %d/%d - Loss: %.5f   lengthscale: %.5f   noise: %.5f   outputscale: %.5f' % (
            i + 1, training_iter, loss.item(),
            model.covar_module.base_kernel.lengthscale.item(),
            model.likelihood.noise.item(),
            model.covar_module.outputscale.item(),
        ))
    optimizer.step()

for name, p in model.named_parameters():
    print(name, f"{p.item():.5f}", f"grad {p.grad.item():.5f}")

model.eval()
likelihood.eval()
with torch.no_grad(), gpytorch.settings.fast_pred_var():
    test_x = torch.linspace(0, 1, 11)
    f_pred = model(test_x)
    observed_pred = likelihood(f_pred)
    print(type(f_pred).__name__, type(observed_pred).__name__, tuple(observed_pred.mean.shape))
    print("mean", [f"{v:.4f}" for v in observed_pred.mean.tolist()])
    print("var", [f"{v:.5f}" for v in observed_pred.variance.tolist()])
    print("f var", [f"{v:.5f}" for v in f_pred.variance.tolist()])
    lower, upper = observed_pred.confidence_region()
    print("lower", [f"{v:.4f}" for v in lower.tolist()])
    print("upper", [f"{v:.4f}" for v in upper.tolist()])
    print("stddev", [f"{v:.4f}" for v in observed_pred.stddev.tolist()])
    cov = f_pred.covariance_matrix
    print("cov", tuple(cov.shape), f"{cov.diagonal().sum().item():.5f}", f"{cov[0, 5].item():.6f}")

# without fast_pred_var: the exact predictive covariance
with torch.no_grad():
    f_pred = model(test_x)
    print("exact f var", [f"{v:.5f}" for v in f_pred.variance.tolist()])
    print("log_prob", f"{likelihood(f_pred).log_prob(torch.sin(test_x * 2 * math.pi)).item():.4f}")
    samples = f_pred.sample(torch.Size([3]))
    print("[rng] samples", tuple(samples.shape))

# prior mode
with gpytorch.settings.prior_mode(True), torch.no_grad():
    prior = model(test_x)
    print("prior mean", f"{prior.mean.mean().item():.5f}", "prior var", f"{prior.variance.mean().item():.5f}")

# save / load the state dict
state = model.state_dict()
print(sorted(state.keys()))
model2 = ExactGPModel(train_x, train_y, gpytorch.likelihoods.GaussianLikelihood())
model2.load_state_dict(state)
model2.eval()
with torch.no_grad():
    print("reloaded mean", [f"{v:.4f}" for v in model2(test_x).mean.tolist()[:4]])

# more data than max_cholesky_size: float32 CG with a pivoted-Cholesky
# preconditioner and stochastic Lanczos log-determinants (the default path
# past 800 points, here forced at 150)
torch.manual_seed(1)
big_x = torch.linspace(0, 1, 150)
big_y = torch.sin(big_x * (2 * math.pi)) + 0.1 * torch.randn(150)
big_lik = gpytorch.likelihoods.GaussianLikelihood()
big = ExactGPModel(big_x, big_y, big_lik)
optimizer = torch.optim.Adam(big.parameters(), lr=0.1)
mll = gpytorch.mlls.ExactMarginalLogLikelihood(big_lik, big)
big.train()
with gpytorch.settings.max_cholesky_size(100), gpytorch.settings.min_preconditioning_size(50):
    for i in range(6):
        optimizer.zero_grad()
        loss = -mll(big(big_x), big_y)
        loss.backward()
        optimizer.step()
        print(f"cg iter {i} loss {loss.item():.5f}", [f"{p.grad.item():.5f}" for p in big.parameters()])
    big.eval()
    with torch.no_grad(), gpytorch.settings.fast_pred_var():
        p = big_lik(big(torch.linspace(0, 1, 5)))
        print("cg mean", [f"{v:.4f}" for v in p.mean.tolist()], "var", [f"{v:.4f}" for v in p.variance.tolist()])
