# Growing Neural Cellular Automata (Mordvintsev et al., Distill 2020), the
# PyTorch port chenmingxiang110/Growing-Neural-Cellular-Automata
# (lib/CAModel.py, training notebook), as written: alive masks from
# F.max_pool2d(x[:, 3:4, :, :], kernel_size=3, stride=1, padding=1) > 0.1,
# perceive() by a depthwise F.conv2d(x, weight, padding=1,
# groups=channel_n) with identity and rotated Sobel filters
# (torch.stack([identify, c*dx - s*dy, s*dx + c*dy]).repeat(channel_n, 1, 1)),
# linear layers over transpose(1, 3) with fc1 zero-initialised, the
# stochastic update mask torch.rand(...) > fire_rate, the seed cell
# (make_seed), F.mse_loss on the RGBA channels after a random number of
# steps, gradient normalisation p.grad / (p.grad.norm() + 1e-8) (the
# Distill notebook's), Adam and a MultiStepLR. Written for this test: a 12x12
# target, 8 hidden channels, 6 updates of 8-12 CA steps; one compiled update
# (fire rate 0: its random masks are not eager's) against eager.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CAModel(nn.Module):
    def __init__(self, channel_n, fire_rate, device, hidden_size=128):
        super(CAModel, self).__init__()

        self.device = device
        self.channel_n = channel_n

        self.fc0 = nn.Linear(channel_n * 3, hidden_size)
        self.fc1 = nn.Linear(hidden_size, channel_n, bias=False)
        with torch.no_grad():
            self.fc1.weight.zero_()

        self.fire_rate = fire_rate
        self.to(self.device)

    def alive(self, x):
        return F.max_pool2d(x[:, 3:4, :, :], kernel_size=3, stride=1, padding=1) > 0.1

    def perceive(self, x, angle):

        def _perceive_with(x, weight):
            conv_weights = torch.from_numpy(weight.astype(np.float32)).to(self.device)
            conv_weights = conv_weights.view(1, 1, 3, 3).repeat(self.channel_n, 1, 1, 1)
            return F.conv2d(x, conv_weights, padding=1, groups=self.channel_n)

        dx = np.outer([1, 2, 1], [-1, 0, 1]) / 8.0  # Sobel filter
        dy = dx.T
        c = np.cos(angle * np.pi / 180)
        s = np.sin(angle * np.pi / 180)
        w1 = c * dx - s * dy
        w2 = s * dx + c * dy

        y1 = _perceive_with(x, w1)
        y2 = _perceive_with(x, w2)
        y = torch.cat((x, y1, y2), 1)
        return y

    def update(self, x, fire_rate, angle):
        x = x.transpose(1, 3)
        pre_life_mask = self.alive(x)

        dx = self.perceive(x, angle)
        dx = dx.transpose(1, 3)
        dx = self.fc0(dx)
        dx = F.relu(dx)
        dx = self.fc1(dx)

        if fire_rate is None:
            fire_rate = self.fire_rate
        stochastic = torch.rand([dx.size(0), dx.size(1), dx.size(2), 1]) > fire_rate
        stochastic = stochastic.float().to(self.device)
        dx = dx * stochastic

        x = x + dx.transpose(1, 3)

        post_life_mask = self.alive(x)
        life_mask = (pre_life_mask & post_life_mask).float()
        x = x * life_mask
        return x.transpose(1, 3)

    def forward(self, x, steps=1, fire_rate=None, angle=0.0):
        for step in range(steps):
            x = self.update(x, fire_rate, angle)
        return x


def make_seed(size, n=1):
    x = np.zeros([n, size, size, CHANNEL_N], np.float32)
    x[:, size // 2, size // 2, 3:] = 1.0
    return x


def make_target(size):
    yy, xx = np.mgrid[:size, :size] / (size - 1) * 2 - 1
    disc = (xx ** 2 + yy ** 2 < 0.5).astype(np.float32)
    img = np.stack([disc * (xx + 1) / 2, disc * (yy + 1) / 2, disc * 0.5, disc], -1)
    return img


CHANNEL_N = 8        # Number of CA state channels
TARGET_SIZE = 12
BATCH_SIZE = 4
CELL_FIRE_RATE = 0.5
lr = 2e-3
lr_gamma = 0.9999
betas = (0.5, 0.5)
n_epoch = 6

np.random.seed(0)
torch.manual_seed(0)
device = torch.device("cpu")
target_img = make_target(TARGET_SIZE)
pad_target = torch.from_numpy(np.repeat(target_img[None, ...], BATCH_SIZE, 0)).to(device)
seed = make_seed(TARGET_SIZE, 1)

ca = CAModel(CHANNEL_N, CELL_FIRE_RATE, device, hidden_size=32).to(device)
optimizer = torch.optim.Adam(ca.parameters(), lr=lr, betas=betas)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [3, 5], gamma=0.5)
print("seed alive", int(ca.alive(torch.from_numpy(seed).transpose(1, 3)).sum()))


def train(x, target, steps, optimizer, scheduler, fire_rate=None):
    x = ca(x, steps, fire_rate)
    loss = F.mse_loss(x[:, :, :, :4], target)
    optimizer.zero_grad()
    loss.backward()
    for p in ca.parameters():
        p.grad = p.grad / (p.grad.norm() + 1e-8)   # normalize gradients
    optimizer.step()
    scheduler.step()
    return x, loss


for i in range(n_epoch):
    x0 = torch.from_numpy(np.repeat(seed, BATCH_SIZE, 0)).to(device)
    steps = np.random.randint(8, 13)
    x, loss = train(x0, pad_target, steps, optimizer, scheduler)
    print(i, "steps", steps, "loss", round(loss.item(), 6), "lr", scheduler.get_last_lr()[0],
          "alive", int((x[..., 3] > 0.1).sum()))

x0 = torch.from_numpy(np.repeat(seed, BATCH_SIZE, 0))
state = (copy.deepcopy(ca.state_dict()), copy.deepcopy(optimizer.state_dict()),
         copy.deepcopy(scheduler.state_dict()), torch.get_rng_state())
# (every cell fires: compiled code draws its masks from a counter-based
# stream, as torch.compile's Philox kernels do, not from eager's)
x_c, loss_c = torch.compile(train)(x0, pad_target, 10, optimizer, scheduler, 0.0)
after_c = copy.deepcopy(ca.state_dict())
ca.load_state_dict(state[0])
optimizer.load_state_dict(state[1])
scheduler.load_state_dict(state[2])
torch.set_rng_state(state[3])
x_e, loss_e = train(x0, pad_target, 10, optimizer, scheduler, 0.0)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6), torch.allclose(x_c, x_e, atol=1e-5),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in ca.state_dict().items()))
with torch.no_grad():
    grown = ca(torch.from_numpy(seed), 20)
    print("grown rgba", [round(v, 4) for v in grown[0, :, :, :4].mean((0, 1)).tolist()])
