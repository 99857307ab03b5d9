# Poincare embeddings (Nickel & Kiela 2017) of a hierarchy's transitive
# closure, in the shape of facebookresearch/poincare-embeddings
# (hype/manifolds/poincare.py PoincareManifold and its Distance
# autograd.Function with a hand-written backward (ctx.save_for_backward,
# the arcosh distance and its gradient through alpha / beta / gamma),
# normalize by renorm_(2, 0, maxnorm), rgrad scaling the Euclidean gradient
# by (1 - |p|^2)^2 / 4, expm as p.add_(d_p, alpha=-lr) then normalize;
# hype/rsgd.py RiemannianSGD (an optim.Optimizer with per-group rgrad /
# expm); hype/energy_function.py EnergyFunction (an nn.Embedding lookup of
# (u, v, negatives), distances of inputs[:, 1:] to inputs[:, 0:1]) and its
# loss F.cross_entropy(-dists, zeros); burn-in at lr / 10; mean rank
# and MAP-style evaluation of each node's ancestors).
# Written for this test: a 3-level tree (1 root, 3 children, 3
# grandchildren each: 13 nodes) in float64 as the repository sets it,
# its closure (24 edges), 10 negatives per edge sampled from
# non-neighbours (numpy), dim 2, 150 epochs; one compiled training step
# against eager.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function
from torch.optim.optimizer import Optimizer, required

rng = np.random.RandomState(0)
torch.manual_seed(0)
torch.set_default_dtype(torch.float64)   # (embed.py: th.set_default_tensor_type('torch.DoubleTensor'))


class Distance(Function):
    @staticmethod
    def grad(x, v, sqnormx, sqnormv, sqdist, eps):
        alpha = (1 - sqnormx)
        beta = (1 - sqnormv)
        z = 1 + 2 * sqdist / (alpha * beta)
        a = ((sqnormv - 2 * torch.sum(x * v, dim=-1) + 1) / torch.pow(alpha, 2)).unsqueeze(-1).expand_as(x)
        a = a * x - v / alpha.unsqueeze(-1).expand_as(v)
        z = torch.sqrt(torch.pow(z, 2) - 1)
        z = torch.clamp(z * beta, min=eps).unsqueeze(-1)
        return 4 * a / z.expand_as(x)

    @staticmethod
    def forward(ctx, u, v, eps):
        squnorm = torch.clamp(torch.sum(u * u, dim=-1), 0, 1 - eps)
        sqvnorm = torch.clamp(torch.sum(v * v, dim=-1), 0, 1 - eps)
        sqdist = torch.sum(torch.pow(u - v, 2), dim=-1)
        ctx.eps = eps
        ctx.save_for_backward(u, v, squnorm, sqvnorm, sqdist)
        x = sqdist / ((1 - squnorm) * (1 - sqvnorm)) * 2 + 1
        # arcosh
        z = torch.sqrt(torch.pow(x, 2) - 1)
        return torch.log(x + z)

    @staticmethod
    def backward(ctx, g):
        u, v, squnorm, sqvnorm, sqdist = ctx.saved_tensors
        g = g.unsqueeze(-1)
        gu = Distance.grad(u, v, squnorm, sqvnorm, sqdist, ctx.eps)
        gv = Distance.grad(v, u, sqvnorm, squnorm, sqdist, ctx.eps)
        return g.expand_as(gu) * gu, g.expand_as(gv) * gv, None


class PoincareManifold:
    def __init__(self, eps=1e-5, K=None, **kwargs):
        self.eps = eps
        self.boundary = 1 - eps
        self.max_norm = self.boundary

    def normalize(self, u):
        d = u.size(-1)
        if self.max_norm:
            u.view(-1, d).renorm_(2, 0, self.max_norm)
        return u

    def distance(self, u, v):
        return Distance.apply(u, v, self.eps)

    def init_weights(self, w, irange=1e-5):
        w.data.uniform_(-irange, irange)

    def rgrad(self, p, d_p):
        p_sqnorm = torch.sum(p.data ** 2, dim=-1, keepdim=True)
        d_p = d_p * ((1 - p_sqnorm) ** 2 / 4).expand_as(d_p)
        return d_p

    def expm(self, p, d_p, lr=None, out=None, normalize=False):
        if out is None:
            out = p
        if lr is not None:
            d_p.mul_(-lr)
        out.add_(d_p)
        if normalize:
            self.normalize(out)
        return out


class RiemannianSGD(Optimizer):
    def __init__(self, params, lr=required, rgrad=required, expm=required):
        defaults = {'lr': lr, 'rgrad': rgrad, 'expm': expm}
        super(RiemannianSGD, self).__init__(params, defaults)

    def step(self, lr=None, counts=None, **kwargs):
        loss = None
        for group in self.param_groups:
            for p in group['params']:
                lr = lr or group['lr']
                rgrad = group['rgrad']
                expm = group['expm']
                if p.grad is None:
                    continue
                d_p = p.grad.data
                d_p = rgrad(p.data, d_p)
                expm(p.data, d_p, lr=lr, normalize=True)
        return loss


