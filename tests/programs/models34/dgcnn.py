# DGCNN point-cloud classification the way WangYueFT/dgcnn writes it
# (pytorch/model.py, pytorch/util.py, pytorch/data.py, pytorch/main.py): knn
# (inner = -2 * torch.matmul(x.transpose(2, 1), x), xx = torch.sum(x ** 2,
# dim=1, keepdim=True), pairwise_distance = -xx - inner - xx.transpose(2, 1),
# .topk(k=k, dim=-1)[1]), get_graph_feature (idx_base = torch.arange(0,
# batch_size, device=device).view(-1, 1, 1) * num_points, the flat
# x.view(batch_size * num_points, -1)[idx, :] gather, .view(...).repeat(1, 1,
# k, 1), torch.cat((feature - x, x), dim=3).permute(0, 3, 1, 2).contiguous()),
# the EdgeConv blocks (Conv2d(bias=False) + BatchNorm2d + LeakyReLU(0.2) in
# nn.Sequential with the BatchNorms also held as attributes, .max(dim=-1,
# keepdim=False)[0]), the Conv1d head with F.adaptive_max_pool1d(x, 1).view(
# batch_size, -1) beside F.adaptive_avg_pool1d, Linear(bias=False) +
# BatchNorm1d + F.leaky_relu, nn.Dropout, cal_loss's label smoothing
# (torch.zeros_like(pred).scatter(1, gold.view(-1, 1), 1), one_hot * (1 - eps)
# + (1 - one_hot) * eps / (n_class - 1), F.log_softmax), data.py's
# translate_pointcloud / shuffled points in numpy, main.py's SGD(lr=lr * 100,
# momentum, weight_decay=1e-4) with CosineAnnealingLR(eta_min=lr), the train
# / test loops collecting numpy predictions, and sklearn's accuracy_score /
# balanced_accuracy_score (written in numpy here).
# Changes for a CPU test: no .cuda() (device = torch.device('cpu')); synthetic
# point clouds of four shape classes from numpy instead of ModelNet40's h5
# files; 64 points, k=8, small widths (8 / 8 / 16 / 16, emb_dims=32); dropout
# 0 in the compared training (one [rng] dropout pass beside it); sequential
# batches; --lr 0.0001 (at the default 0.001 the k nearest neighbours of
# learned features on this tiny set swap on float-rounding-level parameter
# differences after a step); scheduler.step() after each epoch as today's
# PyTorch asks; a few steps; then one step of the classifier's last Linear /
# BatchNorm1d / Linear under torch.compile against the same step eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import CosineAnnealingLR
from torch.utils.data import DataLoader, Dataset


# model.py
def knn(x, k):
    inner = -2 * torch.matmul(x.transpose(2, 1), x)
    xx = torch.sum(x ** 2, dim=1, keepdim=True)
    pairwise_distance = -xx - inner - xx.transpose(2, 1)

    idx = pairwise_distance.topk(k=k, dim=-1)[1]   # (batch_size, num_points, k)
    return idx


def get_graph_feature(x, k=20, idx=None):
    batch_size = x.size(0)
    num_points = x.size(2)
    x = x.view(batch_size, -1, num_points)
    if idx is None:
        idx = knn(x, k=k)   # (batch_size, num_points, k)
    device = torch.device('cpu')

    idx_base = torch.arange(0, batch_size, device=device).view(-1, 1, 1) * num_points

    idx = idx + idx_base

    idx = idx.view(-1)

    _, num_dims, _ = x.size()

    x = x.transpose(2, 1).contiguous()   # (batch_size, num_points, num_dims)  -> (batch_size*num_points, num_dims) #   batch_size * num_points * k + range(0, batch_size*num_points)
    feature = x.view(batch_size * num_points, -1)[idx, :]
    feature = feature.view(batch_size, num_points, k, num_dims)
    x = x.view(batch_size, num_points, 1, num_dims).repeat(1, 1, k, 1)

    feature = torch.cat((feature - x, x), dim=3).permute(0, 3, 1, 2).contiguous()

    return feature


