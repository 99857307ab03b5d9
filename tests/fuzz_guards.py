"""A fuzzer of what a compiled function depends on besides its arguments'
values, changed BETWEEN calls: Python numbers and flags in globals and
closure cells, module attributes (a float, a bool, ``training`` through
``.train()`` / ``.eval()``, a submodule swapped, a parameter replaced by a
new ``nn.Parameter``, ``requires_grad_`` toggled, a buffer reassigned or
written in place, Dropout's ``p``, BatchNorm's ``momentum``), the
optimizer's hyperparameters (lr, momentum, weight_decay, betas; a new
param group), the arguments' dtype, requires_grad, layout (a transposed or
sliced view), batch size, aliasing (the target the same tensor as the
input), the kind of container holding tensor arguments, int / float /
bool / None / str arguments, a ``no_grad`` / ``enable_grad`` context around
the call, the global RNG reseeded (the program draws with ``randn`` and
dropout), and the default dtype.  Seeds from ``V2`` on also change a
namespace's attribute and the namespace itself, an element of a global
list of tensors, a bias set to None and back, ``requires_grad_`` of a
weight, a tensor hook on it, an LR scheduler stepped, a dict argument's
keys, and pass one tensor at every call, written in place between calls.

Each seed builds one random program (``PROGRAM`` below, exec'd into a fresh
namespace per run, so globals are the run's own) and a schedule of 6 calls
with 0-3 random changes before each.  The schedule runs twice on identical
copies: eagerly and through ``tracec.compile(backend="cpu")``; after every
call the outputs (values, dtype, shape, requires_grad), the module's state
dict, every parameter's grad, the optimizer's state, the argument written in
place, the input's grad and the RNG state must agree.  Draws use the
counter-based stream in both runs (``torch_rng.counter_draws``), so dropout
masks agree bit for bit.  A call that raises must raise in both runs
(a TraceError in the compiled run only is reported as ``refused``, not a
wrong result).

``tests/test_compiled_fuzzers.py`` replays a few seeds; for a campaign:
``python tests/fuzz_guards.py FIRST_SEED COUNT``."""
import linecache
import sys

import numpy as np

import tracec
from tracec import torch_rng

PROGRAM = '''
import types

import tracec
from tracec import nn

G_SCALE = 1.0
G_FLAG = False
G_BIAS = 0
G_T = tracec.zeros(4)
G_CFG = types.SimpleNamespace(scale=1.0, shift=0.0)
G_LIST = [tracec.zeros(4), tracec.zeros(4)]


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.lin = nn.Linear(4, 4)
        self.act = nn.Tanh()
        self.scale = 1.0
        self.flag = False
        self.register_buffer("buf", tracec.zeros(4))
        self.bn = nn.BatchNorm1d(4) if c["bn"] else None
        self.drop = nn.Dropout(0.25) if c["drop"] else None
        self.extra = nn.Parameter(tracec.ones(4) * 0.5) if c["extra"] else None
        self.offset = tracec.zeros(4)

    def forward(self, x):
        h = self.act(self.lin(x)) * self.scale + self.offset
        if self.flag:
            h = h + self.buf
        if self.bn is not None:
            h = self.bn(h)
        if self.drop is not None:
            h = self.drop(h)
        if self.extra is not None:
            h = h * self.extra
        if self.training and self.c["train_branch"]:
            h = h + 0.125
        return h


def build(c, arrays):
    model = Block(c)
    with tracec.no_grad():
        model.lin.weight.copy_(tracec.tensor(arrays["w"]))
        model.lin.bias.copy_(tracec.tensor(arrays["b"]))
    params = [model.lin.weight, model.lin.bias]
    if model.bn is not None:
        params += [model.bn.weight, model.bn.bias]
    opt = None
    if c["opt"] == "sgd":
        opt = tracec.optim.SGD(params, lr=0.1, momentum=0.5, weight_decay=0.01)
    elif c["opt"] == "adam":
        opt = tracec.optim.Adam(params, lr=0.01, weight_decay=0.0)
    sched = tracec.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5) if opt is not None else None
    k = 0.5

    def set_k(v):
        nonlocal k
        k = v

    def step(x, y, ex, acc, n, alpha, flag, mode, maybe):
        h = model(x) * G_SCALE * k + G_T
        if c["v2"]:
            h = h * G_CFG.scale + G_CFG.shift + G_LIST[1]
        if G_FLAG:
            h = h + G_BIAS
        if c["ex"] == "dict":
            h = h + ex["a"] * ex["b"]
        elif c["ex"] != "none":
            h = h + ex[0] * ex[1]
        if c["n_loop"]:
            for _ in range(n):
                h = h * 0.75
        else:
            h = h * n
        h = h * alpha
        if flag:
            h = h.relu() + 0.25
        if maybe is not None:
            h = h + maybe
        if c["factory"]:
            h = h + tracec.ones(4) * 0.5 + tracec.arange(4) * 0.25
        if c["randn"]:
            h = h + tracec.randn(h.shape) * 0.1
        if mode == "sum":
            loss = ((h - y) ** 2).sum()
        else:
            loss = ((h - y) ** 2).mean()
        with tracec.no_grad():
            acc.add_(h.detach().sum(0))
        if c["backward"] and loss.requires_grad:
            loss.backward()
            if opt is not None:
                opt.step()
                opt.zero_grad(set_to_none=c["set_none"])
        return loss, h

    return model, opt, step, set_k, sched
'''

