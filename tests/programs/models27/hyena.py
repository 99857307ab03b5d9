# The Hyena operator the way HazyResearch/safari's
# src/models/sequence/hyena.py (standalone version) writes it: fftconv
# (torch.fft.rfft(k, n=fft_size) / fft_size, rfft of u.to(dtype=k.dtype),
# torch.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen],
# y + u * D.unsqueeze(-1), out.to(dtype=u.dtype)), the @torch.jit.script
# mul_sum, OptimModule.register (a buffer when lr == 0.0, else a Parameter
# carrying an `_optim` dict of hyperparameters), Sin with a learnable freq,
# PositionalEmbedding (t from torch.linspace, z = torch.exp(-1j * f * w),
# torch.cat([t, z.real, z.imag], dim=-1)), ExponentialModulation (a deltas
# buffer, torch.exp(-t * self.deltas.abs())), HyenaFilter (the implicit MLP
# built by nn.Sequential.append with the same Sin module reused, `_optim`
# set on every state_dict entry of its children), HyenaOperator (in_proj,
# the depthwise short_filter Conv1d(groups=inner_width, padding=2) cut to
# [..., :l_filter], *x, v = uc.split(d_model, dim=1), the order-recurrence
# over reversed(x[1:])); and safari's optimizer setup that puts the
# `_optim` parameters in their own AdamW param groups. A small Hyena LM
# (embedding, pre-norm residual Hyena + MLP blocks, tied head) is trained a
# few steps. Changes for a CPU test: einops.rearrange written as
# transpose / view / permute (as the standalone ports do), the hyperparameter
# groups sorted (a set of frozensets in the original, whose order follows
# string hashes), small sizes, weights and tokens from numpy; then one
# training step under torch.compile against the same step eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def fftconv(u, k, D):
    seqlen = u.shape[-1]
    fft_size = 2 * seqlen

    k_f = torch.fft.rfft(k, n=fft_size) / fft_size
    u_f = torch.fft.rfft(u.to(dtype=k.dtype), n=fft_size)

    if len(u.shape) > 3: k_f = k_f.unsqueeze(1)
    y = torch.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]

    out = y + u * D.unsqueeze(-1)
    return out.to(dtype=u.dtype)


@torch.jit.script
def mul_sum(q, y):
    return (q * y).sum(dim=1)


class OptimModule(nn.Module):
    """ Interface for Module that allows registering buffers/parameters with configurable optimizer hyperparameters """

    def register(self, name, tensor, lr=None, wd=0.0):
        """Register a tensor with a configurable learning rate and 0 weight decay"""

        if lr == 0.0:
            self.register_buffer(name, tensor)
        else:
            self.register_parameter(name, nn.Parameter(tensor))

            optim = {}
            if lr is not None: optim["lr"] = lr
            if wd is not None: optim["weight_decay"] = wd
            setattr(getattr(self, name), "_optim", optim)


class Sin(nn.Module):
    def __init__(self, dim, w=10, train_freq=True):
        super().__init__()
        self.freq = nn.Parameter(w * torch.ones(1, dim)) if train_freq else w * torch.ones(1, dim)

    def forward(self, x):
        return torch.sin(self.freq * x)


class PositionalEmbedding(OptimModule):
    def __init__(self, emb_dim: int, seq_len: int, lr_pos_emb: float=1e-5, **kwargs):
        """Complex exponential positional embeddings for Hyena filters."""
        super().__init__()

        self.seq_len = seq_len
        # The time embedding fed to the filteres is normalized so that t_f = 1
        t = torch.linspace(0, 1, self.seq_len)[None, :, None] # 1, L, 1

        if emb_dim > 1:
            bands = (emb_dim - 1) // 2
        # To compute the right embeddings we use the "proper" linspace
        t_rescaled = torch.linspace(0, seq_len - 1, seq_len)[None, :, None]
        w = 2 * math.pi * t_rescaled / seq_len # 1, L, 1

        f = torch.linspace(1e-4, bands - 1, bands)[None, None]
        z = torch.exp(-1j * f * w)
        z = torch.cat([t, z.real, z.imag], dim=-1)
        self.register("z", z, lr=lr_pos_emb)
        self.register("t", t, lr=0.0)

    def forward(self, L):
        return self.z[:, :L], self.t[:, :L]