class DGCNN(nn.Module):
    def __init__(self, args, output_channels=40):
        super(DGCNN, self).__init__()
        self.args = args
        self.k = args.k
        w = args.widths

        self.bn1 = nn.BatchNorm2d(w[0])
        self.bn2 = nn.BatchNorm2d(w[1])
        self.bn3 = nn.BatchNorm2d(w[2])
        self.bn4 = nn.BatchNorm2d(w[3])
        self.bn5 = nn.BatchNorm1d(args.emb_dims)

        self.conv1 = nn.Sequential(nn.Conv2d(6, w[0], kernel_size=1, bias=False),
                                   self.bn1,
                                   nn.LeakyReLU(negative_slope=0.2))
        self.conv2 = nn.Sequential(nn.Conv2d(w[0] * 2, w[1], kernel_size=1, bias=False),
                                   self.bn2,
                                   nn.LeakyReLU(negative_slope=0.2))
        self.conv3 = nn.Sequential(nn.Conv2d(w[1] * 2, w[2], kernel_size=1, bias=False),
                                   self.bn3,
                                   nn.LeakyReLU(negative_slope=0.2))
        self.conv4 = nn.Sequential(nn.Conv2d(w[2] * 2, w[3], kernel_size=1, bias=False),
                                   self.bn4,
                                   nn.LeakyReLU(negative_slope=0.2))
        self.conv5 = nn.Sequential(nn.Conv1d(sum(w), args.emb_dims, kernel_size=1, bias=False),
                                   self.bn5,
                                   nn.LeakyReLU(negative_slope=0.2))
        self.linear1 = nn.Linear(args.emb_dims * 2, 32, bias=False)
        self.bn6 = nn.BatchNorm1d(32)
        self.dp1 = nn.Dropout(p=args.dropout)
        self.linear2 = nn.Linear(32, 16)
        self.bn7 = nn.BatchNorm1d(16)
        self.dp2 = nn.Dropout(p=args.dropout)
        self.linear3 = nn.Linear(16, output_channels)

    def forward(self, x):
        batch_size = x.size(0)
        x = get_graph_feature(x, k=self.k)
        x = self.conv1(x)
        x1 = x.max(dim=-1, keepdim=False)[0]

        x = get_graph_feature(x1, k=self.k)
        x = self.conv2(x)
        x2 = x.max(dim=-1, keepdim=False)[0]

        x = get_graph_feature(x2, k=self.k)
        x = self.conv3(x)
        x3 = x.max(dim=-1, keepdim=False)[0]

        x = get_graph_feature(x3, k=self.k)
        x = self.conv4(x)
        x4 = x.max(dim=-1, keepdim=False)[0]

        x = torch.cat((x1, x2, x3, x4), dim=1)
        return self.head(x)

    def head(self, x):
        batch_size = x.size(0)
        x = self.conv5(x)
        x1 = F.adaptive_max_pool1d(x, 1).view(batch_size, -1)
        x2 = F.adaptive_avg_pool1d(x, 1).view(batch_size, -1)
        x = torch.cat((x1, x2), 1)

        x = F.leaky_relu(self.bn6(self.linear1(x)), negative_slope=0.2)
        x = self.dp1(x)
        x = F.leaky_relu(self.bn7(self.linear2(x)), negative_slope=0.2)
        x = self.dp2(x)
        x = self.linear3(x)
        return x


# util.py
def cal_loss(pred, gold, smoothing=True):
    ''' Calculate cross entropy loss, apply label smoothing if needed. '''

    gold = gold.contiguous().view(-1)

    if smoothing:
        eps = 0.2
        n_class = pred.size(1)

        one_hot = torch.zeros_like(pred).scatter(1, gold.view(-1, 1), 1)
        one_hot = one_hot * (1 - eps) + (1 - one_hot) * eps / (n_class - 1)
        log_prb = F.log_softmax(pred, dim=1)

        loss = -(one_hot * log_prb).sum(dim=1).mean()
    else:
        loss = F.cross_entropy(pred, gold, reduction='mean')

    return loss


class IOStream():
    def __init__(self):
        self.lines = []

    def cprint(self, text):
        print(text)
        self.lines.append(text)


