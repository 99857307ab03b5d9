# BlinkDL/ChatRWKV: RWKV_in_150_lines.py (RWKV_RNN as a torch.jit.ScriptModule
# with script_method time_mixing / channel_mixing over a stacked state tensor,
# the exp-based numerically safe WKV recurrence, F.layer_norm with the weights
# of a SimpleNamespace tree built from the torch.load-ed state dict, the
# time_decay = -exp(...) conversion, sample_logits' numpy top-p sampling) and
# BlinkDL/RWKV-LM: RWKV-v4/src/model.py's GPT-mode training model
# (RWKV_TimeMix / RWKV_ChannelMix with their "fancy init", nn.ZeroPad2d((0, 0,
# 1, -1)) time shift, Block with ln0, L2Wrap's autograd.Function pushing logits
# to 0, the WKV CUDA kernel written as its reference loop).  Changes for a CPU
# test: tiny sizes (2 layers, width 16, 8-token training windows), a character tokenizer in
# place of the 20B tokenizer, weights from numpy saved with torch.save and
# loaded back; the training model's init replaced by numpy weights after the
# published init; AdamW.  The training step under torch.compile against the
# same step run eagerly.
import copy
import math
import os
import types

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

np.set_printoptions(precision=4, suppress=True, linewidth=200)

# ---- a character tokenizer standing in for tokenizers' 20B_tokenizer.json ----
VOCAB = sorted(set("\nabcdefghijklmnopqrstuvwxyz ,."))


class Tokenizer:
    class Enc:
        def __init__(self, ids):
            self.ids = ids

    def encode(self, s):
        return Tokenizer.Enc([VOCAB.index(c) for c in s])

    def decode(self, ids):
        return "".join(VOCAB[i] for i in ids)


tokenizer = Tokenizer()

args = types.SimpleNamespace()
args.MODEL_NAME = 'rwkv-tiny'
args.n_layer = 2
args.n_embd = 16

context = "\nin a shocking finding, scientist discovered a herd of dragons"
NUM_TRIALS = 2
LENGTH_PER_TRIAL = 12
TEMPERATURE = 1.0
TOP_P = 0.85

# the checkpoint, from numpy (RWKV-4's names and shapes)
g = np.random.default_rng(0)
V, C = len(VOCAB), args.n_embd
ckpt = {'emb.weight': g.standard_normal((V, C)) * 0.5, 'head.weight': g.standard_normal((V, C)) / 4,
        'ln_out.weight': 1 + 0.1 * g.standard_normal(C), 'ln_out.bias': 0.1 * g.standard_normal(C),
        'blocks.0.ln0.weight': 1 + 0.1 * g.standard_normal(C), 'blocks.0.ln0.bias': 0.1 * g.standard_normal(C)}
for i in range(args.n_layer):
    b = f'blocks.{i}.'
    for ln in ('ln1', 'ln2'):
        ckpt[b + ln + '.weight'] = 1 + 0.1 * g.standard_normal(C)
        ckpt[b + ln + '.bias'] = 0.1 * g.standard_normal(C)
    for nm in ('time_mix_k', 'time_mix_v', 'time_mix_r'):
        ckpt[b + 'att.' + nm] = g.uniform(0, 1, (1, 1, C))
    ckpt[b + 'att.time_decay'] = g.uniform(-3, 1, C)
    ckpt[b + 'att.time_first'] = g.uniform(-1, 1, C)
    for nm in ('key', 'value', 'receptance', 'output'):
        ckpt[b + 'att.' + nm + '.weight'] = g.standard_normal((C, C)) / 4
    ckpt[b + 'ffn.time_mix_k'] = g.uniform(0, 1, (1, 1, C))
    ckpt[b + 'ffn.time_mix_r'] = g.uniform(0, 1, (1, 1, C))
    ckpt[b + 'ffn.key.weight'] = g.standard_normal((4 * C, C)) / 4
    ckpt[b + 'ffn.receptance.weight'] = g.standard_normal((C, C)) / 4
    ckpt[b + 'ffn.value.weight'] = g.standard_normal((C, 4 * C)) / 8
torch.save({k: torch.from_numpy(v).to(torch.bfloat16 if 'time_' not in k else torch.float32)
            for k, v in ckpt.items()}, args.MODEL_NAME + '.pth')


