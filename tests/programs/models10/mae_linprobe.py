# facebookresearch/mae's linear probing: main_linprobe.py (the head replaced by
# BatchNorm1d(affine=False, eps=1e-6) + the linear head with trunc_normal_(std=0.01),
# every parameter but the head's frozen, lr = blr * eff_batch_size / 256),
# util/lars.py (LARS: a torch.optim.Optimizer subclass with its own step, state made
# on the first step, trust ratio through torch.where), util/lr_sched.py's per-iteration
# half-cycle cosine, engine_finetune.py's train_one_epoch / evaluate and timm's
# accuracy.  Changes for a CPU test: a tiny frozen patch-embedding + mean-pool
# backbone instead of the ViT, synthetic images, weights from numpy, a few steps.
# Then the training step (with the LARS step) under torch.compile against the same
# step run eagerly, the lr set before each call as the schedule does.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
from torch.nn.init import trunc_normal_


# ---- util/lars.py ----
class LARS(torch.optim.Optimizer):
    """
    LARS optimizer, no rate scaling or weight decay for parameters <= 1D.
    """
    def __init__(self, params, lr=0, weight_decay=0, momentum=0.9, trust_coefficient=0.001):
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, trust_coefficient=trust_coefficient)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g['params']:
                dp = p.grad

                if dp is None:
                    continue

                if p.ndim > 1: # if not normalization gamma/beta or bias
                    dp = dp.add(p, alpha=g['weight_decay'])
                    param_norm = torch.norm(p)
                    update_norm = torch.norm(dp)
                    one = torch.ones_like(param_norm)
                    q = torch.where(param_norm > 0.,
                                    torch.where(update_norm > 0,
                                    (g['trust_coefficient'] * param_norm / update_norm), one),
                                    one)
                    dp = dp.mul(q)

                param_state = self.state[p]
                if 'mu' not in param_state:
                    param_state['mu'] = torch.zeros_like(p)
                mu = param_state['mu']
                mu.mul_(g['momentum']).add_(dp)
                p.add_(mu, alpha=-g['lr'])


# ---- util/lr_sched.py ----
def adjust_learning_rate(optimizer, epoch, args):
    """Decay the learning rate with half-cycle cosine after warmup"""
    if epoch < args.warmup_epochs:
        lr = args.lr * epoch / args.warmup_epochs
    else:
        lr = args.min_lr + (args.lr - args.min_lr) * 0.5 * \
            (1. + math.cos(math.pi * (epoch - args.warmup_epochs) / (args.epochs - args.warmup_epochs)))
    for param_group in optimizer.param_groups:
        if "lr_scale" in param_group:
            param_group["lr"] = lr * param_group["lr_scale"]
        else:
            param_group["lr"] = lr
    return lr


# ---- timm/utils/metrics.py ----
def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    maxk = min(max(topk), output.size()[1])
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    return [correct[:min(k, maxk)].reshape(-1).float().sum(0) * 100. / batch_size for k in topk]


# ---- engine_finetune.py ----
def train_one_epoch(model, criterion, data_loader, optimizer, device, epoch, args):
    model.train(True)
    accum_iter = args.accum_iter
    optimizer.zero_grad()
    out = []
    for data_iter_step, (samples, targets) in enumerate(data_loader):
        # we use a per iteration (instead of per epoch) lr scheduler
        if data_iter_step % accum_iter == 0:
            adjust_learning_rate(optimizer, data_iter_step / len(data_loader) + epoch, args)
        samples = samples.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        outputs = model(samples)
        loss = criterion(outputs, targets)
        loss_value = loss.item()
        loss /= accum_iter
        loss.backward()
        if (data_iter_step + 1) % accum_iter == 0:
            optimizer.step()
            optimizer.zero_grad()
        out.append((round(loss_value, 5), round(optimizer.param_groups[0]["lr"], 6)))
    return out


@torch.no_grad()
def evaluate(data_loader, model, device):
    criterion = torch.nn.CrossEntropyLoss()
    model.eval()
    stats = []
    for images, target in data_loader:
        output = model(images)
        loss = criterion(output, target)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        stats.append((round(loss.item(), 4), acc1.item(), acc5.item()))
    return stats


# ---- a tiny stand-in for models_vit (frozen features, then the head) ----
class TinyEncoder(nn.Module):
    def __init__(self, num_classes=10, embed_dim=24):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, embed_dim, 4, 4)
        self.fc_norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = self.fc_norm(x.mean(dim=1))
        return self.head(x)


class Args:
    batch_size = 8
    accum_iter = 1
    blr = 0.1
    lr = None
    min_lr = 0.0
    weight_decay = 0.0
    warmup_epochs = 1
    epochs = 3


g = np.random.default_rng(0)
args = Args()
model = TinyEncoder()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy((g.standard_normal(tuple(p.shape)) * 0.3).astype(np.float32)))

# manually initialize fc layer: following MoCo v3
trunc_normal_(model.head.weight, std=0.01)
print("trunc_normal_ within [-2, 2]", bool(model.head.weight.abs().max() <= 2.0), tuple(model.head.weight.shape))
with torch.no_grad():
    model.head.weight.copy_(torch.from_numpy((g.standard_normal((10, 24)) * 0.01).astype(np.float32)))

# for linear prob only
# hack: revise model's head with BN
model.head = torch.nn.Sequential(torch.nn.BatchNorm1d(model.head.in_features, affine=False, eps=1e-6), model.head)
# freeze all but the head
for _, p in model.named_parameters():
    p.requires_grad = False
for _, p in model.head.named_parameters():
    p.requires_grad = True
n_parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)
print('number of params (M): %.2e' % (n_parameters / 1.e6), [n for n, p in model.named_parameters() if p.requires_grad])
print(model.head)

eff_batch_size = args.batch_size * args.accum_iter * 1
if args.lr is None:  # only base_lr is specified
    args.lr = args.blr * eff_batch_size / 256
print("base lr: %.2e" % (args.lr * 256 / eff_batch_size), "actual lr: %.2e" % args.lr)
optimizer = LARS(model.head.parameters(), lr=args.lr, weight_decay=args.weight_decay)
print(optimizer)
criterion = torch.nn.CrossEntropyLoss()

images = torch.from_numpy(g.standard_normal((40, 3, 16, 16)).astype(np.float32))
labels = torch.from_numpy(g.integers(0, 10, 40))
train = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images[:32], labels[:32]), batch_size=8)
val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images[32:], labels[32:]), batch_size=8)
for epoch in range(args.epochs):
    print("epoch", epoch, train_one_epoch(model, criterion, train, optimizer, "cpu", epoch, args), evaluate(val, model, "cpu"))
print("state", sorted(optimizer.state_dict()["state"][1].keys()), len(optimizer.state),
      f"{model.head[0].running_var.mean().item():.4f}")


# the training step under torch.compile against the same step run eagerly
def train_step(samples, targets):
    outputs = model(samples)
    loss = criterion(outputs, targets)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss


model.train()
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
batches = [(images[i * 8:(i + 1) * 8], labels[i * 8:(i + 1) * 8]) for i in range(4)]
eager = []
for i, (x, y) in enumerate(batches):
    adjust_learning_rate(optimizer, i / 4 + 1, args)
    eager.append(train_step(x, y).item())
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = []
for i, (x, y) in enumerate(batches):
    adjust_learning_rate(optimizer, i / 4 + 1, args)
    compiled.append(cstep(x, y).item())
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-6) for k in after))
