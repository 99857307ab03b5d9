# Sharpness-Aware Minimization the way davda54/sam writes it: sam.py's
# SAM(torch.optim.Optimizer) wrapping base_optimizer(self.param_groups,
# **kwargs), self.param_groups = self.base_optimizer.param_groups,
# self.defaults.update(...), @torch.no_grad() first_step / second_step with
# self.state[p]["old_p"] = p.data.clone() and p.data = self.state[p]["old_p"],
# _grad_norm through torch.norm(torch.stack([...norm(p=2).to(shared_device)
# ...]), p=2) (adaptive: torch.abs(p) * p.grad, e_w with torch.pow(p, 2)),
# step(closure) with torch.enable_grad()(closure), the load_state_dict
# override; example/train.py's loop (first_step(zero_grad=True),
# disable_running_stats, second_step(zero_grad=True), accuracy from
# torch.argmax(predictions.data, 1), scheduler(epoch) after the log) with
# utility/bypass_bn.py (momentum backed up on _BatchNorm via model.apply),
# utility/step_lr.py, utility/initialize.py, and model/smooth_cross_entropy.py
# (full_like + scatter_(dim=1, index=gold.unsqueeze(1), value=1.0 - smoothing)
# + F.kl_div(reduction='none').sum(-1)); model/wide_res_net.py's WideResNet
# of OrderedDict Sequentials (BasicUnit, DownsampleUnit, Block, inplace ReLU
# and Dropout, AvgPool2d, Flatten, _initialize through .data). Changes for a
# CPU test: a tiny WideResNet (filters 16 -> 4, depth 10, 16 x 16 images,
# AvgPool2d(kernel_size=4) instead of 8), a numpy 'CIFAR' of 32 images in
# 4 classes, 2 epochs, the Log class cut to printed lines; then one SAM step
# (the step(closure) form) under torch.compile against the same step eagerly.
import copy
import os
import random
import tempfile
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm


def fmt(x, n=4):
    return [f"{v:.4f}" for v in x.reshape(-1)[:n].tolist()]


# ---- sam.py
class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
        assert rho >= 0.0, f"Invalid rho, should be non-negative: {rho}"

        defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
        super(SAM, self).__init__(params, defaults)

        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)

            for p in group["params"]:
                if p.grad is None: continue
                self.state[p]["old_p"] = p.data.clone()
                e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                p.add_(e_w)  # climb to the local maximum "w + e(w)"

        if zero_grad: self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None: continue
                p.data = self.state[p]["old_p"]  # get back to "w" from "w + e(w)"

        self.base_optimizer.step()  # do the actual "sharpness-aware" update

        if zero_grad: self.zero_grad()

    @torch.no_grad()
    def step(self, closure=None):
        assert closure is not None, "Sharpness Aware Minimization requires closure, but it was not provided"
        closure = torch.enable_grad()(closure)  # the closure should do a full forward-backward pass

        self.first_step(zero_grad=True)
        closure()
        self.second_step()

    def _grad_norm(self):
        shared_device = self.param_groups[0]["params"][0].device  # put everything on the same device, in case of model parallelism
        norm = torch.norm(
                    torch.stack([
                        ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(shared_device)
                        for group in self.param_groups for p in group["params"]
                        if p.grad is not None
                    ]),
                    p=2
               )
        return norm

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self.base_optimizer.param_groups = self.param_groups


# ---- model/smooth_cross_entropy.py
def smooth_crossentropy(pred, gold, smoothing=0.1):
    n_class = pred.size(1)

    one_hot = torch.full_like(pred, fill_value=smoothing / (n_class - 1))
    one_hot.scatter_(dim=1, index=gold.unsqueeze(1), value=1.0 - smoothing)
    log_prob = F.log_softmax(pred, dim=1)

    return F.kl_div(input=log_prob, target=one_hot, reduction='none').sum(-1)


# ---- utility/bypass_bn.py
def disable_running_stats(model):
    def _disable(module):
        if isinstance(module, _BatchNorm):
            module.backup_momentum = module.momentum
            module.momentum = 0

    model.apply(_disable)


