"""fastai beyond the vision quickstart, on synthetic data written or built in
the working folder (fastai's other applications and its mid-level API):
the tabular quickstart (TabularDataLoaders.from_df with
Categorify / FillMissing / Normalize, tabular_learner, fit_one_cycle,
get_preds, predict, test_dl), the mid-level API (Learner over a plain model
with fastai's SGD / ranger / Adam, a custom Callback, MixUp,
SaveModelCallback, EarlyStoppingCallback, fit_flat_cos, fit_sgdr, lr_find),
fastai's optimizer classes stepped by hand, a DataBlock of images with
aug_transforms and a small CNN trained on it (CutMix, TTA, interpretation,
hooks, channels last) and a plain PyTorch loop over them, collaborative filtering, an AWD-LSTM language model
and text classifier from scratch, and TensorBase /
TensorImage type propagation through __torch_function__."""
import random
import re

import numpy as np
import pandas as pd
import torch
from PIL import Image
from fastai.tabular.all import *
from fastai.vision.core import *
from fastai.vision.data import *
from fastai.vision.augment import *
from fastai.collab import *
from fastai.text.all import *
from fastai.callback.channelslast import *


def fmt(xs):
    return " ".join(f"{float(x):.5f}" for x in xs)


def quiet(learn):
    learn.remove_cb(ProgressCallback)      # no progress bars, no timing table
    learn.logger = noop
    return learn


def show(learn, what):
    for i, v in enumerate(learn.recorder.values):
        print(what, "epoch", i, fmt(v))
    print(what, "lrs", fmt(learn.recorder.lrs))
    print(what, "losses", fmt(learn.recorder.losses))


set_seed(0, reproducible=True)
torch.manual_seed(0)
random.seed(0)

# --- tabular ----------------------------------------------------------------
rng = np.random.RandomState(0)
n = 80
df = pd.DataFrame({
    "workclass": rng.choice(["private", "state", "self"], n),
    "education": rng.choice(["hs", "college", "masters", "phd"], n),
    "age": rng.randint(18, 70, n).astype(float),
    "hours": rng.normal(40, 8, n).round(1),
})
df.loc[rng.choice(n, 6, replace=False), "age"] = np.nan
score = (df["hours"] - 40) / 8 + (df["education"].isin(["masters", "phd"])) * 1.5
df["salary"] = np.where(score + rng.normal(0, 0.5, n) > 0.5, ">=50k", "<50k")

dls = TabularDataLoaders.from_df(
    df, path=".", procs=[Categorify, FillMissing, Normalize],
    cat_names=["workclass", "education"], cont_names=["age", "hours"],
    y_names="salary", valid_idx=list(range(64, 80)), bs=16, num_workers=0)
print("tabular classes", dls.vocab, "cats", dls.cat_names, "conts", dls.cont_names)
xc, xn, yb = dls.one_batch()
print("batch", tuple(xc.shape), xc.dtype, tuple(xn.shape), fmt(xn[:3].flatten()), yb[:6].flatten().tolist())
learn = quiet(tabular_learner(dls, layers=[20, 10], metrics=accuracy))
print(learn.model)
learn.fit_one_cycle(2, 1e-2)
show(learn, "tabular")
preds, targs = learn.get_preds()
print("tabular preds", tuple(preds.shape), fmt(preds[:5, 1]), targs[:5].flatten().tolist())
row, clas, probs = learn.predict(df.iloc[0])
print("tabular predict", int(clas), fmt(probs), fmt(row.items.iloc[0][["age", "hours"]]))
tdl = learn.dls.test_dl(df.iloc[:5].drop(columns="salary"))
tp, _ = learn.get_preds(dl=tdl)
print("tabular test_dl", fmt(tp[:, 1]))
learn.export("tabular.pkl")
learn_inf = load_learner("tabular.pkl")
learn_inf.remove_cb(ProgressCallback)
row, clas, probs = learn_inf.predict(df.iloc[1])
print("tabular exported predict", int(clas), fmt(probs))

# --- the mid-level API: a plain model, optimizers, callbacks, schedules ------
x = torch.randn(96, 8)
y = ((x[:, 0] + 0.5 * x[:, 1]) > 0).long()
items = list(zip(x, y))
dls2 = DataLoaders.from_dsets(items[:64], items[64:], bs=16, num_workers=0)


def net():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


