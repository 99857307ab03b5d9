# Bayes by Backprop (Blundell et al. 2015) the way
# nitarshan/bayes-by-backprop's notebook writes it: a Gaussian variational
# posterior with the softplus rho parameterization (sigma =
# log1p(exp(rho))) sampled by mu + sigma * epsilon from
# torch.distributions.Normal(0,1).sample(size), its log-density written out
# with math.log(math.sqrt(2 * math.pi)), the scale-mixture prior over
# torch.FloatTensor sigmas through Normal.log_prob, BayesianLinear
# (parameters from torch.Tensor(...).uniform_), the ELBO over MC samples
# written into preallocated torch.zeros by index, KL weighted by
# 1 / NUM_BATCHES, F.nll_loss(..., size_average=False) (the deprecated
# spelling of reduction='sum'), test_ensemble's sampled / mean-weight
# ensemble; then a ptrblck-style BayesianLinear with Normal(mu,
# sigma).rsample() and kl_divergence against a Normal prior. Changes for
# a CPU test: 8x8 synthetic digits from numpy instead of MNIST, small
# layers, a few steps; the posterior's epsilon comes from a numpy
# generator (an object with the Normal's .sample(size)) so both runs draw
# the same weights, while the torch-sampled parts print [rng] values and
# deterministic checks; then one training step under torch.compile (torch
# sampling, seeded) against the same step eagerly.
import copy
import math
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

warnings.simplefilter("ignore")   # size_average's deprecation warning (stderr either way)

DEVICE = torch.device("cpu")
BATCH_SIZE = 16
TEST_BATCH_SIZE = 20
CLASSES = 4
TRAIN_EPOCHS = 2
SAMPLES = 2
TEST_SAMPLES = 3
PIXELS = 8 * 8
NUM_BATCHES = 3

r = np.random.default_rng(0)


class NumpyNormal(object):
    """The posterior's noise source: draws like Normal(0,1).sample(size),
    from a numpy generator (so torch and tracec draw the same numbers)."""

    def sample(self, size):
        return torch.from_numpy(r.standard_normal(tuple(size)).astype(np.float32))


class Gaussian(object):
    def __init__(self, mu, rho):
        super().__init__()
        self.mu = mu
        self.rho = rho
        self.normal = NUMPY_NORMAL if USE_NUMPY_NOISE else torch.distributions.Normal(0, 1)

    @property
    def sigma(self):
        return torch.log1p(torch.exp(self.rho))

    def sample(self):
        epsilon = self.normal.sample(self.rho.size()).to(DEVICE)
        return self.mu + self.sigma * epsilon

    def log_prob(self, input):
        return (-math.log(math.sqrt(2 * math.pi))
                - torch.log(self.sigma)
                - ((input - self.mu) ** 2) / (2 * self.sigma ** 2)).sum()


NUMPY_NORMAL = NumpyNormal()
USE_NUMPY_NOISE = True


class ScaleMixtureGaussian(object):
    def __init__(self, pi, sigma1, sigma2):
        super().__init__()
        self.pi = pi
        self.sigma1 = sigma1
        self.sigma2 = sigma2
        self.gaussian1 = torch.distributions.Normal(0, sigma1)
        self.gaussian2 = torch.distributions.Normal(0, sigma2)

    def log_prob(self, input):
        prob1 = torch.exp(self.gaussian1.log_prob(input))
        prob2 = torch.exp(self.gaussian2.log_prob(input))
        return (torch.log(self.pi * prob1 + (1 - self.pi) * prob2)).sum()


PI = 0.5
SIGMA_1 = torch.FloatTensor([math.exp(-0)])
SIGMA_2 = torch.FloatTensor([math.exp(-6)])


