# Tabular models as published: fastai's TabularModel (fastai/tabular/model.py:
# an nn.Embedding per categorical column in a ModuleList, emb_drop,
# BatchNorm1d on the continuous columns, LinBnDrop layers), yandex-research
# rtdl's FT-Transformer pieces (NumericalFeatureTokenizer,
# CategoricalFeatureTokenizer with category_offsets as a non-persistent
# buffer, CLSToken.expand, the attention's W_q / W_k / W_v / W_out with
# _reshape), and dreamquark-ai pytorch-tabnet's sparsemax (SparsemaxFunction
# with its in-place `input -= max_val`, _threshold_and_support's sort /
# cumsum / gather, the masked backward), trained with a DataLoader over a
# TensorDataset with a WeightedRandomSampler for the imbalanced classes.
# Changes for a CPU test: tiny sizes (3 categorical columns, 4 numerical,
# d_token=8, one attention block), LinBnDrop / emb_szs written out, dropout
# 0, and the WeightedRandomSampler's draws (whose RNG differs between tracec
# and torch) are checked for balance and trained on with [rng] losses; the
# compared training runs in a fixed order; the weights come from numpy, so
# tracec and torch compute the same numbers.  Then the training steps under
# torch.compile against the same steps run eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch.autograd import Function
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler


# ---- pytorch-tabnet/sparsemax.py ----
def _make_ix_like(input, dim=0):
    d = input.size(dim)
    rho = torch.arange(1, d + 1, device=input.device, dtype=input.dtype)
    view = [1] * input.dim()
    view[0] = -1
    return rho.view(view).transpose(0, dim)


