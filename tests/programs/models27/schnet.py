# SchNet's continuous-filter convolution the way schnetpack (nn/radial.py,
# nn/cutoff.py, nn/activations.py, nn/base.py, nn/scatter.py,
# representation/schnet.py, atomistic/response.py) and its plain-torch
# ports write it: GaussianRBF with `offsets` / `widths` buffers from
# torch.linspace and torch.exp(coeff * torch.pow(diff, 2)), CosineCutoff
# (0.5 * (torch.cos(d * math.pi / cutoff) + 1.0) * (d < cutoff).float(),
# the cutoff a registered FloatTensor buffer), shifted_softplus
# (F.softplus(x) - math.log(2.0)), Dense (an nn.Linear with
# xavier_uniform_ / zeros_ reset_parameters and an activation function),
# SchNetInteraction (in2f, the filter network, the cutoff-weighted filter,
# x[idx_j] * Wij aggregated by zeros(...).index_add or
# torch.zeros_like(x).scatter_add_), the SchNet representation (nn.Embedding
# with padding_idx=0, shared or separate interaction blocks, residual
# updates), the atomwise readout summed per molecule by index_add, forces
# as -torch.autograd.grad(E, R, grad_outputs=torch.ones_like(E),
# create_graph=True)[0], and the force-matching loss trained by Adam
# (double backward through the distances, cos and softplus). The neighbor
# list comes from pairwise torch.cdist and torch.nonzero within a cutoff;
# a dense variant takes the distances from torch.cdist itself
# (compute_mode='use_mm_for_euclid_dist', which is twice differentiable).
# Changes for a CPU test: three small molecules with positions from numpy
# and Lennard-Jones reference energies / forces instead of QM9 / MD17,
# small widths, a few steps; then one training step under torch.compile
# against the same step eagerly.
import copy
import math
from typing import Callable, Dict, List, Optional, Union

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.init import xavier_uniform_, zeros_


# nn/activations.py
def shifted_softplus(x: torch.Tensor):
    r"""Compute shifted soft-plus activation function.

    .. math::
       y = \ln\left(1 + e^{-x}\right) - \ln(2)
    """
    return F.softplus(x) - math.log(2.0)


# nn/radial.py
def gaussian_rbf(inputs: torch.Tensor, offsets: torch.Tensor, widths: torch.Tensor):
    coeff = -0.5 / torch.pow(widths, 2)
    diff = inputs[..., None] - offsets
    y = torch.exp(coeff * torch.pow(diff, 2))
    return y


class GaussianRBF(nn.Module):
    r"""Gaussian radial basis functions."""

    def __init__(self, n_rbf: int, cutoff: float, start: float = 0.0, trainable: bool = False):
        super(GaussianRBF, self).__init__()
        self.n_rbf = n_rbf

        # compute offset and width of Gaussian functions
        offset = torch.linspace(start, cutoff, n_rbf)
        widths = torch.FloatTensor(torch.abs(offset[1] - offset[0]) * torch.ones_like(offset))
        if trainable:
            self.widths = nn.Parameter(widths)
            self.offsets = nn.Parameter(offset)
        else:
            self.register_buffer("widths", widths)
            self.register_buffer("offsets", offset)

    def forward(self, inputs: torch.Tensor):
        return gaussian_rbf(inputs, self.offsets, self.widths)


# nn/cutoff.py
def cosine_cutoff(input: torch.Tensor, cutoff: torch.Tensor):
    # Compute values of cutoff function
    input_cut = 0.5 * (torch.cos(input * math.pi / cutoff) + 1.0)
    # Remove contributions beyond the cutoff radius
    input_cut *= (input < cutoff).float()
    return input_cut


class CosineCutoff(nn.Module):
    def __init__(self, cutoff: float):
        super(CosineCutoff, self).__init__()
        self.register_buffer("cutoff", torch.FloatTensor([cutoff]))

    def forward(self, input: torch.Tensor):
        return cosine_cutoff(input, self.cutoff)


# nn/base.py
class Dense(nn.Linear):
    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 activation: Union[Callable, nn.Module] = None,
                 weight_init: Callable = xavier_uniform_, bias_init: Callable = zeros_):
        self.weight_init = weight_init
        self.bias_init = bias_init
        super(Dense, self).__init__(in_features, out_features, bias)

        self.activation = activation
        if self.activation is None:
            self.activation = nn.Identity()

    def reset_parameters(self):
        self.weight_init(self.weight)
        if self.bias is not None:
            self.bias_init(self.bias)

    def forward(self, input: torch.Tensor):
        y = F.linear(input, self.weight, self.bias)
        y = self.activation(y)
        return y


