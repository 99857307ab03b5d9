"""Training steps in the style of public code, for
tests/test_compiledleft_sweep_*.py: each case is ``make(lib)`` (``lib`` is
torch or tracec) returning ``(step, run, state)``: ``run(i, fn)`` calls
``fn`` (the step, or tracec.compile(step)) for batch ``i`` and returns the
numbers to compare (losses, norms, learning rates, scales); ``state()``
lists the tensors to compare after the last step (parameters, optimizer
state, BatchNorm running stats, EMA weights)."""
import numpy as np

import tracec

STEPS = 5

def rng_batch(i, *shape, kind="normal", high=None):
    g = np.random.default_rng(100 + i)
    if kind == "int":
        return g.integers(0, high, size=shape)
    return g.standard_normal(shape).astype(np.float32)

def to(lib, a, dtype=None):
    t = lib.tensor(a)
    return t

CASES = {}
def case(f):
    CASES[f.__name__] = f
    return f

@case
def lstm_lm(lib):
    nn = lib.nn
    lib.manual_seed(0)
    class LM(nn.Module):
        def __init__(s):
            super().__init__(); s.emb = nn.Embedding(20, 8); s.rnn = nn.LSTM(8, 16, num_layers=2); s.out = nn.Linear(16, 20)
        def forward(s, x, h):
            o, h = s.rnn(s.emb(x), h); return s.out(o), h
    m = LM(); opt = lib.optim.SGD(m.parameters(), lr=0.5)
    crit = nn.CrossEntropyLoss()
    def step(x, y, h):
        h = tuple(v.detach() for v in h)
        opt.zero_grad()
        out, h = m(x, h)
        loss = crit(out.view(-1, 20), y.view(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 0.25)
        opt.step()
        return loss.detach(), h
    state = {"h": (lib.zeros(2, 3, 16), lib.zeros(2, 3, 16))}
    def run(i, fn):
        x = lib.tensor(rng_batch(i, 5, 3, kind="int", high=20)); y = lib.tensor(rng_batch(i + 50, 5, 3, kind="int", high=20))
        loss, state["h"] = fn(x, y, state["h"])
        return [loss, state["h"][0].sum()]
    return step, run, lambda: list(m.parameters())

@case
def transformer_cls(lib):
    nn = lib.nn
    lib.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False); emb = nn.Embedding(30, 16, padding_idx=0); head = nn.Linear(16, 3)
    params = list(enc.parameters()) + list(emb.parameters()) + list(head.parameters())
    opt = lib.optim.SGD(params, lr=0.05, momentum=0.9)  # (Adam would amplify the key bias's zero gradient's noise)
    def step(tok, mask, y):
        opt.zero_grad()
        h = enc(emb(tok), src_key_padding_mask=mask)
        keep = (~mask).unsqueeze(-1).float()
        pooled = (h * keep).sum(1) / keep.sum(1)
        loss = nn.functional.cross_entropy(head(pooled), y)
        loss.backward(); opt.step()
        return loss.detach()
    def run(i, fn):
        g = np.random.default_rng(i)
        L = g.integers(2, 7, size=4)
        tok = g.integers(1, 30, size=(4, 7)) * (np.arange(7)[None] < L[:, None])
        mask = lib.tensor(tok == 0)
        return [fn(lib.tensor(tok), mask, lib.tensor(g.integers(0, 3, size=4)))]
    return step, run, lambda: params

