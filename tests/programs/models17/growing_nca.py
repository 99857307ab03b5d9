# Growing Neural Cellular Automata (distill.pub 2020), the PyTorch port
# chenmingxiang110/Growing-Neural-Cellular-Automata: lib/CAModel.py (fixed
# Sobel perception filters rotated by an angle, repeated per channel and
# applied as a depthwise F.conv2d(groups=channel_n), the identity branch by
# concatenating the state, the alive mask from F.max_pool2d over the alpha
# channel, the stochastic update mask torch.rand(...) > fire_rate, the zeroed
# last layer), lib/utils_vis.py (SamplePool, make_seed, make_circle_masks)
# and training.ipynb's loop (pool sampling with np.random.choice, sorting
# the batch by loss and replacing the worst with the seed, damage, Adam with
# ExponentialLR, the per-parameter gradient normalization of the original
# notebook); and the self-organising textures colab's CA (stacked
# identity / Sobel / Laplacian filters per channel through a reshape and
# circular F.pad, the floor() update mask, backward and the gradient
# normalization under no_grad, MultiStepLR).  Changes for a CPU test: a 12x12 target from numpy, 8 channels,
# a few CA steps; torch.rand's draws differ in tracec, so the stochastic
# update of the public model prints [rng] lines and the training runs
# through a subclass whose update takes its mask's noise from numpy (the
# same body, one line changed).  Then one training step under
# torch.compile against the same step eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


# ---- lib/CAModel.py ----
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


# ---- lib/utils_vis.py ----
class SamplePool:
    def __init__(self, *, _parent=None, _parent_idx=None, **slots):
        self._parent = _parent
        self._parent_idx = _parent_idx
        self._slot_names = slots.keys()
        self._size = None
        for k, v in slots.items():
            if self._size is None:
                self._size = len(v)
            assert self._size == len(v)
            setattr(self, k, np.asarray(v))

    def sample(self, n):
        idx = np.random.choice(self._size, n, False)
        batch = {k: getattr(self, k)[idx] for k in self._slot_names}
        batch = SamplePool(**batch, _parent=self, _parent_idx=idx)
        return batch

    def commit(self):
        for k in self._slot_names:
            getattr(self._parent, k)[self._parent_idx] = getattr(self, k)


def make_seed(shape, n_channels):
    seed = np.zeros([shape[0], shape[1], n_channels], np.float32)
    seed[shape[0] // 2, shape[1] // 2, 3:] = 1.0
    return seed


def make_circle_masks(n, h, w):
    x = np.linspace(-1.0, 1.0, w)[None, None, :]
    y = np.linspace(-1.0, 1.0, h)[None, :, None]
    center = np.random.random([2, n, 1, 1]) * 1.0 - 0.5
    r = np.random.random([n, 1, 1]) * 0.3 + 0.1
    x, y = (x - center[0]) / r, (y - center[1]) / r
    mask = (x * x + y * y < 1.0).astype(np.float32)
    return mask


# ---- the test: the stochastic mask's noise from numpy ----
NOISE = np.random.default_rng(7)


class NumpyNoiseCAModel(CAModel):
    noise = None

    def update(self, x, fire_rate, angle, noise=None):
        x = x.transpose(1, 3)
        pre_life_mask = self.alive(x)

        dx = self.perceive(x, angle)
        dx = dx.transpose(1, 3)
        dx = self.fc0(dx)
        dx = F.relu(dx)
        dx = self.fc1(dx)

        if fire_rate is None:
            fire_rate = self.fire_rate
        stochastic = noise > fire_rate  # noise in [0, 1), drawn by numpy
        stochastic = stochastic.float().to(self.device)
        dx = dx * stochastic

        x = x + dx.transpose(1, 3)

        post_life_mask = self.alive(x)
        life_mask = (pre_life_mask & post_life_mask).float()
        x = x * life_mask
        return x.transpose(1, 3)

    def forward(self, x, steps=1, fire_rate=None, angle=0.0):
        for step in range(steps):
            x = self.update(x, fire_rate, angle, self.noise[step])
        return x


def draw_noise(steps, b, h, w):
    return torch.from_numpy(NOISE.random((steps, b, h, w, 1)).astype(np.float32))


device = torch.device("cpu")
CHANNEL_N = 8
TARGET_PADDING = 2
TARGET_SIZE = 8
BATCH_SIZE = 4
POOL_SIZE = 16
CELL_FIRE_RATE = 0.5
DAMAGE_N = 1
lr = 2e-3
lr_gamma = 0.9999
betas = (0.5, 0.5)

np.random.seed(0)
# a small RGBA "emoji": a disc with a coloured ring, premultiplied alpha
yy, xx = np.mgrid[:TARGET_SIZE, :TARGET_SIZE] - (TARGET_SIZE - 1) / 2
rad = np.sqrt(xx ** 2 + yy ** 2)
target_img = np.zeros((TARGET_SIZE, TARGET_SIZE, 4), np.float32)
target_img[..., 3] = (rad < 3.6).astype(np.float32)
target_img[..., 0] = target_img[..., 3] * (rad > 2.0)
target_img[..., 1] = target_img[..., 3] * 0.6
target_img[..., 2] = target_img[..., 3] * (1.0 - rad / 4.0).clip(0, 1)
p = TARGET_PADDING
pad_target = np.pad(target_img, [(p, p), (p, p), (0, 0)])
h, w = pad_target.shape[:2]
pad_target = np.expand_dims(pad_target, axis=0)
pad_target = torch.from_numpy(pad_target.astype(np.float32)).to(device)
seed = make_seed((h, w), CHANNEL_N)
pool = SamplePool(x=np.repeat(seed[None, ...], POOL_SIZE, 0))
print("target", tuple(pad_target.shape), f"{pad_target.sum().item():.4f}", "seed", seed.shape, seed.sum())

# the public model: perception, alive mask, and its stochastic update ([rng])
torch.manual_seed(0)
ca_pub = CAModel(CHANNEL_N, CELL_FIRE_RATE, device, hidden_size=32)
print("fc1 zero", ca_pub.fc1.weight.abs().sum().item(), tuple(ca_pub.fc0.weight.shape))
xs = torch.from_numpy(np.random.default_rng(3).random((2, CHANNEL_N, w, h)).astype(np.float32))
per = ca_pub.perceive(xs, 0.0)
per45 = ca_pub.perceive(xs, 45.0)
print("perceive", tuple(per.shape), f"{per[:, CHANNEL_N:].abs().sum().item():.4f}",
      f"{per45[:, CHANNEL_N:].abs().sum().item():.4f}", torch.equal(per[:, :CHANNEL_N], xs))
ident = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]).view(1, 1, 3, 3).repeat(CHANNEL_N, 1, 1, 1)
print("identity filter", torch.allclose(F.conv2d(xs, ident, padding=1, groups=CHANNEL_N), xs))
alive = ca_pub.alive(xs.transpose(1, 3) * 0.2)
print("alive", alive.dtype, tuple(alive.shape), alive.sum().item())
with torch.no_grad():
    ca_pub.fc1.weight.normal_(0, 0.1)
    out = ca_pub(torch.from_numpy(seed[None].repeat(2, 0)), steps=3)