# nn/scatter.py
def scatter_add(x: torch.Tensor, idx_i: torch.Tensor, dim_size: int, dim: int = 0) -> torch.Tensor:
    shape = list(x.shape)
    shape[dim] = dim_size
    tmp = torch.zeros(shape, dtype=x.dtype, device=x.device)
    y = tmp.index_add(dim, idx_i, x)
    return y


# representation/schnet.py
class SchNetInteraction(nn.Module):
    r"""SchNet interaction block for modeling interactions of atomistic systems."""

    def __init__(self, n_atom_basis: int, n_rbf: int, n_filters: int,
                 activation: Callable = shifted_softplus, aggregation: str = "index_add"):
        super(SchNetInteraction, self).__init__()
        self.in2f = Dense(n_atom_basis, n_filters, bias=False, activation=None)
        self.f2out = nn.Sequential(
            Dense(n_filters, n_atom_basis, activation=activation),
            Dense(n_atom_basis, n_atom_basis, activation=None),
        )
        self.filter_network = nn.Sequential(
            Dense(n_rbf, n_filters, activation=activation), Dense(n_filters, n_filters)
        )
        self.aggregation = aggregation

    def forward(self, x: torch.Tensor, f_ij: torch.Tensor, idx_i: torch.Tensor,
                idx_j: torch.Tensor, rcut_ij: torch.Tensor):
        x = self.in2f(x)
        Wij = self.filter_network(f_ij)
        Wij = Wij * rcut_ij[:, None]

        # continuous-filter convolution
        x_j = x[idx_j]
        x_ij = x_j * Wij
        if self.aggregation == "index_add":
            x = scatter_add(x_ij, idx_i, dim_size=x.shape[0])
        else:   # the ports' scatter_add_ form
            x = torch.zeros_like(x).scatter_add_(0, idx_i.unsqueeze(-1).expand_as(x_ij), x_ij)

        x = self.f2out(x)
        return x


class SchNet(nn.Module):
    def __init__(self, n_atom_basis: int, n_interactions: int, radial_basis: nn.Module,
                 cutoff_fn: Optional[Callable] = None, n_filters: int = None,
                 shared_interactions: bool = False, max_z: int = 10,
                 activation: Union[Callable, nn.Module] = shifted_softplus,
                 aggregation: str = "index_add"):
        super().__init__()
        self.n_atom_basis = n_atom_basis
        self.size = (self.n_atom_basis,)
        self.n_filters = n_filters or self.n_atom_basis
        self.radial_basis = radial_basis
        self.cutoff_fn = cutoff_fn
        self.cutoff = cutoff_fn.cutoff

        # layers
        self.embedding = nn.Embedding(max_z, self.n_atom_basis, padding_idx=0)

        if shared_interactions:
            block = SchNetInteraction(n_atom_basis=self.n_atom_basis, n_rbf=self.radial_basis.n_rbf,
                                      n_filters=self.n_filters, activation=activation,
                                      aggregation=aggregation)
            self.interactions = nn.ModuleList([block] * n_interactions)
        else:
            self.interactions = nn.ModuleList(
                SchNetInteraction(n_atom_basis=self.n_atom_basis, n_rbf=self.radial_basis.n_rbf,
                                  n_filters=self.n_filters, activation=activation,
                                  aggregation=aggregation)
                for _ in range(n_interactions))

    def forward(self, inputs: Dict[str, torch.Tensor]):
        atomic_numbers = inputs["_atomic_numbers"]
        r_ij = inputs.get("_Rij")
        idx_i = inputs["_idx_i"]
        idx_j = inputs["_idx_j"]

        # compute atom and pair features
        x = self.embedding(atomic_numbers)
        d_ij = inputs["_dij"] if "_dij" in inputs else torch.norm(r_ij, dim=1)
        f_ij = self.radial_basis(d_ij)
        rcut_ij = self.cutoff_fn(d_ij)

        # compute interaction block to update atomic embeddings
        for interaction in self.interactions:
            v = interaction(x, f_ij, idx_i, idx_j, rcut_ij)
            x = x + v

        inputs["scalar_representation"] = x
        return inputs


