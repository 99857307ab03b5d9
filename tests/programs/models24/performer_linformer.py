# Performer and Linformer attention in a small language model, the way
# lucidrains/performer-pytorch (performer_pytorch.py) and
# lucidrains/linformer (linformer.py) write them: orthogonal_matrix_chunk
# through torch.linalg.qr(unstructured_block.cpu(), mode='reduced') and
# q.t(), gaussian_orthogonal_random_matrix stacking blocks (the remaining
# rows sliced) and torch.diag(multiplier) @ final_matrix for both scalings,
# softmax_kernel with data_normalizer, einops repeat of the projection,
# einsum '...id,...jd->...ij', diag_data, the torch.amax(...).detach()
# stabilizer per row for queries and over (-1, -2) for keys,
# generalized_kernel with a ReLU kernel_fn, linear_attention through
# einsum '...nd,...d->...n' / '...nd,...ne->...de' / '...de,...nd,...n->...ne',
# causal_linear_attention_noncuda chunked with cumsum and the carried
# last_k_cumsum / last_context_cumsum, FastAttention with a registered
# projection_matrix buffer and @torch.no_grad() redraw_projection_matrix by
# copy_, the ProjectionUpdater counting calls in a tensor buffer and
# find_modules, SelfAttention splitting heads with rearrange; Linformer's
# LinformerSelfAttention with nn.Parameter(init_(torch.zeros(seq_len, k)))
# E / F projections, einsum 'bnd,nk->bkd' over zipped (keys, values) and
# projections sliced for shorter inputs, one_kv_head / share_kv and
# expand(-1, h, -1, -1). Changes for a CPU test: tiny sizes, weights and the
# Gaussian draws of the random features from numpy (torch's and tracec's
# generators differ), a few training steps of a 2-layer causal Performer LM
# plus a Linformer layer; then one training step under torch.compile
# against the same step eagerly.
import copy
import math
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange, repeat
from torch import nn

nr = np.random.default_rng(0)     # the random features' Gaussian draws


def randn(shape, device=None):
    return torch.from_numpy(nr.normal(size=shape).astype(np.float32)).to(device)


def fmt(x, n=4):
    return [f"{v:.4f}" for v in x.reshape(-1)[:n].tolist()]


# helpers

def exists(val):
    return val is not None


def default(val, d):
    return val if exists(val) else d


def get_module_device(module):
    return next(module.parameters()).device


def find_modules(nn_module, type):
    return [module for module in nn_module.modules() if isinstance(module, type)]


# kernel functions

# transcribed from jax to pytorch from
# https://github.com/google-research/google-research/blob/master/performer/fast_attention/jax/fast_attention.py

def softmax_kernel(data, *, projection_matrix, is_query, normalize_data=True, eps=1e-4, device = None):
    b, h, *_ = data.shape

    data_normalizer = (data.shape[-1] ** -0.25) if normalize_data else 1.

    ratio = (projection_matrix.shape[0] ** -0.5)

    projection = repeat(projection_matrix, 'j d -> b h j d', b = b, h = h)
    projection = projection.type_as(data)

    data_dash = torch.einsum('...id,...jd->...ij', (data_normalizer * data), projection)

    diag_data = data ** 2
    diag_data = torch.sum(diag_data, dim=-1)
    diag_data = (diag_data / 2.0) * (data_normalizer ** 2)
    diag_data = diag_data.unsqueeze(dim=-1)

    if is_query:
        data_dash = ratio * (
            torch.exp(data_dash - diag_data -
                    torch.amax(data_dash, dim=-1, keepdim=True).detach()) + eps)
    else:
        data_dash = ratio * (
            torch.exp(data_dash - diag_data - torch.amax(data_dash, dim=(-1, -2), keepdim=True).detach()) + eps)

    return data_dash.type_as(data)


