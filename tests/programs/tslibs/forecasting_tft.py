"""pytorch-forecasting as its README / tutorials use it, on a tiny synthetic
pandas panel: TimeSeriesDataSet (group normalizer, categorical encoders,
lags-free known / unknown reals), TemporalFusionTransformer.from_dataset
trained one epoch by a lightning Trainer (QuantileLoss), predict with
mode="raw" and interpret_output, a checkpoint saved and reloaded with
load_from_checkpoint, then NBeats, N-HiTS and DeepAR from their datasets,
and RecurrentNetwork, TiDE, TimeXer and DeepAR under a negative-binomial
and a low-rank multivariate normal loss."""
import random
import warnings

import numpy as np
import pandas as pd
import torch
import lightning.pytorch as pl
from pytorch_forecasting import (DeepAR, NBeats, NHiTS, TemporalFusionTransformer,
                                 TimeSeriesDataSet)
from pytorch_forecasting.data import GroupNormalizer, NaNLabelEncoder
from pytorch_forecasting.metrics import (MultivariateNormalDistributionLoss,
                                         NegativeBinomialDistributionLoss,
                                         NormalDistributionLoss, QuantileLoss)
from pytorch_forecasting.models import RecurrentNetwork, TiDEModel, TimeXer

warnings.filterwarnings("ignore")


def fmt(xs):
    return " ".join(f"{float(x):.5f}" for x in torch.as_tensor(xs).flatten())


def trainer():
    return pl.Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=1,
                      logger=False, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, accelerator="cpu", gradient_clip_val=0.1)


torch.manual_seed(0)
random.seed(0)
pl.seed_everything(0, verbose=False)

rng = np.random.RandomState(0)
rows = []
for g in range(3):
    level = 5.0 + 2 * g
    for t in range(30):
        rows.append({"time_idx": t, "series": f"s{g}", "kind": "ab"[g % 2],
                     "month": str(t % 12),
                     "value": level + np.sin(t / 3.0 + g) + 0.1 * rng.randn(),
                     "temp": np.cos(t / 5.0) + 0.05 * rng.randn()})
data = pd.DataFrame(rows)
max_encoder_length, max_prediction_length = 8, 3
cutoff = data["time_idx"].max() - max_prediction_length

training = TimeSeriesDataSet(
    data[lambda x: x.time_idx <= cutoff],
    time_idx="time_idx", target="value", group_ids=["series"],
    min_encoder_length=max_encoder_length // 2, max_encoder_length=max_encoder_length,
    min_prediction_length=1, max_prediction_length=max_prediction_length,
    static_categoricals=["series", "kind"],
    time_varying_known_categoricals=["month"],
    time_varying_known_reals=["time_idx", "temp"],
    time_varying_unknown_reals=["value"],
    target_normalizer=GroupNormalizer(groups=["series"], transformation="softplus"),
    categorical_encoders={"month": NaNLabelEncoder(add_nan=True)},
    add_relative_time_idx=True, add_target_scales=True, add_encoder_length=True,
)
validation = TimeSeriesDataSet.from_dataset(training, data, predict=True, stop_randomization=True)
print("dataset", len(training), len(validation))
params = training.get_parameters()
print("reals", params["time_varying_unknown_reals"], params["time_varying_known_reals"])
train_dl = training.to_dataloader(train=True, batch_size=8, num_workers=0)
val_dl = validation.to_dataloader(train=False, batch_size=8, num_workers=0)
x, y = next(iter(val_dl))
print("batch", sorted(x), tuple(x["encoder_cont"].shape), fmt(x["encoder_cont"][0, :2]),
      tuple(y[0].shape), fmt(y[0][0]))

tft = TemporalFusionTransformer.from_dataset(
    training, learning_rate=0.03, hidden_size=8, attention_head_size=2, dropout=0.1,
    hidden_continuous_size=4, loss=QuantileLoss(), log_interval=-1, reduce_on_plateau_patience=4)
print("tft parameters", sum(p.numel() for p in tft.parameters()))
tr = trainer()
tr.fit(tft, train_dataloaders=train_dl, val_dataloaders=val_dl)
print("tft fit", {k: f"{float(v):.5f}" for k, v in sorted(tr.callback_metrics.items())})

