# microsoft/unilm Diff-Transformer the way its multihead_diffattn.py and
# rms_norm.py write it: MultiheadDiffAttn (q / k split into two groups of
# heads, two softmax maps subtracted with the re-parameterized lambda
# exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init, the
# depth schedule lambda_init_fn, the triu -inf causal mask, nan_to_num,
# softmax in float32, the RMSNorm subln scaled by 1 - lambda_init),
# repeat_kv for grouped key / value heads, and flash-attn's reference
# rotary embedding (apply_rotary_emb_torch, interleaved, with einops'
# rearrange / repeat). Around it a small decoder LM in the paper's setup
# (pre-RMSNorm, SwiGLU) trained a few steps. Changes for a CPU test: small
# sizes, the torch rotary instead of the triton kernel, weights and data
# from numpy; then one training step under torch.compile against the same
# step eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from einops import rearrange, repeat


# flash_attn/layers/rotary.py (the torch reference of the kernel)
def rotate_half(x, interleaved=False):
    if not interleaved:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    else:
        x1, x2 = x[..., ::2], x[..., 1::2]
        return rearrange(torch.stack((-x2, x1), dim=-1), "... d two -> ... (d two)", two=2)


def apply_rotary_emb(x, cos, sin, interleaved=False):
    """
    x: (batch_size, seqlen, nheads, headdim)
    cos, sin: (seqlen, rotary_dim / 2) or (batch_size, seqlen, rotary_dim / 2)
    """
    ro_dim = cos.shape[-1] * 2
    assert ro_dim <= x.shape[-1]
    cos = repeat(cos, "... d -> ... 1 (2 d)" if not interleaved else "... d -> ... 1 (d 2)")
    sin = repeat(sin, "... d -> ... 1 (2 d)" if not interleaved else "... d -> ... 1 (d 2)")
    return torch.cat(
        [x[..., :ro_dim] * cos + rotate_half(x[..., :ro_dim], interleaved) * sin, x[..., ro_dim:]],
        dim=-1,
    )


# rms_norm.py
class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine=True, memory_efficient=False):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if self.elementwise_affine:
            self.weight = nn.Parameter(torch.ones(dim))
        else:
            self.register_parameter('weight', None)

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        if self.weight is not None:
            output = output * self.weight
        return output

    def extra_repr(self) -> str:
        return f'dim={self.dim}, eps={self.eps}, elementwise_affine={self.elementwise_affine}'


# multihead_diffattn.py
def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """torch.repeat_interleave(x, dim=1, repeats=n_rep)"""
    bs, n_kv_heads, slen, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        x[:, :, None, :, :]
        .expand(bs, n_kv_heads, n_rep, slen, head_dim)
        .reshape(bs, n_kv_heads * n_rep, slen, head_dim)
    )


def lambda_init_fn(depth):
    return 0.8 - 0.6 * math.exp(-0.3 * depth)


class MultiheadDiffAttn(nn.Module):
    def __init__(
        self,
        args,
        embed_dim,
        depth,
        num_heads,
    ):
        super().__init__()
        self.args = args
        self.embed_dim = embed_dim
        # num_heads set to half of Transformer's #heads
        self.num_heads = num_heads // args.model_parallel_size
        self.num_kv_heads = args.decoder_kv_attention_heads // args.model_parallel_size if args.decoder_kv_attention_heads is not None else num_heads // args.model_parallel_size
        self.n_rep = self.num_heads // self.num_kv_heads

        self.head_dim = embed_dim // num_heads // 2
        self.scaling = self.head_dim ** -0.5

        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, embed_dim // self.n_rep, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim // self.n_rep, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=False)

        self.lambda_init = lambda_init_fn(depth)
        self.lambda_q1 = nn.Parameter(torch.zeros(self.head_dim, dtype=torch.float32).normal_(mean=0,std=0.1))
        self.lambda_k1 = nn.Parameter(torch.zeros(self.head_dim, dtype=torch.float32).normal_(mean=0,std=0.1))
        self.lambda_q2 = nn.Parameter(torch.zeros(self.head_dim, dtype=torch.float32).normal_(mean=0,std=0.1))
        self.lambda_k2 = nn.Parameter(torch.zeros(self.head_dim, dtype=torch.float32).normal_(mean=0,std=0.1))

        self.subln = RMSNorm(2 * self.head_dim, eps=1e-5, elementwise_affine=True)

    def forward(
        self,
        x,
        rel_pos,
        attn_mask=None,
    ):
        bsz, tgt_len, embed_dim = x.size()
        src_len = tgt_len

        q = self.q_proj(x)
        k = self.k_proj(x)
        v = self.v_proj(x)

        q = q.view(bsz, tgt_len, 2 * self.num_heads, self.head_dim)
        k = k.view(bsz, src_len, 2 * self.num_kv_heads, self.head_dim)
        v = v.view(bsz, src_len, self.num_kv_heads, 2 * self.head_dim)

        q = apply_rotary_emb(q, *rel_pos, interleaved=True)
        k = apply_rotary_emb(k, *rel_pos, interleaved=True)

        offset = src_len - tgt_len
        q = q.transpose(1, 2)
        k = repeat_kv(k.transpose(1, 2), self.n_rep)
        v = repeat_kv(v.transpose(1, 2), self.n_rep)
        q *= self.scaling
        attn_weights = torch.matmul(q, k.transpose(-1, -2))
        if attn_mask is None:
            attn_mask = torch.triu(
                torch.zeros([tgt_len, src_len])
                .float()
                .fill_(float("-inf"))
                .type_as(attn_weights),
                1 + offset,
            )
        attn_weights = torch.nan_to_num(attn_weights)
        attn_weights += attn_mask
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).type_as(
            attn_weights
        )

        lambda_1 = torch.exp(torch.sum(self.lambda_q1 * self.lambda_k1, dim=-1).float()).type_as(q)
        lambda_2 = torch.exp(torch.sum(self.lambda_q2 * self.lambda_k2, dim=-1).float()).type_as(q)
        lambda_full = lambda_1 - lambda_2 + self.lambda_init
        attn_weights = attn_weights.view(bsz, self.num_heads, 2, tgt_len, src_len)
        attn_weights = attn_weights[:, :, 0] - lambda_full * attn_weights[:, :, 1]

        attn = torch.matmul(attn_weights, v)
        attn = self.subln(attn)
        attn = attn * (1 - self.lambda_init)
        attn = attn.transpose(1, 2).reshape(bsz, tgt_len, self.num_heads * 2 * self.head_dim)

        attn = self.out_proj(attn)
        return attn


