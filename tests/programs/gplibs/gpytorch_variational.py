"""GPyTorch's approximate GPs as its tutorials write them: an SVGP
(ApproximateGP, VariationalStrategy with learned inducing points,
CholeskyVariationalDistribution, VariationalELBO) trained on minibatches
from a DataLoader, with natural-gradient-free Adam; GP classification with
a BernoulliLikelihood (predictive probabilities); a multitask exact GP
(MultitaskMean, MultitaskKernel, MultitaskGaussianLikelihood); and an
independent multitask SVGP (IndependentMultitaskVariationalStrategy,
batched variational distribution, mean-field variant), PredictiveLogLikelihood."""
import math
import random

import torch
import gpytorch
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
random.seed(0)


def fmt(t, d=5):
    return [f"{v:.{d}f}" for v in t.detach().flatten().tolist()]


# --- SVGP regression with minibatches -------------------------------------
N = 200
# (float64: float32 Cholesky factors of nearby inducing points round chaotically)
train_x = torch.rand(N, 1, dtype=torch.float64)
train_y = torch.sin(train_x[:, 0] * 2 * math.pi) + 0.1 * torch.randn(N, dtype=torch.float64)


class SVGPModel(gpytorch.models.ApproximateGP):
    def __init__(self, inducing_points):
        variational_distribution = gpytorch.variational.CholeskyVariationalDistribution(
            inducing_points.size(0))
        variational_strategy = gpytorch.variational.VariationalStrategy(
            self, inducing_points, variational_distribution, learn_inducing_locations=True)
        super(SVGPModel, self).__init__(variational_strategy)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

    def forward(self, x):
        mean_x = self.mean_module(x)
        covar_x = self.covar_module(x)
        return gpytorch.distributions.MultivariateNormal(mean_x, covar_x)


inducing_points = train_x[:16, :]
model = SVGPModel(inducing_points=inducing_points).double()
likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
print([(n, tuple(p.shape)) for n, p in model.named_parameters()])

train_loader = DataLoader(TensorDataset(train_x, train_y), batch_size=50, shuffle=True)
model.train()
likelihood.train()
optimizer = torch.optim.Adam([
    {'params': model.parameters()},
    {'params': likelihood.parameters()},
], lr=0.05)
mll = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=train_y.size(0))
for epoch in range(6):
    total = 0.0
    for x_batch, y_batch in train_loader:
        optimizer.zero_grad()
        output = model(x_batch)
        loss = -mll(output, y_batch)
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"svgp epoch {epoch} loss {total / len(train_loader):.5f}")

print("inducing", fmt(model.variational_strategy.inducing_points[:5, 0], 4))
vd = model.variational_strategy._variational_distribution
print("q mean", fmt(vd.variational_mean[:5], 4), "chol diag", fmt(vd.chol_variational_covar.diagonal()[:5], 4))
model.eval()
likelihood.eval()
test_x = torch.linspace(0, 1, 9, dtype=torch.float64).unsqueeze(-1)
with torch.no_grad():
    preds = likelihood(model(test_x))
    print("svgp mean", fmt(preds.mean, 4))
    print("svgp var", fmt(preds.variance, 5))
    print("kl", f"{model.variational_strategy.kl_divergence().item():.5f}")

# --- GP classification ----------------------------------------------------
cx = torch.linspace(0, 1, 40, dtype=torch.float64)
cy = torch.sign(torch.cos(cx * (4 * math.pi))).add(1).div(2)


class GPClassificationModel(gpytorch.models.ApproximateGP):
    def __init__(self, train_x):
        variational_distribution = gpytorch.variational.CholeskyVariationalDistribution(train_x.size(0))
        variational_strategy = gpytorch.variational.UnwhitenedVariationalStrategy(
            self, train_x, variational_distribution, learn_inducing_locations=False)
        super(GPClassificationModel, self).__init__(variational_strategy)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


cmodel = GPClassificationModel(cx).double()
clik = gpytorch.likelihoods.BernoulliLikelihood()
cmodel.train()
clik.train()
opt = torch.optim.Adam(cmodel.parameters(), lr=0.1)
cmll = gpytorch.mlls.VariationalELBO(clik, cmodel, cy.numel())
for i in range(15):
    opt.zero_grad()
    loss = -cmll(cmodel(cx), cy)
    loss.backward()
    if i % 5 == 4:
        print(f"classification iter {i + 1} loss {loss.item():.5f}")
    opt.step()
