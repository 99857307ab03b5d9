# lucidrains/vit-pytorch simple_vit.py (einops rearrange written in plain torch,
# as many forks do) trained a few steps on random images, eager and compiled
import torch
from torch import nn
import torch.nn.functional as F

# helpers

def pair(t):
    return t if isinstance(t, tuple) else (t, t)

def posemb_sincos_2d(h, w, dim, temperature: int = 10000, dtype = torch.float32):
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    assert (dim % 4) == 0, "feature dimension must be multiple of 4 for sincos emb"
    omega = torch.arange(dim // 4) / (dim // 4 - 1)
    omega = 1.0 / (temperature ** omega)

    y = y.flatten()[:, None] * omega[None, :]
    x = x.flatten()[:, None] * omega[None, :]
    pe = torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1)
    return pe.type(dtype)

# classes

class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.net = nn.Sequential(
            nn.LayerNorm(dim),
            nn.Linear(dim, hidden_dim),
            nn.GELU(),
            nn.Linear(hidden_dim, dim),
        )
    def forward(self, x):
        return self.net(x)

class Attention(nn.Module):
    def __init__(self, dim, heads = 8, dim_head = 64):
        super().__init__()
        inner_dim = dim_head *  heads
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)

        self.attend = nn.Softmax(dim = -1)

        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias = False)
        self.to_out = nn.Linear(inner_dim, dim, bias = False)

    def forward(self, x):
        x = self.norm(x)

        qkv = self.to_qkv(x).chunk(3, dim = -1)
        b, n, _ = x.shape
        # rearrange(t, 'b n (h d) -> b h n d', h = self.heads)
        q, k, v = map(lambda t: t.reshape(b, n, self.heads, -1).permute(0, 2, 1, 3), qkv)

        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale

        attn = self.attend(dots)

        out = torch.matmul(attn, v)
        # rearrange(out, 'b h n d -> b n (h d)')
        out = out.permute(0, 2, 1, 3).reshape(b, n, -1)
        return self.to_out(out)

class Transformer(nn.Module):
    def __init__(self, dim, depth, heads, dim_head, mlp_dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.layers = nn.ModuleList([])
        for _ in range(depth):
            self.layers.append(nn.ModuleList([
                Attention(dim, heads = heads, dim_head = dim_head),
                FeedForward(dim, mlp_dim)
            ]))
    def forward(self, x):
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        return self.norm(x)

class SimpleViT(nn.Module):
    def __init__(self, *, image_size, patch_size, num_classes, dim, depth, heads, mlp_dim, channels = 3, dim_head = 64):
        super().__init__()
        image_height, image_width = pair(image_size)
        patch_height, patch_width = pair(patch_size)

        assert image_height % patch_height == 0 and image_width % patch_width == 0, 'Image dimensions must be divisible by the patch size.'

        patch_dim = channels * patch_height * patch_width
        self.p1, self.p2 = patch_height, patch_width

        self.to_patch_embedding = nn.Sequential(
            nn.LayerNorm(patch_dim),
            nn.Linear(patch_dim, dim),
            nn.LayerNorm(dim),
        )

        self.pos_embedding = posemb_sincos_2d(
            h = image_height // patch_height,
            w = image_width // patch_width,
            dim = dim,
        )

        self.transformer = Transformer(dim, depth, heads, dim_head, mlp_dim)

        self.pool = "mean"
        self.to_latent = nn.Identity()

        self.linear_head = nn.Linear(dim, num_classes)

    def forward(self, img):
        device = img.device
        # Rearrange('b c (h p1) (w p2) -> b (h w) (p1 p2 c)')
        b, c, H, W = img.shape
        x = img.reshape(b, c, H // self.p1, self.p1, W // self.p2, self.p2)
        x = x.permute(0, 2, 4, 3, 5, 1).reshape(b, (H // self.p1) * (W // self.p2), -1)
        x = self.to_patch_embedding(x)
        x += self.pos_embedding.to(device, dtype=x.dtype)

        x = self.transformer(x)
        x = x.mean(dim = 1)

        x = self.to_latent(x)
        return self.linear_head(x)

torch.manual_seed(0)
v = SimpleViT(
    image_size = 32,
    patch_size = 8,
    num_classes = 10,
    dim = 64,
    depth = 2,
    heads = 4,
    mlp_dim = 128,
    dim_head = 16,
)
img = torch.randn(4, 3, 32, 32)
labels = torch.tensor([1, 2, 3, 4])
preds = v(img) # (4, 10)
print(preds.shape)
print(sum(p.numel() for p in v.parameters() if p.requires_grad))

opt = torch.optim.AdamW(v.parameters(), lr=3e-4, weight_decay=0.05)
def train_step(img, labels):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(v(img), labels, label_smoothing=0.1)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(v.parameters(), 1.0)
    opt.step()
    return loss

for step in range(3):
    print(f"eager step {step} loss {train_step(img, labels).item():.4f}")
compiled = torch.compile(train_step)
for step in range(3):
    print(f"compiled step {step} loss {compiled(img, labels).item():.4f}")
v.eval()
with torch.inference_mode():
    print(v(img).argmax(dim=-1).shape)