#: (name, needs): between-call changes; ``needs`` a cfg key that must be true
CHANGES = (
    ("g_scale", None), ("g_flag", None), ("g_bias", None), ("closure_k", None),
    ("m_scale", None), ("m_flag", None), ("train", None), ("eval", None), ("swap_act", None),
    ("swap_lin", None), ("new_weight", None), ("bias_rg", None), ("buf_assign", None),
    ("buf_inplace", None), ("drop_p", "drop"), ("bn_momentum", "bn"), ("lr", "opt"),
    ("momentum", "opt"), ("weight_decay", "opt"), ("add_group", "extra"),
    ("ex_dtype", None), ("y_dtype", None), ("x_rg", None), ("x_layout", None), ("batch", None),
    ("alias", None), ("ex_kind", None), ("n", None), ("alpha", None), ("flag", None),
    ("mode", None), ("maybe", None), ("grad_ctx", None), ("reseed", None),
    ("default_dtype", None), ("zero_grad", "backward"), ("maybe_dtype", None),
    ("g_tensor", None), ("g_tensor_inplace", None), ("attr_tensor", None),
    ("param_inplace", None), ("param_data", None), ("grad_set", "backward"), ("hook", None),
    ("double", None), ("opt_reload", "opt"), ("maximize", "opt"), ("nesterov", "opt"),
)
#: changes drawn only by seeds >= V2 (earlier seeds replay as found), whose
#: programs also read a namespace's attributes and a list of tensors
CHANGES2 = CHANGES + (
    ("cfg_obj", None), ("g_list", None), ("bias_none", None), ("sched", "opt"),
    ("weight_rg", None), ("tensor_hook", "backward"), ("dict_key", None), ("x_keep", None),
    ("x_inplace", None), ("cfg_shift", None),
)
V2 = 100_000
ACTS = ("Tanh", "ReLU", "Sigmoid", "GELU", "SiLU")
NCALLS = 6
#: the program's file name (linecache holds its source: errors name lines)
FILENAME = "<fuzz_guards_program>"
linecache.cache[FILENAME] = (len(PROGRAM), None, PROGRAM.splitlines(True), FILENAME)


