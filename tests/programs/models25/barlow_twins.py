# Barlow Twins the way facebookresearch/barlowtwins main.py writes it: the
# projector of Linear(bias=False) + BatchNorm1d + ReLU(inplace=True) built
# from args.projector.split('-'), self.bn = nn.BatchNorm1d(sizes[-1],
# affine=False), the cross-correlation c = self.bn(z1).T @ self.bn(z2) then
# c.div_(batch_size), on_diag = torch.diagonal(c).add_(-1).pow_(2).sum(),
# off_diagonal(x) through x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten(),
# its LARS (an optim.Optimizer subclass: weight_decay_filter /
# lars_adaptation_filter flags with exclude_bias_and_norm on p.ndim == 1,
# the torch.where trust ratio, the 'mu' buffer in self.state[p]),
# param_weights / param_biases groups split on param.ndim == 1,
# adjust_learning_rate (warmup then cosine) on optimizer.param_groups[0/1]
# ['lr'], nn.SyncBatchNorm.convert_sync_batchnorm, GradScaler + autocast,
# the checkpoint dict (epoch, model, optimizer) through torch.save / load
# with map_location='cpu', and the VICReg-style LARS variant whose filters
# are callables (lambda p: p.ndim == 1) in the param_groups. Changes for a
# CPU test: a small residual conv backbone (zero-initialised last BN of
# each block, as resnet50(zero_init_residual=True)) instead of resnet50,
# 8 x 8 views from numpy instead of ImageNet augmentations, the
# all_reduce guarded by is_initialized() (one process), widths cut
# (8192-8192-8192 -> 32-32-32), a few steps; then one training step under
# torch.compile against the same step eagerly.
import argparse
import copy
import math
import os
import tempfile
import warnings

import numpy as np
import torch
from torch import nn, optim

warnings.filterwarnings("ignore")


def fmt(x, n=4):
    return [f"{v:.4f}" for v in x.reshape(-1)[:n].tolist()]


parser = argparse.ArgumentParser(description='Barlow Twins Training')
parser.add_argument('--workers', default=8, type=int, metavar='N')
parser.add_argument('--epochs', default=2, type=int, metavar='N')
parser.add_argument('--batch-size', default=8, type=int, metavar='N')
parser.add_argument('--learning-rate-weights', default=0.2, type=float, metavar='LR')
parser.add_argument('--learning-rate-biases', default=0.0048, type=float, metavar='LR')
parser.add_argument('--weight-decay', default=1e-6, type=float, metavar='W')
parser.add_argument('--lambd', default=0.0051, type=float, metavar='L')
parser.add_argument('--projector', default='32-32-32', type=str, metavar='MLP')
parser.add_argument('--print-freq', default=2, type=int, metavar='N')
args = parser.parse_args([])


def adjust_learning_rate(args, optimizer, loader, step):
    max_steps = args.epochs * len(loader)
    warmup_steps = 1 * len(loader)          # 10 * len(loader) in the original
    base_lr = args.batch_size / 256
    if step < warmup_steps:
        lr = base_lr * step / warmup_steps
    else:
        step -= warmup_steps
        max_steps -= warmup_steps
        q = 0.5 * (1 + math.cos(math.pi * step / max_steps))
        end_lr = base_lr * 0.001
        lr = base_lr * q + end_lr * (1 - q)
    optimizer.param_groups[0]['lr'] = lr * args.learning_rate_weights
    optimizer.param_groups[1]['lr'] = lr * args.learning_rate_biases


