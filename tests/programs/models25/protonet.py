# Prototypical Networks the way jakesnell/prototypical-networks and
# orobix/Prototypical-Networks-for-Few-shot-Learning-PyTorch write them.
# jakesnell: protonets/models/factory.py's MODEL_REGISTRY with
# @register_model('protonet_conv'), few_shot.py's Flatten module
# (x.view(x.size(0), -1)), conv_block and Protonet.loss(sample) with
# Variable(sample['xs']), target_inds = torch.arange(0, n_class).view(n_class,
# 1, 1).expand(n_class, n_query, 1).long(), torch.cat of xs.view(n_class *
# n_support, *xs.size()[2:]) and xq, z_proto via view(...).mean(1),
# utils.euclidean_dist through x.unsqueeze(1).expand(n, m, d),
# -log_p_y.gather(2, target_inds).squeeze().view(-1).mean(), torch.eq(y_hat,
# target_inds.squeeze()).float().mean(); its EpisodicBatchSampler yielding
# torch.randperm(n_classes)[:n_way]; the engine's Adam + StepLR loop with
# per-episode meters. orobix: PrototypicalBatchSampler (np.unique with
# return_counts, torch.LongTensor of the classes, an indexes matrix of NaNs
# as torch.Tensor filled through np.argwhere(self.classes == label).item()
# and np.where(np.isnan(self.indexes[label_idx])), torch.randperm of a
# 0-d numel_per_class entry, batch[s] = self.indexes[label_idx][sample_idxs]
# into an uninitialised torch.LongTensor(batch_size)) under
# DataLoader(batch_sampler=...), prototypical_loss (target.eq(c).nonzero()
# [:n_support].squeeze(1) over torch.unique classes, torch.stack of
# input_cpu[idx_list].mean(0) prototypes, query_idxs stacked then view(-1),
# y_hat.eq(target_inds.squeeze(2))), PrototypicalLoss(Module), ProtoNet,
# init_seed, the train loop's np.mean over the last iterations and the best
# model's state_dict through torch.save. Changes for a CPU test: a numpy
# 'Omniglot' of 6 classes x 8 images of 1 x 16 x 16 instead of the
# downloaded one, hid_dim / z_dim 64 -> 8, loss_val.data[0] (an error on a
# 0-d tensor today) as .item(), float64 by torch.set_default_dtype (the conv
# biases before BatchNorm have a zero gradient up to rounding, which Adam's
# eps = 1e-8 turns into lr-sized steps in float32, so two float32 runs
# drift apart by rounding alone); torch seeded with manual_seed(0), the
# samplers' torch.randperm episodes are printed with checks that hold for
# any draw, and the compared training draws its
# episodes from numpy (a sampler subclass); then one episode's training
# step under torch.compile against the same step eagerly.
import copy
import os
import tempfile

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.nn.modules import Module


def fmt(x, n=4):
    return [f"{v:.4f}" for v in x.reshape(-1)[:n].tolist()]


# ---- protonets/models/factory.py
MODEL_REGISTRY = {}


def register_model(model_name):
    def decorator(f):
        MODEL_REGISTRY[model_name] = f
        return f
    return decorator


def get_model(model_name, model_opt):
    if model_name in MODEL_REGISTRY:
        return MODEL_REGISTRY[model_name](**model_opt)
    else:
        raise ValueError("Unknown model {:s}".format(model_name))


# ---- protonets/models/utils.py
def euclidean_dist(x, y):
    # x: N x D
    # y: M x D
    n = x.size(0)
    m = y.size(0)
    d = x.size(1)
    assert d == y.size(1)

    x = x.unsqueeze(1).expand(n, m, d)
    y = y.unsqueeze(0).expand(n, m, d)

    return torch.pow(x - y, 2).sum(2)


# ---- protonets/models/few_shot.py
class Flatten(nn.Module):
    def __init__(self):
        super(Flatten, self).__init__()

    def forward(self, x):
        return x.view(x.size(0), -1)