raw = tft.predict(val_dl, mode="raw", return_x=True, trainer_kwargs=dict(accelerator="cpu", logger=False, enable_progress_bar=False))
print("raw", tuple(raw.output.prediction.shape), fmt(raw.output.prediction[0, :, 3]))
interp = tft.interpret_output(raw.output, reduction="sum")
for k in sorted(interp):
    print("interpret", k, tuple(interp[k].shape), fmt(interp[k].flatten()[:6]))
pred = tft.predict(val_dl, trainer_kwargs=dict(accelerator="cpu", logger=False, enable_progress_bar=False))
print("predict", tuple(pred.shape), fmt(pred))

# the checkpoint round trip the tutorials do (best_model_path -> load_from_checkpoint)
tr.save_checkpoint("tft.ckpt")
best = TemporalFusionTransformer.load_from_checkpoint("tft.ckpt")
pred2 = best.predict(val_dl, trainer_kwargs=dict(accelerator="cpu", logger=False, enable_progress_bar=False))
print("reloaded", type(best).__name__, best.hparams.hidden_size, bool(torch.equal(pred, pred2)),
      sorted(torch.load("tft.ckpt", weights_only=False))[:6])

# --- N-BEATS: only the target, fixed lengths ----------------------------------
nb_train = TimeSeriesDataSet(
    data[lambda x: x.time_idx <= cutoff], time_idx="time_idx", target="value",
    group_ids=["series"], time_varying_unknown_reals=["value"],
    max_encoder_length=max_encoder_length, max_prediction_length=max_prediction_length)
nb_val = TimeSeriesDataSet.from_dataset(nb_train, data, min_prediction_idx=cutoff + 1)
nbeats = NBeats.from_dataset(nb_train, learning_rate=1e-2, widths=[16, 16], backcast_loss_ratio=0.1,
                             log_interval=-1)
tr = trainer()
tr.fit(nbeats, train_dataloaders=nb_train.to_dataloader(train=True, batch_size=8, num_workers=0),
       val_dataloaders=nb_val.to_dataloader(train=False, batch_size=8, num_workers=0))
print("nbeats fit", {k: f"{float(v):.5f}" for k, v in sorted(tr.callback_metrics.items())})
p = nbeats.predict(nb_val.to_dataloader(train=False, batch_size=8, num_workers=0),
                   trainer_kwargs=dict(accelerator="cpu", logger=False, enable_progress_bar=False))
print("nbeats predict", tuple(p.shape), fmt(p))

# --- N-HiTS: known covariates, a quantile loss ------------------------------
nh_train = TimeSeriesDataSet(
    data[lambda x: x.time_idx <= cutoff], time_idx="time_idx", target="value",
    group_ids=["series"], time_varying_known_reals=["temp"], time_varying_unknown_reals=["value"],
    max_encoder_length=max_encoder_length, max_prediction_length=max_prediction_length)
nh_val = TimeSeriesDataSet.from_dataset(nh_train, data, predict=True, stop_randomization=True)
nhits = NHiTS.from_dataset(nh_train, learning_rate=1e-2, hidden_size=16, n_blocks=[1, 1, 1],
                           loss=QuantileLoss(), log_interval=-1)
tr = trainer()
tr.fit(nhits, train_dataloaders=nh_train.to_dataloader(train=True, batch_size=8, num_workers=0),
       val_dataloaders=nh_val.to_dataloader(train=False, batch_size=8, num_workers=0))
print("nhits fit", {k: f"{float(v):.5f}" for k, v in sorted(tr.callback_metrics.items())})
p = nhits.predict(nh_val.to_dataloader(train=False, batch_size=8, num_workers=0), mode="quantiles",
                  trainer_kwargs=dict(accelerator="cpu", logger=False, enable_progress_bar=False))
print("nhits quantiles", tuple(p.shape), fmt(p[0]))

