# ermongroup/sliced_score_matching the way its losses/sliced_sm.py and
# losses/score_matching.py write them: sliced score matching for an energy
# network (autograd.grad of the log density w.r.t. the duplicated samples
# with create_graph=True, then the gradient of the projected score: a
# double backward), its variance-reduced form, sliced score estimation for
# a score network, and exact score matching (one autograd.grad per input
# dimension, retain_graph=True), trained on a 2-D mixture with Adam; then
# Langevin dynamics sampling from the learned energy. Changes for a CPU
# test: small MLPs, data from numpy, and the projection vectors passed in
# from numpy (the losses draw them with torch.randn_like when none are
# given, as the repository does; one line compares that draw, seeded),
# a few steps; then one training step under torch.compile against the
# same step eagerly.
import copy

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
import torch.autograd as autograd
import torch.nn as nn
import torch.optim as optim


def sliced_score_matching(energy_net, samples, n_particles=1, vectors=None):
    dup_samples = samples.unsqueeze(0).expand(n_particles, *samples.shape).contiguous().view(-1, *samples.shape[1:])
    dup_samples.requires_grad_(True)
    if vectors is None:
        vectors = torch.randn_like(dup_samples)
    vectors = vectors / torch.norm(vectors, dim=-1, keepdim=True)

    logp = -energy_net(dup_samples).sum()
    grad1 = autograd.grad(logp, dup_samples, create_graph=True)[0]
    gradv = torch.sum(grad1 * vectors)
    loss1 = torch.sum(grad1 * vectors, dim=-1) ** 2 * 0.5
    grad2 = autograd.grad(gradv, dup_samples, create_graph=True)[0]
    loss2 = torch.sum(vectors * grad2, dim=-1)

    loss1 = loss1.view(n_particles, -1).mean(dim=0)
    loss2 = loss2.view(n_particles, -1).mean(dim=0)
    loss = loss1 + loss2
    return loss.mean(), loss1.mean(), loss2.mean()


def sliced_score_matching_vr(energy_net, samples, n_particles=1, vectors=None):
    dup_samples = samples.unsqueeze(0).expand(n_particles, *samples.shape).contiguous().view(-1, *samples.shape[1:])
    dup_samples.requires_grad_(True)
    if vectors is None:
        vectors = torch.randn_like(dup_samples)

    logp = -energy_net(dup_samples).sum()
    grad1 = autograd.grad(logp, dup_samples, create_graph=True)[0]
    loss1 = torch.sum(grad1 * grad1, dim=-1) / 2.
    gradv = torch.sum(grad1 * vectors)
    grad2 = autograd.grad(gradv, dup_samples, create_graph=True)[0]
    loss2 = torch.sum(vectors * grad2, dim=-1)

    loss1 = loss1.view(n_particles, -1).mean(dim=0)
    loss2 = loss2.view(n_particles, -1).mean(dim=0)

    loss = loss1 + loss2
    return loss.mean(), loss1.mean(), loss2.mean()


def sliced_score_estimation_vr(score_net, samples, n_particles=1, vectors=None):
    """
    Be careful if the shape of samples is not B x x_dim!!!!
    """
    dup_samples = samples.unsqueeze(0).expand(n_particles, *samples.shape).contiguous().view(-1, *samples.shape[1:])
    dup_samples.requires_grad_(True)
    if vectors is None:
        vectors = torch.randn_like(dup_samples)

    grad1 = score_net(dup_samples)
    gradv = torch.sum(grad1 * vectors)
    grad2 = autograd.grad(gradv, dup_samples, create_graph=True)[0]

    grad1 = grad1.view(dup_samples.shape[0], -1)
    loss1 = torch.sum(grad1 * grad1, dim=-1) / 2.

    loss2 = torch.sum((vectors * grad2).view(dup_samples.shape[0], -1), dim=-1)

    loss1 = loss1.view(n_particles, -1).mean(dim=0)
    loss2 = loss2.view(n_particles, -1).mean(dim=0)

    loss = loss1 + loss2
    return loss.mean(), loss1.mean(), loss2.mean()


def exact_score_matching(energy_net, samples, train=False):
    samples.requires_grad_(True)
    logp = -energy_net(samples).sum()
    grad1 = autograd.grad(logp, samples, create_graph=True)[0]
    loss1 = (torch.norm(grad1, dim=-1) ** 2) / 2.
    loss2 = torch.zeros(samples.shape[0], device=samples.device)

    iterator = range(samples.shape[1])

    for i in iterator:
        if train:
            grad = autograd.grad(grad1[:, i].sum(), samples, create_graph=True, retain_graph=True)[0][:, i]
        if not train:
            grad = autograd.grad(grad1[:, i].sum(), samples, create_graph=False, retain_graph=True)[0][:, i]
            grad = grad.detach()
        loss2 += grad

    loss = loss1 + loss2

    if not train:
        loss = loss.detach()

    return loss


