# xLSTM (Beck et al. 2024) as the public minimal re-implementations write it
# in plain torch (the style of myscience/x-lstm and the "xLSTM from scratch"
# ports): an sLSTM cell with exponential input gates stabilized by
# m_t = torch.maximum(log_f + m_prev, log_i), log_f from
# torch.nn.functional.logsigmoid, i = torch.exp(log_i - m_t), the normalizer
# state n and h = o * c / n, block-diagonal recurrent weights held as
# nn.Parameter(torch.empty(heads, d, d)) and applied by torch.einsum; an
# mLSTM cell with the matrix memory
# C = f[..., None, None] * C + i[..., None, None] * torch.einsum('bhd,bhe->bhde', v, k),
# the normalizer n and the max(|n.q|, exp(-m)) denominator, checked against
# NX-AI/xlstm's parallel_stabilized_simple (the log forget-gate cumsum
# repeated and transposed, torch.where(ltr, ..., -float("inf")), the
# row-wise max stabilizer); CausalConv1d
# (a depthwise Conv1d after a left F.pad), multi-head GroupNorm(num_groups=
# heads), the pre-up-projection mLSTM block (conv + SiLU feeding q and k, a
# learnable skip, the SiLU output gate) and the post-up-projection sLSTM
# block (gated GELU MLP); a small LM trained a few steps with AdamW and
# clip_grad_norm_, and its stabilized recurrences checked against the
# unstabilized formulas and NX-AI/xlstm's slstm_forward_pointwise (unbind of
# the stacked states, the torch.all(n == 0.0) first step). Changes for a CPU test: small sizes, weights and
# tokens from numpy; then one training step under torch.compile against the
# same step eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalConv1d(nn.Module):
    def __init__(self, channels, kernel_size=4):
        super().__init__()
        self.pad = kernel_size - 1
        self.conv = nn.Conv1d(channels, channels, kernel_size, groups=channels)

    def forward(self, x):                       # (b, t, d)
        x = F.pad(x.transpose(1, 2), (self.pad, 0))
        return self.conv(x).transpose(1, 2)


class BlockDiagonal(nn.Module):
    """Per-head linear maps: weight (heads, d_in, d_out) by einsum."""

    def __init__(self, dim, heads, bias=True):
        super().__init__()
        self.heads = heads
        self.dh = dim // heads
        self.weight = nn.Parameter(torch.empty(heads, self.dh, self.dh))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None
        nn.init.normal_(self.weight, std=1 / math.sqrt(self.dh))

    def forward(self, x):
        shape = x.shape
        x = x.reshape(*shape[:-1], self.heads, self.dh)
        y = torch.einsum('...hd,hde->...he', x, self.weight).reshape(shape)
        return y + self.bias if self.bias is not None else y


