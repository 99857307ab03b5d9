# weihua916/powerful-gnns (the GIN paper's code): models/mlp.py (MLP with
# batch norms), models/graphcnn.py (GraphCNN: the block-diagonal adjacency
# and the graph pooling matrix built as torch.sparse.FloatTensor and applied
# by torch.spmm, sum / average / max neighbour pooling, the max pool's
# padded neighbour lists indexed with -1 onto a dummy row, the learnt eps
# reweighting, the score summed over every layer's readout with dropout),
# util.py's S2VGraph with one-hot node features set by advanced-index
# assignment and edge_mat, main.py's train / pass_data_iteratively / test
# (np.random.permutation batches, output.max(1, keepdim=True)[1],
# pred.eq(labels.view_as(pred)), StepLR stepped before the optimiser, and
# print(model.eps)); then the GraphSAGE / GIN layers of plain-torch GNN
# write-ups that aggregate with index_add_ and scatter_add_ instead.
# Changes for a CPU test: small random graphs from numpy instead of the
# TU datasets (no networkx, no sklearn fold split), few iterations, SGD
# instead of Adam (the MLP biases before batch norm get gradients that are
# zero up to rounding, which Adam would scale into lr-sized steps); then one
# training step of the index_add_ model under torch.compile against the same
# step eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


# ---- models/mlp.py ----
class MLP(nn.Module):
    def __init__(self, num_layers, input_dim, hidden_dim, output_dim):
        super(MLP, self).__init__()
        self.linear_or_not = True
        self.num_layers = num_layers
        if num_layers < 1:
            raise ValueError("number of layers should be positive!")
        elif num_layers == 1:
            self.linear = nn.Linear(input_dim, output_dim)
        else:
            self.linear_or_not = False
            self.linears = torch.nn.ModuleList()
            self.batch_norms = torch.nn.ModuleList()
            self.linears.append(nn.Linear(input_dim, hidden_dim))
            for layer in range(num_layers - 2):
                self.linears.append(nn.Linear(hidden_dim, hidden_dim))
            self.linears.append(nn.Linear(hidden_dim, output_dim))
            for layer in range(num_layers - 1):
                self.batch_norms.append(nn.BatchNorm1d((hidden_dim)))

    def forward(self, x):
        if self.linear_or_not:
            return self.linear(x)
        h = x
        for layer in range(self.num_layers - 1):
            h = F.relu(self.batch_norms[layer](self.linears[layer](h)))
        return self.linears[self.num_layers - 1](h)


