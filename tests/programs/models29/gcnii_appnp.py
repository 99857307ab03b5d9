# GCNII and APPNP on a small graph in plain torch, the way chennnnnyize/GCNII
# (model.py, train.py, utils.py) and the plain-torch APPNP ports
# (klicperajo/ppnp's pytorch/propagation.py and ppnp.py) write them, with a
# GraphSAGE-style max aggregator as plain-torch GNN code writes it without
# torch_geometric / torch_scatter: the symmetric normalized adjacency with
# self loops (degree = torch.bincount(row), deg.pow(-0.5),
# deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float('inf'), 0), values
# deg_inv_sqrt[row] * deg_inv_sqrt[col], torch.sparse_coo_tensor(...)
# .coalesce()), GCNII's GraphConvolution (a torch.FloatTensor Parameter
# reset by weight.data.uniform_(-stdv, stdv), theta = math.log(lamda / l + 1),
# hi = torch.spmm(adj, input), support = (1 - alpha) * hi + alpha * h0, the
# variant's torch.cat([hi, h0], 1), theta * torch.mm(support, weight) +
# (1 - theta) * r), the GCNII model (F.dropout(x, self.dropout,
# training=self.training), params1 / params2 lists for Adam's per-group
# weight decay, F.log_softmax + F.nll_loss, accuracy by
# output.max(1)[1].type_as(labels).eq(labels).double()), APPNP's
# PPRPowerIteration (a sparse `A_hat` buffer scaled by (1 - alpha),
# preds = A_hat @ preds + alpha * local_preds for niter steps, preds[idx])
# with the L2 term over the first layer's parameters added to the loss, the
# max aggregation by out.scatter_reduce_(0, index, src, reduce='amax',
# include_self=False) over x.index_select(0, col) (ties share the gradient),
# and train.py's loop: train / validate under torch.no_grad, early stopping
# with patience on the validation loss, best_state =
# copy.deepcopy(model.state_dict()) and model.load_state_dict(best_state) for
# the test. Changes for a CPU test: a synthetic three-community graph with
# an isolated node from numpy instead of Cora, weights from numpy, dropout
# 0.0 in the compared runs (one step with dropout prints [rng] invariants),
# small sizes and epochs; then one training step under torch.compile
# against the same step eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parameter import Parameter


# utils.py
def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    correct = preds.eq(labels).double()
    correct = correct.sum()
    return correct / len(labels)


def normalized_adjacency(edge_index, num_nodes, add_self_loops=True):
    """D^-1/2 (A + I) D^-1/2 as a coalesced sparse COO tensor."""
    if add_self_loops:
        loop = torch.arange(num_nodes, dtype=edge_index.dtype)
        edge_index = torch.cat([edge_index, torch.stack([loop, loop], dim=0)], dim=1)
    row, col = edge_index[0], edge_index[1]
    degree = torch.bincount(row, minlength=num_nodes)
    deg_inv_sqrt = degree.float().pow(-0.5)
    deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float('inf'), 0)
    value = deg_inv_sqrt[row] * deg_inv_sqrt[col]
    adj = torch.sparse_coo_tensor(edge_index, value, (num_nodes, num_nodes))
    return adj.coalesce()


# model.py (GCNII)
class GraphConvolution(nn.Module):

    def __init__(self, in_features, out_features, residual=False, variant=False):
        super(GraphConvolution, self).__init__()
        self.variant = variant
        if self.variant:
            self.in_features = 2 * in_features
        else:
            self.in_features = in_features

        self.out_features = out_features
        self.residual = residual
        self.weight = Parameter(torch.FloatTensor(self.in_features, self.out_features))
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1. / math.sqrt(self.out_features)
        self.weight.data.uniform_(-stdv, stdv)

    def forward(self, input, adj, h0, lamda, alpha, l):
        theta = math.log(lamda / l + 1)
        hi = torch.spmm(adj, input)
        if self.variant:
            support = torch.cat([hi, h0], 1)
            r = (1 - alpha) * hi + alpha * h0
        else:
            support = (1 - alpha) * hi + alpha * h0
            r = support
        output = theta * torch.mm(support, self.weight) + (1 - theta) * r
        if self.residual:
            output = output + input
        return output


