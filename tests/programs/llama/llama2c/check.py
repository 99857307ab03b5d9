"""Runs karpathy's llama2.c model.py at a tiny size and saves what it computes.

``python check.py OUT.npz WEIGHTS.npz MODE``: under real torch (MODE eager)
the freshly initialized weights are written to WEIGHTS.npz; under tracec they
are read from it.  MODE "cpu" or "interp" runs the forward passes and the
training step (train.py's) under ``torch.compile(backend=MODE)``.
"""
import sys

import numpy as np
import torch
import torch.nn.functional as F

from model import ModelArgs, Transformer

out_path, weights_path, mode = sys.argv[1:4]
IS_TORCH = torch.__name__ == "torch"
R = {}

args = ModelArgs(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=48, multiple_of=16,
                 max_seq_len=12, dropout=0.0)
torch.manual_seed(0)
flash = Transformer(args)
# the manual attention path: the model built where F has no scaled_dot_product_attention
sdpa = F.scaled_dot_product_attention
del F.scaled_dot_product_attention
try:
    manual = Transformer(args)
finally:
    F.scaled_dot_product_attention = sdpa
assert flash.layers[0].attention.flash and not manual.layers[0].attention.flash
if IS_TORCH:
    np.savez(weights_path, **{k: v.detach().numpy() for k, v in flash.state_dict().items()})
w = np.load(weights_path)
state = {k: torch.tensor(w[k]) for k in w.files}
flash.load_state_dict(state)
manual.load_state_dict(state, strict=False)
assert flash.tok_embeddings.weight is flash.output.weight

rng = np.random.default_rng(0)
X = torch.tensor(rng.integers(0, args.vocab_size, (3, 10)))
Y = torch.tensor(rng.integers(0, args.vocab_size, (3, 10)))
Y[0, :3] = -1   # ignore_index


def with_loss(model):
    def run(X, Y):
        logits = model(X, Y)
        return logits, model.last_loss   # the attribute the forward sets
    return run


for name, model in (("flash", flash), ("manual", manual)):
    model.eval()
    fwd = model.forward
    loss_fn = with_loss(model)
    if mode != "eager":
        loss_fn = torch.compile(loss_fn, backend=mode, fullgraph=True)
    # (repeated: compiled, the first call of a signature traces and runs eagerly; the
    # second finds last_loss set, no longer None, and traces once more)
    for again in ("", ".again", ".third"):
        with torch.no_grad():
            logits, loss = loss_fn(X, Y)
        R[name + ".logits" + again] = logits.detach().numpy()
        R[name + ".loss" + again] = loss.detach().numpy()
    if mode != "eager":
        model.forward = torch.compile(model.forward, backend=mode, fullgraph=True)
    for again in ("", ".again"):
        with torch.no_grad():
            R[name + ".last_logits" + again] = model(X).numpy()
        # greedy (temperature 0), and top_k=1 sampling (only the argmax survives the crop)
        R[name + ".greedy" + again] = model.generate(X[:, :4], 5, temperature=0.0).numpy()
        R[name + ".top1" + again] = model.generate(X[:, :4], 5, temperature=0.8, top_k=1).numpy()
    sampled = model.generate(X[:, :4], 5, temperature=1.0, top_k=5)
    R[name + ".sampled_ok"] = np.array([sampled.shape == (3, 9),
                                        bool((sampled[:, :4] == X[:, :4]).all())])
    if mode != "eager":
        for f, label in ((loss_fn, "loss"), (model.forward, "forward")):
            info = f.cache_info()
            print(f"{name} {label}: traces {info.traces} hits {info.hits}")
    model.forward = fwd
    model.train()

    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=5e-3,
                                           betas=(0.9, 0.95), device_type="cpu")
    R[name + ".groups"] = np.array([len(g["params"]) for g in optimizer.param_groups])

    def train_step(X, Y):
        # train.py's inner step, gradient accumulation of 1, no scaler
        logits = model(X, Y)
        loss = model.last_loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    if mode != "eager":
        train_step = torch.compile(train_step, backend=mode, fullgraph=True)
    losses = []
    for it in range(4):
        losses.append(train_step(X, Y).item())
        if it == 0:
            for n, p in model.named_parameters():
                R[f"{name}.grad.{n}"] = p.grad.numpy()
        optimizer.zero_grad(set_to_none=True)
    R[name + ".losses"] = np.array(losses)
    if mode != "eager":
        info = train_step.cache_info()
        print(f"{name} train_step: traces {info.traces} hits {info.hits}")
    for n, p in model.named_parameters():
        R[f"{name}.param.{n}"] = p.detach().numpy()
np.savez(out_path, **R)
print("ok", mode)