class sLSTMCell(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.dim, self.heads = dim, heads
        self.dh = dim // heads
        # recurrent weights of the four gates, block-diagonal over heads
        self.R = nn.Parameter(torch.empty(4, heads, self.dh, self.dh))
        nn.init.normal_(self.R, std=1 / math.sqrt(self.dh))

    def init_state(self, b, device=None):
        zeros = torch.zeros(b, self.dim, device=device)
        return zeros, zeros.clone(), zeros.clone(), zeros.clone()      # h, c, n, m

    def forward(self, wx, state):
        h, c, n, m = state
        b = h.shape[0]
        rec = torch.einsum('bhd,ghde->gbhe', h.view(b, self.heads, self.dh), self.R).reshape(4, b, self.dim)
        i_tilde, f_tilde, z_tilde, o_tilde = (w + r for w, r in zip(wx.chunk(4, dim=-1), rec))

        log_i = i_tilde                                  # exponential input gate
        log_f = F.logsigmoid(f_tilde)                    # sigmoid forget gate, in log space
        m_t = torch.maximum(log_f + m, log_i)            # stabilizer
        i = torch.exp(log_i - m_t)
        f = torch.exp(log_f + m - m_t)

        c_t = f * c + i * torch.tanh(z_tilde)
        n_t = f * n + i
        h_t = torch.sigmoid(o_tilde) * (c_t / n_t)
        return h_t, (h_t, c_t, n_t, m_t)


def slstm_forward_pointwise(Wx, Ry, b, states, constants):
    """NX-AI/xlstm's sLSTM pointwise step (slstm/src/vanilla/slstm.py)."""
    raw = Wx + Ry + b
    y, c, n, m = torch.unbind(states.view(4, states.shape[1], -1), dim=0)
    # raw = raw.view(-1, 4, -1)
    iraw, fraw, zraw, oraw = torch.unbind(raw.view(raw.shape[0], 4, -1), dim=1)
    # with torch.no_grad():  # THE difference to maxg aka max_gradient (here max / max_static)
    logfplusm = m + torch.nn.functional.logsigmoid(fraw)
    if torch.all(n == 0.0):
        mnew = iraw
    else:
        mnew = torch.max(iraw, logfplusm)  # eq 15
    ogate = torch.sigmoid(oraw)
    igate = torch.exp(iraw - mnew)
    fgate = torch.exp(logfplusm - mnew)
    cnew = fgate * c + igate * torch.tanh(zraw)  # eq 8
    nnew = fgate * n + igate  # eq 9
    ynew = ogate * cnew / nnew  # eq 10

    # shapes ([B,S], [B,S], [B,S], [B,S]), ([B,S],[B,S],[B,S],[B,S])
    return torch.stack((ynew, cnew, nnew, mnew), dim=0), torch.stack((igate, fgate, zraw, ogate), dim=0)


class mLSTMCell(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.dim, self.heads = dim, heads
        self.dh = dim // heads

    def init_state(self, b, device=None):
        C = torch.zeros(b, self.heads, self.dh, self.dh, device=device)
        n = torch.zeros(b, self.heads, self.dh, device=device)
        m = torch.zeros(b, self.heads, device=device)
        return C, n, m

    def forward(self, q, k, v, i_pre, f_pre, state):
        C, n, m = state
        b = q.shape[0]
        q, k, v = (t.view(b, self.heads, self.dh) for t in (q, k, v))
        k = k / math.sqrt(self.dh)

        log_i = i_pre
        log_f = F.logsigmoid(f_pre)
        m_t = torch.maximum(log_f + m, log_i)
        i = torch.exp(log_i - m_t)
        f = torch.exp(log_f + m - m_t)

        C = f[..., None, None] * C + i[..., None, None] * torch.einsum('bhd,bhe->bhde', v, k)
        n = f[..., None] * n + i[..., None] * k
        num = torch.einsum('bhde,bhe->bhd', C, q)
        den = torch.maximum(torch.einsum('bhd,bhd->bh', n, q).abs(), torch.exp(-m_t))[..., None]
        h = (num / den).reshape(b, self.dim)
        return h, (C, n, m_t)


def parallel_stabilized_simple(queries, keys, values, igate_preact, fgate_preact,
                               lower_triangular_matrix=None, stabilize_rowwise=True, eps=1e-6):
    """NX-AI/xlstm's parallel mLSTM (backends.py): the whole sequence at
    once through the log forget-gate cumsum matrix."""
    B, NH, S, DH = queries.shape
    _dtype, _device = queries.dtype, queries.device

    # forget gate matrix
    log_fgates = torch.nn.functional.logsigmoid(fgate_preact)  # (B, NH, S, 1)
    if lower_triangular_matrix is None or S < lower_triangular_matrix.size(-1):
        ltr = torch.tril(torch.ones((S, S), dtype=torch.bool, device=_device))
    else:
        ltr = lower_triangular_matrix
    assert ltr.dtype == torch.bool, f"lower_triangular_matrix must be of dtype bool, got {ltr.dtype}"

    log_fgates_cumsum = torch.cat(
        [
            torch.zeros((B, NH, 1, 1), dtype=_dtype, device=_device),
            torch.cumsum(log_fgates, dim=-2),
        ],
        dim=-2,
    )  # (B, NH, S+1, 1)
    rep_log_fgates_cumsum = log_fgates_cumsum.repeat(1, 1, 1, S + 1)  # (B, NH, S+1, S+1)
    _log_fg_matrix = rep_log_fgates_cumsum - rep_log_fgates_cumsum.transpose(-2, -1)  # (B, NH, S+1, S+1)
    log_fg_matrix = torch.where(ltr, _log_fg_matrix[:, :, 1:, 1:], -float("inf"))  # (B, NH, S, S)

    # gate decay matrix D (combination of forget gate and input gate)
    log_D_matrix = log_fg_matrix + igate_preact.transpose(-2, -1)  # (B, NH, S, S)
    # D matrix stabilization
    if stabilize_rowwise:
        max_log_D, _ = torch.max(log_D_matrix, dim=-1, keepdim=True)  # (B, NH, S, 1)
    else:
        max_log_D = torch.max(log_D_matrix.view(B, NH, -1), dim=-1, keepdim=True)[0].unsqueeze(-1)
    log_D_matrix_stabilized = log_D_matrix - max_log_D  # (B, NH, S, S)
    D_matrix = torch.exp(log_D_matrix_stabilized)  # (B, NH, S, S)

    keys_scaled = keys / math.sqrt(DH)

    # combination matrix C
    qk_matrix = queries @ keys_scaled.transpose(-2, -1)  # (B, NH, S, S)
    C_matrix = qk_matrix * D_matrix  # (B, NH, S, S)
    normalizer = torch.maximum(C_matrix.sum(dim=-1, keepdim=True).abs(), torch.exp(-max_log_D))  # (B, NH, S, 1)
    C_matrix_normalized = C_matrix / (normalizer + eps)

    # retrieved values
    h_tilde_state = C_matrix_normalized @ values  # (B, NH, S, DH)
    return h_tilde_state


class mLSTMBlock(nn.Module):
    def __init__(self, dim, heads, proj_factor=2, kernel_size=4):
        super().__init__()
        inner = proj_factor * dim
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 2 * inner)
        self.conv = CausalConv1d(inner, kernel_size)
        self.q = BlockDiagonal(inner, heads)
        self.k = BlockDiagonal(inner, heads)
        self.v = BlockDiagonal(inner, heads)
        self.gates = nn.Linear(3 * inner, 2 * heads)
        self.cell = mLSTMCell(inner, heads)
        self.hnorm = nn.GroupNorm(num_groups=heads, num_channels=inner)
        self.skip = nn.Parameter(torch.ones(inner))
        self.down = nn.Linear(inner, dim)

    def forward(self, x):
        b, t, _ = x.shape
        x_m, z = self.up(self.norm(x)).chunk(2, dim=-1)
        x_c = F.silu(self.conv(x_m))
        q, k, v = self.q(x_c), self.k(x_c), self.v(x_m)
        i_pre, f_pre = self.gates(torch.cat([q, k, v], dim=-1)).chunk(2, dim=-1)
        state = self.cell.init_state(b, x.device)
        hs = []
        for s in range(t):
            h, state = self.cell(q[:, s], k[:, s], v[:, s], i_pre[:, s], f_pre[:, s], state)
            hs.append(h)
        h = torch.stack(hs, dim=1)
        h = self.hnorm(h.reshape(b * t, -1)).view(b, t, -1)
        h = (h + self.skip * x_c) * F.silu(z)
        return x + self.down(h)


class sLSTMBlock(nn.Module):
    def __init__(self, dim, heads, kernel_size=4, proj_factor=4 / 3):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.conv = CausalConv1d(dim, kernel_size)
        self.W_if = nn.Linear(dim, 2 * dim)
        self.W_zo = nn.Linear(dim, 2 * dim)
        self.cell = sLSTMCell(dim, heads)
        self.hnorm = nn.GroupNorm(num_groups=heads, num_channels=dim)
        self.norm2 = nn.LayerNorm(dim)
        hidden = int(proj_factor * dim)
        self.up = nn.Linear(dim, 2 * hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        b, t, d = x.shape
        x_n = self.norm(x)
        x_c = F.silu(self.conv(x_n))
        i_f = self.W_if(x_c)
        z_o = self.W_zo(x_n)
        wx = torch.cat([i_f, z_o], dim=-1)               # i, f, z, o
        state = self.cell.init_state(b, x.device)
        hs = []
        for s in range(t):
            h, state = self.cell(wx[:, s], state)
            hs.append(h)
        h = torch.stack(hs, dim=1)
        x = x + self.hnorm(h.reshape(b * t, d)).view(b, t, d)
        a, g = self.up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(a * F.gelu(g))


class xLSTMLM(nn.Module):
    def __init__(self, vocab, dim, heads, layout="ms"):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(mLSTMBlock(dim, heads) if c == "m" else sLSTMBlock(dim, heads)
                                    for c in layout)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx, targets=None):
        x = self.embed(idx)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.norm(x))
        if targets is None:
            return logits
        return logits, F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name or name.endswith("skip"):
                continue
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)

