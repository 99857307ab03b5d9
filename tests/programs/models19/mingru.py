# lucidrains/minGRU-pytorch ("Were RNNs All We Needed?") the way its
# minGRU.py, minLSTM.py, minGRULM.py and train.py write it: the Heinsen
# associative scan in log space (cumsum, logcumsumexp, exp), the g / log_g
# activations (torch.where, softplus), minGRU's and minLSTM's sequential
# (one step, torch.lerp) and parallel forms, with and without a previous
# hidden state; the minGRULM char model (RMSNorm by F.normalize,
# ModuleList layers holding None for the disabled causal depthwise conv,
# GELU feedforward, return_loss with cross_entropy over transposed logits),
# the enwik8 training loop with gradient accumulation and
# clip_grad_norm_, and cached / uncached decoding with top_k and gumbel
# sampling. Changes for a CPU test: small sizes, weights and text from
# numpy, temperature ~0 so sampling is greedy, a few steps; then one
# training step under torch.compile against the same step eagerly.
import copy
import math

import numpy as np
import torch
from torch import nn
from torch.nn import Linear, Identity, Module, ModuleList
import torch.nn.functional as F
from torch.optim import Adam


def exists(v):
    return v is not None


def default(v, d):
    return v if exists(v) else d


def log(t, eps = 1e-20):
    return torch.log(t.clamp(min = eps))


# appendix B
# https://github.com/glassroom/heinsen_sequence

def heinsen_associative_scan_log(log_coeffs, log_values):
    a_star = log_coeffs.cumsum(dim = 1)
    log_h0_plus_b_star = (log_values - a_star).logcumsumexp(dim = 1)
    log_h = a_star + log_h0_plus_b_star
    return log_h.exp()


# appendix B.3

def g(x):
    return torch.where(x >= 0, x + 0.5, x.sigmoid())


def log_g(x):
    return torch.where(x >= 0, (F.relu(x) + 0.5).log(), -F.softplus(-x))


# log-space version of minGRU - B.3.1
# they enforce the hidden states to be positive

class minGRU(Module):
    def __init__(self, dim, expansion_factor = 1., proj_out = None):
        super().__init__()

        dim_inner = int(dim * expansion_factor)
        proj_out = default(proj_out, expansion_factor != 1.)

        self.to_hidden_and_gate = Linear(dim, dim_inner * 2, bias = False)
        self.to_out = Linear(dim_inner, dim, bias = False) if proj_out else Identity()

    def forward(self, x, prev_hidden = None, return_next_prev_hidden = False):
        seq_len = x.shape[1]
        hidden, gate = self.to_hidden_and_gate(x).chunk(2, dim = -1)

        if seq_len == 1:
            # handle sequential

            hidden = g(hidden)
            gate = gate.sigmoid()
            out = torch.lerp(prev_hidden, hidden, gate) if exists(prev_hidden) else (hidden * gate)
        else:
            # parallel

            log_coeffs = -F.softplus(gate)

            log_z = -F.softplus(-gate)
            log_tilde_h = log_g(hidden)
            log_values = log_z + log_tilde_h

            if exists(prev_hidden):
                log_values = torch.cat((prev_hidden.log(), log_values), dim = 1)
                log_coeffs = F.pad(log_coeffs, (0, 0, 1, 0))

            out = heinsen_associative_scan_log(log_coeffs, log_values)
            out = out[:, -seq_len:]

        next_prev_hidden = out[:, -1:]

        out = self.to_out(out)

        if not return_next_prev_hidden:
            return out

        return out, next_prev_hidden


# minLSTM.py