# data.py (synthetic shapes instead of ModelNet40's h5 files)
def make_shapes(n, num_points, rng):
    data, label = [], []
    for i in range(n):
        c = i % 4
        u = rng.uniform(-1, 1, (num_points, 3))
        if c == 0:      # sphere
            p = u / np.linalg.norm(u, axis=1, keepdims=True)
        elif c == 1:    # cube surface
            p = u.copy()
            face = rng.integers(0, 3, num_points)
            p[np.arange(num_points), face] = np.sign(u[np.arange(num_points), face])
        elif c == 2:    # cylinder
            t = rng.uniform(0, 2 * np.pi, num_points)
            p = np.stack([np.cos(t), np.sin(t), u[:, 2]], 1)
        else:           # plane
            p = np.stack([u[:, 0], u[:, 1], 0.05 * u[:, 2]], 1)
        data.append(p + rng.normal(0, 0.02, p.shape))
        label.append([c])
    return np.asarray(data, dtype='float32'), np.asarray(label, dtype='int64')


def translate_pointcloud(pointcloud, rng):
    xyz1 = rng.uniform(low=2. / 3., high=3. / 2., size=[3])
    xyz2 = rng.uniform(low=-0.2, high=0.2, size=[3])

    translated_pointcloud = np.add(np.multiply(pointcloud, xyz1), xyz2).astype('float32')
    return translated_pointcloud


class ModelNet40(Dataset):
    def __init__(self, num_points, partition='train', seed=0):
        rng = np.random.default_rng(seed)
        self.data, self.label = make_shapes(16 if partition == 'train' else 8, num_points, rng)
        self.num_points = num_points
        self.partition = partition
        self.rng = np.random.default_rng(seed + 100)

    def __getitem__(self, item):
        pointcloud = self.data[item][:self.num_points]
        label = self.label[item]
        if self.partition == 'train':
            pointcloud = translate_pointcloud(pointcloud, self.rng)
            self.rng.shuffle(pointcloud)
        return pointcloud, label

    def __len__(self):
        return self.data.shape[0]


# sklearn.metrics, in numpy
def accuracy_score(y_true, y_pred):
    return float(np.mean(y_true == y_pred))


def balanced_accuracy_score(y_true, y_pred):
    recalls = [np.mean(y_pred[y_true == c] == c) for c in np.unique(y_true)]
    return float(np.mean(recalls))


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


class Args:
    k = 8
    widths = (8, 8, 16, 16)
    emb_dims = 32
    dropout = 0.0
    lr = 0.0001     # main.py's --lr (SGD at lr * 100)
    momentum = 0.9
    epochs = 2
    batch_size = 8
    test_batch_size = 8
    num_points = 64


args = Args()
io = IOStream()
device = torch.device('cpu')

# knn / get_graph_feature on their own
pts = torch.from_numpy(make_shapes(2, 64, np.random.default_rng(7))[0]).permute(0, 2, 1)
idx = knn(pts, k=args.k)
print("knn", tuple(idx.shape), idx.dtype, idx[0, 0].tolist(), bool((idx[:, :, 0] == torch.arange(64)).all()))
feat = get_graph_feature(pts, k=args.k)
print("graph feature", tuple(feat.shape), feat.is_contiguous(), fmt(feat[1, :, 5, 2], 6))
xs = torch.tensor([[[0.0, 1.0, 3.0, 7.0]]])
print("pairwise", (-torch.sum(xs ** 2, dim=1, keepdim=True) + 2 * torch.matmul(xs.transpose(2, 1), xs)
                   - torch.sum(xs ** 2, dim=1, keepdim=True).transpose(2, 1)).tolist())
smooth = cal_loss(torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 0.0]]), torch.tensor([[0], [2]]))
print("cal_loss", f"{smooth.item():.5f}", f"{cal_loss(torch.tensor([[2.0, 0.0, -1.0]]), torch.tensor([1]), False).item():.5f}")

train_loader = DataLoader(ModelNet40(partition='train', num_points=args.num_points), num_workers=0,
                          batch_size=args.batch_size, shuffle=False, drop_last=True)
test_loader = DataLoader(ModelNet40(partition='test', num_points=args.num_points), num_workers=0,
                         batch_size=args.test_batch_size, shuffle=False, drop_last=False)

torch.manual_seed(0)
model = DGCNN(args, output_channels=4).to(device)
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if 'bn' in name or name.startswith('conv') and p.dim() == 1:
            continue
        p.copy_(torch.from_numpy(r.normal(0, 0.4, tuple(p.shape)).astype(np.float32)))
