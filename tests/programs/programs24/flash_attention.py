# lucidrains/memory-efficient-attention-pytorch,
# memory_efficient_attention_pytorch/flash_attention.py: FlashAttentionFunction
# (an autograd.Function whose forward and backward are @torch.no_grad()
# staticmethods: Algorithms 2 and 4 of the FlashAttention paper in plain
# PyTorch, with q / k / v split into buckets, in-place mul_ / add_ / copy_
# into split views of the output and the running row sums and maxes,
# masked_fill_ with -finfo.max, amax(keepdims=True), a key padding mask
# rearranged to 'b 1 1 n', the causal triu mask), and FlashAttention (the
# to_q / to_kv / to_out projections, einops rearrange into heads); checked
# as the repository's tests/test.py does, against plain softmax attention,
# forward and gradients, causal and masked.
# Changes for a test: dim 16, heads 2, dim_head 8, sequences of 10, buckets
# of 3 and 4 (a masked call keeps the default buckets: the file splits the
# key mask by q_bucket_size, which PyTorch too refuses to broadcast for
# several key buckets); torch.manual_seed(0); a plain-attention reference written out
# (the repository compares with its Attention class); 2 Adam steps; one
# training step under torch.compile checked against eager.
import copy
import math
import torch
from functools import partial
from torch import nn, einsum
from torch.autograd.function import Function

from einops import rearrange

# constants

EPSILON = 1e-6

# helper functions

def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d

# flash attention forwards and backwards

# https://arxiv.org/abs/2205.14135

