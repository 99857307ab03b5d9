# Deep Graph Infomax the way PetarV-/DGI writes it (layers/gcn.py,
# layers/readout.py, layers/discriminator.py, models/dgi.py, models/logreg.py,
# utils/process.py, execute.py): the GCN layer (nn.Linear(bias=False),
# nn.PReLU(), xavier_uniform_ on Linear weights with bias.data.fill_(0.0), a
# separate bias Parameter filled with 0.0, torch.unsqueeze(torch.spmm(adj,
# torch.squeeze(seq_fts, 0)), 0) for a sparse adjacency and torch.bmm for a
# dense one), AvgReadout with its optional mask (torch.sum(seq * msk, 1) /
# torch.sum(msk)), the Discriminator's nn.Bilinear(n_h, n_h, 1) with
# torch.unsqueeze(c, 1).expand_as(h_pl) and torch.squeeze(..., 2), DGI's
# sigmoid readout and embed() returning h_1.detach(), c.detach(); process.py's
# preprocess_features row normalization (np.power(rowsum, -1).flatten(),
# r_inv[np.isinf(r_inv)] = 0.), normalize_adj and
# sparse_mx_to_torch_sparse_tensor (torch.sparse.FloatTensor(indices, values,
# shape), the legacy constructor); execute.py's loop: corruption by
# np.random.permutation(nb_nodes), lbl = torch.cat((lbl_1, lbl_2), 1),
# nn.BCEWithLogitsLoss, early stopping with patience saving
# torch.save(model.state_dict(), 'best_dgi.pkl') and loading it back, then
# the LogReg evaluation (xavier_uniform_, Adam with weight_decay, 
# torch.argmax accuracy, torch.stack(accs) mean / std).  Changes for a CPU
# test: scipy is replaced by a numpy COO (row / col / data arrays) for a
# synthetic 3-community graph instead of Cora, hidden size 16, few epochs,
# weights and the permutations from numpy (the torch-seeded xavier init is
# only checked by its bounds, [rng]); then one DGI step under torch.compile
# against eager.
import copy

import numpy as np
import torch
import torch.nn as nn


# layers/gcn.py
class GCN(nn.Module):
    def __init__(self, in_ft, out_ft, act, bias=True):
        super(GCN, self).__init__()
        self.fc = nn.Linear(in_ft, out_ft, bias=False)
        self.act = nn.PReLU() if act == 'prelu' else act

        if bias:
            self.bias = nn.Parameter(torch.FloatTensor(out_ft))
            self.bias.data.fill_(0.0)
        else:
            self.register_parameter('bias', None)

        for m in self.modules():
            self.weights_init(m)

    def weights_init(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight.data)
            if m.bias is not None:
                m.bias.data.fill_(0.0)

    # Shape of seq: (batch, nodes, features)
    def forward(self, seq, adj, sparse=False):
        seq_fts = self.fc(seq)
        if sparse:
            out = torch.unsqueeze(torch.spmm(adj, torch.squeeze(seq_fts, 0)), 0)
        else:
            out = torch.bmm(adj, seq_fts)
        if self.bias is not None:
            out += self.bias

        return self.act(out)


# layers/readout.py
class AvgReadout(nn.Module):
    def __init__(self):
        super(AvgReadout, self).__init__()

    def forward(self, seq, msk):
        if msk is None:
            return torch.mean(seq, 1)
        else:
            msk = torch.unsqueeze(msk, -1)
            return torch.sum(seq * msk, 1) / torch.sum(msk)


# layers/discriminator.py
class Discriminator(nn.Module):
    def __init__(self, n_h):
        super(Discriminator, self).__init__()
        self.f_k = nn.Bilinear(n_h, n_h, 1)

        for m in self.modules():
            self.weights_init(m)

    def weights_init(self, m):
        if isinstance(m, nn.Bilinear):
            torch.nn.init.xavier_uniform_(m.weight.data)
            if m.bias is not None:
                m.bias.data.fill_(0.0)

    def forward(self, c, h_pl, h_mi, s_bias1=None, s_bias2=None):
        c_x = torch.unsqueeze(c, 1)
        c_x = c_x.expand_as(h_pl)

        sc_1 = torch.squeeze(self.f_k(h_pl, c_x), 2)
        sc_2 = torch.squeeze(self.f_k(h_mi, c_x), 2)

        if s_bias1 is not None:
            sc_1 += s_bias1
        if s_bias2 is not None:
            sc_2 += s_bias2

        logits = torch.cat((sc_1, sc_2), 1)

        return logits