# ---- RWKV_in_150_lines.py ----
class RWKV_RNN(torch.jit.ScriptModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.eval() # set torch to inference mode

        w = torch.load(args.MODEL_NAME + '.pth', map_location='cpu')
        for k in w.keys():
            if      '.time_' in k: w[k] = w[k].squeeze()
            if '.time_decay' in k: w[k] = -torch.exp(w[k].float()) # the real time decay is like e^{-e^x}
            else: w[k] = w[k].float() # convert to f32 type

        self.w = types.SimpleNamespace() # set self.w from w
        self.w.blocks = {}
        for k in w.keys(): # example: "blocks.0.att.time_first" => self.w.blocks[0].att.time_first
            parts = k.split('.')
            last = parts.pop()
            here = self.w
            for p in parts:
                if p.isdigit():
                    p = int(p)
                    if p not in here: here[p] = types.SimpleNamespace()
                    here = here[p]
                else:
                    if not hasattr(here, p): setattr(here, p, types.SimpleNamespace())
                    here = getattr(here, p)
            setattr(here, last, w[k])

    def layer_norm(self, x, w):
        return F.layer_norm(x, (self.args.n_embd,), weight=w.weight, bias=w.bias)

    @torch.jit.script_method
    def channel_mixing(self, x, state, i:int, time_mix_k, time_mix_r, kw, vw, rw):
        xk = x * time_mix_k + state[5*i+0] * (1 - time_mix_k)
        xr = x * time_mix_r + state[5*i+0] * (1 - time_mix_r)
        state[5*i+0] = x
        r = torch.sigmoid(rw @ xr)
        k = torch.square(torch.relu(kw @ xk)) # square relu, primer paper
        return r * (vw @ k)

    @torch.jit.script_method
    def time_mixing(self, x, state, i:int, time_mix_k, time_mix_v, time_mix_r, time_first, time_decay, kw, vw, rw, ow):
        xk = x * time_mix_k + state[5*i+1] * (1 - time_mix_k)
        xv = x * time_mix_v + state[5*i+1] * (1 - time_mix_v)
        xr = x * time_mix_r + state[5*i+1] * (1 - time_mix_r)
        state[5*i+1] = x
        r = torch.sigmoid(rw @ xr)
        k = kw @ xk
        v = vw @ xv

        aa = state[5*i+2]
        bb = state[5*i+3]
        pp = state[5*i+4]
        ww = time_first + k
        qq = torch.maximum(pp, ww)
        e1 = torch.exp(pp - qq)
        e2 = torch.exp(ww - qq)
        a = e1 * aa + e2 * v
        b = e1 * bb + e2
        wkv = a / b
        ww = pp + time_decay
        qq = torch.maximum(ww, k)
        e1 = torch.exp(ww - qq)
        e2 = torch.exp(k - qq)
        state[5*i+2] = e1 * aa + e2 * v
        state[5*i+3] = e1 * bb + e2
        state[5*i+4] = qq
        return ow @ (r * wkv)

    def forward(self, token, state):
        with torch.no_grad():
            if state == None:
                state = torch.zeros(self.args.n_layer * 5, self.args.n_embd)
                for i in range(self.args.n_layer): state[5*i+4] = -1e30 # -infinity

            x = self.w.emb.weight[token]
            x = self.layer_norm(x, self.w.blocks[0].ln0)
            for i in range(self.args.n_layer):
                att = self.w.blocks[i].att
                x = x + self.time_mixing(self.layer_norm(x, self.w.blocks[i].ln1), state, i,
                    att.time_mix_k, att.time_mix_v, att.time_mix_r, att.time_first, att.time_decay,
                    att.key.weight, att.value.weight, att.receptance.weight, att.output.weight)
                ffn = self.w.blocks[i].ffn
                x = x + self.channel_mixing(self.layer_norm(x, self.w.blocks[i].ln2), state, i,
                    ffn.time_mix_k, ffn.time_mix_r,
                    ffn.key.weight, ffn.value.weight, ffn.receptance.weight)

            x = self.w.head.weight @ self.layer_norm(x, self.w.ln_out)
            return x.float(), state


def sample_logits(out, temperature=1.0, top_p=0.8):
    probs = F.softmax(out, dim=-1).numpy()
    sorted_probs = np.sort(probs)[::-1]
    cumulative_probs = np.cumsum(sorted_probs)
    cutoff = float(sorted_probs[np.argmax(cumulative_probs > top_p)])
    probs[probs < cutoff] = 0
    if temperature != 1.0:
        probs = probs.pow(1.0 / temperature)
    probs = probs / np.sum(probs)
    out = np.random.choice(a=len(probs), p=probs)
    return out


print(f'\nUsing CPU. Loading {args.MODEL_NAME} ...')
model = RWKV_RNN(args)
print("isinstance nn.Module", isinstance(model, nn.Module), "decay", model.w.blocks[1].att.time_decay[:3].tolist())

print(f'\nPreprocessing context (slow version. see v2/rwkv/model.py for fast version)')
init_state = None
for token in tokenizer.encode(context).ids:
    init_out, init_state = model.forward(token, init_state)
print("init_out", [f"{v:.4f}" for v in init_out[:6].tolist()], "state", tuple(init_state.shape),
      f"{init_state[4].max().item():.4f}", f"{init_state[2].abs().sum().item():.4f}")

np.random.seed(42)
for TRIAL in range(NUM_TRIALS):
    print(f'\n\n--[ Trial {TRIAL} ]-----------------', repr(context), end="")
    all_tokens = []
    out_last = 0
    out, state = init_out.clone(), init_state.clone()
    for i in range(LENGTH_PER_TRIAL):
        token = sample_logits(out, TEMPERATURE, TOP_P)
        all_tokens += [token]
        tmp = tokenizer.decode(all_tokens[out_last:])
        if '\ufffd' not in tmp: # only print when we have a valid utf-8 string
            print(tmp, end="", flush=True)
            out_last = i + 1
        out, state = model.forward(token, state)
print('\n')

# greedy decoding
out, state = init_out.clone(), init_state.clone()
greedy = []
for i in range(8):
    token = int(torch.argmax(out))
    greedy.append(token)
    out, state = model.forward(token, state)
print("greedy", repr(tokenizer.decode(greedy)), f"{out.max().item():.4f}")


# ---- RWKV-LM RWKV-v4/src/model.py (GPT mode, training) ----
RWKV_HEAD_QK_DIM = 0


def RUN_CUDA(B, T, C, w, u, k, v):
    # wkv_cuda.forward(B, T, C, -exp(w), u, k, v): the kernel's loop, in PyTorch
    w = -torch.exp(w.contiguous())
    aa = torch.zeros(B, C)
    bb = torch.zeros(B, C)
    pp = torch.full((B, C), -1e38)
    y = []
    for t in range(T):
        kk = k[:, t]
        vv = v[:, t]
        ww = u + kk
        p = torch.maximum(pp, ww)
        e1 = torch.exp(pp - p)
        e2 = torch.exp(ww - p)
        y.append((e1 * aa + e2 * vv) / (e1 * bb + e2))
        ww = w + pp
        p = torch.maximum(ww, kk)
        e1 = torch.exp(ww - p)
        e2 = torch.exp(kk - p)
        aa = e1 * aa + e2 * vv
        bb = e1 * bb + e2
        pp = p
    return torch.stack(y, dim=1)


class RWKV_TimeMix(torch.jit.ScriptModule):
    def __init__(self, config, layer_id):
        super().__init__()
        self.layer_id = layer_id
        self.ctx_len = config.ctx_len
        self.n_embd = config.n_embd

        attn_sz = config.n_embd

        with torch.no_grad(): # fancy init
            ratio_0_to_1 = (layer_id / (config.n_layer - 1)) # 0 to 1
            ratio_1_to_almost0 = (1.0 - (layer_id / config.n_layer)) # 1 to ~0

            # fancy time_decay
            decay_speed = torch.ones(attn_sz)
            for h in range(attn_sz):
                decay_speed[h] = -5 + 8 * (h / (attn_sz-1)) ** (0.7 + 1.3 * ratio_0_to_1)
            self.time_decay = nn.Parameter(decay_speed)
            # print(layer_id, self.time_decay.flatten()[:3].cpu().numpy(), '...', self.time_decay.flatten()[-3:].cpu().numpy())

            # fancy time_first
            zigzag = (torch.tensor([(i+1)%3 - 1 for i in range(attn_sz)]) * 0.5)
            self.time_first = nn.Parameter(torch.ones(attn_sz) * math.log(0.3) + zigzag)

            # fancy time_mix
            x = torch.ones(1, 1, config.n_embd)
            for i in range(config.n_embd):
                x[0, 0, i] = i / config.n_embd
            self.time_mix_k = nn.Parameter(torch.pow(x, ratio_1_to_almost0))
            self.time_mix_v = nn.Parameter(torch.pow(x, ratio_1_to_almost0) + 0.3 * ratio_0_to_1)
            self.time_mix_r = nn.Parameter(torch.pow(x, 0.5 * ratio_1_to_almost0))

        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))

        self.key = nn.Linear(config.n_embd, attn_sz, bias=False)
        self.value = nn.Linear(config.n_embd, attn_sz, bias=False)
        self.receptance = nn.Linear(config.n_embd, attn_sz, bias=False)

        self.output = nn.Linear(attn_sz, config.n_embd, bias=False)

        self.key.scale_init = 0
        self.receptance.scale_init = 0
        self.output.scale_init = 0

    @torch.jit.script_method
    def jit_func(self, x):

        # Mix x with the previous timestep to produce xk, xv, xr
        xx = self.time_shift(x)
        xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
        xv = x * self.time_mix_v + xx * (1 - self.time_mix_v)
        xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)

        # Use xk, xv, xr to produce k, v, r
        k = self.key(xk)
        v = self.value(xv)
        r = self.receptance(xr)
        sr = torch.sigmoid(r)

        return sr, k, v

    def forward(self, x):
        B, T, C = x.size() # x = (Batch,Time,Channel)

        sr, k, v = self.jit_func(x)

        rwkv = sr * RUN_CUDA(B, T, C, self.time_decay, self.time_first, k, v)
        rwkv = self.output(rwkv)
        return rwkv


