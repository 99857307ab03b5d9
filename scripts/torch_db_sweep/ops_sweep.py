"""Differential check of tracec against torch over torch's OpInfo samples."""
import sys, json, signal, traceback, math, os, warnings
warnings.filterwarnings("ignore")
import numpy as np
import torch
from torch.testing._internal.common_methods_invocations import op_db
import tracec

GRAD = os.environ.get("GRAD") == "1"
COMPILE = os.environ.get("COMPILE") == "1"
NCOMP = int(os.environ.get("NCOMP", "3"))
#: FRESH=1 (with COMPILE=1): a third call with new values in every floating
#: tensor argument (same shapes), compared with torch on those values, so
#: an input baked into the native code as a constant shows.
FRESH = os.environ.get("FRESH") == "1"
MAXS = int(os.environ.get("MAXS", "12"))
DTYPES_ENV = os.environ.get("DTYPES")
ONLY = os.environ.get("ONLY")
DTYPES = [torch.float32]
if os.environ.get('DTYPES'): DTYPES = [getattr(torch, d) for d in os.environ['DTYPES'].split(',')]

class Timeout(Exception): pass
def _alarm(*a): raise Timeout()
signal.signal(signal.SIGALRM, _alarm)

def resolve(name):
    obj = tracec
    for part in name.split("."):
        if not hasattr(obj, part):
            return None
        obj = getattr(obj, part)
    return obj

def tdtype(d):
    return getattr(tracec, str(d).replace("torch.", ""))

def conv(x, grad=False):
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided:
            raise NotImplementedError("layout")
        a = x.detach()
        if a.dtype == torch.bfloat16:
            t = tracec.tensor(a.float().numpy()).to(tracec.bfloat16)
        else:
            t = tracec.tensor(a.numpy().copy())
        if grad and x.requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(x, torch.dtype):
        return tdtype(x)
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, torch.device):
        return str(x)
    if isinstance(x, torch.memory_format):
        return getattr(tracec, str(x).replace("torch.", ""))
    if isinstance(x, (list, tuple)):
        return type(x)(conv(v, grad) for v in x) if not hasattr(x, "_fields") else type(x)(*[conv(v, grad) for v in x])
    if isinstance(x, dict):
        return {k: conv(v, grad) for k, v in x.items()}
    if callable(x) and getattr(x, "__module__", "") and "torch" in str(getattr(x, "__module__", "")):
        n = getattr(x, "__name__", None)
        r = resolve(n) if n else None
        if r is None:
            raise NotImplementedError(f"callable {x}")
        return r
    return x

def tonp(y):
    if isinstance(y, torch.Tensor) and y._is_zerotensor():
        y = torch.zeros(y.shape, dtype=y.dtype)
    if isinstance(y, torch.Tensor):
        if y.dtype == torch.bfloat16:
            return ("t", str(y.dtype).replace("torch.", ""), y.float().numpy())
        return ("t", str(y.dtype).replace("torch.", ""), y.detach().resolve_conj().resolve_neg().numpy())
    if isinstance(y, tracec.Tensor):
        d = str(y.dtype).replace("tracec.", "").replace("torch.", "")
        if y.dtype == tracec.bfloat16:
            return ("t", d, y.float().detach().numpy())
        return ("t", d, np.asarray(y.detach().numpy()))
    if isinstance(y, (list, tuple)):
        return ("seq", [tonp(v) for v in y])
    return ("v", y)