def enable_running_stats(model):
    def _enable(module):
        if isinstance(module, _BatchNorm) and hasattr(module, "backup_momentum"):
            module.momentum = module.backup_momentum

    model.apply(_enable)


# ---- utility/step_lr.py
class StepLR:
    def __init__(self, optimizer, learning_rate: float, total_epochs: int):
        self.optimizer = optimizer
        self.total_epochs = total_epochs
        self.base = learning_rate

    def __call__(self, epoch):
        if epoch < self.total_epochs * 3/10:
            lr = self.base
        elif epoch < self.total_epochs * 6/10:
            lr = self.base * 0.2
        elif epoch < self.total_epochs * 8/10:
            lr = self.base * 0.2 ** 2
        else:
            lr = self.base * 0.2 ** 3

        for param_group in self.optimizer.param_groups:
            param_group["lr"] = lr

    def lr(self) -> float:
        return self.optimizer.param_groups[0]["lr"]


# ---- utility/initialize.py
def initialize(seed: int):
    random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)

    torch.backends.cudnn.enabled = True
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = False


# ---- model/wide_res_net.py
class BasicUnit(nn.Module):
    def __init__(self, channels: int, dropout: float):
        super(BasicUnit, self).__init__()
        self.block = nn.Sequential(OrderedDict([
            ("0_normalization", nn.BatchNorm2d(channels)),
            ("1_activation", nn.ReLU(inplace=True)),
            ("2_convolution", nn.Conv2d(channels, channels, (3, 3), stride=1, padding=1, bias=False)),
            ("3_normalization", nn.BatchNorm2d(channels)),
            ("4_activation", nn.ReLU(inplace=True)),
            ("5_dropout", nn.Dropout(dropout, inplace=True)),
            ("6_convolution", nn.Conv2d(channels, channels, (3, 3), stride=1, padding=1, bias=False)),
        ]))

    def forward(self, x):
        return x + self.block(x)


class DownsampleUnit(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int, dropout: float):
        super(DownsampleUnit, self).__init__()
        self.norm_act = nn.Sequential(OrderedDict([
            ("0_normalization", nn.BatchNorm2d(in_channels)),
            ("1_activation", nn.ReLU(inplace=True)),
        ]))
        self.block = nn.Sequential(OrderedDict([
            ("0_convolution", nn.Conv2d(in_channels, out_channels, (3, 3), stride=stride, padding=1, bias=False)),
            ("1_normalization", nn.BatchNorm2d(out_channels)),
            ("2_activation", nn.ReLU(inplace=True)),
            ("3_dropout", nn.Dropout(dropout, inplace=True)),
            ("4_convolution", nn.Conv2d(out_channels, out_channels, (3, 3), stride=1, padding=1, bias=False)),
        ]))
        self.downsample = nn.Conv2d(in_channels, out_channels, (1, 1), stride=stride, padding=0, bias=False)

    def forward(self, x):
        x = self.norm_act(x)
        return self.block(x) + self.downsample(x)


class Block(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int, depth: int, dropout: float):
        super(Block, self).__init__()
        self.block = nn.Sequential(
            DownsampleUnit(in_channels, out_channels, stride, dropout),
            *(BasicUnit(out_channels, dropout) for _ in range(depth))
        )

    def forward(self, x):
        return self.block(x)


class WideResNet(nn.Module):
    def __init__(self, depth: int, width_factor: int, dropout: float, in_channels: int, labels: int):
        super(WideResNet, self).__init__()

        self.filters = [4, 1 * 4 * width_factor, 2 * 4 * width_factor, 4 * 4 * width_factor]
        self.block_depth = (depth - 4) // (3 * 2)

        self.f = nn.Sequential(OrderedDict([
            ("0_convolution", nn.Conv2d(in_channels, self.filters[0], (3, 3), stride=1, padding=1, bias=False)),
            ("1_block", Block(self.filters[0], self.filters[1], 1, self.block_depth, dropout)),
            ("2_block", Block(self.filters[1], self.filters[2], 2, self.block_depth, dropout)),
            ("3_block", Block(self.filters[2], self.filters[3], 2, self.block_depth, dropout)),
            ("4_normalization", nn.BatchNorm2d(self.filters[3])),
            ("5_activation", nn.ReLU(inplace=True)),
            ("6_pooling", nn.AvgPool2d(kernel_size=4)),
            ("7_flattening", nn.Flatten()),
            ("8_classification", nn.Linear(in_features=self.filters[3], out_features=labels)),
        ]))

        self._initialize()

    def _initialize(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight.data, mode="fan_in", nonlinearity="relu")
                if m.bias is not None:
                    m.bias.data.zero_()
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
            elif isinstance(m, nn.Linear):
                m.weight.data.zero_()
                m.bias.data.zero_()

    def forward(self, x):
        return self.f(x)