class Protonet(nn.Module):
    def __init__(self, encoder):
        super(Protonet, self).__init__()

        self.encoder = encoder

    def loss(self, sample):
        xs = Variable(sample['xs']) # support
        xq = Variable(sample['xq']) # query

        n_class = xs.size(0)
        assert xq.size(0) == n_class
        n_support = xs.size(1)
        n_query = xq.size(1)

        target_inds = torch.arange(0, n_class).view(n_class, 1, 1).expand(n_class, n_query, 1).long()
        target_inds = Variable(target_inds, requires_grad=False)

        if xq.is_cuda:
            target_inds = target_inds.cuda()

        x = torch.cat([xs.view(n_class * n_support, *xs.size()[2:]),
                       xq.view(n_class * n_query, *xq.size()[2:])], 0)

        z = self.encoder.forward(x)
        z_dim = z.size(-1)

        z_proto = z[:n_class*n_support].view(n_class, n_support, z_dim).mean(1)
        zq = z[n_class*n_support:]

        dists = euclidean_dist(zq, z_proto)

        log_p_y = F.log_softmax(-dists, dim=1).view(n_class, n_query, -1)

        loss_val = -log_p_y.gather(2, target_inds).squeeze().view(-1).mean()

        _, y_hat = log_p_y.max(2)
        acc_val = torch.eq(y_hat, target_inds.squeeze()).float().mean()

        return loss_val, {
            'loss': loss_val.item(),
            'acc': acc_val.item()
        }


@register_model('protonet_conv')
def load_protonet_conv(**kwargs):
    x_dim = kwargs['x_dim']
    hid_dim = kwargs['hid_dim']
    z_dim = kwargs['z_dim']

    def conv_block(in_channels, out_channels):
        return nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 3, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
            nn.MaxPool2d(2)
        )

    encoder = nn.Sequential(
        conv_block(x_dim[0], hid_dim),
        conv_block(hid_dim, hid_dim),
        conv_block(hid_dim, hid_dim),
        conv_block(hid_dim, z_dim),
        Flatten()
    )

    return Protonet(encoder)


# ---- protonets/data/omniglot.py
class EpisodicBatchSampler(object):
    def __init__(self, n_classes, n_way, n_episodes):
        self.n_classes = n_classes
        self.n_way = n_way
        self.n_episodes = n_episodes

    def __len__(self):
        return self.n_episodes

    def __iter__(self):
        for i in range(self.n_episodes):
            yield torch.randperm(self.n_classes)[:self.n_way]


# ---- orobix: prototypical_batch_sampler.py
class PrototypicalBatchSampler(object):
    '''
    PrototypicalBatchSampler: yield a batch of indexes at each iteration.
    '''

    def __init__(self, labels, classes_per_it, num_samples, iterations):
        super(PrototypicalBatchSampler, self).__init__()
        self.labels = labels
        self.classes_per_it = classes_per_it
        self.sample_per_class = num_samples
        self.iterations = iterations

        self.classes, self.counts = np.unique(self.labels, return_counts=True)
        self.classes = torch.LongTensor(self.classes)

        # create a matrix, indexes, of dim: classes X max(elements per class)
        # fill it with nans
        # for every class c, fill the relative row with the indices samples belonging to c
        # in numel_per_class we store the number of samples for each class/row
        self.idxs = range(len(self.labels))
        self.indexes = np.empty((len(self.classes), max(self.counts)), dtype=int) * np.nan
        self.indexes = torch.Tensor(self.indexes)
        self.numel_per_class = torch.zeros_like(self.classes)
        for idx, label in enumerate(self.labels):
            label_idx = np.argwhere(self.classes == label).item()
            self.indexes[label_idx, np.where(np.isnan(self.indexes[label_idx]))[0][0]] = idx
            self.numel_per_class[label_idx] += 1

    def __iter__(self):
        '''
        yield a batch of indexes
        '''
        spc = self.sample_per_class
        cpi = self.classes_per_it

        for it in range(self.iterations):
            batch_size = spc * cpi
            batch = torch.LongTensor(batch_size)
            c_idxs = torch.randperm(len(self.classes))[:cpi]
            for i, c in enumerate(self.classes[c_idxs]):
                s = slice(i * spc, (i + 1) * spc)
                # FIXME when torch.argwhere will exists
                label_idx = torch.arange(len(self.classes)).long()[self.classes == c].item()
                sample_idxs = torch.randperm(self.numel_per_class[label_idx])[:spc]
                batch[s] = self.indexes[label_idx][sample_idxs]
            batch = batch[torch.randperm(len(batch))]
            yield batch

    def __len__(self):
        '''
        returns the number of iterations (episodes) per epoch
        '''
        return self.iterations