def off_diagonal(x):
    # return a flattened view of the off-diagonal elements of a square matrix
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class TinyResNet(nn.Module):
    def __init__(self, num_classes=10, zero_init_residual=False):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = BasicBlock(8, 8, 1)
        self.layer2 = BasicBlock(8, 16, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


class BarlowTwins(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.backbone = TinyResNet(zero_init_residual=True)
        self.backbone.fc = nn.Identity()

        # projector
        sizes = [16] + list(map(int, args.projector.split('-')))
        layers = []
        for i in range(len(sizes) - 2):
            layers.append(nn.Linear(sizes[i], sizes[i + 1], bias=False))
            layers.append(nn.BatchNorm1d(sizes[i + 1]))
            layers.append(nn.ReLU(inplace=True))
        layers.append(nn.Linear(sizes[-2], sizes[-1], bias=False))
        self.projector = nn.Sequential(*layers)

        # normalization layer for the representations z1 and z2
        self.bn = nn.BatchNorm1d(sizes[-1], affine=False)

    def forward(self, y1, y2):
        z1 = self.projector(self.backbone(y1))
        z2 = self.projector(self.backbone(y2))

        # empirical cross-correlation matrix
        c = self.bn(z1).T @ self.bn(z2)

        # sum the cross-correlation matrix between all gpus
        c.div_(self.args.batch_size)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(c)

        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = off_diagonal(c).pow_(2).sum()
        loss = on_diag + self.args.lambd * off_diag
        return loss


class LARS(optim.Optimizer):
    def __init__(self, params, lr, weight_decay=0, momentum=0.9, eta=0.001,
                 weight_decay_filter=False, lars_adaptation_filter=False):
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                        eta=eta, weight_decay_filter=weight_decay_filter,
                        lars_adaptation_filter=lars_adaptation_filter)
        super().__init__(params, defaults)

    def exclude_bias_and_norm(self, p):
        return p.ndim == 1

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g['params']:
                dp = p.grad

                if dp is None:
                    continue

                if not g['weight_decay_filter'] or not self.exclude_bias_and_norm(p):
                    dp = dp.add(p, alpha=g['weight_decay'])

                if not g['lars_adaptation_filter'] or not self.exclude_bias_and_norm(p):
                    param_norm = torch.norm(p)
                    update_norm = torch.norm(dp)
                    one = torch.ones_like(param_norm)
                    q = torch.where(param_norm > 0.,
                                    torch.where(update_norm > 0,
                                                (g['eta'] * param_norm / update_norm), one), one)
                    dp = dp.mul(q)

                param_state = self.state[p]
                if 'mu' not in param_state:
                    param_state['mu'] = torch.zeros_like(p)
                mu = param_state['mu']
                mu.mul_(g['momentum']).add_(dp)

                p.add_(mu, alpha=-g['lr'])


def load_numpy(module, r):
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.from_numpy(r.normal(0, 1 / math.sqrt(fan_in), tuple(m.weight.shape)).astype(np.float32)))
                if m.bias is not None:
                    m.bias.copy_(torch.from_numpy(r.normal(0, 0.1, tuple(m.bias.shape)).astype(np.float32)))


rng = np.random.default_rng(0)
base = rng.normal(size=(16, 3, 8, 8)).astype(np.float32)


class PairDataset(torch.utils.data.Dataset):
    """Two 'augmented' views of each image: a flip plus noise, and a
    brightness change plus other noise (numpy, fixed per index)."""

    def __len__(self):
        return len(base)

    def __getitem__(self, i):
        r = np.random.default_rng(100 + i)
        y1 = base[i][:, :, ::-1] + 0.1 * r.normal(size=base[i].shape)
        y2 = 1.2 * base[i] + 0.1 * r.normal(size=base[i].shape)
        return (torch.from_numpy(y1.astype(np.float32).copy()), torch.from_numpy(y2.astype(np.float32))), i % 3


torch.backends.cudnn.benchmark = True
gpu = torch.device('cpu')
model = BarlowTwins(args).to(gpu)
load_numpy(model, np.random.default_rng(1))
model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
print("sync bn", type(model.projector[1]).__name__, type(model.bn).__name__, model.bn.affine,
      model.bn.weight is None, type(model.backbone.bn1).__name__)
param_weights = []
param_biases = []
for param in model.parameters():
    if param.ndim == 1:
        param_biases.append(param)
    else:
        param_weights.append(param)
parameters = [{'params': param_weights}, {'params': param_biases}]
print("groups", len(param_weights), len(param_biases))
optimizer = LARS(parameters, lr=0, weight_decay=args.weight_decay,
                 weight_decay_filter=True,
                 lars_adaptation_filter=True)
print("defaults", sorted(optimizer.defaults), optimizer.param_groups[1]['eta'], optimizer.param_groups[0]['momentum'])

dataset = PairDataset()
loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, num_workers=0,
                                     pin_memory=True, shuffle=False, drop_last=True)

start_epoch = 0
scaler = torch.cuda.amp.GradScaler(enabled=torch.cuda.is_available())
losses = []
for epoch in range(start_epoch, args.epochs):
    for step, ((y1, y2), _) in enumerate(loader, start=epoch * len(loader)):
        y1 = y1.cuda(gpu, non_blocking=True) if gpu.type == 'cuda' else y1
        y2 = y2.cuda(gpu, non_blocking=True) if gpu.type == 'cuda' else y2
        adjust_learning_rate(args, optimizer, loader, step)
        optimizer.zero_grad()
        with torch.cuda.amp.autocast(enabled=torch.cuda.is_available()):
            loss = model.forward(y1, y2)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
        if step % args.print_freq == 0:
            stats = dict(epoch=epoch, step=step,
                         lr_weights=optimizer.param_groups[0]['lr'],
                         lr_biases=optimizer.param_groups[1]['lr'],
                         loss=loss.item())
            print("stats", stats["epoch"], stats["step"], f"{stats['lr_weights']:.6f}",
                  f"{stats['lr_biases']:.6f}", f"{stats['loss']:.4f}")
print("losses", [f"{v:.4f}" for v in losses])
mu = optimizer.state[model.projector[0].weight]['mu']
print("mu", fmt(mu), tuple(mu.shape), len(optimizer.state))
print("bias mu", fmt(optimizer.state[model.projector[1].bias]['mu']))
print("running", fmt(model.bn.running_mean), fmt(model.bn.running_var), int(model.bn.num_batches_tracked))