class BayesianLinear(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        # Weight parameters
        self.weight_mu = nn.Parameter(torch.Tensor(out_features, in_features).uniform_(-0.2, 0.2))
        self.weight_rho = nn.Parameter(torch.Tensor(out_features, in_features).uniform_(-5, -4))
        self.weight = Gaussian(self.weight_mu, self.weight_rho)
        # Bias parameters
        self.bias_mu = nn.Parameter(torch.Tensor(out_features).uniform_(-0.2, 0.2))
        self.bias_rho = nn.Parameter(torch.Tensor(out_features).uniform_(-5, -4))
        self.bias = Gaussian(self.bias_mu, self.bias_rho)
        # Prior distributions
        self.weight_prior = ScaleMixtureGaussian(PI, SIGMA_1, SIGMA_2)
        self.bias_prior = ScaleMixtureGaussian(PI, SIGMA_1, SIGMA_2)
        self.log_prior = 0
        self.log_variational_posterior = 0

    def forward(self, input, sample=False, calculate_log_probs=False):
        if self.training or sample:
            weight = self.weight.sample()
            bias = self.bias.sample()
        else:
            weight = self.weight.mu
            bias = self.bias.mu
        if self.training or calculate_log_probs:
            self.log_prior = self.weight_prior.log_prob(weight) + self.bias_prior.log_prob(bias)
            self.log_variational_posterior = self.weight.log_prob(weight) + self.bias.log_prob(bias)
        else:
            self.log_prior, self.log_variational_posterior = 0, 0

        return F.linear(input, weight, bias)


class BayesianNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = BayesianLinear(PIXELS, 24)
        self.l2 = BayesianLinear(24, 24)
        self.l3 = BayesianLinear(24, CLASSES)

    def forward(self, x, sample=False):
        x = x.view(-1, PIXELS)
        x = F.relu(self.l1(x, sample))
        x = F.relu(self.l2(x, sample))
        x = F.log_softmax(self.l3(x, sample), dim=1)
        return x

    def log_prior(self):
        return self.l1.log_prior \
            + self.l2.log_prior \
            + self.l3.log_prior

    def log_variational_posterior(self):
        return self.l1.log_variational_posterior \
            + self.l2.log_variational_posterior \
            + self.l3.log_variational_posterior

    def sample_elbo(self, input, target, samples=SAMPLES):
        outputs = torch.zeros(samples, BATCH_SIZE, CLASSES).to(DEVICE)
        log_priors = torch.zeros(samples).to(DEVICE)
        log_variational_posteriors = torch.zeros(samples).to(DEVICE)
        for i in range(samples):
            outputs[i] = self(input, sample=True)
            log_priors[i] = self.log_prior()
            log_variational_posteriors[i] = self.log_variational_posterior()
        log_prior = log_priors.mean()
        log_variational_posterior = log_variational_posteriors.mean()
        negative_log_likelihood = F.nll_loss(outputs.mean(0), target, size_average=False)
        loss = (log_variational_posterior - log_prior) / NUM_BATCHES + negative_log_likelihood
        return loss, log_prior, log_variational_posterior, negative_log_likelihood


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


# synthetic "digits": class templates plus noise, in [0, 1]
templates = r.random((CLASSES, PIXELS))
def make(n):
    y = r.integers(0, CLASSES, n)
    x = np.clip(templates[y] + 0.3 * r.standard_normal((n, PIXELS)), 0, 1).astype(np.float32)
    return torch.from_numpy(x.reshape(n, 1, 8, 8)), torch.from_numpy(y)


train_set = [make(BATCH_SIZE) for _ in range(NUM_BATCHES)]
test_set = [make(TEST_BATCH_SIZE)]

net = BayesianNetwork().to(DEVICE)
with torch.no_grad():   # the uniform_ draws, from numpy
    for name, p in net.named_parameters():
        lo, hi = (-5, -4) if "rho" in name else (-0.2, 0.2)
        p.copy_(torch.from_numpy(r.uniform(lo, hi, tuple(p.shape)).astype(np.float32)))
print("params", [n for n, _ in net.named_parameters()][:4], sum(p.numel() for p in net.parameters()))
print("sigma", fmt(net.l1.weight.sigma, 3), torch.allclose(net.l1.weight.sigma, F.softplus(net.l1.weight_rho)))

# the prior and the posterior's log-densities against torch.distributions
w = torch.from_numpy(r.normal(0, 0.1, (5, 3)).astype(np.float32))
mix = ScaleMixtureGaussian(PI, SIGMA_1, SIGMA_2)
print("mixture log_prob", f"{mix.log_prob(w).item():.4f}", f"{mix.log_prob(torch.zeros(2)).item():.4f}",
      mix.gaussian1.log_prob(w).shape, mix.gaussian2.scale.tolist())
g = Gaussian(torch.zeros(5, 3), torch.full((5, 3), -3.0))
ref = torch.distributions.Normal(g.mu, g.sigma).log_prob(w).sum()
print("posterior log_prob", f"{g.log_prob(w).item():.4f}", f"{ref.item():.4f}",
      torch.allclose(g.log_prob(w), ref, rtol=1e-3, atol=1e-3))


def train(net, optimizer, epoch):
    net.train()
    for batch_idx, (data, target) in enumerate(train_set):
        data, target = data.to(DEVICE), target.to(DEVICE)
        net.zero_grad()
        loss, log_prior, log_variational_posterior, negative_log_likelihood = net.sample_elbo(data, target)
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch} batch {batch_idx} loss {loss.item():.3f} prior {log_prior.item():.3f}"
              f" posterior {log_variational_posterior.item():.3f} nll {negative_log_likelihood.item():.4f}")