class EnergyFunction(nn.Module):
    def __init__(self, manifold, dim, size):
        super().__init__()
        self.manifold = manifold
        self.lt = nn.Embedding(size, dim)
        self.nobjects = size
        self.manifold.init_weights(self.lt.weight)

    def forward(self, inputs):
        e = self.lt(inputs)
        with torch.no_grad():
            e = self.manifold.normalize(e)
        o = e.narrow(1, 1, e.size(1) - 1)
        s = e.narrow(1, 0, 1).expand_as(o)
        return self.energy(s, o).squeeze(-1)


class DistanceEnergyFunction(EnergyFunction):
    def energy(self, s, o):
        return self.manifold.distance(s, o)

    def loss(self, inp, target, **kwargs):
        return F.cross_entropy(inp.neg(), target)


# the tree and its transitive closure (child, ancestor)
parent = {1: 0, 2: 0, 3: 0}
for c in range(3):
    for k in range(3):
        parent[4 + 3 * c + k] = 1 + c
N_NODES = 13
closure = []
for n in range(1, N_NODES):
    a = n
    while a in parent:
        a = parent[a]
        closure.append((n, a))
closure = np.array(closure)
adj = {n: set() for n in range(N_NODES)}
for u, v in closure:
    adj[u].add(v), adj[v].add(u)
NNEGS = 10


def make_batch(idx):
    rows = []
    for u, v in closure[idx]:
        negs = [x for x in rng.permutation(N_NODES) if x not in adj[u] and x != u][:NNEGS]
        while len(negs) < NNEGS:
            negs.append(negs[len(negs) % max(1, len(negs))])
        rows.append([u, v] + negs)
    return torch.tensor(rows, dtype=torch.long)


manifold = PoincareManifold()
model = DistanceEnergyFunction(manifold, 2, N_NODES)
optimizer = RiemannianSGD(model.parameters(), lr=0.3, rgrad=manifold.rgrad, expm=manifold.expm)


def train_step(inputs, targets, lr):
    optimizer.zero_grad()
    preds = model(inputs)
    loss = model.loss(preds, targets, size_average=True)
    loss.backward()
    optimizer.step(lr=lr)
    return loss


BURNIN, EPOCHS, BS = 20, 150, 8
for epoch in range(EPOCHS):
    lr = 0.3 / 10 if epoch < BURNIN else 0.3
    perm = rng.permutation(len(closure))
    epoch_loss = []
    for b in range(0, len(closure), BS):
        inputs = make_batch(perm[b:b + BS])
        targets = torch.zeros(inputs.size(0), dtype=torch.long)
        epoch_loss.append(train_step(inputs, targets, lr).item())
    if epoch % 30 == 29 or epoch == 0:
        print(f"json_stats: epoch {epoch}, loss {np.mean(epoch_loss):.5f}, lr {lr}")

with torch.no_grad():
    emb = manifold.normalize(model.lt.weight.data.clone())
    norms = emb.norm(dim=1)
    dist = manifold.distance(emb.unsqueeze(1).expand(N_NODES, N_NODES, 2),
                             emb.unsqueeze(0).expand(N_NODES, N_NODES, 2))
ranks, aps = [], []
for u in range(N_NODES):
    d = dist[u].clone()
    d[u] = float('inf')
    order = torch.argsort(d).tolist()
    for v in adj[u]:
        better = [x for x in order[:order.index(v)] if x not in adj[u]]
        ranks.append(len(better) + 1)
print("mean rank", round(float(np.mean(ranks)), 4))
print("norm root", round(norms[0].item(), 4), "level-1", round(norms[1:4].mean().item(), 4),
      "level-2", round(norms[4:].mean().item(), 4))

# the custom backward against autograd through the same formula
u = (torch.rand(5, 2) * 0.6 - 0.3).requires_grad_()
v = (torch.rand(5, 2) * 0.6 - 0.3).requires_grad_()
Distance.apply(u, v, 1e-5).sum().backward()
gu = u.grad.clone()
u.grad = None
x = 1 + 2 * ((u - v) ** 2).sum(-1) / ((1 - (u * u).sum(-1)) * (1 - (v * v).sum(-1)))
torch.acosh(x).sum().backward()
print("custom backward == autograd", torch.allclose(gu, u.grad, atol=1e-5))

inputs = make_batch(np.arange(BS))
targets = torch.zeros(BS, dtype=torch.long)
state = copy.deepcopy(model.state_dict())
loss_c = torch.compile(train_step)(inputs, targets, 0.3)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
loss_e = train_step(inputs, targets, 0.3)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      torch.allclose(after_c["lt.weight"], model.lt.weight, atol=1e-6))
