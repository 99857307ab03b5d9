# PyTorch tutorial "(Beta) Implementing High-Performance Transformers with
# Scaled Dot Product Attention (SDPA)" (intermediate/scaled_dot_product_
# attention_tutorial), written the way the tutorial has it: F.scaled_dot_
# product_attention on query/key/value, benchmark_torch_function_in_
# microseconds through torch.utils.benchmark.Timer(...).blocked_autorange(),
# the backends chosen with `with sdpa_kernel(SDPBackend.MATH):` (and a
# try/except RuntimeError for FLASH_ATTENTION / EFFICIENT_ATTENTION, which
# have no CPU kernel), the CausalSelfAttention module (c_attn, c_proj,
# resid_dropout, is_causal=self.training), the Config dataclass, and a
# compiled model.  Written for this test: small sizes, a few Adam steps,
# one compiled training step checked against the same step run eagerly.
import copy
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.benchmark as benchmark
from torch.nn.attention import SDPBackend, sdpa_kernel

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"

# Example Usage:
query, key, value = torch.randn(2, 3, 8, device=device), torch.randn(2, 3, 8, device=device), torch.randn(2, 3, 8, device=device)
out = F.scaled_dot_product_attention(query, key, value)
print("sdpa out", out.shape, round(out.sum().item(), 5))


def benchmark_torch_function_in_microseconds(f, *args, **kwargs):
    t0 = benchmark.Timer(
        stmt="f(*args, **kwargs)", globals={"args": args, "kwargs": kwargs, "f": f}
    )
    return t0.blocked_autorange().mean * 1e6


batch_size = 2
max_sequence_len = 16
num_heads = 4
embed_dimension = 8

dtype = torch.float32

query = torch.rand(batch_size, num_heads, max_sequence_len, embed_dimension, device=device, dtype=dtype)
key = torch.rand(batch_size, num_heads, max_sequence_len, embed_dimension, device=device, dtype=dtype)
value = torch.rand(batch_size, num_heads, max_sequence_len, embed_dimension, device=device, dtype=dtype)

t = benchmark_torch_function_in_microseconds(F.scaled_dot_product_attention, query, key, value)
print(f"[rng] The default implementation runs in {t:.3f} microseconds")
print("[rng] timer positive", t > 0)

with sdpa_kernel(SDPBackend.MATH):
    math_time = benchmark_torch_function_in_microseconds(F.scaled_dot_product_attention, query, key, value)
    print(f"[rng] The math implementation runs in {math_time:.3f} microseconds")
    math_out = F.scaled_dot_product_attention(query, key, value)

with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    try:
        flash_time = benchmark_torch_function_in_microseconds(F.scaled_dot_product_attention, query, key, value)
        print(f"[rng] The flash attention implementation runs in {flash_time:.3f} microseconds")
    except RuntimeError:
        print("FlashAttention is not supported. See warnings for reasons.")

with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
    try:
        efficient_time = benchmark_torch_function_in_microseconds(F.scaled_dot_product_attention, query, key, value)
        print(f"[rng] The memory efficient implementation runs in {efficient_time:.3f} microseconds")
    except RuntimeError:
        print("EfficientAttention is not supported. See warnings for reasons.")

default_out = F.scaled_dot_product_attention(query, key, value)
print("math == default", torch.allclose(math_out, default_out, atol=1e-6))
print("math out", round(math_out.mean().item(), 6), round(math_out.std().item(), 6))

# attn_mask (boolean and additive), is_causal, scale, dropout_p=0
causal = F.scaled_dot_product_attention(query, key, value, is_causal=True)
mask = torch.ones(max_sequence_len, max_sequence_len, dtype=torch.bool).tril(diagonal=0)
masked = F.scaled_dot_product_attention(query, key, value, attn_mask=mask)
print("is_causal == tril mask", torch.allclose(causal, masked, atol=1e-6))
additive = torch.zeros(max_sequence_len, max_sequence_len).masked_fill(~mask, float("-inf"))
print("additive mask", torch.allclose(causal, F.scaled_dot_product_attention(query, key, value, attn_mask=additive), atol=1e-6))
scaled = F.scaled_dot_product_attention(query, key, value, scale=0.5)
print("scale=0.5", round(scaled.sum().item(), 4))


class CausalSelfAttention(nn.Module):

    def __init__(self, num_heads: int, embed_dimension: int, bias: bool = False, is_causal: bool = False, dropout: float = 0.0):
        super().__init__()
        assert embed_dimension % num_heads == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(embed_dimension, 3 * embed_dimension, bias=bias)
        # output projection
        self.c_proj = nn.Linear(embed_dimension, embed_dimension, bias=bias)
        # regularization
        self.dropout = dropout
        self.resid_dropout = nn.Dropout(dropout)
        self.num_heads = num_heads
        self.embed_dimension = embed_dimension
        # Perform causal masking
        self.is_causal = is_causal

    def forward(self, x):
        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        query_projected = self.c_attn(x)

        batch_size = query_projected.size(0)
        embed_dim = query_projected.size(2)
        head_dim = embed_dim // (self.num_heads * 3)

        query, key, value = query_projected.chunk(3, -1)
        query = query.view(batch_size, -1, self.num_heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, self.num_heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, self.num_heads, head_dim).transpose(1, 2)

        if self.training:
            dropout = self.dropout
            is_causal = self.is_causal
        else:
            dropout = 0.0
            is_causal = False

        y = F.scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=dropout, is_causal=is_causal)
        y = y.transpose(1, 2).view(batch_size, -1, self.num_heads * head_dim)

        y = self.resid_dropout(self.c_proj(y))
        return y


num_heads = 4
heads_per_dim = 8
embed_dimension = num_heads * heads_per_dim
dtype = torch.float32
model = CausalSelfAttention(num_heads=num_heads, embed_dimension=embed_dimension, bias=False, is_causal=True, dropout=0.0).to(device).to(dtype)
print(model)


@dataclass
class Config:
    n_embd: int = embed_dimension
    n_head: int = num_heads
    block_size: int = max_sequence_len


cfg = Config()
x = torch.rand(batch_size, cfg.block_size, cfg.n_embd, device=device, dtype=dtype)
target = torch.rand(batch_size, cfg.block_size, cfg.n_embd, device=device, dtype=dtype)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)


def train_step(x, target):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
    return loss


for step in range(4):
    print("step", step, "loss", round(train_step(x, target).item(), 6))

model.eval()
with torch.no_grad():
    print("eval (not causal)", round(model(x).sum().item(), 5))
model.train()

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
compiled_step = torch.compile(train_step)
loss_c = compiled_step(x, target)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(x, target)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))

compiled_model = torch.compile(model)
compiled_model.eval()
with torch.no_grad():
    print("compiled model == eager", torch.allclose(compiled_model(x), model(x), atol=1e-5))
