"""A fuzzer of compiled training steps of random sequence models: RNN /
LSTM (projections) / GRU (layers, bidirectional, batch_first, bias),
MultiheadAttention (bias, add_bias_kv, add_zero_attn, key padding and
causal bool / float masks, averaged or per-head weights), transformer
encoder (pre/post norm, relu/gelu) and decoder layers; four SGD steps
through ``tracec.compile(backend="cpu")`` against the same steps eager,
from equal weights: losses and every parameter must agree.

``tests/test_compiled_fuzzers.py`` replays a few seeds; for a campaign:
``python tests/compiled_seq_fuzz.py FIRST_SEED COUNT``."""
import copy
import sys

import numpy as np
import tracec
nn = tracec.nn


class Net(nn.Module):
    def __init__(self, rng, E, bf):
        super().__init__()
        self.bf = bf
        self.kind = str(rng.choice(["rnn", "mha", "enc", "dec"]))
        self.mask_kind = str(rng.choice(["none", "causal_bool", "causal_float", "kpm", "both"]))
        if self.kind == "rnn":
            cls = [nn.LSTM, nn.GRU, nn.RNN][int(rng.integers(3))]
            kw = {}
            if cls is nn.LSTM and rng.random() < 0.3:
                kw["proj_size"] = 2
            if cls is nn.RNN:
                kw["nonlinearity"] = str(rng.choice(["tanh", "relu"]))
            self.core = cls(E, 5, num_layers=int(rng.integers(1, 3)), bias=bool(rng.random() < 0.8),
                            batch_first=bf, bidirectional=bool(rng.random() < 0.5), **kw)
        elif self.kind == "mha":
            heads = int(rng.choice([h for h in (1, 2, 4) if E % h == 0]))
            self.core = nn.MultiheadAttention(E, heads, batch_first=bf, bias=bool(rng.random() < 0.8),
                                              add_bias_kv=bool(rng.random() < 0.2),
                                              add_zero_attn=bool(rng.random() < 0.2))
            self.avg = bool(rng.random() < 0.5)
        elif self.kind == "enc":
            heads = int(rng.choice([h for h in (1, 2, 4) if E % h == 0]))
            self.core = nn.TransformerEncoder(nn.TransformerEncoderLayer(
                E, heads, dim_feedforward=int(rng.integers(4, 17)), dropout=0.0,
                activation=str(rng.choice(["relu", "gelu"])), batch_first=bf,
                norm_first=bool(rng.random() < 0.5)), num_layers=int(rng.integers(1, 3)),
                enable_nested_tensor=False)
        else:
            heads = int(rng.choice([h for h in (1, 2, 4) if E % h == 0]))
            self.core = nn.TransformerDecoderLayer(E, heads, dim_feedforward=8, dropout=0.0,
                                                   batch_first=bf, norm_first=bool(rng.random() < 0.5))
        self.head = nn.LazyLinear(3)

    def forward(self, x, kpm, causal):
        if self.kind == "rnn":
            out = self.core(x)[0]
        else:
            attn_mask = None if self.mask_kind in ("none", "kpm") else causal
            key_mask = kpm if self.mask_kind in ("kpm", "both") else None
            if self.kind == "mha":
                out, w = self.core(x, x, x, key_padding_mask=key_mask, attn_mask=attn_mask,
                                   need_weights=True, average_attn_weights=self.avg)
                out = out + w.sum() * 0.01
            elif self.kind == "enc":
                out = self.core(x, mask=attn_mask, src_key_padding_mask=key_mask)
            else:
                out = self.core(x, x * 0.5, tgt_mask=attn_mask, memory_key_padding_mask=key_mask)
        return self.head(out).sum(-2 if self.bf else 0)


def run_one(seed):
    rng = np.random.default_rng(seed)
    N, T, E = int(rng.integers(1, 4)), int(rng.integers(1, 7)), int(rng.choice([2, 4, 6, 8]))
    bf = bool(rng.random() < 0.5)
    tracec.manual_seed(seed)
    model = Net(rng, E, bf)
    x = tracec.tensor(rng.standard_normal((N, T, E) if bf else (T, N, E)).astype(np.float32))
    kpm = tracec.tensor(rng.random((N, T)) < 0.3)
    kpm[:, 0] = False    # (a fully masked row is NaN in both)
    causal = tracec.nn.Transformer.generate_square_subsequent_mask(T)
    if model.mask_kind == "causal_bool":
        causal = causal.isinf()
    with tracec.no_grad():
        model(x, kpm, causal)     # materializes the lazy head
    target = tracec.tensor(rng.standard_normal((N, 3)).astype(np.float32))
    models = [model, copy.deepcopy(model)]
    opts = [tracec.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9) for m in models]

    def make(m, o):
        def step(x, kpm, causal, t):
            o.zero_grad()
            loss = nn.functional.mse_loss(m(x, kpm, causal), t)
            loss.backward()
            o.step()
            return loss
        return step
    eager, comp = make(models[0], opts[0]), tracec.compile(make(models[1], opts[1]), backend="cpu")
    bad = []
    first = None
    for k in range(4):
        le = eager(x, kpm, causal, target).item()
        lc = comp(x, kpm, causal, target).item()
        first = le if first is None else first
        if not np.isfinite(le) or abs(le) > 100 * abs(first) + 1:
            return None, None
        if not np.isclose(le, lc, rtol=2e-4, atol=1e-5):
            bad.append((k, "loss", le, lc))
    for (na, pa), (_, pb) in zip(models[0].state_dict().items(), models[1].state_dict().items()):
        a, b = pa.numpy(), pb.numpy()
        if not np.allclose(a, b, rtol=2e-3, atol=2e-4):
            bad.append(("param", na, float(np.abs(a - b).max())))
    if comp.cache_info().hits < 1:
        bad.append(("no native", str(comp.cache_info())[:200]))
    return bad, f"{model.kind} {model.mask_kind} bf={bf} N={N} T={T} E={E} {str(model.core)[:400]}"


if __name__ == "__main__":
    s0, n = int(sys.argv[1]), int(sys.argv[2])
    nbad = ninv = 0
    for seed in range(s0, s0 + n):
        try:
            bad, desc = run_one(seed)
        except Exception as ex:  # noqa
            print("ERROR", seed, type(ex).__name__, str(ex).splitlines()[0][:300], flush=True)
            continue
        if bad is None:
            ninv += 1
            continue
        if bad:
            nbad += 1
            print("MISMATCH", seed, bad[:5], desc.replace("\n", " "), flush=True)
    print("done", s0, n, "mismatches", nbad, "invalid", ninv, flush=True)