cc = CausalConv1d(3, kernel_size=3)
load_numpy(cc, r)
xc = torch.from_numpy(r.normal(size=(2, 6, 3)).astype(np.float32))
yc = cc(xc)
x2 = xc.clone()
x2[:, 4:] = 0.0
print("causal conv", tuple(yc.shape), fmt(yc[1, 2], 3), torch.allclose(cc(x2)[:, :4], yc[:, :4]))

# the stabilized sLSTM recurrence against the plain one (exp(i), sigmoid(f))
cell = sLSTMCell(4, 2)
load_numpy(cell, r)
wxs = torch.from_numpy(r.normal(0, 1.5, size=(5, 2, 16)).astype(np.float32))
state = cell.init_state(2)
h_ref, c_ref, n_ref = torch.zeros(2, 4), torch.zeros(2, 4), torch.zeros(2, 4)
for s in range(5):
    h, state = cell(wxs[s], state)
    rec = torch.einsum('bhd,ghde->gbhe', h_ref.view(2, 2, 2), cell.R).reshape(4, 2, 4)
    gi, gf, gz, go = (w + q for w, q in zip(wxs[s].chunk(4, -1), rec))
    c_ref = torch.sigmoid(gf) * c_ref + torch.exp(gi) * torch.tanh(gz)
    n_ref = torch.sigmoid(gf) * n_ref + torch.exp(gi)
    h_ref = torch.sigmoid(go) * c_ref / n_ref