# atomistic/atomwise.py + response.py
class Atomwise(nn.Module):
    def __init__(self, n_in: int, n_out: int = 1, n_hidden: int = 8, output_key: str = "y"):
        super(Atomwise, self).__init__()
        self.output_key = output_key
        self.outnet = nn.Sequential(Dense(n_in, n_hidden, activation=shifted_softplus),
                                    Dense(n_hidden, n_out, activation=None))

    def forward(self, inputs: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        y = self.outnet(inputs["scalar_representation"])
        idx_m = inputs["_idx_m"]
        maxm = int(idx_m[-1]) + 1
        y = scatter_add(y, idx_m, dim_size=maxm)
        y = torch.squeeze(y, -1)
        inputs[self.output_key] = y
        return inputs


class Forces(nn.Module):
    def __init__(self, energy_key: str = "energy", force_key: str = "forces"):
        super(Forces, self).__init__()
        self.energy_key = energy_key
        self.force_key = force_key

    def forward(self, inputs: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        Epred = inputs[self.energy_key]
        go: List[Optional[torch.Tensor]] = [torch.ones_like(Epred)]
        dEdR = torch.autograd.grad([Epred], [inputs["_positions"]], grad_outputs=go,
                                   create_graph=self.training)[0]
        inputs[self.force_key] = -dEdR
        return inputs


class NeuralNetworkPotential(nn.Module):
    def __init__(self, representation, output_modules, dense_distances=False):
        super().__init__()
        self.representation = representation
        self.output_modules = nn.ModuleList(output_modules)
        self.dense_distances = dense_distances

    def forward(self, inputs: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        inputs["_positions"].requires_grad_()
        R = inputs["_positions"]
        idx_i, idx_j = inputs["_idx_i"], inputs["_idx_j"]
        if self.dense_distances:
            D = torch.cdist(R, R, compute_mode='use_mm_for_euclid_dist')
            inputs["_dij"] = D[idx_i, idx_j]
        else:
            inputs["_Rij"] = R[idx_j] - R[idx_i]
        inputs = self.representation(inputs)
        for m in self.output_modules:
            inputs = m(inputs)
        return inputs


def neighbor_list(R, idx_m, cutoff):
    """All pairs i != j of one molecule within the cutoff, from cdist and nonzero."""
    D = torch.cdist(R, R)
    same = idx_m[:, None] == idx_m[None, :]
    mask = (D < cutoff) & same & ~torch.eye(R.shape[0], dtype=torch.bool)
    idx_i, idx_j = torch.nonzero(mask, as_tuple=True)
    return idx_i, idx_j


def lennard_jones(pos, eps=0.3, sigma=1.0):
    d = pos[:, None, :] - pos[None, :, :]
    r = np.sqrt((d ** 2).sum(-1)) + np.eye(len(pos))
    inv6 = (sigma / r) ** 6
    e = 4 * eps * (inv6 ** 2 - inv6)
    np.fill_diagonal(e, 0.0)
    dE_dr = 4 * eps * (-12 * inv6 ** 2 + 6 * inv6) / r
    np.fill_diagonal(dE_dr, 0.0)
    f = -(dE_dr[:, :, None] * d / r[:, :, None]).sum(1)
    return 0.5 * e.sum(), f


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)
cutoff = 2.5

# the basis, the cutoff and the activation on their own
rbf = GaussianRBF(n_rbf=6, cutoff=cutoff)
cut = CosineCutoff(cutoff)
d = torch.tensor([0.0, 0.4, 1.1, 2.49, 2.5, 3.0])
print("rbf buffers", [n for n, _ in rbf.named_buffers()], fmt(rbf.offsets, 6), fmt(rbf.widths, 2),
      "params", len(list(rbf.parameters())), len(list(GaussianRBF(6, cutoff, trainable=True).parameters())))
print("rbf", fmt(rbf(d)[2], 6), tuple(rbf(d).shape))
print("cutoff", fmt(cut(d), 6), cut.cutoff.dtype, tuple(cut.cutoff.shape))
print("ssp", fmt(shifted_softplus(torch.tensor([-30.0, -1.0, 0.0, 1.0, 25.0])), 5))

# three molecules, positions from numpy, Lennard-Jones labels
sizes = [4, 5, 3]
Z = torch.from_numpy(r.choice([1, 6, 8], size=sum(sizes)).astype(np.int64))
pos, energies, forces = [], [], []
for n in sizes:
    p = r.normal(0, 0.08, (n, 3))
    p += np.arange(n)[:, None] * np.array([1.1, 0.0, 0.0]) + np.sin(np.arange(n))[:, None] * np.array([0.0, 0.9, 0.0])
    e, f = lennard_jones(p)
    pos.append(p)
    energies.append(e)
    forces.append(f)
R = torch.from_numpy(np.concatenate(pos).astype(np.float32))
E_ref = torch.tensor(energies, dtype=torch.float32)
F_ref = torch.from_numpy(np.concatenate(forces).astype(np.float32))
idx_m = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
idx_i, idx_j = neighbor_list(R, idx_m, cutoff)
print("neighbors", idx_i.shape[0], idx_i[:8].tolist(), idx_j[:8].tolist(), idx_m.tolist(), Z.tolist())
print("labels", fmt(E_ref, 3), fmt(F_ref, 6))


def make_inputs():
    return {"_atomic_numbers": Z, "_positions": R.clone(), "_idx_i": idx_i, "_idx_j": idx_j,
            "_idx_m": idx_m}


def make_model(aggregation="index_add", shared=False, dense=False):
    torch.manual_seed(0)
    rep = SchNet(n_atom_basis=16, n_interactions=2, radial_basis=GaussianRBF(n_rbf=10, cutoff=cutoff),
                 cutoff_fn=CosineCutoff(cutoff), shared_interactions=shared, aggregation=aggregation)
    net = NeuralNetworkPotential(rep, [Atomwise(16, output_key="energy"), Forces()], dense_distances=dense)
    load_numpy(net, np.random.default_rng(1), std=0.25)
    return net


model = make_model()
print("params", sum(p.numel() for p in model.parameters()), [n for n, _ in model.named_parameters()][:6])
print("buffers", [n for n, _ in model.named_buffers()])
print("embedding pad row", model.representation.embedding.padding_idx,
      "xavier bound", bool(Dense(16, 8).weight.abs().max() <= math.sqrt(6 / 24)),
      Dense(16, 8).bias.abs().sum().item())
out = model(make_inputs())
print("energy", fmt(out["energy"], 3), "forces", fmt(out["forces"], 6), out["forces"].requires_grad)
print("representation", tuple(out["scalar_representation"].shape), fmt(out["scalar_representation"][5], 4))

# the scatter_add_ aggregation, the dense cdist distances and shared blocks
for kw in (dict(aggregation="scatter_add_"), dict(dense=True)):
    alt = make_model(**kw)(make_inputs())
    print(kw, torch.allclose(alt["energy"], out["energy"], atol=1e-5),
          torch.allclose(alt["forces"], out["forces"], atol=1e-5))
shared = make_model(shared=True)
print("shared", len(shared.representation.interactions), sum(p.numel() for p in shared.parameters()),
      shared.representation.interactions[0] is shared.representation.interactions[1],
      fmt(shared(make_inputs())["energy"], 3))

# forces against finite differences of the energy
eps = 1e-2
Rp, Rm = R.clone(), R.clone()
Rp[2, 1] += eps
Rm[2, 1] -= eps
model.eval()
ep = model({**make_inputs(), "_positions": Rp})["energy"].sum()
em = model({**make_inputs(), "_positions": Rm})["energy"].sum()
fe = model(make_inputs())["forces"]
print("eval forces detached", fe.requires_grad, "fd", f"{-(ep - em).item() / (2 * eps):.3f}", f"{fe[2, 1].item():.3f}")
model.train()

# force matching with Adam (schnetpack's ModelOutput losses: rho-weighted MSE)
rho = 0.1
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
losses = []
for step in range(6):
    optimizer.zero_grad()
    results = model(make_inputs())
    loss_e = F.mse_loss(results["energy"], E_ref)
    loss_f = F.mse_loss(results["forces"], F_ref)
    loss = rho * loss_e + (1 - rho) * loss_f
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
print("losses", [f"{v:.5f}" for v in losses])
print("grads", fmt(model.representation.embedding.weight.grad[6], 4), model.representation.embedding.weight.grad[0].abs().sum().item(),
      fmt(model.representation.interactions[1].filter_network[0].weight.grad, 4))

# dense (cdist) distances train the same
dense = make_model(dense=True)
opt2 = torch.optim.Adam(dense.parameters(), lr=5e-3)
for step in range(2):
    opt2.zero_grad()
    res = dense(make_inputs())
    l2 = rho * F.mse_loss(res["energy"], E_ref) + (1 - rho) * F.mse_loss(res["forces"], F_ref)
    l2.backward()
    opt2.step()
    print("dense step", step, f"{l2.item():.5f}")


# one training step under torch.compile against the same step eagerly
def train_step(Rb):
    optimizer.zero_grad()
    results = model({"_atomic_numbers": Z, "_positions": Rb.clone(), "_idx_i": idx_i, "_idx_j": idx_j,
                     "_idx_m": idx_m})
    loss = rho * F.mse_loss(results["energy"], E_ref) + (1 - rho) * F.mse_loss(results["forces"], F_ref)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(R).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(R).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
