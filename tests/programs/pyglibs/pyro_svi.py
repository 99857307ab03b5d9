# Pyro's "Bayesian Regression - Introduction" and "SVI Part I" tutorials,
# with pyro-ppl itself from PyPI: a linear model with a plate, an
# AutoNormal guide trained by SVI with Trace_ELBO and pyro.optim.Adam, the
# guide's medians and quantiles, Predictive sampling; then SVI Part I's
# coin-fairness model with a hand-written guide (pyro.param with a positive
# constraint).  Changed for a CPU test: 50 synthetic points instead of the
# terrain/GDP data, 30 and 40 steps instead of 1500 and 2000.
import torch
import torch.distributions.constraints as constraints

import pyro
import pyro.distributions as dist
from pyro.infer import SVI, Predictive, Trace_ELBO
from pyro.infer.autoguide import AutoNormal
from pyro.optim import Adam

pyro.set_rng_seed(0)
x = torch.linspace(0, 1, 50)
y = 2.0 * x + 0.5 + 0.1 * torch.randn(50)


def model(x, y=None):
    w = pyro.sample("w", dist.Normal(0., 1.))
    b = pyro.sample("b", dist.Normal(0., 1.))
    sigma = pyro.sample("sigma", dist.HalfNormal(1.))
    with pyro.plate("data", len(x)):
        pyro.sample("obs", dist.Normal(w * x + b, sigma), obs=y)


guide = AutoNormal(model)
svi = SVI(model, guide, Adam({"lr": 0.05}), loss=Trace_ELBO())
for step in range(30):
    loss = svi.step(x, y)
    if step % 10 == 0:
        print("[iteration %04d] loss: %.4f" % (step + 1, loss / len(x)))
print({k: round(v.item(), 4) for k, v in guide.median().items()})
print({k: [round(q, 4) for q in v.flatten().tolist()]
       for k, v in guide.quantiles([0.25, 0.75]).items()})
predictive = Predictive(model, guide=guide, num_samples=20)
samples = predictive(x[:3])
print({k: tuple(v.shape) for k, v in samples.items()}, round(samples["obs"].mean().item(), 4))
print(list(pyro.get_param_store().keys()))

# SVI Part I: is the coin fair?
pyro.clear_param_store()
data = [torch.tensor(1.0)] * 6 + [torch.tensor(0.0)] * 4


def coin_model(data):
    alpha0, beta0 = torch.tensor(10.0), torch.tensor(10.0)
    f = pyro.sample("latent_fairness", dist.Beta(alpha0, beta0))
    for i in range(len(data)):
        pyro.sample("obs_{}".format(i), dist.Bernoulli(f), obs=data[i])


def coin_guide(data):
    alpha_q = pyro.param("alpha_q", torch.tensor(15.0), constraint=constraints.positive)
    beta_q = pyro.param("beta_q", torch.tensor(15.0), constraint=constraints.positive)
    pyro.sample("latent_fairness", dist.Beta(alpha_q, beta_q))


svi = SVI(coin_model, coin_guide, Adam({"lr": 0.0005, "betas": (0.90, 0.999)}), loss=Trace_ELBO())
for step in range(40):
    loss = svi.step(data)
alpha_q, beta_q = pyro.param("alpha_q").item(), pyro.param("beta_q").item()
print("alpha_q %.4f beta_q %.4f" % (alpha_q, beta_q))
print("inferred fairness %.4f" % (alpha_q / (alpha_q + beta_q)))