print(str(model)[:120].replace('\n', ' | '))
print("params", sum(p.numel() for p in model.parameters()),
      "shared bn", model.conv1[1] is model.bn1, len(list(model.modules())))

opt = optim.SGD(model.parameters(), lr=args.lr * 100, momentum=args.momentum, weight_decay=1e-4)
scheduler = CosineAnnealingLR(opt, args.epochs, eta_min=args.lr)
criterion = cal_loss

best_test_acc = 0
for epoch in range(args.epochs):
    ####################
    # Train
    ####################
    train_loss = 0.0
    count = 0.0
    model.train()
    train_pred = []
    train_true = []
    for data, label in train_loader:
        data, label = data.to(device), label.to(device).squeeze()
        data = data.permute(0, 2, 1)
        batch_size = data.size()[0]
        opt.zero_grad()
        logits = model(data)
        loss = criterion(logits, label)
        loss.backward()
        opt.step()
        preds = logits.max(dim=1)[1]
        count += batch_size
        train_loss += loss.item() * batch_size
        train_true.append(label.cpu().numpy())
        train_pred.append(preds.detach().cpu().numpy())
    scheduler.step()
    train_true = np.concatenate(train_true)
    train_pred = np.concatenate(train_pred)
    outstr = 'Train %d, loss: %.6f, train acc: %.6f, train avg acc: %.6f' % (epoch,
                                                                             train_loss * 1.0 / count,
                                                                             accuracy_score(train_true, train_pred),
                                                                             balanced_accuracy_score(train_true, train_pred))
    io.cprint(outstr)

    ####################
    # Test
    ####################
    test_loss = 0.0
    count = 0.0
    model.eval()
    test_pred = []
    test_true = []
    for data, label in test_loader:
        data, label = data.to(device), label.to(device).squeeze()
        data = data.permute(0, 2, 1)
        batch_size = data.size()[0]
        logits = model(data)
        loss = criterion(logits, label)
        preds = logits.max(dim=1)[1]
        count += batch_size
        test_loss += loss.item() * batch_size
        test_true.append(label.cpu().numpy())
        test_pred.append(preds.detach().cpu().numpy())
    test_true = np.concatenate(test_true)
    test_pred = np.concatenate(test_pred)
    test_acc = accuracy_score(test_true, test_pred)
    avg_per_class_acc = balanced_accuracy_score(test_true, test_pred)
    outstr = 'Test %d, loss: %.6f, test acc: %.6f, test avg acc: %.6f' % (epoch,
                                                                          test_loss * 1.0 / count,
                                                                          test_acc,
                                                                          avg_per_class_acc)
    io.cprint(outstr)
    if test_acc >= best_test_acc:
        best_test_acc = test_acc
        best_state = copy.deepcopy(model.state_dict())
print("lr", f"{opt.param_groups[0]['lr']:.6f}", "bn5", fmt(model.bn5.running_var, 3),
      int(model.bn1.num_batches_tracked), "grad", fmt(model.conv1[0].weight.grad, 3))

# a dropout pass (PyTorch's generator draws: not compared)
model.dp1.p = model.dp2.p = 0.5
model.train()
out = model(data)
print("dropout logits", tuple(out.shape), fmt(out, 2))
model.dp1.p = model.dp2.p = 0.0

# one step of the classifier's last Linear / BatchNorm1d / Linear under
# torch.compile against eager
model.load_state_dict(best_state)
model.train()
feats = torch.from_numpy(np.random.default_rng(9).normal(0, 1, (8, 32)).astype(np.float32))
gold = torch.from_numpy(np.arange(8) % 4)
head_params = [p for n, p in model.named_parameters() if n.startswith(('linear2', 'bn7', 'linear3'))]
head_opt = optim.SGD(head_params, lr=0.1, momentum=0.9, weight_decay=1e-4)


def head_step(x, y):
    head_opt.zero_grad()
    x = F.leaky_relu(model.bn7(model.linear2(x)), negative_slope=0.2)
    loss = cal_loss(model.linear3(model.dp2(x)), y)
    loss.backward()
    head_opt.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(head_opt.state_dict())
eager = [head_step(feats, gold).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
head_opt.load_state_dict(opt_state)
cstep = torch.compile(head_step)
compiled = [cstep(feats, gold).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
