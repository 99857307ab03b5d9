# johnma2006/mamba-minimal model.py (einops' rearrange / repeat / einsum
# written with torch.transpose / Tensor.repeat / torch.einsum, as the
# einops-free forks do), a tiny configuration trained a few steps on random
# tokens with AdamW, the train step also under torch.compile, then greedy
# generation with the repository's top-k filter.  Weights and data come from
# numpy so tracec and torch run the same numbers.
from __future__ import annotations
import copy
import math
import json
from dataclasses import dataclass
from typing import Union

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class ModelArgs:
    d_model: int
    n_layer: int
    vocab_size: int
    d_state: int = 16
    expand: int = 2
    dt_rank: Union[int, str] = 'auto'
    d_conv: int = 4
    pad_vocab_size_multiple: int = 8
    conv_bias: bool = True
    bias: bool = False

    def __post_init__(self):
        self.d_inner = int(self.expand * self.d_model)

        if self.dt_rank == 'auto':
            self.dt_rank = math.ceil(self.d_model / 16)

        if self.vocab_size % self.pad_vocab_size_multiple != 0:
            self.vocab_size += (self.pad_vocab_size_multiple
                                - self.vocab_size % self.pad_vocab_size_multiple)


class Mamba(nn.Module):
    def __init__(self, args: ModelArgs):
        """Full Mamba model."""
        super().__init__()
        self.args = args

        self.embedding = nn.Embedding(args.vocab_size, args.d_model)
        self.layers = nn.ModuleList([ResidualBlock(args) for _ in range(args.n_layer)])
        self.norm_f = RMSNorm(args.d_model)

        self.lm_head = nn.Linear(args.d_model, args.vocab_size, bias=False)
        self.lm_head.weight = self.embedding.weight  # Tie output projection to embedding weights.

    def forward(self, input_ids):
        x = self.embedding(input_ids)

        for layer in self.layers:
            x = layer(x)

        x = self.norm_f(x)
        logits = self.lm_head(x)

        return logits


class ResidualBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.mixer = MambaBlock(args)
        self.norm = RMSNorm(args.d_model)

    def forward(self, x):
        output = self.mixer(self.norm(x)) + x

        return output


class MambaBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args

        self.in_proj = nn.Linear(args.d_model, args.d_inner * 2, bias=args.bias)

        self.conv1d = nn.Conv1d(
            in_channels=args.d_inner,
            out_channels=args.d_inner,
            bias=args.conv_bias,
            kernel_size=args.d_conv,
            groups=args.d_inner,
            padding=args.d_conv - 1,
        )

        # x_proj takes in `x` and outputs the input-specific Δ, B, C
        self.x_proj = nn.Linear(args.d_inner, args.dt_rank + args.d_state * 2, bias=False)

        # dt_proj projects Δ from dt_rank to d_in
        self.dt_proj = nn.Linear(args.dt_rank, args.d_inner, bias=True)

        # repeat(torch.arange(1, args.d_state + 1), 'n -> d n', d=args.d_inner)
        A = torch.arange(1, args.d_state + 1).repeat(args.d_inner, 1)
        self.A_log = nn.Parameter(torch.log(A))
        self.D = nn.Parameter(torch.ones(args.d_inner))
        self.out_proj = nn.Linear(args.d_inner, args.d_model, bias=args.bias)

    def forward(self, x):
        (b, l, d) = x.shape

        x_and_res = self.in_proj(x)  # shape (b, l, 2 * d_in)
        (x, res) = x_and_res.split(split_size=[self.args.d_inner, self.args.d_inner], dim=-1)

        x = x.transpose(1, 2)  # rearrange(x, 'b l d_in -> b d_in l')
        x = self.conv1d(x)[:, :, :l]
        x = x.transpose(1, 2)  # rearrange(x, 'b d_in l -> b l d_in')

        x = F.silu(x)

        y = self.ssm(x)

        y = y * F.silu(res)

        output = self.out_proj(y)

        return output

    def ssm(self, x):
        (d_in, n) = self.A_log.shape

        A = -torch.exp(self.A_log.float())  # shape (d_in, n)
        D = self.D.float()

        x_dbl = self.x_proj(x)  # (b, l, dt_rank + 2*n)

        (delta, B, C) = x_dbl.split(split_size=[self.args.dt_rank, n, n], dim=-1)
        delta = F.softplus(self.dt_proj(delta))  # (b, l, d_in)

        y = self.selective_scan(x, delta, A, B, C, D)

        return y

    def selective_scan(self, u, delta, A, B, C, D):
        (b, l, d_in) = u.shape
        n = A.shape[1]

        deltaA = torch.exp(torch.einsum('bld,dn->bldn', delta, A))
        deltaB_u = torch.einsum('bld,bln,bld->bldn', delta, B, u)

        x = torch.zeros((b, d_in, n), device=deltaA.device)
        ys = []
        for i in range(l):
            x = deltaA[:, i] * x + deltaB_u[:, i]
            y = torch.einsum('bdn,bn->bd', x, C[:, i, :])
            ys.append(y)
        y = torch.stack(ys, dim=1)  # shape (b, l, d_in)

        y = y + u * D

        return y