class SparsemaxFunction(Function):
    """
    An implementation of sparsemax (Martins & Astudillo, 2016). See
    :cite:`DBLP:journals/corr/MartinsA16` for detailed description.
    By Ben Peters and Vlad Niculae
    """

    @staticmethod
    def forward(ctx, input, dim=-1):
        ctx.dim = dim
        max_val, _ = input.max(dim=dim, keepdim=True)
        input -= max_val  # same numerical stability trick as for softmax
        tau, supp_size = SparsemaxFunction._threshold_and_support(input, dim=dim)
        output = torch.clamp(input - tau, min=0)
        ctx.save_for_backward(supp_size, output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        supp_size, output = ctx.saved_tensors
        dim = ctx.dim
        grad_input = grad_output.clone()
        grad_input[output == 0] = 0

        v_hat = grad_input.sum(dim=dim) / supp_size.to(output.dtype).squeeze()
        v_hat = v_hat.unsqueeze(dim)
        grad_input = torch.where(output != 0, grad_input - v_hat, grad_input)
        return grad_input, None

    @staticmethod
    def _threshold_and_support(input, dim=-1):
        input_srt, _ = torch.sort(input, descending=True, dim=dim)
        input_cumsum = input_srt.cumsum(dim) - 1
        rhos = _make_ix_like(input, dim)
        support = rhos * input_srt > input_cumsum

        support_size = support.sum(dim=dim).unsqueeze(dim)
        tau = input_cumsum.gather(dim, support_size - 1)
        tau /= support_size.to(input.dtype)
        return tau, support_size


sparsemax = SparsemaxFunction.apply


class Sparsemax(nn.Module):

    def __init__(self, dim=-1):
        self.dim = dim
        super(Sparsemax, self).__init__()

    def forward(self, input):
        return sparsemax(input, self.dim)


# ---- fastai/tabular/model.py ----
class LinBnDrop(nn.Sequential):
    "Module grouping `BatchNorm1d`, `Dropout` and `Linear` layers"
    def __init__(self, n_in, n_out, bn=True, p=0., act=None, lin_first=False):
        layers = [nn.BatchNorm1d(n_out if lin_first else n_in)] if bn else []
        if p != 0: layers.append(nn.Dropout(p))
        lin = [nn.Linear(n_in, n_out, bias=not bn)]
        if act is not None: lin.append(act)
        layers = lin + layers if lin_first else layers + lin
        super().__init__(*layers)


class TabularModel(nn.Module):
    "Basic model for tabular data."
    def __init__(self, emb_szs, n_cont, out_sz, layers, ps=None, embed_p=0.,
                 y_range=None, use_bn=True, bn_final=False, bn_cont=True, act_cls=nn.ReLU(inplace=True),
                 lin_first=True):
        super().__init__()
        ps = ps or [0] * len(layers)
        self.embeds = nn.ModuleList([nn.Embedding(ni, nf) for ni, nf in emb_szs])
        self.emb_drop = nn.Dropout(embed_p)
        self.bn_cont = nn.BatchNorm1d(n_cont) if bn_cont else None
        n_emb = sum(e.embedding_dim for e in self.embeds)
        self.n_emb, self.n_cont = n_emb, n_cont
        sizes = [n_emb + n_cont] + layers + [out_sz]
        actns = [act_cls for _ in range(len(sizes) - 2)] + [None]
        _layers = [LinBnDrop(sizes[i], sizes[i + 1], bn=use_bn and (i != len(actns) - 1 or bn_final), p=p, act=a,
                             lin_first=lin_first)
                   for i, (p, a) in enumerate(zip(ps + [0.], actns))]
        self.layers = nn.Sequential(*_layers)
        self.y_range = y_range

    def forward(self, x_cat, x_cont=None):
        if self.n_emb != 0:
            x = [e(x_cat[:, i]) for i, e in enumerate(self.embeds)]
            x = torch.cat(x, 1)
            x = self.emb_drop(x)
        if self.n_cont != 0:
            if self.bn_cont is not None: x_cont = self.bn_cont(x_cont)
            x = torch.cat([x, x_cont], 1) if self.n_emb != 0 else x_cont
        x = self.layers(x)
        if self.y_range is not None:
            x = (self.y_range[1] - self.y_range[0]) * torch.sigmoid(x) + self.y_range[0]
        return x


# ---- rtdl (yandex-research) FT-Transformer pieces ----
class NumericalFeatureTokenizer(nn.Module):
    def __init__(self, n_features: int, d_token: int, bias: bool) -> None:
        super().__init__()
        self.weight = nn.Parameter(Tensor(n_features, d_token))
        self.bias = nn.Parameter(Tensor(n_features, d_token)) if bias else None
        for parameter in [self.weight, self.bias]:
            if parameter is not None:
                d_sqrt_inv = 1 / math.sqrt(d_token)
                nn.init.uniform_(parameter, a=-d_sqrt_inv, b=d_sqrt_inv)

    @property
    def n_tokens(self) -> int:
        return len(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        x = self.weight[None] * x[..., None]
        if self.bias is not None:
            x = x + self.bias[None]
        return x


class CategoricalFeatureTokenizer(nn.Module):
    category_offsets: Tensor

    def __init__(self, cardinalities, d_token: int, bias: bool) -> None:
        super().__init__()
        assert cardinalities, 'cardinalities must be non-empty'
        assert d_token > 0, 'd_token must be positive'
        category_offsets = torch.tensor([0] + cardinalities[:-1]).cumsum(0)
        self.register_buffer('category_offsets', category_offsets, persistent=False)
        self.embeddings = nn.Embedding(sum(cardinalities), d_token)
        self.bias = nn.Parameter(Tensor(len(cardinalities), d_token)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        x = self.embeddings(x + self.category_offsets[None])
        if self.bias is not None:
            x = x + self.bias[None]
        return x


class CLSToken(nn.Module):
    def __init__(self, d_token: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(Tensor(d_token))

    def expand(self, *leading_dimensions: int) -> Tensor:
        if not leading_dimensions:
            return self.weight
        new_dims = (1,) * (len(leading_dimensions) - 1)
        return self.weight.view(*new_dims, -1).expand(*leading_dimensions, -1)

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([x, self.expand(len(x), 1)], dim=1)


class MultiheadAttention(nn.Module):
    def __init__(self, *, d_token: int, n_heads: int, dropout: float, bias: bool, sparse: bool) -> None:
        super().__init__()
        if n_heads > 1:
            assert d_token % n_heads == 0, 'd_token must be a multiple of n_heads'
        self.W_q = nn.Linear(d_token, d_token, bias)
        self.W_k = nn.Linear(d_token, d_token, bias)
        self.W_v = nn.Linear(d_token, d_token, bias)
        self.W_out = nn.Linear(d_token, d_token, bias) if n_heads > 1 else None
        self.n_heads = n_heads
        self.dropout = nn.Dropout(dropout) if dropout else None
        self.sparse = sparse

    def _reshape(self, x: Tensor) -> Tensor:
        batch_size, n_tokens, d = x.shape
        d_head = d // self.n_heads
        return (
            x.reshape(batch_size, n_tokens, self.n_heads, d_head)
            .transpose(1, 2)
            .reshape(batch_size * self.n_heads, n_tokens, d_head)
        )

    def forward(self, x_q: Tensor, x_kv: Tensor):
        q, k, v = self.W_q(x_q), self.W_k(x_kv), self.W_v(x_kv)
        for tensor in [q, k, v]:
            assert tensor.shape[-1] % self.n_heads == 0
        batch_size = len(q)
        d_head_key = k.shape[-1] // self.n_heads
        d_head_value = v.shape[-1] // self.n_heads
        n_q_tokens = q.shape[1]

        q = self._reshape(q)
        k = self._reshape(k)
        attention_logits = q @ k.transpose(1, 2) / math.sqrt(d_head_key)
        attention_probs = sparsemax(attention_logits, -1) if self.sparse else F.softmax(attention_logits, dim=-1)
        if self.dropout is not None:
            attention_probs = self.dropout(attention_probs)
        x = attention_probs @ self._reshape(v)
        x = (
            x.reshape(batch_size, self.n_heads, n_q_tokens, d_head_value)
            .transpose(1, 2)
            .reshape(batch_size, n_q_tokens, self.n_heads * d_head_value)
        )
        if self.W_out is not None:
            x = self.W_out(x)
        return x, {'attention_logits': attention_logits, 'attention_probs': attention_probs}


class FTTransformerLite(nn.Module):
    def __init__(self, n_num, cardinalities, d_token, n_heads, d_out, sparse):
        super().__init__()
        self.num_tokenizer = NumericalFeatureTokenizer(n_num, d_token, True)
        self.cat_tokenizer = CategoricalFeatureTokenizer(cardinalities, d_token, True)
        self.cls_token = CLSToken(d_token)
        self.attention_normalization = nn.LayerNorm(d_token)
        self.attention = MultiheadAttention(d_token=d_token, n_heads=n_heads, dropout=0.0, bias=True, sparse=sparse)
        self.ffn_normalization = nn.LayerNorm(d_token)
        self.ffn = nn.Sequential(nn.Linear(d_token, 2 * d_token), nn.ReLU(), nn.Linear(2 * d_token, d_token))
        self.head = nn.Sequential(nn.LayerNorm(d_token), nn.ReLU(), nn.Linear(d_token, d_out))

    def forward(self, x_num, x_cat):
        x = torch.cat([self.num_tokenizer(x_num), self.cat_tokenizer(x_cat)], dim=1)
        x = self.cls_token(x)
        x_residual = self.attention_normalization(x)
        x_residual, _ = self.attention(x_residual[:, -1:], x_residual)   # the last block: the CLS query only
        x = x[:, -1:] + x_residual
        x = x + self.ffn(self.ffn_normalization(x))
        return self.head(x[:, -1])


def numpy_init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                v = (1.0 if "norm" in name or "bn" in name or name.startswith("layers") and name.endswith("weight")
                     else 0.0) + 0.1 * r.standard_normal(tuple(p.shape))
            else:
                v = r.standard_normal(tuple(p.shape)) * (1.0 / p.shape[-1]) ** 0.5
            p.copy_(torch.from_numpy(v.astype(np.float32)))
    return model


# sparsemax on its own: values, the in-place shift of its input, the gradient
z = torch.tensor([[1.0, 2.0, 0.5, 2.2], [0.1, 0.0, -0.3, 0.05]])
zc = z.clone()
p = Sparsemax(dim=-1)(zc)
print("sparsemax", p.tolist(), "input shifted", zc.tolist())
z1 = z.clone().requires_grad_()
pz = sparsemax(z1 * 1.0, -1)
(pz * torch.tensor([1.0, -2.0, 0.5, 3.0])).sum().backward()
print("sparsemax grad", z1.grad.tolist(), pz.grad_fn.__class__.__name__)
print("dim0", sparsemax(z.t().clone(), 0).t().tolist() == sparsemax(z.clone(), -1).tolist())

# the data
rng = np.random.default_rng(0)
n, cards = 48, [3, 5, 2]
x_cat = torch.from_numpy(np.stack([rng.integers(0, c, n) for c in cards], 1))
x_num = torch.from_numpy(rng.standard_normal((n, 4)).astype(np.float32))
y = torch.from_numpy((rng.random(n) < 0.2).astype(np.int64))
class_count = torch.bincount(y)
weights = 1.0 / class_count.float()
sample_weights = weights[y]
print("classes", class_count.tolist(), [f"{w:.4f}" for w in weights.tolist()], sample_weights.dtype)
dataset = TensorDataset(x_cat, x_num, y)
sampler = WeightedRandomSampler(sample_weights, num_samples=len(sample_weights), replacement=True)
print("sampler", len(sampler), sampler.replacement, sampler.num_samples)
draws = torch.cat([y[list(WeightedRandomSampler(sample_weights, 2000))] for _ in range(2)])
print("balanced", abs(draws.float().mean().item() - 0.5) < 0.05, len(draws))
try:
    WeightedRandomSampler(sample_weights, num_samples=0)
except ValueError as e:
    print("ValueError:", e)
loader = DataLoader(dataset, batch_size=16, sampler=sampler)
fixed_loader = DataLoader(dataset, batch_size=16, shuffle=False)

# fastai's TabularModel
emb_szs = [(c, min(600, round(1.6 * c ** 0.56))) for c in cards]
print("emb_szs", emb_szs)
torch.manual_seed(0)
tab = numpy_init(TabularModel(emb_szs, 4, 2, [16, 8]), 1)
print(tab.layers[0])
criterion = nn.CrossEntropyLoss(weight=weights / weights.sum())
opt = torch.optim.Adam(tab.parameters(), lr=1e-2)
for epoch in range(2):
    tab.train()
    for xc, xn, yb in loader:
        opt.zero_grad()
        loss = criterion(tab(xc, xn), yb)
        loss.backward()
        opt.step()
    print(f"weighted sampler epoch {epoch} loss {loss.item():.4f}")
tab = numpy_init(TabularModel(emb_szs, 4, 2, [16, 8], y_range=None), 1)
opt = torch.optim.Adam(tab.parameters(), lr=1e-2)
for epoch in range(2):
    tab.train()
    for xc, xn, yb in fixed_loader:
        opt.zero_grad()
        loss = criterion(tab(xc, xn), yb)
        loss.backward()
        opt.step()
    tab.eval()
    with torch.no_grad():
        out = tab(x_cat, x_num)
    print(f"tabular epoch {epoch} loss {loss.item():.5f} eval {criterion(out, y).item():.5f} "
          f"acc {(out.argmax(1) == y).float().mean().item():.4f}")
print("emb grad rows", (tab.embeds[1].weight.grad.abs().sum(1) > 0).tolist())

# the FT-Transformer, softmax and sparsemax attention
for sparse in (False, True):
    torch.manual_seed(0)
    ft = FTTransformerLite(4, cards, d_token=8, n_heads=2, d_out=2, sparse=sparse)
    print("offsets", ft.cat_tokenizer.category_offsets.tolist(), "category_offsets" in ft.state_dict(),
          ft.num_tokenizer.n_tokens, tuple(ft.cls_token.expand(3, 1).shape), tuple(ft.cls_token.expand().shape))
    numpy_init(ft, 2)
    ft_opt = torch.optim.AdamW(ft.parameters(), lr=1e-2, weight_decay=1e-5)
    for epoch in range(2):
        for xc, xn, yb in fixed_loader:
            ft_opt.zero_grad()
            loss = F.cross_entropy(ft(xn, xc), yb)
            loss.backward()
            ft_opt.step()
        print(f"ft sparse={sparse} epoch {epoch} loss {loss.item():.5f}")
    with torch.no_grad():
        toks = ft.cls_token(torch.cat([ft.num_tokenizer(x_num[:2]), ft.cat_tokenizer(x_cat[:2])], 1))
        _, info = ft.attention(ft.attention_normalization(toks)[:, -1:], ft.attention_normalization(toks))
    probs = info["attention_probs"]
    print("attention", tuple(probs.shape), f"{probs.sum(-1).mean().item():.5f}", (probs == 0).sum().item(),
          [f"{v:.4f}" for v in probs[0, 0].tolist()])


def train_step(xc, xn, yb):
    ft_opt.zero_grad()
    loss = F.cross_entropy(ft(xn, xc), yb)
    loss.backward()
    ft_opt.step()
    return loss


model, optimizer = ft, ft_opt


# the training step under torch.compile against the same step run eagerly
def compile_check(model, optimizer, train_step, *batch, steps=2):
    model.train()
    state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
    eager = [train_step(*batch).item() for _ in range(steps)]
    after = copy.deepcopy(model.state_dict())
    model.load_state_dict(state)
    optimizer.load_state_dict(opt_state)
    cstep = torch.compile(train_step)
    compiled = [cstep(*batch).item() for _ in range(steps)]
    print("compiled losses", [f"{v:.5f}" for v in compiled])
    print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
          all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-3, atol=1e-5)
              for k in after))
compile_check(model, optimizer, train_step, x_cat[:16], x_num[:16], y[:16])
