# A data pipeline the way training scripts write it around
# torch.utils.data (the pattern of kuangliu/pytorch-cifar's and the
# ImageNet example's loaders, with the transforms written by hand over numpy
# HWC uint8 images as numpy-only scripts do): a map-style Dataset over
# numpy images with Compose / RandomCrop(padding=4) / RandomHorizontalFlip /
# ToTensor / Normalize classes, random_split(..., generator=
# torch.Generator().manual_seed(42)) with counts and with fractions,
# ConcatDataset and Subset, WeightedRandomSampler from inverse class
# frequencies, DataLoader(num_workers=0, collate_fn=..., drop_last=True,
# pin_memory=True, persistent_workers=False), default_collate on dicts of
# tensors / numpy arrays / numbers / strings / tuples, an IterableDataset
# splitting its range by get_worker_info(), BatchSampler and
# SequentialSampler, shuffling with a seeded generator, and a few
# training steps from the loader.
# Changes for a CPU test: 8 x 8 images from numpy instead of CIFAR files,
# the transforms' random parameters from np.random (torchvision draws them
# from torch's generator); torch seeded with manual_seed(0), the orders
# from torch's generators (random_split, the samplers) are printed with
# their invariants. Then one training
# step under torch.compile against the same step eagerly.
import copy
import math

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset, IterableDataset,
                              SequentialSampler, Subset, TensorDataset, WeightedRandomSampler,
                              get_worker_info, random_split)
from torch.utils.data.dataloader import default_collate

rs = np.random.RandomState(0)


# transforms, by hand ----------------------------------------------------------

class Compose(object):
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class RandomCrop(object):
    def __init__(self, size, padding=0):
        self.size = size
        self.padding = padding

    def __call__(self, img):
        if self.padding > 0:
            img = np.pad(img, ((self.padding, self.padding), (self.padding, self.padding), (0, 0)),
                         mode='constant')
        h, w = img.shape[:2]
        i = rs.randint(0, h - self.size + 1)
        j = rs.randint(0, w - self.size + 1)
        return img[i:i + self.size, j:j + self.size]


class RandomHorizontalFlip(object):
    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if rs.rand() < self.p:
            return img[:, ::-1]
        return img


class ToTensor(object):
    """HWC uint8 in [0, 255] -> CHW float in [0, 1]."""

    def __call__(self, pic):
        img = torch.from_numpy(np.ascontiguousarray(pic.transpose((2, 0, 1))))
        return img.float().div(255)


class Normalize(object):
    def __init__(self, mean, std):
        self.mean = torch.tensor(mean).view(-1, 1, 1)
        self.std = torch.tensor(std).view(-1, 1, 1)

    def __call__(self, tensor):
        return (tensor - self.mean) / self.std


# datasets ---------------------------------------------------------------------

class NumpyImages(Dataset):
    def __init__(self, images, labels, transform=None):
        self.images = images
        self.labels = labels
        self.transform = transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        img = self.images[idx]
        if self.transform is not None:
            img = self.transform(img)
        return img, int(self.labels[idx])


class Records(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"x": torch.arange(3, dtype=torch.float32) + i, "arr": np.full(2, i, dtype=np.int32),
                "y": i % 3, "w": 0.5 * i, "name": f"item{i}", "pair": (i, torch.tensor([i, -i]))}


class RangeStream(IterableDataset):
    def __init__(self, start, end):
        super(RangeStream).__init__()
        assert end > start, "this example code only works with end >= start"
        self.start = start
        self.end = end

    def __iter__(self):
        worker_info = get_worker_info()
        if worker_info is None:  # single-process data loading, return the full iterator
            iter_start = self.start
            iter_end = self.end
        else:  # in a worker process
            # split workload
            per_worker = int(math.ceil((self.end - self.start) / float(worker_info.num_workers)))
            worker_id = worker_info.id
            iter_start = self.start + worker_id * per_worker
            iter_end = min(iter_start + per_worker, self.end)
        return iter(range(iter_start, iter_end))


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


images = (rs.rand(60, 8, 8, 3) * 255).astype(np.uint8)
labels = rs.choice(4, size=60, p=[0.55, 0.25, 0.15, 0.05])
mean, std = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)
transform_train = Compose([RandomCrop(8, padding=4), RandomHorizontalFlip(), ToTensor(), Normalize(mean, std)])
transform_test = Compose([ToTensor(), Normalize(mean, std)])

