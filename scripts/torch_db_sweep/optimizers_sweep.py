import sys, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch, tracec
from torch.testing._internal.common_optimizers import optim_db
rng = np.random.default_rng(0)
import os
#: COMPILE=1: tracec's step (zero_grad, a loss whose gradient is the step's
#: G, backward, opt.step) runs under tracec.compile, all six steps.
COMPILE = os.environ.get("COMPILE") == "1"
P0 = [rng.standard_normal((3, 4)), rng.standard_normal(4)] if not os.environ.get("TWOD") else [rng.standard_normal((3, 4)), rng.standard_normal((5, 2))]
G = [[rng.standard_normal(p.shape) for p in P0] for _ in range(6)]
def conv(v, T):
    if isinstance(v, torch.Tensor): return T.tensor(v.numpy())
    if isinstance(v, dict): return {k: conv(x, T) for k, x in v.items()}
    if isinstance(v, (list, tuple)): return type(v)(conv(x, T) for x in v)
    return v
bad = 0
for o in optim_db:
    name = o.optim_cls.__name__
    ccls = getattr(tracec.optim, name, None)
    if ccls is None:
        print("MISSING", name); continue
    for oi in o.optim_inputs_func(device="cpu"):
        kw = dict(oi.kwargs)
        if any(k in kw for k in ("foreach", "fused", "capturable", "differentiable")) and kw.get("differentiable"):
            pass
        res = {}
        for T, cls in ((torch, o.optim_cls), (tracec, ccls)):
            ps = [T.tensor(p.copy(), requires_grad=True) for p in P0]
            try:
                k = conv(kw, T)
                opt = cls(ps, **k)
                traj = []
                for step in range(6):
                    if name == "LBFGS":
                        def closure():
                            opt.zero_grad()
                            loss = sum((p * p).sum() + (p * T.tensor(G[0][i])).sum() for i, p in enumerate(ps))
                            loss.backward()
                            return loss
                        opt.step(closure)
                    elif COMPILE and T is tracec:
                        if step == 0:
                            def body(*gs, _opt=opt, _ps=ps):
                                _opt.zero_grad()
                                loss = sum((p * g).sum() for p, g in zip(_ps, gs))
                                loss.backward()
                                _opt.step()
                            cstep = tracec.compile(body)
                        cstep(*[T.tensor(g.copy()) for g in G[step]])
                    else:
                        for p, g in zip(ps, G[step]):
                            p.grad = T.tensor(g.copy())
                        opt.step()
                    traj.append(np.concatenate([p.detach().numpy().ravel() for p in ps]))
                res[T.__name__] = np.array(traj)
            except Exception as e:
                res[T.__name__] = f"{type(e).__name__}: {str(e)[:150]}"
        a, b = res["torch"], res["tracec"]
        ncmp = globals().get("ncmp", 0) + 1; globals()["ncmp"] = ncmp
        if isinstance(a, str) and isinstance(b, str): print("BOTHERR", name, oi.desc, a[:80], "|", b[:80])
        if isinstance(a, str) or isinstance(b, str):
            if isinstance(a, str) and isinstance(b, str):
                continue
            bad += 1; print("ERR ", name, oi.desc, kw, "| torch:", a if isinstance(a, str) else "ok", "| tracec:", b if isinstance(b, str) else "ok")
        elif not np.allclose(a, b, rtol=1e-5 if COMPILE else 1e-6, atol=1e-7 if COMPILE else 1e-8):
            bad += 1; print("DIFF", name, oi.desc, kw, "max", np.abs(a - b).max(), "first step", np.abs(a[0]-b[0]).max())
print("bad", bad, "compared", ncmp)