def make_case(seed):
    rng = np.random.default_rng(seed)
    b = lambda p=0.5: bool(rng.random() < p)   # noqa: E731
    c = {"bn": b(0.3), "drop": b(0.3), "extra": b(0.4), "train_branch": b(0.3),
         "opt": ("none", "sgd", "adam")[int(rng.integers(3))], "backward": b(0.7),
         "set_none": b(), "ex": ("none", "tuple", "list", "dict")[int(rng.integers(4))],
         "n_loop": b(0.3), "factory": b(0.3), "randn": b(0.3), "v2": seed >= V2}
    if c["opt"] != "none":
        c["backward"] = True
    arrays = {"w": (rng.standard_normal((4, 4)) * 0.5).astype(np.float32),
              "b": (rng.standard_normal(4) * 0.1).astype(np.float32)}
    ok = [nm for nm, need in (CHANGES2 if c["v2"] else CHANGES)
          if need is None or c[need] not in (False, "none")]
    plan = []
    for k in range(NCALLS):
        muts = []
        for _ in range(int(rng.integers(0, 4)) if k else 0):
            nm = ok[int(rng.integers(len(ok)))]
            muts.append((nm, float(rng.random()), int(rng.integers(1 << 30)),
                         (rng.standard_normal((4, 4)) * 0.5).astype(np.float32)))
        data = {"x": rng.standard_normal((6, 6)).astype(np.float32),
                "y": rng.standard_normal((6, 4)).astype(np.float32),
                "a": rng.standard_normal((6, 4)).astype(np.float32),
                "b": rng.standard_normal(4).astype(np.float32),
                "m": rng.standard_normal(4).astype(np.float32)}
        plan.append((muts, data))
    return c, arrays, plan


class Args:
    """The call's Python-level arguments and context, changed by the plan."""

    def __init__(self):
        self.batch, self.x_rg, self.layout, self.alias = 3, False, "plain", False
        self.ex_dtype, self.y_dtype, self.maybe_dtype = "float32", "float32", "float32"
        self.ex_kind = None
        self.n, self.alpha, self.flag, self.mode, self.maybe = 1, 1.0, False, "mean", False
        self.grad_ctx, self.reseed, self.zero = "none", None, None
        self.dict_key, self.x_keep = False, False