def load_numpy(model, r):
    # the kaiming draws come from torch's generator; replace them from numpy
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                fan_in = m.weight[0].numel()
                m.weight.copy_(torch.from_numpy(r.normal(0, np.sqrt(2.0 / fan_in), tuple(m.weight.shape)).astype(np.float32)))


initialize(seed=42)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

rng = np.random.default_rng(0)
protos = rng.normal(size=(4, 3, 16, 16)).astype(np.float32)
labels_np = np.arange(32) % 4
images_np = (protos[labels_np] + 0.8 * rng.normal(size=(32, 3, 16, 16))).astype(np.float32)
train_set = torch.utils.data.TensorDataset(torch.from_numpy(images_np[:24]), torch.from_numpy(labels_np[:24]))
test_set = torch.utils.data.TensorDataset(torch.from_numpy(images_np[24:]), torch.from_numpy(labels_np[24:]))
train_loader = torch.utils.data.DataLoader(train_set, batch_size=8, shuffle=False)
test_loader = torch.utils.data.DataLoader(test_set, batch_size=8, shuffle=False)

model = WideResNet(10, 2, 0.0, in_channels=3, labels=4).to(device)
load_numpy(model, np.random.default_rng(1))
print("wrn", model.block_depth, model.filters, sum(p.numel() for p in model.parameters()),
      list(dict(model.f.named_children()))[:3], float(model.f[-1].weight.abs().sum()))

base_optimizer = torch.optim.SGD
optimizer = SAM(model.parameters(), base_optimizer, rho=2.0, adaptive=True, lr=0.1, momentum=0.9, weight_decay=0.0005)
epochs = 2
scheduler = StepLR(optimizer, 0.1, epochs)
print("sam groups", optimizer.param_groups is optimizer.base_optimizer.param_groups,
      len(optimizer.param_groups), optimizer.param_groups[0]["rho"], optimizer.param_groups[0]["adaptive"],
      optimizer.defaults["lr"], optimizer.defaults["momentum"], optimizer.defaults["rho"])

for epoch in range(epochs):
    model.train()
    total_loss, total_correct, n = 0.0, 0, 0

    for batch in train_loader:
        inputs, targets = (b.to(device) for b in batch)

        # first forward-backward step
        enable_running_stats(model)
        predictions = model(inputs)
        loss = smooth_crossentropy(predictions, targets, smoothing=0.1)
        loss.mean().backward()
        optimizer.first_step(zero_grad=True)

        # second forward-backward step
        disable_running_stats(model)
        smooth_crossentropy(model(inputs), targets, smoothing=0.1).mean().backward()
        optimizer.second_step(zero_grad=True)

        with torch.no_grad():
            correct = torch.argmax(predictions.data, 1) == targets
            total_loss += loss.sum().item()
            total_correct += correct.sum().item()
            n += targets.size(0)
            scheduler(epoch)
    print("epoch", epoch, f"{total_loss / n:.4f}", total_correct, f"{scheduler.lr():.4f}")

    model.eval()
    with torch.no_grad():
        for batch in test_loader:
            inputs, targets = (b.to(device) for b in batch)

            predictions = model(inputs)
            loss = smooth_crossentropy(predictions, targets)
            correct = torch.argmax(predictions, 1) == targets
            print("test", fmt(loss), correct.tolist())

bn = model.f[1].block[0].norm_act[0]
print("bypass bn", bn.momentum, bn.backup_momentum, int(bn.num_batches_tracked), fmt(bn.running_mean), fmt(bn.running_var))
p0 = model.f[0].weight
print("old_p", torch.equal(optimizer.state[p0]["old_p"], p0), optimizer.state[p0]["old_p"] is p0.data,
      sorted(optimizer.state[p0]), sorted(optimizer.base_optimizer.state[p0]))
