# Spijkervet/SimCLR: simclr/modules/nt_xent.py (NT_Xent: mask_correlated_samples
# with torch.ones(..., dtype=bool).fill_diagonal_(0) and the cross-view zeros,
# nn.CosineSimilarity(dim=2) over z.unsqueeze(1) / z.unsqueeze(0) / temperature,
# torch.diag with positive and negative offsets, the negatives by boolean
# mask, CrossEntropyLoss(reduction="sum") / N), simclr/simclr.py (SimCLR: the
# encoder's fc replaced by modules/identity.py's Identity, the bias-free MLP
# projector, forward over the two views), main.py's train loop (Adam 3e-4,
# the step / loss_epoch prints) and linear_evaluation.py's inference and
# LogisticRegression probe.  (sthalles/SimCLR's info_nce_loss is in
# models3/simclr.py.)
# Changes for a CPU test: a two-block ResNet-ish encoder (torchvision's
# BasicBlock layout with BatchNorm) on 8x8 images instead of resnet50, batch
# 4, numpy augmentations (crops, flips, jitter); weights and data from numpy.
# Then the training step (with a one-block encoder) under torch.compile
# against the same step run eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


# ---- a small ResNet (torchvision's BasicBlock layout) ----
class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class TinyResNet(nn.Module):
    def __init__(self, num_classes=16):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, 2, nn.Sequential(nn.Conv2d(8, 16, 1, 2, bias=False), nn.BatchNorm2d(16)))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


# ---- Spijkervet/SimCLR: simclr/modules/nt_xent.py ----
class NT_Xent(nn.Module):
    def __init__(self, batch_size, temperature, world_size):
        super(NT_Xent, self).__init__()
        self.batch_size = batch_size
        self.temperature = temperature
        self.world_size = world_size

        self.mask = self.mask_correlated_samples(batch_size, world_size)
        self.criterion = nn.CrossEntropyLoss(reduction="sum")
        self.similarity_f = nn.CosineSimilarity(dim=2)

    def mask_correlated_samples(self, batch_size, world_size):
        N = 2 * batch_size * world_size
        mask = torch.ones((N, N), dtype=bool)
        mask = mask.fill_diagonal_(0)
        for i in range(batch_size * world_size):
            mask[i, batch_size * world_size + i] = 0
            mask[batch_size * world_size + i, i] = 0
        return mask

    def forward(self, z_i, z_j):
        """
        We do not sample negative examples explicitly.
        Instead, given a positive pair, similar to (Chen et al., 2017), we treat the other 2(N − 1) augmented examples within a minibatch as negative examples.
        """
        N = 2 * self.batch_size * self.world_size

        z = torch.cat((z_i, z_j), dim=0)

        sim = self.similarity_f(z.unsqueeze(1), z.unsqueeze(0)) / self.temperature

        sim_i_j = torch.diag(sim, self.batch_size * self.world_size)
        sim_j_i = torch.diag(sim, -self.batch_size * self.world_size)

        # We have 2N samples, but with Distributed training every GPU gets N examples too, resulting in: 2xNxN
        positive_samples = torch.cat((sim_i_j, sim_j_i), dim=0).reshape(N, 1)
        negative_samples = sim[self.mask].reshape(N, -1)

        labels = torch.zeros(N).to(positive_samples.device).long()
        logits = torch.cat((positive_samples, negative_samples), dim=1)
        loss = self.criterion(logits, labels)
        loss /= N
        return loss


def numpy_init(module, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "bn" in name or "downsample.1" in name:
                p.copy_(torch.from_numpy((1.0 if name.endswith("weight") else 0.0)
                                         + 0.1 * r.standard_normal(tuple(p.shape)).astype(np.float32)))
            else:
                fan = p[0].numel() if p.dim() > 1 else 4
                p.copy_(torch.from_numpy((r.standard_normal(tuple(p.shape)) / np.sqrt(fan)).astype(np.float32)))
    return module


aug_rng = np.random.default_rng(7)


def simclr_transform(img):
    img = np.pad(img, ((0, 0), (1, 1), (1, 1)), mode="reflect")
    i, j = aug_rng.integers(0, 3, 2)
    img = img[:, i:i + 8, j:j + 8]
    if aug_rng.random() < 0.5:
        img = img[:, :, ::-1]
    img = img * aug_rng.uniform(0.8, 1.2) + 0.05 * aug_rng.standard_normal(img.shape)
    return torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32))