class Tally(Callback):
    "Counts batches and keeps every training loss and the lr it was taken at."
    order = 60

    def before_fit(self):
        self.batches, self.seen = 0, []

    def after_batch(self):
        if self.training:
            self.batches += 1
            self.seen.append((self.loss.item(), self.opt.hypers[-1]["lr"]))


set_seed(1, reproducible=True)
tally = Tally()
learn = quiet(Learner(dls2, net(), loss_func=CrossEntropyLossFlat(), opt_func=partial(SGD, mom=0.9),
                      metrics=accuracy, cbs=tally))
learn.fit_flat_cos(2, lr=0.1)
show(learn, "sgd flat_cos")
print("tally", tally.batches, " ".join(f"{l:.5f}@{r:.5f}" for l, r in tally.seen))

set_seed(2, reproducible=True)
learn = quiet(Learner(dls2, net(), loss_func=CrossEntropyLossFlat(), opt_func=ranger,
                      metrics=accuracy))
learn.fit_sgdr(2, 1, lr_max=1e-2)
show(learn, "ranger sgdr")

set_seed(3, reproducible=True)
learn = quiet(Learner(dls2, net(), loss_func=CrossEntropyLossFlat(), opt_func=Adam,
                      metrics=accuracy,
                      cbs=[MixUp(0.4), SaveModelCallback(monitor="valid_loss", fname="best"),
                           EarlyStoppingCallback(monitor="valid_loss", patience=1)]))
learn.fit(3, 1e-2)
show(learn, "adam mixup")
print("best saved", (Path("models") / "best.pth").exists(),
      f"{learn.model[0].weight.sum().item():.5f}")

set_seed(4, reproducible=True)
learn = quiet(Learner(dls2, net(), loss_func=CrossEntropyLossFlat(), opt_func=Adam))
sug = learn.lr_find(start_lr=1e-4, end_lr=1, num_it=6, show_plot=False)
print("lr_find", fmt(sug), fmt(learn.recorder.losses))

# freeze / unfreeze over a splitter, discriminative lrs, gradient accumulation
# and clipping, a CSV log, ReduceLROnPlateau, more metrics, the summary
def net_bn():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.BatchNorm1d(16), nn.Linear(16, 2))


set_seed(6, reproducible=True)
learn = quiet(Learner(dls2, net_bn(), loss_func=CrossEntropyLossFlat(),
                      metrics=[accuracy, F1Score(), RocAucBinary()],
                      splitter=lambda m: [params(m[:3]), params(m[3:])],
                      cbs=[GradientAccumulation(32), GradientClip(0.5), CSVLogger(),
                           ReduceLROnPlateau(monitor="valid_loss", patience=0, factor=2.)]))
learn.freeze()
print("frozen", [p.requires_grad for p in learn.model.parameters()])
learn.fit(1, 1e-2)
learn.unfreeze()
learn.fit(2, slice(1e-3, 1e-2))
show(learn, "accum")
print("csv rows", len(pd.read_csv("history.csv")))
print(re.sub(r" at 0x[0-9a-f]+", "", learn.summary()))

# fastai's mixed precision (its autocast and GradScaler are CUDA's: disabled on a CPU)
set_seed(7, reproducible=True)
learn = quiet(Learner(dls2, net_bn(), loss_func=CrossEntropyLossFlat(), metrics=accuracy))
learn.to_fp16()
learn.fit(1, 1e-2)
show(learn, "fp16")

# --- fastai's optimizers stepped by hand --------------------------------------
opts = {"SGD": partial(SGD, mom=0.9, wd=1e-2), "RMSProp": partial(RMSProp, mom=0.9),
        "Adam": partial(Adam, wd=0.1), "RAdam": RAdam, "QHAdam": QHAdam,
        "Larc": partial(Larc, mom=0.9), "Lamb": Lamb, "ranger": ranger,
        "OptimWrapper(AdamW)": partial(OptimWrapper, opt=torch.optim.AdamW)}
for name, make in opts.items():
    torch.manual_seed(5)
    w = nn.Parameter(torch.randn(4, 3))
    opt = make([w], lr=0.05)
    for step in range(3):
        opt.zero_grad()
        loss = ((w * torch.arange(12.).view(4, 3)) ** 2).mean()
        loss.backward()
        opt.step()
    print("opt", name, fmt(w.detach().flatten()[:6]))

