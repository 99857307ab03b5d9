# "Getting Started with Nested Tensors" (pytorch/tutorials,
# prototype_source/nestedtensor.py, the torch 2.x version): nested tensor
# construction (torch.nested.nested_tensor with the default strided layout
# and with layout=torch.jagged, torch.nested.as_nested_tensor), printing,
# is_nested / size(0) / dim() / unbind(), torch.nested.to_padded_tensor and
# nt.to_padded_tensor, torch.nested.narrow, elementwise ops, reshape /
# transpose / matmul / bmm / softmax on nested tensors, F.linear on a
# nested tensor, the errors PyTorch raises for what nested tensors do not
# support, and the tutorial's MultiHeadAttention (unflatten / transpose /
# F.scaled_dot_product_attention) on jagged query / key /
# value from zipf_sentence_lengths / gen_batch compared with the padded
# computation, timed by benchmark. Changes for a CPU test: small sizes
# (N=6, E=16, 2 heads), torch.cuda.synchronize dropped from benchmark (no
# GPU; timings not printed), dropout 0.0 (the tutorial's F.dropout line
# uses p=0.0 so the numbers compare), is_causal=False in the attention
# (PyTorch's CPU kernels refuse is_causal=True on nested query / key, so
# the nested and padded results are compared on the full-length entries,
# the ones padding does not change); the compiled calls are checked
# against eager calls.
import math
import timeit

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(1)
np.random.seed(1)
device = torch.device("cpu")

######################################################################
# Nested tensor initialization
nt = torch.nested.nested_tensor([torch.arange(12).reshape(
    2, 6), torch.arange(18).reshape(3, 6)], dtype=torch.float, device=device)
print(nt)
print("is_nested:", nt.is_nested, torch.arange(3).is_nested)

# components via unbind
print(nt.unbind())
a, b = nt.unbind()
print(a.shape, b.shape)

# the tensors a nested tensor is made of are copied
t = torch.arange(6.).reshape(2, 3)
nt_copy = torch.nested.nested_tensor([t, t + 1])
t.add_(100)
print(nt_copy.unbind()[0])

# as_nested_tensor
nt_as = torch.nested.as_nested_tensor([torch.randn(2, 4), torch.randn(1, 4)])
print(nt_as.size(0), nt_as.dim(), nt_as.dtype)

######################################################################
# Padding
nt_padded = torch.nested.to_padded_tensor(nt, 0.0)
print(nt_padded)
print(nt.to_padded_tensor(-1.0))
print(torch.nested.to_padded_tensor(nt, 0.0, (2, 4, 7)).shape)

######################################################################
# Size and dims
print(nt.size(0), nt.dim())
try:
    nt.size(1)
except RuntimeError as e:
    print("RuntimeError:", e)
print(nt.size(2))

######################################################################
# Operations
nt_reshaped = nt.reshape(2, -1, 2, 3)
print(nt_reshaped)
nt_transposed = nt_reshaped.transpose(1, 2)
print(nt_transposed)
nt_mm = torch.nested.nested_tensor([torch.randn((2, 3, 4)), torch.randn((2, 3, 5))], device=device)
nt3 = torch.matmul(nt_transposed, nt_mm)
print(f"Result of Matmul:\n {nt3}")
nt4 = F.dropout(nt3, 0.0)
print(f"Result of Dropout:\n {nt4}")
nt5 = F.softmax(nt4, -1)
print(f"Result of Softmax:\n {nt5}")

x = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)])
y = torch.nested.nested_tensor([torch.randn(3, 5), torch.randn(3, 2)])
print(torch.bmm(x, y))
print(x + x * 2.0 - 1.0)
print((x / 2).relu())
print(x.sin().unbind()[1])
w = torch.randn(7, 3)
bias = torch.randn(7)
print(F.linear(x, w, bias).unbind()[0])
lin = nn.Linear(3, 2)
print(lin(x))

# torch.nested.narrow on a jagged nested tensor
base = torch.arange(20.).reshape(4, 5)
starts = torch.tensor([0, 1, 2, 0])
lengths = torch.tensor([2, 3, 1, 5])
narrow = torch.nested.narrow(base, 1, starts, lengths, layout=torch.jagged)
print([u.tolist() for u in narrow.unbind()])
print(narrow.is_contiguous())