# ---- models/graphcnn.py ----
class GraphCNN(nn.Module):
    def __init__(self, num_layers, num_mlp_layers, input_dim, hidden_dim, output_dim, final_dropout,
                 learn_eps, graph_pooling_type, neighbor_pooling_type, device):
        super(GraphCNN, self).__init__()
        self.final_dropout = final_dropout
        self.device = device
        self.num_layers = num_layers
        self.graph_pooling_type = graph_pooling_type
        self.neighbor_pooling_type = neighbor_pooling_type
        self.learn_eps = learn_eps
        self.eps = nn.Parameter(torch.zeros(self.num_layers - 1))
        self.mlps = torch.nn.ModuleList()
        self.batch_norms = torch.nn.ModuleList()
        for layer in range(self.num_layers - 1):
            if layer == 0:
                self.mlps.append(MLP(num_mlp_layers, input_dim, hidden_dim, hidden_dim))
            else:
                self.mlps.append(MLP(num_mlp_layers, hidden_dim, hidden_dim, hidden_dim))
            self.batch_norms.append(nn.BatchNorm1d(hidden_dim))
        self.linears_prediction = torch.nn.ModuleList()
        for layer in range(num_layers):
            if layer == 0:
                self.linears_prediction.append(nn.Linear(input_dim, output_dim))
            else:
                self.linears_prediction.append(nn.Linear(hidden_dim, output_dim))

    def __preprocess_neighbors_maxpool(self, batch_graph):
        max_deg = max([graph.max_neighbor for graph in batch_graph])
        padded_neighbor_list = []
        start_idx = [0]
        for i, graph in enumerate(batch_graph):
            start_idx.append(start_idx[i] + len(graph.g))
            padded_neighbors = []
            for j in range(len(graph.neighbors)):
                pad = [n + start_idx[i] for n in graph.neighbors[j]]
                pad.extend([-1] * (max_deg - len(pad)))
                if not self.learn_eps:
                    pad.append(j + start_idx[i])
                padded_neighbors.append(pad)
            padded_neighbor_list.extend(padded_neighbors)
        return torch.LongTensor(padded_neighbor_list)

    def __preprocess_neighbors_sumavepool(self, batch_graph):
        edge_mat_list = []
        start_idx = [0]
        for i, graph in enumerate(batch_graph):
            start_idx.append(start_idx[i] + len(graph.g))
            edge_mat_list.append(graph.edge_mat + start_idx[i])
        Adj_block_idx = torch.cat(edge_mat_list, 1)
        Adj_block_elem = torch.ones(Adj_block_idx.shape[1])
        if not self.learn_eps:
            num_node = start_idx[-1]
            self_loop_edge = torch.LongTensor([range(num_node), range(num_node)])
            elem = torch.ones(num_node)
            Adj_block_idx = torch.cat([Adj_block_idx, self_loop_edge], 1)
            Adj_block_elem = torch.cat([Adj_block_elem, elem], 0)
        Adj_block = torch.sparse.FloatTensor(Adj_block_idx, Adj_block_elem,
                                             torch.Size([start_idx[-1], start_idx[-1]]))
        return Adj_block.to(self.device)

    def __preprocess_graphpool(self, batch_graph):
        start_idx = [0]
        for i, graph in enumerate(batch_graph):
            start_idx.append(start_idx[i] + len(graph.g))
        idx = []
        elem = []
        for i, graph in enumerate(batch_graph):
            if self.graph_pooling_type == "average":
                elem.extend([1. / len(graph.g)] * len(graph.g))
            else:
                elem.extend([1] * len(graph.g))
            idx.extend([[i, j] for j in range(start_idx[i], start_idx[i + 1], 1)])
        elem = torch.FloatTensor(elem)
        idx = torch.LongTensor(idx).transpose(0, 1)
        graph_pool = torch.sparse.FloatTensor(idx, elem, torch.Size([len(batch_graph), start_idx[-1]]))
        return graph_pool.to(self.device)

    def maxpool(self, h, padded_neighbor_list):
        dummy = torch.min(h, dim=0)[0]
        h_with_dummy = torch.cat([h, dummy.reshape((1, -1)).to(self.device)])
        pooled_rep = torch.max(h_with_dummy[padded_neighbor_list], dim=1)[0]
        return pooled_rep

    def _pool(self, h, padded_neighbor_list, Adj_block):
        if self.neighbor_pooling_type == "max":
            return self.maxpool(h, padded_neighbor_list)
        pooled = torch.spmm(Adj_block, h)
        if self.neighbor_pooling_type == "average":
            degree = torch.spmm(Adj_block, torch.ones((Adj_block.shape[0], 1)).to(self.device))
            pooled = pooled / degree
        return pooled

    def next_layer_eps(self, h, layer, padded_neighbor_list=None, Adj_block=None):
        pooled = self._pool(h, padded_neighbor_list, Adj_block)
        pooled = pooled + (1 + self.eps[layer]) * h
        pooled_rep = self.mlps[layer](pooled)
        h = self.batch_norms[layer](pooled_rep)
        h = F.relu(h)
        return h

    def next_layer(self, h, layer, padded_neighbor_list=None, Adj_block=None):
        pooled = self._pool(h, padded_neighbor_list, Adj_block)
        pooled_rep = self.mlps[layer](pooled)
        h = self.batch_norms[layer](pooled_rep)
        h = F.relu(h)
        return h

    def forward(self, batch_graph):
        X_concat = torch.cat([graph.node_features for graph in batch_graph], 0).to(self.device)
        graph_pool = self.__preprocess_graphpool(batch_graph)
        padded_neighbor_list = Adj_block = None
        if self.neighbor_pooling_type == "max":
            padded_neighbor_list = self.__preprocess_neighbors_maxpool(batch_graph)
        else:
            Adj_block = self.__preprocess_neighbors_sumavepool(batch_graph)
        hidden_rep = [X_concat]
        h = X_concat
        for layer in range(self.num_layers - 1):
            if self.learn_eps:
                h = self.next_layer_eps(h, layer, padded_neighbor_list=padded_neighbor_list, Adj_block=Adj_block)
            else:
                h = self.next_layer(h, layer, padded_neighbor_list=padded_neighbor_list, Adj_block=Adj_block)
            hidden_rep.append(h)
        score_over_layer = 0
        for layer, h in enumerate(hidden_rep):
            pooled_h = torch.spmm(graph_pool, h)
            score_over_layer += F.dropout(self.linears_prediction[layer](pooled_h), self.final_dropout,
                                          training=self.training)
        return score_over_layer


# ---- util.py (S2VGraph, load_data's features; graphs from numpy) ----
class S2VGraph(object):
    def __init__(self, g, label, node_tags=None, node_features=None):
        self.label = label
        self.g = g
        self.node_tags = node_tags
        self.neighbors = []
        self.node_features = 0
        self.edge_mat = 0
        self.max_neighbor = 0