@case
def cnn_bn_switch(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    opt = lib.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    def train(x, y):
        m.train(); opt.zero_grad(); loss = nn.functional.cross_entropy(m(x), y); loss.backward(); opt.step(); return loss.detach()
    def evaluate(x):
        m.eval()
        with lib.no_grad():
            return m(x).sum()
    fns = {}
    def run(i, fn):
        if "eval" not in fns:
            fns["eval"] = tracec.compile(evaluate) if fn is not train else evaluate
        x = lib.tensor(rng_batch(i, 4, 1, 8, 8)); y = lib.tensor(rng_batch(i, 4, kind="int", high=3))
        return [fn(x, y), fns["eval"](x)]
    return train, run, lambda: list(m.parameters()) + list(m.buffers())

@case
def gan(lib):
    nn = lib.nn
    lib.manual_seed(0)
    G = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 6), nn.Tanh())
    D = nn.Sequential(nn.Linear(6, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    oG = lib.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999)); oD = lib.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    def step(real, z):
        fake = G(z)
        oD.zero_grad()
        ones = lib.ones(real.shape[0], 1); zeros = lib.zeros(real.shape[0], 1)
        lD = bce(D(real), ones) + bce(D(fake.detach()), zeros)
        lD.backward(); oD.step()
        oG.zero_grad()
        lG = bce(D(fake), ones); lG.backward(); oG.step()
        return lD.detach(), lG.detach()
    def run(i, fn):
        return list(fn(lib.tensor(rng_batch(i, 8, 6)), lib.tensor(rng_batch(i + 9, 8, 4))))
    return step, run, lambda: list(G.parameters()) + list(D.parameters())

@case
def grad_accum(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.GELU(), nn.Linear(8, 1)); opt = lib.optim.Adam(m.parameters(), lr=1e-2)
    accum = 3
    def step(x, y, i):
        loss = nn.functional.mse_loss(m(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            opt.step(); opt.zero_grad()
        return loss.detach()
    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, 1)), i)]
    return step, run, lambda: list(m.parameters())

@case
def clip_sched(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2)); opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=20)
    def step(x, y):
        opt.zero_grad(); loss = nn.functional.cross_entropy(m(x), y); loss.backward()
        norm = nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        nn.utils.clip_grad_value_(m.parameters(), 0.1)
        opt.step(); sched.step()
        return loss.detach(), norm
    def run(i, fn):
        out = list(fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, kind="int", high=2))))
        return out + [opt.param_groups[0]["lr"], opt.param_groups[0]["momentum"]]
    return step, run, lambda: list(m.parameters())

@case
def sched_outside(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Linear(5, 2); opt = lib.optim.Adam(m.parameters(), lr=0.1)
    sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4)
    def step(x, y):
        opt.zero_grad(); loss = nn.functional.cross_entropy(m(x), y); loss.backward(); opt.step(); return loss.detach()
    def run(i, fn):
        r = fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, kind="int", high=2)))
        sched.step()
        return [r, opt.param_groups[0]["lr"]]
    return step, run, lambda: list(m.parameters()) + [opt.state[p]["exp_avg_sq"] for p in m.parameters()]

@case
def grad_scaler(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1)); opt = lib.optim.SGD(m.parameters(), lr=0.1)
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=2)
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(m(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        scaler.step(opt); scaler.update()
        return loss.detach()
    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, 1))), scaler.get_scale()]
    return step, run, lambda: list(m.parameters())

@case
def ema(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.Linear(8, 1)); opt = lib.optim.SGD(m.parameters(), lr=0.1)
    import copy
    e = copy.deepcopy(m)
    for p in e.parameters(): p.requires_grad_(False)
    def step(x, y):
        opt.zero_grad(); loss = nn.functional.mse_loss(m(x), y); loss.backward(); opt.step()
        with lib.no_grad():
            for pe, pm in zip(e.parameters(), m.parameters()):
                pe.mul_(0.9).add_(pm, alpha=0.1)
            for be, bm in zip(e.buffers(), m.buffers()):
                be.copy_(bm)
        return loss.detach()
    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, 1)))]
    return step, run, lambda: list(e.parameters()) + list(e.buffers()) + list(m.buffers())

@case
def training_branch(lib):
    nn = lib.nn
    lib.manual_seed(0)
    class M(nn.Module):
        def __init__(s):
            super().__init__(); s.l = nn.Linear(5, 3); s.aux = nn.Linear(5, 3)
        def forward(s, x):
            y = s.l(x)
            if s.training:
                return y, s.aux(x)
            return y
    m = M(); opt = lib.optim.RMSprop(m.parameters(), lr=1e-2)
    def step(x, y):
        m.train(); opt.zero_grad(); out, aux = m(x)
        loss = nn.functional.cross_entropy(out, y) + 0.3 * nn.functional.cross_entropy(aux, y)
        loss.backward(); opt.step()
        m.eval()
        with lib.no_grad():
            ev = m(x).argmax(1).eq(y).float().mean()
        return loss.detach(), ev
    def run(i, fn):
        return list(fn(lib.tensor(rng_batch(i, 6, 5)), lib.tensor(rng_batch(i, 6, kind="int", high=3))))
    return step, run, lambda: list(m.parameters())

