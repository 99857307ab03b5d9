# Modelled on labmlai/annotated_deep_learning_paper_implementations:
# labml_nn/uncertainty/evidence/__init__.py and experiment.py (Evidential Deep
# Learning: a classifier emitting non-negative evidence, the type-II maximum
# likelihood loss, the Bayes risk with cross entropy (digamma) and with squared
# error, the KL regularizer to the uniform Dirichlet (lgamma / digamma /
# new_tensor), annealed by min(1, epoch / annealing_steps), and the tracked
# statistics (argmax().eq(), masked_select of the uncertainty mass)).
# Written for this test (not copied): a small MLP on synthetic 4-class data in
# place of the MNIST CNN, 3 steps per loss, Adam; one training step compiled
# and checked against eager.
import copy

import numpy as np
import torch
from torch import nn


class MaximumLikelihoodLoss(nn.Module):
    def forward(self, evidence, target):
        alpha = evidence + 1.
        strength = alpha.sum(dim=-1)
        loss = (target * (strength.log()[:, None] - alpha.log())).sum(dim=-1)
        return loss.mean()


class CrossEntropyBayesRisk(nn.Module):
    def forward(self, evidence, target):
        alpha = evidence + 1.
        strength = alpha.sum(dim=-1)
        loss = (target * (torch.digamma(strength)[:, None] - torch.digamma(alpha))).sum(dim=-1)
        return loss.mean()


class SquaredErrorBayesRisk(nn.Module):
    def forward(self, evidence, target):
        alpha = evidence + 1.
        strength = alpha.sum(dim=-1)
        p = alpha / strength[:, None]
        err = (target - p) ** 2
        var = p * (1 - p) / (strength[:, None] + 1)
        return (err + var).sum(dim=-1).mean()


class KLDivergenceLoss(nn.Module):
    def forward(self, evidence, target):
        alpha = evidence + 1.
        n_classes = evidence.shape[-1]
        alpha_tilde = target + (1 - target) * alpha
        strength_tilde = alpha_tilde.sum(dim=-1)
        first = (torch.lgamma(alpha_tilde.sum(dim=-1))
                 - torch.lgamma(alpha_tilde.new_tensor(float(n_classes)))
                 - (torch.lgamma(alpha_tilde)).sum(dim=-1))
        second = ((alpha_tilde - 1) *
                  (torch.digamma(alpha_tilde) - torch.digamma(strength_tilde)[:, None])).sum(dim=-1)
        return (first + second).mean()


def statistics(evidence, target):
    n_classes = evidence.shape[-1]
    match = evidence.argmax(dim=-1).eq(target.argmax(dim=-1))
    alpha = evidence + 1.
    strength = alpha.sum(dim=-1)
    expected_probability, _ = (alpha / strength[:, None]).max(dim=-1)
    uncertainty_mass = n_classes / strength
    return (match.sum() / match.shape[0], uncertainty_mass.masked_select(match),
            uncertainty_mass.masked_select(~match), expected_probability.masked_select(~match))


class Model(nn.Module):
    def __init__(self, d_in, d_hidden, n_classes, dropout=0.0):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.act = nn.ReLU()
        self.dropout = nn.Dropout(dropout)
        self.fc2 = nn.Linear(d_hidden, n_classes)

    def forward(self, x):
        return self.fc2(self.dropout(self.act(self.fc1(x))))


rng = np.random.RandomState(0)
N, D, K = 16, 6, 4
x = torch.from_numpy(rng.randn(N, D).astype(np.float32))
labels = torch.from_numpy(rng.randint(0, K, size=N))
torch.manual_seed(0)
for loss_name, outcome_cls, act in [("max_likelihood", MaximumLikelihoodLoss, nn.ReLU()),
                                    ("cross_entropy", CrossEntropyBayesRisk, nn.Softplus()),
                                    ("squared_error", SquaredErrorBayesRisk, nn.Softplus())]:
    model = Model(D, 12, K)
    outcome_loss, kl_loss = outcome_cls(), KLDivergenceLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    eye = torch.eye(K).to(torch.float)
    target = eye[labels]
    for epoch in range(3):
        evidence = act(model(x))
        loss = outcome_loss(evidence, target)
        annealing_coef = min(1., epoch / 2)
        kl = kl_loss(evidence, target)
        total = loss + annealing_coef * kl
        optimizer.zero_grad()
        total.backward()
        optimizer.step()
        acc, u_succ, u_fail, p_fail = statistics(evidence.detach(), target)
        print(f"{loss_name} epoch {epoch} loss {loss.item():.6f} kl {kl.item():.6f} "
              f"acc {acc.item():.4f} u_succ {u_succ.sum().item():.5f} {tuple(u_succ.shape)} "
              f"u_fail {u_fail.mean().item() if len(u_fail) else 0.:.5f} p_fail {p_fail.sum().item():.5f}")

# lgamma / digamma values and gradients near their poles and large arguments
t = torch.tensor([0.25, 0.5, 1.0, 1.5, 3.0, 10.0, 150.5], dtype=torch.float64, requires_grad=True)
(torch.lgamma(t).sum() + torch.digamma(t).sum()).backward()
print("lgamma", torch.lgamma(t).tolist())
print("digamma", torch.digamma(t).tolist())
print("grad", t.grad.tolist())

# compiled: one training step with the KL-annealed cross-entropy Bayes risk
model = Model(D, 12, K)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
outcome_loss, kl_loss, act = CrossEntropyBayesRisk(), KLDivergenceLoss(), nn.Softplus()


def train_step(x, target, coef):
    evidence = act(model(x))
    total = outcome_loss(evidence, target) + coef * kl_loss(evidence, target)
    optimizer.zero_grad()
    total.backward()
    optimizer.step()
    return total


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
target = torch.eye(K)[labels]
loss_c = torch.compile(train_step)(x, target, 0.5)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(x, target, 0.5)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