def random_graphs(rng, n_graphs):
    graphs = []
    for k in range(n_graphs):
        label = k % 2
        n = int(rng.integers(4, 8))
        # label 1: a ring with chords, label 0: a tree (fewer edges)
        edges = set()
        for i in range(1, n):
            j = int(rng.integers(0, i))
            edges.add((j, i))
        if label:
            for i in range(n):
                edges.add(tuple(sorted((i, (i + 1) % n))))
        edges = sorted(e for e in edges if e[0] != e[1])
        g = list(range(n))
        tags = [int(t) for t in rng.integers(0, 3, n)]
        graph = S2VGraph(g, label, tags)
        graph.neighbors = [[] for i in range(len(g))]
        for i, j in edges:
            graph.neighbors[i].append(j)
            graph.neighbors[j].append(i)
        degree_list = []
        for i in range(len(g)):
            degree_list.append(len(graph.neighbors[i]))
        graph.max_neighbor = max(degree_list)
        edges = [list(pair) for pair in edges]
        edges.extend([[i, j] for j, i in edges])
        graph.edge_mat = torch.LongTensor(edges).transpose(0, 1)
        graphs.append(graph)
    tagset = set([])
    for g in graphs:
        tagset = tagset.union(set(g.node_tags))
    tagset = list(tagset)
    tag2index = {tagset[i]: i for i in range(len(tagset))}
    for g in graphs:
        g.node_features = torch.zeros(len(g.node_tags), len(tagset))
        g.node_features[range(len(g.node_tags)), [tag2index[tag] for tag in g.node_tags]] = 1
    return graphs, 2


def init_from_numpy(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                p.copy_(torch.from_numpy((r.standard_normal(p.shape) / np.sqrt(p.shape[1])).astype(np.float32)))
            elif name.endswith("bias"):
                p.copy_(torch.from_numpy((0.1 * r.standard_normal(p.shape)).astype(np.float32)))


# ---- main.py ----
criterion = nn.CrossEntropyLoss()


def train(args, model, device, train_graphs, optimizer, epoch):
    model.train()
    total_iters = args["iters_per_epoch"]
    loss_accum = 0
    for pos in range(total_iters):
        selected_idx = np.random.permutation(len(train_graphs))[:args["batch_size"]]
        batch_graph = [train_graphs[idx] for idx in selected_idx]
        output = model(batch_graph)
        labels = torch.LongTensor([graph.label for graph in batch_graph]).to(device)
        loss = criterion(output, labels)
        if optimizer is not None:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        loss = loss.detach().cpu().numpy()
        loss_accum += loss
    average_loss = loss_accum / total_iters
    print("loss training: %f" % (average_loss))
    return average_loss


def pass_data_iteratively(model, graphs, minibatch_size=64):
    model.eval()
    output = []
    idx = np.arange(len(graphs))
    for i in range(0, len(graphs), minibatch_size):
        sampled_idx = idx[i:i + minibatch_size]
        if len(sampled_idx) == 0:
            continue
        output.append(model([graphs[j] for j in sampled_idx]).detach())
    return torch.cat(output, 0)


def test(args, model, device, train_graphs, test_graphs, epoch):
    model.eval()
    output = pass_data_iteratively(model, train_graphs)
    pred = output.max(1, keepdim=True)[1]
    labels = torch.LongTensor([graph.label for graph in train_graphs]).to(device)
    correct = pred.eq(labels.view_as(pred)).sum().cpu().item()
    acc_train = correct / float(len(train_graphs))
    output = pass_data_iteratively(model, test_graphs, minibatch_size=8)
    pred = output.max(1, keepdim=True)[1]
    labels = torch.LongTensor([graph.label for graph in test_graphs]).to(device)
    correct = pred.eq(labels.view_as(pred)).sum().cpu().item()
    acc_test = correct / float(len(test_graphs))
    print("accuracy train: %f test: %f" % (acc_train, acc_test))
    return acc_train, acc_test


torch.manual_seed(0)
np.random.seed(0)
device = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
graphs, num_classes = random_graphs(np.random.default_rng(0), 30)
train_graphs, test_graphs = graphs[:20], graphs[20:]
print("graph 0", train_graphs[0].node_features.tolist(), train_graphs[0].edge_mat.tolist())

for pooling, graph_pool, learn_eps in [("sum", "sum", True), ("average", "average", False), ("max", "sum", True),
                                       ("max", "average", False)]:
    args = {"iters_per_epoch": 3, "batch_size": 8}
    model = GraphCNN(3, 2, train_graphs[0].node_features.shape[1], 16, num_classes, 0.0, learn_eps,
                     graph_pool, pooling, device).to(device)
    init_from_numpy(model, 1)
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=0)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    print("==", pooling, graph_pool, learn_eps)
    for epoch in range(1, 3):
        scheduler.step()
        avg_loss = train(args, model, device, train_graphs, optimizer, epoch)
        acc_train, acc_test = test(args, model, device, train_graphs, test_graphs, epoch)
        print(scheduler.get_last_lr())
    print(model.eps)

