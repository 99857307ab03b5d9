# VICReg the way facebookresearch/vicreg's main_vicreg.py writes it: the
# Projector built from an mlp spec string ("64-32-32") as Linear /
# BatchNorm1d / ReLU layers into nn.Sequential(*layers), the VICReg module
# (backbone + projector, F.mse_loss invariance term, x - x.mean(dim=0)
# centering, torch.sqrt(x.var(dim=0) + 0.0001) and
# torch.mean(F.relu(1 - std_x)) / 2 for the variance term, the covariance
# (x.T @ x) / (batch_size - 1) and off_diagonal(cov_x).pow_(2).sum()
# .div(num_features)), FullGatherLayer as a torch.autograd.Function with
# torch.distributed.is_available() / is_initialized() checks (world size 1:
# the gather is the identity here, as the repo's code path is without an
# initialized process group), the LARS optimizer (exclude_bias_and_norm
# returning p.ndim == 1, weight_decay_filter / lars_adaptation_filter in the
# param group, torch.norm, the nested torch.where with `one`,
# param_state['mu'] momentum with mu.mul_(momentum).add_(dp), p.add_(mu,
# alpha=-lr)), adjust_learning_rate with linear warmup then cosine, and
# torch.cuda.amp.GradScaler / torch.cuda.amp.autocast as the training loop
# uses them (disabled on CPU). Changes for a CPU test: a tiny ResNet-ish
# backbone on 8x8 images instead of resnet50, two augmented views made in
# numpy (flip + noise), batch 16, a few steps, weights from numpy; then the
# projector-and-loss step under torch.compile against the same step eagerly.
import argparse
import copy
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
import torch.distributed as dist


def adjust_learning_rate(args, optimizer, loader_len, step):
    max_steps = args.epochs * loader_len
    warmup_steps = 2 * loader_len
    base_lr = args.base_lr * args.batch_size / 256
    if step < warmup_steps:
        lr = base_lr * step / warmup_steps
    else:
        step -= warmup_steps
        max_steps -= warmup_steps
        q = 0.5 * (1 + math.cos(math.pi * step / max_steps))
        end_lr = base_lr * 0.001
        lr = base_lr * q + end_lr * (1 - q)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    return lr


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class TinyResNet(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = BasicBlock(width, width)
        self.layer2 = BasicBlock(width, 2 * width, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return torch.flatten(self.avgpool(x), 1)


class VICReg(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.num_features = int(args.mlp.split("-")[-1])
        self.backbone, self.embedding = TinyResNet(8), 16
        self.projector = Projector(args, self.embedding)

    def forward(self, x, y):
        x = self.projector(self.backbone(x))
        y = self.projector(self.backbone(y))

        repr_loss = F.mse_loss(x, y)

        x = torch.cat(FullGatherLayer.apply(x), dim=0)
        y = torch.cat(FullGatherLayer.apply(y), dim=0)
        x = x - x.mean(dim=0)
        y = y - y.mean(dim=0)

        std_x = torch.sqrt(x.var(dim=0) + 0.0001)
        std_y = torch.sqrt(y.var(dim=0) + 0.0001)
        std_loss = torch.mean(F.relu(1 - std_x)) / 2 + torch.mean(F.relu(1 - std_y)) / 2

        cov_x = (x.T @ x) / (self.args.batch_size - 1)
        cov_y = (y.T @ y) / (self.args.batch_size - 1)
        cov_loss = off_diagonal(cov_x).pow_(2).sum().div(
            self.num_features
        ) + off_diagonal(cov_y).pow_(2).sum().div(self.num_features)

        loss = (
            self.args.sim_coeff * repr_loss
            + self.args.std_coeff * std_loss
            + self.args.cov_coeff * cov_loss
        )
        return loss


def Projector(args, embedding):
    mlp_spec = f"{embedding}-{args.mlp}"
    layers = []
    f = list(map(int, mlp_spec.split("-")))
    for i in range(len(f) - 2):
        layers.append(nn.Linear(f[i], f[i + 1]))
        layers.append(nn.BatchNorm1d(f[i + 1]))
        layers.append(nn.ReLU(True))
    layers.append(nn.Linear(f[-2], f[-1], bias=False))
    return nn.Sequential(*layers)


def exclude_bias_and_norm(p):
    return p.ndim == 1


def off_diagonal(x):
    n, m = x.shape
    assert n == m
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


class LARS(optim.Optimizer):
    def __init__(
        self,
        params,
        lr,
        weight_decay=0,
        momentum=0.9,
        eta=0.001,
        weight_decay_filter=None,
        lars_adaptation_filter=None,
    ):
        defaults = dict(
            lr=lr,
            weight_decay=weight_decay,
            momentum=momentum,
            eta=eta,
            weight_decay_filter=weight_decay_filter,
            lars_adaptation_filter=lars_adaptation_filter,
        )
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
                        torch.where(
                            update_norm > 0, (g["eta"] * param_norm / update_norm), one
                        ),
                        one,
                    )
                    dp = dp.mul(q)

                param_state = self.state[p]
                if "mu" not in param_state:
                    param_state["mu"] = torch.zeros_like(p)
                mu = param_state["mu"]
                mu.mul_(g["momentum"]).add_(dp)

                p.add_(mu, alpha=-g["lr"])


def batch_all_gather(x):
    x_list = FullGatherLayer.apply(x)
    return torch.cat(x_list, dim=0)


class FullGatherLayer(torch.autograd.Function):
    """
    Gather tensors from all process and support backward propagation
    for the gradients across processes.
    """

    @staticmethod
    def forward(ctx, x):
        if dist.is_available() and dist.is_initialized():
            output = [torch.zeros_like(x) for _ in range(dist.get_world_size())]
            dist.all_gather(output, x)
        else:
            output = [x.clone()]
        return tuple(output)

    @staticmethod
    def backward(ctx, *grads):
        all_gradients = torch.stack(grads)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(all_gradients)
            return all_gradients[dist.get_rank()]
        return all_gradients[0]


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed, std=0.2):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim > 1:
                p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))
            elif name.endswith("bias") and "bn" not in name and "downsample.1" not in name and "projector.1" not in name:
                p.copy_(torch.from_numpy(r.normal(0, 0.1, tuple(p.shape)).astype(np.float32)))