class minLSTM(Module):
    def __init__(self, dim, expansion_factor = 1.):
        super().__init__()

        dim_inner = int(dim * expansion_factor)
        self.to_hidden_and_f_i_gate = Linear(dim, dim_inner * 3, bias = False)
        self.to_out = Linear(dim_inner, dim, bias = False) if expansion_factor != 1. else Identity()

    def forward(self, x, prev_hidden = None, return_next_prev_hidden = False):
        seq_len = x.shape[1]
        hidden, f_gate, i_gate = self.to_hidden_and_f_i_gate(x).chunk(3, dim = -1)

        if seq_len == 1:
            # handle sequential

            hidden = g(hidden)
            f_gate = f_gate.sigmoid()
            i_gate = i_gate.sigmoid()
            f_gate_prime = f_gate / (f_gate + i_gate)
            i_gate_prime = i_gate / (f_gate + i_gate)
            out = (prev_hidden * f_gate_prime + hidden * i_gate_prime) if exists(prev_hidden) else (hidden * i_gate_prime)
        else:
            # parallel

            diff = F.softplus(-f_gate) - F.softplus(-i_gate)

            log_f = -F.softplus(diff)
            log_i = -F.softplus(-diff)

            log_h_0 = log(prev_hidden) if exists(prev_hidden) else None

            log_tilde_h = log_g(hidden)
            log_values = log_i + log_tilde_h

            if exists(prev_hidden):
                log_values = torch.cat((log_h_0, log_values), dim = 1)
                log_f = F.pad(log_f, (0, 0, 1, 0))

            out = heinsen_associative_scan_log(log_f, log_values)
            out = out[:, -seq_len:]

        next_prev_hidden = out[:, -1:]

        out = self.to_out(out)

        if not return_next_prev_hidden:
            return out

        return out, next_prev_hidden


# minGRULM.py

class CausalDepthWiseConv1d(Module):
    def __init__(self, dim, kernel_size):
        super().__init__()
        self.kernel_size = kernel_size
        self.net = nn.Sequential(
            nn.Conv1d(dim, dim, kernel_size = kernel_size, groups = dim),
            nn.Conv1d(dim, dim, kernel_size = 1)
        )

    def forward(self, x):
        x = x.transpose(1, 2) # b n d -> b d n
        x = F.pad(x, (self.kernel_size - 1, 0), value = 0.)
        x = self.net(x)
        return x.transpose(1, 2) # b d n -> b n d


def FeedForward(dim, mult = 4):
    dim_inner = int(dim * mult)
    return nn.Sequential(
        nn.Linear(dim, dim_inner),
        nn.GELU(),
        nn.Linear(dim_inner, dim)
    )