# unsupported
try:
    torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(3)])
except RuntimeError as e:
    print("RuntimeError:", e)
try:
    x.view(-1)
except RuntimeError as e:
    print("RuntimeError:", e)
try:
    x + torch.nested.nested_tensor([torch.randn(2, 3)])
except RuntimeError as e:
    print("RuntimeError:", e)

######################################################################
# Why Nested Tensor: multi-head attention on jagged inputs
class MultiHeadAttention(nn.Module):
    """
    Computes multi-head attention. Supports nested or padded tensors.

    Args:
        E_q (int): Size of embedding dim for query
        E_k (int): Size of embedding dim for key
        E_v (int): Size of embedding dim for value
        E_total (int): Total embedding dim of combined heads post input projection. Each head
            has dim E_total // nheads
        nheads (int): Number of heads
        dropout_p (float, optional): Dropout probability. Default: 0.0
    """
    def __init__(self, E_q: int, E_k: int, E_v: int, E_total: int,
                 nheads: int, dropout_p: float = 0.0):
        super().__init__()
        self.nheads = nheads
        self.dropout_p = dropout_p
        self.query_proj = nn.Linear(E_q, E_total)
        self.key_proj = nn.Linear(E_k, E_total)
        self.value_proj = nn.Linear(E_v, E_total)
        E_out = E_q
        self.out_proj = nn.Linear(E_total, E_out)
        assert E_total % nheads == 0, "Embedding dim is not divisible by nheads"
        self.E_head = E_total // nheads

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        # Step 1. Apply input projection
        # TODO: demonstrate packed projection
        query = self.query_proj(query)
        key = self.key_proj(key)
        value = self.value_proj(value)

        # Step 2. Split heads and prepare for SDPA
        # reshape query, key, value to separate by head
        # (N, L_t, E_total) -> (N, L_t, nheads, E_head) -> (N, nheads, L_t, E_head)
        query = query.unflatten(-1, [self.nheads, self.E_head]).transpose(1, 2)
        # (N, L_s, E_total) -> (N, L_s, nheads, E_head) -> (N, nheads, L_s, E_head)
        key = key.unflatten(-1, [self.nheads, self.E_head]).transpose(1, 2)
        # (N, L_s, E_total) -> (N, L_s, nheads, E_head) -> (N, nheads, L_s, E_head)
        value = value.unflatten(-1, [self.nheads, self.E_head]).transpose(1, 2)

        # Step 3. Run SDPA
        # (N, nheads, L_t, E_head)
        attn_output = F.scaled_dot_product_attention(
            query, key, value, dropout_p=self.dropout_p, is_causal=False)
        # (N, nheads, L_t, E_head) -> (N, L_t, nheads, E_head) -> (N, L_t, E_total)
        attn_output = attn_output.transpose(1, 2).flatten(-2)

        # Step 4. Apply output projection
        # (N, L_t, E_total) -> (N, L_t, E_out)
        attn_output = self.out_proj(attn_output)

        return attn_output


N = 6
E_q, E_k, E_v, E_total = 16, 16, 16, 16
E_out = E_q
d_model = E_q
nheads = 2
dropout = 0.0


def zipf_sentence_lengths(alpha: float, batch_size: int) -> torch.Tensor:
    # generate fake corpus by unigram Zipf distribution
    # from wikitext-2 corpus, we get rank "." = 3, "!" = 386, "?" = 858
    sentence_lengths = np.empty(batch_size, dtype=int)
    for ibatch in range(batch_size):
        sentence_lengths[ibatch] = 1
        word = np.random.zipf(alpha)
        while word != 3 and word != 386 and word != 858:
            sentence_lengths[ibatch] += 1
            word = np.random.zipf(alpha)
    return torch.tensor(sentence_lengths)


