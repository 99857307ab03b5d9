# williamleif/graphsage-simple (the PyTorch GraphSAGE) the way its
# graphsage/aggregators.py, encoders.py and model.py write it:
# MeanAggregator sampling neighbours with random.sample into sets, the
# unique-node dict, a Variable(torch.zeros(len(samp_neighs),
# len(unique_nodes))) mask written by mask[row_indices, column_indices] = 1
# and row-normalized by mask.div(num_neigh), embed_matrix from the features
# callable on torch.LongTensor(unique_nodes_list), mask.mm(embed_matrix);
# Encoder with its bool self.cuda attribute shadowing Module.cuda, the
# uninitialized torch.FloatTensor(embed_dim, feat_dim) weight and the
# deprecated init.xavier_uniform, the "base_model != None" test, self
# features by torch.LongTensor(nodes) concatenated with the neighbours' when
# not gcn, F.relu(self.weight.mm(combined.t())); two layers chained by
# lambda nodes: enc1(nodes).t(); SupervisedGraphSage with
# nn.CrossEntropyLoss on scores.t() and labels.squeeze(); run_cora's
# nn.Embedding whose weight is replaced by nn.Parameter(torch.FloatTensor(
# feat_data), requires_grad=False), enc1.num_samples = 5 (the repository's
# typo: an unused attribute), SGD over filter(lambda p: p.requires_grad,
# ...), train[:256] then random.shuffle(train), loss.data, the validation
# micro-F1 on val_output.data.numpy().argmax(axis=1).
# Changes for a CPU test: a small synthetic Cora-like graph from numpy
# (class-dependent features, homophilous edges), weights from numpy after
# the xavier init, 12 batches of 32; f1_score(average="micro") as the
# accuracy it equals for single-label data (no sklearn); random.sample
# takes sorted(to_neigh), as Python >= 3.11 needs a sequence; print
# statements as Python 3 calls; then one training step under torch.compile
# against the same step eagerly.
import copy
import random
import time
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn
from torch.nn import init
from torch.autograd import Variable
import torch.nn.functional as F


# ---- graphsage/aggregators.py ----

class MeanAggregator(nn.Module):
    """
    Aggregates a node's embeddings using mean of neighbors' embeddings
    """
    def __init__(self, features, cuda=False, gcn=False):
        """
        Initializes the aggregator for a specific graph.

        features -- function mapping LongTensor of node ids to FloatTensor of feature values.
        cuda -- whether to use GPU
        gcn --- whether to perform concatenation GraphSAGE-style, or add self-loops GCN-style
        """

        super(MeanAggregator, self).__init__()

        self.features = features
        self.cuda = cuda
        self.gcn = gcn

    def forward(self, nodes, to_neighs, num_sample=10):
        """
        nodes --- list of nodes in a batch
        to_neighs --- list of sets, each set is the set of neighbors for node in batch
        num_sample --- number of neighbors to sample. No sampling if None.
        """
        # Local pointers to functions (speed hack)
        _set = set
        if not num_sample is None:
            _sample = random.sample
            samp_neighs = [_set(_sample(sorted(to_neigh),
                            num_sample,
                            )) if len(to_neigh) >= num_sample else to_neigh for to_neigh in to_neighs]
        else:
            samp_neighs = to_neighs

        if self.gcn:
            samp_neighs = [samp_neigh | set([nodes[i]]) for i, samp_neigh in enumerate(samp_neighs)]
        unique_nodes_list = list(set.union(*samp_neighs))
        unique_nodes = {n:i for i,n in enumerate(unique_nodes_list)}
        mask = Variable(torch.zeros(len(samp_neighs), len(unique_nodes)))
        column_indices = [unique_nodes[n] for samp_neigh in samp_neighs for n in samp_neigh]
        row_indices = [i for i in range(len(samp_neighs)) for j in range(len(samp_neighs[i]))]
        mask[row_indices, column_indices] = 1
        if self.cuda:
            mask = mask.cuda()
        num_neigh = mask.sum(1, keepdim=True)
        mask = mask.div(num_neigh)
        if self.cuda:
            embed_matrix = self.features(torch.LongTensor(unique_nodes_list).cuda())
        else:
            embed_matrix = self.features(torch.LongTensor(unique_nodes_list))
        to_feats = mask.mm(embed_matrix)
        return to_feats