# a small decoder around it (the paper's LLaMA-like setup)
class SwiGLU(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class DiffDecoderLayer(nn.Module):
    def __init__(self, args, depth):
        super().__init__()
        self.attn_norm = RMSNorm(args.decoder_embed_dim)
        self.self_attn = MultiheadDiffAttn(args, args.decoder_embed_dim, depth, args.decoder_attention_heads)
        self.ffn_norm = RMSNorm(args.decoder_embed_dim)
        self.ffn = SwiGLU(args.decoder_embed_dim, args.decoder_ffn_embed_dim)

    def forward(self, x, rel_pos):
        x = x + self.self_attn(self.attn_norm(x), rel_pos)
        return x + self.ffn(self.ffn_norm(x))


class DiffTransformerLM(nn.Module):
    def __init__(self, args, vocab):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, args.decoder_embed_dim)
        self.layers = nn.ModuleList([DiffDecoderLayer(args, i) for i in range(args.decoder_layers)])
        self.norm = RMSNorm(args.decoder_embed_dim)
        self.output = nn.Linear(args.decoder_embed_dim, vocab, bias=False)
        head_dim = args.decoder_embed_dim // args.decoder_attention_heads // 2
        inv_freq = 1.0 / (args.rope_theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        t = torch.arange(args.max_seq_len, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        self.register_buffer("cos", freqs.cos(), persistent=False)
        self.register_buffer("sin", freqs.sin(), persistent=False)

    def forward(self, tokens):
        T = tokens.shape[1]
        rel_pos = (self.cos[:T], self.sin[:T])
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x, rel_pos)
        return self.output(self.norm(x))


class Args:
    model_parallel_size = 1
    decoder_kv_attention_heads = 1
    decoder_embed_dim = 16
    decoder_attention_heads = 2
    decoder_ffn_embed_dim = 32
    decoder_layers = 2
    rope_theta = 10000.0
    max_seq_len = 16


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("weight") and p.dim() == 1:   # norms around 1
                v = 1 + r.normal(0, 0.1, tuple(p.shape))
            else:
                v = r.normal(0, std, tuple(p.shape))
            p.copy_(torch.from_numpy(v.astype(np.float32)))


r = np.random.default_rng(0)
args = Args()

print("lambda_init", [f"{lambda_init_fn(d):.5f}" for d in range(4)])
kv = torch.from_numpy(r.normal(size=(2, 2, 3, 4)).astype(np.float32))
print("repeat_kv", torch.equal(repeat_kv(kv, 3), torch.repeat_interleave(kv, dim=1, repeats=3)),
      repeat_kv(kv, 1) is kv, tuple(repeat_kv(kv, 3).shape))
print("rotate_half", rotate_half(torch.arange(6.0), True).tolist(), rotate_half(torch.arange(6.0)).tolist())
cos = torch.from_numpy(r.normal(size=(5, 2)).astype(np.float32))
sin = torch.from_numpy(r.normal(size=(5, 2)).astype(np.float32))
xr = torch.from_numpy(r.normal(size=(2, 5, 3, 6)).astype(np.float32))
ri = apply_rotary_emb(xr, cos, sin, interleaved=True)
rn = apply_rotary_emb(xr, cos, sin)
print("rotary", tuple(ri.shape), fmt(ri[1, 3, 2], 6), fmt(rn[0, 4, 1], 6), torch.equal(ri[..., 4:], xr[..., 4:]))
print(RMSNorm(8, eps=1e-5), RMSNorm(4, elementwise_affine=False).weight)

torch.manual_seed(0)
attn = MultiheadDiffAttn(args, 16, depth=1, num_heads=2)
print("attn", attn.num_heads, attn.num_kv_heads, attn.n_rep, attn.head_dim, f"{attn.scaling:.5f}",
      tuple(attn.k_proj.weight.shape), "[rng]", f"{attn.lambda_q1.std().item():.4f}")
load_numpy(attn, r)
model = DiffTransformerLM(args, vocab=13)
x = torch.from_numpy(r.normal(size=(2, 6, 16)).astype(np.float32))
rel_pos = (model.cos[:6], model.sin[:6])
out = attn(x, rel_pos)
print("diff attn", tuple(out.shape), fmt(out[1, 5], 4))

# the differential map: rows sum to 1 - lambda_full, causal
with torch.no_grad():
    q = apply_rotary_emb(attn.q_proj(x).view(2, 6, 4, 4), *rel_pos, interleaved=True).transpose(1, 2)
    k = repeat_kv(apply_rotary_emb(attn.k_proj(x).view(2, 6, 2, 4), *rel_pos, interleaved=True).transpose(1, 2), attn.n_rep)
    w = torch.softmax(q * attn.scaling @ k.transpose(-1, -2) + torch.triu(torch.full((6, 6), float("-inf")), 1), -1)
    lam = (torch.exp((attn.lambda_q1 * attn.lambda_k1).sum()) - torch.exp((attn.lambda_q2 * attn.lambda_k2).sum())
           + attn.lambda_init)
    diff = w.view(2, 2, 2, 6, 6)[:, :, 0] - lam * w.view(2, 2, 2, 6, 6)[:, :, 1]
print("lambda_full", f"{lam.item():.5f}", "row sums", fmt(diff.sum(-1)[0, 0], 3),
      "upper", diff.triu(1).abs().max().item(), "min", f"{diff.min().item():.4f}")
# a later token does not change earlier outputs
x2 = x.clone()
x2[:, -1] += 1.0
print("causal", torch.allclose(attn(x2, rel_pos)[:, :-1], out[:, :-1], atol=1e-6))
# an explicit mask equals the default one
print("explicit mask", torch.allclose(attn(x, rel_pos, torch.triu(torch.full((6, 6), float("-inf")), 1)), out))

# grouped kv: 4 heads over 2 kv heads
class Args2(Args):
    decoder_kv_attention_heads = 2
    decoder_attention_heads = 4
    decoder_embed_dim = 32


a2 = MultiheadDiffAttn(Args2(), 32, depth=3, num_heads=4)
load_numpy(a2, r)
x3 = torch.from_numpy(r.normal(size=(1, 5, 32)).astype(np.float32))
cos2, sin2 = model.cos[:5, :2], model.sin[:5, :2]
print("gqa", a2.n_rep, tuple(a2.k_proj.weight.shape), f"{a2.lambda_init:.5f}", fmt(a2(x3, (cos2, sin2))[0, 4], 4))

load_numpy(model, r, std=0.2)
print("params", sum(p.numel() for p in model.parameters()),
      [n for n, _ in model.named_parameters()][1:8], list(model.state_dict().keys())[:2])
text = "abcabdabeabcabdabe" * 3
data = torch.tensor([ord(c) - ord("a") for c in text])
starts = r.integers(0, len(data) - 13, (8, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.98), weight_decay=0.1)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 3))
for step in range(6):
    xb = torch.stack([data[s:s + 12] for s in starts[step]])
    yb = torch.stack([data[s + 1:s + 13] for s in starts[step]])
    logits = model(xb)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), yb.view(-1))
    optimizer.zero_grad()
    loss.backward()
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    if step % 2 == 0:
        print(f"step {step} loss {loss.item():.4f} grad norm {gn.item():.4f} lr {scheduler.get_last_lr()[0]:.5f}")
print("lambda grads", fmt(model.layers[0].self_attn.lambda_q1.grad, 3))
lf = [(torch.exp((a.lambda_q1 * a.lambda_k1).sum()) - torch.exp((a.lambda_q2 * a.lambda_k2).sum())
       + a.lambda_init).item() for a in (l.self_attn for l in model.layers)]
print("lambda_full after", [f"{v:.5f}" for v in lf])
model.eval()
with torch.no_grad():
    seq = data[:3].unsqueeze(0)
    for _ in range(6):
        nxt = model(seq)[:, -1].argmax(-1, keepdim=True)
        seq = torch.cat([seq, nxt], dim=1)
print("greedy", "".join(chr(ord("a") + t) for t in seq[0].tolist()))
model.train()


# one training step under torch.compile against the same step eagerly
def train_step(xb, yb):
    optimizer.zero_grad(set_to_none=True)
    logits = model(xb)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), yb.view(-1))
    loss.backward()
    optimizer.step()
    return loss


xs = torch.stack([data[s:s + 10] for s in starts[0, :3]])
ys = torch.stack([data[s + 1:s + 11] for s in starts[0, :3]])
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
