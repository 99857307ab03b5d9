# node2vec / DeepWalk the way pyg-team/pytorch_geometric's
# torch_geometric/nn/models/node2vec.py writes it, in plain torch: the
# Node2Vec module (an nn.Embedding(num_nodes, embedding_dim, sparse=sparse),
# forward's emb.index_select(0, batch), loader() as a DataLoader over
# range(num_nodes) with collate_fn=self.sample, pos_sample's
# batch.repeat(walks_per_node) and the rw[:, j:j + context_size] windows
# torch.cat'ed, neg_sample's random walks of torch.randint node ids behind
# batch.view(-1, 1), and loss(): start, rest = pos_rw[:, 0],
# pos_rw[:, 1:].contiguous(), h_start * h_rest summed over dim=-1,
# -torch.log(torch.sigmoid(out) + EPS).mean() for the positive and
# -torch.log(1 - torch.sigmoid(out) + EPS).mean() for the negative walks),
# trained as examples/node2vec.py does with
# torch.optim.SparseAdam(list(model.parameters()), lr=0.01), then test()'s
# logistic regression on the embeddings; plus the window extraction by
# rw.unfold(1, context_size, 1) that other ports use, a DeepWalk-style
# nn.EmbeddingBag(mode='mean' / 'sum', sparse=True) context model stepped by
# optim.SGD on its sparse gradients, and the sparse gradient as PyTorch
# reports it (is_sparse, layout, coalesce()'s _indices() / _values()).
# Changes for a CPU test: a small three-community graph from numpy, the
# biased (p, q) random walks (torch_cluster.random_walk) written in numpy,
# the negative samples' torch.randint drawn from numpy, weights from numpy,
# sklearn's LogisticRegression replaced by a numpy one, a few epochs; then
# one step of the dense-embedding variant under torch.compile against the
# same step eagerly.
import copy

import numpy as np
import torch
from torch import Tensor
from torch.nn import Embedding
from torch.utils.data import DataLoader

EPS = 1e-15

rng = np.random.default_rng(0)


def random_walk(rowptr, col, start, walk_length, p, q):
    """torch_cluster.random_walk's node2vec walk, in numpy (rejection-free:
    unnormalized weights 1/p back, 1 to common neighbours, 1/q outwards)."""
    rowptr_np, col_np = rowptr.numpy(), col.numpy()
    out = np.zeros((start.numel(), walk_length + 1), dtype=np.int64)
    for i, s in enumerate(start.tolist()):
        walk, prev = [s], -1
        for _ in range(walk_length):
            cur = walk[-1]
            nbrs = col_np[rowptr_np[cur]:rowptr_np[cur + 1]]
            if len(nbrs) == 0:
                walk.append(cur)
                continue
            if prev < 0:
                nxt = int(nbrs[rng.integers(len(nbrs))])
            else:
                prev_nbrs = set(col_np[rowptr_np[prev]:rowptr_np[prev + 1]].tolist())
                w = np.array([1.0 / p if n == prev else (1.0 if n in prev_nbrs else 1.0 / q) for n in nbrs])
                nxt = int(nbrs[rng.choice(len(nbrs), p=w / w.sum())])
            prev = cur
            walk.append(nxt)
        out[i] = walk
    return torch.from_numpy(out)