class NumpyPrototypicalBatchSampler(PrototypicalBatchSampler):
    """The same episodes with numpy's permutations (the test's change)."""

    def __init__(self, *args, seed=0, **kwargs):
        super().__init__(*args, **kwargs)
        self.rs = np.random.RandomState(seed)

    def __iter__(self):
        spc = self.sample_per_class
        cpi = self.classes_per_it

        for it in range(self.iterations):
            batch_size = spc * cpi
            batch = torch.LongTensor(batch_size)
            c_idxs = torch.from_numpy(self.rs.permutation(len(self.classes)))[:cpi]
            for i, c in enumerate(self.classes[c_idxs]):
                s = slice(i * spc, (i + 1) * spc)
                label_idx = torch.arange(len(self.classes)).long()[self.classes == c].item()
                sample_idxs = torch.from_numpy(self.rs.permutation(int(self.numel_per_class[label_idx])))[:spc]
                batch[s] = self.indexes[label_idx][sample_idxs]
            batch = batch[torch.from_numpy(self.rs.permutation(len(batch)))]
            yield batch


# ---- orobix: prototypical_loss.py
class PrototypicalLoss(Module):
    '''
    Loss class deriving from Module for the prototypical loss function defined below
    '''
    def __init__(self, n_support):
        super(PrototypicalLoss, self).__init__()
        self.n_support = n_support

    def forward(self, input, target):
        return prototypical_loss(input, target, self.n_support)


def prototypical_loss(input, target, n_support):
    target_cpu = target.to('cpu')
    input_cpu = input.to('cpu')

    def supp_idxs(c):
        # FIXME when torch will support where as np
        return target_cpu.eq(c).nonzero()[:n_support].squeeze(1)

    # FIXME when torch.unique will be available on cuda too
    classes = torch.unique(target_cpu)
    n_classes = len(classes)
    # FIXME when torch will support where as np
    # assuming n_query, n_target constants
    n_query = target_cpu.eq(classes[0].item()).sum().item() - n_support

    support_idxs = list(map(supp_idxs, classes))

    prototypes = torch.stack([input_cpu[idx_list].mean(0) for idx_list in support_idxs])
    # FIXME when torch will support where as np
    query_idxs = torch.stack(list(map(lambda c: target_cpu.eq(c).nonzero()[n_support:], classes))).view(-1)

    query_samples = input.to('cpu')[query_idxs]
    dists = euclidean_dist(query_samples, prototypes)

    log_p_y = F.log_softmax(-dists, dim=1).view(n_classes, n_query, -1)

    target_inds = torch.arange(0, n_classes)
    target_inds = target_inds.view(n_classes, 1, 1)
    target_inds = target_inds.expand(n_classes, n_query, 1).long()

    loss_val = -log_p_y.gather(2, target_inds).squeeze().view(-1).mean()
    _, y_hat = log_p_y.max(2)
    acc_val = y_hat.eq(target_inds.squeeze(2)).float().mean()

    return loss_val,  acc_val


# ---- orobix: protonet.py
def conv_block(in_channels, out_channels):
    '''
    returns a block conv-bn-relu-pool
    '''
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, padding=1),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
        nn.MaxPool2d(2)
    )


class ProtoNet(nn.Module):
    def __init__(self, x_dim=1, hid_dim=64, z_dim=64):
        super(ProtoNet, self).__init__()
        self.encoder = nn.Sequential(
            conv_block(x_dim, hid_dim),
            conv_block(hid_dim, hid_dim),
            conv_block(hid_dim, hid_dim),
            conv_block(hid_dim, z_dim),
        )

    def forward(self, x):
        x = self.encoder(x)
        return x.view(x.size(0), -1)