class ExponentialModulation(OptimModule):
    def __init__(
        self,
        d_model,
        fast_decay_pct=0.3,
        slow_decay_pct=1.5,
        target=1e-2,
        modulation_lr=0.0,
        modulate: bool=True,
        shift: float = 0.0,
        **kwargs
    ):
        super().__init__()
        self.modulate = modulate
        self.shift = shift
        max_decay = math.log(target) / fast_decay_pct
        min_decay = math.log(target) / slow_decay_pct
        deltas = torch.linspace(min_decay, max_decay, d_model)[None, None]
        self.register("deltas", deltas, lr=modulation_lr)

    def forward(self, t, x):
        if self.modulate:
            decay = torch.exp(-t * self.deltas.abs())
            x = x * (decay + self.shift)
        return x


class HyenaFilter(OptimModule):
    def __init__(
            self,
            d_model,
            emb_dim=3, # dim of input to MLP, augments with positional encoding
            order=16, # width of the implicit MLP
            fused_fft_conv=False,
            seq_len=1024,
            lr=1e-3,
            lr_pos_emb=1e-5,
            dropout=0.0,
            w=1, # frequency of periodic activations
            wd=0, # weight decay of kernel parameters
            bias=True,
            num_inner_mlps=2,
            normalized=False,
            **kwargs
        ):
        """
        Implicit long filter with modulation.

        Args:
            d_model: number of channels in the input
            emb_dim: dimension of the positional encoding (`emb_dim` - 1) // 2 is the number of bands
            order: width of the FFN
            num_inner_mlps: number of inner linear layers inside filter MLP
        """
        super().__init__()
        self.d_model = d_model
        self.use_bias = bias
        self.fused_fft_conv = fused_fft_conv
        self.bias = nn.Parameter(torch.randn(self.d_model))
        self.dropout = nn.Dropout(dropout)

        act = Sin(dim=order, w=w)
        self.emb_dim = emb_dim
        assert emb_dim % 2 != 0 and emb_dim >= 3, "emb_dim must be odd and greater or equal to 3 (time, sine and cosine)"
        self.seq_len = seq_len

        self.pos_emb = PositionalEmbedding(emb_dim, seq_len, lr_pos_emb)

        self.implicit_filter = nn.Sequential(
            nn.Linear(emb_dim, order),
            act,
        )
        for i in range(num_inner_mlps):
            self.implicit_filter.append(nn.Linear(order, order))
            self.implicit_filter.append(act)

        self.implicit_filter.append(nn.Linear(order, d_model, bias=False))

        self.modulation = ExponentialModulation(d_model, **kwargs)

        self.normalized = normalized
        for c in self.implicit_filter.children():
            for name, v in c.state_dict().items():
                optim = {"weight_decay": wd, "lr": lr}
                setattr(getattr(c, name), "_optim", optim)

    def filter(self, L, *args, **kwargs):
        z, t = self.pos_emb(L)
        h = self.implicit_filter(z)
        h = self.modulation(t, h)
        return h

    def forward(self, x, L, k=None, bias=None, *args, **kwargs):
        if k is None: k = self.filter(L)

        # Ensure compatibility with filters that return a tuple
        k = k[0] if type(k) is tuple else k

        y = fftconv(x, k, bias)
        return y