class Node2Vec(torch.nn.Module):
    def __init__(self, edge_index, embedding_dim, walk_length, context_size,
                 walks_per_node=1, p=1.0, q=1.0, num_negative_samples=1,
                 num_nodes=None, sparse=False):
        super().__init__()
        self.random_walk_fn = random_walk
        self.num_nodes = num_nodes
        row, col = edge_index
        perm = (row * num_nodes + col).argsort()
        row, col = row[perm], col[perm]
        self.rowptr = torch.cat([torch.zeros(1, dtype=torch.long),
                                 torch.bincount(row, minlength=num_nodes).cumsum(0)])
        self.col = col

        assert walk_length >= context_size

        self.embedding_dim = embedding_dim
        self.walk_length = walk_length - 1
        self.context_size = context_size
        self.walks_per_node = walks_per_node
        self.p = p
        self.q = q
        self.num_negative_samples = num_negative_samples

        self.embedding = Embedding(self.num_nodes, embedding_dim, sparse=sparse)

        self.reset_parameters()

    def reset_parameters(self):
        self.embedding.reset_parameters()

    def forward(self, batch=None):
        emb = self.embedding.weight
        return emb if batch is None else emb.index_select(0, batch)

    def loader(self, **kwargs):
        return DataLoader(range(self.num_nodes), collate_fn=self.sample, **kwargs)

    def pos_sample(self, batch):
        batch = batch.repeat(self.walks_per_node)
        rw = self.random_walk_fn(self.rowptr, self.col, batch, self.walk_length, self.p, self.q)
        if not isinstance(rw, Tensor):
            rw = rw[0]

        walks = []
        num_walks_per_rw = 1 + self.walk_length + 1 - self.context_size
        for j in range(num_walks_per_rw):
            walks.append(rw[:, j:j + self.context_size])
        return torch.cat(walks, dim=0)

    def neg_sample(self, batch):
        batch = batch.repeat(self.walks_per_node * self.num_negative_samples)

        rw = torch.from_numpy(rng.integers(0, self.num_nodes, (batch.size(0), self.walk_length)))
        rw = torch.cat([batch.view(-1, 1), rw], dim=-1)

        walks = []
        num_walks_per_rw = 1 + self.walk_length + 1 - self.context_size
        for j in range(num_walks_per_rw):
            walks.append(rw[:, j:j + self.context_size])
        return torch.cat(walks, dim=0)

    def sample(self, batch):
        if not isinstance(batch, Tensor):
            batch = torch.tensor(batch)
        return self.pos_sample(batch), self.neg_sample(batch)

    def loss(self, pos_rw, neg_rw):
        # Positive loss.
        start, rest = pos_rw[:, 0], pos_rw[:, 1:].contiguous()

        h_start = self.embedding(start).view(pos_rw.size(0), 1, self.embedding_dim)
        h_rest = self.embedding(rest.view(-1)).view(pos_rw.size(0), -1, self.embedding_dim)

        out = (h_start * h_rest).sum(dim=-1).view(-1)
        pos_loss = -torch.log(torch.sigmoid(out) + EPS).mean()

        # Negative loss.
        start, rest = neg_rw[:, 0], neg_rw[:, 1:].contiguous()

        h_start = self.embedding(start).view(neg_rw.size(0), 1, self.embedding_dim)
        h_rest = self.embedding(rest.view(-1)).view(neg_rw.size(0), -1, self.embedding_dim)

        out = (h_start * h_rest).sum(dim=-1).view(-1)
        neg_loss = -torch.log(1 - torch.sigmoid(out) + EPS).mean()

        return pos_loss + neg_loss

    def __repr__(self):
        return (f'{self.__class__.__name__}({self.embedding.weight.size(0)}, '
                f'{self.embedding.weight.size(1)})')


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, seed, std=0.5):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


