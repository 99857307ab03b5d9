"""lucidrains/rotary-embedding-torch and lion-pytorch (the pip packages,
unmodified): rotary position embeddings (plain, xpos, axial pixel
frequencies, learned frequencies, cached key/value offsets) inside a
small causal self-attention language model, trained with the Lion
optimizer (weight decay, a few steps: its sign-update trajectory); the
library's other options (sequence-first layout, interpolation and theta
rescaling, constant and custom frequencies, queries against cached keys,
learned rotations, ``broadcat``), two configurations torch refuses, and
Lion with per-group and decoupled weight decay."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from lion_pytorch import Lion
from rotary_embedding_torch import (RotaryEmbedding, apply_learned_rotations, apply_rotary_emb,
                                    broadcat)

torch.manual_seed(0)

q = torch.randn(1, 2, 10, 16)
k = torch.randn(1, 2, 10, 16)
rot = RotaryEmbedding(dim=8)
print("rotated q", rot.rotate_queries_or_keys(q)[0, 0, 1, :6])
print("offset k", rot.rotate_queries_or_keys(k[:, :, -2:], offset=8)[0, 1, 0, :6])
xpos = RotaryEmbedding(dim=8, use_xpos=True)
qx, kx = xpos.rotate_queries_and_keys(q, k)
print("xpos", qx[0, 1, 2, :5], kx[0, 1, 2, :5])
pixel = RotaryEmbedding(dim=4, freqs_for="pixel", max_freq=64)
freqs = pixel.get_axial_freqs(4, 4)
print("axial", tuple(freqs.shape), apply_rotary_emb(freqs, torch.randn(1, 4, 4, 16))[0, 1, 1, :5])


class Attention(nn.Module):
    def __init__(self, dim, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.out = nn.Linear(dim, dim)
        self.rotary = RotaryEmbedding(dim=dim // heads // 2, learned_freq=True)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q = self.rotary.rotate_queries_or_keys(q)
        k = self.rotary.rotate_queries_or_keys(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, n, d))


class TinyLM(nn.Module):
    def __init__(self, vocab=16, dim=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.attn = Attention(dim)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.emb(tokens)
        x = x + self.attn(x)
        return self.head(self.norm(x))


model = TinyLM()
opt = Lion(model.parameters(), lr=3e-3, betas=(0.9, 0.99), weight_decay=1e-2)
tokens = torch.randint(0, 16, (4, 12))
for step in range(5):
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 16), tokens[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"lion step {step} loss {loss.item():.6f}")
print("learned freqs", model.attn.rotary.freqs)
print("head weight", model.head.weight[0, :6])
print("exp_avg", opt.state[model.head.weight]["exp_avg"][0, :4])

torch.manual_seed(0)
seq_first = RotaryEmbedding(dim=8, seq_before_head_dim=True, interpolate_factor=2.,
                            theta_rescale_factor=2.)
print("seq first", seq_first.rotate_queries_or_keys(torch.randn(2, 10, 2, 16))[0, 3, 1, :6])
constant = RotaryEmbedding(dim=8, freqs_for="constant", num_freqs=4)
print("constant", constant.rotate_queries_or_keys(torch.randn(1, 2, 5, 8))[0, 1, 4, :6])
cached = RotaryEmbedding(dim=8, use_xpos=True, xpos_scale_base=64)
queries, keys = torch.randn(1, 2, 12, 16), torch.randn(1, 2, 12, 16)
qc, kc = cached.rotate_queries_with_cached_keys(queries[:, :, -3:], keys)
print("cached keys", qc[0, 0, 2, :5], kc[0, 1, 11, :5])
custom = RotaryEmbedding(dim=8, custom_freqs=torch.linspace(0.1, 1., 4))
print("custom", custom.rotate_queries_or_keys(queries, offset=3)[0, 1, 2, :4])
print("start index", apply_rotary_emb(torch.randn(10, 8), torch.randn(1, 10, 16),
                                      start_index=4)[0, 2, :8])
print("learned rotations", apply_learned_rotations(torch.randn(2, 10, 4),
                                                   torch.randn(2, 10, 16))[1, 1, :6])
print("broadcat", broadcat((torch.randn(3, 1, 4), torch.randn(1, 5, 4)), dim=-1).shape)
for refused in (lambda: broadcat((torch.randn(3, 1, 4), torch.randn(1, 5, 2)), dim=0),
                lambda: RotaryEmbedding(dim=16, freqs_for="constant", num_freqs=4)
                .rotate_queries_or_keys(torch.randn(1, 2, 5, 16))):
    try:
        refused()
    except RuntimeError as e:
        print("refused:", e)

features = torch.randn(5, 8)
for decoupled in (False, True):
    torch.manual_seed(1)
    layer = nn.Linear(8, 4)
    opt = Lion([{"params": [layer.weight], "weight_decay": 0.1}, {"params": [layer.bias]}],
               lr=1e-2, decoupled_weight_decay=decoupled)
    for step in range(3):
        loss = layer(features).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"lion decoupled={decoupled} loss {loss.item():.6f}", layer.weight[0, :4],
          opt.state_dict()["state"][0]["exp_avg"][0, :3])