print("public stochastic update", f"{out.abs().sum().item():.4f}")
print("fire_rate 1: no update", out.shape, ca_pub(torch.from_numpy(seed[None]), steps=1, fire_rate=1.0).sum().item())

# ---- training.ipynb ----
ca = NumpyNoiseCAModel(CHANNEL_N, CELL_FIRE_RATE, device, hidden_size=32)
with torch.no_grad():
    ca.fc0.weight.copy_(torch.from_numpy(np.random.default_rng(1).normal(0, 0.2, (32, CHANNEL_N * 3)).astype(np.float32)))
    ca.fc0.bias.zero_()
optimizer = optim.Adam(ca.parameters(), lr=lr, betas=betas)
scheduler = optim.lr_scheduler.ExponentialLR(optimizer, lr_gamma)


def train(x, target, steps, optimizer, scheduler):
    ca.noise = draw_noise(steps, *x.shape[:3])
    x = ca(x, steps=steps)
    loss = F.mse_loss(x[:, :, :, :4], target)
    optimizer.zero_grad()
    loss.backward()
    for p in ca.parameters():  # normalize the gradients per parameter
        p.grad /= (p.grad.norm() + 1e-8)
    optimizer.step()
    scheduler.step()
    return x, loss


def loss_f(x, target):
    return torch.mean(torch.pow(x[..., :4] - target, 2), [-2, -3, -1])


loss_log = []
for i in range(8):
    batch = pool.sample(BATCH_SIZE)
    x0 = torch.from_numpy(batch.x.astype(np.float32)).to(device)
    loss_rank = loss_f(x0, pad_target).detach().cpu().numpy().argsort()[::-1]
    x0 = batch.x[loss_rank]
    x0[:1] = seed
    if DAMAGE_N:
        damage = 1.0 - make_circle_masks(DAMAGE_N, h, w)[..., None]
        x0[-DAMAGE_N:] *= damage
    x0 = torch.from_numpy(x0.astype(np.float32)).to(device)

    x, loss = train(x0, pad_target, np.random.randint(4, 8), optimizer, scheduler)

    batch.x[:] = x.detach().cpu().numpy()
    batch.commit()
    loss_log.append(loss.item())
    if i % 2 == 0:
        print(i, "loss =", f"{loss.item():.6f}", "lr", f"{scheduler.get_last_lr()[0]:.8f}",
              "alive", (x[..., 3] > 0.1).sum().item())
