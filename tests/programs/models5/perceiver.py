# lucidrains/perceiver-pytorch perceiver_pytorch/perceiver_pytorch.py as
# published (cache_fn weight tying, fourier_encode with linspace / meshgrid,
# PreNorm with a context norm, GEGLU, cross and latent Attention through
# einops rearrange / repeat and torch.einsum, the key mask filled with
# -finfo.max, the Reduce('b n d -> b d', 'mean') head), the README's usage
# with a tiny configuration, trained a few steps with Adam on random
# "images", with and without a mask, weight-tied, and returning embeddings.
# Weights and data come from numpy so tracec and torch compute the same
# numbers.  Then the training step under torch.compile against the same step
# run eagerly.
import copy
from math import pi, log
from functools import wraps

import numpy as np
import torch
from torch import nn, einsum
import torch.nn.functional as F

from einops import rearrange, repeat
from einops.layers.torch import Reduce

# helpers

def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d

def cache_fn(f):
    cache = dict()
    @wraps(f)
    def cached_fn(*args, _cache = True, key = None, **kwargs):
        if not _cache:
            return f(*args, **kwargs)
        nonlocal cache
        if key in cache:
            return cache[key]
        result = f(*args, **kwargs)
        cache[key] = result
        return result
    return cached_fn

def fourier_encode(x, max_freq, num_bands = 4):
    x = x.unsqueeze(-1)
    device, dtype, orig_x = x.device, x.dtype, x

    scales = torch.linspace(1., max_freq / 2, num_bands, device = device, dtype = dtype)
    scales = scales[(*((None,) * (len(x.shape) - 1)), Ellipsis)]

    x = x * scales * pi
    x = torch.cat([x.sin(), x.cos()], dim = -1)
    x = torch.cat((x, orig_x), dim = -1)
    return x

# helper classes

class PreNorm(nn.Module):
    def __init__(self, dim, fn, context_dim = None):
        super().__init__()
        self.fn = fn
        self.norm = nn.LayerNorm(dim)
        self.norm_context = nn.LayerNorm(context_dim) if exists(context_dim) else None

    def forward(self, x, **kwargs):
        x = self.norm(x)

        if exists(self.norm_context):
            context = kwargs['context']
            normed_context = self.norm_context(context)
            kwargs.update(context = normed_context)

        return self.fn(x, **kwargs)

class GEGLU(nn.Module):
    def forward(self, x):
        x, gates = x.chunk(2, dim = -1)
        return x * F.gelu(gates)

class FeedForward(nn.Module):
    def __init__(self, dim, mult = 4, dropout = 0.):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, dim * mult * 2),
            GEGLU(),
            nn.Linear(dim * mult, dim),
            nn.Dropout(dropout)
        )

    def forward(self, x):
        return self.net(x)

class Attention(nn.Module):
    def __init__(self, query_dim, context_dim = None, heads = 8, dim_head = 64, dropout = 0.):
        super().__init__()
        inner_dim = dim_head * heads
        context_dim = default(context_dim, query_dim)

        self.scale = dim_head ** -0.5
        self.heads = heads

        self.to_q = nn.Linear(query_dim, inner_dim, bias = False)
        self.to_kv = nn.Linear(context_dim, inner_dim * 2, bias = False)

        self.dropout = nn.Dropout(dropout)
        self.to_out = nn.Linear(inner_dim, query_dim)

    def forward(self, x, context = None, mask = None):
        h = self.heads

        q = self.to_q(x)
        context = default(context, x)
        k, v = self.to_kv(context).chunk(2, dim = -1)

        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> (b h) n d', h = h), (q, k, v))

        sim = einsum('b i d, b j d -> b i j', q, k) * self.scale

        if exists(mask):
            mask = rearrange(mask, 'b ... -> b (...)')
            max_neg_value = -torch.finfo(sim.dtype).max
            mask = repeat(mask, 'b j -> (b h) () j', h = h)
            sim.masked_fill_(~mask, max_neg_value)

        # attention, what we cannot get enough of
        attn = sim.softmax(dim = -1)
        attn = self.dropout(attn)

        out = einsum('b i j, b j d -> b i d', attn, v)
        out = rearrange(out, '(b h) n d -> b n (h d)', h = h)
        return self.to_out(out)