def init_seed(manual_seed):
    torch.cuda.cudnn_enabled = False
    np.random.seed(manual_seed)
    torch.manual_seed(manual_seed)
    torch.cuda.manual_seed(manual_seed)


def load_numpy(model, r):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.from_numpy(r.normal(0, np.sqrt(2.0 / fan_in), tuple(m.weight.shape))))
                m.bias.copy_(torch.from_numpy(r.normal(0, 0.05, tuple(m.bias.shape))))


init_seed(7)
torch.set_default_dtype(torch.float64)
N_CLASSES, PER_CLASS = 6, 8
rng = np.random.default_rng(0)
strokes = rng.normal(size=(N_CLASSES, 1, 16, 16))
images = np.stack([strokes[c] + 0.7 * rng.normal(size=(1, 16, 16)) for c in range(N_CLASSES) for _ in range(PER_CLASS)])
labels = np.repeat(np.arange(N_CLASSES), PER_CLASS)
perm = rng.permutation(len(labels))          # the dataset's order is not by class
images, labels = images[perm], labels[perm]
by_class = [torch.from_numpy(images[labels == c]) for c in range(N_CLASSES)]

# ---- jakesnell: the model from the registry, episodes as sample dicts
model = get_model('protonet_conv', {'x_dim': [1, 16, 16], 'hid_dim': 8, 'z_dim': 8})
load_numpy(model, np.random.default_rng(1))
print("registry", sorted(MODEL_REGISTRY), type(model.encoder[-1]).__name__, len(model.encoder))
try:
    get_model('protonet_lstm', {})
except ValueError as e:
    print("unknown:", e)

n_way, n_support, n_query = 3, 2, 3
sampler = EpisodicBatchSampler(N_CLASSES, n_way, n_episodes=4)
episodes = list(sampler)
print("episodic sampler", len(sampler), [len(e) for e in episodes],
      all(len(set(e.tolist())) == n_way and max(e.tolist()) < N_CLASSES for e in episodes),
      episodes[0].dtype)
print("episodes", [e.tolist() for e in episodes])


def make_sample(classes, rs):
    xs, xq = [], []
    for c in classes:
        idx = rs.permutation(PER_CLASS)
        xs.append(by_class[c][idx[:n_support]])
        xq.append(by_class[c][idx[n_support:n_support + n_query]])
    return {'xs': torch.stack(xs), 'xq': torch.stack(xq)}


optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2, gamma=0.5, last_epoch=-1)
rs = np.random.RandomState(3)
for epoch in range(2):
    meters = {'loss': [], 'acc': []}
    model.train()
    for ep in range(3):
        classes = rs.permutation(N_CLASSES)[:n_way]
        sample = make_sample(classes, rs)
        optimizer.zero_grad()
        loss, output = model.loss(sample)
        loss.backward()
        optimizer.step()
        for field, meter in meters.items():
            meter.append(output[field])
    scheduler.step()
    print("epoch", epoch, "loss", f"{np.mean(meters['loss']):.4f}", "acc", f"{np.mean(meters['acc']):.4f}",
          optimizer.param_groups[0]['lr'])

model.eval()
with torch.no_grad():
    sample = make_sample([0, 4, 5], rs)
    loss, output = model.loss(sample)
print("eval", f"{output['loss']:.4f}", f"{output['acc']:.4f}", tuple(sample['xs'].shape), tuple(sample['xq'].shape))
d = euclidean_dist(torch.tensor([[0., 0.], [1., 2.]]), torch.tensor([[1., 1.], [3., 0.], [0., 2.]]))
print("euclidean_dist", d.tolist(), torch.allclose(d, torch.cdist(torch.tensor([[0., 0.], [1., 2.]]),
                                                                  torch.tensor([[1., 1.], [3., 0.], [0., 2.]])) ** 2))