class HyenaOperator(nn.Module):
    def __init__(
            self,
            d_model,
            l_max,
            order=2,
            filter_order=64,
            dropout=0.0,
            filter_dropout=0.0,
            **filter_args,
        ):
        r"""
        Hyena operator described in the paper https://arxiv.org/pdf/2302.10866.pdf

        Args:
            d_model (int): Dimension of the input and output embeddings (width of the layer)
            l_max: (int): Maximum input sequence length. Defaults to None
            order: (int): Depth of the Hyena recurrence. Defaults to 2
            dropout: (float): Dropout probability. Defaults to 0.0
            filter_dropout: (float): Dropout probability for the filter. Defaults to 0.0
        """
        super().__init__()
        self.d_model = d_model
        self.l_max = l_max
        self.order = order
        inner_width = d_model * (order + 1)
        self.dropout = nn.Dropout(dropout)
        self.in_proj = nn.Linear(d_model, inner_width)
        self.out_proj = nn.Linear(d_model, d_model)

        self.short_filter = nn.Conv1d(
            inner_width,
            inner_width,
            3,
            padding=2,
            groups=inner_width
        )
        self.filter_fn = HyenaFilter(
            d_model * (order - 1),
            order=filter_order,
            seq_len=l_max,
            channels=1,
            dropout=filter_dropout,
            **filter_args
        )

    def forward(self, u, *args, **kwargs):
        l = u.size(-2)
        l_filter = min(l, self.l_max)
        u = self.in_proj(u)
        u = u.transpose(1, 2)                                   # 'b l d -> b d l'

        uc = self.short_filter(u)[...,:l_filter]
        *x, v = uc.split(self.d_model, dim=1)

        k = self.filter_fn.filter(l_filter)[0]
        k = k.view(l_filter, self.order - 1, self.d_model).permute(1, 2, 0)   # 'l (o d) -> o d l'
        bias = self.filter_fn.bias.view(self.order - 1, self.d_model)          # '(o d) -> o d'

        for o, x_i in enumerate(reversed(x[1:])):
            v = self.dropout(v * x_i)
            v = self.filter_fn(v, l_filter, k=k[o], bias=bias[o])

        y = (v * x[0]).transpose(1, 2)                          # 'b d l -> b l d'

        y = self.out_proj(y)
        return y


class Block(nn.Module):
    def __init__(self, d_model, l_max, order):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.mixer = HyenaOperator(d_model, l_max, order=order, filter_order=16, emb_dim=5)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 2 * d_model), nn.GELU(approximate="tanh"),
                                 nn.Linear(2 * d_model, d_model))

    def forward(self, x):
        x = x + self.mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class HyenaLM(nn.Module):
    def __init__(self, vocab, d_model, l_max, n_layer=2, order=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(Block(d_model, l_max, order) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, idx, targets=None):
        x = self.embed(idx)
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln_f(x))
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.2):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("freq") or name.endswith(".z") or "norm" in name or "ln_f" in name:
                continue
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)

# fftconv against the direct causal convolution
u = torch.from_numpy(r.normal(size=(2, 3, 10)).astype(np.float32))
k = torch.from_numpy(r.normal(size=(3, 10)).astype(np.float32))
D = torch.from_numpy(r.normal(size=(3,)).astype(np.float32))
y = fftconv(u, k, D)
direct = torch.stack([sum(u[..., t - s] * k[:, s] for s in range(t + 1)) for t in range(10)], -1) + u * D[:, None]
print("fftconv", tuple(y.shape), y.dtype, fmt(y[1, 2], 5), torch.allclose(y, direct, atol=1e-5))
k_f = torch.fft.rfft(k, n=20) / 20
print("rfft", k_f.dtype, tuple(k_f.shape), fmt(k_f.real, 3), fmt(k_f.imag, 3))
y4 = fftconv(u[:, None].expand(2, 2, 3, 10), torch.stack([k, 0.5 * k]), D)
print("fftconv 4d", tuple(y4.shape), torch.allclose(y4[:, 0], y, atol=1e-5), fmt(y4[1, 1, 2], 3),
      "double", fftconv(u, k.double(), D).dtype)
print("mul_sum", fmt(mul_sum(u, u), 4))

pe = PositionalEmbedding(5, 8, lr_pos_emb=1e-5)
z, t = pe(6)
print("pos emb", tuple(pe.z.shape), tuple(z.shape), tuple(t.shape), fmt(pe.z[0, 3], 5), pe.z._optim,
      [n for n, _ in pe.named_buffers()], [n for n, _ in pe.named_parameters()])