# --- a DataBlock of images with batch augmentations ----------------------------
img_path = Path("shapes")
img_path.mkdir(exist_ok=True)
for i in range(8):
    arr = np.zeros((20, 20, 3), np.uint8)
    arr[4:16, 4:16, i % 3] = 200 + i
    Image.fromarray(arr).save(img_path / f"{['red', 'green', 'blue'][i % 3]}_{i}.png")
block = DataBlock(blocks=(ImageBlock, CategoryBlock), get_items=get_image_files,
                  splitter=RandomSplitter(0.25, seed=7), get_y=using_attr(RegexLabeller(r"^([a-z]+)_"), "name"),
                  item_tfms=Resize(16), batch_tfms=aug_transforms(size=12, max_rotate=20.))
set_seed(5, reproducible=True)
idls = block.dataloaders(img_path, bs=4, num_workers=2)     # (fastai shards batches over workers)
xb, yb = idls.one_batch()
print("datablock", idls.vocab, type(xb).__name__, tuple(xb.shape), yb.tolist(),
      f"{xb.mean().item():.5f} {xb.std().item():.5f}", fmt(xb[0, :, 6, 6]))

# a small CNN on them: CutMix, label smoothing, activation stats, TTA, the
# interpretation's confusion matrix and top losses, hooks, focal loss,
# channels-last training
set_seed(6, reproducible=True)
cnn = nn.Sequential(ConvLayer(3, 8, stride=2), ConvLayer(8, 16, stride=2), ResBlock(1, 16, 16),
                    AdaptiveConcatPool2d(), Flatten(), nn.Linear(32, 3))
learn = quiet(Learner(idls, cnn, loss_func=LabelSmoothingCrossEntropy(), metrics=accuracy,
                      cbs=[CutMix(1.), ActivationStats(every=None)]))
learn.fit_one_cycle(2, 1e-2)
show(learn, "cutmix")
st = learn.activation_stats.stats
print("activation stats", len(st), len(st[0]), fmt([st[-1][0]["mean"], st[-1][0]["std"], st[-1][0]["near_zero"]]))
preds, targs = learn.tta(n=2)
print("tta", fmt(preds.flatten()), targs.tolist())
interp = ClassificationInterpretation.from_learner(learn)
print("confusion", interp.confusion_matrix().tolist(), fmt(interp.top_losses(2)[0]))
with hook_outputs(learn.model[:3]) as hooks:
    learn.model.eval()
    learn.model(idls.one_batch()[0])
    print("hooks", [tuple(h.stored.shape) for h in hooks], fmt([h.stored.mean() for h in hooks]))
learn.loss_func = FocalLossFlat()
print("focal", fmt(learn.validate()))
learn.to_channelslast(use_amp=False)
learn.fit(1, 1e-3)
show(learn, "channels_last")
print("channels_last weight", learn.model[0][0].weight.is_contiguous(memory_format=torch.channels_last))

# a plain PyTorch loop over fastai's DataLoaders: the TensorImage batch keeps its
# type through torch modules, fastai's loss takes it with a TensorCategory target
set_seed(9, reproducible=True)
plain = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(4, 3))
sgd = torch.optim.SGD(plain.parameters(), lr=0.1)
loss_fn = CrossEntropyLossFlat()
for epoch in range(2):
    for xb, yb in idls.train:
        sgd.zero_grad()
        out = plain(xb)
        loss = loss_fn(out, yb)
        loss.backward()
        sgd.step()
        print("plain loop", epoch, type(xb).__name__, type(out).__name__, type(loss).__name__,
              f"{loss.item():.5f}")
with torch.no_grad():
    for xb, yb in idls.valid:
        out = plain(xb)
        hit = out.argmax(1) == yb
        print("plain valid", type(out).__name__, type(hit).__name__, hit.tolist())

# --- collaborative filtering ----------------------------------------------------
rng = np.random.RandomState(1)
ratings = pd.DataFrame({"user": rng.randint(0, 12, 150), "movie": rng.randint(0, 15, 150)})
ratings["rating"] = ((ratings.user % 3) + (ratings.movie % 4) * 0.7 + rng.normal(0, .3, 150)).round(1)
set_seed(7, reproducible=True)
cdls = CollabDataLoaders.from_df(ratings, bs=32, seed=2, num_workers=0)
learn = quiet(collab_learner(cdls, n_factors=5, y_range=(0, 5.5)))
learn.fit_one_cycle(2, 5e-3, wd=0.1)
show(learn, "collab")
print("collab bias", fmt(learn.model.bias(cdls.classes["movie"][1:4], is_item=True)),
      fmt(learn.model.weight(cdls.classes["user"][1:2], is_item=False)[0]))