class FlashAttentionFunction(Function):
    @staticmethod
    @torch.no_grad()
    def forward(ctx, q, k, v, mask, causal, q_bucket_size, k_bucket_size):
        """ Algorithm 2 in the paper """

        device = q.device
        max_neg_value = -torch.finfo(q.dtype).max
        qk_len_diff = max(k.shape[-2] - q.shape[-2], 0)

        o = torch.zeros_like(q)
        all_row_sums = torch.zeros((*q.shape[:-1], 1), device = device)
        all_row_maxes = torch.full((*q.shape[:-1], 1), max_neg_value, device = device)

        scale = (q.shape[-1] ** -0.5)

        if not exists(mask):
            mask = (None,) * math.ceil(q.shape[-2] / q_bucket_size)
        else:
            mask = rearrange(mask, 'b n -> b 1 1 n')
            mask = mask.split(q_bucket_size, dim = -1)

        row_splits = zip(
            q.split(q_bucket_size, dim = -2),
            o.split(q_bucket_size, dim = -2),
            mask,
            all_row_sums.split(q_bucket_size, dim = -2),
            all_row_maxes.split(q_bucket_size, dim = -2),
        )

        for ind, (qc, oc, row_mask, row_sums, row_maxes) in enumerate(row_splits):
            q_start_index = ind * q_bucket_size - qk_len_diff

            col_splits = zip(
                k.split(k_bucket_size, dim = -2),
                v.split(k_bucket_size, dim = -2),
            )

            for k_ind, (kc, vc) in enumerate(col_splits):
                k_start_index = k_ind * k_bucket_size

                attn_weights = einsum('... i d, ... j d -> ... i j', qc, kc) * scale

                if exists(row_mask):
                    attn_weights.masked_fill_(~row_mask, max_neg_value)

                if causal and q_start_index < (k_start_index + k_bucket_size - 1):
                    causal_mask = torch.ones((qc.shape[-2], kc.shape[-2]), dtype = torch.bool, device = device).triu(q_start_index - k_start_index + 1)
                    attn_weights.masked_fill_(causal_mask, max_neg_value)

                block_row_maxes = attn_weights.amax(dim = -1, keepdims = True)
                attn_weights -= block_row_maxes
                exp_weights = torch.exp(attn_weights)

                if exists(row_mask):
                    exp_weights.masked_fill_(~row_mask, 0.)

                block_row_sums = exp_weights.sum(dim = -1, keepdims = True).clamp(min = EPSILON)

                new_row_maxes = torch.maximum(block_row_maxes, row_maxes)

                exp_values = einsum('... i j, ... j d -> ... i d', exp_weights, vc)

                exp_row_max_diff = torch.exp(row_maxes - new_row_maxes)
                exp_block_row_max_diff = torch.exp(block_row_maxes - new_row_maxes)

                new_row_sums = exp_row_max_diff * row_sums + exp_block_row_max_diff * block_row_sums

                oc.mul_((row_sums / new_row_sums) * exp_row_max_diff).add_((exp_block_row_max_diff / new_row_sums) * exp_values)

                row_maxes.copy_(new_row_maxes)
                row_sums.copy_(new_row_sums)

        lse = all_row_sums.log() + all_row_maxes

        ctx.args = (causal, scale, mask, q_bucket_size, k_bucket_size)
        ctx.save_for_backward(q, k, v, o, lse)

        return o

    @staticmethod
    @torch.no_grad()
    def backward(ctx, do):
        """ Algorithm 4 in the paper """

        causal, scale, mask, q_bucket_size, k_bucket_size = ctx.args
        q, k, v, o, lse = ctx.saved_tensors

        device = q.device

        max_neg_value = -torch.finfo(q.dtype).max
        qk_len_diff = max(k.shape[-2] - q.shape[-2], 0)

        dq = torch.zeros_like(q)
        dk = torch.zeros_like(k)
        dv = torch.zeros_like(v)

        row_splits = zip(
            q.split(q_bucket_size, dim = -2),
            o.split(q_bucket_size, dim = -2),
            do.split(q_bucket_size, dim = -2),
            mask,
            lse.split(q_bucket_size, dim = -2),
            dq.split(q_bucket_size, dim = -2)
        )

        for ind, (qc, oc, doc, row_mask, lsec, dqc) in enumerate(row_splits):
            q_start_index = ind * q_bucket_size - qk_len_diff

            col_splits = zip(
                k.split(k_bucket_size, dim = -2),
                v.split(k_bucket_size, dim = -2),
                dk.split(k_bucket_size, dim = -2),
                dv.split(k_bucket_size, dim = -2),
            )

            for k_ind, (kc, vc, dkc, dvc) in enumerate(col_splits):
                k_start_index = k_ind * k_bucket_size

                attn_weights = einsum('... i d, ... j d -> ... i j', qc, kc) * scale

                if causal and q_start_index < (k_start_index + k_bucket_size - 1):
                    causal_mask = torch.ones((qc.shape[-2], kc.shape[-2]), dtype = torch.bool, device = device).triu(q_start_index - k_start_index + 1)
                    attn_weights.masked_fill_(causal_mask, max_neg_value)

                p = torch.exp(attn_weights - lsec)

                if exists(row_mask):
                    p.masked_fill_(~row_mask, 0.)

                dv_chunk = einsum('... i j, ... i d -> ... j d', p, doc)
                dp = einsum('... i d, ... j d -> ... i j', doc, vc)

                D = (doc * oc).sum(dim = -1, keepdims = True)
                ds = p * scale * (dp - D)

                dq_chunk = einsum('... i j, ... j d -> ... i d', ds, kc)
                dk_chunk = einsum('... i j, ... i d -> ... j d', ds, qc)

                dqc.add_(dq_chunk)
                dkc.add_(dk_chunk)
                dvc.add_(dv_chunk)

        return dq, dk, dv, None, None, None, None

# main class

# just flash attention in plain pytorch
# it will be way slower than implementing it in CUDA
# for tinkering and educational purposes

