import warnings; warnings.filterwarnings("ignore")
import numpy as np, torch, tracec
rng = np.random.default_rng(0)
P = lambda *s: rng.random(s) * 0.8 + 0.1
N = lambda *s: rng.standard_normal(s)
L = lambda *s: np.tril(rng.standard_normal(s)) + 3 * np.eye(s[-1])
cases = {
 "Normal": (dict(loc=N(3), scale=P(3) + 0.5), N(4, 3)),
 "Bernoulli": (dict(probs=P(3)), (rng.random((4, 3)) > 0.5) * 1.0),
 "Bernoulli_logits": (dict(logits=N(3)), (rng.random((4, 3)) > 0.5) * 1.0),
 "Beta": (dict(concentration1=P(3) + 1, concentration0=P(3) + 1), P(4, 3)),
 "Binomial": (dict(total_count=10, probs=P(3)), rng.integers(0, 10, (4, 3)) * 1.0),
 "Categorical": (dict(probs=P(2, 5)), rng.integers(0, 5, (4, 2)) * 1.0),
 "Cauchy": (dict(loc=N(3), scale=P(3)), N(4, 3)),
 "Chi2": (dict(df=P(3) * 5 + 1), P(4, 3) * 3),
 "ContinuousBernoulli": (dict(probs=P(3)), P(4, 3)),
 "Dirichlet": (dict(concentration=P(2, 4) * 3), None),
 "Exponential": (dict(rate=P(3) + 0.5), P(4, 3) * 2),
 "FisherSnedecor": (dict(df1=P(3) * 5 + 1, df2=P(3) * 5 + 3), P(4, 3) * 2),
 "Gamma": (dict(concentration=P(3) * 3, rate=P(3) + 0.5), P(4, 3) * 2),
 "Geometric": (dict(probs=P(3)), rng.integers(0, 5, (4, 3)) * 1.0),
 "Gumbel": (dict(loc=N(3), scale=P(3) + 0.5), N(4, 3)),
 "HalfCauchy": (dict(scale=P(3) + 0.5), P(4, 3)),
 "HalfNormal": (dict(scale=P(3) + 0.5), P(4, 3)),
 "InverseGamma": (dict(concentration=P(3) * 3 + 2, rate=P(3) + 0.5), P(4, 3) + 0.2),
 "Kumaraswamy": (dict(concentration1=P(3) + 1, concentration0=P(3) + 1), P(4, 3)),
 "Laplace": (dict(loc=N(3), scale=P(3) + 0.5), N(4, 3)),
 "LogNormal": (dict(loc=N(3), scale=P(3) + 0.5), P(4, 3) + 0.1),
 "LogisticNormal": (dict(loc=N(3), scale=P(3) + 0.5), None),
 "LowRankMultivariateNormal": (dict(loc=N(2, 3), cov_factor=N(2, 3, 2), cov_diag=P(2, 3) + 0.5), N(4, 2, 3)),
 "Multinomial": (dict(total_count=6, probs=P(2, 4)), None),
 "MultivariateNormal": (dict(loc=N(2, 3), scale_tril=L(2, 3, 3)), N(4, 2, 3)),
 "MultivariateNormal_cov": (dict(loc=N(3), covariance_matrix=np.eye(3) * 2 + 0.5), N(4, 3)),
 "NegativeBinomial": (dict(total_count=5.0, probs=P(3)), rng.integers(0, 8, (4, 3)) * 1.0),
 "OneHotCategorical": (dict(probs=P(2, 4)), None),
 "Pareto": (dict(scale=P(3) + 0.5, alpha=P(3) + 1), P(4, 3) + 1.5),
 "Poisson": (dict(rate=P(3) * 4), rng.integers(0, 6, (4, 3)) * 1.0),
 "RelaxedBernoulli": (dict(temperature=0.5, probs=P(3)), P(4, 3)),
 "RelaxedOneHotCategorical": (dict(temperature=0.5, probs=P(2, 4)), None),
 "StudentT": (dict(df=P(3) * 5 + 1, loc=N(3), scale=P(3) + 0.5), N(4, 3)),
 "Uniform": (dict(low=N(3) - 2, high=N(3) + 2), N(4, 3) * 0.5),
 "VonMises": (dict(loc=N(3), concentration=P(3) * 3), N(4, 3)),
 "Weibull": (dict(scale=P(3) + 0.5, concentration=P(3) + 1), P(4, 3) + 0.1),
 "Wishart": (dict(df=5.0, covariance_matrix=np.eye(3) + 0.2), None),
 "GeneralizedPareto": (dict(loc=N(3), scale=P(3) + 0.5, concentration=N(3) * 0.2), None),
}
def samp(name, kw, T):
    pass
bad = 0
for name, (kw, x) in cases.items():
    cls = name.split("_")[0]
    tc, cc = getattr(torch.distributions, cls, None), getattr(tracec.distributions, cls, None)
    if tc is None: continue
    if cc is None: print("MISSING", name); bad += 1; continue
    def mk(T, C):
        k = {a: (T.tensor(v) if isinstance(v, np.ndarray) else v) for a, v in kw.items()}
        return C(**k)
    try:
        dt, dc = mk(torch, tc), mk(tracec, cc)
    except Exception as e:
        print("CTOR", name, e); bad += 1; continue
    if x is None:
        torch.manual_seed(0); x = dt.sample((4,)).numpy()
    Q = np.clip(P(4, *dt.batch_shape), 0.05, 0.95)
    checks = {}
    for attr in ["log_prob", "cdf", "icdf", "entropy", "mean", "variance", "stddev", "mode", "batch_shape", "event_shape", "support"]:
        for T, d, key in ((torch, dt, "t"), (tracec, dc, "c")):
            try:
                if attr in ("log_prob", "cdf"):
                    v = getattr(d, attr)(T.tensor(x))
                elif attr == "icdf":
                    v = d.icdf(T.tensor(Q))
                elif attr == "entropy":
                    v = d.entropy()
                else:
                    v = getattr(d, attr)
                if hasattr(v, "numpy"): v = np.asarray(v.detach().numpy(), dtype=np.float64)
                elif attr == "support": v = type(v).__name__.lstrip("_")
                else: v = tuple(v)
            except NotImplementedError:
                v = "NotImplemented"
            except Exception as e:
                v = "ERR " + type(e).__name__ + ": " + str(e)[:60]
            checks.setdefault(attr, {})[key] = v
    for attr, r in checks.items():
        a, b = r["t"], r["c"]
        ok = (np.allclose(a, b, rtol=1e-5, atol=1e-7, equal_nan=True) if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape else a == b) if not (isinstance(a, np.ndarray) ^ isinstance(b, np.ndarray)) else False
        if attr == "icdf" and isinstance(a, np.ndarray): ok = True if not isinstance(b, np.ndarray) else ok
        if not ok:
            bad += 1; print("DIFF", name, attr, "| torch:", a if not isinstance(a, np.ndarray) else a.ravel()[:4], "| tracec:", b if not isinstance(b, np.ndarray) else b.ravel()[:4])
    # rsample shape / has_rsample
    if dt.has_rsample != dc.has_rsample: bad += 1; print("DIFF has_rsample", name)
    try:
        s = dc.sample((5,)); 
        if tuple(s.shape) != tuple(dt.sample((5,)).shape): bad += 1; print("DIFF sample shape", name)
    except Exception as e: bad += 1; print("SAMPLE ERR", name, e)
print("bad", bad)