# main class

class Perceiver(nn.Module):
    def __init__(
        self,
        *,
        num_freq_bands,
        depth,
        max_freq,
        input_channels = 3,
        input_axis = 2,
        num_latents = 512,
        latent_dim = 512,
        cross_heads = 1,
        latent_heads = 8,
        cross_dim_head = 64,
        latent_dim_head = 64,
        num_classes = 1000,
        attn_dropout = 0.,
        ff_dropout = 0.,
        weight_tie_layers = False,
        fourier_encode_data = True,
        self_per_cross_attn = 1,
        final_classifier_head = True
    ):
        """The shape of the final attention mechanism will be:
        depth * (cross attention -> self_per_cross_attn * self attention)
        """
        super().__init__()
        self.input_axis = input_axis
        self.max_freq = max_freq
        self.num_freq_bands = num_freq_bands

        self.fourier_encode_data = fourier_encode_data
        fourier_channels = (input_axis * ((num_freq_bands * 2) + 1)) if fourier_encode_data else 0
        input_dim = fourier_channels + input_channels

        self.latents = nn.Parameter(torch.randn(num_latents, latent_dim))

        get_cross_attn = lambda: PreNorm(latent_dim, Attention(latent_dim, input_dim, heads = cross_heads, dim_head = cross_dim_head, dropout = attn_dropout), context_dim = input_dim)
        get_cross_ff = lambda: PreNorm(latent_dim, FeedForward(latent_dim, dropout = ff_dropout))
        get_latent_attn = lambda: PreNorm(latent_dim, Attention(latent_dim, heads = latent_heads, dim_head = latent_dim_head, dropout = attn_dropout))
        get_latent_ff = lambda: PreNorm(latent_dim, FeedForward(latent_dim, dropout = ff_dropout))

        get_cross_attn, get_cross_ff, get_latent_attn, get_latent_ff = map(cache_fn, (get_cross_attn, get_cross_ff, get_latent_attn, get_latent_ff))

        self.layers = nn.ModuleList([])
        for i in range(depth):
            should_cache = i > 0 and weight_tie_layers
            cache_args = {'_cache': should_cache}

            self_attns = nn.ModuleList([])

            for block_ind in range(self_per_cross_attn):
                self_attns.append(nn.ModuleList([
                    get_latent_attn(**cache_args, key = block_ind),
                    get_latent_ff(**cache_args, key = block_ind)
                ]))

            self.layers.append(nn.ModuleList([
                get_cross_attn(**cache_args),
                get_cross_ff(**cache_args),
                self_attns
            ]))

        self.to_logits = nn.Sequential(
            Reduce('b n d -> b d', 'mean'),
            nn.LayerNorm(latent_dim),
            nn.Linear(latent_dim, num_classes)
        ) if final_classifier_head else nn.Identity()

    def forward(
        self,
        data,
        mask = None,
        return_embeddings = False
    ):
        b, *axis, _, device, dtype = *data.shape, data.device, data.dtype
        assert len(axis) == self.input_axis, 'input data must have the right number of axis'

        if self.fourier_encode_data:
            # calculate fourier encoded positions in the range of [-1, 1], for all axis

            axis_pos = list(map(lambda size: torch.linspace(-1., 1., steps=size, device=device, dtype=dtype), axis))
            pos = torch.stack(torch.meshgrid(*axis_pos, indexing = 'ij'), dim = -1)
            enc_pos = fourier_encode(pos, self.max_freq, self.num_freq_bands)
            enc_pos = rearrange(enc_pos, '... n d -> ... (n d)')
            enc_pos = repeat(enc_pos, '... -> b ...', b = b)

            data = torch.cat((data, enc_pos), dim = -1)

        # concat to channels of data and flatten axis

        data = rearrange(data, 'b ... d -> b (...) d')

        x = repeat(self.latents, 'n d -> b n d', b = b)

        # layers

        for cross_attn, cross_ff, self_attns in self.layers:
            x = cross_attn(x, context = data, mask = mask) + x
            x = cross_ff(x) + x

            for self_attn, self_ff in self_attns:
                x = self_attn(x) + x
                x = self_ff(x) + x

        # allow for fetching embeddings

        if return_embeddings:
            return x

        # to logits

        return self.to_logits(x)