def generalized_kernel(data, *, projection_matrix, kernel_fn = nn.ReLU(), kernel_epsilon = 0.001, normalize_data = True, device = None):
    b, h, *_ = data.shape

    data_normalizer = (data.shape[-1] ** -0.25) if normalize_data else 1.

    if projection_matrix is None:
        return kernel_fn(data_normalizer * data) + kernel_epsilon

    projection = repeat(projection_matrix, 'j d -> b h j d', b = b, h = h)
    projection = projection.type_as(data)

    data_dash = torch.einsum('...id,...jd->...ij', (data_normalizer * data), projection)

    data_prime = kernel_fn(data_dash) + kernel_epsilon
    return data_prime.type_as(data)


def orthogonal_matrix_chunk(cols, device = None):
    unstructured_block = randn((cols, cols), device = device)
    q, r = torch.linalg.qr(unstructured_block.cpu(), mode = 'reduced')
    q, r = map(lambda t: t.to(device), (q, r))
    return q.t()


def gaussian_orthogonal_random_matrix(nb_rows, nb_columns, scaling = 0, device = None):
    nb_full_blocks = int(nb_rows / nb_columns)

    block_list = []

    for _ in range(nb_full_blocks):
        q = orthogonal_matrix_chunk(nb_columns, device = device)
        block_list.append(q)

    remaining_rows = nb_rows - nb_full_blocks * nb_columns
    if remaining_rows > 0:
        q = orthogonal_matrix_chunk(nb_columns, device = device)
        block_list.append(q[:remaining_rows])

    final_matrix = torch.cat(block_list)

    if scaling == 0:
        multiplier = randn((nb_rows, nb_columns), device = device).norm(dim = 1)
    elif scaling == 1:
        multiplier = math.sqrt((float(nb_columns))) * torch.ones((nb_rows,), device = device)
    else:
        raise ValueError(f'Invalid scaling {scaling}')

    return torch.diag(multiplier) @ final_matrix


# linear attention classes with softmax kernel

# non-causal linear attention
def linear_attention(q, k, v):
    k_cumsum = k.sum(dim = -2)
    D_inv = 1. / torch.einsum('...nd,...d->...n', q, k_cumsum.type_as(q))
    context = torch.einsum('...nd,...ne->...de', k, v)
    out = torch.einsum('...de,...nd,...n->...ne', context, q, D_inv)
    return out


# inefficient causal linear attention, without cuda code, for reader's reference
# not being used
def causal_linear_attention_noncuda(q, k, v, chunk_size = 128, eps = 1e-6):
    last_k_cumsum = 0
    last_context_cumsum = 0
    outs = []

    for q, k, v in zip(*map(lambda t: t.chunk(chunk_size, dim = -2), (q, k, v))):
        k_cumsum = last_k_cumsum + k.cumsum(dim=-2)

        D_inv = 1. / torch.einsum('...nd,...nd->...n', q, k_cumsum.type_as(q) + eps)
        context = torch.einsum('...nd,...ne->...nde', k, v)
        context_cumsum = last_context_cumsum + context.cumsum(dim=-3)
        out = torch.einsum('...nde,...nd,...n->...ne', context_cumsum, q, D_inv)

        last_k_cumsum = k_cumsum[:, :, -1:]
        last_context_cumsum = context_cumsum[:, :, -1:]
        outs.append(out)

    return torch.cat(outs, dim = -2)


