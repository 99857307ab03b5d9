import sys, os, json, warnings, signal
warnings.filterwarnings("ignore")
import numpy as np, torch, tracec
from torch.testing._internal.common_modules import module_db
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ops_sweep import tonp, compare, resolve  # noqa
from modules_sweep_conv import conv  # noqa
TRAIN = os.environ.get("TRAIN", "1") == "1"
DT = getattr(torch, os.environ.get("DT", "float32"))
res = {}
ONLY = os.environ.get("ONLY")
for m in module_db:
    if ONLY and ONLY not in m.name: continue
    name = m.name
    tcls = resolve(name)
    if tcls is None:
        res[name] = ["MISSING"]; print(name, "MISSING", flush=True); continue
    try:
        inputs = m.module_inputs_func(m, device="cpu", dtype=DT, requires_grad=True, training=TRAIN)
    except Exception as e:
        res[name] = ["SAMPLEFAIL", repr(e)[:100]]; continue
    status = []
    for i, mi in enumerate(inputs[:16]):
        if mi.forward_input is None:
            continue
        try:
            torch.manual_seed(0)
            tm = m.module_cls(*mi.constructor_input.args, **mi.constructor_input.kwargs).to(DT)
            tm.train(TRAIN)
            targs = mi.forward_input.args; tkw = mi.forward_input.kwargs
            tout = tm(*targs, **tkw)
        except Exception as e:
            continue
        try:
            cm = tcls(*conv(mi.constructor_input.args), **conv(mi.constructor_input.kwargs))
            cm = cm.to(tracec.float64 if DT == torch.float64 else tracec.float32)
            cm.train(TRAIN)
            sd = {k: tracec.tensor(v.detach().numpy().copy()) for k, v in tm.state_dict().items()}
            missing = cm.load_state_dict(sd, strict=False)
            if missing.missing_keys or missing.unexpected_keys:
                status.append(["STATEDICT", f"s{i} missing={missing.missing_keys[:3]} unexpected={missing.unexpected_keys[:3]}"]); continue
            cargs = conv(targs, True); ckw = conv(tkw, True)
            tracec.manual_seed(0)
            cout = cm(*cargs, **ckw)
            r = compare(tonp(tout), tonp(cout))
            if r is None:
                # backward: param grads and input grads
                touts = tout if isinstance(tout, (tuple, list)) else (tout,)
                couts = cout if isinstance(cout, (tuple, list)) else (cout,)
                tl = sum((o.float() * (k + 1)).sum() for k, o in enumerate(touts) if isinstance(o, torch.Tensor) and o.requires_grad)
                cl = sum((o.float() * (k + 1)).sum() for k, o in enumerate(couts) if isinstance(o, tracec.Tensor) and o.requires_grad)
                if isinstance(tl, torch.Tensor):
                    tl.backward(); cl.backward()
                    tp = dict(tm.named_parameters()); cp = dict(cm.named_parameters())
                    for k in tp:
                        if tp[k].grad is None: continue
                        if cp[k].grad is None:
                            r = f"grad {k}: None in tracec"; break
                        r = compare(tonp(tp[k].grad), tonp(cp[k].grad), f"grad {k}")
                        if r: break
                    if not r:
                        for j, (a, b) in enumerate(zip(targs, cargs)):
                            if isinstance(a, torch.Tensor) and a.grad is not None:
                                r = compare(tonp(a.grad), tonp(b.grad) if b.grad is not None else ("v", None), f"input grad {j}")
                                if r: break
            if r:
                status.append(["WRONG", f"s{i}: {r} | ctor={mi.constructor_input.args} {mi.constructor_input.kwargs} fwd={[getattr(a,'shape',a) for a in targs]} {list(tkw)}"])
            else:
                status.append(["OK", ""])
        except Exception as e:
            status.append(["ERROR", f"s{i}: {type(e).__name__}: {str(e)[:200]} | ctor={mi.constructor_input.args} {mi.constructor_input.kwargs} fwd={[getattr(a,'shape',a) for a in targs]} {list(tkw)}"])
    kinds = [s[0] for s in status]
    worst = next((k for k in ("WRONG", "ERROR", "STATEDICT") if k in kinds), "OK" if kinds else "NOSAMPLE")
    detail = next((s[1] for s in status if s[0] == worst), "")
    res[name] = [worst, detail, kinds.count("OK"), len(kinds)]
    print(name, worst, kinds.count("OK"), len(kinds), detail[:400], flush=True)
json.dump(res, open(os.environ.get("OUTJ", "modules_sweep.json"), "w"), indent=1)