class RMSNorm(Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = dim ** 0.5
        self.gamma = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return F.normalize(x, dim = -1) * self.scale * (self.gamma + 1)


class minGRULM(Module):
    def __init__(
        self,
        *,
        num_tokens,
        dim,
        depth,
        ff_mult = 4,
        min_gru_expansion = 1.5,
        conv_kernel_size = 3,
        enable_conv = False
    ):
        super().__init__()
        self.token_emb = nn.Embedding(num_tokens, dim)

        self.layers = ModuleList([])

        for _ in range(depth):
            self.layers.append(ModuleList([
                CausalDepthWiseConv1d(dim, conv_kernel_size) if enable_conv else None,
                RMSNorm(dim),
                minGRU(dim, expansion_factor = min_gru_expansion),
                RMSNorm(dim),
                FeedForward(dim, mult = ff_mult)
            ]))

        self.norm = RMSNorm(dim)
        self.to_logits = nn.Linear(dim, num_tokens, bias = False)

    def forward(
        self,
        x,
        return_loss = False,
        return_prev_hiddens = False,
        prev_hiddens = None
    ):

        if return_loss:
            x, labels = x[:, :-1], x[:, 1:]

        x = self.token_emb(x)

        # handle previous hiddens, for recurrent decoding

        if exists(prev_hiddens):
            x = x[:, -1:]

        next_prev_hiddens = []
        prev_hiddens = iter(default(prev_hiddens, []))

        for conv, norm, mingru, ff_norm, ff in self.layers:

            # conv

            if exists(conv):
                assert len(list(prev_hiddens)) == 0, 'caching not supported for conv version'
                x = conv(x) + x

            # min gru

            prev_hidden = next(prev_hiddens, None)

            min_gru_out, next_prev_hidden = mingru(
                norm(x),
                prev_hidden,
                return_next_prev_hidden = True
            )

            x = min_gru_out + x
            next_prev_hiddens.append(next_prev_hidden)

            # feedforward

            x = ff(ff_norm(x)) + x

        embed = self.norm(x)
        logits = self.to_logits(embed)

        if not return_loss:
            if not return_prev_hiddens:
                return logits

            return logits, next_prev_hiddens

        loss = F.cross_entropy(
            logits.transpose(1, 2),
            labels
        )

        return loss


# train.py: sampling helpers

def decode_token(token):
    return str(chr(max(32, token)))


def decode_tokens(tokens):
    return "".join(list(map(decode_token, tokens)))


def gumbel_noise(t):
    noise = torch.zeros_like(t).uniform_(0, 1)
    return -log(-log(noise))


def gumbel_sample(t, temperature = 1., dim = -1, keepdim = True):
    return ((t / max(temperature, 1e-10)) + gumbel_noise(t)).argmax(dim = dim, keepdim = keepdim)


def top_k(logits, thres = 0.9):
    k = math.ceil((1 - thres) * logits.shape[-1])
    val, ind = torch.topk(logits, k)
    probs = torch.full_like(logits, float('-inf'))
    probs.scatter_(-1, ind, val)
    return probs


def base_decoding(
    net,
    prompt: torch.Tensor,
    seq_len: int,
    temperature = 1.,
    filter_thres = 0.9,
    should_cache = True
):
    prompt_seq_len, out = prompt.shape[-1], prompt.clone()
    sample_num_times = max(0, seq_len - prompt_seq_len)

    prev_hiddens = None

    for _ in range(sample_num_times):
        logits, next_prev_hiddens = net(out, return_prev_hiddens = True, prev_hiddens = prev_hiddens)
        logits = logits[:, -1]

        if should_cache:
            prev_hiddens = next_prev_hiddens

        logits = top_k(logits, thres = filter_thres)
        sample = gumbel_sample(logits, temperature = temperature, dim = -1)

        out = torch.cat((out, sample), dim = -1)

    return out[..., prompt_seq_len:]


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)

xg = torch.from_numpy(r.normal(size=(2, 5)).astype(np.float32) * 2)
print("g", fmt(g(xg), 5), "log_g", fmt(log_g(xg), 5), torch.allclose(log_g(xg).exp(), g(xg), atol=1e-6))

# the scan against the recurrence h_t = a_t h_{t-1} + b_t
la = torch.from_numpy(-np.abs(r.normal(size=(2, 6, 3))).astype(np.float32))
lb = torch.from_numpy(r.normal(size=(2, 6, 3)).astype(np.float32))
h_scan = heinsen_associative_scan_log(la, lb)
h = torch.zeros(2, 3)
seq = []
for t in range(6):
    h = la[:, t].exp() * h + lb[:, t].exp()
    seq.append(h)
print("scan", fmt(h_scan[1, 5], 3), torch.allclose(h_scan, torch.stack(seq, dim=1), rtol=1e-5))
print("logcumsumexp", fmt(lb.logcumsumexp(dim=1)[0, :, 0], 6),
      fmt(torch.logcumsumexp(torch.tensor([[-float('inf'), 0.0, 1.0], [1e30, 2.0, 3.0]]), dim=1), 6))

