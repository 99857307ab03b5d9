"""tsai as its README writes it, on tiny synthetic arrays (no downloads):
TSClassifier with InceptionTimePlus (TSClassification / TSStandardize,
fit_one_cycle, export and load_learner, get_X_preds), get_ts_dls +
ts_learner over InceptionTime / TST / LSTM / LSTM_FCN, a TSRegressor with
TSTPlus, a TSForecaster on a SlidingWindow split by TimeSplitter, and two
dozen more of tsai's architectures forward and backward in training mode
and forward in eval mode."""
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
from tsai.models.all import (FCN, ConvTranPlus, GRU, MLP, MLSTM_FCN, TCN, XCM, FCNPlus, GRUAttention,
                             InceptionTimePlus, LSTMPlus, OmniScaleCNN, PatchTST, ResCNN,
                             ResNet, ResNetPlus, TransformerModel, TransformerRNNPlus, TSiTPlus,
                             TSPerceiver, TSSequencerPlus, TSTPlus, XCMPlus, XceptionTime,
                             XceptionTimePlus, gMLP, mWDN, xresnet1d18)


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

# --- more of tsai's architectures -------------------------------------------
c_out, bs = 2, 4
torch.manual_seed(0)
x = torch.randn(bs, c_in, seq_len)
zoo = {
    "FCN": lambda: FCN(c_in, c_out, layers=[8, 16, 8]),
    "FCNPlus": lambda: FCNPlus(c_in, c_out, layers=[8, 16, 8]),
    "ResNet": lambda: ResNet(c_in, c_out),
    "ResNetPlus": lambda: ResNetPlus(c_in, c_out, nf=8),
    "ResCNN": lambda: ResCNN(c_in, c_out),
    "XceptionTime": lambda: XceptionTime(c_in, c_out, nf=4),
    "XceptionTimePlus": lambda: XceptionTimePlus(c_in, c_out, nf=4),
    "OmniScaleCNN": lambda: OmniScaleCNN(c_in, c_out, seq_len),
    "TCN": lambda: TCN(c_in, c_out, layers=[8, 8], ks=3),
    "mWDN": lambda: mWDN(c_in, c_out, seq_len, levels=2),
    "XCM": lambda: XCM(c_in, c_out, seq_len, nf=8),
    "XCMPlus": lambda: XCMPlus(c_in, c_out, seq_len, nf=8),
    "gMLP": lambda: gMLP(c_in, c_out, seq_len, patch_size=2, d_model=16, d_ffn=32, depth=2),
    "MLP": lambda: MLP(c_in, c_out, seq_len, layers=[16, 16], ps=[0.1, 0.1]),
    "GRU": lambda: GRU(c_in, c_out, hidden_size=8, bidirectional=True),
    "LSTMPlus": lambda: LSTMPlus(c_in, c_out, seq_len, hidden_size=[8, 8]),
    "GRUAttention": lambda: GRUAttention(c_in, c_out, seq_len, hidden_size=8, n_heads=2, d_ff=16,
                                         encoder_layers=1),
    "MLSTM_FCN": lambda: MLSTM_FCN(c_in, c_out, seq_len, hidden_size=8, conv_layers=[8, 8, 8]),
    "TSTPlus": lambda: TSTPlus(c_in, c_out, seq_len, n_layers=1, d_model=16, n_heads=2, d_ff=16),
    "TSiTPlus": lambda: TSiTPlus(c_in, c_out, seq_len, depth=1, d_model=16, n_heads=2),
    "PatchTST": lambda: PatchTST(c_in, c_out, seq_len, pred_dim=3, n_layers=1, d_model=16, n_heads=2,
                                 d_ff=16, patch_len=4, stride=2),
    "TransformerModel": lambda: TransformerModel(c_in, c_out, d_model=16, n_head=2, d_ffn=16, n_layers=1),
    "TSPerceiver": lambda: TSPerceiver(c_in, c_out, seq_len, n_latents=8, d_latent=16,
                                       self_per_cross_attn=1, n_layers=1),
    "TSSequencerPlus": lambda: TSSequencerPlus(c_in, c_out, seq_len, d_model=16, depth=1),
    "xresnet1d18": lambda: xresnet1d18(c_in, c_out),
    # (its encoder dropout's input is a permuted activation plus a table,
    # whose memory order decides the dropout mask)
    "ConvTranPlus": lambda: ConvTranPlus(c_in, c_out, seq_len, d_model=16, dim_ff=32),
    "InceptionTimePlus": lambda: InceptionTimePlus(c_in, c_out, nf=4, depth=3),
    "TransformerRNNPlus": lambda: TransformerRNNPlus(c_in, c_out, seq_len, d_model=16, nhead=2,
                                                     dim_feedforward=16, num_encoder_layers=1,
                                                     num_rnn_layers=1),
}
for name, make in zoo.items():
    torch.manual_seed(1)
    np.random.seed(1)                  # mWDN draws its wavelet weights with numpy
    m = make().train()
    torch.manual_seed(2)
    out = m(x)
    out.pow(2).mean().backward()
    gsum = sum(float(p.grad.abs().sum()) for p in m.parameters() if p.grad is not None)
    with torch.no_grad():
        ev = m.eval()(x)
    print("zoo", name, tuple(out.shape), fmt(out.detach().flatten()[:4]), f"{gsum:.4f}", fmt(ev.flatten()[:4]))
