# Child-Sum Tree-LSTM semantic relatedness the way dasguptar/treelstm.pytorch
# writes it (treelstm/tree.py, model.py, dataset.py, utils.py, metrics.py,
# trainer.py, main.py): the Tree class (add_child, num_children, idx, the
# state attached to each node), SICKDataset.read_tree rebuilding a tree from a
# parents line, ChildSumTreeLSTM.node_forward (child_h_sum = torch.sum(child_h,
# dim=0, keepdim=True), iou = self.ioux(inputs) + self.iouh(child_h_sum),
# torch.split(iou, iou.size(1) // 3, dim=1), F.sigmoid / F.tanh,
# f = F.sigmoid(self.fh(child_h) + self.fx(inputs).repeat(len(child_h), 1)),
# fc = torch.mul(f, child_c), c = torch.mul(i, u) + torch.sum(fc, dim=0,
# keepdim=True), h = torch.mul(o, F.tanh(c))), the recursive forward with a
# leaf's zero state from inputs[0].detach().new(1, self.mem_dim).fill_(0.)
# .requires_grad_() and the children's states by zip(*map(lambda x: x.state,
# ...)) and torch.cat, Similarity (torch.mul(lvec, rvec), torch.abs(torch.add(
# lvec, -rvec)), torch.cat, F.sigmoid, F.log_softmax), SimilarityTreeLSTM (fed
# the root's c, as the repo does) with nn.Embedding(padding_idx=PAD,
# sparse=False) whose weight is copied from a normal_(0, 0.05) table with
# the special words zeroed and then frozen (emb.weight.requires_grad =
# False), utils.map_label_to_target's floor / ceil sparse distribution,
# nn.KLDivLoss() (its default 'mean' reduction), Adagrad over filter(lambda p:
# p.requires_grad, ...) with weight_decay, the trainer's per-pair
# loss.backward() with optimizer.step() when idx % batchsize == 0 and idx > 0,
# test()'s predictions[idx] = torch.dot(indices, torch.exp(output)) under
# torch.no_grad(), and Metrics' pearson ((x - x.mean()) / x.std() on deepcopies)
# and mse.
# Changes for a CPU test: a tiny synthetic SICK-like set (dependency parents
# lines, a 14-word vocabulary, relatedness scores in [1, 5]) from numpy
# instead of the SICK files and GloVe vectors, no tqdm, sequential indices in
# place of the trainer's torch.randperm (PyTorch's generator draws), small
# dims, two epochs; then one step of the Similarity head under torch.compile
# against the same step eagerly (the trees are Python structure, the head is
# a fixed-shape graph).
import copy
import math
from copy import deepcopy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

# Constants.py
PAD = 0
UNK = 1
BOS = 2
EOS = 3
PAD_WORD = '<blank>'
UNK_WORD = '<unk>'
BOS_WORD = '<s>'
EOS_WORD = '</s>'


# tree.py
class Tree(object):
    def __init__(self):
        self.parent = None
        self.num_children = 0
        self.children = list()

    def add_child(self, child):
        child.parent = self
        self.num_children += 1
        self.children.append(child)

    def size(self):
        if getattr(self, '_size', None):
            return self._size
        count = 1
        for i in range(self.num_children):
            count += self.children[i].size()
        self._size = count
        return self._size

    def depth(self):
        if getattr(self, '_depth', None):
            return self._depth
        count = 0
        if self.num_children > 0:
            for i in range(self.num_children):
                child_depth = self.children[i].depth()
                if child_depth > count:
                    count = child_depth
            count += 1
        self._depth = count
        return self._depth


