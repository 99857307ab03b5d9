"""Runs Meta's llama model.py at a tiny size and saves what it computes.

``python check.py OUT.npz WEIGHTS.npz MODE``: under real torch (MODE eager)
the freshly initialized weights are written to WEIGHTS.npz; under tracec they
are read from it, so both compute with the same numbers.  MODE "cpu" or
"interp" runs the forward passes and the training step under
``torch.compile(backend=MODE)`` (tracec's).
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

from generation import generate, sample_top_p
from model import ModelArgs, Transformer, apply_rotary_emb, precompute_freqs_cis

out_path, weights_path, mode = sys.argv[1:4]
IS_TORCH = torch.__name__ == "torch"
R = {}

args = ModelArgs(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=40, multiple_of=16,
                 ffn_dim_multiplier=1.3, norm_eps=1e-5, max_batch_size=3, max_seq_len=16)
torch.manual_seed(0)
model = Transformer(args)
if IS_TORCH:
    np.savez(weights_path, **{k: v.detach().numpy() for k, v in model.state_dict().items()})
else:
    w = np.load(weights_path)
    model.load_state_dict({k: torch.tensor(w[k]) for k in w.files})

R["hidden"] = np.array([model.layers[0].feed_forward.w1.weight.shape[0]])
R["freqs_cis"] = torch.view_as_real(model.freqs_cis).numpy()

# RoPE alone: the complex rotation and its gradient
rng = np.random.default_rng(0)
xq = torch.tensor(rng.standard_normal((2, 5, 4, 8)).astype(np.float32), requires_grad=True)
xk = torch.tensor(rng.standard_normal((2, 5, 2, 8)).astype(np.float32), requires_grad=True)
fc = precompute_freqs_cis(8, 10)[2:7]


def rope(xq, xk):
    q, k = apply_rotary_emb(xq, xk, freqs_cis=fc)
    loss = (q * torch.arange(8.0)).sum() + (k ** 2).sum()
    loss.backward()
    return q, k, loss


if mode != "eager":
    rope = torch.compile(rope, backend=mode, fullgraph=True)
for again in ("", ".again"):
    xq.grad = xk.grad = None
    q, k, _ = rope(xq, xk)
    R["rope_q" + again], R["rope_k" + again] = q.detach().numpy(), k.detach().numpy()
    R["rope_gq" + again], R["rope_gk" + again] = xq.grad.numpy(), xk.grad.numpy()

tokens = torch.tensor(rng.integers(0, args.vocab_size, (2, 8)))
targets = torch.tensor(rng.integers(0, args.vocab_size, (2, 8)))

# inference: the whole prompt, then one token at a time through the KV cache
forward = model.forward
if mode != "eager":
    model.forward = torch.compile(model.forward, backend=mode, fullgraph=True)
# (each twice: compiled, the first call of a signature traces and runs eagerly)
for again in ("", ".again"):
    R["logits" + again] = model(tokens, 0).numpy()
    step_logits = [model(tokens[:, :5], 0).numpy()[:, -1]]
    for pos in range(5, 8):
        step_logits.append(model(tokens[:, pos:pos + 1], pos).numpy()[:, -1])
    R["cached_logits" + again] = np.stack(step_logits, 1)
    R["cache_k0" + again] = model.layers[0].attention.cache_k[:2, :8].numpy()

# greedy generation (temperature 0) with prompts of different lengths
prompts = [[3, 1, 4, 1, 5], [9, 2, 6], [5, 3, 5, 8, 9, 7, 9]]
for again in ("", ".again"):
    out, lp = generate(model, prompts, max_gen_len=2, pad_id=-1, eos_id=39, temperature=0.0,
                       logprobs=True, echo=True)
    width = max(map(len, out))
    R["generated" + again] = np.array([t + [-2] * (width - len(t)) for t in out])
    R["logprobs" + again] = np.array([p + [9.0] * (width - len(p)) for p in lp],
                                     dtype=np.float32)
if mode != "eager":
    info = model.forward.cache_info()
    print("forward: traces", info.traces, "hits", info.hits)
model.forward = forward

# top-p sampling with p so small that only the most likely token is kept
probs = torch.softmax(torch.tensor(rng.standard_normal((3, 40)).astype(np.float32)), dim=-1)
R["top_p"] = sample_top_p(probs, 1e-4).numpy()

# training: Transformer.forward without its inference_mode decorator
opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)


def train_step(tokens, targets):
    logits = Transformer.forward.__wrapped__(model, tokens, 0)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


if mode != "eager":
    train_step = torch.compile(train_step, backend=mode, fullgraph=True)
losses = []
for it in range(4):
    for layer in model.layers:   # the cache holds the last step's graph
        layer.attention.cache_k.detach_()
        layer.attention.cache_v.detach_()
    losses.append(train_step(tokens, targets).item())
    if it == 0:
        for n, p in model.named_parameters():
            R["grad." + n] = p.grad.numpy()
R["losses"] = np.array(losses)
if mode != "eager":
    print("rope: traces", rope.cache_info().traces, "hits", rope.cache_info().hits)
    info = train_step.cache_info()
    print("train_step: traces", info.traces, "hits", info.hits, info.reasons)
for n, p in model.named_parameters():
    R["param." + n] = p.detach().numpy()
np.savez(out_path, **R)
print("ok", mode)