class ImageSet(torch.utils.data.Dataset):
    def __init__(self, images, transform):
        self.images, self.transform = images, transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.transform(self.images[i]), 0



# ---- simclr/modules/identity.py, simclr/simclr.py ----
class Identity(nn.Module):
    def __init__(self):
        super(Identity, self).__init__()

    def forward(self, x):
        return x


class SimCLR(nn.Module):
    """
    We opt for simplicity and adopt the commonly used ResNet (He et al., 2016) to obtain hi = f(x ̃i) = ResNet(x ̃i) where hi ∈ Rd is the output after the average pooling layer.
    """

    def __init__(self, encoder, projection_dim, n_features):
        super(SimCLR, self).__init__()

        self.encoder = encoder
        self.n_features = n_features

        # Replace the fc layer with an Identity function
        self.encoder.fc = Identity()

        # We use a MLP with one hidden layer to obtain z_i = g(h_i) = W(2)σ(W(1)h_i) where σ is a ReLU non-linearity.
        self.projector = nn.Sequential(
            nn.Linear(self.n_features, self.n_features, bias=False),
            nn.ReLU(),
            nn.Linear(self.n_features, projection_dim, bias=False),
        )

    def forward(self, x_i, x_j):
        h_i = self.encoder(x_i)
        h_j = self.encoder(x_j)

        z_i = self.projector(h_i)
        z_j = self.projector(h_j)
        return h_i, h_j, z_i, z_j


# ---- simclr/modules/transformations/simclr.py's TransformsSimCLR, in numpy ----
class TransformsSimCLR:
    def __init__(self, size):
        self.train_transform = simclr_transform

    def __call__(self, x):
        return self.train_transform(x), self.train_transform(x)


class ImageSet(torch.utils.data.Dataset):
    def __init__(self, images, labels, transform):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.transform(self.images[i]), int(self.labels[i])


class Args:
    batch_size = 4
    temperature = 0.5
    world_size = 1
    projection_dim = 8
    epochs = 2
    nr = 0
    global_step = 0
    logistic_batch_size = 4


def numpy_init(module, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "bn" in name or "downsample.1" in name:
                p.copy_(torch.from_numpy((1.0 if name.endswith("weight") else 0.0)
                                         + 0.1 * r.standard_normal(tuple(p.shape)).astype(np.float32)))
            else:
                fan = p[0].numel() if p.dim() > 1 else 4
                p.copy_(torch.from_numpy((r.standard_normal(tuple(p.shape)) / np.sqrt(fan)).astype(np.float32)))
    return module


args = Args()
g = np.random.default_rng(3)
images = g.random((8, 3, 8, 8)).astype(np.float32)
labels = g.integers(0, 2, 8)
train_dataset = ImageSet(images, labels, TransformsSimCLR(size=8))
train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size, shuffle=False,
                                           drop_last=True, num_workers=0)

criterion = NT_Xent(args.batch_size, args.temperature, args.world_size)
print("mask", criterion.mask.dtype, criterion.mask.sum().item(), criterion.mask[0].tolist(), criterion.mask[5].tolist())
print("fill_diagonal_", torch.ones((3, 5), dtype=bool).fill_diagonal_(0).tolist()[2],
      torch.zeros(5, 2).fill_diagonal_(1.5, wrap=True).sum(0).tolist())
feats = torch.from_numpy(g.standard_normal((8, 16)).astype(np.float32))
print("nt_xent", f"{criterion(feats[:4], feats[4:]).item():.6f}", f"{NT_Xent(4, 0.1, 1)(feats[:4], feats[4:]).item():.6f}")
cos = nn.CosineSimilarity(dim=2)(feats.unsqueeze(1), feats.unsqueeze(0))
print("cosine", tuple(cos.shape), f"{cos.diagonal().sum().item():.5f}", f"{torch.diag(cos, 4).sum().item():.5f}",
      f"{torch.diag(cos, -3).sum().item():.5f}", tuple(torch.diag(cos[:3], 2).shape))