# model.py
class ChildSumTreeLSTM(nn.Module):
    def __init__(self, in_dim, mem_dim):
        super(ChildSumTreeLSTM, self).__init__()
        self.in_dim = in_dim
        self.mem_dim = mem_dim
        self.ioux = nn.Linear(self.in_dim, 3 * self.mem_dim)
        self.iouh = nn.Linear(self.mem_dim, 3 * self.mem_dim)
        self.fx = nn.Linear(self.in_dim, self.mem_dim)
        self.fh = nn.Linear(self.mem_dim, self.mem_dim)

    def node_forward(self, inputs, child_c, child_h):
        child_h_sum = torch.sum(child_h, dim=0, keepdim=True)

        iou = self.ioux(inputs) + self.iouh(child_h_sum)
        i, o, u = torch.split(iou, iou.size(1) // 3, dim=1)
        i, o, u = F.sigmoid(i), F.sigmoid(o), F.tanh(u)

        f = F.sigmoid(
            self.fh(child_h) +
            self.fx(inputs).repeat(len(child_h), 1)
        )
        fc = torch.mul(f, child_c)

        c = torch.mul(i, u) + torch.sum(fc, dim=0, keepdim=True)
        h = torch.mul(o, F.tanh(c))
        return c, h

    def forward(self, tree, inputs):
        for idx in range(tree.num_children):
            self.forward(tree.children[idx], inputs)

        if tree.num_children == 0:
            child_c = inputs[0].detach().new(1, self.mem_dim).fill_(0.).requires_grad_()
            child_h = inputs[0].detach().new(1, self.mem_dim).fill_(0.).requires_grad_()
        else:
            child_c, child_h = zip(* map(lambda x: x.state, tree.children))
            child_c, child_h = torch.cat(child_c, dim=0), torch.cat(child_h, dim=0)

        tree.state = self.node_forward(inputs[tree.idx], child_c, child_h)
        return tree.state


# module for distance-angle similarity
class Similarity(nn.Module):
    def __init__(self, mem_dim, hidden_dim, num_classes):
        super(Similarity, self).__init__()
        self.mem_dim = mem_dim
        self.hidden_dim = hidden_dim
        self.num_classes = num_classes
        self.wh = nn.Linear(2 * self.mem_dim, self.hidden_dim)
        self.wp = nn.Linear(self.hidden_dim, self.num_classes)

    def forward(self, lvec, rvec):
        mult_dist = torch.mul(lvec, rvec)
        abs_dist = torch.abs(torch.add(lvec, -rvec))
        vec_dist = torch.cat((mult_dist, abs_dist), 1)

        out = F.sigmoid(self.wh(vec_dist))
        out = F.log_softmax(self.wp(out), dim=1)
        return out


# putting the whole model together
class SimilarityTreeLSTM(nn.Module):
    def __init__(self, vocab_size, in_dim, mem_dim, hidden_dim, num_classes, sparsity, freeze):
        super(SimilarityTreeLSTM, self).__init__()
        self.emb = nn.Embedding(vocab_size, in_dim, padding_idx=PAD, sparse=sparsity)
        if freeze:
            self.emb.weight.requires_grad = False
        self.childsumtreelstm = ChildSumTreeLSTM(in_dim, mem_dim)
        self.similarity = Similarity(mem_dim, hidden_dim, num_classes)

    def forward(self, ltree, linputs, rtree, rinputs):
        linputs = self.emb(linputs)
        rinputs = self.emb(rinputs)
        lstate, lhidden = self.childsumtreelstm(ltree, linputs)
        rstate, rhidden = self.childsumtreelstm(rtree, rinputs)
        output = self.similarity(lstate, rstate)
        return output


# dataset.py (the parsing half of SICKDataset)
def read_tree(line):
    parents = list(map(int, line.split()))
    trees = dict()
    root = None
    for i in range(1, len(parents) + 1):
        if i - 1 not in trees.keys() and parents[i - 1] != -1:
            idx = i
            prev = None
            while True:
                parent = parents[idx - 1]
                if parent == -1:
                    break
                tree = Tree()
                if prev is not None:
                    tree.add_child(prev)
                trees[idx - 1] = tree
                tree.idx = idx - 1
                if parent - 1 in trees.keys():
                    trees[parent - 1].add_child(tree)
                    break
                elif parent == 0:
                    root = tree
                    break
                else:
                    prev = tree
                    idx = parent
    return root


class SICKDataset:
    def __init__(self, pairs, vocab, num_classes):
        self.vocab = vocab
        self.num_classes = num_classes
        self.lsentences = [self.read_sentence(p[0]) for p in pairs]
        self.rsentences = [self.read_sentence(p[2]) for p in pairs]
        self.ltrees = [read_tree(p[1]) for p in pairs]
        self.rtrees = [read_tree(p[3]) for p in pairs]
        self.labels = torch.tensor([p[4] for p in pairs], dtype=torch.float, device='cpu')
        self.size = self.labels.size(0)

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        ltree = deepcopy(self.ltrees[index])
        rtree = deepcopy(self.rtrees[index])
        lsent = deepcopy(self.lsentences[index])
        rsent = deepcopy(self.rsentences[index])
        label = deepcopy(self.labels[index])
        return (ltree, lsent, rtree, rsent, label)

    def read_sentence(self, line):
        indices = [self.vocab.get(w, UNK) for w in line.split()]
        return torch.tensor(indices, dtype=torch.long, device='cpu')


# utils.py
def map_label_to_target(label, num_classes):
    target = torch.zeros(1, num_classes, dtype=torch.float, device='cpu')
    ceil = int(math.ceil(label))
    floor = int(math.floor(label))
    if ceil == floor:
        target[0, floor - 1] = 1
    else:
        target[0, floor - 1] = ceil - label
        target[0, ceil - 1] = label - floor
    return target


# metrics.py
class Metrics():
    def __init__(self, num_classes):
        self.num_classes = num_classes

    def pearson(self, predictions, labels):
        x = deepcopy(predictions)
        y = deepcopy(labels)
        x = (x - x.mean()) / x.std()
        y = (y - y.mean()) / y.std()
        return torch.mean(torch.mul(x, y))

    def mse(self, predictions, labels):
        x = deepcopy(predictions)
        y = deepcopy(labels)
        return torch.mean((x - y) ** 2)


# trainer.py
class Trainer(object):
    def __init__(self, args, model, criterion, optimizer, device):
        super(Trainer, self).__init__()
        self.args = args
        self.model = model
        self.criterion = criterion
        self.optimizer = optimizer
        self.device = device
        self.epoch = 0

    # helper function for training
    def train(self, dataset):
        self.model.train()
        self.optimizer.zero_grad()
        total_loss = 0.0
        indices = torch.arange(len(dataset), dtype=torch.long, device='cpu')
        for idx in range(len(dataset)):
            ltree, linput, rtree, rinput, label = dataset[indices[idx]]
            target = map_label_to_target(label, dataset.num_classes)
            linput, rinput = linput.to(self.device), rinput.to(self.device)
            target = target.to(self.device)
            output = self.model(ltree, linput, rtree, rinput)
            loss = self.criterion(output, target)
            total_loss += loss.item()
            loss.backward()
            if idx % self.args.batchsize == 0 and idx > 0:
                self.optimizer.step()
                self.optimizer.zero_grad()
        self.epoch += 1
        return total_loss / len(dataset)

    # helper function for testing
    def test(self, dataset):
        self.model.eval()
        with torch.no_grad():
            total_loss = 0.0
            predictions = torch.zeros(len(dataset), dtype=torch.float, device='cpu')
            indices = torch.arange(1, dataset.num_classes + 1, dtype=torch.float, device='cpu')
            for idx in range(len(dataset)):
                ltree, linput, rtree, rinput, label = dataset[idx]
                target = map_label_to_target(label, dataset.num_classes)
                linput, rinput = linput.to(self.device), rinput.to(self.device)
                target = target.to(self.device)
                output = self.model(ltree, linput, rtree, rinput)
                loss = self.criterion(output, target)
                total_loss += loss.item()
                output = output.squeeze().to('cpu')
                predictions[idx] = torch.dot(indices, torch.exp(output))
        return total_loss / len(dataset), predictions


class Args:
    input_dim = 6
    mem_dim = 8
    hidden_dim = 6
    num_classes = 5
    sparse = False
    freeze_embed = True
    lr = 0.05
    wd = 1e-4
    batchsize = 3
    epochs = 2


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


# a SICK-like set: sentences with dependency parents (1-based, 0 = root)
words = [PAD_WORD, UNK_WORD, BOS_WORD, EOS_WORD, 'a', 'man', 'woman', 'is', 'playing', 'guitar', 'the',
         'cooking', 'dog', 'runs']
vocab = {w: i for i, w in enumerate(words)}
raw = [
    ("a man is playing guitar", "2 4 4 0 4", "a woman is playing guitar", "2 4 4 0 4", 4.6),
    ("the dog runs", "2 3 0", "a dog runs", "2 3 0", 4.9),
    ("a man is cooking", "2 4 4 0", "the dog runs", "2 3 0", 1.0),
    ("a woman is cooking", "2 4 4 0", "a man is cooking", "2 4 4 0", 3.7),
    ("the man is playing", "2 4 4 0", "a man is playing guitar", "2 4 4 0 4", 4.2),
    ("a dog is playing", "2 4 4 0", "a woman runs", "2 3 0", 1.6),
    ("the woman is playing guitar", "2 4 4 0 4", "the man is cooking", "2 4 4 0", 2.3),
    ("a man runs", "2 3 0", "a man runs", "2 3 0", 5.0),
]
args = Args()
train_set = SICKDataset(raw[:5], vocab, args.num_classes)
test_set = SICKDataset(raw[5:], vocab, args.num_classes)
t0 = read_tree(raw[0][1])
print("tree", t0.idx, t0.num_children, [c.idx for c in t0.children], t0.size(), t0.depth(),
      [c.parent is t0 for c in t0.children])
print("targets", map_label_to_target(4.6, 5).tolist(), map_label_to_target(torch.tensor(5.0), 5).tolist())
item = train_set[1]
print("item", item[1].tolist(), item[3].tolist(), f"{item[4].item():.2f}", item[0] is train_set.ltrees[1])

torch.manual_seed(0)
device = torch.device('cpu')
model = SimilarityTreeLSTM(len(vocab), args.input_dim, args.mem_dim, args.hidden_dim, args.num_classes,
                           args.sparse, args.freeze_embed)
criterion = nn.KLDivLoss()
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if name != 'emb.weight':
            p.copy_(torch.from_numpy(r.normal(0, 0.3, tuple(p.shape)).astype(np.float32)))
# the embeddings: a normal table as the repo's emb.normal_(0, 0.05) (std 0.5
# here, from numpy, standing in for GloVe), its special words zeroed
emb = torch.zeros(len(vocab), args.input_dim, dtype=torch.float, device=device)
emb.copy_(torch.from_numpy(r.normal(0, 0.5, (len(vocab), args.input_dim)).astype(np.float32)))
for idx, word in enumerate([PAD_WORD, UNK_WORD, BOS_WORD, EOS_WORD]):
    emb[idx].zero_()
model.emb.weight.data.copy_(emb)
print("emb", model.emb.weight.requires_grad, model.emb.padding_idx, model.emb.sparse,
      [n for n, p in model.named_parameters() if p.requires_grad])
optimizer = optim.Adagrad(filter(lambda p: p.requires_grad, model.parameters()), lr=args.lr, weight_decay=args.wd)
metrics = Metrics(args.num_classes)
trainer = Trainer(args, model, criterion, optimizer, device)

# the leaf's zero state is a fresh leaf that requires grad
leaf = Tree()
leaf.idx = 0
c, h = model.childsumtreelstm(leaf, model.emb(torch.tensor([5])))
print("leaf", tuple(c.shape), fmt(h, 3), c.requires_grad, c.grad_fn is not None)

best = -float('inf')
for epoch in range(args.epochs):
    train_loss = trainer.train(train_set)
    train_loss, train_pred = trainer.test(train_set)
    test_loss, test_pred = trainer.test(test_set)
    train_pearson = metrics.pearson(train_pred, train_set.labels)
    train_mse = metrics.mse(train_pred, train_set.labels)
    print('==> Epoch {}, Train \tLoss: {:.6f}\tPearson: {:.6f}\tMSE: {:.6f}'.format(
        epoch, train_loss, train_pearson, train_mse))
    test_pearson = metrics.pearson(test_pred, test_set.labels)
    test_mse = metrics.mse(test_pred, test_set.labels)
    print('==> Epoch {}, Test \tLoss: {:.6f}\tPearson: {:.6f}\tMSE: {:.6f}'.format(
        epoch, test_loss, test_pearson, test_mse), fmt(test_pred, 3))
    if best < test_pearson or test_pearson != test_pearson:
        best = test_pearson
        checkpoint = {'model': copy.deepcopy(model.state_dict()), 'optim': copy.deepcopy(optimizer.state_dict()),
                      'pearson': test_pearson, 'mse': test_mse, 'args': args, 'epoch': epoch}
print("sum", [f"{v:.4e}" for v in optimizer.state[model.childsumtreelstm.ioux.weight]['sum'][4, :3].tolist()],
      "emb untouched", bool(torch.equal(model.emb.weight, emb)), model.emb.weight.grad)
print("checkpoint", sorted(checkpoint['model'].keys())[:3], checkpoint['epoch'])

# one step of the Similarity head under torch.compile against eager
sim = model.similarity
sim.train()
with torch.no_grad():
    lt, ls, rt, rs, label = train_set[0]
    lvec = model.childsumtreelstm(lt, model.emb(ls))[0]
    rvec = model.childsumtreelstm(rt, model.emb(rs))[0]
target = map_label_to_target(label, args.num_classes)
sim_opt = optim.Adagrad(sim.parameters(), lr=0.1, weight_decay=args.wd)


def sim_step(lvec, rvec, target):
    sim_opt.zero_grad()
    loss = criterion(sim(lvec, rvec), target)
    loss.backward()
    sim_opt.step()
    return loss


state, opt_state = copy.deepcopy(sim.state_dict()), copy.deepcopy(sim_opt.state_dict())
eager = [sim_step(lvec, rvec, target).item() for _ in range(2)]
after = {k: v.clone() for k, v in sim.state_dict().items()}
sim.load_state_dict(state)
sim_opt.load_state_dict(opt_state)
cstep = torch.compile(sim_step)
compiled = [cstep(lvec, rvec, target).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(sim.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