cmodel.eval()
clik.eval()
with torch.no_grad():
    tx = torch.linspace(0, 1, 11, dtype=torch.float64)
    observed_pred = clik(cmodel(tx))
    print(type(observed_pred).__name__, "probs", fmt(observed_pred.mean, 4))
    print("labels", observed_pred.mean.ge(0.5).float().tolist())

# --- multitask exact GP ---------------------------------------------------
mx = torch.linspace(0, 1, 30)
my = torch.stack([
    torch.sin(mx * (2 * math.pi)) + torch.randn(mx.size()) * 0.2,
    torch.cos(mx * (2 * math.pi)) + torch.randn(mx.size()) * 0.2,
], -1)


class MultitaskGPModel(gpytorch.models.ExactGP):
    def __init__(self, train_x, train_y, likelihood):
        super(MultitaskGPModel, self).__init__(train_x, train_y, likelihood)
        self.mean_module = gpytorch.means.MultitaskMean(gpytorch.means.ConstantMean(), num_tasks=2)
        self.covar_module = gpytorch.kernels.MultitaskKernel(
            gpytorch.kernels.RBFKernel(), num_tasks=2, rank=1)

    def forward(self, x):
        mean_x = self.mean_module(x)
        covar_x = self.covar_module(x)
        return gpytorch.distributions.MultitaskMultivariateNormal(mean_x, covar_x)


mlik = gpytorch.likelihoods.MultitaskGaussianLikelihood(num_tasks=2)
mmodel = MultitaskGPModel(mx, my, mlik)
mmodel.train()
mlik.train()
opt = torch.optim.Adam(mmodel.parameters(), lr=0.1)
mmll = gpytorch.mlls.ExactMarginalLogLikelihood(mlik, mmodel)
for i in range(12):
    opt.zero_grad()
    loss = -mmll(mmodel(mx), my)
    loss.backward()
    if i % 4 == 3:
        print(f"multitask iter {i + 1} loss {loss.item():.5f}")
    opt.step()
print("task covar", fmt(mmodel.covar_module.task_covar_module.covar_matrix.to_dense(), 4))
print("task noises", fmt(mlik.task_noises, 5), "noise", fmt(mlik.noise, 5))
mmodel.eval()
mlik.eval()
with torch.no_grad(), gpytorch.settings.fast_pred_var():
    tx = torch.linspace(0, 1, 6)
    predictions = mlik(mmodel(tx))
    mean = predictions.mean
    lower, upper = predictions.confidence_region()
    print("multitask mean", tuple(mean.shape), fmt(mean, 4))
    print("multitask lower", fmt(lower, 4))
    print("multitask upper", fmt(upper, 4))

# --- independent multitask SVGP ------------------------------------------
class IndependentMultitaskGPModel(gpytorch.models.ApproximateGP):
    def __init__(self):
        inducing_points = torch.rand(2, 8, 1, dtype=torch.float64)
        variational_distribution = gpytorch.variational.MeanFieldVariationalDistribution(
            inducing_points.size(-2), batch_shape=torch.Size([2]))
        variational_strategy = gpytorch.variational.IndependentMultitaskVariationalStrategy(
            gpytorch.variational.VariationalStrategy(
                self, inducing_points, variational_distribution, learn_inducing_locations=True),
            num_tasks=2)
        super().__init__(variational_strategy)
        self.mean_module = gpytorch.means.ConstantMean(batch_shape=torch.Size([2]))
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(batch_shape=torch.Size([2])), batch_shape=torch.Size([2]))

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


imodel = IndependentMultitaskGPModel().double()
ilik = gpytorch.likelihoods.MultitaskGaussianLikelihood(num_tasks=2).double()
imodel.train()
ilik.train()
opt = torch.optim.Adam([{'params': imodel.parameters()}, {'params': ilik.parameters()}], lr=0.1)
imll = gpytorch.mlls.PredictiveLogLikelihood(ilik, imodel, num_data=my.size(0))
for i in range(12):
    opt.zero_grad()
    loss = -imll(imodel(mx.double().unsqueeze(-1)), my.double())
    loss.backward()
    if i % 4 == 3:
        print(f"indep multitask iter {i + 1} loss {loss.item():.5f}")
    opt.step()
imodel.eval()
ilik.eval()
with torch.no_grad():
    p = ilik(imodel(torch.linspace(0, 1, 5, dtype=torch.float64).unsqueeze(-1)))
    print("indep mean", tuple(p.mean.shape), fmt(p.mean, 4))
    print("indep var", fmt(p.variance, 4))
