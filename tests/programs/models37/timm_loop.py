# A timm-style training loop in plain torch (the pieces pytorch-image-models'
# train.py and the common Kaggle / tutorial loops use, without timm or
# ignite): torch.utils.data.random_split(dataset, [n1, n2],
# generator=torch.Generator().manual_seed(42)), class-balanced
# WeightedRandomSampler(weights, num_samples, replacement=True) from
# 1 / torch.bincount counts, mixup with np.random.beta(alpha, alpha) and
# torch.randperm(batch_size) (the mixup_data / mixup_criterion pair of
# facebookresearch/mixup-cifar10), nn.CrossEntropyLoss(label_smoothing=0.1),
# SGD with nesterov momentum and CosineAnnealingWarmRestarts stepped per
# iteration with scheduler.step(epoch + i / iters) as its docstring shows,
# gradient accumulation (loss / accum_steps, step every accum_steps), an EMA
# of the weights as torch.optim.swa_utils.AveragedModel with a custom
# avg_fn (and use_buffers=True), torch.optim.swa_utils.update_bn, and
# top-1 accuracy on the validation split under torch.no_grad() for the model
# and its EMA.  Changes for a CPU test: a tiny CNN on 8x8 images, 48 random
# samples with imbalanced labels, batch 8, 2 epochs; then one training step
# (mixup batch, dropout off in eval mode) under torch.compile checked
# against the same step eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, update_bn
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler, random_split

np.random.seed(0)
torch.manual_seed(0)

NUM_CLASSES = 3
images = torch.randn(48, 3, 8, 8)
labels = torch.cat([torch.zeros(30, dtype=torch.long), torch.ones(12, dtype=torch.long),
                    torch.full((6,), 2, dtype=torch.long)])
images += labels.view(-1, 1, 1, 1).float() * 0.5        # something to learn
dataset = TensorDataset(images, labels)
train_ds, val_ds = random_split(dataset, [40, 8], generator=torch.Generator().manual_seed(42))
print('val indices', val_ds.indices)

train_labels = labels[train_ds.indices]
class_counts = torch.bincount(train_labels, minlength=NUM_CLASSES)
class_weights = 1.0 / class_counts.float()
sample_weights = class_weights[train_labels]
sampler = WeightedRandomSampler(sample_weights, num_samples=len(sample_weights), replacement=True)
train_loader = DataLoader(train_ds, batch_size=8, sampler=sampler)
val_loader = DataLoader(val_ds, batch_size=8, shuffle=False)
print('class counts', class_counts.tolist())


class TinyCNN(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES, drop_rate=0.2):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.drop_rate = drop_rate
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        if self.drop_rate > 0.:
            x = F.dropout(x, p=self.drop_rate, training=self.training)
        return self.fc(x)


def mixup_data(x, y, alpha=1.0):
    '''Returns mixed inputs, pairs of targets, and lambda'''
    if alpha > 0:
        lam = np.random.beta(alpha, alpha)
    else:
        lam = 1
    batch_size = x.size()[0]
    index = torch.randperm(batch_size)
    mixed_x = lam * x + (1 - lam) * x[index, :]
    y_a, y_b = y, y[index]
    return mixed_x, y_a, y_b, lam


def mixup_criterion(criterion, pred, y_a, y_b, lam):
    return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)


model = TinyCNN()
ema_decay = 0.9


def ema_avg(averaged_model_parameter, model_parameter, num_averaged):
    return ema_decay * averaged_model_parameter + (1 - ema_decay) * model_parameter


ema_model = AveragedModel(model, avg_fn=ema_avg, use_buffers=True)
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=1, T_mult=2, eta_min=1e-3)
accum_steps = 2
iters = len(train_loader)


def accuracy(net, loader):
    net.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += (net(x).argmax(dim=1) == y).sum().item()
            total += y.size(0)
    return correct / total


for epoch in range(2):
    model.train()
    optimizer.zero_grad()
    for i, (x, y) in enumerate(train_loader):
        x, y_a, y_b, lam = mixup_data(x, y, alpha=0.4)
        out = model(x)
        loss = mixup_criterion(criterion, out, y_a, y_b, lam)
        (loss / accum_steps).backward()
        if (i + 1) % accum_steps == 0 or i + 1 == iters:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
            optimizer.step()
            optimizer.zero_grad()
            ema_model.update_parameters(model)
        scheduler.step(epoch + i / iters)
        print('epoch %d iter %d lam %.4f loss %.5f lr %.6f' % (
            epoch, i, lam, loss.item(), optimizer.param_groups[0]['lr']))
    print('epoch %d val acc %.3f ema val acc %.3f' % (
        epoch, accuracy(model, val_loader), accuracy(ema_model, val_loader)))

update_bn(train_loader, ema_model)
print('ema n_averaged', ema_model.n_averaged.item(),
      'bn2 running_mean %.5f' % ema_model.module.bn2.running_mean.sum().item())
print('ema fc weight', [round(v, 5) for v in ema_model.module.fc.weight[0, :4].tolist()])
print('model fc weight', [round(v, 5) for v in model.fc.weight[0, :4].tolist()])

# one training step (dropout off) compiled against eager
x, y = next(iter(val_loader))
x, y_a, y_b, lam = mixup_data(x, y, alpha=0.4)
nets = [copy.deepcopy(model).eval(), copy.deepcopy(model).eval()]
opts = [torch.optim.SGD(n.parameters(), lr=0.05, momentum=0.9, nesterov=True) for n in nets]


def train_step(net, opt, x, y_a, y_b, lam):
    opt.zero_grad()
    loss = mixup_criterion(criterion, net(x), y_a, y_b, lam)
    loss.backward()
    opt.step()
    return loss


le = train_step(nets[0], opts[0], x, y_a, y_b, lam)
lc = torch.compile(train_step)(nets[1], opts[1], x, y_a, y_b, lam)
same = torch.allclose(le, lc, atol=1e-6) and all(
    torch.allclose(a, b, atol=1e-6) for a, b in zip(nets[0].parameters(), nets[1].parameters()))
print('step loss %.6f' % le.item(), 'compiled == eager:', same)