class FastAttention(nn.Module):
    def __init__(self, dim_heads, nb_features = None, ortho_scaling = 0, causal = False, generalized_attention = False, kernel_fn = nn.ReLU(), no_projection = False):
        super().__init__()
        nb_features = default(nb_features, int(dim_heads * math.log(dim_heads)))

        self.dim_heads = dim_heads
        self.nb_features = nb_features
        self.ortho_scaling = ortho_scaling

        self.create_projection = partial(gaussian_orthogonal_random_matrix, nb_rows = self.nb_features, nb_columns = dim_heads, scaling = ortho_scaling)
        projection_matrix = self.create_projection()
        self.register_buffer('projection_matrix', projection_matrix)

        self.generalized_attention = generalized_attention
        self.kernel_fn = kernel_fn

        # if this is turned on, no projection will be used
        # queries and keys will be softmax-ed as in the original efficient attention paper
        self.no_projection = no_projection

        self.causal = causal
        if causal:
            self.causal_linear_fn = partial(causal_linear_attention_noncuda, chunk_size = 4)

    @torch.no_grad()
    def redraw_projection_matrix(self, device):
        projections = self.create_projection(device = device)
        self.projection_matrix.copy_(projections)
        del projections

    def forward(self, q, k, v):
        device = q.device

        if self.no_projection:
            q = q.softmax(dim = -1)
            k = torch.exp(k) if self.causal else k.softmax(dim = -2)

        elif self.generalized_attention:
            create_kernel = partial(generalized_kernel, kernel_fn = self.kernel_fn, projection_matrix = self.projection_matrix, device = device)
            q, k = map(create_kernel, (q, k))

        else:
            create_kernel = partial(softmax_kernel, projection_matrix = self.projection_matrix, device = device)
            q = create_kernel(q, is_query = True)
            k = create_kernel(k, is_query = False)

        attn_fn = linear_attention if not self.causal else self.causal_linear_fn
        out = attn_fn(q, k, v)
        return out


# a module for keeping track of when to update the projections

class ProjectionUpdater(nn.Module):
    def __init__(self, instance, feature_redraw_interval):
        super().__init__()
        self.instance = instance
        self.feature_redraw_interval = feature_redraw_interval
        self.register_buffer('calls_since_last_redraw', torch.tensor(0))

    def fix_projections_(self):
        self.feature_redraw_interval = None

    def redraw_projections(self):
        model = self.instance

        if not self.training:
            return

        if exists(self.feature_redraw_interval) and self.calls_since_last_redraw >= self.feature_redraw_interval:
            device = get_module_device(model)

            fast_attentions = find_modules(model, FastAttention)
            for fast_attention in fast_attentions:
                fast_attention.redraw_projection_matrix(device)

            self.calls_since_last_redraw.zero_()
            return

        self.calls_since_last_redraw += 1

    def forward(self, x):
        raise NotImplemented


class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fn = fn

    def forward(self, x, **kwargs):
        return self.fn(self.norm(x), **kwargs)


class FeedForward(nn.Module):
    def __init__(self, dim, mult = 4, dropout = 0., activation = None, glu = False):
        super().__init__()
        activation = default(activation, nn.GELU)

        self.glu = glu
        self.w1 = nn.Linear(dim, dim * mult * (2 if glu else 1))
        self.act = activation()
        self.dropout = nn.Dropout(dropout)
        self.w2 = nn.Linear(dim * mult, dim)

    def forward(self, x, **kwargs):
        if not self.glu:
            x = self.w1(x)
            x = self.act(x)
        else:
            x, v = self.w1(x).chunk(2, dim=-1)
            x = self.act(x) * v

        x = self.dropout(x)
        x = self.w2(x)
        return x


class Attention(nn.Module):
    def __init__(self, dim, causal = False, heads = 8, dim_head = 64, nb_features = None, feature_redraw_interval = 1000,
                 generalized_attention = False, kernel_fn = nn.ReLU(), dropout = 0., no_projection = False, qkv_bias = False, attn_out_bias = True):
        super().__init__()
        assert dim % heads == 0, 'dimension must be divisible by number of heads'
        dim_head = default(dim_head, dim // heads)
        inner_dim = dim_head * heads
        self.fast_attention = FastAttention(dim_head, nb_features, causal = causal, generalized_attention = generalized_attention, kernel_fn = kernel_fn, no_projection = no_projection)

        self.heads = heads

        self.to_q = nn.Linear(dim, inner_dim, bias = qkv_bias)
        self.to_k = nn.Linear(dim, inner_dim, bias = qkv_bias)
        self.to_v = nn.Linear(dim, inner_dim, bias = qkv_bias)
        self.to_out = nn.Linear(inner_dim, dim, bias = attn_out_bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, context = None, mask = None, context_mask = None, **kwargs):
        b, n, _, h = *x.shape, self.heads

        cross_attend = exists(context)

        context = default(context, x)
        context_mask = default(context_mask, mask) if not cross_attend else context_mask

        q, k, v = self.to_q(x), self.to_k(context), self.to_v(context)

        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, k, v))

        if exists(context_mask):
            global_mask = context_mask[:, None, :, None]
            v.masked_fill_(~global_mask, 0.)

        out = self.fast_attention(q, k, v)
        out = rearrange(out, 'b h n d -> b n (h d)')
        out = self.to_out(out)
        return self.dropout(out)


