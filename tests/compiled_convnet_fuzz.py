"""A fuzzer of compiled training steps of random conv nets: conv /
transposed conv (kernel, stride, padding and padding_mode, dilation,
groups, bias), batch / group / instance norm, max / avg / adaptive pools
(ceil_mode, count_include_pad), upsampling and activations, then Flatten +
Linear, MSE and SGD with momentum; four steps through
``tracec.compile(backend="cpu")`` against the same steps eager, from equal
weights: losses and every parameter and buffer must agree.  Invalid
configurations and diverging trainings are skipped (``run_one`` gives
None): chaos amplifies rounding.  Adam is not used: it turns the rounding
noise of an exactly-zero gradient (a bias before a norm) into steps.

``tests/test_compiled_fuzzers.py`` replays a few seeds; for a campaign:
``python tests/compiled_convnet_fuzz.py FIRST_SEED COUNT``."""
import copy
import sys

import numpy as np
import tracec
nn = tracec.nn


def layer(rng, c):
    kind = rng.choice(["conv", "conv", "conv", "bn", "act", "act", "maxpool", "avgpool",
                       "convt", "up", "gn", "adapt", "inorm"])
    if kind == "conv":
        k = int(rng.choice([1, 2, 3, 5])); s = int(rng.choice([1, 1, 2])); d = int(rng.choice([1, 1, 2]))
        p = "same" if s == 1 and rng.random() < 0.2 else int(rng.integers(0, 3))
        g = int(rng.choice([g for g in (1, 2, 3, 4) if c % g == 0]))
        co = g * int(rng.integers(1, 4))
        pm = str(rng.choice(["zeros", "zeros", "reflect", "replicate", "circular"])) if p != 0 else "zeros"
        return nn.Conv2d(c, co, k, stride=s, padding=p, dilation=d, groups=g,
                         bias=bool(rng.random() < 0.7), padding_mode=pm), co
    if kind == "convt":
        k = int(rng.choice([1, 2, 3, 4])); s = int(rng.choice([1, 2])); p = int(rng.integers(0, 2))
        op = int(rng.integers(0, s)) if s > 1 else 0
        g = int(rng.choice([g for g in (1, 2) if c % g == 0])); co = g * int(rng.integers(1, 3))
        return nn.ConvTranspose2d(c, co, k, stride=s, padding=p, output_padding=op, groups=g,
                                  bias=bool(rng.random() < 0.5)), co
    if kind == "bn":
        return nn.BatchNorm2d(c, momentum=float(rng.choice([0.1, 0.5])), affine=bool(rng.random() < 0.8)), c
    if kind == "gn":
        g = int(rng.choice([g for g in (1, 2, 4) if c % g == 0]))
        return nn.GroupNorm(g, c), c
    if kind == "inorm":
        return nn.InstanceNorm2d(c, affine=bool(rng.random() < 0.5)), c
    if kind == "act":
        return [nn.ReLU(), nn.GELU(), nn.SiLU(), nn.LeakyReLU(0.1), nn.Tanh(), nn.ELU(), nn.Hardswish(),
                nn.Sigmoid()][int(rng.integers(8))], c
    if kind == "maxpool":
        k = int(rng.choice([2, 3])); s = int(rng.choice([1, 2])); p = int(rng.integers(0, k // 2 + 1))
        return nn.MaxPool2d(k, s, p, ceil_mode=bool(rng.random() < 0.3)), c
    if kind == "avgpool":
        k = int(rng.choice([2, 3])); s = int(rng.choice([1, 2])); p = int(rng.integers(0, k // 2 + 1))
        return nn.AvgPool2d(k, s, p, ceil_mode=bool(rng.random() < 0.3),
                            count_include_pad=bool(rng.random() < 0.5)), c
    if kind == "adapt":
        return (nn.AdaptiveAvgPool2d(int(rng.integers(1, 4))) if rng.random() < 0.6 else
                nn.AdaptiveMaxPool2d(int(rng.integers(1, 4)))), c
    return nn.Upsample(scale_factor=2, mode=str(rng.choice(["nearest", "bilinear"]))), c


def run_one(seed):
    rng = np.random.default_rng(seed)
    n, c = int(rng.integers(1, 4)), int(rng.integers(1, 5))
    h, w = int(rng.integers(5, 13)), int(rng.integers(5, 13))
    tracec.manual_seed(seed)
    layers, cc = [], c
    for _ in range(int(rng.integers(1, 6))):
        m, cc = layer(rng, cc)
        layers.append(m)
    x = tracec.tensor(rng.standard_normal((n, c, h, w)).astype(np.float32))
    body = nn.Sequential(*layers)
    try:
        with tracec.no_grad():
            y = body(x)
    except Exception:
        return None, None   # an invalid configuration
    if y.numel() == 0 or min(y.shape) == 0:
        return None, None
    model = nn.Sequential(body, nn.Flatten(), nn.Linear(y[0].numel(), 3))
    target = tracec.tensor(rng.standard_normal((n, 3)).astype(np.float32))
    models = [model, copy.deepcopy(model)]
    opts = [tracec.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9) for m in models]

    def make(m, o):
        def step(x, t):
            o.zero_grad()
            loss = nn.functional.mse_loss(m(x), t)
            loss.backward()
            o.step()
            return loss
        return step
    eager = make(models[0], opts[0])
    comp = tracec.compile(make(models[1], opts[1]), backend="cpu")
    bad = []
    first = None
    for k in range(4):
        le = eager(x, target).item()
        lc = comp(x, target).item()
        first = le if first is None else first
        if not np.isfinite(le) or abs(le) > 100 * abs(first) + 1:
            return None, None   # training diverged: chaos, not a comparison
        if not np.isclose(le, lc, rtol=2e-4, atol=1e-5):
            bad.append((k, "loss", le, lc))
    for (na, pa), (_, pb) in zip(models[0].state_dict().items(), models[1].state_dict().items()):
        a, b = pa.numpy(), pb.numpy()
        if not np.allclose(a, b, rtol=2e-3, atol=2e-4):
            bad.append(("param", na, float(np.abs(a - b).max())))
    info = comp.cache_info()
    if info.hits < 1:
        bad.append(("no native", str(info)[:200]))
    return bad, str(model)[:1500]


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