@case
def item_control(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Linear(5, 1); opt = lib.optim.SGD(m.parameters(), lr=0.1)
    def step(x, y):
        opt.zero_grad(); loss = nn.functional.mse_loss(m(x), y)
        if loss.item() > 1.0:
            loss = loss * 0.5
        loss.backward(); opt.step()
        return loss.detach()
    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, 1) * 2))]
    return step, run, lambda: list(m.parameters())

@case
def weight_tying_adagrad(lib):
    nn = lib.nn
    lib.manual_seed(0)
    emb = nn.Embedding(12, 6); dec = nn.Linear(6, 12, bias=False); dec.weight = emb.weight
    gru = nn.GRU(6, 6, batch_first=True)
    params = list(emb.parameters()) + list(gru.parameters())
    opt = lib.optim.Adagrad(params, lr=0.1)
    def step(x, y):
        opt.zero_grad(); o, _ = gru(emb(x)); loss = nn.functional.cross_entropy(dec(o).reshape(-1, 12), y.reshape(-1)); loss.backward(); opt.step(); return loss.detach()
    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 3, 4, kind="int", high=12)), lib.tensor(rng_batch(i + 1, 3, 4, kind="int", high=12)))]
    return step, run, lambda: params


@case
def plateau_groups(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = lib.optim.AdamW([{"params": m[0].parameters(), "lr": 1e-2}, {"params": m[2].parameters(), "weight_decay": 0.1}], lr=3e-2)
    sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)
    def step(x, y):
        opt.zero_grad(set_to_none=False); loss = nn.functional.smooth_l1_loss(m(x), y); loss.backward(); opt.step(); return loss.detach()
    def run(i, fn):
        l = fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, 1)))
        sched.step(l.item())
        return [l, opt.param_groups[0]["lr"], opt.param_groups[1]["lr"]]
    return step, run, lambda: list(m.parameters()) + [opt.state[p]["exp_avg"] for p in m.parameters()]

@case
def bn_cumulative(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6, momentum=None), nn.ReLU(), nn.Linear(6, 1))
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    def step(x, y):
        opt.zero_grad(); loss = nn.functional.l1_loss(m(x), y); loss.backward(); opt.step(); return loss.detach()
    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, 1))), m[1].num_batches_tracked]
    return step, run, lambda: list(m.parameters()) + list(m.buffers())

@case
def backward_only_compiled(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.SiLU(), nn.Linear(8, 3)); opt = lib.optim.Adam(m.parameters(), lr=1e-2)
    def fwd_bwd(x, y):
        loss = nn.functional.cross_entropy(m(x), y, label_smoothing=0.1)
        loss.backward()
        for p in m.parameters():
            p.grad.data.clamp_(-0.05, 0.05)
        return loss.detach()
    def run(i, fn):
        l = fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, kind="int", high=3)))
        opt.step(); opt.zero_grad()
        return [l]
    return fwd_bwd, run, lambda: list(m.parameters())

@case
def scaler_overflow(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Linear(5, 1); opt = lib.optim.SGD(m.parameters(), lr=0.1)
    scaler = lib.amp.GradScaler("cpu", init_scale=2.0 ** 100, growth_interval=1)
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.mse_loss(m(x), y)
        scaler.scale(loss * 1e10).backward()
        scaler.step(opt); scaler.update()
        return loss.detach()
    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, 1))), scaler.get_scale()]
    return step, run, lambda: list(m.parameters())