# a three-community graph
num_nodes, n_comm = 24, 3
labels = np.repeat(np.arange(n_comm), num_nodes // n_comm)
edges = set()
g = np.random.default_rng(1)
for i in range(num_nodes):
    for j in range(i + 1, num_nodes):
        if g.random() < (0.45 if labels[i] == labels[j] else 0.03):
            edges.add((i, j))
            edges.add((j, i))
edge_index = torch.tensor(sorted(edges), dtype=torch.long).t().contiguous()
print("graph", tuple(edge_index.shape))

model = Node2Vec(edge_index, embedding_dim=8, walk_length=6, context_size=3,
                 walks_per_node=2, num_negative_samples=1, p=1.0, q=0.5,
                 num_nodes=num_nodes, sparse=True)
load_numpy(model, 0)
print(model, "rowptr", model.rowptr[:6].tolist())
loader = model.loader(batch_size=8, shuffle=False)
optimizer = torch.optim.SparseAdam(list(model.parameters()), lr=0.01)

batches = [(pos, neg) for pos, neg in loader]
pos_rw, neg_rw = batches[0]
print("walks", tuple(pos_rw.shape), tuple(neg_rw.shape), pos_rw.dtype)


def train():
    model.train()
    total_loss = 0
    for pos_rw, neg_rw in batches:
        optimizer.zero_grad()
        loss = model.loss(pos_rw, neg_rw)
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    return total_loss / len(batches)


@torch.no_grad()
def test():
    model.eval()
    z = model().numpy().astype(np.float64)
    # sklearn's LogisticRegression (multinomial), by gradient descent in numpy
    train_idx = np.arange(0, num_nodes, 2)
    test_idx = np.arange(1, num_nodes, 2)
    W = np.zeros((z.shape[1], n_comm))
    b = np.zeros(n_comm)
    Y = np.eye(n_comm)[labels[train_idx]]
    for _ in range(200):
        logits = z[train_idx] @ W + b
        P = np.exp(logits - logits.max(1, keepdims=True))
        P /= P.sum(1, keepdims=True)
        W -= 0.5 * z[train_idx].T @ (P - Y) / len(train_idx)
        b -= 0.5 * (P - Y).mean(0)
    pred = (z[test_idx] @ W + b).argmax(1)
    return float((pred == labels[test_idx]).mean())


for epoch in range(1, 4):
    loss = train()
    print(f'Epoch: {epoch:02d}, Loss: {loss:.4f}')
print("acc", f"{test():.4f}")

# the sparse gradient as PyTorch reports it
optimizer.zero_grad()
model.loss(pos_rw, neg_rw).backward()
grad = model.embedding.weight.grad
print("grad", grad.is_sparse, grad.layout, tuple(grad.shape), grad.is_coalesced())
c = grad.coalesce()
print("coalesced", c.is_coalesced(), tuple(c._indices().shape), tuple(c._values().shape), c._nnz())
print("rows", c._indices()[0].tolist()[:8], fmt(c._values()[0]))
print("dense", torch.allclose(c.to_dense(), grad.to_dense()), fmt(grad.to_dense().sum(0)))
state = optimizer.state[model.embedding.weight]
print("sparse adam state", sorted(state), int(state['step']),
      fmt(state['exp_avg'][0]), fmt(state['exp_avg_sq'][0]))

# windows by unfold, as other ports extract them
rw = random_walk(model.rowptr, model.col, torch.arange(4), 5, 1.0, 1.0)
win = rw.unfold(1, 3, 1)
print("unfold", tuple(win.shape), win.is_contiguous(), win.stride(),
      torch.equal(win.reshape(-1, 3), torch.stack([rw[i, j:j + 3] for i in range(4) for j in range(4)])),
      torch.equal(torch.cat([rw[:, j:j + 3] for j in range(4)]), win.transpose(0, 1).reshape(-1, 3)))

# DeepWalk-style context bags: EmbeddingBag(sparse=True) with optim.SGD
for mode in ("mean", "sum"):
    bag = torch.nn.EmbeddingBag(num_nodes, 8, mode=mode, sparse=True)
    out_emb = torch.nn.Embedding(num_nodes, 8, sparse=True)
    load_numpy(bag, 2)
    load_numpy(out_emb, 3)
    sgd = torch.optim.SGD(list(bag.parameters()) + list(out_emb.parameters()), lr=0.1)
    ctx = pos_rw[:, 1:].reshape(-1)
    offsets = torch.arange(0, ctx.numel(), pos_rw.size(1) - 1)
    for step in range(3):
        sgd.zero_grad()
        h = bag(ctx, offsets)
        score = (h * out_emb(pos_rw[:, 0])).sum(-1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(score, torch.ones_like(score))
        loss.backward()
        sgd.step()
    gb = bag.weight.grad
    print(mode, f"{loss.item():.4f}", gb.is_sparse, gb.layout, tuple(gb.coalesce()._indices().shape),
          tuple(gb.coalesce()._values().shape), fmt(bag.weight[pos_rw[0, 1]]), fmt(out_emb.weight[pos_rw[0, 0]]))

# the dense-embedding variant's training step under torch.compile against the same step eagerly
dense = Node2Vec(edge_index, embedding_dim=8, walk_length=6, context_size=3, walks_per_node=2,
                 num_negative_samples=1, p=1.0, q=0.5, num_nodes=num_nodes, sparse=False)
load_numpy(dense, 0)
opt_d = torch.optim.Adam(dense.parameters(), lr=0.01)


def train_step(pos_rw, neg_rw):
    opt_d.zero_grad()
    loss = dense.loss(pos_rw, neg_rw)
    loss.backward()
    opt_d.step()
    return loss


state, opt_state = copy.deepcopy(dense.state_dict()), copy.deepcopy(opt_d.state_dict())
eager = [train_step(*batches[i]).item() for i in range(2)]
after = {k: v.clone() for k, v in dense.state_dict().items()}
dense.load_state_dict(state)
opt_d.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(*batches[i]).item() for i in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(dense.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