trainset = NumpyImages(images, labels, transform=transform_train)
testset = NumpyImages(images, labels, transform=transform_test)
x0, y0 = testset[3]
print("test item", tuple(x0.shape), x0.dtype, y0, type(y0).__name__, fmt(x0[1, 2], 4))
xt, yt = trainset[3]
# the crop is one of the padded image's windows, maybe flipped
padded = torch.nn.functional.pad(transform_test(images[3]), (4, 4, 4, 4), value=0.0)
zero = ((torch.zeros(3, 1, 1) - torch.tensor(mean).view(-1, 1, 1)) / torch.tensor(std).view(-1, 1, 1))
mask = torch.zeros(1, 16, 16, dtype=torch.bool)
mask[:, 4:12, 4:12] = True
padded = torch.where(mask, padded, zero)
windows = [(i, j, flip) for i in range(9) for j in range(9) for flip in (False, True)
           if torch.allclose((padded[:, i:i + 8, j:j + 8].flip(-1) if flip else padded[:, i:i + 8, j:j + 8]), xt, atol=1e-6)]
print("train item", tuple(xt.shape), yt, "window", windows[:1], len(windows) >= 1)

# random_split with a seeded generator
lengths = [45, 15]
train_part, val_part = random_split(trainset, lengths, generator=torch.Generator().manual_seed(42))
print("split", type(train_part).__name__, len(train_part), len(val_part),
      sorted(train_part.indices + val_part.indices) == list(range(60)),
      train_part.indices[:5])
again = random_split(range(60), lengths, generator=torch.Generator().manual_seed(42))
print("split repeats", list(again[0]) == list(train_part.indices), list(again[1])[:0])
fracs = random_split(range(10), [0.7, 0.2, 0.1], generator=torch.Generator().manual_seed(0))
print("fractions", [len(f) for f in fracs])
odd = random_split(range(11), [0.5, 0.5], generator=torch.Generator().manual_seed(0))
print("fractions remainder", [len(f) for f in odd])
try:
    random_split(range(10), [3, 3])
except ValueError as e:
    print("ValueError", e)

# ConcatDataset and Subset
concat = ConcatDataset([Subset(testset, [0, 1, 2]), Subset(testset, range(10, 14)), TensorDataset(torch.ones(2, 3, 8, 8), torch.tensor([7, 8]))])
print("concat", len(concat), concat.cumulative_sizes, concat[3][1], concat[-1][1], concat[7][1],
      torch.equal(concat[4][0], testset[11][0]))
try:
    concat[20]
except IndexError as e:
    print("IndexError")   # (torch's text is list indexing's; tracec's names the index and length)
sub = Subset(concat, [8, 0, 5])
print("subset", len(sub), [sub[i][1] for i in range(3)], type(sub.dataset).__name__)

# WeightedRandomSampler from inverse class frequencies
counts = np.bincount(labels, minlength=4)
class_weights = 1.0 / counts
sample_weights = torch.from_numpy(class_weights[labels])
sampler = WeightedRandomSampler(sample_weights, num_samples=400, replacement=True)
drawn = torch.tensor(list(sampler))
hist = torch.bincount(torch.from_numpy(labels)[drawn], minlength=4)
print("counts", counts.tolist(), "weighted", len(sampler), sample_weights.dtype,
      "balanced", bool((hist.float() / 400 - 0.25).abs().max() < 0.1), hist.tolist())
no_rep = list(WeightedRandomSampler([0.1, 0.0, 0.5, 0.4], 3, replacement=False))
print("without replacement", sorted(no_rep), len(set(no_rep)))
try:
    WeightedRandomSampler([0.1, 0.2], num_samples=0)
except ValueError as e:
    print("ValueError", e)


# DataLoader with a collate_fn, drop_last, pin_memory
def collate_fn(batch):
    imgs, targets = zip(*batch)
    return torch.stack(imgs, 0), torch.tensor(targets, dtype=torch.long)


loader = DataLoader(testset, batch_size=16, shuffle=False, num_workers=0, collate_fn=collate_fn,
                    drop_last=True, pin_memory=True, persistent_workers=False)
shapes = [(tuple(xb.shape), yb.tolist()[:4], xb.is_pinned()) for xb, yb in loader]
print("loader", len(loader), len(shapes), shapes[0][:2], shapes[-1][1], loader.drop_last)
default_loader = DataLoader(testset, batch_size=16)
bx, by = next(iter(default_loader))
print("default loader", len(default_loader), tuple(bx.shape), by.dtype, by.tolist()[:6],
      [tuple(b[0].shape) for b in default_loader][-1])
