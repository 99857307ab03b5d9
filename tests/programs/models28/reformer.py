# Reformer's LSH attention and reversible layers the way
# lucidrains/reformer-pytorch (reformer_pytorch/reformer_pytorch.py and
# reversible.py) writes them, simplified: hash_vectors (random rotations by
# torch.einsum('btf,fhi->bhti'), torch.cat([rotated, -rotated], dim=-1)
# .argmax(dim=-1), buckets + offsets * n_buckets), the sort of
# seqlen * buckets + ticker % seqlen by sort_key_val (sort + gather on the
# expanded ticker), undo_sort by argsort, batched_index_select (gather with
# an expanded index), chunks that look one back (torch.cat([x, x.roll(1,
# dims=1)], dim=2)), F.normalize'd keys, the causal and self masks by
# masked_fill_ with -torch.finfo(dots.dtype).max and TOKEN_SELF_ATTN_VALUE,
# the bucket mask and the duplicate-attention counts (locs through
# batched_index_select, expand to b_locs.shape[:3] + (2, total_hashes),
# equality of broadcast locations, chunked_sum, dots - log(dup_counts)),
# the logsumexp softmax, the outputs unsorted by scatter and the hash rounds
# combined by their logsumexp weights; LSHSelfAttention's head split;
# reversible.py's Deterministic (torch.get_rng_state, torch.cuda._initialized,
# get_device_states / set_device_states from torch.utils.checkpoint,
# torch.random.fork_rng, torch.set_rng_state: dropout is replayed),
# ReversibleBlock (forward under torch.no_grad(), backward_pass recomputing f and g under
# torch.enable_grad() with torch.autograd.backward), IrreversibleBlock and
# _ReversibleFunction (a custom torch.autograd.Function keeping the output by
# ctx.save_for_backward and the blocks on ctx). A tiny ReformerLM is trained
# a few steps. Changes for a CPU test: the random rotations are drawn once
# from numpy into a buffer (the original draws torch.randn on every forward
# and caches the buckets for the reversible recompute), look_one_back by
# roll (the original cats x[:, -1:] before x[:, :-1]: the same tensor),
# small sizes, weights and tokens from numpy; the reversible gradients are
# checked against the irreversible path, and one training step runs under
# torch.compile against the same step eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.function import Function
from torch.utils.checkpoint import get_device_states, set_device_states

TOKEN_SELF_ATTN_VALUE = -5e4


def max_neg_value(tensor):
    return -torch.finfo(tensor.dtype).max


def sort_key_val(t1, t2, dim=-1):
    values, indices = t1.sort(dim=dim)
    t2 = t2.expand_as(t1)
    return values, t2.gather(dim, indices)


def batched_index_select(values, indices):
    last_dim = values.shape[-1]
    return values.gather(1, indices[:, :, None].expand(-1, -1, last_dim))


def chunked_sum(tensor, chunks=1):
    *orig_size, last_dim = tensor.shape
    tensor = tensor.reshape(-1, last_dim)
    summed_tensors = [c.sum(dim=-1) for c in tensor.chunk(chunks, dim=0)]
    return torch.cat(summed_tensors, dim=0).reshape(orig_size)


def look_one_back(x):
    return torch.cat([x, x.roll(1, dims=1)], dim=2)