encoder = TinyResNet()
n_features = encoder.fc.in_features  # get dimensions of fc layer
model = numpy_init(SimCLR(encoder, args.projection_dim, n_features), 0)
print(model.encoder.fc, model.projector)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)  # TODO: LARS


def train(args, train_loader, model, criterion, optimizer):
    loss_epoch = 0
    for step, ((x_i, x_j), _) in enumerate(train_loader):
        optimizer.zero_grad()
        x_i = x_i.to(non_blocking=True, device="cpu")
        x_j = x_j.to(non_blocking=True, device="cpu")

        # positive pair, with encoding
        h_i, h_j, z_i, z_j = model(x_i, x_j)

        loss = criterion(z_i, z_j)
        loss.backward()

        optimizer.step()

        if args.nr == 0 and step % 1 == 0:
            print(f"Step [{step}/{len(train_loader)}]\t Loss: {loss.item()}")

        if args.nr == 0:
            args.global_step += 1

        loss_epoch += loss.item()
    return loss_epoch


for epoch in range(args.epochs):
    lr = optimizer.param_groups[0]["lr"]
    loss_epoch = train(args, train_loader, model, criterion, optimizer)
    print(f"Epoch [{epoch}/{args.epochs}]\t Loss: {loss_epoch / len(train_loader)}\t lr: {round(lr, 5)}")
print("bn stats", f"{model.encoder.bn1.running_var.sum().item():.6f}", model.encoder.bn1.num_batches_tracked.item())


# ---- linear_evaluation.py ----
class LogisticRegression(nn.Module):
    def __init__(self, n_features, n_classes):
        super(LogisticRegression, self).__init__()

        self.model = nn.Linear(n_features, n_classes)

    def forward(self, x):
        return self.model(x)


def inference(loader, simclr_model, device):
    feature_vector = []
    labels_vector = []
    for step, (x, y) in enumerate(loader):
        x = x.to(device)

        # get encoding
        with torch.no_grad():
            h, _, z, _ = simclr_model(x, x)

        h = h.detach()

        feature_vector.extend(h.cpu().detach().numpy())
        labels_vector.extend(y.numpy())

    feature_vector = np.array(feature_vector)
    labels_vector = np.array(labels_vector)
    print("Features shape {}".format(feature_vector.shape))
    return feature_vector, labels_vector


model.eval()
plain = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(images), torch.from_numpy(labels)),
                                    batch_size=args.logistic_batch_size, shuffle=False)
train_X, train_y = inference(plain, model, "cpu")
print("features", f"{train_X.sum():.4f}", train_y.tolist())
probe = numpy_init(LogisticRegression(n_features, 2), 5)
popt = torch.optim.Adam(probe.parameters(), lr=3e-4)
ploader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(train_X), torch.from_numpy(train_y)),
                                      batch_size=args.logistic_batch_size, shuffle=False)
for step, (x, y) in enumerate(ploader):
    popt.zero_grad()
    output = probe(x)
    loss = nn.CrossEntropyLoss()(output, y)
    predicted = output.argmax(1)
    acc = (predicted == y).sum().item() / y.size(0)
    loss.backward()
    popt.step()
    print(f"probe loss {loss.item():.6f} acc {acc}")

# the training step under torch.compile against the same step run eagerly,
# with a one-block encoder (the two-block one's step takes too long to
# compile for a test)
class OneBlockNet(TinyResNet):
    def __init__(self):
        super().__init__()
        del self.layer1
        self.layer2 = BasicBlock(8, 16, 2, nn.Sequential(nn.Conv2d(8, 16, 1, 2, bias=False), nn.BatchNorm2d(16)))

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        return self.fc(torch.flatten(self.avgpool(self.layer2(x)), 1))


model = numpy_init(SimCLR(OneBlockNet(), args.projection_dim, n_features), 1)
model.train()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)


def train_step(x_i, x_j):
    optimizer.zero_grad()
    h_i, h_j, z_i, z_j = model(x_i, x_j)
    loss = criterion(z_i, z_j)
    loss.backward()
    optimizer.step()
    return loss


views = [next(iter(train_loader))[0] for _ in range(4)]
print("step", f"{train_step(*views[0]).item():.6f}")
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(*v).item() for v in views[1:]]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(*v).item() for v in views[1:]]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