print("pool", pool.x.shape, f"{pool.x[..., 3].sum():.4f}", "log10 loss", f"{np.log10(loss_log[-1]):.4f}")
print("grad norms", [f"{p.grad.norm().item():.4f}" for p in ca.parameters()])


# ---- the self-organising textures colab's CA (the same authors' PyTorch
# notebook): identity / Sobel / Laplacian filters stacked and applied per
# channel through a reshape and F.pad(mode='circular'), 1x1 conv layers,
# the update mask (torch.rand(b, 1, h, w) + update_rate).floor(), and the
# training step's backward and gradient normalization under no_grad ----
ident = torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
sobel_x = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])
lap = torch.tensor([[1.0, 2.0, 1.0], [2.0, -12, 2.0], [1.0, 2.0, 1.0]])


def perchannel_conv(x, filters):
    '''filters: [filter_n, h, w]'''
    b, ch, h, w = x.shape
    y = x.reshape(b * ch, 1, h, w)
    y = torch.nn.functional.pad(y, [1, 1, 1, 1], 'circular')
    y = torch.nn.functional.conv2d(y, filters[:, None])
    return y.reshape(b, -1, h, w)


def perception(x):
    filters = torch.stack([ident, sobel_x, sobel_x.T, lap])
    return perchannel_conv(x, filters)


class CA(torch.nn.Module):
    def __init__(self, chn=12, hidden_n=96):
        super().__init__()
        self.chn = chn
        self.w1 = torch.nn.Conv2d(chn * 4, hidden_n, 1)
        self.w2 = torch.nn.Conv2d(hidden_n, chn, 1, bias=False)
        self.w2.weight.data.zero_()

    def forward(self, x, update_rate=0.5):
        y = perception(x)
        y = self.w2(torch.relu(self.w1(y)))
        b, c, h, w = y.shape
        udpate_mask = (torch.rand(b, 1, h, w) + update_rate).floor()
        return x + y * udpate_mask

    def seed(self, n, sz=128):
        return torch.zeros(n, self.chn, sz, sz)


def to_rgb(x):
    return x[..., :3, :, :] + 0.5


tca = CA(chn=6, hidden_n=16)
with torch.no_grad():
    tca.w1.weight.copy_(torch.from_numpy(np.random.default_rng(2).normal(0, 0.3, (16, 24, 1, 1)).astype(np.float32)))
    tca.w1.bias.copy_(torch.from_numpy(np.random.default_rng(3).normal(0, 0.3, 16).astype(np.float32)))
px = torch.from_numpy(np.random.default_rng(4).random((1, 6, 8, 8)).astype(np.float32))
pp = perception(px)
print("circular perception", tuple(pp.shape), f"{pp.abs().sum().item():.4f}",
      torch.equal(pp[:, ::4], px), f"{pp[:, 3::4].sum().item():.4f}")
opt2 = torch.optim.Adam(tca.parameters(), 1e-3)
lr_sched = torch.optim.lr_scheduler.MultiStepLR(opt2, [2, 4], 0.3)
texture = to_rgb(px[:, :3]).detach() * 0.5
with torch.no_grad():
    pool2 = tca.seed(4, 8)
for i in range(5):
    with torch.no_grad():
        batch_idx = np.random.choice(len(pool2), 2, replace=False)
        x = pool2[batch_idx]
        if i % 2 == 0:
            x[:1] = tca.seed(1, 8)
    step_n = 3
    for k in range(step_n):
        x = tca(x, update_rate=1.0)   # (rand + 1).floor(): every cell updates
    overflow_loss = (x - x.clamp(-1.0, 1.0)).abs().sum()
    loss = (to_rgb(x) - texture).square().mean() + overflow_loss
    with torch.no_grad():
        loss.backward()
        for p in tca.parameters():
            p.grad /= (p.grad.norm() + 1e-8)  # normalize gradients
        opt2.step()
        opt2.zero_grad()
        lr_sched.step()
        pool2[batch_idx] = x  # update the pool
    print("texture", i, f"{loss.item():.6f}", f"lr {lr_sched.get_last_lr()[0]:.6f}", batch_idx.tolist())
print("texture update mask", f"{tca(pool2, update_rate=0.5).abs().sum().item():.4f}")


# one training step under torch.compile against the same step eagerly
def train_step(x0, noise):
    ca.noise = noise
    x = ca(x0, steps=noise.shape[0])
    loss = F.mse_loss(x[:, :, :, :4], pad_target)
    optimizer.zero_grad()
    loss.backward()
    for p in ca.parameters():
        p.grad /= (p.grad.norm() + 1e-8)
    optimizer.step()
    return loss


x0 = torch.from_numpy(pool.x[:2].astype(np.float32))
noises = [draw_noise(3, 2, h, w) for _ in range(2)]
state, opt_state = copy.deepcopy(ca.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(x0, n).item() for n in noises]
after = {k: v.clone() for k, v in ca.state_dict().items()}
ca.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(x0, n).item() for n in noises]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(ca.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