# --- DeepAR: a distribution loss, sampled predictions --------------------------
ar_train = TimeSeriesDataSet(
    data[lambda x: x.time_idx <= cutoff], time_idx="time_idx", target="value",
    group_ids=["series"], static_categoricals=["series"],
    time_varying_known_reals=["temp"], time_varying_unknown_reals=["value"],
    target_normalizer=GroupNormalizer(groups=["series"]),
    max_encoder_length=max_encoder_length, max_prediction_length=max_prediction_length)
ar_val = TimeSeriesDataSet.from_dataset(ar_train, data, predict=True, stop_randomization=True)
train_dl = ar_train.to_dataloader(train=True, batch_size=8, num_workers=0)
val_dl = ar_val.to_dataloader(train=False, batch_size=8, num_workers=0)
deepar = DeepAR.from_dataset(ar_train, learning_rate=1e-2, hidden_size=8, rnn_layers=2,
                             loss=NormalDistributionLoss(), log_interval=-1)
tr = trainer()
tr.fit(deepar, train_dataloaders=train_dl, val_dataloaders=val_dl)
print("deepar fit", {k: f"{float(v):.5f}" for k, v in sorted(tr.callback_metrics.items())})
torch.manual_seed(1)
p = deepar.predict(val_dl, mode="quantiles", n_samples=20,
                   trainer_kwargs=dict(accelerator="cpu", logger=False, enable_progress_bar=False))
print("deepar quantiles", tuple(p.shape), fmt(p[0, 0]))

# --- more models and distribution losses ------------------------------------
data["count"] = rng.poisson(3 + data["series"].str[1:].astype(int)).astype(float)


def small(target="value", **kw):
    spec = dict(time_idx="time_idx", target=target, group_ids=["series"],
                time_varying_known_reals=["temp"], time_varying_unknown_reals=[target],
                max_encoder_length=max_encoder_length, max_prediction_length=max_prediction_length)
    spec.update(kw)
    tr = TimeSeriesDataSet(data[lambda x: x.time_idx <= cutoff], **spec)
    va = TimeSeriesDataSet.from_dataset(tr, data, predict=True, stop_randomization=True)
    return (tr, tr.to_dataloader(train=True, batch_size=8, num_workers=0),
            va.to_dataloader(train=False, batch_size=8, num_workers=0))


more = [
    ("RecurrentNetwork", dict(static_categoricals=["series"]),
     lambda tr: RecurrentNetwork.from_dataset(tr, cell_type="GRU", hidden_size=8, rnn_layers=2,
                                              log_interval=-1)),
    ("TiDE", {}, lambda tr: TiDEModel.from_dataset(tr, hidden_size=8, temporal_width_future=2,
                                                   temporal_decoder_hidden=8, output_chunk_length=3,
                                                   input_chunk_length=8, log_interval=-1)),
    ("TimeXer", {}, lambda tr: TimeXer.from_dataset(tr, hidden_size=8, n_heads=2, e_layers=1, d_ff=16,
                                                    patch_length=4, context_length=8,
                                                    prediction_length=3, log_interval=-1)),
    ("DeepAR-negbin", dict(target="count", target_normalizer=GroupNormalizer(groups=["series"], center=False)),
     lambda tr: DeepAR.from_dataset(tr, hidden_size=8, rnn_layers=1, log_interval=-1,
                                    loss=NegativeBinomialDistributionLoss())),
    ("DeepAR-mvnormal", dict(target_normalizer=GroupNormalizer(groups=["series"])),
     lambda tr: DeepAR.from_dataset(tr, hidden_size=8, rnn_layers=1, log_interval=-1,
                                    loss=MultivariateNormalDistributionLoss(rank=2))),
]
for name, spec, make in more:
    torch.manual_seed(1)
    tr_ds, tdl, vdl = small(**spec)
    model = make(tr_ds)
    tr = trainer()
    tr.fit(model, tdl, vdl)
    print(name, "fit", {k: f"{float(v):.5f}" for k, v in sorted(tr.callback_metrics.items())})
    torch.manual_seed(3)
    p = model.predict(vdl, trainer_kwargs=dict(accelerator="cpu", logger=False, enable_progress_bar=False))
    print(name, "predict", tuple(p.shape), fmt(p))