class RWKV_ChannelMix(torch.jit.ScriptModule):
    def __init__(self, config, layer_id):
        super().__init__()
        self.layer_id = layer_id

        self.time_shift = nn.ZeroPad2d((0, 0, 1, -1))

        with torch.no_grad(): # fancy init of time_mix
            ratio_1_to_almost0 = (1.0 - (layer_id / config.n_layer)) # 1 to ~0

            x = torch.ones(1, 1, config.n_embd)
            for i in range(config.n_embd):
                x[0, 0, i] = i / config.n_embd

            self.time_mix_k = nn.Parameter(torch.pow(x, ratio_1_to_almost0))
            self.time_mix_r = nn.Parameter(torch.pow(x, ratio_1_to_almost0))

        hidden_sz = 4 * config.n_embd
        self.key = nn.Linear(config.n_embd, hidden_sz, bias=False)
        self.receptance = nn.Linear(config.n_embd, config.n_embd, bias=False)
        self.value = nn.Linear(hidden_sz, config.n_embd, bias=False)

        self.value.scale_init = 0
        self.receptance.scale_init = 0

    @torch.jit.script_method
    def forward(self, x):
        xx = self.time_shift(x)
        xk = x * self.time_mix_k + xx * (1 - self.time_mix_k)
        xr = x * self.time_mix_r + xx * (1 - self.time_mix_r)

        k = self.key(xk)
        k = torch.square(torch.relu(k))
        kv = self.value(k)

        rkv = torch.sigmoid(self.receptance(xr)) * kv
        return rkv