class GCNII(nn.Module):
    def __init__(self, nfeat, nlayers, nhidden, nclass, dropout, lamda, alpha, variant):
        super(GCNII, self).__init__()
        self.convs = nn.ModuleList()
        for _ in range(nlayers):
            self.convs.append(GraphConvolution(nhidden, nhidden, variant=variant))
        self.fcs = nn.ModuleList()
        self.fcs.append(nn.Linear(nfeat, nhidden))
        self.fcs.append(nn.Linear(nhidden, nclass))
        self.params1 = list(self.convs.parameters())
        self.params2 = list(self.fcs.parameters())
        self.act_fn = nn.ReLU()
        self.dropout = dropout
        self.alpha = alpha
        self.lamda = lamda

    def forward(self, x, adj):
        _layers = []
        x = F.dropout(x, self.dropout, training=self.training)
        layer_inner = self.act_fn(self.fcs[0](x))
        _layers.append(layer_inner)
        for i, con in enumerate(self.convs):
            layer_inner = F.dropout(layer_inner, self.dropout, training=self.training)
            layer_inner = self.act_fn(con(layer_inner, adj, _layers[0], self.lamda, self.alpha, i + 1))
        layer_inner = F.dropout(layer_inner, self.dropout, training=self.training)
        layer_inner = self.fcs[-1](layer_inner)
        return F.log_softmax(layer_inner, dim=1)


# ppnp/pytorch/propagation.py and ppnp.py (APPNP)
class PPRPowerIteration(nn.Module):
    def __init__(self, adj: torch.Tensor, alpha: float, niter: int):
        super().__init__()
        self.alpha = alpha
        self.niter = niter
        self.register_buffer('A_hat', (1 - alpha) * adj)

    def forward(self, local_preds: torch.FloatTensor, idx: torch.LongTensor):
        preds = local_preds
        for _ in range(self.niter):
            A_drop = self.A_hat
            preds = A_drop @ preds + self.alpha * local_preds
        return preds[idx]


class PPNP(nn.Module):
    def __init__(self, nfeatures, nclasses, hiddenunits, drop_prob, propagation, bias=False):
        super().__init__()
        fcs = [nn.Linear(nfeatures, hiddenunits[0], bias=bias)]
        for i in range(1, len(hiddenunits)):
            fcs.append(nn.Linear(hiddenunits[i - 1], hiddenunits[i], bias=bias))
        fcs.append(nn.Linear(hiddenunits[-1], nclasses, bias=bias))
        self.fcs = nn.ModuleList(fcs)

        self.reg_params = list(self.fcs[0].parameters())

        self.drop_prob = drop_prob
        self.act_fn = nn.ReLU()

        self.propagation = propagation

    def _transform_features(self, attr_matrix: torch.Tensor):
        layer_inner = self.act_fn(self.fcs[0](F.dropout(attr_matrix, self.drop_prob, training=self.training)))
        for fc in self.fcs[1:-1]:
            layer_inner = self.act_fn(fc(layer_inner))
        res = self.fcs[-1](F.dropout(layer_inner, self.drop_prob, training=self.training))
        return res

    def forward(self, attr_matrix: torch.Tensor, idx: torch.LongTensor):
        local_logits = self._transform_features(attr_matrix)
        final_logits = self.propagation(local_logits, idx)
        return F.log_softmax(final_logits, dim=-1)


# a GraphSAGE-style layer with max aggregation, without torch_scatter
def max_aggregate(x, edge_index, num_nodes):
    row, col = edge_index[0], edge_index[1]
    src = x.index_select(0, col)
    index = row.unsqueeze(-1).expand_as(src)
    out = torch.zeros(num_nodes, x.size(1), dtype=x.dtype)
    out.scatter_reduce_(0, index, src, reduce='amax', include_self=False)
    return out


class SAGEMax(nn.Module):
    def __init__(self, nfeat, nhidden, nclass):
        super().__init__()
        self.lin_self = nn.Linear(nfeat, nhidden)
        self.lin_neigh = nn.Linear(nfeat, nhidden, bias=False)
        self.out = nn.Linear(nhidden, nclass)

    def forward(self, x, edge_index):
        h = F.relu(self.lin_self(x))
        agg = max_aggregate(h, edge_index, x.size(0))
        h = F.relu(h + self.lin_neigh(x) + agg)
        return F.log_softmax(self.out(h), dim=1)


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed, std=0.3):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