# ---- graphsage/encoders.py ----

class Encoder(nn.Module):
    """
    Encodes a node's using 'convolutional' GraphSage approach
    """
    def __init__(self, features, feature_dim,
            embed_dim, adj_lists, aggregator,
            num_sample=10,
            base_model=None, gcn=False, cuda=False,
            feature_transform=False):
        super(Encoder, self).__init__()

        self.features = features
        self.feat_dim = feature_dim
        self.adj_lists = adj_lists
        self.aggregator = aggregator
        self.num_sample = num_sample
        if base_model != None:
            self.base_model = base_model

        self.gcn = gcn
        self.embed_dim = embed_dim
        self.cuda = cuda
        self.aggregator.cuda = cuda
        self.weight = nn.Parameter(
                torch.FloatTensor(embed_dim, self.feat_dim if self.gcn else 2 * self.feat_dim))
        init.xavier_uniform(self.weight)

    def forward(self, nodes):
        """
        Generates embeddings for a batch of nodes.

        nodes     -- list of nodes
        """
        neigh_feats = self.aggregator.forward(nodes, [self.adj_lists[int(node)] for node in nodes],
                self.num_sample)
        if not self.gcn:
            if self.cuda:
                self_feats = self.features(torch.LongTensor(nodes).cuda())
            else:
                self_feats = self.features(torch.LongTensor(nodes))
            combined = torch.cat([self_feats, neigh_feats], dim=1)
        else:
            combined = neigh_feats
        combined = F.relu(self.weight.mm(combined.t()))
        return combined


# ---- graphsage/model.py ----

class SupervisedGraphSage(nn.Module):

    def __init__(self, num_classes, enc):
        super(SupervisedGraphSage, self).__init__()
        self.enc = enc
        self.xent = nn.CrossEntropyLoss()

        self.weight = nn.Parameter(torch.FloatTensor(num_classes, enc.embed_dim))
        init.xavier_uniform(self.weight)

    def forward(self, nodes):
        embeds = self.enc(nodes)
        scores = self.weight.mm(embeds)
        return scores.t()

    def loss(self, nodes, labels):
        scores = self.forward(nodes)
        return self.xent(scores, labels.squeeze())


def load_cora(num_nodes, num_feats, num_classes, rng):
    labels = rng.integers(0, num_classes, (num_nodes, 1)).astype(np.int64)
    centers = rng.normal(0, 1, (num_classes, num_feats))
    feat_data = (centers[labels[:, 0]] + rng.normal(0, 1.5, (num_nodes, num_feats)) > 0.8).astype(np.float64)
    adj_lists = defaultdict(set)
    for node in range(num_nodes):
        for _ in range(rng.integers(1, 5)):
            same = rng.random() < 0.8
            pool = np.flatnonzero((labels[:, 0] == labels[node, 0]) == same)
            other = int(rng.choice(pool))
            if other != node:
                adj_lists[node].add(other)
                adj_lists[other].add(node)
    for other in range(1, 25, 2):          # a hub: its neighbours are sampled
        adj_lists[0].add(other)
        adj_lists[other].add(0)
    return feat_data, labels, adj_lists


def build(feat_data, adj_lists, num_nodes, num_feats):
    features = nn.Embedding(num_nodes, num_feats)
    features.weight = nn.Parameter(torch.FloatTensor(feat_data), requires_grad=False)
   # features.cuda()

    agg1 = MeanAggregator(features, cuda=True)
    enc1 = Encoder(features, num_feats, 16, adj_lists, agg1, gcn=True, cuda=False)
    agg2 = MeanAggregator(lambda nodes : enc1(nodes).t(), cuda=False)
    enc2 = Encoder(lambda nodes : enc1(nodes).t(), enc1.embed_dim, 16, adj_lists, agg2,
            base_model=enc1, gcn=True, cuda=False)
    enc1.num_samples = 5
    enc2.num_samples = 5

    graphsage = SupervisedGraphSage(4, enc2)
    return features, agg1, enc1, enc2, graphsage


def load_numpy(module, r):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.requires_grad:
                p.copy_(torch.from_numpy(r.normal(0, 0.3, tuple(p.shape)).astype(np.float32)))