class SelfAttention(Attention):
    def forward(self, *args, context = None, **kwargs):
        assert not exists(context), 'self attention should not receive context'
        return super().forward(*args, **kwargs)


# ---- lucidrains/linformer
def init_(tensor):
    dim = tensor.shape[-1]
    std = 1 / math.sqrt(dim)
    tensor.uniform_(-std, std)
    return tensor


class LinformerSelfAttention(nn.Module):
    def __init__(self, dim, seq_len, k = 256, heads = 8, dim_head = None, one_kv_head = False, share_kv = False, dropout = 0.):
        super().__init__()
        assert (dim % heads) == 0, 'dimension must be divisible by the number of heads'

        self.seq_len = seq_len
        self.k = k

        self.heads = heads

        dim_head = default(dim_head, dim // heads)
        self.dim_head = dim_head

        self.to_q = nn.Linear(dim, dim_head * heads, bias = False)

        kv_dim = dim_head if one_kv_head else (dim_head * heads)
        self.to_k = nn.Linear(dim, kv_dim, bias = False)
        self.proj_k = nn.Parameter(init_(torch.zeros(seq_len, k)))

        self.share_kv = share_kv
        if not share_kv:
            self.to_v = nn.Linear(dim, kv_dim, bias = False)
            self.proj_v = nn.Parameter(init_(torch.zeros(seq_len, k)))

        self.dropout = nn.Dropout(dropout)
        self.to_out = nn.Linear(dim_head * heads, dim)

    def forward(self, x, context = None, **kwargs):
        b, n, d, d_h, h, k = *x.shape, self.dim_head, self.heads, self.k

        kv_len = n if context is None else context.shape[1]
        assert kv_len <= self.seq_len, f'the sequence length of the key / values must be {self.seq_len} - {kv_len} given'

        queries = self.to_q(x)

        proj_seq_len = lambda args: torch.einsum('bnd,nk->bkd', *args)

        kv_input = x if context is None else context

        keys = self.to_k(kv_input)
        values = self.to_v(kv_input) if not self.share_kv else keys

        kv_projs = (self.proj_k, self.proj_v if not self.share_kv else self.proj_k)

        # allow for variable sequence lengths (less than maximum sequence length) by slicing projections

        if kv_len < self.seq_len:
            kv_projs = map(lambda t: t[:kv_len], kv_projs)

        # project keys and values along the sequence length dimension to k

        keys, values = map(proj_seq_len, zip((keys, values), kv_projs))

        # merge head into batch for queries and key / values

        queries = queries.reshape(b, n, h, -1).transpose(1, 2)

        merge_key_values = lambda t: t.reshape(b, k, -1, d_h).transpose(1, 2).expand(-1, h, -1, -1)
        keys, values = map(merge_key_values, (keys, values))

        # attention

        dots = torch.einsum('bhnd,bhkd->bhnk', queries, keys) * (d_h ** -0.5)
        attn = dots.softmax(dim=-1)
        attn = self.dropout(attn)
        out = torch.einsum('bhnk,bhkd->bhnd', attn, values)

        # split heads
        out = out.transpose(1, 2).reshape(b, n, -1)
        return self.to_out(out)


class PerformerLM(nn.Module):
    """A small causal Performer LM (token + absolute position embeddings,
    depth x [PreNorm attention, PreNorm feed-forward], a final LayerNorm and
    a tied-free logits head), with a ProjectionUpdater like the original's
    Performer.forward."""

    def __init__(self, num_tokens, max_seq_len, dim, depth, heads, dim_head, nb_features, feature_redraw_interval):
        super().__init__()
        self.token_emb = nn.Embedding(num_tokens, dim)
        self.pos_emb = nn.Embedding(max_seq_len, dim)
        self.layers = nn.ModuleList([])
        for _ in range(depth):
            self.layers.append(nn.ModuleList([
                PreNorm(dim, SelfAttention(dim, causal = True, heads = heads, dim_head = dim_head, nb_features = nb_features)),
                PreNorm(dim, FeedForward(dim, mult = 2))
            ]))
        self.norm = nn.LayerNorm(dim)
        self.to_out = nn.Linear(dim, num_tokens)
        self.proj_updater = ProjectionUpdater(self.layers, feature_redraw_interval)

    def fix_projection_matrices_(self):
        self.proj_updater.feature_redraw_interval = None

    def forward(self, x):
        b, n, device = *x.shape, x.device
        x = self.token_emb(x) + self.pos_emb(torch.arange(n, device = device))
        self.proj_updater.redraw_projections()
        for attn, ff in self.layers:
            x = attn(x) + x
            x = ff(x) + x
        return self.to_out(self.norm(x))


def load_numpy(module, r, std=0.2):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))
            elif 'norm' in name and name.endswith('weight'):
                p.fill_(1.0)
            else:
                p.zero_()


