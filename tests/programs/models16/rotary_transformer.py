# Rotary position embeddings the way lucidrains/rotary-embedding-torch
# writes them (RotaryEmbedding with freqs_for='lang', theta rescaling,
# interpolate_factor, the cached freqs buffer, rotate_half over an einops
# '... (d r) -> ... d r' rearrange, apply_rotary_emb with start_index and a
# partial rotary dimension, rotate_queries_or_keys with an offset, and the
# xpos scale for queries and keys), next to the Meta LLaMA form with
# torch.polar / view_as_complex, inside a small causal transformer with
# F.scaled_dot_product_attention. Changes for a CPU test: weights and data
# from numpy, a few steps; then one training step under torch.compile
# against the same step eagerly.
import copy
from math import pi

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import einsum


def exists(val):
    return val is not None


def default(val, d):
    return val if exists(val) else d


def rotate_half(x):
    x = rearrange(x, '... (d r) -> ... d r', r=2)
    x1, x2 = x.unbind(dim=-1)
    x = torch.stack((-x2, x1), dim=-1)
    return rearrange(x, '... d r -> ... (d r)')


def apply_rotary_emb(freqs, t, start_index=0, scale=1., seq_dim=-2, freqs_seq_dim=None):
    dtype = t.dtype
    if not exists(freqs_seq_dim):
        if freqs.ndim == 2 or t.ndim == 3:
            freqs_seq_dim = 0
    if t.ndim == 3 or exists(freqs_seq_dim):
        seq_len = t.shape[seq_dim]
        freqs = freqs.narrow(freqs_seq_dim, freqs.shape[freqs_seq_dim] - seq_len, seq_len)
    rot_dim = freqs.shape[-1]
    end_index = start_index + rot_dim
    assert rot_dim <= t.shape[-1], f'feature dimension {t.shape[-1]} is not of sufficient size to rotate in all the positions {rot_dim}'
    t_left = t[..., :start_index]
    t_middle = t[..., start_index:end_index]
    t_right = t[..., end_index:]
    t_transformed = (t_middle * freqs.cos() * scale) + (rotate_half(t_middle) * freqs.sin() * scale)
    out = torch.cat((t_left, t_transformed, t_right), dim=-1)
    return out.type(dtype)


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, custom_freqs=None, freqs_for='lang', theta=10000, max_freq=10,
                 num_freqs=1, learned_freq=False, use_xpos=False, xpos_scale_base=512,
                 interpolate_factor=1., theta_rescale_factor=1., seq_before_head_dim=False,
                 cache_if_possible=True, cache_max_seq_len=64):
        super().__init__()
        theta *= theta_rescale_factor ** (dim / (dim - 2))
        self.freqs_for = freqs_for
        if exists(custom_freqs):
            freqs = custom_freqs
        elif freqs_for == 'lang':
            freqs = 1. / (theta ** (torch.arange(0, dim, 2)[:(dim // 2)].float() / dim))
        elif freqs_for == 'pixel':
            freqs = torch.linspace(1., max_freq / 2, dim // 2) * pi
        elif freqs_for == 'constant':
            freqs = torch.ones(num_freqs).float()
        self.cache_if_possible = cache_if_possible
        self.cache_max_seq_len = cache_max_seq_len
        self.register_buffer('cached_freqs', torch.zeros(cache_max_seq_len, dim), persistent=False)
        self.cached_freqs_seq_len = 0
        self.freqs = nn.Parameter(freqs, requires_grad=learned_freq)
        self.learned_freq = learned_freq
        self.register_buffer('dummy', torch.tensor(0), persistent=False)
        self.seq_before_head_dim = seq_before_head_dim
        self.default_seq_dim = -3 if seq_before_head_dim else -2
        assert interpolate_factor >= 1.
        self.interpolate_factor = interpolate_factor
        self.use_xpos = use_xpos
        if not use_xpos:
            return
        scale = (torch.arange(0, dim, 2) + 0.4 * dim) / (1.4 * dim)
        self.scale_base = xpos_scale_base
        self.register_buffer('scale', scale, persistent=False)

    @property
    def device(self):
        return self.dummy.device

    def get_seq_pos(self, seq_len, device=None, dtype=None, offset=0):
        device = default(device, self.device)
        dtype = default(dtype, self.cached_freqs.dtype)
        return (torch.arange(seq_len, device=device, dtype=dtype) + offset) / self.interpolate_factor

    def rotate_queries_or_keys(self, t, seq_dim=None, offset=0, scale=None):
        seq_dim = default(seq_dim, self.default_seq_dim)
        assert not self.use_xpos or exists(scale), 'you must use `.rotate_queries_and_keys` method instead and pass in both queries and keys, for length extrapolatable rotary embeddings'
        device, dtype, seq_len = t.device, t.dtype, t.shape[seq_dim]
        seq = self.get_seq_pos(seq_len, device=device, dtype=dtype, offset=offset)
        freqs = self.forward(seq, seq_len=seq_len, offset=offset)
        if seq_dim == -3:
            freqs = rearrange(freqs, 'n d -> n 1 d')
        return apply_rotary_emb(freqs, t, scale=default(scale, 1.), seq_dim=seq_dim)

    def rotate_queries_and_keys(self, q, k, seq_dim=None):
        seq_dim = default(seq_dim, self.default_seq_dim)
        assert self.use_xpos
        device, dtype, seq_len = q.device, q.dtype, q.shape[seq_dim]
        seq = self.get_seq_pos(seq_len, dtype=dtype, device=device)
        freqs = self.forward(seq, seq_len=seq_len)
        scale = self.get_scale(seq, seq_len=seq_len).to(dtype)
        if seq_dim == -3:
            freqs = rearrange(freqs, 'n d -> n 1 d')
            scale = rearrange(scale, 'n d -> n 1 d')
        rotated_q = apply_rotary_emb(freqs, q, scale=scale, seq_dim=seq_dim)
        rotated_k = apply_rotary_emb(freqs, k, scale=scale ** -1, seq_dim=seq_dim)
        return rotated_q.type(q.dtype), rotated_k.type(k.dtype)

    def get_scale(self, t, seq_len=None, offset=0):
        assert self.use_xpos
        power = (t - len(t) // 2) / self.scale_base
        scale = self.scale ** rearrange(power, 'n -> n 1')
        scale = repeat(scale, 'n d -> n (d r)', r=2)
        return scale

    def forward(self, t, seq_len=None, offset=0):
        should_cache = (self.cache_if_possible and not self.learned_freq and exists(seq_len)
                        and self.freqs_for != 'pixel' and (offset + seq_len) <= self.cache_max_seq_len)
        if should_cache and exists(self.cached_freqs) and (offset + seq_len) <= self.cached_freqs_seq_len:
            return self.cached_freqs[offset:(offset + seq_len)].detach()
        freqs = self.freqs
        freqs = einsum('..., f -> ... f', t.type(freqs.dtype), freqs)
        freqs = repeat(freqs, '... n -> ... (n r)', r=2)
        if should_cache and offset == 0:
            self.cached_freqs[:seq_len] = freqs.detach()
            self.cached_freqs_seq_len = seq_len
        return freqs


# the Meta LLaMA form: complex rotations
def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb_cis(xq, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, 1, xq_.shape[-2], xq_.shape[-1])
    return torch.view_as_real(xq_ * freqs_cis).flatten(3).type_as(xq)


class Attention(nn.Module):
    def __init__(self, dim, heads, rotary):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.rotary = rotary

    def forward(self, x):
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=self.heads), (q, k, v))
        q = self.rotary.rotate_queries_or_keys(q)
        k = self.rotary.rotate_queries_or_keys(k)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.to_out(rearrange(out, 'b h n d -> b n (h d)'))


class Block(nn.Module):
    def __init__(self, dim, heads, rotary):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, rotary)
        self.ff = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.ff(self.norm2(x))


class RotaryTransformer(nn.Module):
    def __init__(self, vocab, dim=32, heads=4, depth=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        rotary = RotaryEmbedding(dim=(dim // heads) // 2)      # partial rotary, as in the README
        self.blocks = nn.ModuleList([Block(dim, heads, rotary) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x))


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


r = np.random.default_rng(0)
rot = RotaryEmbedding(dim=8)
print("freqs", fmt(rot.freqs, 4), rot.freqs.requires_grad, list(dict(rot.named_buffers()).keys()),
      list(rot.state_dict().keys()))
q = torch.from_numpy(r.normal(size=(1, 2, 5, 16)).astype(np.float32))
k = torch.from_numpy(r.normal(size=(1, 2, 5, 16)).astype(np.float32))
rq = rot.rotate_queries_or_keys(q)
print("rotated", tuple(rq.shape), fmt(rq[0, 0, 1], 6), fmt(rq[0, 0, 1, 8:], 2) == fmt(q[0, 0, 1, 8:], 2))
print("cache", rot.cached_freqs_seq_len, fmt(rot.cached_freqs[4], 8))
print("norm kept", torch.allclose(rq[..., :8].norm(dim=-1), q[..., :8].norm(dim=-1), atol=1e-5))
# relative: q_m . k_n depends on m - n only
d1 = (rot.rotate_queries_or_keys(q, offset=3) * rot.rotate_queries_or_keys(k, offset=3)).sum(-1)
d0 = (rot.rotate_queries_or_keys(q) * rot.rotate_queries_or_keys(k)).sum(-1)
print("offset relative", torch.allclose(d0, d1, atol=1e-4), fmt(d1, 3))
print("rotate_half", rotate_half(torch.arange(6.0)).tolist())
x3 = torch.from_numpy(r.normal(size=(5, 2, 16)).astype(np.float32))
rot_sb = RotaryEmbedding(dim=8, seq_before_head_dim=True, theta_rescale_factor=2.0, interpolate_factor=2.0)
print("seq before head", fmt(rot_sb.freqs, 4), fmt(rot_sb.rotate_queries_or_keys(x3)[3, 1], 4))
rot_x = RotaryEmbedding(dim=8, use_xpos=True)
xq, xk = rot_x.rotate_queries_and_keys(q, k)
print("xpos", fmt(rot_x.scale, 4), fmt(xq[0, 1, 4], 4), fmt(xk[0, 1, 4], 4))
try:
    rot_x.rotate_queries_or_keys(q)
except AssertionError as e:
    print("AssertionError", str(e)[:40])
rot_p = RotaryEmbedding(dim=8, freqs_for='pixel', max_freq=10)
pos = torch.linspace(-1, 1, steps=4)
print("pixel", fmt(rot_p(pos), 6), tuple(rot_p(pos).shape))
st = apply_rotary_emb(rot(torch.arange(5.0)), q[0, 0], start_index=2)
print("start_index", fmt(st[1], 4))
# torch.polar form agrees with the rearrange form (LLaMA pairs adjacent dims too)
cis = precompute_freqs_cis(16, 5)
print("polar", cis.dtype, tuple(cis.shape), fmt(torch.view_as_real(cis)[3], 4))
full = RotaryEmbedding(dim=16, cache_if_possible=False)
print("polar == rearrange", torch.allclose(apply_rotary_emb_cis(q, cis), full.rotate_queries_or_keys(q), atol=1e-5))

vocab, T = 17, 12
model = RotaryTransformer(vocab)
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.requires_grad:
            p.copy_(torch.from_numpy(r.normal(0, 0.1, tuple(p.shape)).astype(np.float32)))
data = torch.from_numpy(r.integers(0, vocab, (8, T + 1)))
xb, yb = data[:, :-1], data[:, 1:]
print("params", sum(p.numel() for p in model.parameters() if p.requires_grad),
      sum(p.numel() for p in model.parameters()))
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
for step in range(12):
    logits = model(xb)
    loss = F.cross_entropy(logits.reshape(-1, vocab), yb.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 4 == 0:
        print(f"step {step} loss {loss.item():.4f}")
print("frozen freqs", model.blocks[0].attn.rotary.freqs.grad is None)


# one training step under torch.compile against the same step eagerly
def train_step(x, y):
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
    loss.backward()
    optimizer.step()
    return loss


xs, ys = xb[:4, :6], yb[:4, :6]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(xs, ys).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(xs, ys).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