learn = quiet(collab_learner(cdls, use_nn=True, layers=[10], emb_szs={"user": 4, "movie": 4},
                             y_range=(0, 5.5)))
learn.fit(1, 5e-3)
show(learn, "collab nn")

# --- text: an AWD-LSTM language model from scratch, then a classifier -----------
# (BaseTokenizer splits on spaces: spacy's tokenizer needs its language data)
set_seed(8, reproducible=True)
rng = np.random.RandomState(2)
good, bad = "great fine lovely superb nice good".split(), "awful bad poor boring dull terrible".split()
filler = "the movie was a plot and acting with some scenes".split()
rows = []
for i in range(48):
    words = list(rng.choice(filler, 8)) + list(rng.choice(good if i % 2 == 0 else bad, 3))
    rng.shuffle(words)
    rows.append((" ".join(words), "pos" if i % 2 == 0 else "neg", i >= 36))
tdf = pd.DataFrame(rows, columns=["text", "label", "is_valid"])
dls_lm = DataBlock(blocks=TextBlock.from_df("text", is_lm=True, tok=BaseTokenizer(), n_workers=0),
                   get_x=ColReader("text"), splitter=ColSplitter()
                   ).dataloaders(tdf, bs=4, seq_len=12, num_workers=0)
print("text vocab", len(dls_lm.vocab), dls_lm.vocab[:12])
xb, yb = dls_lm.one_batch()
print("lm batch", type(xb).__name__, tuple(xb.shape), xb[0].tolist()[:8], yb[0].tolist()[:8])
cfg = awd_lstm_lm_config.copy()
cfg.update(emb_sz=16, n_hid=24, n_layers=2)
learn = quiet(language_model_learner(dls_lm, AWD_LSTM, config=cfg, pretrained=False,
                                     metrics=[accuracy, Perplexity()]))
learn.fit_one_cycle(1, 1e-2)
show(learn, "lm")
learn.save_encoder("enc")
print("lm predict", learn.predict("the movie", n_words=4, temperature=0.75, no_bar=True))
dls_clas = DataBlock(blocks=(TextBlock.from_df("text", vocab=dls_lm.vocab, tok=BaseTokenizer(),
                                               n_workers=0), CategoryBlock),
                     get_x=ColReader("text"), get_y=ColReader("label"), splitter=ColSplitter()
                     ).dataloaders(tdf, bs=8, seq_len=12, num_workers=0)
ccfg = awd_lstm_clas_config.copy()
ccfg.update(emb_sz=16, n_hid=24, n_layers=2)
learn = quiet(text_classifier_learner(dls_clas, AWD_LSTM, config=ccfg, pretrained=False,
                                      drop_mult=0.5, metrics=accuracy))
learn.load_encoder("enc")
learn.fit_one_cycle(1, 1e-2)
learn.freeze_to(-2)
learn.fit_one_cycle(1, slice(1e-3, 1e-2))
show(learn, "text classifier")
label, idx, probs = learn.predict("the movie was great and superb")
print("text predict", label, int(idx), fmt(probs))

# --- TensorBase subclasses keep their type through torch functions --------------
t = TensorImage(torch.rand(2, 3, 4, 4))
m = TensorMask(torch.ones(2, 4, 4))
tb = TensorBase(torch.arange(4.), img_size=(4, 4))
print("types", type(t + 1).__name__, type(t.mean((2, 3))).__name__, type(torch.cat([t, t])).__name__,
      type(t[0]).__name__, type(F.relu(t)).__name__, type(m.long()).__name__,
      type(t * m[:, None]).__name__, type(torch.stack([m, m])).__name__)
print("metadata", (tb * 2).img_size, type(tb.new_ones(2)).__name__, type(tb.clone()).__name__,
      type(TensorImageBW(torch.zeros(1, 2, 2)) + 1).__name__)
print("values", fmt((t * 2 - 1).sum((1, 2, 3))), fmt(torch.cat([t, t]).mean((1, 2, 3))))
cast_t = cast(torch.ones(2), TensorCategory)
print("cast", type(cast_t).__name__, type(retain_type(torch.zeros(2), t)).__name__)
torch.save(t, "timg.pt")
t2 = torch.load("timg.pt", weights_only=False)
print("saved", type(t2).__name__, bool((t2 == t).all()))