@case
def multitask_uncertainty(lib):
    nn = lib.nn
    lib.manual_seed(0)
    trunk = nn.Linear(5, 8); h1 = nn.Linear(8, 1); h2 = nn.Linear(8, 3)
    log_vars = nn.Parameter(lib.zeros(2))
    params = list(trunk.parameters()) + list(h1.parameters()) + list(h2.parameters()) + [log_vars]
    opt = lib.optim.Adam(params, lr=1e-2)
    def step(x, y1, y2):
        opt.zero_grad()
        z = lib.relu(trunk(x))
        l1 = nn.functional.mse_loss(h1(z), y1); l2 = nn.functional.cross_entropy(h2(z), y2)
        losses = lib.stack([l1, l2])
        loss = (lib.exp(-log_vars) * losses + log_vars).sum()
        w = lib.softmax(-losses.detach(), 0)
        loss.backward(); opt.step()
        return loss.detach(), w
    def run(i, fn):
        loss, w = fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, 1)), lib.tensor(rng_batch(i, 4, kind="int", high=3)))
        return [loss, w[0]]
    return step, run, lambda: params

@case
def seq2seq_teacher_forcing(lib):
    import random
    nn = lib.nn
    lib.manual_seed(0)
    enc = nn.GRU(4, 8); dec = nn.GRUCell(4, 8); out = nn.Linear(8, 4)
    params = list(enc.parameters()) + list(dec.parameters()) + list(out.parameters())
    opt = lib.optim.SGD(params, lr=0.1)
    def step(src, tgt):
        opt.zero_grad()
        _, h = enc(src); h = h[0]
        inp = lib.zeros(src.shape[1], 4); loss = 0
        use_tf = random.random() < 0.5
        for t in range(tgt.shape[0]):
            h = dec(inp, h); pred = out(h)
            loss = loss + nn.functional.mse_loss(pred, tgt[t])
            inp = tgt[t] if use_tf else pred.detach()
        loss.backward(); opt.step()
        return loss.detach()
    def run(i, fn):
        if i == 0: random.seed(0)
        return [fn(lib.tensor(rng_batch(i, 3, 2, 4)), lib.tensor(rng_batch(i + 7, 3, 2, 4)))]
    return step, run, lambda: params

@case
def siamese_triplet(lib):
    nn = lib.nn
    lib.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.PReLU(), nn.Linear(8, 4), nn.LayerNorm(4))
    opt = lib.optim.Adam(net.parameters(), lr=1e-2)
    tl = nn.TripletMarginLoss(margin=0.5); cl = nn.CosineEmbeddingLoss(margin=0.1)
    def step(a, p, n, lab):
        opt.zero_grad()
        ea, ep, en = net(a), net(p), net(n)
        loss = tl(ea, ep, en) + cl(ea, en, lab) + nn.functional.pairwise_distance(ea, ep).mean() * 0.1
        loss.backward(); opt.step()
        return loss.detach()
    def run(i, fn):
        lab = lib.tensor(np.where(rng_batch(i, 4) > 0, 1.0, -1.0).astype(np.float32))
        return [fn(lib.tensor(rng_batch(i, 4, 6)), lib.tensor(rng_batch(i + 1, 4, 6)), lib.tensor(rng_batch(i + 2, 4, 6)), lab)]
    return step, run, lambda: list(net.parameters())

@case
def dropout_eval_switch(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.0), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2))
    opt = lib.optim.SGD(m.parameters(), lr=0.1)
    def step(x, y):
        m.eval()   # (dropout off: deterministic, compared with torch)
        opt.zero_grad(); loss = nn.functional.cross_entropy(m(x), y); loss.backward(); opt.step(); return loss.detach()
    def run(i, fn):
        r = fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, kind="int", high=2)))
        m.train()
        return [r, float(m.training)]
    return step, run, lambda: list(m.parameters())

@case
def wgan_gp(lib):
    nn = lib.nn
    lib.manual_seed(0)
    D = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)); opt = lib.optim.Adam(D.parameters(), lr=1e-3, betas=(0.0, 0.9))
    def step(real, fake, alpha):
        opt.zero_grad()
        inter = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        out = D(inter)
        g, = lib.autograd.grad(out, inter, grad_outputs=lib.ones_like(out), create_graph=True)
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss = D(fake).mean() - D(real).mean() + 10 * gp
        loss.backward(); opt.step()
        return loss.detach(), gp.detach()
    def run(i, fn):
        return list(fn(lib.tensor(rng_batch(i, 5, 4)), lib.tensor(rng_batch(i + 3, 5, 4)), lib.tensor(np.abs(rng_batch(i, 5, 1)) % 1)))
    return step, run, lambda: list(D.parameters())

