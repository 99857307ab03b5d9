# Molecular dynamics with autograd forces and a learned potential: a
# Lennard-Jones fluid in a periodic box integrated by velocity Verlet as in
# torchmd (https://github.com/torchmd/torchmd, torchmd/integrator.py:
# _first_VV / _second_VV, positions, velocities and forces updated in place
# with accel = force / mass, and torchmd/forces.py's minimum-image
# distances, pos[i] - pos[j] wrapped by box * torch.round(d / box)),
# forces taken as -torch.autograd.grad(E, pos) as in its neural-potential
# examples; then a pairwise neural potential (an MLP of the distance,
# smooth cutoff) fitted to the trajectory's energies and forces by force
# matching, the forces from autograd.grad(..., create_graph=True) inside
# the loss as in SchNetPack / NequIP training. Written for this test: 16
# atoms, 40 MD steps, 30 Adam steps; one compiled force-matching step
# against eager.
import copy

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
rng = np.random.RandomState(0)
n_atoms, box = 16, 4.2
g = np.stack(np.meshgrid(*[np.arange(2)] * 3, indexing="ij"), -1).reshape(-1, 3)
sites = np.concatenate([g, g + 0.5])[:n_atoms] * (box / 2)           # a bcc lattice
pos = torch.tensor(sites + rng.normal(0, 0.05, sites.shape), dtype=torch.float64)
vel = torch.tensor(rng.normal(0, 0.3, sites.shape), dtype=torch.float64)
vel -= vel.mean(0)                                                    # no net momentum
mass = torch.ones(n_atoms, 1, dtype=torch.float64)
i_idx, j_idx = torch.triu_indices(n_atoms, n_atoms, offset=1)


def pair_distances(pos):
    d = pos[i_idx] - pos[j_idx]
    d = d - box * torch.round(d / box)                                 # minimum image
    return d.norm(dim=1)


def lj_energy(pos, eps=1.0, sigma=1.0, cutoff=2.0):
    r = pair_distances(pos)
    sr6 = (sigma / r) ** 6
    e = 4 * eps * (sr6 ** 2 - sr6)
    e = torch.where(r < cutoff, e, torch.zeros_like(e))
    return e.sum()


def compute_forces(pos):
    pos = pos.detach().requires_grad_(True)
    E = lj_energy(pos)
    F = -torch.autograd.grad(E, pos)[0]
    return E.detach(), F


def _first_VV(pos, vel, force, mass, dt):
    accel = force / mass
    pos += vel * dt + 0.5 * accel * dt * dt
    vel += 0.5 * dt * accel


def _second_VV(vel, force, mass, dt):
    accel = force / mass
    vel += 0.5 * dt * accel


dt = 0.002
E, F = compute_forces(pos)
frames = []
for step in range(40):
    _first_VV(pos, vel, F, mass, dt)
    pos.remainder_(box)                                               # wrap into the box
    E, F = compute_forces(pos)
    _second_VV(vel, F, mass, dt)
    kin = 0.5 * (mass * vel ** 2).sum()
    frames.append((pos.clone(), E.clone(), F.clone()))
    if step % 10 == 0 or step == 39:
        print(f"md step {step}: Epot {E.item():.6f} Ekin {kin.item():.6f} Etot {(E + kin).item():.6f}")

P = torch.stack([f[0] for f in frames]).float()
Es = torch.stack([f[1] for f in frames]).float()
Fs = torch.stack([f[2] for f in frames]).float()


class PairPotential(nn.Module):
    def __init__(self, hidden=16, cutoff=2.0):
        super().__init__()
        self.cutoff = cutoff
        self.net = nn.Sequential(nn.Linear(1, hidden), nn.Softplus(), nn.Linear(hidden, hidden),
                                 nn.Softplus(), nn.Linear(hidden, 1))

    def forward(self, pos):                                            # (frames, atoms, 3)
        d = pos[:, i_idx] - pos[:, j_idx]
        d = d - box * torch.round(d / box)
        r = d.norm(dim=-1, keepdim=True)
        fc = 0.5 * (torch.cos(np.pi * r / self.cutoff) + 1) * (r < self.cutoff)
        return (self.net(1.0 / r) * fc).sum(dim=(1, 2))


model = PairPotential()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
rho_f = 0.9


def train_step(pos, e_ref, f_ref):
    optimizer.zero_grad()
    pos = pos.requires_grad_(True)
    e_pred = model(pos)
    f_pred = -torch.autograd.grad(e_pred.sum(), pos, create_graph=True)[0]
    loss_e = ((e_pred - e_ref) ** 2).mean()
    loss_f = ((f_pred - f_ref) ** 2).mean()
    loss = (1 - rho_f) * loss_e + rho_f * loss_f
    loss.backward()
    optimizer.step()
    return loss, loss_e, loss_f


e_mean = Es.mean()
for step in range(30):
    loss, le, lf = train_step(P.clone(), Es - e_mean, Fs)
    if step % 10 == 0 or step == 29:
        print(f"fit step {step}: loss {loss.item():.6f} energy {le.item():.6f} forces {lf.item():.6f}")

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c, _, _ = torch.compile(train_step)(P.clone(), Es - e_mean, Fs)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e, _, _ = train_step(P.clone(), Es - e_mean, Fs)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