def compare(a, b, path="out"):
    if a[0] != b[0]:
        # allow tracec returning tensor where torch returns a scalar etc.
        return f"{path}: kind {a[0]} vs {b[0]} ({type(a[1])}/{type(b[1])})"
    if a[0] == "t":
        if a[1] != b[1]:
            return f"{path}: dtype torch {a[1]} tracec {b[1]}"
        x, y = a[2], b[2]
        if x.shape != y.shape:
            return f"{path}: shape torch {x.shape} tracec {y.shape}"
        if x.dtype.kind in "fc":
            ok = np.allclose(x, y, rtol=1e-3, atol=1e-4, equal_nan=True)
        else:
            ok = np.array_equal(x, y)
        if not ok:
            with np.errstate(all="ignore"):
                err = np.nanmax(np.abs(x.astype(np.complex128) - y.astype(np.complex128))) if x.size else 0
            return f"{path}: values differ (max abs {err:.3g})"
        return None
    if a[0] == "seq":
        if len(a[1]) != len(b[1]):
            return f"{path}: len {len(a[1])} vs {len(b[1])}"
        for i, (u, v) in enumerate(zip(a[1], b[1])):
            r = compare(u, v, f"{path}[{i}]")
            if r:
                return r
        return None
    x, y = a[1], b[1]
    try:
        if isinstance(x, float) and isinstance(y, (int, float)):
            if not (math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-5) or (math.isnan(x) and math.isnan(y))):
                return f"{path}: {x} vs {y}"
            return None
        if x != y:
            return f"{path}: {x!r} vs {y!r}"
    except Exception as e:
        return f"{path}: compare {e}"
    return None

def perturb(x, rng):
    """x with every floating tensor scaled elementwise by a factor in
    [0.8, 1.2] (signs and zeros kept, so domains mostly hold)."""
    if isinstance(x, torch.Tensor) and x.layout == torch.strided and x.dtype.is_floating_point:
        f = torch.from_numpy(rng.uniform(0.8, 1.2, tuple(x.shape))).to(x.dtype)
        y = (x.detach() * f).detach()
        return y.requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(perturb(v, rng) for v in x)
    return x


def key_of(op):
    return op.name + ('.' + op.variant_test_name if op.variant_test_name else '')

def run_torch(op, s):
    torch.manual_seed(0)
    return op.op(s.input, *s.args, **s.kwargs)


def flat(x):
    """Tensors in x, depth-first over lists/tuples (same order for torch and tracec)."""
    if isinstance(x, (list, tuple)):
        out = []
        for v in x:
            out += flat(v)
        return out
    return [x]

SKIP = set(filter(None, os.environ.get("SKIP", "").split(",")))