@case
def lbfgs_closure(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Linear(3, 1); opt = lib.optim.LBFGS(m.parameters(), lr=0.5, max_iter=4, history_size=3)
    def step(x, y):
        def closure():
            opt.zero_grad(); loss = nn.functional.mse_loss(m(x), y); loss.backward(); return loss
        return opt.step(closure).detach()
    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 6, 3)), lib.tensor(rng_batch(i, 6, 1)))]
    return step, run, lambda: list(m.parameters())

@case
def embedding_max_norm(lib):
    nn = lib.nn
    lib.manual_seed(0)
    emb = nn.Embedding(10, 4, max_norm=1.0); lin = nn.Linear(4, 1)
    opt = lib.optim.SGD(list(emb.parameters()) + list(lin.parameters()), lr=0.5)
    def step(idx, y):
        opt.zero_grad(); loss = nn.functional.mse_loss(lin(emb(idx)).squeeze(-1), y); loss.backward(); opt.step(); return loss.detach()
    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 5, kind="int", high=10)), lib.tensor(rng_batch(i, 5)))]
    return step, run, lambda: list(emb.parameters()) + list(lin.parameters())

@case
def causal_varlen(lib):
    nn = lib.nn
    lib.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True, activation="gelu")
    emb = nn.Embedding(11, 8); head = nn.Linear(8, 11)
    params = list(layer.parameters()) + list(emb.parameters()) + list(head.parameters())
    opt = lib.optim.SGD(params, lr=0.1)
    def step(tok):
        opt.zero_grad()
        T = tok.shape[1] - 1
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        h = layer(emb(tok[:, :-1]), src_mask=mask, is_causal=True)
        loss = nn.functional.cross_entropy(head(h).reshape(-1, 11), tok[:, 1:].reshape(-1))
        loss.backward(); opt.step(); return loss.detach()
    def run(i, fn):
        T = [5, 5, 7, 4, 7, 6][i]
        return [fn(lib.tensor(rng_batch(i, 2, T, kind="int", high=11)))]
    return step, run, lambda: params

@case
def short_last_batch_bn(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.ReLU(inplace=True), nn.Linear(6, 2))
    opt = lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
    def step(x, y):
        opt.zero_grad(); loss = nn.functional.cross_entropy(m(x), y); loss.backward(); opt.step(); return loss.detach()
    def run(i, fn):
        B = [8, 8, 3, 8, 8, 3][i]
        return [fn(lib.tensor(rng_batch(i, B, 5)), lib.tensor(rng_batch(i, B, kind="int", high=2)))]
    return step, run, lambda: list(m.parameters()) + list(m.buffers())

@case
def weight_norm_param(lib):
    nn = lib.nn
    lib.manual_seed(0)
    lin = nn.utils.parametrizations.weight_norm(nn.Linear(5, 3)); opt = lib.optim.SGD(lin.parameters(), lr=0.1)
    def step(x, y):
        opt.zero_grad(); loss = nn.functional.cross_entropy(lin(x), y); loss.backward(); opt.step(); return loss.detach()
    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, kind="int", high=3))), lin.weight.sum()]
    return step, run, lambda: list(lin.parameters())

@case
def autocast_bf16(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2)); opt = lib.optim.SGD(m.parameters(), lr=0.1)
    def step(x, y):
        opt.zero_grad()
        with lib.autocast("cpu", dtype=lib.bfloat16):
            out = m(x)
            loss = nn.functional.cross_entropy(out, y)
        loss.backward(); opt.step(); return loss.detach().float()
    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, kind="int", high=2)))]
    return step, run, lambda: list(m.parameters())