# models/dgi.py
class DGI(nn.Module):
    def __init__(self, n_in, n_h, activation):
        super(DGI, self).__init__()
        self.gcn = GCN(n_in, n_h, activation)
        self.read = AvgReadout()

        self.sigm = nn.Sigmoid()

        self.disc = Discriminator(n_h)

    def forward(self, seq1, seq2, adj, sparse, msk, samp_bias1, samp_bias2):
        h_1 = self.gcn(seq1, adj, sparse)

        c = self.read(h_1, msk)
        c = self.sigm(c)

        h_2 = self.gcn(seq2, adj, sparse)

        ret = self.disc(c, h_1, h_2, samp_bias1, samp_bias2)

        return ret

    # Detach the return variables
    def embed(self, seq, adj, sparse, msk):
        h_1 = self.gcn(seq, adj, sparse)
        c = self.read(h_1, msk)

        return h_1.detach(), c.detach()


# models/logreg.py
class LogReg(nn.Module):
    def __init__(self, ft_in, nb_classes):
        super(LogReg, self).__init__()
        self.fc = nn.Linear(ft_in, nb_classes)

        for m in self.modules():
            self.weights_init(m)

    def weights_init(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight.data)
            if m.bias is not None:
                m.bias.data.fill_(0.0)

    def forward(self, seq):
        ret = self.fc(seq)
        return ret


# utils/process.py, with a numpy COO (row, col, data, shape) for scipy's
class COO:
    def __init__(self, row, col, data, shape):
        self.row, self.col, self.data, self.shape = row, col, data, shape

    def todense(self):
        d = np.zeros(self.shape, dtype=self.data.dtype)
        np.add.at(d, (self.row, self.col), self.data)
        return d


def preprocess_features(features):
    """Row-normalize feature matrix and convert to tuple representation"""
    rowsum = np.array(features.sum(1))
    r_inv = np.power(rowsum, -1).flatten()
    r_inv[np.isinf(r_inv)] = 0.
    features = r_inv[:, None] * features
    return features


def normalize_adj(adj):
    """Symmetrically normalize adjacency matrix."""
    rowsum = np.bincount(adj.row, weights=adj.data, minlength=adj.shape[0])
    with np.errstate(divide='ignore'):
        d_inv_sqrt = np.power(rowsum, -0.5).flatten()
    d_inv_sqrt[np.isinf(d_inv_sqrt)] = 0.
    return COO(adj.row, adj.col, d_inv_sqrt[adj.row] * adj.data * d_inv_sqrt[adj.col], adj.shape)


def sparse_mx_to_torch_sparse_tensor(sparse_mx):
    """Convert a scipy sparse matrix to a torch sparse tensor."""
    indices = torch.from_numpy(
        np.vstack((sparse_mx.row, sparse_mx.col)).astype(np.int64))
    values = torch.from_numpy(sparse_mx.data.astype(np.float32))
    shape = torch.Size(sparse_mx.shape)
    return torch.sparse.FloatTensor(indices, values, shape)


def fmt(t, n=4):
    return [f"{v:.4f}" for v in torch.as_tensor(t).reshape(-1)[:n].tolist()]


def load_numpy(model, seed, std=0.3):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("act.weight"):
                continue        # PReLU keeps its 0.25
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


# a three-community graph, one isolated node, one all-zero feature row
rng = np.random.default_rng(0)
nb_nodes, ft_size, nb_classes = 24, 12, 3
labels_np = np.repeat(np.arange(nb_classes), 8)
pairs = [(i, j) for i in range(nb_nodes - 1) for j in range(i + 1, nb_nodes - 1)
         if rng.random() < (0.4 if labels_np[i] == labels_np[j] else 0.05)]
row = np.array([i for i, j in pairs] + [j for i, j in pairs] + list(range(nb_nodes)))
col = np.array([j for i, j in pairs] + [i for i, j in pairs] + list(range(nb_nodes)))
adj = COO(row, col, np.ones(len(row)), (nb_nodes, nb_nodes))
features = np.abs(rng.normal(0, 1, (nb_nodes, ft_size)) + 2.0 * np.eye(nb_classes)[labels_np].repeat(4, 1))
features[5] = 0.0
features = preprocess_features(features)
print("features", features.shape, f"{features[0].sum():.4f}", features[5].sum())
adj = normalize_adj(adj)

sparse = True
nonlinearity = 'prelu'
hid_units = 16
batch_size = 1
patience = 3
lr = 0.01
l2_coef = 0.0

sp_adj = sparse_mx_to_torch_sparse_tensor(adj)
print("sp_adj", sp_adj.is_sparse, sp_adj.dtype, tuple(sp_adj.shape), sp_adj._nnz(), sp_adj.layout)
dense_adj = torch.FloatTensor(adj.todense()[np.newaxis])
features_t = torch.FloatTensor(features[np.newaxis])
labels = torch.FloatTensor(np.eye(nb_classes)[labels_np][np.newaxis])
perm0 = rng.permutation(nb_nodes)
idx_train = torch.LongTensor(np.sort(perm0[:9]))
idx_val = torch.LongTensor(np.sort(perm0[9:15]))
idx_test = torch.LongTensor(np.sort(perm0[15:]))