print("slstm", fmt(h[1], 4), fmt(state[3][0], 4), torch.allclose(h, h_ref, atol=1e-5))

# NX-AI/xlstm's pointwise step agrees (its first step takes m = i: n is 0)
states = torch.zeros(4, 2, 4)
for s_ in range(5):
    h_prev = states[0]
    Ry = torch.einsum('bhd,ghde->bghe', h_prev.view(2, 2, 2), cell.R).reshape(2, 16)
    states, gates = slstm_forward_pointwise(wxs[s_], Ry, torch.zeros(16), states, None)
print("pointwise", torch.allclose(states[0], h, atol=1e-5), fmt(states[3][1], 4), tuple(gates.shape),
      fmt(gates[1][0], 3))
mcell = mLSTMCell(4, 2)
q, k, v = (torch.from_numpy(r.normal(size=(3, 2, 4)).astype(np.float32)) for _ in range(3))
ip, fp = (torch.from_numpy(r.normal(0, 2, size=(3, 2, 2)).astype(np.float32)) for _ in range(2))
st = mcell.init_state(2)
for s in range(3):
    hm, st = mcell(q[s], k[s], v[s], ip[s], fp[s], st)
C_ref = torch.zeros(2, 2, 2, 2)
for s in range(3):
    kk = k[s].view(2, 2, 2) / math.sqrt(2)
    C_ref = torch.sigmoid(fp[s])[..., None, None] * C_ref + \
        torch.exp(ip[s])[..., None, None] * v[s].view(2, 2, 2)[..., :, None] * kk[..., None, :]
