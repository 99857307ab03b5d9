# A mixture density network the way public MDN code writes it with
# torch.distributions (e.g. tonyduan/mdn and the "MDN with
# MixtureSameFamily" tutorials): a shared MLP trunk, a Categorical over the
# mixture weights from logits, an Independent(Normal(...), 1) component
# over a 2-d target with softplus / exp scales, MixtureSameFamily's
# log_prob as the negative log-likelihood, then the mixture's mean,
# variance, sample, cdf of a 1-d mixture, entropy bounds by Monte Carlo and
# the constraint errors. Changes for a CPU test: data from numpy, a few
# steps; then one training step under torch.compile against the same step
# eagerly.
import copy
import math

import numpy as np
import torch
import torch.distributions as D
import torch.nn as nn
import torch.nn.functional as F


class MixtureDensityNetwork(nn.Module):
    def __init__(self, dim_in, dim_out, n_components, hidden_dim=32):
        super().__init__()
        self.n_components, self.dim_out = n_components, dim_out
        self.trunk = nn.Sequential(nn.Linear(dim_in, hidden_dim), nn.ELU(),
                                   nn.Linear(hidden_dim, hidden_dim), nn.Tanh())
        self.pi_network = nn.Linear(hidden_dim, n_components)
        self.normal_network = nn.Linear(hidden_dim, 2 * dim_out * n_components)

    def forward(self, x, eps=1e-6):
        h = self.trunk(x)
        logits = self.pi_network(h)
        params = self.normal_network(h)
        mean, sd = torch.split(params, params.shape[1] // 2, dim=1)
        mean = torch.stack(mean.split(mean.shape[1] // self.n_components, 1), dim=1)
        sd = torch.stack(sd.split(sd.shape[1] // self.n_components, 1), dim=1)
        mix = D.Categorical(logits=logits)
        comp = D.Independent(D.Normal(mean, F.softplus(sd) + eps), 1)
        return D.MixtureSameFamily(mix, comp)

    def loss(self, x, y):
        return -self.forward(x).log_prob(y).mean()


def init_from_numpy(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(r.normal(0, 0.3, tuple(p.shape)).astype(np.float32)))


rng = np.random.default_rng(0)
n = 64
xs = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
branch = rng.integers(0, 2, n)
ys = np.concatenate([np.where(branch[:, None] == 0, np.sin(3 * xs), -np.sin(3 * xs)),
                     xs ** 2], axis=1).astype(np.float32) + 0.05 * rng.normal(size=(n, 2)).astype(np.float32)
x, y = torch.from_numpy(xs), torch.from_numpy(ys)

model = MixtureDensityNetwork(1, 2, n_components=3)
init_from_numpy(model, 1)
gmm = model(x[:4])
print("batch/event", gmm.batch_shape, gmm.event_shape, gmm.mixture_distribution.probs.shape,
      gmm.component_distribution.batch_shape, gmm.component_distribution.event_shape)
print("probs", [[f"{v:.4f}" for v in row] for row in gmm.mixture_distribution.probs.tolist()[:2]])
print("log_prob", [f"{v:.4f}" for v in gmm.log_prob(y[:4]).tolist()])
print("mean", [[f"{v:.4f}" for v in row] for row in gmm.mean.tolist()[:2]])
print("variance", [[f"{v:.4f}" for v in row] for row in gmm.variance.tolist()[:2]])
print("support", type(gmm.support).__name__, gmm.support.event_dim)

optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
for step in range(30):
    optimizer.zero_grad()
    loss = model.loss(x, y)
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print(f"step {step} nll {loss.item():.4f}")
print(f"final nll {model.loss(x, y).item():.4f}")

torch.manual_seed(0)
with torch.no_grad():
    gmm = model(x[:5])
    s = gmm.sample((7,))
    print("sample shape", tuple(s.shape), s.dtype, "[rng]", f"{s.mean().item():.3f}")
    lp = gmm.log_prob(s)
    print("sample log_prob shape", tuple(lp.shape), bool(torch.isfinite(lp).all()))
    big = gmm.sample((4000,))
    print("mc mean close", bool((big.mean(0) - gmm.mean).abs().max() < 0.15))

# a 1-d mixture (univariate components) supports cdf
mix = D.Categorical(probs=torch.tensor([0.2, 0.5, 0.3]))
comp = D.Normal(torch.tensor([-1.0, 0.0, 2.0]), torch.tensor([0.5, 1.0, 0.3]))
gmm1 = D.MixtureSameFamily(mix, comp)
t = torch.linspace(-2, 3, 6)
print("cdf", [f"{v:.4f}" for v in gmm1.cdf(t).tolist()])
print("log_prob1", [f"{v:.4f}" for v in gmm1.log_prob(t).tolist()])
print("mean1", f"{gmm1.mean.item():.4f}", "var1", f"{gmm1.variance.item():.4f}", "std1", f"{gmm1.stddev.item():.4f}")
ex = gmm1.expand((2, 3))
print("expand", ex.batch_shape, ex.log_prob(torch.zeros(2, 3)).shape)
print("repr", repr(gmm1).splitlines()[0])
try:
    D.MixtureSameFamily(D.Categorical(probs=torch.ones(4) / 4), comp)
except ValueError as e:
    print("ValueError", str(e)[:70])
try:
    D.MixtureSameFamily(torch.ones(3), comp)
except ValueError as e:
    print("ValueError", str(e)[:70])
# the component's batch shape carries the mixture; a MultivariateNormal mixture
mvn = D.MultivariateNormal(torch.zeros(3, 2), scale_tril=torch.eye(2).expand(3, 2, 2) * torch.tensor([1.0, 2.0, 0.5])[:, None, None])
gm2 = D.MixtureSameFamily(D.Categorical(logits=torch.zeros(3)), mvn)
print("mvn mixture", [f"{v:.4f}" for v in gm2.log_prob(torch.tensor([[0.0, 0.0], [1.0, -1.0]])).tolist()],
      [f"{v:.4f}" for v in gm2.variance.tolist()])


# one training step under torch.compile against the same step eagerly
def train_step(xb, yb):
    optimizer.zero_grad(set_to_none=True)
    loss = model.loss(xb, yb)
    loss.backward()
    optimizer.step()
    return loss


xb, yb = x[:16], y[:16]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(xb, yb).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(xb, yb).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