wloader = DataLoader(trainset, batch_size=10, sampler=WeightedRandomSampler(sample_weights, 30))
print("sampler loader", len(wloader), [tuple(b[0].shape) for b in wloader])
try:
    DataLoader(testset, batch_size=4, shuffle=True, sampler=SequentialSampler(testset))
except ValueError as e:
    print("ValueError", e)
# shuffling with a seeded generator: the same seed gives the same epochs,
# and each epoch its own order
ids = TensorDataset(torch.arange(60))
epochs = []
for _ in range(2):
    dl = DataLoader(ids, batch_size=16, shuffle=True, drop_last=True,
                    generator=torch.Generator().manual_seed(7))
    epochs.append([torch.cat([b[0] for b in dl]).tolist() for _ in range(2)])
print("shuffle", len(dl), len(epochs[0][0]), epochs[0] == epochs[1], epochs[0][0] != epochs[0][1],
      sorted(epochs[0][0]) != list(range(48)), len(set(epochs[0][0])) == 48, epochs[0][0][:4])
bs = BatchSampler(SequentialSampler(range(10)), batch_size=4, drop_last=False)
print("batch sampler", list(bs), len(bs), len(BatchSampler(range(10), 4, True)))
bl = DataLoader(testset, batch_sampler=BatchSampler(SequentialSampler(range(7)), 3, False))
print("batch_sampler loader", [b[1].tolist() for b in bl])

# default_collate on records
batch = default_collate([Records(5)[i] for i in (1, 4)])
print("collate keys", list(batch.keys()))
print("x", batch["x"].tolist(), batch["x"].dtype)
print("arr", batch["arr"].tolist(), batch["arr"].dtype, "y", batch["y"].tolist(), batch["y"].dtype,
      "w", batch["w"].tolist(), batch["w"].dtype)
print("name", batch["name"], "pair", type(batch["pair"]).__name__, batch["pair"][0].tolist(), batch["pair"][1].tolist())
rloader = DataLoader(Records(7), batch_size=3, drop_last=False)
print("record batches", [b["y"].tolist() for b in rloader], [b["name"] for b in rloader][-1])
print("collate numbers", default_collate([1, 2]).dtype, default_collate([1.5, 2.0]).dtype,
      default_collate([True, False]).dtype, default_collate(["a", "b"]),
      default_collate([np.float32(1.0), np.float32(2.0)]).dtype, default_collate([np.array(3.0)]).dtype)
try:
    default_collate([torch.zeros(2), torch.zeros(3)])
except RuntimeError as e:
    print("RuntimeError")   # (torch's text is stack's; tracec's names the item and the field)

# IterableDataset and get_worker_info
stream = RangeStream(3, 10)
print("worker info", get_worker_info())
print("stream", list(DataLoader(stream, num_workers=0)), [b.tolist() for b in DataLoader(stream, batch_size=3)])
print("stream drop_last", [b.tolist() for b in DataLoader(stream, batch_size=3, drop_last=True)])
try:
    DataLoader(stream, shuffle=True)
except ValueError as e:
    print("ValueError", e)
print("chain", [int(v) for v in (RangeStream(0, 2) + RangeStream(5, 7))])


# a few training steps from the loader
class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.fc = nn.Linear(6 * 4 * 4, 4)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.fc(x.view(x.size(0), -1))


net = Net()
with torch.no_grad():
    for p in net.parameters():
        p.copy_(torch.from_numpy(rs.normal(0, 0.2, tuple(p.shape)).astype(np.float32)))
optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
criterion = nn.CrossEntropyLoss(weight=torch.tensor(class_weights / class_weights.sum(), dtype=torch.float32))
train_loader = DataLoader(trainset, batch_size=12, shuffle=False, drop_last=True, collate_fn=collate_fn)
for epoch in range(2):
    running = 0.0
    for i, (inputs, targets) in enumerate(train_loader):
        optimizer.zero_grad()
        loss = criterion(net(inputs), targets)
        loss.backward()
        optimizer.step()
        running += loss.item()
    print("epoch", epoch, f"{running / len(train_loader):.5f}")


# one training step under torch.compile against the same step eagerly
def train_step(inputs, targets):
    optimizer.zero_grad()
    loss = criterion(net(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss


xb, yb = next(iter(loader))
state, opt_state = copy.deepcopy(net.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(xb, yb).item() for _ in range(2)]
after = {k: v.clone() for k, v in net.state_dict().items()}
net.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(xb, yb).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(net.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