@case
def dqn_numpy_batch(lib):
    nn = lib.nn
    lib.manual_seed(0)
    q = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    target = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    target.load_state_dict(q.state_dict())
    opt = lib.optim.Adam(q.parameters(), lr=1e-3)
    gamma = 0.99

    def step(obs, act, rew, nxt, done):
        o = lib.as_tensor(obs, dtype=lib.float32)
        a = lib.as_tensor(act, dtype=lib.int64)
        with lib.no_grad():
            tgt = lib.as_tensor(rew, dtype=lib.float32) + gamma * target(
                lib.as_tensor(nxt, dtype=lib.float32)).max(1).values * (
                1 - lib.as_tensor(done, dtype=lib.float32))
        qa = q(o).gather(1, a.unsqueeze(1)).squeeze(1)
        loss = nn.functional.smooth_l1_loss(qa, tgt)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(q.parameters(), 10.0)
        opt.step()
        return loss.detach()

    def run(i, fn):
        g = np.random.default_rng(i)
        r = fn(g.standard_normal((8, 4)), g.integers(0, 2, 8), g.standard_normal(8),
               g.standard_normal((8, 4)), (g.random(8) < 0.1).astype(np.float32))
        if i % 2 == 1:
            target.load_state_dict(q.state_dict())
        return [r]
    return step, run, lambda: list(q.parameters()) + list(target.parameters())


@case
def ppo_minibatch(lib):
    nn = lib.nn
    lib.manual_seed(0)
    pi = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    v = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    params = list(pi.parameters()) + list(v.parameters())
    opt = lib.optim.Adam(params, lr=3e-4, eps=1e-5)
    g0 = np.random.default_rng(0)
    data = {"obs": g0.standard_normal((16, 4)).astype(np.float32), "act": g0.integers(0, 3, 16),
            "logp": np.log(np.full(16, 1 / 3, dtype=np.float32)),
            "adv": g0.standard_normal(16).astype(np.float32),
            "ret": g0.standard_normal(16).astype(np.float32)}

    def step(obs, act, old_logp, adv, ret, clip):
        dist = lib.distributions.Categorical(logits=pi(obs))
        logp = dist.log_prob(act)
        ratio = (logp - old_logp).exp()
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg = -lib.min(ratio * adv, lib.clamp(ratio, 1 - clip, 1 + clip) * adv).mean()
        vl = 0.5 * (v(obs).squeeze(-1) - ret).pow(2).mean()
        loss = pg + 0.5 * vl - 0.01 * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()
        return loss.detach()

    def run(i, fn):
        idx = np.random.default_rng(i).permutation(16)[:8]
        b = {k: lib.from_numpy(np.ascontiguousarray(a[idx])) for k, a in data.items()}
        return [fn(b["obs"], b["act"], b["logp"], b["adv"], b["ret"], 0.2 - 0.01 * i)]
    return step, run, lambda: params


@case
def distill_kl(lib):
    nn = lib.nn
    lib.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    student = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4))
    opt = lib.optim.SGD(student.parameters(), lr=0.1, momentum=0.9)
    T = 3.0

    def step(x, y):
        with lib.no_grad():
            t = teacher(x)
        s_ = student(x)
        kd = nn.functional.kl_div(nn.functional.log_softmax(s_ / T, -1),
                                  nn.functional.softmax(t / T, -1), reduction="batchmean") * T * T
        loss = 0.7 * kd + 0.3 * nn.functional.cross_entropy(s_, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 5, 6)), lib.tensor(rng_batch(i, 5, kind="int", high=4)))]
    return step, run, lambda: list(student.parameters())


@case
def simclr_ntxent(lib):
    nn = lib.nn
    lib.manual_seed(0)
    # (no bias before BatchNorm: its gradient is 0, and Adam would amplify its rounding)
    enc = nn.Sequential(nn.Linear(6, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 8))
    opt = lib.optim.AdamW(enc.parameters(), lr=1e-3, weight_decay=1e-4)
    tau = 0.5

    def step(x1, x2):
        z = nn.functional.normalize(lib.cat([enc(x1), enc(x2)]), dim=1)
        n = x1.shape[0]
        sim = z @ z.t() / tau
        sim = sim.masked_fill(lib.eye(2 * n, dtype=lib.bool), float("-inf"))
        target = lib.cat([lib.arange(n, 2 * n), lib.arange(0, n)])
        loss = nn.functional.cross_entropy(sim, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 6, 6)), lib.tensor(rng_batch(i + 20, 6, 6)))]
    return step, run, lambda: list(enc.parameters()) + list(enc.buffers())


