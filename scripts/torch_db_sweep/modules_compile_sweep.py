"""ModuleInfo under ``tracec.compile``: a training step (forward, a
weighted sum of the outputs, ``backward()``) compiled, called on three sets
of inputs (the first records; the second and third run native code on new
values, same shapes) and compared after each call with torch's eager step on
the same inputs: outputs, every parameter's gradient, input gradients, and
the module's state (buffers such as BatchNorm's running statistics, which
the compiled step must write back).  ``TRAIN=0|1``, ``DT``, ``ONLY``,
``OUTJ`` as in ``modules_sweep.py``."""
import sys, os, json, warnings, signal
warnings.filterwarnings("ignore")
import numpy as np, torch, tracec
from torch.testing._internal.common_modules import module_db
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ops_sweep import tonp, compare, resolve, perturb  # noqa
from modules_sweep_conv import conv  # noqa

TRAIN = os.environ.get("TRAIN", "1") == "1"
DT = getattr(torch, os.environ.get("DT", "float32"))
ONLY = os.environ.get("ONLY")


class Timeout(Exception):
    pass


def _alarm(*a):
    raise Timeout()


signal.signal(signal.SIGALRM, _alarm)


def weighted(outs, cls):
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    terms = [(o.float() * (k + 1)).sum() for k, o in enumerate(outs)
             if isinstance(o, cls) and o.requires_grad]
    return sum(terms) if terms else None


def torch_step(tm, args, kw):
    for p in tm.parameters():
        p.grad = None
    args = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
    torch.manual_seed(0)
    out = tm(*args, **kw)
    loss = weighted(out, torch.Tensor)
    if loss is not None:
        loss.backward()
    return out, args


def check(tm, cm, targs, cargs, tag):
    tp = dict(tm.named_parameters()); cp = dict(cm.named_parameters())
    for k in tp:
        if tp[k].grad is None:
            continue
        if cp[k].grad is None:
            return f"{tag} grad {k}: None in tracec"
        r = compare(tonp(tp[k].grad), tonp(cp[k].grad), f"{tag} grad {k}")
        if r:
            return r
    for j, (a, b) in enumerate(zip(targs, cargs)):
        if isinstance(a, torch.Tensor) and a.grad is not None:
            r = compare(tonp(a.grad), tonp(b.grad) if b.grad is not None else ("v", None),
                        f"{tag} input grad {j}")
            if r:
                return r
    tsd, csd = tm.state_dict(), cm.state_dict()
    for k in tsd:
        r = compare(tonp(tsd[k]), tonp(csd[k]), f"{tag} state {k}")
        if r:
            return r
    return None


res = {}
for m in module_db:
    if ONLY and ONLY not in m.name:
        continue
    name = m.name
    tcls = resolve(name)
    if tcls is None:
        res[name] = ["MISSING"]; print(name, "MISSING", flush=True); continue
    try:
        inputs = m.module_inputs_func(m, device="cpu", dtype=DT, requires_grad=True, training=TRAIN)
    except Exception as e:
        res[name] = ["SAMPLEFAIL", repr(e)[:100]]; continue
    status = []
    for i, mi in enumerate(inputs[:8]):
        if mi.forward_input is None:
            continue
        targs, tkw = list(mi.forward_input.args), mi.forward_input.kwargs
        try:
            torch.manual_seed(0)
            tm = m.module_cls(*mi.constructor_input.args, **mi.constructor_input.kwargs).to(DT)
            tm.train(TRAIN)
            sd = {k: tracec.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()}
            o1, _ = torch_step(tm, targs, tkw)
            torch.manual_seed(0)
            tm2 = m.module_cls(*mi.constructor_input.args, **mi.constructor_input.kwargs).to(DT)
            tm2.load_state_dict(tm.state_dict()); tm2.train(TRAIN)
            o2, _ = torch_step(tm2, targs, tkw)
            if compare(tonp(o1), tonp(o2)) is not None:
                status.append(["RANDOM", ""]); continue
            tm.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in sd.items()})
        except Exception:
            continue
        signal.alarm(120)
        try:
            cm = tcls(*conv(mi.constructor_input.args), **conv(mi.constructor_input.kwargs))
            cm = cm.to(tracec.float64 if DT == torch.float64 else tracec.float32)
            cm.train(TRAIN)
            miss = cm.load_state_dict(sd, strict=False)
            if miss.missing_keys or miss.unexpected_keys:
                status.append(["STATEDICT", f"s{i}"]); continue
            ckw = conv(tkw, False)

            def step(*xs, _cm=cm, _kw=ckw):
                out = _cm(*xs, **_kw)
                loss = weighted(out, tracec.Tensor)
                if loss is not None:
                    loss.backward()
                return out
            cstep = tracec.compile(step)
            r = None
            rng = np.random.default_rng(i)
            argsets = [targs, perturb(targs, rng), perturb(targs, rng)]
            for call, a in enumerate(argsets):
                try:
                    tout, ta = torch_step(tm, a, tkw)
                except Exception:      # torch refuses the new values (a target out of range)
                    if call == 0:
                        raise
                    continue
                for p in cm.parameters():
                    p.grad = None
                ca = [tracec.tensor(x.detach().numpy().copy()).requires_grad_(x.requires_grad)
                      if isinstance(x, torch.Tensor) and x.dtype != torch.bfloat16 else conv(x, True)
                      for x in a]
                tracec.manual_seed(0)
                cout = cstep(*ca)
                r = compare(tonp(tout), tonp(cout), f"call{call + 1} out") or \
                    check(tm, cm, ta, ca, f"call{call + 1}")
                if r:
                    break
            info = cstep.cache_info()
            if r:
                status.append(["WRONG", f"s{i}: {r} | traces={info.traces} reasons={info.reasons[1:3]} ctor={mi.constructor_input.args} {mi.constructor_input.kwargs} fwd={[getattr(x, 'shape', x) for x in targs]} {list(tkw)}"])
            else:
                status.append(["OK" if info.traces == 1 else "RETRACE", f"s{i}: {info.reasons}"])
        except Timeout:
            status.append(["TIMEOUT", f"s{i}"])
        except Exception as e:
            status.append(["ERROR", f"s{i}: {type(e).__name__}: {str(e)[:200]} | ctor={mi.constructor_input.args} {mi.constructor_input.kwargs} fwd={[getattr(x, 'shape', x) for x in targs]} {list(tkw)}"])
        finally:
            signal.alarm(0)
    kinds = [s[0] for s in status]
    worst = next((k for k in ("WRONG", "ERROR", "TIMEOUT", "STATEDICT", "RETRACE", "RANDOM") if k in kinds), "OK" if kinds else "NOSAMPLE")
    detail = next((s[1] for s in status if s[0] == worst), "")
    res[name] = [worst, detail, kinds.count("OK"), len(kinds)]
    print(name, worst, kinds.count("OK"), len(kinds), detail[:400], flush=True)
json.dump(res, open(os.environ.get("OUTJ", "modules_compile_sweep.json"), "w"), indent=1)
