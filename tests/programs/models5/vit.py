# lucidrains/vit-pytorch vit_pytorch/vit.py as published (einops' rearrange /
# repeat and einops.layers.torch.Rearrange patch embedding, pre-norm
# Attention / FeedForward, cls token or mean pooling), a tiny ViT trained a
# few steps with Adam on random images, then its training step under
# torch.compile against the same step run eagerly.  Weights and data come
# from numpy and dropout is 0 in the compared runs, so tracec and torch
# compute the same numbers; a dropout run follows torch.manual_seed(0).
import copy

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
from torch import nn
import torch.nn.functional as F

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

class Attention(nn.Module):
    def __init__(self, dim, heads = 8, dim_head = 64, dropout = 0.):
        super().__init__()
        inner_dim = dim_head *  heads
        project_out = not (heads == 1 and dim_head == dim)

        self.heads = heads
        self.scale = dim_head ** -0.5

        self.norm = nn.LayerNorm(dim)

        self.attend = nn.Softmax(dim = -1)
        self.dropout = nn.Dropout(dropout)

        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias = False)

        self.to_out = nn.Sequential(
            nn.Linear(inner_dim, dim),
            nn.Dropout(dropout)
        ) if project_out else nn.Identity()

    def forward(self, x):
        x = self.norm(x)

        qkv = self.to_qkv(x).chunk(3, dim = -1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = self.heads), qkv)

        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale

        attn = self.attend(dots)
        attn = self.dropout(attn)

        out = torch.matmul(attn, v)
        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out)

class Transformer(nn.Module):
    def __init__(self, dim, depth, heads, dim_head, mlp_dim, dropout = 0.):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.layers = nn.ModuleList([])
        for _ in range(depth):
            self.layers.append(nn.ModuleList([
                Attention(dim, heads = heads, dim_head = dim_head, dropout = dropout),
                FeedForward(dim, mlp_dim, dropout = dropout)
            ]))

    def forward(self, x):
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x

        return self.norm(x)

class ViT(nn.Module):
    def __init__(self, *, image_size, patch_size, num_classes, dim, depth, heads, mlp_dim, pool = 'cls', channels = 3, dim_head = 64, dropout = 0., emb_dropout = 0.):
        super().__init__()
        image_height, image_width = pair(image_size)
        patch_height, patch_width = pair(patch_size)

        assert image_height % patch_height == 0 and image_width % patch_width == 0, 'Image dimensions must be divisible by the patch size.'

        num_patches = (image_height // patch_height) * (image_width // patch_width)
        patch_dim = channels * patch_height * patch_width
        assert pool in {'cls', 'mean'}, 'pool type must be either cls (cls token) or mean (mean pooling)'

        self.to_patch_embedding = nn.Sequential(
            Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)', p1 = patch_height, p2 = patch_width),
            nn.LayerNorm(patch_dim),
            nn.Linear(patch_dim, dim),
            nn.LayerNorm(dim),
        )

        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches + 1, dim))
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.dropout = nn.Dropout(emb_dropout)

        self.transformer = Transformer(dim, depth, heads, dim_head, mlp_dim, dropout)

        self.pool = pool
        self.to_latent = nn.Identity()

        self.mlp_head = nn.Linear(dim, num_classes)

    def forward(self, img):
        x = self.to_patch_embedding(img)
        b, n, _ = x.shape

        cls_tokens = repeat(self.cls_token, '1 1 d -> b 1 d', b = b)
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
            if p.dim() == 1:
                base = 1.0 if "norm" in name and name.endswith("weight") else 0.0
                p.copy_(torch.from_numpy((base + 0.1 * g.standard_normal(p.shape)).astype(np.float32)))
            else:
                std = p.shape[-1] ** -0.5
                p.copy_(torch.from_numpy((std * g.standard_normal(p.shape)).astype(np.float32)))
    return model


rng = np.random.default_rng(0)
img = torch.from_numpy(rng.standard_normal((4, 3, 16, 16)).astype(np.float32))
labels = torch.from_numpy(rng.integers(0, 10, 4))

v = ViT(
    image_size = 16,
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
print(v)
numpy_init(v, 1)
print("parameters", sum(p.numel() for p in v.parameters()))

patches = v.to_patch_embedding[0](img)
ref = img.reshape(4, 3, 4, 4, 4, 4).permute(0, 2, 4, 3, 5, 1).reshape(4, 16, 48)
print("patches", tuple(patches.shape), torch.equal(patches, ref))

preds = v(img) # (4, 10)
print("preds", tuple(preds.shape), [f"{p:.5f}" for p in preds[0].tolist()])
loss = F.cross_entropy(preds, labels)
loss.backward()
print(f"loss {loss.item():.6f}")
for name, p in v.named_parameters():
    print(f"grad {name} {tuple(p.shape)} {p.grad.norm().item():.5e}")
v.zero_grad()

# mean pooling, a single head with dim_head == dim (to_out is nn.Identity)
m = numpy_init(ViT(image_size = (16, 8), patch_size = (4, 2), num_classes = 3, dim = 8, depth = 1,
                   heads = 1, dim_head = 8, mlp_dim = 16, pool = 'mean', channels = 1), 2)
print("mean pool", type(m.transformer.layers[0][0].to_out).__name__,
      [f"{p:.5f}" for p in m(img[:, :1, :, :8]).flatten().tolist()])

opt = torch.optim.Adam(v.parameters(), lr = 3e-4)


def train_step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(v(x), y)
    loss.backward()
    opt.step()
    return loss


for s in range(3):
    print(f"step {s} loss {train_step(img, labels).item():.6f}")

v.eval()
with torch.no_grad():
    acc = (v(img).argmax(dim = -1) == labels).float().mean()
print(f"accuracy {acc.item():.4f}")
v.train()

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

# with dropout: the draws differ between tracec and torch
d = numpy_init(ViT(image_size = 16, patch_size = 8, num_classes = 10, dim = 16, depth = 1, heads = 2,
                   dim_head = 8, mlp_dim = 32, dropout = 0.1, emb_dropout = 0.1), 3)
print("dropout loss", f"{F.cross_entropy(d(img), labels).item():.4f}")