# a three-community graph (node 29 isolated) with noisy community features
rng = np.random.default_rng(0)
num_nodes, nfeat, nclass = 30, 10, 3
labels_np = np.repeat(np.arange(nclass), 10)
edges = set()
for i in range(num_nodes - 1):
    for j in range(i + 1, num_nodes - 1):
        p = 0.35 if labels_np[i] == labels_np[j] else 0.04
        if rng.random() < p:
            edges.add((i, j))
edges = sorted(edges)
edge_index = torch.tensor(edges, dtype=torch.long).t()
edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)    # undirected
centers = rng.normal(0, 1, (nclass, nfeat))
features = torch.from_numpy((centers[labels_np] + rng.normal(0, 1.2, (num_nodes, nfeat))).astype(np.float32))
labels = torch.from_numpy(labels_np)
perm = rng.permutation(num_nodes)
idx_train, idx_val, idx_test = (torch.from_numpy(np.sort(perm[:12])), torch.from_numpy(np.sort(perm[12:20])),
                                torch.from_numpy(np.sort(perm[20:])))
print("graph", edge_index.shape[1], "edges", "degrees", torch.bincount(edge_index[0], minlength=num_nodes).tolist())

adj = normalized_adjacency(edge_index, num_nodes)
print("adj", adj.is_sparse, adj.is_coalesced(), adj._nnz(), tuple(adj.shape), adj.dtype,
      fmt(adj.to_dense()[0], 6), f"{adj.to_dense()[29, 29].item():.4f}")
no_loops = normalized_adjacency(edge_index, num_nodes, add_self_loops=False)
print("no self loops: isolated row", no_loops.to_dense()[29].abs().sum().item(),
      "row sums", fmt(torch.sparse.sum(no_loops, dim=1).to_dense(), 5))
dense_adj = adj.to_dense()
x_prop = torch.sparse.mm(adj, features)
print("sparse.mm", torch.allclose(x_prop, dense_adj @ features, atol=1e-6), torch.allclose(torch.spmm(adj, features), x_prop),
      fmt(x_prop[3], 4))

# max aggregation: ties share the gradient, an isolated node gets zeros
h = torch.relu(features[:, :4]).requires_grad_()
agg = max_aggregate(h, edge_index, num_nodes)
print("max agg", fmt(agg[0]), agg[29].tolist())
agg.sum().backward()
print("max agg grad", fmt(h.grad.sum(0)), h.grad[29].tolist(), f"{h.grad.sum().item():.4f}")
src = torch.tensor([[1.0, 2.0], [1.0, 0.5], [3.0, 0.5]], requires_grad=True)
out = torch.zeros(2, 2).scatter_reduce(0, torch.tensor([[0, 0], [0, 0], [1, 1]]), src, reduce='amax', include_self=False)
out.sum().backward()
print("ties", out.tolist(), src.grad.tolist())

# GCNII (dropout 0 here: the compared runs)
torch.manual_seed(0)
model = GCNII(nfeat=nfeat, nlayers=4, nhidden=16, nclass=nclass, dropout=0.0, lamda=0.5, alpha=0.1, variant=False)
print("reset bound", all(bool(c.weight.abs().max() <= 1 / math.sqrt(16)) for c in model.convs))
load_numpy(model, 1)
print("params1", len(model.params1), "params2", len(model.params2), "thetas",
      [f"{math.log(0.5 / l + 1):.4f}" for l in range(1, 5)])
optimizer = optim.Adam([
    dict(params=model.params1, weight_decay=0.01),
    dict(params=model.params2, weight_decay=5e-4)], lr=0.01)


def train():
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    acc_train = accuracy(output[idx_train], labels[idx_train])
    loss_train = F.nll_loss(output[idx_train], labels[idx_train])
    loss_train.backward()
    optimizer.step()
    return loss_train.item(), acc_train.item()


def validate():
    model.eval()
    with torch.no_grad():
        output = model(features, adj)
        loss_val = F.nll_loss(output[idx_val], labels[idx_val])
        acc_val = accuracy(output[idx_val], labels[idx_val])
        return loss_val.item(), acc_val.item()


def test():
    model.load_state_dict(best_state)
    model.eval()
    with torch.no_grad():
        output = model(features, adj)
        loss_test = F.nll_loss(output[idx_test], labels[idx_test])
        acc_test = accuracy(output[idx_test], labels[idx_test])
        return loss_test.item(), acc_test.item()


