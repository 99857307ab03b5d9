# lucidrains/mlp-mixer-pytorch mlp_mixer_pytorch.py (PreNormResidual,
# FeedForward with a `dense` factory: functools.partial(nn.Conv1d,
# kernel_size=1) mixes tokens, nn.Linear mixes channels) with einops'
# Rearrange / Reduce layers written in plain torch (Tensor.unfold patches, a
# mean), trained a few steps with Adam on random images, the step also under
# torch.compile.  Weights and data come from numpy so tracec and torch
# compute the same numbers.
import copy
from functools import partial

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

pair = lambda x: x if isinstance(x, tuple) else (x, x)


class Rearrange(nn.Module):
    """einops.layers.torch.Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)')."""
    def __init__(self, pattern, p1, p2):
        super().__init__()
        self.pattern, self.p1, self.p2 = pattern, p1, p2

    def forward(self, x):
        b, c = x.shape[:2]
        x = x.unfold(2, self.p1, self.p1).unfold(3, self.p2, self.p2)  # b c h w p1 p2
        x = x.permute(0, 2, 3, 4, 5, 1)
        return x.reshape(b, -1, self.p1 * self.p2 * c)

    def extra_repr(self):
        return repr(self.pattern)


class Reduce(nn.Module):
    """einops.layers.torch.Reduce('b n c -> b c', 'mean')."""
    def __init__(self, pattern, reduction):
        super().__init__()
        self.pattern, self.reduction = pattern, reduction

    def forward(self, x):
        return getattr(torch, self.reduction)(x, dim=1)

    def extra_repr(self):
        return f"{self.pattern!r}, {self.reduction!r}"


class PreNormResidual(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.fn = fn
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.fn(self.norm(x)) + x


def FeedForward(dim, expansion_factor = 4, dropout = 0., dense = nn.Linear):
    inner_dim = int(dim * expansion_factor)
    return nn.Sequential(
        dense(dim, inner_dim),
        nn.GELU(),
        nn.Dropout(dropout),
        dense(inner_dim, dim),
        nn.Dropout(dropout)
    )


def MLPMixer(*, image_size, channels, patch_size, dim, depth, num_classes, expansion_factor = 4, expansion_factor_token = 0.5, dropout = 0.):
    image_h, image_w = pair(image_size)
    assert (image_h % patch_size) == 0 and (image_w % patch_size) == 0, 'image must be divisible by patch size'
    num_patches = (image_h // patch_size) * (image_w // patch_size)
    chan_first, chan_last = partial(nn.Conv1d, kernel_size = 1), nn.Linear

    return nn.Sequential(
        Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)', p1 = patch_size, p2 = patch_size),
        nn.Linear((patch_size ** 2) * channels, dim),
        *[nn.Sequential(
            PreNormResidual(dim, FeedForward(num_patches, expansion_factor, dropout, chan_first)),
            PreNormResidual(dim, FeedForward(dim, expansion_factor_token, dropout, chan_last))
        ) for _ in range(depth)],
        nn.LayerNorm(dim),
        Reduce('b n c -> b c', 'mean'),
        nn.Linear(dim, num_classes)
    )


def numpy_init(model, seed):
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                base = 1.0 if "norm" in name and name.endswith("weight") else 0.0
                p.copy_(torch.from_numpy((base + 0.1 * g.standard_normal(p.shape)).astype(np.float32)))
            else:
                std = p[0].numel() ** -0.5
                p.copy_(torch.from_numpy((std * g.standard_normal(p.shape)).astype(np.float32)))
    return model


rng = np.random.default_rng(0)
img = torch.from_numpy(rng.standard_normal((6, 3, 16, 16)).astype(np.float32))
labels = torch.from_numpy(rng.integers(0, 5, 6))

model = MLPMixer(
    image_size = 16,
    channels = 3,
    patch_size = 4,
    dim = 24,
    depth = 2,
    num_classes = 5
)
print(model)
numpy_init(model, 1)

# the patches agree with the reshape/permute spelling of the same rearrange
ref = img.reshape(6, 3, 4, 4, 4, 4).permute(0, 2, 4, 3, 5, 1).reshape(6, 16, 48)
print("rearrange:", tuple(model[0](img).shape), torch.equal(model[0](img), ref))

pred = model(img) # (6, 5)
print("pred", tuple(pred.shape), [f"{v:.5f}" for v in pred[0].tolist()])
loss = F.cross_entropy(pred, labels)
loss.backward()
print(f"loss {loss.item():.6f}")
for name, p in model.named_parameters():
    print(f"grad {name} {tuple(p.shape)} {p.grad.norm().item():.5e}")

opt = torch.optim.Adam(model.parameters(), lr=1e-3)


def train_step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


for s in range(3):
    print(f"step {s} loss {train_step(img, labels).item():.6f}")

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
eager = [train_step(img, labels).item() for _ in range(2)]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(img, labels).item() for _ in range(2)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
