# A PyG-free GCN and GraphSAGE the way plain-PyTorch graph repos write them:
# tkipf/pygcn's layers.GraphConvolution (torch.FloatTensor parameters reset
# by uniform_(-stdv, stdv), torch.mm then torch.spmm, the "(in -> out)"
# __repr__), models.GCN (relu, F.dropout(training=self.training),
# log_softmax), utils.accuracy and train.py's Adam(lr=0.01,
# weight_decay=5e-4) loop; the normalized adjacency D^-1/2 (A + I) D^-1/2
# built with torch.sparse_coo_tensor(...).coalesce(), torch.sparse.sum(adj,
# dim=1).to_dense(), pow(-0.5) with the isinf fix, adj.indices() /
# adj.values(); its CSR form (adj.to_sparse_csr(), crow_indices() /
# col_indices() / values(), torch.sparse_csr_tensor(crow, col, val, size),
# to_sparse_csc, to_sparse back to COO) multiplied by `adj @ x`,
# torch.sparse.mm and torch.spmm; learned edge weights whose gradients flow
# through sparse_csr_tensor / sparse_coo_tensor values; and a GraphSAGE
# layer with torch_scatter-free aggregation (index_add_ mean, and
# scatter_reduce(reduce='mean' / 'amax', include_self=False)).
# Changes for a CPU test: a random graph of 40 nodes (torch.randint edges,
# torch.randn features), a few epochs; then one GraphSAGE training step under
# torch.compile against the same step eagerly.
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.modules.module import Module
from torch.nn.parameter import Parameter


