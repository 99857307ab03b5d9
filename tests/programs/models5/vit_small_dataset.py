# lucidrains/vit-pytorch vit_pytorch/vit_for_small_dataset.py as published
# (Shifted Patch Tokenization: four F.pad shifts with negative padding
# (crops) concatenated on channels, then einops Rearrange; Locality Self
# Attention: a learned temperature and the diagonal masked with
# -finfo.max), a tiny ViT trained a few steps with Adam on random images,
# then its training step under torch.compile against the same step run
# eagerly.  Weights and data come from numpy so tracec and torch compute the
# same numbers.
import copy
from math import sqrt

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from einops import rearrange, repeat
from einops.layers.torch import Rearrange

# helpers

def pair(t):
    return t if isinstance(t, tuple) else (t, t)

# classes

class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim, dropout = 0.):
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(dim),
            nn.Linear(dim, hidden_dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_dim, dim),
            nn.Dropout(dropout)
        )
    def forward(self, x):
        return self.net(x)

class LSA(nn.Module):
    def __init__(self, dim, heads = 8, dim_head = 64, dropout = 0.):
        super().__init__()
        inner_dim = dim_head *  heads
        self.heads = heads
        self.temperature = nn.Parameter(torch.log(torch.tensor(dim_head ** -0.5)))

        self.norm = nn.LayerNorm(dim)
        self.attend = nn.Softmax(dim = -1)
        self.dropout = nn.Dropout(dropout)

        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias = False)

        self.to_out = nn.Sequential(
            nn.Linear(inner_dim, dim),
            nn.Dropout(dropout)
        )

    def forward(self, x):
        x = self.norm(x)
        qkv = self.to_qkv(x).chunk(3, dim = -1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = self.heads), qkv)

        dots = torch.matmul(q, k.transpose(-1, -2)) * self.temperature.exp()

        mask = torch.eye(dots.shape[-1], device = dots.device, dtype = torch.bool)
        mask_value = -torch.finfo(dots.dtype).max
        dots = dots.masked_fill(mask, mask_value)

        attn = self.attend(dots)
        attn = self.dropout(attn)

        out = torch.matmul(attn, v)
        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out)

class Transformer(nn.Module):
    def __init__(self, dim, depth, heads, dim_head, mlp_dim, dropout = 0.):
        super().__init__()
        self.layers = nn.ModuleList([])
        for _ in range(depth):
            self.layers.append(nn.ModuleList([
                LSA(dim, heads = heads, dim_head = dim_head, dropout = dropout),
                FeedForward(dim, mlp_dim, dropout = dropout)
            ]))
    def forward(self, x):
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        return x

class SPT(nn.Module):
    def __init__(self, *, dim, patch_size, channels = 3):
        super().__init__()
        patch_dim = patch_size * patch_size * 5 * channels

        self.to_patch_tokens = nn.Sequential(
            Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)', p1 = patch_size, p2 = patch_size),
            nn.LayerNorm(patch_dim),
            nn.Linear(patch_dim, dim)
        )

    def forward(self, x):
        shifts = ((1, -1, 0, 0), (-1, 1, 0, 0), (0, 0, 1, -1), (0, 0, -1, 1))
        shifted_x = list(map(lambda shift: F.pad(x, shift), shifts))
        x_with_shifts = torch.cat((x, *shifted_x), dim = 1)
        return self.to_patch_tokens(x_with_shifts)

class ViT(nn.Module):
    def __init__(self, *, image_size, patch_size, num_classes, dim, depth, heads, mlp_dim, pool = 'cls', channels = 3, dim_head = 64, dropout = 0., emb_dropout = 0.):
        super().__init__()
        image_height, image_width = pair(image_size)
        patch_height, patch_width = pair(patch_size)

        assert image_height % patch_height == 0 and image_width % patch_width == 0, 'Image dimensions must be divisible by the patch size.'

        num_patches = (image_height // patch_height) * (image_width // patch_width)
        patch_dim = channels * patch_height * patch_width
        assert pool in {'cls', 'mean'}, 'pool type must be either cls (cls token) or mean (mean pooling)'

        self.to_patch_embedding = SPT(dim = dim, patch_size = patch_size, channels = channels)

        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches + 1, dim))
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.dropout = nn.Dropout(emb_dropout)

        self.transformer = Transformer(dim, depth, heads, dim_head, mlp_dim, dropout)

        self.pool = pool
        self.to_latent = nn.Identity()

        self.mlp_head = nn.Sequential(
            nn.LayerNorm(dim),
            nn.Linear(dim, num_classes)
        )

    def forward(self, img):
        x = self.to_patch_embedding(img)
        b, n, _ = x.shape

        cls_tokens = repeat(self.cls_token, '() n d -> b n d', b = b)
        x = torch.cat((cls_tokens, x), dim=1)
        x += self.pos_embedding[:, :(n + 1)]
        x = self.dropout(x)

        x = self.transformer(x)

        x = x.mean(dim = 1) if self.pool == 'mean' else x[:, 0]

        x = self.to_latent(x)
        return self.mlp_head(x)


def numpy_init(model, seed):
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("temperature"):
                continue   # log(dim_head ** -0.5) as published
            if p.dim() == 1:
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(torch.from_numpy((base + 0.1 * g.standard_normal(tuple(p.shape))).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy((p.shape[-1] ** -0.5 * g.standard_normal(tuple(p.shape))).astype(np.float32)))
    return model


rng = np.random.default_rng(0)
img = torch.from_numpy(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
labels = torch.from_numpy(rng.integers(0, 10, 4))

spt = SPT(dim = 16, patch_size = 4)
x = torch.arange(16.).reshape(1, 1, 4, 4)
print("shifts", [F.pad(x, s)[0, 0].tolist() for s in ((1, -1, 0, 0), (0, 0, -1, 1))])

v = ViT(
    image_size = 8,
    patch_size = 4,
    num_classes = 10,
    dim = 32,
    depth = 2,
    heads = 4,
    dim_head = 8,
    mlp_dim = 64,
    dropout = 0.,
    emb_dropout = 0.
)
numpy_init(v, 1)
print(v.to_patch_embedding)
print("temperature", f"{v.transformer.layers[0][0].temperature.item():.6f}")

preds = v(img)
print("preds", tuple(preds.shape), [f"{p:.5f}" for p in preds[0].tolist()])
loss = F.cross_entropy(preds, labels)
loss.backward()
print(f"loss {loss.item():.6f}")
for name, p in v.named_parameters():
    print(f"grad {name} {tuple(p.shape)} {p.grad.norm().item():.5e}")
v.zero_grad()

opt = torch.optim.Adam(v.parameters(), lr = 1e-3)


def train_step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(v(x), y)
    loss.backward()
    opt.step()
    return loss


for s in range(3):
    print(f"step {s} loss {train_step(img, labels).item():.6f}")

state, opt_state = copy.deepcopy(v.state_dict()), copy.deepcopy(opt.state_dict())
eager = [train_step(img, labels).item() for _ in range(2)]
after = copy.deepcopy(v.state_dict())
v.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(img, labels).item() for _ in range(2)]
print("compiled losses", [f"{l:.6f}" for l in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(v.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