# ---- orobix: the batch sampler under a DataLoader, prototypical_loss
dataset = torch.utils.data.TensorDataset(torch.from_numpy(images), torch.from_numpy(labels))
sampler = PrototypicalBatchSampler(labels=labels, classes_per_it=3, num_samples=5, iterations=3)
print("indexes", tuple(sampler.indexes.shape), sampler.indexes.dtype, sampler.numel_per_class.tolist(),
      sampler.classes.tolist(), sampler.counts.tolist(), sampler.indexes[0].tolist()[:4])
print("index rows", all(sorted(np.where(labels == c)[0].tolist()) == sorted(int(v) for v in sampler.indexes[c].tolist())
                        for c in range(N_CLASSES)))
batches = list(iter(torch.utils.data.DataLoader(dataset, batch_sampler=sampler)))
print("prototypical batches", len(batches), [tuple(b[0].shape) for b in batches][:1],
      all(sorted(np.bincount(b[1].numpy(), minlength=N_CLASSES).tolist())[-3:] == [5, 5, 5] for b in batches),
      all(len(set(b[1].tolist())) == 3 for b in batches))
print("batch labels", [b[1].tolist() for b in batches])
raw = next(iter(sampler))
print("raw batch", raw.dtype, tuple(raw.shape), len(set(raw.tolist())) == 15)

model2 = ProtoNet(x_dim=1, hid_dim=8, z_dim=8)
load_numpy(model2, np.random.default_rng(2))
optim = torch.optim.Adam(params=model2.parameters(), lr=0.001)
lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer=optim, gamma=0.5, step_size=1)
loss_fn = PrototypicalLoss(n_support=2)
tr_sampler = NumpyPrototypicalBatchSampler(labels=labels, classes_per_it=3, num_samples=5, iterations=3, seed=5)
tr_dataloader = torch.utils.data.DataLoader(dataset, batch_sampler=tr_sampler)
train_loss, train_acc = [], []
best_acc, best_state = 0, None
with tempfile.TemporaryDirectory() as exp_dir:
    best_model_path = os.path.join(exp_dir, 'best_model.pth')
    for epoch in range(2):
        print('=== Epoch: {} ==='.format(epoch))
        tr_iter = iter(tr_dataloader)
        model2.train()
        for batch in tr_iter:
            optim.zero_grad()
            x, y = batch
            model_output = model2(x)
            loss, acc = loss_fn(model_output, target=y)
            loss.backward()
            optim.step()
            train_loss.append(loss.item())
            train_acc.append(acc.item())
        avg_loss = np.mean(train_loss[-3:])
        avg_acc = np.mean(train_acc[-3:])
        print('Avg Train Loss: {:.4f}, Avg Train Acc: {:.4f}'.format(avg_loss, avg_acc))
        lr_scheduler.step()
        if avg_acc >= best_acc:
            torch.save(model2.state_dict(), best_model_path)
            best_acc = avg_acc
            best_state = model2.state_dict()
    model2.load_state_dict(torch.load(best_model_path))
    print("best", f"{best_acc:.4f}", sorted(torch.load(best_model_path))[:3])
x, y = next(iter(torch.utils.data.DataLoader(dataset, batch_sampler=NumpyPrototypicalBatchSampler(
    labels=labels, classes_per_it=4, num_samples=4, iterations=1, seed=9))))
model2.eval()
with torch.no_grad():
    out = model2(x)
    l2, a2 = prototypical_loss(out, y, n_support=1)
print("proto loss", f"{l2.item():.4f}", f"{a2.item():.4f}", torch.unique(y).tolist(), tuple(out.shape))


# one episode's training step under torch.compile against the same step eagerly
model.train()
sample = make_sample([1, 2, 3], rs)


def train_step(xs, xq):
    optimizer.zero_grad()
    loss, output = model.loss({'xs': xs, 'xq': xq})
    loss.backward()
    optimizer.step()
    return loss


state0, opt0 = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(sample['xs'], sample['xq']).detach() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state0)
optimizer.load_state_dict(opt0)
cstep = torch.compile(train_step)
compiled = [cstep(sample['xs'], sample['xq']).detach() for _ in range(2)]
print("compiled loss", [f"{l.item():.4f}" for l in compiled])
print("compiled == eager:", all(torch.allclose(c, e, rtol=1e-4, atol=1e-5) for c, e in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