# both forms of minGRU and minLSTM agree (the repository's claim)
for cls, kw in ((minGRU, dict(expansion_factor=1.5)), (minGRU, dict()), (minLSTM, dict(expansion_factor=2.)),
                (minLSTM, dict())):
    m = cls(4, **kw)
    load_numpy(m, r)
    x = torch.from_numpy(r.normal(size=(2, 7, 4)).astype(np.float32))
    par, last = m(x, return_next_prev_hidden=True)
    prev, outs = None, []
    for t in range(7):
        o, prev = m(x[:, t:t + 1], prev, return_next_prev_hidden=True)
        outs.append(o)
    seq_out = torch.cat(outs, dim=1)
    # parallel after a prefix: the prefix's hidden state continues the scan
    _, mid = m(x[:, :3], return_next_prev_hidden=True)
    tail = m(x[:, 3:], mid)
    print(cls.__name__, type(m.to_out).__name__, tuple(par.shape), fmt(par[1, 6], 3),
          "parallel == sequential", torch.allclose(par, seq_out, atol=1e-5),
          "resumed", torch.allclose(tail, par[:, 3:], atol=1e-5), fmt(last[0, 0], 2))

# the char LM
num_tokens, SEQ_LEN = 32, 12
model = minGRULM(num_tokens=num_tokens, dim=16, depth=2)
load_numpy(model, r, std=0.2)
print("layers", [type(l).__name__ if l is not None else None for l in model.layers[0]],
      len(list(model.layers[0].children())), len(model.layers[0]))
print("params", sum(p.numel() for p in model.parameters()), [n for n, _ in model.named_parameters()][:5])
conv_lm = minGRULM(num_tokens=num_tokens, dim=8, depth=1, enable_conv=True)
load_numpy(conv_lm, r)
ids = torch.from_numpy(r.integers(0, num_tokens, (2, 9)))
print("conv variant", fmt(conv_lm(ids)[1, 4], 4), f"{conv_lm(ids, return_loss=True).item():.5f}")
# the causal conv: a later token does not change earlier outputs
ids2 = ids.clone()
ids2[:, -1] = (ids2[:, -1] + 1) % num_tokens
print("causal", torch.allclose(conv_lm(ids)[:, :-1], conv_lm(ids2)[:, :-1], atol=1e-6))

text = "the cat sat on the mat. the dog sat on the log. "
vocab = sorted(set(text))
data = np.array([vocab.index(c) for c in text * 3], dtype=np.int64)
starts = r.integers(0, len(data) - SEQ_LEN - 1, (6, 4))

NUM_BATCHES, GRAD_ACCUM_EVERY, LEARNING_RATE = 4, 2, 3e-3
optim = Adam(model.parameters(), lr = LEARNING_RATE)
for i in range(NUM_BATCHES):
    model.train()

    for j in range(GRAD_ACCUM_EVERY):
        data_b = torch.from_numpy(np.stack([data[s:s + SEQ_LEN + 1] for s in starts[i, 2 * j:2 * j + 2]]))
        loss = model(data_b, return_loss = True)
        (loss / GRAD_ACCUM_EVERY).backward()

    print(f"training loss: {loss.item():.3f}")

    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)

    optim.step()
    optim.zero_grad()

model.eval()
prompt = torch.from_numpy(data[None, :6])
with torch.no_grad():
    cached = base_decoding(model, prompt, 14, temperature=0., should_cache=True)
    uncached = base_decoding(model, prompt, 14, temperature=0., should_cache=False)
print("decoded", cached.tolist(), torch.equal(cached, uncached),
      repr("".join(vocab[t] for t in cached[0].tolist())), repr(decode_tokens([10, 65, 98])))
with torch.no_grad():
    lg, hid = model(prompt, return_prev_hiddens=True)
print("hiddens", [tuple(t.shape) for t in hid], fmt(hid[1][0, 0], 4), bool((hid[0] > 0).all()))
print("top_k", top_k(torch.tensor([[1., 5., 3., 2., 4., 0., 9., 8., 7., 6.]]), thres=0.7).tolist())
model.train()


# one training step under torch.compile against the same step eagerly
def train_step(data_b):
    loss = model(data_b, return_loss = True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    optim.step()
    optim.zero_grad()
    return loss


xs = torch.from_numpy(np.stack([data[s:s + SEQ_LEN + 1] for s in starts[0, :3]]))
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optim.state_dict())
eager = [train_step(xs).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optim.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(xs).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