def main():
    results = {}
    for op in op_db:
        if key_of(op) in SKIP: continue
        key = op.name + ("." + op.variant_test_name if op.variant_test_name else "")
        if ONLY and ONLY not in key:
            continue
        fn = None
        via = "fn"
        import types as _types
        if isinstance(op.op, _types.FunctionType) and op.op.__module__ and "testing._internal" in op.op.__module__:
            g = dict(op.op.__globals__); g["torch"] = tracec
            if "F" in g: g["F"] = tracec.nn.functional
            fn = _types.FunctionType(op.op.__code__, g, op.op.__name__, op.op.__defaults__, op.op.__closure__)
            fn.__kwdefaults__ = op.op.__kwdefaults__
            via = "lambda"
        if fn is None:
            fn = resolve(op.name)
            if fn is not None and not callable(fn) or isinstance(fn, type(tracec.float32)):
                fn = None
        if fn is None and op.method_variant is not None:
            m = op.name
            if hasattr(tracec.Tensor, m):
                fn = lambda x, *a, _m=m, **k: getattr(x, _m)(*a, **k)
                via = "method"
        if fn is None:
            results[key] = ["MISSING", op.name]
            continue
        status = []
        for dtype in DTYPES:
            if dtype not in op.supported_dtypes("cpu"):
                # pick something supported
                cands = [d for d in (torch.float32, torch.int64, torch.bool, torch.complex64) if d in op.supported_dtypes("cpu")]
                if not cands:
                    continue
                dtype = cands[0]
            try:
                samples = list(op.sample_inputs("cpu", dtype, requires_grad=GRAD and op.supports_autograd and dtype.is_floating_point))
            except Exception as e:
                status.append(["SAMPLEFAIL", repr(e)[:100]]); continue
            for i, s in enumerate(samples[:MAXS]):
                try:
                    tout = run_torch(op, s)
                    tout2 = run_torch(op, s)
                    torch.manual_seed(1)
                    t3 = op.op(s.input, *s.args, **s.kwargs)
                    if compare(tonp(tout), tonp(t3)) is not None:
                        status.append(["RANDOM", ""]); break
                except Exception as e:
                    continue  # torch raises: skip
                try:
                    a_in = conv(s.input, GRAD); a_args = conv(s.args, GRAD); a_kw = conv(s.kwargs, GRAD)
                except NotImplementedError as e:
                    continue
                signal.alarm(90)
                try:
                    tracec.manual_seed(0)
                    if COMPILE and GRAD:
                        if i >= NCOMP:
                            break
                        if not (isinstance(tout, torch.Tensor) and tout.dtype.is_floating_point and tout.requires_grad):
                            continue
                        g = torch.from_numpy(np.random.default_rng(0).standard_normal(tout.shape).astype(np.float32)).to(tout.dtype)
                        kwt = [k for k in sorted(a_kw) if isinstance(a_kw[k], tracec.Tensor) and a_kw[k].requires_grad and isinstance(s.kwargs[k], torch.Tensor) and s.kwargs[k].requires_grad]
                        leaves = [x for x in flat([s.input, *s.args]) if isinstance(x, torch.Tensor) and x.requires_grad] + [s.kwargs[k] for k in kwt]
                        cidx = [j for j, x in enumerate(flat([a_in, *a_args])) if isinstance(x, tracec.Tensor) and x.requires_grad]
                        tg = torch.autograd.grad(tout, leaves, g, allow_unused=True)
                        gw = tracec.tensor(g.numpy())
                        npos = 1 + len(a_args)
                        def body(*xs, _fn=fn, _kw=a_kw, _cidx=cidx, _gw=gw, _kwt=kwt, _npos=npos):
                            kw = dict(_kw); kw.update(zip(_kwt, xs[_npos:]))
                            o = _fn(*xs[:_npos], **kw)
                            wrt = [flat(list(xs[:_npos]))[j] for j in _cidx] + list(xs[_npos:])
                            gs = tracec.autograd.grad((o * _gw).sum(), wrt, allow_unused=True, materialize_grads=True)
                            return (o, *gs)
                        cf = tracec.compile(body)
                        extra = [a_kw[k] for k in kwt]
                        cf(a_in, *a_args, *extra)
                        res = cf(a_in, *a_args, *extra)
                        r = compare(tonp(tout), tonp(res[0]))
                        if r is None:
                            for j, (u, v) in enumerate(zip(tg, res[1:])):
                                if u is None: u = torch.zeros_like(leaves[j])
                                r = compare(tonp(u), tonp(v), f"cgrad{j}")
                                if r: r = "GRAD " + r; break
                        if r is None and FRESH:
                            rng = np.random.default_rng(i + 1)
                            p_in, p_args = perturb(s.input, rng), perturb(s.args, rng)
                            torch.manual_seed(0)
                            pout = op.op(p_in, *p_args, **s.kwargs)
                            pleaves = [x for x in flat([p_in, *p_args]) if isinstance(x, torch.Tensor) and x.requires_grad] + [s.kwargs[k] for k in kwt]
                            ptg = torch.autograd.grad(pout, pleaves, g, allow_unused=True)
                            tracec.manual_seed(0)
                            res = cf(conv(p_in, True), *conv(p_args, True), *extra)
                            r = compare(tonp(pout), tonp(res[0]), "fresh")
                            if r is None:
                                for j, (u, v) in enumerate(zip(ptg, res[1:])):
                                    if u is None: u = torch.zeros_like(pleaves[j])
                                    r = compare(tonp(u), tonp(v), f"fresh cgrad{j}")
                                    if r: r = "GRAD " + r; break
                        info = cf.cache_info()
                        if r:
                            status.append(["WRONG", f"s{i} {dtype}: {r} | traces={info.traces} in={tuple(getattr(s.input,'shape',()))} args={[getattr(a,'shape',a) for a in s.args][:4]} kw={list(s.kwargs)[:4]}"])
                        else:
                            status.append(["OK", ""])
                        continue
                    if COMPILE:
                        if i >= NCOMP:
                            break
                        cf = tracec.compile(lambda *xs, _fn=fn, _kw=a_kw: _fn(*xs, **_kw))
                        cf(a_in, *a_args)
                        cout = cf(a_in, *a_args)
                        if FRESH and compare(tonp(tout), tonp(cout)) is None:
                            rng = np.random.default_rng(i + 1)
                            p_in, p_args = perturb(s.input, rng), perturb(s.args, rng)
                            torch.manual_seed(0)
                            tout = op.op(p_in, *p_args, **s.kwargs)
                            tracec.manual_seed(0)
                            cout = cf(conv(p_in), *conv(p_args))
                    else:
                        cout = fn(a_in, *a_args, **a_kw)
                    r = compare(tonp(tout), tonp(cout))
                    if r is None and GRAD and isinstance(tout, torch.Tensor) and tout.dtype.is_floating_point and tout.requires_grad:
                        g = torch.from_numpy(np.random.default_rng(0).standard_normal(tout.shape).astype(np.float32)).to(tout.dtype)
                        kwt = [k for k in sorted(a_kw) if isinstance(a_kw[k], tracec.Tensor) and a_kw[k].requires_grad and isinstance(s.kwargs[k], torch.Tensor) and s.kwargs[k].requires_grad]
                        leaves = [x for x in flat([s.input, *s.args]) if isinstance(x, torch.Tensor) and x.requires_grad] + [s.kwargs[k] for k in kwt]
                        cleaves = [x for x in flat([a_in, *a_args]) if isinstance(x, tracec.Tensor) and x.requires_grad] + [a_kw[k] for k in kwt]
                        tg = torch.autograd.grad(tout, leaves, g, allow_unused=True)
                        cg = tracec.autograd.grad(cout, cleaves, tracec.tensor(g.numpy()), allow_unused=True)
                        for j, (u, v) in enumerate(zip(tg, cg)):
                            if u is None and v is None: continue
                            if u is None: u = torch.zeros_like(leaves[j])
                            if v is None: v = tracec.zeros_like(cleaves[j])
                            r = compare(tonp(u), tonp(v), f"grad{j}")
                            if r: r = "GRAD " + r; break
                    if r:
                        status.append(["WRONG", f"s{i} {dtype}: {r} | in={tuple(getattr(s.input,'shape',()))} args={[getattr(a,'shape',a) for a in s.args][:4]} kw={list(s.kwargs)[:4]}"])
                    else:
                        status.append(["OK", ""])
                except Timeout:
                    status.append(["TIMEOUT", f"s{i}"])
                except Exception as e:
                    status.append(["ERROR", f"s{i} {dtype}: {type(e).__name__}: {str(e)[:200]} | in={tuple(getattr(s.input,'shape',()))} args={[getattr(a,'shape',a) for a in s.args][:4]} kw={ {k: (v if not hasattr(v,'shape') else 'T') for k,v in s.kwargs.items()} }"])
                finally:
                    signal.alarm(0)
        kinds = [x[0] for x in status]
        worst = next((k for k in ("WRONG", "ERROR", "TIMEOUT", "SAMPLEFAIL", "RANDOM") if k in kinds), "OK" if kinds else "NOSAMPLE")
        detail = next((x[1] for x in status if x[0] == worst), "")
        results[key] = [worst, detail, kinds.count("OK"), len(kinds), via]
        print(key, worst, detail[:300], flush=True)
    json.dump(results, open(os.environ.get("OUTJ", "ops_sweep.json"), "w"), indent=1)

if __name__ == '__main__':
    main()