class GPTConfig:
    def __init__(self, vocab_size, ctx_len, **kwargs):
        self.vocab_size = vocab_size
        self.ctx_len = ctx_len
        for k, v in kwargs.items():
            setattr(self, k, v)


class Block(nn.Module):
    def __init__(self, config, layer_id):
        super().__init__()
        self.config = config
        self.layer_id = layer_id

        self.ln1 = nn.LayerNorm(config.n_embd)
        self.ln2 = nn.LayerNorm(config.n_embd)

        if self.layer_id == 0:
            self.ln0 = nn.LayerNorm(config.n_embd)

        if self.layer_id == 0 and self.config.model_type == 'RWKV-ffnPre':
            self.ffnPre = RWKV_ChannelMix(config, 0)
        else:
            self.att = RWKV_TimeMix(config, layer_id)

        self.ffn = RWKV_ChannelMix(config, layer_id)

    def forward(self, x):
        if self.layer_id == 0:
            x = self.ln0(x)
        if self.layer_id == 0 and self.config.model_type == 'RWKV-ffnPre':
            x = x + self.ffnPre(self.ln1(x))  # better in some cases
        else:
            x = x + self.att(self.ln1(x))
        x = x + self.ffn(self.ln2(x))
        return x


class L2Wrap(torch.autograd.Function):
    @staticmethod
    def forward(ctx, loss, y):
        ctx.save_for_backward(y)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        y = ctx.saved_tensors[0]
        # to encourage the logits to be close to 0
        factor = 1e-4 / (y.shape[0] * y.shape[1])
        maxx, ids = torch.max(y, -1, keepdim=True)
        gy = torch.zeros_like(y)
        gy.scatter_(-1, ids, maxx * factor)
        return (grad_output, gy)


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.step = 0
        self.config = config

        self.emb = nn.Embedding(config.vocab_size, config.n_embd)

        self.blocks = nn.Sequential(*[Block(config, i)
                                    for i in range(config.n_layer)])

        self.ln_out = nn.LayerNorm(config.n_embd)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

        self.ctx_len = config.ctx_len

    def get_ctx_len(self):
        return self.ctx_len

    def forward(self, idx, targets=None):
        idx = idx.to(self.emb.weight.device)

        self.step += 1
        B, T = idx.size()
        assert T <= self.ctx_len, "Cannot forward, because len(input) > model ctx_len."

        x = self.emb(idx)
        x = self.blocks(x)
        x = self.ln_out(x)

        x = self.head(x)

        loss = None
        if targets is not None:
            loss = F.cross_entropy(x.view(-1, x.size(-1)), targets.to(x.device).view(-1))

        return L2Wrap.apply(loss, x)