@case
def focal_mixup(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = lib.optim.SGD(m.parameters(), lr=0.1, weight_decay=5e-4)
    alpha_w = lib.tensor([0.25, 0.5, 0.25])

    def focal(logits, y, gamma=2.0):
        logp = nn.functional.log_softmax(logits, -1)
        lp = logp.gather(1, y.unsqueeze(1)).squeeze(1)
        return (-alpha_w[y] * (1 - lp.exp()) ** gamma * lp).mean()

    def step(x, y, perm, lam):
        xm = lam * x + (1 - lam) * x[perm]
        out = m(xm)
        loss = lam * focal(out, y) + (1 - lam) * focal(out, y[perm])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    def run(i, fn):
        g = np.random.default_rng(i)
        lam = float(g.beta(0.4, 0.4))
        return [fn(lib.tensor(rng_batch(i, 6, 5)), lib.tensor(rng_batch(i, 6, kind="int", high=3)),
                   lib.tensor(g.permutation(6)), lam)]
    return step, run, lambda: list(m.parameters())


@case
def moduledict_tasks(lib):
    nn = lib.nn
    lib.manual_seed(0)
    trunk = nn.Linear(5, 8)
    heads = nn.ModuleDict({"a": nn.Linear(8, 2), "b": nn.Linear(8, 3)})
    params = list(trunk.parameters()) + list(heads.parameters())
    opt = lib.optim.Adam(params, lr=1e-2)

    def step(x, y, task):
        out = heads[task](lib.relu(trunk(x)))
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    def run(i, fn):
        task = "ab"[i % 2]
        return [fn(lib.tensor(rng_batch(i, 4, 5)),
                   lib.tensor(rng_batch(i, 4, kind="int", high=2 if task == "a" else 3)), task)]
    return step, run, lambda: params


@case
def freeze_unfreeze(lib):
    nn = lib.nn
    lib.manual_seed(0)
    backbone = nn.Linear(5, 8)
    head = nn.Linear(8, 2)
    opt = lib.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
    for p in backbone.parameters():
        p.requires_grad_(False)

    def step(x, y):
        loss = nn.functional.cross_entropy(head(lib.relu(backbone(x))), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    def run(i, fn):
        if i == 2:      # unfreeze the backbone, with its own group
            for p in backbone.parameters():
                p.requires_grad_(True)
            opt.add_param_group({"params": list(backbone.parameters()), "lr": 0.01})
        for g in opt.param_groups:      # a hand-written decay
            g["lr"] = g["lr"] * 0.9
        return [fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, kind="int", high=2)))]
    return step, run, lambda: list(backbone.parameters()) + list(head.parameters())


WARMUP = {"steps": 3}


@case
def lambda_warmup(lib):
    nn = lib.nn
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.GELU(approximate="tanh"), nn.Linear(8, 1))
    opt = lib.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.05)
    sched = lib.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / WARMUP["steps"]))

    def step(x, y):
        loss = nn.functional.mse_loss(m(x), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 1.0, foreach=True)
        opt.step()
        sched.step()
        return loss.detach()

    def run(i, fn):
        return [fn(lib.tensor(rng_batch(i, 4, 5)), lib.tensor(rng_batch(i, 4, 1))),
                opt.param_groups[0]["lr"]]
    return step, run, lambda: list(m.parameters())

#: cases whose step decides on tensor data (``loss.item() > 1``, LBFGS's
#: convergence tests): compiled with ``fallback="eager"``, torch.compile's
#: default
EAGER_FALLBACK = {"item_control", "lbfgs_closure"}


def go(name, lib, compiled):
    """``(numbers per step, final state arrays, the function called)``."""
    step, run, state = CASES[name](lib)
    fn = tracec.compile(step, **({"fallback": "eager"} if name in EAGER_FALLBACK else {})) \
        if compiled else step
    outs = []
    for i in range(STEPS):
        outs.append([float(v.detach()) if hasattr(v, 'detach') else float(v) for v in run(i, fn)])
    return np.array(outs), [s.detach().numpy().copy() for s in state()], fn
