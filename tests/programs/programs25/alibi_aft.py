# Modelled on labmlai/annotated_deep_learning_paper_implementations:
# labml_nn/transformers/alibi/__init__.py (ALiBi: get_slopes with
# 2 ** (-8 / n) powers for the closest power of two heads plus the
# interleaved extra slopes, the linear distance biases built from
# torch.arange and added to causal attention scores, the causal mask by
# torch.tril) and labml_nn/transformers/aft/__init__.py (AFT-local: the
# learned pairwise position bias masked to a local window, exp of the keys
# and of the bias, the sigmoid query gate, einsum 'ijb,jbd->ibd').
# Written for this test: a two-layer character model mixing an ALiBi
# attention layer (5 heads: not a power of two) and an AFT-local layer, on
# an inline text, Adam, 3 steps; one training step compiled against eager.
import copy
import math

import torch
from torch import nn


def get_slopes(n_heads: int):
    n = 2 ** math.floor(math.log2(n_heads))
    m_0 = 2.0 ** (-8.0 / n)
    m = torch.pow(m_0, torch.arange(1, 1 + n))
    if n < n_heads:
        m_hat_0 = 2.0 ** (-4.0 / n)
        m_hat = torch.pow(m_hat_0, torch.arange(1, 1 + 2 * (n_heads - n), 2))
        m = torch.cat([m, m_hat])
    return m


@torch.no_grad()
def get_alibi_biases(n_heads: int, mask: torch.Tensor):
    m = get_slopes(n_heads).to(mask.device)
    distance = mask.cumsum(dim=-1)
    return distance[:, :, None] * m[None, None, :]


class AlibiAttention(nn.Module):
    def __init__(self, heads, d_model):
        super().__init__()
        self.heads, self.d_k = heads, d_model // heads
        self.qkv = nn.Linear(d_model, 3 * heads * self.d_k)
        self.output = nn.Linear(heads * self.d_k, d_model)
        self.scale = 1 / math.sqrt(self.d_k)

    def forward(self, x):
        seq_len, batch_size, _ = x.shape
        q, k, v = self.qkv(x).view(seq_len, batch_size, 3, self.heads, self.d_k).unbind(2)
        scores = torch.einsum('ibhd,jbhd->ijbh', q, k) * self.scale
        mask = torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool))[:, :, None]
        alibi = get_alibi_biases(self.heads, mask[:, :, 0:1].long().to(x.dtype))
        scores = scores + alibi
        scores = scores.masked_fill(~mask[:, :, :, None], float('-inf'))
        attn = torch.softmax(scores, dim=1)
        out = torch.einsum('ijbh,jbhd->ibhd', attn, v).reshape(seq_len, batch_size, -1)
        return self.output(out)


class AFTLocal(nn.Module):
    def __init__(self, d_model: int, seq_len: int, local_window_size: int, bias: bool = True):
        super().__init__()
        self.local_window_size = local_window_size
        self.query = nn.Linear(d_model, d_model, bias=bias)
        self.key = nn.Linear(d_model, d_model, bias=bias)
        self.value = nn.Linear(d_model, d_model, bias=bias)
        self.pos_bias = nn.Parameter(torch.zeros(seq_len, seq_len), requires_grad=True)
        self.local_mask = nn.Parameter(self.create_local_mask(seq_len, local_window_size), requires_grad=False)
        self.activation = nn.Sigmoid()
        self.output = nn.Linear(d_model, d_model)

    @staticmethod
    def create_local_mask(seq_len, local_window_size):
        local_mask = torch.ones(seq_len, seq_len, dtype=torch.bool)
        local_mask = torch.tril(local_mask, local_window_size - 1)
        local_mask = torch.triu(local_mask, -(local_window_size - 1))
        return local_mask

    def forward(self, x, mask=None):
        seq_len, _, _ = x.shape
        query, key, value = self.query(x), self.key(x), self.value(x)
        pos_bias = self.pos_bias[:seq_len, :seq_len] * self.local_mask[:seq_len, :seq_len]
        pos_bias = pos_bias.unsqueeze(-1)
        if mask is not None:
            pos_bias = pos_bias.masked_fill(~mask, float('-inf'))
        max_key = key.max(dim=0, keepdims=True)[0]
        max_pos_bias = pos_bias.max(dim=1, keepdims=True)[0]
        exp_key = torch.exp(key - max_key)
        exp_pos_bias = torch.exp(pos_bias - max_pos_bias)
        num = torch.einsum('ijb,jbd->ibd', exp_pos_bias, exp_key * value)
        den = torch.einsum('ijb,jbd->ibd', exp_pos_bias, exp_key)
        y = self.activation(query) * num / den
        return self.output(y)


class Model(nn.Module):
    def __init__(self, n_vocab, d_model, seq_len):
        super().__init__()
        self.emb = nn.Embedding(n_vocab, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = AlibiAttention(5, d_model)
        self.aft = AFTLocal(d_model, seq_len, 3)
        self.head = nn.Linear(d_model, n_vocab)

    def forward(self, x):
        seq_len = x.shape[0]
        h = self.emb(x)
        h = h + self.attn(self.norm1(h))
        causal = torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool)).unsqueeze(-1)
        h = h + self.aft(self.norm2(h), causal)
        return self.head(h)


print("slopes 8", [round(v, 6) for v in get_slopes(8).tolist()])
print("slopes 5", [round(v, 6) for v in get_slopes(5).tolist()])
print("slopes 12", [round(v, 6) for v in get_slopes(12).tolist()])
print("local mask", AFTLocal.create_local_mask(5, 2).int().tolist())
m = torch.tril(torch.ones(4, 4)).unsqueeze(-1)
print("biases", get_alibi_biases(2, m)[..., 1].tolist())

text = "alibi lets attention extrapolate; aft drops the dot product. "
chars = sorted(set(text))
data = torch.tensor([chars.index(c) for c in text])
seq_len, batch = 8, 3
torch.manual_seed(0)
model = Model(len(chars), 20, seq_len)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
loss_func = nn.CrossEntropyLoss()


def batch_at(i):
    xs = torch.stack([data[i + 9 * j: i + 9 * j + seq_len] for j in range(batch)], dim=1)
    ys = torch.stack([data[i + 9 * j + 1: i + 9 * j + seq_len + 1] for j in range(batch)], dim=1)
    return xs, ys


for step in range(3):
    xs, ys = batch_at(step)
    out = model(xs)
    loss = loss_func(out.view(-1, out.shape[-1]), ys.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    print(f"step {step} loss {loss.item():.6f} pos_bias grad {model.aft.pos_bias.grad.abs().sum().item():.6f} "
          f"masked grad {model.aft.pos_bias.grad[0, 4].item():.6f}")
    optimizer.step()


def train_step(xs, ys):
    out = model(xs)
    loss = loss_func(out.view(-1, out.shape[-1]), ys.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


xs, ys = batch_at(5)
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(xs, ys)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(xs, ys)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-6) for k, v in model.state_dict().items()))