torch.manual_seed(0)
model = DGI(ft_size, hid_units, nonlinearity)
bound = (6 / (ft_size + hid_units)) ** 0.5
print("xavier", bool(model.gcn.fc.weight.abs().max() <= bound), model.gcn.bias.abs().sum().item(),
      model.disc.f_k.bias.item(), tuple(model.disc.f_k.weight.shape))
print("prelu", model.gcn.act.weight.tolist(), [n for n, _ in model.named_parameters()])
load_numpy(model, 1)
optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=l2_coef)

# sparse and dense GCN agree; the masked readout
h_s = model.gcn(features_t, sp_adj, True)
h_d = model.gcn(features_t, dense_adj, False)
print("gcn sparse == dense", torch.allclose(h_s, h_d, atol=1e-6), tuple(h_s.shape), fmt(h_s[0, 0]))
msk = torch.FloatTensor((np.arange(nb_nodes) % 2 == 0)[np.newaxis].astype(np.float32))
print("readout", fmt(model.read(h_s, None)), fmt(model.read(h_s, msk)), tuple(model.read(h_s, msk).shape))

b_xent = nn.BCEWithLogitsLoss()
xent = nn.CrossEntropyLoss()
cnt_wait = 0
best = 1e9
best_t = 0
perm_rng = np.random.RandomState(5)

for epoch in range(10):
    model.train()
    optimiser.zero_grad()

    idx = perm_rng.permutation(nb_nodes)
    shuf_fts = features_t[:, idx, :]

    lbl_1 = torch.ones(batch_size, nb_nodes)
    lbl_2 = torch.zeros(batch_size, nb_nodes)
    lbl = torch.cat((lbl_1, lbl_2), 1)

    logits = model(features_t, shuf_fts, sp_adj if sparse else dense_adj, sparse, None, None, None)

    loss = b_xent(logits, lbl)

    print('Loss:', f"{loss.item():.5f}", "logits", tuple(logits.shape))

    if loss < best:
        best = loss
        best_t = epoch
        cnt_wait = 0
        torch.save(model.state_dict(), 'best_dgi.pkl')
    else:
        cnt_wait += 1

    if cnt_wait == patience:
        print('Early stopping!')
        break

    loss.backward()
    optimiser.step()

print('Loading {}th epoch'.format(best_t), type(best).__name__, f"{best.item():.5f}")
model.load_state_dict(torch.load('best_dgi.pkl'))

embeds, _ = model.embed(features_t, sp_adj if sparse else dense_adj, sparse, None)
print("embeds", embeds.requires_grad, tuple(embeds.shape), fmt(embeds[0, 3]))
train_embs = embeds[0, idx_train]
val_embs = embeds[0, idx_val]
test_embs = embeds[0, idx_test]

train_lbls = torch.argmax(labels[0, idx_train], dim=1)
val_lbls = torch.argmax(labels[0, idx_val], dim=1)
test_lbls = torch.argmax(labels[0, idx_test], dim=1)

tot = torch.zeros(1)
accs = []

for run in range(3):
    log = LogReg(hid_units, nb_classes)
    load_numpy(log, 10 + run)
    opt = torch.optim.Adam(log.parameters(), lr=0.01, weight_decay=0.0)

    for _ in range(20):
        log.train()
        opt.zero_grad()

        logits = log(train_embs)
        loss = xent(logits, train_lbls)

        loss.backward()
        opt.step()

    logits = log(test_embs)
    preds = torch.argmax(logits, dim=1)
    acc = torch.sum(preds == test_lbls).float() / test_lbls.shape[0]
    accs.append(acc * 100)
    print("run", run, "loss", f"{loss.item():.5f}", "acc", f"{acc.item():.4f}")
    tot += acc

print('Average accuracy:', tot / 3)

accs = torch.stack(accs)
print(f"{accs.mean().item():.4f}", f"{accs.std().item():.4f}", accs.dtype, tuple(accs.shape))

# with sample biases and a dense adjacency
sb = torch.full((1, nb_nodes), 0.5)
lg = model(features_t, features_t[:, perm_rng.permutation(nb_nodes), :], dense_adj, False, msk, sb, sb)
print("biased logits", fmt(lg[0, :3]), fmt(lg[0, nb_nodes:nb_nodes + 3]))


# one DGI step under torch.compile against the same step eagerly (dense adj)
def dgi_step(seq1, seq2, adj):
    optimiser.zero_grad()
    logits = model(seq1, seq2, adj, False, None, None, None)
    loss = b_xent(logits, lbl)
    loss.backward()
    optimiser.step()
    return loss


shuf = features_t[:, perm_rng.permutation(nb_nodes), :]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimiser.state_dict())
eager = [dgi_step(features_t, shuf, dense_adj).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimiser.load_state_dict(opt_state)
cstep = torch.compile(dgi_step)
compiled = [cstep(features_t, shuf, dense_adj).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
