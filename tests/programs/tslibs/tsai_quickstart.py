"""tsai as its README writes it, on tiny synthetic arrays (no downloads):
TSClassifier with InceptionTimePlus (TSClassification / TSStandardize,
fit_one_cycle, export and load_learner, get_X_preds), get_ts_dls +
ts_learner over InceptionTime / TST / LSTM / LSTM_FCN, a TSRegressor with
TSTPlus, and a TSForecaster on a SlidingWindow split by TimeSplitter."""
import random

import numpy as np
import torch
from fastai.callback.progress import ProgressCallback
from tsai.basics import *
from tsai.inference import load_learner
from tsai.models.InceptionTime import InceptionTime
from tsai.models.RNN import LSTM
from tsai.models.RNN_FCN import LSTM_FCN
from tsai.models.TST import TST


def fmt(xs):
    return " ".join(f"{float(x):.5f}" for x in torch.as_tensor(np.asarray(xs)).flatten())


def quiet(learn):
    learn.remove_cb(ProgressCallback)      # no progress bars, no timing table
    learn.logger = noop
    return learn


def show(learn, what):
    for i, v in enumerate(learn.recorder.values):
        print(what, "epoch", i, fmt(v))
    print(what, "losses", fmt(learn.recorder.losses))


set_seed(0, reproducible=True)
torch.manual_seed(0)
random.seed(0)

rng = np.random.RandomState(0)
n, c_in, seq_len = 48, 3, 24
t = np.linspace(0, 4 * np.pi, seq_len)
y = rng.randint(0, 3, n)
X = (np.sin(t[None, None] * (1 + y[:, None, None]) + rng.rand(n, c_in, 1))
     + 0.1 * rng.randn(n, c_in, seq_len)).astype(np.float32)
labels = np.array(["a", "b", "c"])[y]
splits = (list(range(36)), list(range(36, 48)))
print("data", X.shape, fmt(X[0, 0, :5]), labels[:6].tolist())

# --- README: TSClassifier, export, load_learner, get_X_preds -----------------
clf = TSClassifier(X, labels, splits=splits, path=".", arch="InceptionTimePlus",
                   arch_config=dict(nf=8, depth=3), tfms=[None, TSClassification()],
                   batch_tfms=TSStandardize(), metrics=accuracy, bs=12)
quiet(clf)
print("clf vocab", list(clf.dls.vocab), "params", sum(p.numel() for p in clf.model.parameters()))
clf.fit_one_cycle(1, 3e-3)
show(clf, "clf")
clf.export("clf.pkl")
clf2 = load_learner("clf.pkl")
probas, target, preds = clf2.get_X_preds(X[splits[1]], labels[splits[1]])
print("clf preds", tuple(probas.shape), fmt(probas[:3]), list(target[:4]), list(preds[:4]))

# --- get_ts_dls + ts_learner over tsai's models ------------------------------
dls = get_ts_dls(X, y, splits=splits, tfms=[None, TSClassification()], batch_tfms=TSStandardize(by_sample=True), bs=12)
xb, yb = dls.one_batch()
print("dls", dls.vars, dls.len, dls.c, tuple(xb.shape), type(xb).__name__, fmt(xb[0, 0, :4]), yb[:6].tolist())
for name, model in [("InceptionTime", InceptionTime(dls.vars, dls.c, nf=8, depth=3)),
                    ("TST", TST(dls.vars, dls.c, dls.len, n_layers=1, d_model=16, n_heads=2, d_ff=32)),
                    ("LSTM", LSTM(dls.vars, dls.c, hidden_size=16, n_layers=1)),
                    ("LSTM_FCN", LSTM_FCN(dls.vars, dls.c, dls.len, hidden_size=16, conv_layers=[8, 16, 8]))]:
    torch.manual_seed(1)
    learn = quiet(ts_learner(dls, model, metrics=accuracy))
    learn.fit_one_cycle(1, 1e-3)
    show(learn, name)
    valid_probas, valid_targets = learn.get_preds(dl=dls.valid)
    print(name, "valid", fmt(valid_probas[:2]))

# --- TSRegressor (TSTPlus) and TSForecaster ---------------------------------
yr = X[:, 0].mean(-1) * 3 + 0.1 * rng.randn(n).astype(np.float32)
reg = quiet(TSRegressor(X, yr.astype(np.float32), splits=splits, path=".", arch="TSTPlus",
                        arch_config=dict(n_layers=1, d_model=16, n_heads=2, d_ff=32),
                        tfms=[None, TSRegression()], batch_tfms=TSStandardize(by_sample=True),
                        metrics=rmse, bs=12))
reg.fit_one_cycle(1, 3e-3)
show(reg, "reg")
raw_preds, target, preds = reg.get_X_preds(X[splits[1]], yr[splits[1]])
print("reg preds", tuple(raw_preds.shape), fmt(raw_preds[:4]))

ts = (np.sin(np.arange(80) / 4) + 0.05 * rng.randn(80)).astype(np.float32)
Xw, yw = SlidingWindow(12, horizon=1)(ts)
wsplits = TimeSplitter(16, show_plot=False)(yw)
print("windows", Xw.shape, yw.shape, len(wsplits[0]), len(wsplits[1]))
fcst = quiet(TSForecaster(Xw, yw, splits=wsplits, path=".", tfms=[None, TSForecasting()],
                          batch_tfms=TSStandardize(), bs=16, arch="InceptionTimePlus",
                          arch_config=dict(nf=8, depth=2), metrics=mae))
fcst.fit_one_cycle(1, 1e-3)
show(fcst, "fcst")
raw_preds, target, preds = fcst.get_X_preds(Xw[wsplits[1]], yw[wsplits[1]])
print("fcst preds", tuple(raw_preds.shape), fmt(raw_preds[:4]))
