"""lucidrains/rotary-embedding-torch and lion-pytorch (the pip packages,
unmodified): rotary position embeddings (plain, xpos, axial pixel
frequencies, learned frequencies, cached key/value offsets) inside a
small causal self-attention language model, trained with the Lion
optimizer (weight decay, a few steps: its sign-update trajectory)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from lion_pytorch import Lion
from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb

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