# pygcn/layers.py
class GraphConvolution(Module):
    """
    Simple GCN layer, similar to https://arxiv.org/abs/1609.02907
    """

    def __init__(self, in_features, out_features, bias=True):
        super(GraphConvolution, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.FloatTensor(in_features, out_features))
        if bias:
            self.bias = Parameter(torch.FloatTensor(out_features))
        else:
            self.register_parameter('bias', None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1. / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.spmm(adj, support)
        if self.bias is not None:
            return output + self.bias
        else:
            return output

    def __repr__(self):
        return self.__class__.__name__ + ' (' \
               + str(self.in_features) + ' -> ' \
               + str(self.out_features) + ')'


# pygcn/models.py
class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super(GCN, self).__init__()

        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


# pygcn/utils.py
def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    correct = preds.eq(labels).double()
    correct = correct.sum()
    return correct / len(labels)


def normalized_adjacency(edge_index, num_nodes):
    """D^-1/2 (A + I) D^-1/2 as a coalesced COO tensor."""
    adj = torch.sparse_coo_tensor(edge_index, torch.ones(edge_index.size(1)), (num_nodes, num_nodes))
    adj = adj.coalesce()
    # repeated edges were summed: binarize, then add the self loops
    adj = torch.sparse_coo_tensor(adj.indices(), torch.ones_like(adj.values()), adj.size())
    loops = torch.arange(num_nodes).unsqueeze(0).repeat(2, 1)
    adj = (adj + torch.sparse_coo_tensor(loops, torch.ones(num_nodes), adj.size())).coalesce()
    deg = torch.sparse.sum(adj, dim=1).to_dense()
    d_inv_sqrt = deg.pow(-0.5)
    d_inv_sqrt[torch.isinf(d_inv_sqrt)] = 0.
    row, col = adj.indices()
    values = d_inv_sqrt[row] * adj.values() * d_inv_sqrt[col]
    return torch.sparse_coo_tensor(adj.indices(), values, adj.size()).coalesce()


class SAGEConv(nn.Module):
    """GraphSAGE (mean / max aggregator) without torch_scatter."""

    def __init__(self, in_channels, out_channels, aggr='mean'):
        super().__init__()
        self.aggr = aggr
        self.lin_l = nn.Linear(in_channels, out_channels)
        self.lin_r = nn.Linear(in_channels, out_channels, bias=False)

    def forward(self, x, edge_index):
        src, dst = edge_index
        msg = x[src]
        if self.aggr == 'mean':
            out = x.new_zeros(x.size(0), x.size(1)).index_add_(0, dst, msg)
            cnt = x.new_zeros(x.size(0)).index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
            out = out / cnt.clamp(min=1).unsqueeze(-1)
        else:
            index = dst.unsqueeze(-1).expand_as(msg)
            out = x.new_zeros(x.size(0), x.size(1)).scatter_reduce(
                0, index, msg, reduce=self.aggr, include_self=False)
        return self.lin_l(out) + self.lin_r(x)


class GraphSAGE(nn.Module):
    def __init__(self, nfeat, nhid, nclass, aggr='mean'):
        super().__init__()
        self.conv1 = SAGEConv(nfeat, nhid, aggr)
        self.conv2 = SAGEConv(nhid, nclass, aggr)

    def forward(self, x, edge_index):
        x = F.relu(self.conv1(x, edge_index))
        return F.log_softmax(self.conv2(x, edge_index), dim=-1)


def fmt(t, n=4):
    return [round(v, n) for v in t.detach().reshape(-1).tolist()]


torch.manual_seed(42)
num_nodes, nfeat, nclass = 40, 12, 3
features = torch.randn(num_nodes, nfeat)
labels = torch.randint(0, nclass, (num_nodes,))
src, dst = torch.randint(0, num_nodes, (90,)), torch.randint(0, num_nodes, (90,))
keep = src != dst
src, dst = src[keep], dst[keep]
edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
idx_train, idx_val, idx_test = torch.arange(0, 20), torch.arange(20, 30), torch.arange(30, 40)

adj = normalized_adjacency(edge_index, num_nodes)
print("adj", adj.layout, adj.is_coalesced(), adj._nnz(), tuple(adj.shape),
      "row sums", fmt(torch.sparse.sum(adj, dim=1).to_dense()[:5]))

# the CSR form
adj_csr = adj.to_sparse_csr()
print("csr", adj_csr.layout, adj_csr.is_sparse, adj_csr.is_sparse_csr, adj_csr._nnz(), adj_csr.size(),
      adj_csr.dtype, adj_csr.crow_indices().dtype)
print("crow", adj_csr.crow_indices()[:10].tolist())
print("col", adj_csr.col_indices()[:10].tolist())
print("val", fmt(adj_csr.values()[:6]))
print("to_dense", torch.equal(adj_csr.to_dense(), adj.to_dense()), adj_csr.to_dense().layout)
rebuilt = torch.sparse_csr_tensor(adj_csr.crow_indices(), adj_csr.col_indices(), adj_csr.values(),
                                  size=adj_csr.size())
print("rebuilt", rebuilt.layout, torch.equal(rebuilt.to_dense(), adj.to_dense()))
small = adj.to_dense()[:4, :4]
print(small.to_sparse_csr())
print(small.to_sparse_csc())
print(small.to_sparse_csr().to_sparse())
print(torch.sparse_csr_tensor(torch.tensor([0, 2, 3]), torch.tensor([0, 2, 1]),
                              torch.tensor([1., 2., 3.], dtype=torch.float64)))
print("csc", small.to_sparse_csc().ccol_indices().tolist(), small.to_sparse_csc().row_indices().tolist(),
      fmt(small.to_sparse_csc().values()))
for name, f in (("indices", lambda: adj_csr.indices()), ("crow of coo", lambda: adj.crow_indices()),
                ("crow of dense", lambda: features.crow_indices()),
                ("col of csc", lambda: small.to_sparse_csc().col_indices()),
                ("bad col", lambda: torch.sparse_csr_tensor(torch.tensor([0, 1, 2]), torch.tensor([1, 7]),
                                                             torch.tensor([5., 6.]), (2, 3),
                                                             check_invariants=True))):
    try:
        f()
    except RuntimeError as e:
        print(name, "RuntimeError:", e)

x_coo = torch.sparse.mm(adj, features)
x_csr = adj_csr @ features
print("products", torch.allclose(x_coo, x_csr, atol=1e-6), torch.allclose(torch.sparse.mm(adj_csr, features), x_csr),
      torch.allclose(torch.spmm(adj_csr, features), x_csr), x_csr.layout, fmt(x_csr[0], 4))

# gradients into the dense weight and into the sparse values (learned edge weights)
w = torch.randn(nfeat, 4, requires_grad=True)
edge_weight = nn.Parameter(torch.ones(adj._nnz()))
adj_w = torch.sparse_csr_tensor(adj_csr.crow_indices(), adj_csr.col_indices(), adj_csr.values() * edge_weight,
                                adj_csr.size())
print("adj_w", adj_w.requires_grad, adj_w.grad_fn is not None)
loss = (adj_w @ (features @ w)).tanh().pow(2).sum()
loss.backward()
print("csr grads", f"{loss.item():.4f}", fmt(w.grad[0]), fmt(edge_weight.grad[:6]))
g_csr = edge_weight.grad.clone()
w.grad = None
edge_weight.grad = None
adj_coo_w = torch.sparse_coo_tensor(adj.indices(), adj.values() * edge_weight, adj.size())
loss = torch.sparse.mm(adj_coo_w, features @ w).tanh().pow(2).sum()
loss.backward()
print("coo grads", f"{loss.item():.4f}", fmt(w.grad[0]), torch.allclose(edge_weight.grad, g_csr, atol=1e-5))

# edge attention over the sparse adjacency (GAT-style scores, normalized per
# row by torch.sparse.softmax), torch.sparse.addmm, and the CSR transpose
a_src, a_dst = torch.randn(nfeat, requires_grad=True), torch.randn(nfeat, requires_grad=True)
row, col = adj.indices()
scores = F.leaky_relu(features[row] @ a_src + features[col] @ a_dst, 0.2)
att = torch.sparse.softmax(torch.sparse_coo_tensor(adj.indices(), scores, adj.size()), dim=1)
h_att = torch.sparse.mm(att, features)
h_att.pow(2).sum().backward()
print("attention", att.layout, att._nnz(), fmt(torch.sparse.sum(att, dim=1).to_dense()[:4]),
      fmt(h_att[0, :4]), fmt(a_src.grad[:4]))
print("addmm", fmt(torch.sparse.addmm(features[:, :3], adj_csr, features[:, :3], beta=0.5)[1]))
print("csr.t()", adj_csr.t().layout, torch.equal(adj_csr.t().to_dense(), adj.to_dense().t()))

# pygcn's train.py, on the CSR and on the COO adjacency
for kind, A in (("csr", adj_csr), ("coo", adj)):
    torch.manual_seed(0)
    model = GCN(nfeat=nfeat, nhid=16, nclass=nclass, dropout=0.5)
    if kind == "csr":
        print(model)
    optimizer = optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for epoch in range(12):
        model.train()
        optimizer.zero_grad()
        output = model(features, A)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        acc_train = accuracy(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()
        model.eval()
        output = model(features, A)
        loss_val = F.nll_loss(output[idx_val], labels[idx_val])
        acc_val = accuracy(output[idx_val], labels[idx_val])
        if epoch % 4 == 3:
            print(kind, 'Epoch: {:04d}'.format(epoch + 1),
                  'loss_train: {:.4f}'.format(loss_train.item()),
                  'acc_train: {:.4f}'.format(acc_train.item()),
                  'loss_val: {:.4f}'.format(loss_val.item()),
                  'acc_val: {:.4f}'.format(acc_val.item()))
    model.eval()
    output = model(features, A)
    print(kind, "Test set results:", "loss= {:.4f}".format(F.nll_loss(output[idx_test], labels[idx_test]).item()),
          "accuracy= {:.4f}".format(accuracy(output[idx_test], labels[idx_test]).item()))

# GraphSAGE aggregations
h = torch.randn(num_nodes, 5, requires_grad=True)
conv = SAGEConv(5, 3)
src, dst = edge_index
mean_index_add = h.new_zeros(num_nodes, 5).index_add_(0, dst, h[src]) / \
    h.new_zeros(num_nodes).index_add_(0, dst, torch.ones(dst.size(0))).clamp(min=1).unsqueeze(-1)
mean_scatter = torch.zeros(num_nodes, 5).scatter_reduce(0, dst.unsqueeze(-1).expand(-1, 5), h[src],
                                                        reduce='mean', include_self=False)
print("mean agg", torch.allclose(mean_index_add, mean_scatter, atol=1e-6), fmt(mean_scatter[0]))
amax = torch.zeros(num_nodes, 5).scatter_reduce(0, dst.unsqueeze(-1).expand(-1, 5), h[src],
                                                reduce='amax', include_self=False)
(mean_scatter.sum() + amax.pow(2).sum()).backward()
print("amax agg", fmt(amax[0]), fmt(h.grad[0]), f"{h.grad.sum().item():.4f}")

for aggr in ('mean', 'amax'):
    torch.manual_seed(1)
    sage = GraphSAGE(nfeat, 8, nclass, aggr)
    opt = optim.Adam(sage.parameters(), lr=0.02)
    for step in range(4):
        opt.zero_grad()
        out = sage(features, edge_index)
        loss = F.nll_loss(out[idx_train], labels[idx_train])
        loss.backward()
        opt.step()
        if step % 2 == 1:
            print("sage", aggr, step, f"{loss.item():.4f}", fmt(sage.conv1.lin_l.weight.grad[0], 3))


# one training step of a GraphSAGE layer (max aggregator) under
# torch.compile against the same step eagerly
torch.manual_seed(2)
sage = SAGEConv(nfeat, nclass, 'amax')
opt = optim.SGD(sage.parameters(), lr=0.1, momentum=0.9)


def train_step(x, edge_index):
    opt.zero_grad()
    out = F.log_softmax(sage(x, edge_index), dim=-1)
    loss = F.nll_loss(out[idx_train], labels[idx_train])
    loss.backward()
    opt.step()
    return loss


state, opt_state = copy.deepcopy(sage.state_dict()), copy.deepcopy(opt.state_dict())
eager = [train_step(features, edge_index).item() for _ in range(2)]
after = {k: v.clone() for k, v in sage.state_dict().items()}
sage.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(features, edge_index).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(sage.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