def apply_change(w, a, mut):
    nm, u, i, arr = mut
    ns, model, opt = w["ns"], w["model"], w["opt"]
    nn = tracec.nn
    if nm == "g_scale":
        ns["G_SCALE"] = round(0.5 + u, 3)
    elif nm == "g_flag":
        ns["G_FLAG"] = not ns["G_FLAG"]
    elif nm == "g_bias":
        ns["G_BIAS"] = i % 5 - 2
    elif nm == "closure_k":
        w["set_k"](round(u * 2 - 1, 3))
    elif nm == "m_scale":
        model.scale = round(u + 0.25, 3)
    elif nm == "m_flag":
        model.flag = not model.flag
    elif nm == "train":
        model.train()
    elif nm == "eval":
        model.eval()
    elif nm == "swap_act":
        model.act = getattr(nn, ACTS[i % len(ACTS)])()
    elif nm == "swap_lin":
        lin = nn.Linear(4, 4)
        with tracec.no_grad():
            lin.weight.copy_(tracec.tensor(arr))
            lin.bias.copy_(tracec.tensor(arr[0]))
        model.lin = lin
    elif nm == "new_weight":
        model.lin.weight = nn.Parameter(tracec.tensor(arr))
    elif nm == "bias_rg":
        if model.lin.bias is not None:
            model.lin.bias.requires_grad_(not model.lin.bias.requires_grad)
    elif nm == "buf_assign":
        model.buf = tracec.tensor(arr[1])
    elif nm == "buf_inplace":
        model.buf.add_(u)
    elif nm == "drop_p":
        model.drop.p = round(u * 0.8, 3)
    elif nm == "bn_momentum":
        model.bn.momentum = round(u * 0.5, 3) if i % 4 else None
    elif nm == "lr":
        opt.param_groups[i % len(opt.param_groups)]["lr"] = round(u * 0.2, 4)
    elif nm == "momentum":
        g = opt.param_groups[0]
        if "momentum" in g:
            g["momentum"] = round(u * 0.9, 3)
        else:
            g["betas"] = (round(0.5 + u * 0.45, 3), 0.999)
    elif nm == "weight_decay":
        opt.param_groups[0]["weight_decay"] = round(u * 0.1, 3)
    elif nm == "add_group":
        if opt is not None and not w["added"]:
            opt.add_param_group({"params": [model.extra], "lr": round(u * 0.1, 4)})
            w["added"] = True
    elif nm == "ex_dtype":
        a.ex_dtype = ("float32", "float64")[i % 2]
    elif nm == "y_dtype":
        a.y_dtype = ("float32", "float64")[i % 2]
    elif nm == "maybe_dtype":
        a.maybe_dtype = ("float32", "float64")[i % 2]
    elif nm == "x_rg":
        a.x_rg = not a.x_rg
    elif nm == "x_layout":
        a.layout = ("plain", "t", "slice_rows", "slice_cols")[i % 4]
    elif nm == "batch":
        a.batch = (2, 3, 5, 3)[i % 4]
    elif nm == "alias":
        a.alias = not a.alias
    elif nm == "ex_kind":
        a.ex_kind = ("tuple", "list")[i % 2]
    elif nm == "n":
        a.n = i % 3 + 1
    elif nm == "alpha":
        a.alpha = round(u * 2, 3)
    elif nm == "flag":
        a.flag = not a.flag
    elif nm == "mode":
        a.mode = ("mean", "sum")[i % 2]
    elif nm == "maybe":
        a.maybe = not a.maybe
    elif nm == "grad_ctx":
        a.grad_ctx = ("none", "no_grad", "enable_grad", "no_then_enable")[i % 4]
    elif nm == "reseed":
        a.reseed = i % 1000
    elif nm == "default_dtype":
        tracec.set_default_dtype((tracec.float32, tracec.float64)[i % 2])
    elif nm == "zero_grad":
        a.zero = (True, False)[i % 2]
    elif nm == "cfg_obj":
        ns["G_CFG"].scale = round(u + 0.5, 3)
    elif nm == "cfg_shift":
        ns["G_CFG"] = type(ns["G_CFG"])(scale=ns["G_CFG"].scale, shift=round(u, 3))
    elif nm == "g_list":
        ns["G_LIST"][1] = tracec.tensor(arr[0])
    elif nm == "bias_none":
        if model.lin.bias is None:
            model.lin.bias = nn.Parameter(tracec.tensor(arr[1]).to(model.lin.weight.dtype))
        else:
            model.lin.bias = None
    elif nm == "sched":
        w["sched"].step()
    elif nm == "weight_rg":
        model.lin.weight.requires_grad_(not model.lin.weight.requires_grad)
    elif nm == "tensor_hook":
        if w["thook"] is None:
            if model.lin.weight.requires_grad:
                w["thook"] = model.lin.weight.register_hook(lambda g: g * 0.5)
        else:
            w["thook"].remove()
            w["thook"] = None
    elif nm == "dict_key":
        a.dict_key = not a.dict_key
    elif nm == "x_keep":
        a.x_keep = not a.x_keep
        w["x_kept"] = None
    elif nm == "x_inplace":
        if w["x_kept"] is not None:
            with tracec.no_grad():
                w["x_kept"].mul_(0.5)
    elif nm == "g_tensor":
        ns["G_T"] = tracec.tensor(arr[2])
    elif nm == "g_tensor_inplace":
        ns["G_T"].add_(u)
    elif nm == "attr_tensor":
        model.offset = tracec.tensor(arr[3])
    elif nm == "param_inplace":
        with tracec.no_grad():
            model.lin.weight.mul_(0.5)
    elif nm == "param_data":
        model.lin.weight.data = tracec.tensor(arr).to(model.lin.weight.dtype)
    elif nm == "grad_set":
        w_ = model.lin.weight
        w_.grad = tracec.tensor(arr).to(w_.dtype)
    elif nm == "hook":
        if w["hook"] is None:
            w["hook"] = model.act.register_forward_hook(lambda mod, inp, out: out * 1.5)
        else:
            w["hook"].remove()
            w["hook"] = None
    elif nm == "double":
        if model.lin.weight.dtype is tracec.float32:
            model.double()
        else:
            model.float()
    elif nm == "opt_reload":
        opt.load_state_dict(opt.state_dict())
    elif nm == "maximize":
        opt.param_groups[0]["maximize"] = not opt.param_groups[0]["maximize"]
    elif nm == "nesterov":
        g = opt.param_groups[0]
        if "nesterov" in g:
            g["nesterov"] = not g["nesterov"]
            g["dampening"] = 0