class LSHAttention(nn.Module):
    def __init__(self, dim_head, dropout=0., bucket_size=4, n_hashes=2, causal=False, seed=0,
                 allow_duplicate_attention=True, attend_across_buckets=True):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.causal = causal
        self._allow_duplicate_attention = allow_duplicate_attention
        self._attend_across_buckets = attend_across_buckets
        self.bucket_size = bucket_size
        self.n_hashes = n_hashes
        self.dim_head = dim_head
        self.rot = {}
        self.seed = seed

    def rotations(self, f, n_buckets):
        key = (f, n_buckets)
        if key not in self.rot:
            r = np.random.default_rng(self.seed + n_buckets)
            self.rot[key] = torch.from_numpy(r.normal(size=(f, self.n_hashes, n_buckets // 2)).astype(np.float32))
        return self.rot[key]

    def hash_vectors(self, n_buckets, vecs):
        batch_size = vecs.shape[0]
        device = vecs.device

        assert n_buckets % 2 == 0
        random_rotations = self.rotations(vecs.shape[-1], n_buckets).type_as(vecs)

        rotated_vecs = torch.einsum('btf,fhi->bhti', vecs, random_rotations)
        rotated_vecs = torch.cat([rotated_vecs, -rotated_vecs], dim=-1)
        buckets = torch.argmax(rotated_vecs, dim=-1)

        offsets = torch.arange(self.n_hashes, device=device)
        offsets = torch.reshape(offsets * n_buckets, (1, -1, 1))
        buckets = torch.reshape(buckets + offsets, (batch_size, -1,))
        return buckets

    def forward(self, qk, v, input_mask=None):
        batch_size, seqlen, dim, device = *qk.shape, qk.device

        assert seqlen % (self.bucket_size * 2) == 0, \
            f'Sequence length ({seqlen}) needs to be divisible by target bucket size  x 2 - {self.bucket_size * 2}'

        n_buckets = seqlen // self.bucket_size
        buckets = self.hash_vectors(n_buckets, qk)
        assert int(buckets.shape[1]) == self.n_hashes * seqlen

        total_hashes = self.n_hashes

        ticker = torch.arange(total_hashes * seqlen, device=device).unsqueeze(0).expand_as(buckets)
        buckets_and_t = seqlen * buckets + (ticker % seqlen)
        buckets_and_t = buckets_and_t.detach()

        # Hash-based sort ("s" at the start of variable names means "sorted")
        sbuckets_and_t, sticker = sort_key_val(buckets_and_t, ticker, dim=-1)
        undo_sort = sticker.argsort(dim=-1)
        del ticker

        sbuckets_and_t = sbuckets_and_t.detach()
        sticker = sticker.detach()
        undo_sort = undo_sort.detach()

        st = (sticker % seqlen)
        sqk = batched_index_select(qk, st)
        sv = batched_index_select(v, st)

        # Split off a "bin" axis so that attention only occurs within chunks.
        chunk_size = total_hashes * n_buckets
        bq_t = bkv_t = torch.reshape(st, (batch_size, chunk_size, -1))
        bqk = torch.reshape(sqk, (batch_size, chunk_size, -1, dim))
        bv = torch.reshape(sv, (batch_size, chunk_size, -1, dim))

        bq = bqk
        bk = F.normalize(bqk, p=2, dim=-1).type_as(bq)

        bk = look_one_back(bk)
        bv = look_one_back(bv)
        bkv_t = look_one_back(bkv_t)

        # Dot-product attention.
        dots = torch.einsum('bhie,bhje->bhij', bq, bk) * (dim ** -0.5)
        masked_value = max_neg_value(dots)

        if input_mask is not None:
            input_mask = F.pad(input_mask, (0, seqlen - input_mask.shape[1]), value=True)
            mq = input_mask.gather(1, st).reshape((batch_size, chunk_size, -1))
            mkv = look_one_back(mq)
            mask = mq[:, :, :, None] * mkv[:, :, None, :]
            dots.masked_fill_(~mask, masked_value)
            del mask

        # Causal masking
        if self.causal:
            mask = bq_t[:, :, :, None] < bkv_t[:, :, None, :]
            dots.masked_fill_(mask, masked_value)
            del mask

        # Mask out attention to self except when no other targets are available.
        self_mask = bq_t[:, :, :, None] == bkv_t[:, :, None, :]
        dots.masked_fill_(self_mask, TOKEN_SELF_ATTN_VALUE)
        del self_mask

        # Mask out attention to other hash buckets.
        if not self._attend_across_buckets:
            bq_buckets = bkv_buckets = torch.reshape(sbuckets_and_t // seqlen, (batch_size, chunk_size, -1))
            bkv_buckets = look_one_back(bkv_buckets)
            bucket_mask = bq_buckets[:, :, :, None] != bkv_buckets[:, :, None, :]
            dots.masked_fill_(bucket_mask, masked_value)
            del bucket_mask

        # Don't double-count query-key pairs across multiple rounds of hashing.
        # There are two possible strategies here. (1) The default is to count how
        # many times a query-key pair is repeated, and to lower its log-prob
        # correspondingly at each repetition.
        if not self._allow_duplicate_attention:
            locs1 = undo_sort // bq_t.shape[-1]
            locs2 = (locs1 + 1) % chunk_size
            if not self._attend_across_buckets:
                locs1 = buckets * chunk_size + locs1
                locs2 = buckets * chunk_size + locs2
            locs = torch.cat([
                torch.reshape(locs1, (batch_size, total_hashes, seqlen)),
                torch.reshape(locs2, (batch_size, total_hashes, seqlen)),
            ], 1).permute((0, 2, 1))

            slocs = batched_index_select(locs, st)
            b_locs = torch.reshape(slocs, (batch_size, chunk_size, -1, 2 * total_hashes))

            b_locs1 = b_locs[:, :, :, None, :total_hashes]

            bq_locs = b_locs1.expand(b_locs.shape[:3] + (2, total_hashes))
            bq_locs = torch.reshape(bq_locs, b_locs.shape)
            bkv_locs = look_one_back(b_locs)

            dup_counts = (bq_locs[:, :, :, None, :] == bkv_locs[:, :, None, :, :])
            # for memory considerations, chunk summation of last dimension for counting duplicates
            dup_counts = chunked_sum(dup_counts, chunks=(total_hashes * batch_size))
            dup_counts = dup_counts.detach()
            assert dup_counts.shape == dots.shape
            dots = dots - torch.log(dup_counts + 1e-9)
            del dup_counts

        # Softmax.
        dots_logsumexp = torch.logsumexp(dots, dim=-1, keepdim=True)
        dots = torch.exp(dots - dots_logsumexp).type_as(dots)
        dropped_dots = self.dropout(dots)

        bo = torch.einsum('buij,buje->buie', dropped_dots, bv)
        so = torch.reshape(bo, (batch_size, -1, dim))
        slogits = torch.reshape(dots_logsumexp, (batch_size, -1,))

        # unsort: scatter the sorted rows back to their ticker positions
        o = torch.zeros_like(so).scatter(1, sticker[:, :, None].expand(-1, -1, dim), so)
        logits = slogits.gather(1, undo_sort)

        o = torch.reshape(o, (batch_size, total_hashes, seqlen, dim))
        logits = torch.reshape(logits, (batch_size, total_hashes, seqlen, 1))

        probs = torch.exp(logits - torch.logsumexp(logits, dim=1, keepdim=True))
        out = torch.sum(o * probs, dim=1)
        return out, buckets


class LSHSelfAttention(nn.Module):
    def __init__(self, dim, heads=2, bucket_size=4, n_hashes=2, causal=False, dropout=0., seed=0):
        super().__init__()
        assert dim % heads == 0, 'dimensions must be divisible by number of heads'
        self.dim = dim
        self.heads = heads
        dim_heads = dim // heads
        self.toqk = nn.Linear(dim, dim, bias=False)
        self.tov = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.lsh_attn = LSHAttention(dim_heads, bucket_size=bucket_size, n_hashes=n_hashes,
                                     causal=causal, dropout=dropout, seed=seed)

    def forward(self, x, input_mask=None):
        b, t, e, h = *x.shape, self.heads
        qk = self.toqk(x)
        v = self.tov(x)

        def merge_heads(v):
            return v.view(b, t, h, -1).transpose(1, 2)

        def split_heads(v):
            return v.view(b, h, t, -1).transpose(1, 2).contiguous()

        qk, v = map(merge_heads, (qk, v))
        qk, v = map(lambda t_: t_.reshape(b * h, t, -1), (qk, v))
        if input_mask is not None:
            input_mask = input_mask.unsqueeze(1).expand(b, h, t).reshape(b * h, t)
        out, buckets = self.lsh_attn(qk, v, input_mask=input_mask)
        out = split_heads(out.view(b, h, t, -1)).view(b, t, -1)
        return self.to_out(out)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=2, dropout=0.):
        super().__init__()
        self.w1 = nn.Linear(dim, dim * mult)
        self.act = nn.GELU()
        self.dropout = nn.Dropout(dropout)
        self.w2 = nn.Linear(dim * mult, dim)

    def forward(self, x, **kwargs):
        x = self.w1(x)
        x = self.act(x)
        x = self.dropout(x)
        return self.w2(x)


class PreNorm(nn.Module):
    def __init__(self, norm_class, dim, fn):
        super().__init__()
        self.norm = norm_class(dim)
        self.fn = fn

    def forward(self, x, **kwargs):
        x = self.norm(x)
        return self.fn(x, **kwargs)


# reversible.py

class Deterministic(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net
        self.cpu_state = None
        self.cuda_in_fwd = None
        self.gpu_devices = None
        self.gpu_states = None

    def record_rng(self, *args):
        self.cpu_state = torch.get_rng_state()
        if torch.cuda._initialized:
            self.cuda_in_fwd = True
            self.gpu_devices, self.gpu_states = get_device_states(*args)

    def forward(self, *args, record_rng=False, set_rng=False, **kwargs):
        if record_rng:
            self.record_rng(*args)

        if not set_rng:
            return self.net(*args, **kwargs)

        rng_devices = []
        if self.cuda_in_fwd:
            rng_devices = self.gpu_devices

        with torch.random.fork_rng(devices=rng_devices, enabled=True):
            torch.set_rng_state(self.cpu_state)
            if self.cuda_in_fwd:
                set_device_states(self.gpu_devices, self.gpu_states)
            return self.net(*args, **kwargs)


class ReversibleBlock(nn.Module):
    def __init__(self, f, g, depth=None):
        super().__init__()
        self.f = Deterministic(f)
        self.g = Deterministic(g)
        self.depth = depth

    def forward(self, x, f_args={}, g_args={}):
        x1, x2 = torch.chunk(x, 2, dim=2)
        y1, y2 = None, None

        with torch.no_grad():
            y1 = x1 + self.f(x2, record_rng=self.training, **f_args)
            y2 = x2 + self.g(y1, record_rng=self.training, **g_args)

        return torch.cat([y1, y2], dim=2)

    def backward_pass(self, y, dy, f_args={}, g_args={}):
        y1, y2 = torch.chunk(y, 2, dim=2)
        del y

        dy1, dy2 = torch.chunk(dy, 2, dim=2)
        del dy

        with torch.enable_grad():
            y1.requires_grad = True
            gy1 = self.g(y1, set_rng=True, **g_args)
            torch.autograd.backward(gy1, dy2)

        with torch.no_grad():
            x2 = y2 - gy1
            del y2, gy1

            dx1 = dy1 + y1.grad
            del dy1
            y1.grad = None

        with torch.enable_grad():
            x2.requires_grad = True
            fx2 = self.f(x2, set_rng=True, **f_args)
            torch.autograd.backward(fx2, dx1, retain_graph=True)

        with torch.no_grad():
            x1 = y1 - fx2
            del y1, fx2

            dx2 = dy2 + x2.grad
            del dy2
            x2.grad = None

            x = torch.cat([x1, x2.detach()], dim=2)
            dx = torch.cat([dx1, dx2], dim=2)

        return x, dx


class IrreversibleBlock(nn.Module):
    def __init__(self, f, g):
        super().__init__()
        self.f = f
        self.g = g

    def forward(self, x, f_args, g_args):
        x1, x2 = torch.chunk(x, 2, dim=2)
        y1 = x1 + self.f(x2, **f_args)
        y2 = x2 + self.g(y1, **g_args)
        return torch.cat([y1, y2], dim=2)


class _ReversibleFunction(Function):
    @staticmethod
    def forward(ctx, x, blocks, kwargs):
        ctx.kwargs = kwargs
        for block in blocks:
            x = block(x, **kwargs)
        ctx.save_for_backward(x)
        ctx.blocks = blocks
        return x

    @staticmethod
    def backward(ctx, dy):
        y, = ctx.saved_tensors
        y = y.detach()
        kwargs = ctx.kwargs
        for block in ctx.blocks[::-1]:
            y, dy = block.backward_pass(y, dy, **kwargs)
        return dy, None, None


class ReversibleSequence(nn.Module):
    def __init__(self, blocks, reverse_thres=0):
        super().__init__()
        self.reverse_thres = reverse_thres
        self.blocks = nn.ModuleList([ReversibleBlock(f, g, depth) for depth, (f, g) in enumerate(blocks)])
        self.irrev_blocks = nn.ModuleList([IrreversibleBlock(f=f, g=g) for f, g in blocks])

    def forward(self, x, arg_route=(True, False), **kwargs):
        reverse = x.shape[1] > self.reverse_thres
        blocks = self.blocks if reverse else self.irrev_blocks

        f_args, g_args = map(lambda route: kwargs if route else {}, arg_route)
        block_kwargs = {'f_args': f_args, 'g_args': g_args}

        if not reverse:
            for block in blocks:
                x = block(x, **block_kwargs)
            return x

        return _ReversibleFunction.apply(x, blocks, block_kwargs)


class ReformerLM(nn.Module):
    def __init__(self, num_tokens, dim, depth, max_seq_len, heads=2, bucket_size=4, n_hashes=2,
                 causal=True, ff_dropout=0., post_attn_dropout=0.):
        super().__init__()
        self.token_emb = nn.Embedding(num_tokens, dim)
        self.pos_emb = nn.Embedding(max_seq_len, dim)
        blocks = []
        for ind in range(depth):
            attn = LSHSelfAttention(dim, heads, bucket_size, n_hashes, causal=causal, seed=ind)
            ff = FeedForward(dim, dropout=ff_dropout)
            blocks.append(nn.ModuleList([PreNorm(nn.LayerNorm, dim, attn), PreNorm(nn.LayerNorm, dim, ff)]))
        self.layers = ReversibleSequence(nn.ModuleList(blocks))
        self.norm = nn.LayerNorm(dim)
        self.to_logits = nn.Linear(dim, num_tokens)

    def forward(self, x, **kwargs):
        t = x.shape[1]
        x = self.token_emb(x) + self.pos_emb(torch.arange(t, device=x.device))
        x = torch.cat([x, x], dim=-1)
        x = self.layers(x, **kwargs)
        x = torch.stack(x.chunk(2, dim=-1)).mean(dim=0)
        return self.to_logits(self.norm(x))


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name:
                continue
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)

# the pieces
vals = torch.from_numpy(r.permutation(12).reshape(2, 6))
v, t2 = sort_key_val(vals, torch.arange(6).unsqueeze(0))
print("sort_key_val", v.tolist(), t2.tolist())
xs = torch.arange(24.).view(2, 3, 4)
print("batched_index_select", batched_index_select(xs, torch.tensor([[2, 0], [1, 1]])).tolist())
print("look_one_back", look_one_back(torch.arange(6).view(1, 3, 2)).tolist())
print("finfo", max_neg_value(torch.zeros(1)), max_neg_value(torch.zeros(1, dtype=torch.float64)))

attn = LSHAttention(4, bucket_size=2, n_hashes=2, causal=True)
qk = torch.from_numpy(r.normal(size=(3, 8, 4)).astype(np.float32)).requires_grad_()
vv = torch.from_numpy(r.normal(size=(3, 8, 4)).astype(np.float32)).requires_grad_()
buckets = attn.hash_vectors(4, qk)
print("buckets", tuple(buckets.shape), buckets[0].tolist())
out, _ = attn(qk, vv)
print("lsh out", tuple(out.shape), fmt(out[1, 3], 4), fmt(out[2, 7], 4))
out.pow(2).sum().backward()
print("lsh grads", fmt(qk.grad[0, 5], 4), fmt(vv.grad[2, 1], 4))
mask = torch.ones(3, 8, dtype=torch.bool)
mask[:, 6:] = False
out_m, _ = attn(qk, vv, input_mask=mask)
print("input mask", fmt(out_m[0, 7], 4))
print("chunked_sum", chunked_sum(torch.arange(24).view(2, 3, 4) % 3 == 0, chunks=3).tolist())
attn_dup = LSHAttention(4, bucket_size=2, n_hashes=3, causal=True, allow_duplicate_attention=False,
                        attend_across_buckets=False)
out_d, buckets_d = attn_dup(qk, vv)
print("no duplicates, within buckets", fmt(out_d[0, 5], 4), fmt(out_d[2, 2], 4), tuple(buckets_d.shape))
(out_d * vv).sum().backward()
print("grads", fmt(qk.grad[1, 4], 4))

dim, seq, vocab = 8, 16, 20
model = ReformerLM(vocab, dim, depth=2, max_seq_len=seq, heads=2, bucket_size=4, n_hashes=2)
load_numpy(model, r)
print("params", sum(p.numel() for p in model.parameters()), len(model.layers.blocks),
      type(model.layers.blocks[0].f.net.fn).__name__)

data = torch.from_numpy(r.integers(0, vocab, (2, seq + 1)))
inp, tgt = data[:, :-1], data[:, 1:]

# reversible gradients against the irreversible path
logits = model(inp)
loss = F.cross_entropy(logits.transpose(1, 2), tgt)
loss.backward()
rev = {n: p.grad.clone() for n, p in model.named_parameters()}
model.zero_grad()
model.layers.reverse_thres = 10 ** 6
loss_irr = F.cross_entropy(model(inp).transpose(1, 2), tgt)
loss_irr.backward()
irr = {n: p.grad.clone() for n, p in model.named_parameters()}
model.layers.reverse_thres = 0
model.zero_grad()
print("loss", f"{loss.item():.5f}", f"{loss_irr.item():.5f}", "grad_fn", type(logits.grad_fn).__name__)
print("reversible grads == irreversible", all(torch.allclose(rev[n], irr[n], rtol=1e-4, atol=1e-6) for n in rev))
print("grads", fmt(rev["layers.blocks.0.f.net.fn.toqk.weight"], 4), fmt(rev["token_emb.weight"], 3))

# dropout replayed by the saved generator state
dmodel = ReformerLM(vocab, dim, depth=2, max_seq_len=seq, ff_dropout=0.3, post_attn_dropout=0.0)
dmodel.load_state_dict(model.state_dict())
torch.manual_seed(3)
F.cross_entropy(dmodel(inp).transpose(1, 2), tgt).backward()
drev = {n: p.grad.clone() for n, p in dmodel.named_parameters()}
dmodel.zero_grad()
dmodel.layers.reverse_thres = 10 ** 6
torch.manual_seed(3)
F.cross_entropy(dmodel(inp).transpose(1, 2), tgt).backward()
print("dropout replayed", all(torch.allclose(drev[n], p.grad, rtol=1e-4, atol=1e-6)
                              for n, p in dmodel.named_parameters()))
state = torch.get_rng_state()
a = torch.rand(3)
with torch.random.fork_rng(devices=[]):
    torch.rand(5)
b = torch.rand(3)
torch.set_rng_state(state)
print("device states", get_device_states(inp, [state]), torch.cuda._initialized,
      model.layers.blocks[0].f.cuda_in_fwd)
print("rng state", torch.equal(torch.cat([a, b]), torch.rand(6)))

optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
losses = []
for step in range(4):
    loss = F.cross_entropy(model(inp).transpose(1, 2), tgt)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
print("losses", [f"{v:.5f}" for v in losses])


# one training step under torch.compile against the same step eagerly
def train_step(xb, yb):
    loss = F.cross_entropy(model(xb).transpose(1, 2), yb)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(inp, tgt).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(inp, tgt).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