# off_diagonal is a view chain of the flattened copy: check it against a mask
c = torch.arange(25.).view(5, 5)
od = off_diagonal(c)
print("off_diagonal", od.tolist()[:6], od.numel(),
      torch.equal(od, c[~torch.eye(5, dtype=torch.bool)]))

# checkpoint as main.py writes it, and the resume path
with tempfile.TemporaryDirectory() as d:
    state = dict(epoch=args.epochs, model=model.state_dict(),
                 optimizer=optimizer.state_dict())
    torch.save(state, os.path.join(d, 'checkpoint.pth'))
    ckpt = torch.load(os.path.join(d, 'checkpoint.pth'), map_location='cpu')
    model2 = nn.SyncBatchNorm.convert_sync_batchnorm(BarlowTwins(args))
    model2.load_state_dict(ckpt['model'])
    opt2 = LARS([{'params': [p for p in model2.parameters() if p.ndim != 1]},
                 {'params': [p for p in model2.parameters() if p.ndim == 1]}], lr=0,
                weight_decay=args.weight_decay, weight_decay_filter=True, lars_adaptation_filter=True)
    opt2.load_state_dict(ckpt['optimizer'])
    print("resume", ckpt['epoch'], sorted(ckpt['optimizer']), len(ckpt['optimizer']['state']),
          ckpt['optimizer']['param_groups'][1]['params'][:3],
          torch.equal(opt2.state[model2.projector[0].weight]['mu'], mu),
          f"{opt2.param_groups[0]['lr']:.6f}")
    torch.save(model.backbone.state_dict(), os.path.join(d, 'resnet50.pth'))
    sd = torch.load(os.path.join(d, 'resnet50.pth'))
    print("backbone keys", len(sd), list(sd)[:3])


# VICReg-style LARS: the filters are callables stored in the param_groups
def exclude_bias_and_norm(p):
    return p.ndim == 1


class LARS2(optim.Optimizer):
    def __init__(self, params, lr, weight_decay=0, momentum=0.9, eta=0.001,
                 weight_decay_filter=None, lars_adaptation_filter=None):
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, eta=eta,
                        weight_decay_filter=weight_decay_filter,
                        lars_adaptation_filter=lars_adaptation_filter)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self):
        for g in self.param_groups:
            for p in g["params"]:
                dp = p.grad

                if dp is None:
                    continue

                if g["weight_decay_filter"] is None or not g["weight_decay_filter"](p):
                    dp = dp.add(p, alpha=g["weight_decay"])

                if g["lars_adaptation_filter"] is None or not g["lars_adaptation_filter"](p):
                    param_norm = torch.norm(p)
                    update_norm = torch.norm(dp)
                    one = torch.ones_like(param_norm)
                    q = torch.where(
                        param_norm > 0.0,
                        torch.where(update_norm > 0, (g["eta"] * param_norm / update_norm), one),
                        one,
                    )
                    dp = dp.mul(q)

                param_state = self.state[p]
                if "mu" not in param_state:
                    param_state["mu"] = torch.zeros_like(p)
                mu = param_state["mu"]
                mu.mul_(g["momentum"]).add_(dp)

                p.add_(mu, alpha=-g["lr"])


head = nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.ReLU(), nn.Linear(5, 3))
load_numpy(head, np.random.default_rng(2))
opt_v = LARS2(head.parameters(), lr=0.5, weight_decay=1e-4,
              weight_decay_filter=lambda p: p.ndim == 1, lars_adaptation_filter=exclude_bias_and_norm)
xv = torch.from_numpy(np.random.default_rng(3).normal(size=(10, 6)).astype(np.float32))
for it in range(3):
    opt_v.zero_grad()
    lv = head(xv).pow(2).mean()
    lv.backward()
    opt_v.step()
print("lars2", f"{lv.item():.5f}", fmt(head[0].weight), fmt(head[1].bias),
      callable(opt_v.param_groups[0]['weight_decay_filter']), opt_v.defaults['lars_adaptation_filter'].__name__)
del model2, opt2


# one training step under torch.compile against the same step eagerly
def train_step(y1, y2):
    optimizer.zero_grad()
    loss = model.forward(y1, y2)
    loss.backward()
    optimizer.step()
    return loss


(y1, y2), _ = next(iter(loader))
adjust_learning_rate(args, optimizer, loader, 5)
state0, opt0 = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(y1, y2).detach() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state0)
optimizer.load_state_dict(opt0)
cstep = torch.compile(train_step)
compiled = [cstep(y1, y2).detach() for _ in range(2)]
print("compiled loss", [f"{l.item():.4f}" for l in compiled])
print("compiled == eager:", all(torch.allclose(c, e, rtol=1e-4, atol=1e-5) for c, e in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