# ---- the random feature matrices
m0 = gaussian_orthogonal_random_matrix(10, 4, scaling = 0)
m1 = gaussian_orthogonal_random_matrix(6, 4, scaling = 1)
print("orthogonal", tuple(m0.shape), tuple(m1.shape), fmt(m0, 4), fmt(m1[4], 4))
blk = m1[:4] / 2.0
print("rows orthonormal", torch.allclose(blk @ blk.t(), torch.eye(4), atol=1e-5),
      fmt(m0.norm(dim=1), 4))
A = randn((5, 5))
q, r = torch.linalg.qr(A, mode = 'reduced')
print("qr", fmt(q, 5), fmt(torch.diagonal(r), 5), torch.allclose(q @ r, A, atol=1e-5))

# ---- the softmax kernel approximates softmax attention
dq = randn((1, 2, 6, 8)) * 0.5
dk = randn((1, 2, 6, 8)) * 0.5
dv = randn((1, 2, 6, 8))
fa = FastAttention(8, nb_features = 256)
approx = fa(dq, dk, dv)
exact = torch.softmax(torch.einsum('bhid,bhjd->bhij', dq, dk) * 8 ** -0.5, dim=-1) @ dv
print("fast attention", tuple(approx.shape), fmt(approx, 4), "max err", f"{(approx - exact).abs().max().item():.4f}")
qk = softmax_kernel(dq, projection_matrix = fa.projection_matrix, is_query = True)
kk = softmax_kernel(dk, projection_matrix = fa.projection_matrix, is_query = False)
print("kernels", tuple(qk.shape), fmt(qk[0, 0, 0], 3), fmt(kk[0, 1, 2], 3))
ga = FastAttention(8, nb_features = 16, generalized_attention = True)
print("generalized", fmt(ga(dq, dk, dv), 4))
na = FastAttention(8, no_projection = True, causal = True)
print("no projection causal", fmt(na(dq, dk, dv)[0, 1, 3], 4), na.nb_features)

# causal chunked version against the full-sequence cumsum form
cq, ck = qk.clone(), kk.clone()
full = causal_linear_attention_noncuda(cq, ck, dv, chunk_size = 1)
chunked = causal_linear_attention_noncuda(cq, ck, dv, chunk_size = 3)
ref = torch.stack([linear_attention(cq[:, :, i:i + 1], ck[:, :, :i + 1], dv[:, :, :i + 1])[:, :, 0]
                   for i in range(6)], dim=2)
print("causal", torch.allclose(full, chunked, atol=1e-5), f"{(full - ref).abs().max().item():.4f}",
      fmt(full[0, 1, -1], 4))