print("weights", fmt(p0), fmt(model.f[-1].weight), fmt(model.f[-1].bias))

# smooth_crossentropy against the built-in label smoothing: smoothing / (n-1)
# off the target there is smoothing / n everywhere, so they differ by a
# constant entropy term only for the matched smoothing
pred = torch.from_numpy(np.random.default_rng(2).normal(size=(5, 4)).astype(np.float32))
gold = torch.tensor([0, 3, 1, 1, 2])
print("smooth ce", fmt(smooth_crossentropy(pred, gold), 5), f"{smooth_crossentropy(pred, gold, 0.0).mean():.5f}",
      f"{F.cross_entropy(pred, gold):.5f}", f"{F.cross_entropy(pred, gold, label_smoothing=0.1):.5f}")

# the state dict: SAM's own state (old_p) and the shared param_groups
with tempfile.TemporaryDirectory() as d:
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, os.path.join(d, "sam.pt"))
    ck = torch.load(os.path.join(d, "sam.pt"))
    sd = ck["optimizer"]
    print("state_dict", len(sd["state"]), sorted(sd["state"][0]), sd["param_groups"][0]["params"][:4],
          sorted(k for k in sd["param_groups"][0] if k != "params"))
    model2 = WideResNet(10, 2, 0.0, in_channels=3, labels=4)
    model2.load_state_dict(ck["model"])
    opt2 = SAM(model2.parameters(), base_optimizer, rho=0.5, adaptive=False, lr=0.3, momentum=0.5)
    opt2.load_state_dict(sd)
    print("loaded", opt2.base_optimizer.param_groups is opt2.param_groups, opt2.param_groups[0]["rho"],
          opt2.base_optimizer.param_groups[0]["lr"], opt2.base_optimizer.param_groups[0]["momentum"],
          torch.equal(opt2.state[model2.f[0].weight]["old_p"], p0))

# a non-adaptive SAM on a small MLP through step(closure), as its README shows
mlp = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))
with torch.no_grad():
    r = np.random.default_rng(3)
    for p in mlp.parameters():
        p.copy_(torch.from_numpy(r.normal(0, 0.4, tuple(p.shape)).astype(np.float32)))
xm = torch.from_numpy(np.random.default_rng(4).normal(size=(12, 6)).astype(np.float32))
ym = torch.tensor([0, 1, 2] * 4)
opt_m = SAM(mlp.parameters(), torch.optim.Adam, rho=0.05, lr=0.01, betas=(0.8, 0.99))
for it in range(3):
    def closure():
        loss = F.cross_entropy(mlp(xm), ym)
        loss.backward()
        return loss
    loss = F.cross_entropy(mlp(xm), ym)
    loss.backward()
    opt_m.step(closure)
    opt_m.zero_grad()
print("closure sam", f"{loss.item():.5f}", fmt(mlp[0].weight), opt_m.defaults["betas"],
      sorted(opt_m.base_optimizer.state[mlp[0].weight]))
try:
    opt_m.step()
except AssertionError as e:
    print("no closure:", e)


# one SAM step (step(closure)) under torch.compile against the same step eagerly
inputs, targets = next(iter(train_loader))
model.train()


def sam_step(inputs, targets):
    def closure():
        loss = smooth_crossentropy(model(inputs), targets).mean()
        loss.backward()
        return loss
    enable_running_stats(model)
    loss = smooth_crossentropy(model(inputs), targets).mean()
    loss.backward()
    disable_running_stats(model)
    optimizer.step(closure)
    optimizer.zero_grad()
    return loss


state0, opt0 = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.base_optimizer.state_dict())
eager = [sam_step(inputs, targets).detach() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state0)
optimizer.base_optimizer.load_state_dict(opt0)
cstep = torch.compile(sam_step)
compiled = [cstep(inputs, targets).detach() for _ in range(2)]
print("compiled loss", [f"{l.item():.4f}" for l in compiled])
print("compiled == eager:", all(torch.allclose(c, e, rtol=1e-4, atol=1e-5) for c, e in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