def make_args(w, a, data):
    c = w["c"]
    B = a.batch
    dt = {"float32": tracec.float32, "float64": tracec.float64}
    xs = data["x"]
    if a.layout == "t":
        x = tracec.tensor(xs[:4, :B].copy()).t()
    elif a.layout == "slice_rows":
        x = tracec.tensor(xs[:2 * B, :4].copy())[::2]
    elif a.layout == "slice_cols":
        x = tracec.tensor(xs[:B].copy())[:, 1:5]
    else:
        x = tracec.tensor(xs[:B, :4].copy())
    x = x.to(w["model"].lin.weight.dtype)
    if a.x_rg:
        x = x.detach().requires_grad_()
    if a.x_keep:
        # the same tensor at every call (written in place between calls)
        if w["x_kept"] is None or tuple(w["x_kept"].shape) != tuple(x.shape) or \
                w["x_kept"].dtype != x.dtype or w["x_kept"].requires_grad != x.requires_grad:
            w["x_kept"] = x
        x = w["x_kept"]
    if a.alias:
        y = x
    else:
        y = tracec.tensor(data["y"][:B]).to(dt[a.y_dtype])
    ea = tracec.tensor(data["a"][:B]).to(dt[a.ex_dtype])
    eb = tracec.tensor(data["b"]).to(dt[a.ex_dtype])
    kind = a.ex_kind or c["ex"]
    if c["ex"] == "dict":
        ex = {"a": ea, "b": eb}
        if a.dict_key:
            ex["c"] = ea * 2
    elif c["ex"] == "none":
        ex = None
    else:
        ex = (ea, eb) if kind == "tuple" else [ea, eb]
    maybe = tracec.tensor(data["m"]).to(dt[a.maybe_dtype]) if a.maybe else None
    acc = w["acc"]
    return x, (x, y, ex, acc, a.n, a.alpha, a.flag, a.mode, maybe)


def _np(t):
    return None if t is None else np.array(t.detach().numpy(), copy=True)


def snapshot(w, out, x):
    model, opt = w["model"], w["opt"]
    snap = {}
    loss, h = out
    for nm, t in (("loss", loss), ("h", h)):
        snap[nm] = _np(t)
        snap[nm + ".meta"] = (str(t.dtype), tuple(t.shape), bool(t.requires_grad))
    for k, v in model.state_dict().items():
        snap["sd." + k] = _np(v)
    for k, p in model.named_parameters():
        snap["grad." + k] = _np(p.grad)
        snap["rg." + k] = bool(p.requires_grad)
    snap["acc"] = _np(w["acc"])
    snap["x.grad"] = _np(x.grad) if x.requires_grad else None
    if opt is not None:
        for gi, g in enumerate(opt.param_groups):
            for pi, p in enumerate(g["params"]):
                for k, v in sorted(opt.state[p].items()):
                    snap[f"opt{gi}.{pi}.{k}"] = _np(v) if hasattr(v, "numpy") else v
    snap["rng"] = _np(tracec.get_rng_state())
    return snap