parser = argparse.ArgumentParser("VICReg", add_help=False)
parser.add_argument("--mlp", default="64-32-32")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--base-lr", type=float, default=0.2)
parser.add_argument("--wd", type=float, default=1e-6)
parser.add_argument("--sim-coeff", type=float, default=25.0)
parser.add_argument("--std-coeff", type=float, default=25.0)
parser.add_argument("--cov-coeff", type=float, default=1.0)
args = parser.parse_args([])

torch.manual_seed(0)
model = VICReg(args)
load_numpy(model, 0)
print(model.projector)
print("off_diagonal", off_diagonal(torch.arange(9.0).view(3, 3)).tolist())
print("dist", dist.is_available(), dist.is_available() and dist.is_initialized())

optimizer = LARS(
    model.parameters(),
    lr=0,
    weight_decay=args.wd,
    weight_decay_filter=exclude_bias_and_norm,
    lars_adaptation_filter=exclude_bias_and_norm,
)

rng = np.random.default_rng(1)
data = rng.normal(0, 1, (32, 3, 8, 8)).astype(np.float32)


def views(batch, seed):
    r = np.random.default_rng(seed)
    flip = batch[..., ::-1].copy()
    v1 = batch + r.normal(0, 0.1, batch.shape).astype(np.float32)
    v2 = flip * r.uniform(0.8, 1.2, (batch.shape[0], 1, 1, 1)).astype(np.float32)
    return torch.from_numpy(v1), torch.from_numpy(v2.astype(np.float32))


loader = [views(data[i:i + args.batch_size], i) for i in range(0, len(data), args.batch_size)]
scaler = torch.cuda.amp.GradScaler(enabled=False)
step = 0
for epoch in range(args.epochs):
    for (x, y) in loader:
        lr = adjust_learning_rate(args, optimizer, len(loader), step)
        optimizer.zero_grad()
        with torch.cuda.amp.autocast(enabled=False):
            loss = model.forward(x, y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        print("step", step, f"lr {lr:.5f}", f"loss {loss.item():.4f}")
        step += 1
print("mu", fmt(optimizer.state[model.projector[0].weight]["mu"]))
print("proj w", fmt(model.projector[0].weight), "bn", fmt(model.projector[1].running_mean))

# the pieces of the loss on one batch
with torch.no_grad():
    x, y = loader[0]
    zx = model.projector(model.backbone(x))
    g = FullGatherLayer.apply(zx)
    print("gather", type(g).__name__, len(g), tuple(g[0].shape))
    zc = zx - zx.mean(dim=0)
    cov = (zc.T @ zc) / (args.batch_size - 1)
    print("cov", f"{off_diagonal(cov).pow_(2).sum().div(model.num_features).item():.5f}",
          "std", f"{torch.sqrt(zc.var(dim=0) + 0.0001).mean().item():.5f}")

# the gather's backward through autograd
z = torch.randn(4, 3).requires_grad_()
out = torch.cat(FullGatherLayer.apply(z * 2), dim=0)
out.pow(2).sum().backward()
print("gather grad", torch.allclose(z.grad, 8 * z.detach()))


# one training step under torch.compile against the same step eagerly: the
# projector and the loss (FullGatherLayer, the in-place pow_ of the
# covariance term) with LARS, on the backbone's features
head = copy.deepcopy(model)
head.backbone = nn.Identity()
head_opt = LARS(head.parameters(), lr=0.05, weight_decay=args.wd,
                weight_decay_filter=exclude_bias_and_norm,
                lars_adaptation_filter=exclude_bias_and_norm)


def train_step(x, y):
    head_opt.zero_grad()
    loss = head.forward(x, y)
    loss.backward()
    head_opt.step()
    return loss


with torch.no_grad():
    hx, hy = model.backbone(loader[1][0]), model.backbone(loader[1][1])
state, opt_state = copy.deepcopy(head.state_dict()), copy.deepcopy(head_opt.state_dict())
eager = [train_step(hx, hy).item() for _ in range(3)]
after = {k: v.clone() for k, v in head.state_dict().items()}
head.load_state_dict(state)
head_opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(hx, hy).item() for _ in range(3)]
print("compiled losses", [f"{v:.4f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(head.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