zc = torch.exp(-1j * torch.linspace(1e-4, 1, 2)[None, None] * (2 * math.pi * torch.linspace(0, 7, 8)[None, :, None] / 8))
print("complex", zc.dtype, fmt(zc.real, 4), fmt(zc.imag, 4))
em = ExponentialModulation(4)
print("modulation", fmt(em.deltas, 4), [n for n, _ in em.named_buffers()], fmt(em(t, torch.ones(1, 6, 4))[0, 5], 4))
s = Sin(3, w=2)
print("sin", fmt(s(torch.tensor([[0.1, 0.5, 1.0]])), 3), s.freq.shape)

hf = HyenaFilter(6, emb_dim=3, order=8, seq_len=12, lr=1e-3, wd=0.1)
print("filter mlp", [type(m).__name__ for m in hf.implicit_filter], len(list(hf.implicit_filter.children())),
      sorted(hf.implicit_filter[0].weight._optim.items()), hf.implicit_filter[1].freq._optim)

d_model, L, vocab = 8, 12, 16
op = HyenaOperator(d_model, L, order=3, filter_order=8)
load_numpy(op, r)
x = torch.from_numpy(r.normal(size=(2, L, d_model)).astype(np.float32))
yo = op(x)
print("operator order 3", tuple(yo.shape), fmt(yo[1, 5], 4), tuple(op.short_filter.weight.shape),
      fmt(op.filter_fn.filter(L)[0, 3], 4))
# causality: outputs at t < 6 do not see inputs at t >= 6
x2 = x.clone()
x2[:, 6:] += 1.0
print("causal", torch.allclose(op(x2)[:, :6], yo[:, :6], atol=1e-5), torch.allclose(op(x2)[:, 6:], yo[:, 6:]))
print("shorter input", tuple(op(x[:, :7]).shape), fmt(op(x[:, :7])[0, 6], 3))

model = HyenaLM(vocab, d_model, L, n_layer=2, order=2)
load_numpy(model, r)
print("params", sum(p.numel() for p in model.parameters()), "tied", model.head.weight is model.embed.weight,
      "buffers", [n for n, _ in model.named_buffers()][:3])

# safari's optimizer setup: special hyperparameters get their own groups
all_parameters = list(model.parameters())
params = [p for p in all_parameters if not hasattr(p, "_optim")]
optimizer = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.1)
hps = [dict(s) for s in sorted(set(frozenset(p._optim.items()) for p in all_parameters if hasattr(p, "_optim")),
                               key=lambda s: sorted(s))]
for hp in hps:
    params = [p for p in all_parameters if getattr(p, "_optim", None) == hp]
    optimizer.add_param_group({"params": params, **hp})
print("groups", [(len(g["params"]), g["lr"], g["weight_decay"]) for g in optimizer.param_groups])

data = torch.from_numpy(r.integers(0, vocab, (4, L + 1)))
xs, ys = data[:, :-1].contiguous(), data[:, 1:].contiguous()
losses = []
for step in range(5):
    logits, loss = model(xs, ys)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    losses.append(loss.item())
print("losses", [f"{v:.5f}" for v in losses])
print("z moved", f"{(model.blocks[0].mixer.filter_fn.pos_emb.z.grad.abs().sum()).item():.5f}",
      "freq grad", fmt(model.blocks[1].mixer.filter_fn.implicit_filter[1].freq.grad, 3),
      "bias", fmt(model.blocks[0].mixer.filter_fn.bias, 4))
model.eval()
with torch.no_grad():
    prompt = xs[:1, :4]
    for _ in range(5):
        nxt = model(prompt)[:, -1].argmax(-1, keepdim=True)
        prompt = torch.cat([prompt, nxt], dim=1)
print("greedy", prompt.tolist())
model.train()


# one training step under torch.compile against the same step eagerly
def train_step(xb, yb):
    logits, loss = model(xb, yb)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


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