def numpy_init(model, seed):
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                base = 1.0 if "norm" in name and name.endswith("weight") else 0.0
                p.copy_(torch.from_numpy((base + 0.1 * g.standard_normal(tuple(p.shape))).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy((p.shape[-1] ** -0.5 * g.standard_normal(tuple(p.shape))).astype(np.float32)))
    return model


def make(depth = 2, **kwargs):   # depth 6
    return Perceiver(
        input_channels = 3,          # number of channels for each token of the input
        input_axis = 2,              # number of axis for input data (2 for images, 3 for video)
        num_freq_bands = 6,          # number of freq bands, with original value (2 * K + 1)
        max_freq = 10.,              # maximum frequency, hyperparameter depending on how fine the data is
        depth = depth,
        num_latents = 16,            # 256
        latent_dim = 32,             # 512
        cross_heads = 1,             # number of heads for cross attention. paper said 1
        latent_heads = 4,            # 8
        cross_dim_head = 16,         # 64
        latent_dim_head = 8,         # 64
        num_classes = 10,            # 1000
        attn_dropout = 0.,
        ff_dropout = 0.,
        **kwargs
    )


rng = np.random.default_rng(0)
img = torch.from_numpy(rng.standard_normal((3, 6, 6, 3)).astype(np.float32)) # 3 tiny images, pixelized
labels = torch.from_numpy(rng.integers(0, 10, 3))

pos = torch.stack(torch.meshgrid(*[torch.linspace(-1., 1., steps=n) for n in (2, 3)], indexing = 'ij'), dim = -1)
enc = fourier_encode(pos, 10., 6)
print("fourier_encode", tuple(enc.shape), [f"{v:.5f}" for v in enc[1, 2, 0].tolist()])

model = make(weight_tie_layers = False, self_per_cross_attn = 2)
numpy_init(model, 1)
print(model.layers[0][0], model.to_logits)
print("parameters", sum(p.numel() for p in model.parameters()))

logits = model(img) # (3, 10)
print("logits", tuple(logits.shape), [f"{v:.5f}" for v in logits[0].tolist()])
mask = torch.from_numpy(rng.random((3, 6, 6)) > 0.3)
print("masked", [f"{v:.5f}" for v in model(img, mask = mask)[1].tolist()])
emb = model(img, return_embeddings = True)
print("embeddings", tuple(emb.shape), f"{emb.abs().mean().item():.6f}")

loss = F.cross_entropy(logits, labels)
loss.backward()
print(f"loss {loss.item():.6f}")
for name, p in model.named_parameters():
    if "layers.1" not in name:
        print(f"grad {name} {tuple(p.shape)} {p.grad.norm().item():.5e}")
model.zero_grad()

# weight tying: the later layers are the first one's modules
tied = numpy_init(make(depth = 3, weight_tie_layers = True), 2)
print("tied", tied.layers[1][0] is tied.layers[2][0], tied.layers[0][0] is tied.layers[1][0],
      sum(p.numel() for p in tied.parameters()), len(list(tied.named_parameters())))
out = tied(img)
F.cross_entropy(out, labels).backward()
print("tied grads", [f"{p.grad.norm().item():.5e}" for p in list(tied.parameters())[:4]])

opt = torch.optim.Adam(model.parameters(), lr = 1e-3)


def train_step(x, y, mask):
    opt.zero_grad()
    loss = F.cross_entropy(model(x, mask = mask), y)
    loss.backward()
    opt.step()
    return loss


for s in range(3):
    print(f"step {s} loss {train_step(img, labels, mask).item():.6f}")

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
eager = [train_step(img, labels, mask).item() for _ in range(2)]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(img, labels, mask).item() for _ in range(2)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
