# tkipf/pygcn (layers.py, models.py, utils.py, train.py), written from
# memory; imports swapped to tracec.  The Cora files and scipy.sparse are
# replaced by a random graph built with NumPy in COO form (same shapes and
# normalization as load_data).
import math
import time

import numpy as np

import tracec as torch
import tracec.nn as nn
import tracec.nn.functional as F
import tracec.optim as optim
from tracec.nn.parameter import Parameter
from tracec.nn.modules.module import Module


class GraphConvolution(Module):
    """Simple GCN layer, similar to https://arxiv.org/abs/1609.02907"""

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


def sparse_mx_to_torch_sparse_tensor(row, col, data, shape):
    """Convert a scipy sparse matrix to a torch sparse tensor."""
    indices = torch.from_numpy(np.vstack((row, col)).astype(np.int64))
    values = torch.from_numpy(data.astype(np.float32))
    shape = torch.Size(shape)
    return torch.sparse.FloatTensor(indices, values, shape)


def load_data(n=60, nfeat=20, nclass=3, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, nclass, n)
    features = (rng.random((n, nfeat)) < 0.2).astype(np.float32) + labels[:, None] * 0.1
    features = features / features.sum(1, keepdims=True)        # normalize(features)
    edges = rng.integers(0, n, (4 * n, 2))
    edges = edges[labels[edges[:, 0]] == labels[edges[:, 1]]]   # homophilous graph
    a = np.zeros((n, n), np.float32)
    a[edges[:, 0], edges[:, 1]] = 1
    a = np.maximum(a, a.T) + np.eye(n, dtype=np.float32)        # symmetric, + I
    a = a / a.sum(1, keepdims=True)                             # normalize(adj)
    row, col = np.nonzero(a)
    adj = sparse_mx_to_torch_sparse_tensor(row, col, a[row, col], a.shape)
    features = torch.FloatTensor(np.array(features))
    labels = torch.LongTensor(labels)
    idx_train = torch.LongTensor(range(0, 20))
    idx_val = torch.LongTensor(range(20, 40))
    idx_test = torch.LongTensor(range(40, 60))
    return adj, features, labels, idx_train, idx_val, idx_test


def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    correct = preds.eq(labels).double()
    correct = correct.sum()
    return correct / len(labels)


def main(epochs=30, fastmode=False):
    seed = 42
    np.random.seed(seed)
    torch.manual_seed(seed)
    adj, features, labels, idx_train, idx_val, idx_test = load_data()
    model = GCN(nfeat=features.shape[1], nhid=16, nclass=labels.max().item() + 1, dropout=0.5)
    optimizer = optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    print(model)

    def train(epoch):
        t = time.time()
        model.train()
        optimizer.zero_grad()
        output = model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        acc_train = accuracy(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()

        if not fastmode:
            model.eval()
            output = model(features, adj)

        loss_val = F.nll_loss(output[idx_val], labels[idx_val])
        acc_val = accuracy(output[idx_val], labels[idx_val])
        print('Epoch: {:04d}'.format(epoch + 1),
              'loss_train: {:.4f}'.format(loss_train.item()),
              'acc_train: {:.4f}'.format(acc_train.item()),
              'loss_val: {:.4f}'.format(loss_val.item()),
              'acc_val: {:.4f}'.format(acc_val.item()),
              'time: {:.4f}s'.format(time.time() - t))
        return loss_train.item()

    def test():
        model.eval()
        output = model(features, adj)
        loss_test = F.nll_loss(output[idx_test], labels[idx_test])
        acc_test = accuracy(output[idx_test], labels[idx_test])
        print("Test set results:",
              "loss= {:.4f}".format(loss_test.item()),
              "accuracy= {:.4f}".format(acc_test.item()))
        return acc_test.item()

    t_total = time.time()
    losses = [train(epoch) for epoch in range(epochs)]
    print("Optimization Finished!")
    print("Total time elapsed: {:.4f}s".format(time.time() - t_total))
    return losses, test()


if __name__ == "__main__":
    main()