# Generate a batch of semi-realistic data using Zipf distribution for sentence lengths
# in the form of nested tensors with the jagged layout.
def gen_batch(N, E_q, E_k, E_v, device, dtype=torch.float32, query_seq_len_1=False):
    # generate semi-realistic data using Zipf distribution for sentence lengths
    sentence_lengths = zipf_sentence_lengths(alpha=1.2, batch_size=N)

    # Note: the torch.jagged layout is a nested tensor layout that supports a single ragged
    # dimension and works with torch.compile. The batch items each have shape (B, S*, D)
    # where B = batch size, S* = ragged sequence length, and D = embedding dimension.
    if query_seq_len_1:
        query = torch.nested.nested_tensor([
            torch.randn(1, E_q, dtype=dtype, device=device)
            for l in sentence_lengths
        ], layout=torch.jagged)
    else:
        query = torch.nested.nested_tensor([
            torch.randn(l.item(), E_q, dtype=dtype, device=device)
            for l in sentence_lengths
        ], layout=torch.jagged)

    key = torch.nested.nested_tensor([
        torch.randn(s.item(), E_k, dtype=dtype, device=device)
        for s in sentence_lengths
    ], layout=torch.jagged)

    value = torch.nested.nested_tensor([
        torch.randn(s.item(), E_v, dtype=dtype, device=device)
        for s in sentence_lengths
    ], layout=torch.jagged)

    return query, key, value, sentence_lengths


query, key, value, sentence_lengths = gen_batch(N, E_q, E_k, E_v, device)
print("sentence lengths:", sentence_lengths.tolist())
print("query:", query.size(0), query.dim(), query.layout, query.is_nested)
print("offsets:", query.offsets())


# Generate padded forms of query, key, value for comparison
def jagged_to_padded(jt, padding_val):
    # TODO: do jagged -> padded directly when this is supported
    return torch.nested.to_padded_tensor(
        torch.nested.nested_tensor(list(jt.unbind())),
        padding_val)


padded_query, padded_key, padded_value = (
    jagged_to_padded(t, 0.0) for t in (query, key, value)
)
print("padded:", padded_query.shape)

# Construct the model
mha = MultiHeadAttention(E_q, E_k, E_v, E_total, nheads, dropout).to(device=device)


# Check performance
def benchmark(func, *args, **kwargs):
    begin = timeit.default_timer()
    output = func(*args, **kwargs)
    end = timeit.default_timer()
    return output, (end - begin)


output_nested, time_nested = benchmark(mha, query, key, value)
output_padded, time_padded = benchmark(mha, padded_query, padded_key, padded_value)

# padding-specific step: remove output projection bias from padded entries for fair comparison
for i, entry_length in enumerate(sentence_lengths):
    output_padded[i, entry_length:] = 0.0

print("=== without torch.compile ===")
full = sentence_lengths == sentence_lengths.max()
diff = (jagged_to_padded(output_nested, 0.0) - output_padded)[full].abs().max().item()
print("nested and padded calculations differ by", diff < 1e-5)
print("nested output:", output_nested.size(0), output_nested.dim())
print(output_nested.unbind()[0][:2])
print("time is a float:", isinstance(time_nested, float), isinstance(time_padded, float))

# gradients through the nested computation reach the projections
mha.zero_grad()
loss = sum(o.pow(2).sum() for o in mha(query, key, value).unbind())
loss.backward()
print(f"loss {loss:.5f}")
print("q grad", mha.query_proj.weight.grad.abs().sum().item())
print("out grad", mha.out_proj.bias.grad)

# torch.compile: warm up compile first, then the nested and the padded
# computations against eager
compiled_mha = torch.compile(mha)
with torch.no_grad():
    compiled_mha(query, key, value)
    compiled_output_nested, compiled_time_nested = benchmark(compiled_mha, query, key, value)
    eager_output_nested = mha(query, key, value)
    compiled_output_padded = compiled_mha(padded_query, padded_key, padded_value)
    eager_output_padded = mha(padded_query, padded_key, padded_value)
print("=== with torch.compile ===")
print("compiled output is nested:", compiled_output_nested.is_nested, compiled_output_nested.layout)
same_nested = all(torch.allclose(a, b, atol=1e-5) for a, b in
                  zip(compiled_output_nested.unbind(), eager_output_nested.unbind()))
print("compiled == eager",
      same_nested and torch.allclose(compiled_output_padded, eager_output_padded, atol=1e-5))