optimizer = optim.Adam(net.parameters())
for epoch in range(TRAIN_EPOCHS):
    train(net, optimizer, epoch)
print("grads", fmt(net.l1.weight_mu.grad, 3), fmt(net.l3.bias_rho.grad, 3))
print("updated", fmt(net.l2.weight_rho, 3))


def test_ensemble():
    net.eval()
    correct = 0
    corrects = np.zeros(TEST_SAMPLES + 1, dtype=int)
    with torch.no_grad():
        for data, target in test_set:
            data, target = data.to(DEVICE), target.to(DEVICE)
            outputs = torch.zeros(TEST_SAMPLES + 1, TEST_BATCH_SIZE, CLASSES).to(DEVICE)
            for i in range(TEST_SAMPLES):
                outputs[i] = net(data, sample=True)
            outputs[TEST_SAMPLES] = net(data, sample=False)
            output = outputs.mean(0)
            preds = outputs.max(2, keepdim=True)[1]
            pred = output.max(1, keepdim=True)[1]  # index of max log-probability
            corrects += preds.eq(target.view_as(pred)).sum(dim=1).squeeze().cpu().numpy()
            correct += pred.eq(target.view_as(pred)).sum().item()
    for index, num in enumerate(corrects):
        if index < TEST_SAMPLES:
            print('Component {} Accuracy: {}/{}'.format(index, num, TEST_BATCH_SIZE))
        else:
            print('Posterior Mean Accuracy: {}/{}'.format(num, TEST_BATCH_SIZE))
    print('Ensemble Accuracy: {}/{}'.format(correct, TEST_BATCH_SIZE))
    return output


out = test_ensemble()
print("ensemble", fmt(out[0], 4))
net.eval()
with torch.no_grad():
    h = F.relu(net.l1(test_set[0][0].view(-1, PIXELS), calculate_log_probs=True))
    h = F.relu(net.l2(h, calculate_log_probs=True))
    lp = F.log_softmax(net.l3(h, calculate_log_probs=True), dim=1)
print("mean-weight log probs", f"{net.log_prior().item():.3f}", f"{net.log_variational_posterior().item():.3f}",
      fmt(lp[1], 4))