def run(case, compiled):
    c, arrays, plan = case
    ns = {"__name__": "fuzz_guards_program"}
    exec(compile(PROGRAM, FILENAME, "exec"), ns)
    model, opt, step, set_k, sched = ns["build"](c, arrays)
    w = {"ns": ns, "model": model, "opt": opt, "set_k": set_k, "c": c, "added": False,
         "acc": tracec.zeros(4), "hook": None, "sched": sched, "thook": None, "x_kept": None}
    fn = tracec.compile(step, backend="cpu") if compiled else step
    a = Args()
    snaps = []
    old_dtype = tracec.get_default_dtype()
    tracec.manual_seed(1234)
    try:
        with torch_rng.counter_draws():
            for k, (muts, data) in enumerate(plan):
                a.reseed, a.zero = None, None
                for m in muts:
                    apply_change(w, a, m)
                if a.reseed is not None:
                    tracec.manual_seed(a.reseed)
                if a.zero is not None:
                    (opt.zero_grad if opt is not None else model.zero_grad)(set_to_none=a.zero)
                x, args = make_args(w, a, data)
                try:
                    if a.grad_ctx == "no_grad":
                        with tracec.no_grad():
                            out = fn(*args)
                    elif a.grad_ctx == "enable_grad":
                        with tracec.enable_grad():
                            out = fn(*args)
                    elif a.grad_ctx == "no_then_enable":
                        with tracec.no_grad():
                            with tracec.enable_grad():
                                out = fn(*args)
                    else:
                        out = fn(*args)
                except Exception as ex:  # noqa
                    snaps.append(("raised", k, type(ex).__name__, str(ex).splitlines()[0][:200]
                                  if str(ex) else ""))
                    break
                snaps.append(snapshot(w, out, x))
    finally:
        tracec.set_default_dtype(old_dtype)
    return snaps, (fn.cache_info() if compiled else None)


def compare(es, cs):
    bad = []
    for k, (a, b) in enumerate(zip(es, cs)):
        if isinstance(a, tuple) or isinstance(b, tuple):
            if not (isinstance(a, tuple) and isinstance(b, tuple)):
                r = a if isinstance(a, tuple) else b
                tag = "refused" if isinstance(b, tuple) and b[2] == "TraceError" else "raised"
                bad.append((tag, k, "eager" if r is a else "compiled", r[2:]))
            elif a[2] != b[2]:
                bad.append(("raised differently", k, a[2:], b[2:]))
            break
        if sorted(a) != sorted(b):
            bad.append((k, "keys", sorted(set(a) ^ set(b))))
        for name in a:
            x, y = a[name], b.get(name)
            if isinstance(x, np.ndarray) and isinstance(y, np.ndarray):
                if x.shape != y.shape or x.dtype != y.dtype or not np.allclose(
                        x, y, rtol=1e-4, equal_nan=True,
                        atol=1e-5 * max(1.0, float(np.abs(x).max(initial=0)))):
                    bad.append((k, name))
            elif (type(x) is not type(y)) or (not isinstance(x, np.ndarray) and x != y):
                bad.append((k, name, x, y))
    if len(es) != len(cs) and not bad:
        bad.append(("lengths", len(es), len(cs)))
    return bad


def run_one(seed):
    """``(differences, case)``; differences empty when compiled == eager."""
    case = make_case(seed)
    e, _ = run(case, False)
    c, info = run(case, True)
    return compare(e, c), case


def describe(case):
    c, _, plan = case
    return c, [[m[:3] for m in muts] for muts, _ in plan]


if __name__ == "__main__":
    s0, n = int(sys.argv[1]), int(sys.argv[2])
    nbad = nref = 0
    for seed in range(s0, s0 + n):
        if (seed - s0) % 100 == 0:
            print("at", seed, nbad, nref, flush=True)
        try:
            bad, case = run_one(seed)
        except Exception as ex:  # noqa
            print("ERROR", seed, type(ex).__name__, str(ex).splitlines()[0][:300], flush=True)
            continue
        ref = [b for b in bad if b[0] == "refused"]
        bad = [b for b in bad if b[0] != "refused"]
        if ref:
            nref += 1
            print("REFUSED", seed, ref, flush=True)
        if bad:
            nbad += 1
            print("MISMATCH", seed, bad[:6], describe(case), flush=True)
    print("done", s0, n, nbad, nref, flush=True)