class RMSNorm(nn.Module):
    def __init__(self,
                 d_model: int,
                 eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        output = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

        return output


def generate(model, input_ids, n_tokens_to_gen=6, sample=False, top_k=5):
    model.eval()
    for token_n in range(n_tokens_to_gen):
        with torch.no_grad():
            indices_to_input = input_ids
            next_token_logits = model(indices_to_input)[:, -1]

        probs = F.softmax(next_token_logits, dim=-1)
        (batch, vocab_size) = probs.shape

        if top_k is not None:
            (values, indices) = torch.topk(probs, k=top_k)
            probs[probs < values[:, -1, None]] = 0
            probs = probs / probs.sum(axis=1, keepdims=True)

        if sample:
            next_indices = torch.multinomial(probs, num_samples=1)
        else:
            next_indices = torch.argmax(probs, dim=-1)[:, None]

        input_ids = torch.cat([input_ids, next_indices], dim=1)
    return input_ids


rng = np.random.default_rng(0)
args = ModelArgs(d_model=16, n_layer=2, vocab_size=27, d_state=4, d_conv=4)
print(json.dumps({k: v for k, v in vars(args).items()}, sort_keys=True))


def numpy_init(model, seed):
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log") or name.endswith(".D"):
                continue
            std = 0.5 if name == "embedding.weight" else (p[0].numel() ** -0.5 if p.dim() > 1 else 0.2)
            p.copy_(torch.from_numpy(std * g.standard_normal(tuple(p.shape)).astype(np.float32)))
    return model


model = numpy_init(Mamba(args), 1)
print("params:", sum(p.numel() for p in model.parameters()))
print("tied:", model.lm_head.weight is model.embedding.weight)
print("A_log[0]:", model.layers[0].mixer.A_log[0].tolist())

tokens = torch.from_numpy(rng.integers(0, args.vocab_size, (3, 9)))
inp, tgt = tokens[:, :-1], tokens[:, 1:]
logits = model(inp)
print("logits", tuple(logits.shape), f"{logits.sum().item():.5f}", f"{logits.abs().mean().item():.6f}")
loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1))
print(f"loss {loss.item():.6f}")
loss.backward()
for name, p in model.named_parameters():
    print(f"grad {name} {p.grad.norm().item():.5e}")

opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)


def train_step(inp, tgt):
    opt.zero_grad(set_to_none=True)
    logits = model(inp)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


model.train()
for step in range(3):
    loss = train_step(inp, tgt)
    print(f"step {step} loss {loss.item():.6f}")

state = {k: v.clone() for k, v in model.state_dict().items()}
opt_state = copy.deepcopy(opt.state_dict())
eager = [train_step(inp, tgt).item() for _ in range(2)]
after_eager = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
opt.load_state_dict(opt_state)
compiled_step = torch.compile(train_step)
compiled = [compiled_step(inp, tgt).item() for _ in range(2)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after_eager[k], rtol=1e-4, atol=1e-5) for k in state))

out = generate(model, tokens[:2, :4])
print("generated", out.tolist())