config = GPTConfig(V, 8, model_type='RWKV', n_layer=2, n_embd=16)
torch.manual_seed(0)
gpt = GPT(config)
att0, att1 = gpt.blocks[0].att, gpt.blocks[1].att
print("fancy init", [f"{v:.4f}" for v in att1.time_decay[[0, 7, 15]].tolist()],
      [f"{v:.4f}" for v in att0.time_first[:4].tolist()], [f"{v:.4f}" for v in att1.time_mix_v[0, 0, :3].tolist()],
      f"{gpt.blocks[1].ffn.time_mix_r.sum().item():.4f}")
x = torch.arange(6.).view(1, 3, 2)
print("ZeroPad2d((0, 0, 1, -1))", nn.ZeroPad2d((0, 0, 1, -1))(x).tolist())
gw = np.random.default_rng(1)
with torch.no_grad():
    for n, p in gpt.named_parameters():
        if p.dim() == 2:
            p.copy_(torch.from_numpy((gw.standard_normal(tuple(p.shape)) / np.sqrt(p.shape[1])).astype(np.float32)))
print("params", sum(p.numel() for p in gpt.parameters()))

data = np.array(tokenizer.encode(context * 3).ids)
batches = []
for s in range(4):
    ix = gw.integers(0, len(data) - config.ctx_len - 1, 2)
    xb = torch.from_numpy(np.stack([data[i:i + config.ctx_len] for i in ix]))
    yb = torch.from_numpy(np.stack([data[i + 1:i + 1 + config.ctx_len] for i in ix]))
    batches.append((xb, yb))
optimizer = torch.optim.AdamW(gpt.parameters(), lr=8e-4, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01)


def train_step(xb, yb):
    loss = gpt(xb, yb)
    gpt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(gpt.parameters(), 1.0)
    optimizer.step()
    return loss


for s, (xb, yb) in enumerate(batches[:2]):
    loss = train_step(xb, yb)
    print("train", s, f"{loss.item():.5f}", f"time_decay grad {gpt.blocks[0].att.time_decay.grad.norm().item():.5f}",
          f"head grad {gpt.head.weight.grad.norm().item():.5f}")
print("step counter", gpt.step)

state, opt_state = copy.deepcopy(gpt.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(*b).item() for b in batches]
after = copy.deepcopy(gpt.state_dict())
gpt.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(*b).item() for b in batches]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(gpt.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
os.remove(args.MODEL_NAME + '.pth')
