# Heteroscedastic regression with Monte Carlo dropout (Gal & Ghahramani
# 2016, "Dropout as a Bayesian approximation"; Kendall & Gal 2017, "What
# uncertainties do we need"), in the shape of the public PyTorch MC-dropout
# regression notebooks (e.g. https://github.com/yaringal/
# DropoutUncertaintyExps ported to torch): an MLP with nn.Dropout after each
# hidden layer and two heads, the mean and the log-variance, trained with
# nn.GaussianNLLLoss (full=True, var = exp(log_var)) and Adam with weight
# decay; prediction by T stochastic passes with the model left in train()
# mode (dropout on), the predictive mean, the epistemic variance (the
# passes' variance), the aleatoric variance (the mean of exp(log_var)),
# their sum, the Gaussian test log-likelihood via torch.logsumexp over
# passes, and an enable_dropout helper switching only the Dropout modules
# back to train() after model.eval(). Written for this test: 64 points of
# a 1-D function with input-dependent noise (numpy), 60 steps, T = 20;
# one compiled training step (dropout p set to 0) against eager.
import copy
import math

import numpy as np
import torch
import torch.nn as nn


class MCDropoutNet(nn.Module):
    def __init__(self, hidden=32, p=0.1):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Dropout(p),
                                  nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(p))
        self.mean = nn.Linear(hidden, 1)
        self.log_var = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.body(x)
        return self.mean(h), self.log_var(h)


def enable_dropout(model):
    """ Function to enable the dropout layers during test-time """
    for m in model.modules():
        if m.__class__.__name__.startswith('Dropout'):
            m.train()


rng = np.random.RandomState(0)
x_np = np.sort(rng.uniform(-3, 3, 64)).astype(np.float32)
noise = 0.1 + 0.2 * np.abs(x_np)
y_np = (np.sin(x_np) + rng.normal(0, 1, 64) * noise).astype(np.float32)
x, y = torch.from_numpy(x_np)[:, None], torch.from_numpy(y_np)[:, None]

torch.manual_seed(0)
model = MCDropoutNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
criterion = nn.GaussianNLLLoss(full=True)


def train_step(x, y):
    optimizer.zero_grad()
    mu, log_var = model(x)
    loss = criterion(mu, y, log_var.exp())
    loss.backward()
    optimizer.step()
    return loss


model.train()
for step in range(60):
    loss = train_step(x, y)
    if step % 15 == 0 or step == 59:
        print(f"step {step}: gaussian nll {loss.item():.6f}")

x_test = torch.linspace(-3, 3, 7)[:, None]
y_test = torch.sin(x_test)
model.eval()
enable_dropout(model)
print("dropout modes", [m.training for m in model.modules() if isinstance(m, nn.Dropout)],
      "model", model.training)
T = 20
with torch.no_grad():
    mus, variances = zip(*[(mu, lv.exp()) for mu, lv in (model(x_test) for _ in range(T))])
    mus, variances = torch.stack(mus), torch.stack(variances)            # (T, N, 1)
pred_mean = mus.mean(0)
epistemic = mus.var(0, unbiased=False)
aleatoric = variances.mean(0)
total = epistemic + aleatoric
ll = (torch.logsumexp(-0.5 * (y_test - mus) ** 2 / variances - 0.5 * torch.log(2 * math.pi * variances), 0)
      - math.log(T))
print("predictive mean", [round(v, 4) for v in pred_mean[:, 0].tolist()])
print("epistemic", [round(v, 5) for v in epistemic[:, 0].tolist()])
print("aleatoric", [round(v, 5) for v in aleatoric[:, 0].tolist()])
print("total std", [round(v, 4) for v in total.sqrt()[:, 0].tolist()])
print("test log-likelihood", round(ll.mean().item(), 5))

model.train()
for m in model.modules():
    if isinstance(m, nn.Dropout):
        m.p = 0.0
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(x, y)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(x, y)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