# redraw by buffer copy_
before = fa.projection_matrix.clone()
ptr = fa.projection_matrix.data_ptr()
fa.redraw_projection_matrix(torch.device('cpu'))
print("redrawn", not torch.equal(before, fa.projection_matrix), fa.projection_matrix.data_ptr() == ptr,
      fa.projection_matrix.requires_grad, [n for n, _ in fa.named_buffers()])

# ---- Linformer: E / F projections
lin = LinformerSelfAttention(dim = 16, seq_len = 8, k = 4, heads = 2)
print("linformer params", sorted(n for n, _ in lin.named_parameters()),
      [f"{lin.proj_k.abs().max().item() <= 0.5}"])
load_numpy(lin, np.random.default_rng(3))
xl = randn((2, 8, 16))
yl = lin(xl)
ys = lin(xl[:, :5])
print("linformer", tuple(yl.shape), tuple(ys.shape), fmt(yl, 4), fmt(ys[1, -1], 3))
lin1 = LinformerSelfAttention(dim = 16, seq_len = 8, k = 4, heads = 2, one_kv_head = True, share_kv = True)
load_numpy(lin1, np.random.default_rng(4))
ctx = randn((2, 6, 16))
print("one kv head shared", hasattr(lin1, 'proj_v'), tuple(lin1.to_k.weight.shape), fmt(lin1(xl, context = ctx), 4))
try:
    lin(randn((1, 9, 16)))
except AssertionError as e:
    print("too long:", e)

# ---- a small causal Performer LM trained a few steps
model = PerformerLM(num_tokens = 20, max_seq_len = 12, dim = 16, depth = 2, heads = 2, dim_head = 8, nb_features = 12,
                    feature_redraw_interval = 3)
load_numpy(model, np.random.default_rng(5))
attn_layers = find_modules(model, FastAttention)
print("fast attentions", len(attn_layers), tuple(attn_layers[0].projection_matrix.shape),
      model.proj_updater.calls_since_last_redraw.item())
opt = torch.optim.Adam(model.parameters(), lr = 3e-3)
rs = np.random.default_rng(6)
data = torch.from_numpy(rs.integers(0, 20, (6, 4, 12)))
for step in range(6):
    seq = data[step]
    inp, target = seq[:, :-1], seq[:, 1:]
    logits = model(inp)
    loss = F.cross_entropy(rearrange(logits, 'b n c -> b c n'), target)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    opt.step()
    print(f"step {step} loss {loss.item():.5f} calls {model.proj_updater.calls_since_last_redraw.item()}",
          fmt(attn_layers[1].projection_matrix, 2))
# causality: changing a later token leaves the earlier logits
model.eval()
with torch.no_grad():
    a = model(data[0, :, :-1])
    b2 = data[0, :, :-1].clone()
    b2[:, 7] = (b2[:, 7] + 1) % 20
    bb = model(b2)
print("causal LM", f"{(a[:, :7] - bb[:, :7]).abs().max().item():.4f}", not torch.allclose(a[:, 7:], bb[:, 7:]),
      model.proj_updater.calls_since_last_redraw.item())
model.train()
model.fix_projection_matrices_()


# one training step under torch.compile against the same step eagerly
def train_step(inp, target):
    logits = model(inp)
    loss = F.cross_entropy(rearrange(logits, 'b n c -> b c n'), target) + lin(model.token_emb(inp)[:, :8]).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


opt.add_param_group({'params': lin.parameters(), 'lr': 1e-3})
inp, target = data[5][:, :-1], data[5][:, 1:]
state, lstate, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(lin.state_dict()), copy.deepcopy(opt.state_dict())
eager = [train_step(inp, target).item() for _ in range(2)]
both = lambda: {**{'model.' + k: v for k, v in model.state_dict().items()}, **{'lin.' + k: v for k, v in lin.state_dict().items()}}
after = {k: v.clone() for k, v in both().items()}
model.load_state_dict(state)
lin.load_state_dict(lstate)
opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(inp, target).item() for _ in range(2)]
now = both()
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(now[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