class FlashAttention(nn.Module):
    def __init__(
        self,
        *,
        dim,
        heads = 8,
        dim_head = 64,
        causal = False,
        q_bucket_size = 512,
        k_bucket_size = 1024
    ):
        super().__init__()
        self.heads = heads

        self.causal = causal

        inner_dim = heads * dim_head

        self.to_q = nn.Linear(dim, inner_dim, bias = False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias = False)
        self.to_out = nn.Linear(inner_dim, dim, bias = False)

        # memory efficient attention related parameters
        # can be overriden on forward
        self.q_bucket_size = q_bucket_size
        self.k_bucket_size = k_bucket_size

    def forward(
        self,
        x,
        context = None,
        mask = None,
        q_bucket_size = None,
        k_bucket_size = None,
    ):
        q_bucket_size = default(q_bucket_size, self.q_bucket_size)
        k_bucket_size = default(k_bucket_size, self.k_bucket_size)

        h = self.heads
        context = default(context, x)

        q = self.to_q(x)
        k, v = self.to_kv(context).chunk(2, dim = -1)

        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, k, v))

        out = FlashAttentionFunction.apply(q, k, v, mask, self.causal, q_bucket_size, k_bucket_size)

        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out)


# --- checked as tests/test.py checks it: against plain attention ---
def plain_attention(attn, x, mask=None):
    h = attn.heads
    q = attn.to_q(x)
    k, v = attn.to_kv(x).chunk(2, dim=-1)
    q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=h), (q, k, v))
    sim = einsum('b h i d, b h j d -> b h i j', q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        sim = sim.masked_fill(~rearrange(mask, 'b j -> b 1 1 j'), -torch.finfo(sim.dtype).max)
    if attn.causal:
        i, j = sim.shape[-2:]
        sim = sim.masked_fill(torch.ones(i, j, dtype=torch.bool).triu(j - i + 1), -torch.finfo(sim.dtype).max)
    out = einsum('b h i j, b h j d -> b h i d', sim.softmax(dim=-1), v)
    return attn.to_out(rearrange(out, 'b h n d -> b n (h d)'))


torch.manual_seed(0)
x = torch.randn(2, 10, 16)
mask = torch.ones(2, 10, dtype=torch.bool)
mask[1, 7:] = False

# (with a mask, the default buckets: the file splits the key mask by
# q_bucket_size, so a masked call needs one key bucket)
for causal, m, qb, kb in [(False, None, 3, 4), (True, None, 3, 4), (False, mask, 512, 1024),
                          (True, mask, 512, 1024)]:
    attn = FlashAttention(dim=16, heads=2, dim_head=8, causal=causal, q_bucket_size=qb, k_bucket_size=kb)
    xf = x.clone().requires_grad_()
    out = attn(xf, mask=m)
    out.sum().backward()
    g_flash = [xf.grad.clone()] + [p.grad.clone() for p in attn.parameters()]
    attn.zero_grad()
    xp = x.clone().requires_grad_()
    ref = plain_attention(attn, xp, m)
    ref.sum().backward()
    g_plain = [xp.grad] + [p.grad for p in attn.parameters()]
    print(f'causal={causal} mask={m is not None}', f'{out.sum().item():.6f}',
          'matches plain', torch.allclose(out, ref, atol=1e-5),
          all(torch.allclose(a, b, atol=1e-4) for a, b in zip(g_flash, g_plain)),
          f'{g_flash[0].abs().sum().item():.6f}')

attn = FlashAttention(dim=16, heads=2, dim_head=8, causal=True, q_bucket_size=3, k_bucket_size=4)
opt = torch.optim.Adam(attn.parameters(), lr=1e-2)
target = torch.randn(2, 10, 16)
for step in range(2):
    loss = (attn(x) - target).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f'step {step} loss {loss.item():.6f}')

# compiled: one training step checked against eager
state, opt_state = copy.deepcopy(attn.state_dict()), copy.deepcopy(opt.state_dict())


def train_step(x, target):
    loss = (attn(x) - target).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


loss_c = torch.compile(train_step)(x, target)
after_c = copy.deepcopy(attn.state_dict())
attn.load_state_dict(state)
opt.load_state_dict(opt_state)
loss_e = train_step(x, target)
print('compiled == eager', torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in attn.state_dict().items()))