print("mlstm", fmt(hm[0], 4), tuple(st[0].shape), fmt(st[2], 4),
      torch.allclose(st[0] * torch.exp(st[2])[..., None, None], C_ref, rtol=1e-4, atol=1e-5))
# the parallel form against the recurrence: the same h at every step
S = 5
qs, ks, vs = (torch.from_numpy(r.normal(size=(2, 2, S, 2)).astype(np.float32)).requires_grad_() for _ in range(3))
igs, fgs = (torch.from_numpy(r.normal(0, 2, size=(2, 2, S, 1)).astype(np.float32)).requires_grad_() for _ in range(2))
hp = parallel_stabilized_simple(qs, ks, vs, igs, fgs, eps=0.0)
st, hr = mcell.init_state(2), []
for s_ in range(S):
    h_, st = mcell(qs[:, :, s_].reshape(2, 4), ks[:, :, s_].reshape(2, 4), vs[:, :, s_].reshape(2, 4),
                   igs[:, :, s_, 0], fgs[:, :, s_, 0], st)
    hr.append(h_.view(2, 2, 2))
hr = torch.stack(hr, dim=2)
gp = torch.autograd.grad(hp.sum(), [qs, fgs])
gr = torch.autograd.grad(hr.sum(), [qs, fgs])
print("parallel", tuple(hp.shape), fmt(hp[1, 0, 3], 2), torch.allclose(hp, hr, rtol=1e-4, atol=1e-5),
      all(torch.allclose(a, b, rtol=1e-3, atol=1e-5) for a, b in zip(gp, gr)),
      fmt(parallel_stabilized_simple(qs, ks, vs, igs, fgs, stabilize_rowwise=False)[0, 1, 4], 2))
print("logsigmoid", fmt(F.logsigmoid(torch.tensor([-30.0, -1.0, 0.0, 40.0])), 4),
      fmt(torch.maximum(torch.tensor([1.0, -2.0]), torch.tensor([0.5, -1.0])), 2))
gn = nn.GroupNorm(num_groups=2, num_channels=4)
print("groupnorm", fmt(gn(torch.arange(8.).view(2, 4) ** 2)[1], 4))

vocab, dim, heads, T = 12, 8, 2, 4
model = xLSTMLM(vocab, dim, heads, layout="ms")
load_numpy(model, r)
print("params", sum(p.numel() for p in model.parameters()),
      [type(b_).__name__ for b_ in model.blocks], tuple(model.blocks[1].cell.R.shape))
data = torch.from_numpy(r.integers(0, vocab, (3, T + 1)))
xs, ys = data[:, :-1].contiguous(), data[:, 1:].contiguous()
logits, loss = model(xs, ys)
print("logits", tuple(logits.shape), fmt(logits[2, 3], 4), f"{loss.item():.5f}")
loss.backward()
# the sLSTM input-gate bias is an invariance of h = o * c / n (a constant
# shift of log_i scales c and n alike): its gradient is rounding noise
print("input-gate bias grad ~ 0", model.blocks[1].W_if.bias.grad[:dim].abs().max().item() < 1e-7,
      model.blocks[1].W_if.bias.grad[dim:].abs().max().item() > 1e-4)
print("grads", fmt(model.blocks[0].q.weight.grad, 3), fmt(model.blocks[1].cell.R.grad, 3),
      fmt(model.blocks[0].conv.conv.weight.grad, 3))
model.zero_grad()

optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, betas=(0.9, 0.95))
losses, norms = [], []
for step in range(4):
    logits, loss = model(xs, ys)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
    optimizer.step()
    losses.append(loss.item())
print("losses", [f"{v:.5f}" for v in losses], "norms", [f"{v:.4f}" for v in norms])

model.eval()
with torch.no_grad():
    prompt = xs[:1, :3]
    for _ in range(4):
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
# (AdamW turns the input-gate bias's noise gradient into steps of about
# lr * noise / eps, different for any two roundings: that half is left out)
now = model.state_dict()
now["blocks.1.W_if.bias"], after["blocks.1.W_if.bias"] = now["blocks.1.W_if.bias"][dim:], after["blocks.1.W_if.bias"][dim:]
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(now[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