def run_cora():
    np.random.seed(1)
    random.seed(1)
    r = np.random.default_rng(1)
    num_nodes, num_feats = 160, 24
    feat_data, labels, adj_lists = load_cora(num_nodes, num_feats, 4, r)
    print("graph", num_nodes, sum(len(v) for v in adj_lists.values()) // 2, "edges",
          max(len(v) for v in adj_lists.values()), "max degree")
    features, agg1, enc1, enc2, graphsage = build(feat_data, adj_lists, num_nodes, num_feats)
    print("params", [(n, tuple(p.shape), p.requires_grad) for n, p in graphsage.named_parameters()],
          enc1.cuda, agg1.cuda, agg2_cuda := enc2.aggregator.cuda, hasattr(enc2, 'base_model'),
          enc1.num_sample, enc1.num_samples, features.weight.dtype)
    w = enc1.weight
    bound = (6.0 / (w.shape[0] + w.shape[1])) ** 0.5
    print("xavier in bound", bool((w.abs() <= bound).all()), f"{bound:.4f}")
    load_numpy(graphsage, r)

    # one aggregation, checked against the dense mean
    nodes = [3, 7, 11]
    to_feats = agg1.forward(nodes, [adj_lists[int(n)] for n in nodes], 10)
    want = torch.stack([features.weight[sorted(adj_lists[n])].mean(0) for n in nodes])
    print("mean aggregate", tuple(to_feats.shape), torch.allclose(to_feats, want, atol=1e-6),
          fmt(to_feats[0], 4))

    rand_indices = np.random.permutation(num_nodes)
    test = rand_indices[:40]
    val = rand_indices[40:70]
    train = list(rand_indices[70:])

    optimizer = torch.optim.SGD(filter(lambda p : p.requires_grad, graphsage.parameters()), lr=0.7)
    times = []
    for batch in range(12):
        batch_nodes = train[:32]
        random.shuffle(train)
        start_time = time.time()
        optimizer.zero_grad()
        loss = graphsage.loss(batch_nodes,
                Variable(torch.LongTensor(labels[np.array(batch_nodes)])))
        loss.backward()
        optimizer.step()
        end_time = time.time()
        times.append(end_time-start_time)
        if batch % 3 == 0:
            print(batch, f"{loss.data.item():.5f}", f"{loss.data:.5f}")

    val_output = graphsage.forward(val)
    print("Validation F1:", f"{np.mean(labels[val][:, 0] == val_output.data.numpy().argmax(axis=1)):.4f}")
    print("Average batch time:", "[rng]", f"{np.mean(times):.4f}")
    print("features frozen", features.weight.grad is None, enc2.weight.grad is not None)
    return graphsage, labels, train, adj_lists


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


graphsage, labels, train, adj_lists = run_cora()

# the mask the aggregator builds, on its own
mask = Variable(torch.zeros(3, 5))
mask[[0, 0, 1, 2, 2, 2], [1, 4, 0, 2, 3, 4]] = 1
num_neigh = mask.sum(1, keepdim=True)
print("mask", mask.div(num_neigh).tolist(), num_neigh.flatten().tolist())

# one training step under torch.compile against the same step eagerly (no
# neighbour of these nodes is sampled: two hops from them every degree is
# under num_sample, so the traced Python is the same at each call)
optimizer = torch.optim.SGD(filter(lambda p : p.requires_grad, graphsage.parameters()), lr=0.7)
def unsampled(n):
    return len(adj_lists[n]) < 10 and all(len(adj_lists[m]) < 10 for m in adj_lists[n])


batch_nodes = [int(n) for n in train if unsampled(int(n))][:16]
batch_labels = Variable(torch.LongTensor(labels[np.array(batch_nodes)]))
print("no sampling", len(batch_nodes))


def train_step(batch_labels):
    optimizer.zero_grad()
    loss = graphsage.loss(batch_nodes, batch_labels)
    loss.backward()
    optimizer.step()
    return loss


state = copy.deepcopy(graphsage.state_dict())
eager = [train_step(batch_labels).item() for _ in range(2)]
after = {k: v.clone() for k, v in graphsage.state_dict().items()}
graphsage.load_state_dict(state)
cstep = torch.compile(train_step)
compiled = [cstep(batch_labels).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(graphsage.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