bad_counter = 0
best = 999999999
best_epoch = 0
acc = 0
patience = 3
best_state = None
for epoch in range(12):
    loss_tra, acc_tra = train()
    loss_val, acc_val = validate()
    print('Epoch:{:04d}'.format(epoch + 1), 'train', 'loss:{:.3f}'.format(loss_tra), 'acc:{:.2f}'.format(acc_tra * 100),
          '| val', 'loss:{:.3f}'.format(loss_val), 'acc:{:.2f}'.format(acc_val * 100))
    if loss_val < best:
        best = loss_val
        best_epoch = epoch
        acc = acc_val
        best_state = copy.deepcopy(model.state_dict())
        bad_counter = 0
    else:
        bad_counter += 1

    if bad_counter == patience:
        break
last_w = model.convs[0].weight.detach().clone()
print("best epoch", best_epoch, "stopped at", epoch + 1)
print('Test acc:{:.2f}'.format(test()[1] * 100), 'loss:{:.4f}'.format(test()[0]),
      "restored", torch.equal(model.convs[0].weight, best_state["convs.0.weight"]),
      best_epoch == epoch or not torch.equal(model.convs[0].weight, last_w))
print("accuracy dtype", accuracy(model(features, adj)[idx_val], labels[idx_val]).dtype)

# the variant (concatenated support) and one dropout step
torch.manual_seed(0)
variant = GCNII(nfeat=nfeat, nlayers=2, nhidden=8, nclass=nclass, dropout=0.0, lamda=0.5, alpha=0.1, variant=True)
load_numpy(variant, 2)
print("variant", [tuple(c.weight.shape) for c in variant.convs], fmt(variant(features, adj)[0], 3))
variant.dropout = 0.6
variant.train()
out_d = variant(features, adj)
print("dropout step", tuple(out_d.shape), bool(torch.allclose(out_d.exp().sum(1), torch.ones(num_nodes), atol=1e-5)))

# APPNP with the L2 term on the first layer
torch.manual_seed(0)
prop = PPRPowerIteration(adj, alpha=0.1, niter=10)
appnp = PPNP(nfeat, nclass, [16], drop_prob=0.0, propagation=prop)
load_numpy(appnp, 3)
print("appnp buffers", [(n, b.is_sparse) for n, b in appnp.named_buffers()], "reg params", len(appnp.reg_params))
opt2 = optim.Adam(appnp.parameters(), lr=0.01)
reg_lambda = 5e-3
for step in range(5):
    appnp.train()
    opt2.zero_grad()
    log_preds = appnp(features, idx_train)
    loss = F.nll_loss(log_preds, labels[idx_train]) + reg_lambda / 2 * sum(torch.sum(param ** 2) for param in appnp.reg_params)
    loss.backward()
    opt2.step()
    print("appnp step", step, f"{loss.item():.4f}", f"{accuracy(log_preds, labels[idx_train]).item():.4f}")
appnp_state = copy.deepcopy(appnp.state_dict())
print("state copy", [(k, v.is_sparse) for k, v in appnp_state.items() if 'A_hat' in k],
      torch.equal(appnp_state['propagation.A_hat'].to_dense(), appnp.propagation.A_hat.to_dense()))
appnp.eval()
with torch.no_grad():
    print("appnp test", f"{accuracy(appnp(features, idx_test), labels[idx_test]).item():.4f}")

# max-aggregation SAGE, a few Adam steps
sage = SAGEMax(nfeat, 8, nclass)
load_numpy(sage, 4)
opt3 = optim.Adam(sage.parameters(), lr=0.02)
for step in range(4):
    opt3.zero_grad()
    out = sage(features, edge_index)
    loss = F.nll_loss(out[idx_train], labels[idx_train])
    loss.backward()
    opt3.step()
    print("sage step", step, f"{loss.item():.4f}", fmt(sage.lin_neigh.weight.grad[0], 3))


# one training step under torch.compile against the same step eagerly
def train_step(features, adj):
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    loss_train = F.nll_loss(output[idx_train], labels[idx_train])
    loss_train.backward()
    optimizer.step()
    return loss_train


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(features, adj).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(features, adj).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
