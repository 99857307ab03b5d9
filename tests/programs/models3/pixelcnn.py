# jzbontar/pixelcnn-pytorch main.py (MaskedConv2d subclassing nn.Conv2d: a
# mask buffer cloned from the weight and cut by slice assignment, the weight
# masked in place through .data in forward before super().forward; the
# 256-way per-pixel cross-entropy over (N, 256, H, W) logits; pixel-by-pixel
# sampling with softmax and torch.multinomial into a legacy torch.Tensor
# buffer), ported to today's API as its forks do (loss.item(),
# torch.no_grad() for volatile, no .cuda(), print()), with fewer, narrower
# layers on 12x12 images.  Random MNIST-like images and numpy weights so
# tracec and torch compute the same numbers; torch seeded with
# manual_seed(0) for the samples' draws.  Then the training step under
# torch.compile.
import copy
import time

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
import torch.nn as nn
import torch.nn.functional as F
from torch import optim, cuda
from torch.utils import data


class MaskedConv2d(nn.Conv2d):
    def __init__(self, mask_type, *args, **kwargs):
        super(MaskedConv2d, self).__init__(*args, **kwargs)
        assert mask_type in {'A', 'B'}
        self.register_buffer('mask', self.weight.data.clone())
        _, _, kH, kW = self.weight.size()
        self.mask.fill_(1)
        self.mask[:, :, kH // 2, kW // 2 + (mask_type == 'B'):] = 0
        self.mask[:, :, kH // 2 + 1:] = 0

    def forward(self, x):
        self.weight.data *= self.mask
        return super(MaskedConv2d, self).forward(x)


fm = 8
net = nn.Sequential(
    MaskedConv2d('A', 1,  fm, 7, 1, 3, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    MaskedConv2d('B', fm, fm, 7, 1, 3, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    MaskedConv2d('B', fm, fm, 7, 1, 3, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    MaskedConv2d('B', fm, fm, 7, 1, 3, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    nn.Conv2d(fm, 256, 1))
print(net)
g = np.random.RandomState(0)
with torch.no_grad():
    for p in net.parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy((g.randn(*p.shape) / np.sqrt(p[0].numel() / 2)).astype(np.float32)))
        else:
            p.copy_(torch.from_numpy((1.0 * (p.shape[0] == fm) + 0.1 * g.randn(*p.shape)).astype(np.float32)))
print("mask A centre row:", net[0].mask[0, 0, 3].tolist(), "mask B:", net[3].mask[0, 0, 3].tolist(),
      "rows below:", net[3].mask[0, 0, 4:].sum().item())

images = torch.from_numpy((np.round(g.rand(24, 1, 12, 12) ** 3 * 255) / 255).astype(np.float32))
tr = data.DataLoader(data.TensorDataset(images[:16], torch.zeros(16)), batch_size=8, shuffle=False)
te = data.DataLoader(data.TensorDataset(images[16:], torch.zeros(8)), batch_size=8, shuffle=False)
sample = torch.Tensor(4, 1, 12, 12)
optimizer = optim.Adam(net.parameters())

# the first layer's output at a pixel does not see that pixel or later ones
x = images[:1].clone().requires_grad_()
net.eval()
net(x)[0, :, 5, 5].sum().backward()
seen = (x.grad[0, 0] != 0).nonzero().tolist()
print("receptive field causal:", all((r, c) < (5, 5) for r, c in seen), len(seen))

for epoch in range(2):
    # train
    err_tr = []
    cuda.synchronize() if cuda.is_available() else None
    time_tr = time.time()
    net.train(True)
    for input, _ in tr:
        target = (input[:, 0] * 255).long()
        loss = F.cross_entropy(net(input), target)
        err_tr.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    time_tr = time.time() - time_tr

    # compute error on test set
    err_te = []
    time_te = time.time()
    net.train(False)
    with torch.no_grad():
        for input, _ in te:
            target = (input[:, 0] * 255).long()
            loss = F.cross_entropy(net(input), target)
            err_te.append(loss.item())
    time_te = time.time() - time_te

    # sample
    sample.fill_(0)
    net.train(False)
    with torch.no_grad():
        for i in range(12):
            for j in range(12):
                out = net(sample)
                probs = F.softmax(out[:, :, i, j], dim=1).data
                sample[:, :, i, j] = torch.multinomial(probs, 1).float() / 255.
    print('epoch={}; nll_tr={:.7f}; nll_te={:.7f}'.format(
        epoch, np.mean(err_tr), np.mean(err_te)))
    print('sample mean {:.4f}'.format(sample.mean().item()))

print("masked weights stay masked:", all(bool((m.weight * (1 - m.mask) == 0).all())
                                         for m in net if isinstance(m, MaskedConv2d)))
print("running_mean", [f"{v:.5f}" for v in net[1].running_mean.tolist()])

# one step's gradients, and the step under torch.compile
net.train()
input = images[:8]
target = (input[:, 0] * 255).long()
loss = F.cross_entropy(net(input), target)
optimizer.zero_grad()
loss.backward()
print(f"loss {loss.item():.6f}")
for name, p in net.named_parameters():
    print(f"grad {name} {p.grad.norm().item():.5e}")


def train_step(input):
    target = (input[:, 0] * 255).long()
    loss = F.cross_entropy(net(input), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(net.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(images[8:16]).item() for _ in range(2)]
after = copy.deepcopy(net.state_dict())
net.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(images[8:16]).item() for _ in range(2)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(net.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