print("size_average=False == sum", torch.allclose(F.nll_loss(lp, test_set[0][1], size_average=False),
                                                 F.nll_loss(lp, test_set[0][1], reduction='sum')),
      f"{F.nll_loss(lp, test_set[0][1], size_average=True, reduce=True).item():.5f}",
      F.nll_loss(lp, test_set[0][1], reduce=False).shape)


# ptrblck-style: the weight sampled with Normal(mu, sigma).rsample(), KL in closed form
class BayesLinearRS(nn.Module):
    def __init__(self, in_features, out_features, prior_sigma=1.0):
        super().__init__()
        self.w_mu = nn.Parameter(torch.zeros(out_features, in_features))
        self.w_rho = nn.Parameter(torch.full((out_features, in_features), -3.0))
        self.prior = torch.distributions.Normal(torch.zeros(out_features, in_features),
                                                prior_sigma * torch.ones(out_features, in_features))

    def forward(self, x):
        w_sigma = F.softplus(self.w_rho)
        q = torch.distributions.Normal(self.w_mu, w_sigma)
        w = q.rsample()
        self.kl = torch.distributions.kl_divergence(q, self.prior).sum()
        self.w_sample = w
        return x @ w.t()


torch.manual_seed(0)
layer = BayesLinearRS(3, 2)
with torch.no_grad():
    layer.w_mu.copy_(torch.from_numpy(r.normal(0, 0.5, (2, 3)).astype(np.float32)))
xin = torch.from_numpy(r.normal(size=(4, 3)).astype(np.float32))
y = layer(xin)
(y.sum() + layer.kl).backward()
sig = F.softplus(layer.w_rho).detach()
eps = (layer.w_sample.detach() - layer.w_mu.detach()) / sig
# d/dmu = x.sum(0) per output row plus the KL's mu / prior_var; d/drho through sigma = softplus(rho)
want_mu = xin.sum(0).expand(2, 3) + layer.w_mu.detach()
want_rho = (xin.sum(0) * eps + (sig - 1.0 / sig)) * torch.sigmoid(layer.w_rho.detach())
print("rsample", "[rng]", fmt(layer.w_sample, 3), "kl", f"{layer.kl.item():.4f}",
      "grads", torch.allclose(layer.w_mu.grad, want_mu, atol=1e-5), torch.allclose(layer.w_rho.grad, want_rho, atol=1e-5))
n01 = torch.distributions.Normal(0, 1)
print("kl closed form", f"{torch.distributions.kl_divergence(torch.distributions.Normal(1.0, 2.0), n01).item():.5f}",
      n01.sample((2, 3)).shape, n01.rsample().shape, n01.sample().shape, n01.batch_shape, n01.event_shape)
print("randn_like", "[rng]", torch.randn_like(sig).shape, sig.dtype, n01.mean.item(), n01.stddev.item())


# one training step under torch.compile against the same step eagerly, torch's own sampling
USE_NUMPY_NOISE = False
net = BayesianNetwork().to(DEVICE)
net.load_state_dict({k: torch.from_numpy(r.uniform(-5, -4, tuple(v.shape)).astype(np.float32)) if "rho" in k
                     else torch.from_numpy(r.uniform(-0.2, 0.2, tuple(v.shape)).astype(np.float32))
                     for k, v in net.state_dict().items()})
optimizer = optim.Adam(net.parameters())
net.train()
data, target = train_set[0]


def train_step(data, target):
    net.zero_grad()
    loss, log_prior, log_variational_posterior, negative_log_likelihood = net.sample_elbo(data, target)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(net.state_dict()), copy.deepcopy(optimizer.state_dict())
torch.manual_seed(1)
eager = [train_step(data, target).item() for _ in range(2)]
after = {k: v.clone() for k, v in net.state_dict().items()}
net.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
torch.manual_seed(1)
compiled = [cstep(data, target).item() for _ in range(2)]
print("compiled losses", "[rng]", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(net.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