class MLPEnergy(nn.Module):
    def __init__(self, dim=2, hidden=32):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(dim, hidden), nn.Softplus(),
            nn.Linear(hidden, hidden), nn.Softplus(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.main(x).squeeze(-1)


class MLPScore(nn.Module):
    def __init__(self, dim=2, hidden=32):
        super().__init__()
        self.main = nn.Sequential(
            nn.Linear(dim, hidden), nn.ELU(),
            nn.Linear(hidden, hidden), nn.ELU(),
            nn.Linear(hidden, dim),
        )

    def forward(self, x):
        return self.main(x)


def langevin_dynamics(energy_net, x, noises, step_lr=0.01):
    """x_{k+1} = x_k + step/2 grad log p(x_k) + sqrt(step) z_k."""
    samples = []
    for z in noises:
        x = x.detach()
        x.requires_grad_()
        grad = autograd.grad(-energy_net(x).sum(), x)[0]
        x = x + step_lr / 2 * grad + np.sqrt(step_lr) * z
        samples.append(x.detach())
    return samples


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.4):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


def t_(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float32))


r = np.random.default_rng(0)
centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
data = centers[r.integers(0, 3, 256)] + 0.3 * r.normal(size=(256, 2))

energy = MLPEnergy()
load_numpy(energy, r)
x = t_(data[:16])
v1 = t_(r.normal(size=(16, 2)))
v4 = t_(r.normal(size=(64, 2)))
print("ssm", [f"{l.item():.5f}" for l in sliced_score_matching(energy, x, vectors=v1)])
print("ssm 4 particles", [f"{l.item():.5f}" for l in sliced_score_matching(energy, x, n_particles=4, vectors=v4)])
print("ssm_vr", [f"{l.item():.5f}" for l in sliced_score_matching_vr(energy, x, n_particles=4, vectors=v4)])
esm = exact_score_matching(energy, x.clone(), train=False)
print("exact sm", tuple(esm.shape), fmt(esm, 4), f"{esm.mean().item():.5f}", esm.requires_grad)
# many projections: the variance-reduced estimate approaches the exact one
vm = t_(r.normal(size=(16 * 512, 2)))
print("ssm_vr 512 ~ exact", f"{sliced_score_matching_vr(energy, x, 512, vectors=vm)[0].item():.4f}",
      abs(sliced_score_matching_vr(energy, x, 512, vectors=vm)[0].item() - esm.mean().item()) < 0.25)
# the trace of the Hessian by autograd: the exact loss's second term
xs = x.clone().requires_grad_(True)
g1 = autograd.grad(-energy(xs).sum(), xs, create_graph=True)[0]
hess_tr = sum(autograd.grad(g1[:, i].sum(), xs, retain_graph=True)[0][:, i] for i in range(2))
print("hessian trace", fmt(hess_tr, 4), torch.allclose(esm, 0.5 * g1.norm(dim=-1) ** 2 + hess_tr, atol=1e-5))
print("ssm with torch's vectors", f"{sliced_score_matching(energy, x)[0].item():.4f}")
print("samples untouched", x.requires_grad, x.grad is None)

# train the energy with SSM-VR, a score network with SSE-VR
score = MLPScore()
load_numpy(score, r)
opt_e = optim.Adam(energy.parameters(), lr=1e-3)
opt_s = optim.Adam(score.parameters(), lr=1e-3)
for step in range(6):
    batch = t_(data[step * 32:(step + 1) * 32])
    vecs = t_(r.normal(size=(64, 2)))
    loss, loss1, loss2 = sliced_score_matching_vr(energy, batch, n_particles=2, vectors=vecs)
    opt_e.zero_grad()
    loss.backward()
    opt_e.step()
    sloss, _, _ = sliced_score_estimation_vr(score, batch, n_particles=2, vectors=vecs)
    opt_s.zero_grad()
    sloss.backward()
    opt_s.step()
    if step % 2 == 0:
        print(f"step {step} ssm_vr {loss.item():.5f} ({loss1.item():.5f} + {loss2.item():.5f}) sse_vr {sloss.item():.5f}")
print("grad of a weight", fmt(energy.main[0].weight.grad, 4))
# one exact score matching training step (create_graph through every dimension)
opt_e.zero_grad()
esm_loss = exact_score_matching(energy, t_(data[:32]), train=True).mean()
esm_loss.backward()
print("exact sm train", f"{esm_loss.item():.5f}", fmt(energy.main[2].bias.grad, 3))
opt_e.step()

# Langevin dynamics from the learned energy
x0 = t_(r.normal(size=(8, 2)) * 2)
noises = [t_(r.normal(size=(8, 2))) for _ in range(10)]
chain = langevin_dynamics(energy, x0, noises)
print("langevin", len(chain), fmt(chain[-1][0], 2), fmt(chain[4][7], 2), chain[-1].requires_grad,
      f"{energy(chain[-1]).mean().item():.4f}", f"{energy(x0).mean().item():.4f}")


# one training step under torch.compile against the same step eagerly
def train_step(batch, vecs):
    loss, loss1, loss2 = sliced_score_matching_vr(energy, batch, n_particles=2, vectors=vecs)
    opt_e.zero_grad(set_to_none=True)
    loss.backward()
    opt_e.step()
    return loss


bs, vs = t_(data[:24]), t_(r.normal(size=(48, 2)))
state, opt_state = copy.deepcopy(energy.state_dict()), copy.deepcopy(opt_e.state_dict())
eager = [train_step(bs, vs).item() for _ in range(2)]
after = {k: v.clone() for k, v in energy.state_dict().items()}
energy.load_state_dict(state)
opt_e.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(bs, vs).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(energy.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