# the sparse matrices themselves
m = GraphCNN(2, 1, 3, 4, 2, 0.5, False, "average", "sum", device)
adj = m._GraphCNN__preprocess_neighbors_sumavepool(train_graphs[:2])
pool = m._GraphCNN__preprocess_graphpool(train_graphs[:2])
print("adj", adj.is_sparse, adj.layout, tuple(adj.shape), adj._nnz(), adj.to_dense().sum(1).tolist())
print("bincount", torch.bincount(torch.tensor([0, 0, 2]), minlength=4).tolist())
print("pool", pool.layout, pool.coalesce().values().tolist()[:3], torch.sparse.sum(pool).item())
print("padded", m._GraphCNN__preprocess_neighbors_maxpool(train_graphs[:2]).tolist())


# ---- the same GIN / GraphSAGE with index_add_ / scatter_add_ (edge lists) ----
class SAGEConv(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.lin_l = nn.Linear(in_dim, out_dim)
        self.lin_r = nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, x, edge_index):
        src, dst = edge_index
        agg = torch.zeros_like(x).index_add_(0, dst, x[src])
        deg = torch.zeros(x.size(0), dtype=x.dtype).scatter_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
        agg = agg / deg.clamp(min=1).unsqueeze(-1)
        out = self.lin_l(agg) + self.lin_r(x)
        return F.normalize(out, p=2, dim=-1)


class GINConv(nn.Module):
    def __init__(self, mlp, eps=0.0, train_eps=True):
        super().__init__()
        self.mlp = mlp
        self.eps = nn.Parameter(torch.tensor([eps])) if train_eps else eps

    def forward(self, x, edge_index):
        src, dst = edge_index[0], edge_index[1]
        index = dst.unsqueeze(-1).expand(-1, x.size(1))
        agg = torch.zeros(x.size(0), x.size(1), dtype=x.dtype).scatter_add(0, index, x.index_select(0, src))
        return self.mlp((1 + self.eps) * x + agg)


class Net(nn.Module):
    def __init__(self, in_dim, hidden, n_classes):
        super().__init__()
        self.sage = SAGEConv(in_dim, hidden)
        self.gin = GINConv(nn.Sequential(nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                         nn.Linear(hidden, hidden)))
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x, edge_index, batch, num_graphs):
        h = F.relu(self.sage(x, edge_index))
        h = F.relu(self.gin(h, edge_index))
        pooled = torch.zeros(num_graphs, h.size(1)).index_add(0, batch, h)
        counts = torch.zeros(num_graphs).index_add_(0, batch, torch.ones_like(batch, dtype=h.dtype)).unsqueeze(-1)
        return self.head(pooled / counts)


def collate(batch_graph):
    xs, edges, batch, offset = [], [], [], 0
    for i, g in enumerate(batch_graph):
        xs.append(g.node_features)
        edges.append(g.edge_mat + offset)
        batch.append(torch.full((len(g.g),), i, dtype=torch.long))
        offset += len(g.g)
    labels = torch.tensor([g.label for g in batch_graph])
    return torch.cat(xs), torch.cat(edges, 1), torch.cat(batch), labels


net = Net(3, 16, 2)
init_from_numpy(net, 2)
opt = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
x, ei, b, y = collate(train_graphs)
for step in range(4):
    opt.zero_grad()
    loss = F.cross_entropy(net(x, ei, b, len(train_graphs)), y)
    loss.backward()
    opt.step()
    print("sage/gin step", step, f"{loss.item():.5f}", f"{net.gin.eps.item():.5f}")
net.eval()
with torch.no_grad():
    xt, eit, bt, yt = collate(test_graphs)
    pred = net(xt, eit, bt, len(test_graphs)).argmax(-1)
    print("test acc", (pred == yt).float().mean().item(), pred.tolist())
net.train()


def train_step(x, ei, b, y):
    opt.zero_grad()
    loss = F.cross_entropy(net(x, ei, b, 20), y)
    loss.backward()
    opt.step()
    return loss


state, opt_state = copy.deepcopy(net.state_dict()), copy.deepcopy(opt.state_dict())
eager = [train_step(x, ei, b, y).item() for _ in range(2)]
after = {k: v.clone() for k, v in net.state_dict().items()}
net.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(x, ei, b, y).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(net.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
