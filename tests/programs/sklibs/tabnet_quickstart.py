"""pytorch-tabnet as its README uses it: a TabNetClassifier (with a
categorical feature embedded) and a TabNetRegressor fitted on small
synthetic data for two epochs (eval_set, eval_metric, patience,
batch_size, virtual_batch_size, a StepLR scheduler), predict /
predict_proba, explain, feature_importances_, save_model / load_model (a
zip in the working folder), a multi-task classifier, TabNetPretrainer
self-supervised pretraining whose weights start a classifier, class
weights (a WeightedRandomSampler), SMOTE augmentations, grouped features,
a custom metric and loss, warm_start."""
import random
import warnings

import numpy as np
import torch

from pytorch_tabnet.multitask import TabNetMultiTaskClassifier
from pytorch_tabnet.pretraining import TabNetPretrainer
from pytorch_tabnet.tab_model import TabNetClassifier, TabNetRegressor

warnings.filterwarnings("ignore")
torch.manual_seed(0)
random.seed(0)
np.random.seed(0)

rng = np.random.RandomState(0)
N, F = 96, 6
X = rng.randn(N, F).astype(np.float32)
X[:, 0] = rng.randint(0, 4, N)                       # a categorical column
y = ((X[:, 1] + 0.5 * X[:, 2] - 0.3 * X[:, 0]) > 0).astype(np.int64)
X_train, y_train, X_valid, y_valid = X[:64], y[:64], X[64:], y[64:]


def arr(a, n=4):
    return np.array2string(np.asarray(a)[:n], precision=5, suppress_small=True)


clf = TabNetClassifier(
    n_d=8, n_a=8, n_steps=3, gamma=1.3, n_independent=2, n_shared=2,
    cat_idxs=[0], cat_dims=[4], cat_emb_dim=2,
    optimizer_fn=torch.optim.Adam, optimizer_params=dict(lr=2e-2),
    scheduler_params={"step_size": 1, "gamma": 0.9},
    scheduler_fn=torch.optim.lr_scheduler.StepLR,
    mask_type="sparsemax", seed=0, verbose=0,
)
clf.fit(
    X_train, y_train,
    eval_set=[(X_train, y_train), (X_valid, y_valid)],
    eval_name=["train", "valid"],
    eval_metric=["auc", "accuracy", "logloss"],
    max_epochs=2, patience=2,
    batch_size=32, virtual_batch_size=16,
    drop_last=False,
)
print("history keys", sorted(clf.history.history))
for k in sorted(clf.history.history):
    print(" ", k, [f"{v:.5f}" for v in clf.history[k]])
print("best", clf.best_epoch, f"{clf.best_cost:.5f}")
preds = clf.predict(X_valid)
print("predict", preds.tolist())
proba = clf.predict_proba(X_valid)
print("proba", arr(proba))
print("feature_importances_", arr(clf.feature_importances_, F))
explain_matrix, masks = clf.explain(X_valid)
print("explain", explain_matrix.shape, arr(explain_matrix, 2))
print("masks", sorted(masks), [m.shape for m in masks.values()], arr(masks[0], 2))
explain_norm, _ = clf.explain(X_valid[:4], normalize=True)
print("explain normalized", arr(explain_norm, 2))

saved = clf.save_model("tabnet_clf")
loaded = TabNetClassifier()
loaded.load_model(saved)
print("loaded predict equal", np.allclose(loaded.predict_proba(X_valid), proba, atol=1e-6))
print("loaded params", loaded.n_d, loaded.n_steps, loaded.mask_type, loaded.cat_dims)

# regression, entmax masks, multiple targets
yr = np.stack([X[:, 1] * 2 + X[:, 3], X[:, 2] - X[:, 4]], 1).astype(np.float32)
reg = TabNetRegressor(n_d=8, n_a=8, n_steps=2, mask_type="entmax", seed=1, verbose=0,
                      optimizer_params=dict(lr=2e-2))
reg.fit(X[:64], yr[:64], eval_set=[(X[64:], yr[64:])], eval_metric=["rmse", "mae", "mse"],
        max_epochs=2, patience=5, batch_size=32, virtual_batch_size=16)
print("regressor history", {k: [f"{v:.5f}" for v in vs] for k, vs in reg.history.history.items()})
print("regressor predict", arr(reg.predict(X[64:])))
print("regressor importances", arr(reg.feature_importances_, F))

# multi-task classification
y_multi = np.stack([y, (X[:, 3] > 0).astype(np.int64)], 1)
mt = TabNetMultiTaskClassifier(n_d=8, n_a=8, n_steps=2, seed=2, verbose=0)
mt.fit(X[:64], y_multi[:64], eval_set=[(X[64:], y_multi[64:])], max_epochs=2, patience=5,
       batch_size=32, virtual_batch_size=16)
mt_preds = mt.predict(X[64:72])
print("multitask predict", [p.tolist() for p in mt_preds])
print("multitask proba", [arr(p, 2) for p in mt.predict_proba(X[64:72])])

# self-supervised pretraining, then a classifier started from it
pre = TabNetPretrainer(n_d=8, n_a=8, n_steps=2, seed=3, verbose=0,
                       optimizer_params=dict(lr=2e-2), mask_type="sparsemax")
pre.fit(X_train=X_train, eval_set=[X_valid], pretraining_ratio=0.5, max_epochs=2,
        patience=5, batch_size=32, virtual_batch_size=16)
print("pretrainer history", {k: [f"{v:.5f}" for v in vs] for k, vs in pre.history.history.items()})
rec, emb = pre.predict(X_valid[:3])
print("pretrainer predict", rec.shape, emb.shape, arr(rec, 1))
clf2 = TabNetClassifier(seed=4, verbose=0, optimizer_params=dict(lr=2e-2))
clf2.fit(X_train, y_train, eval_set=[(X_valid, y_valid)], from_unsupervised=pre, max_epochs=1,
         batch_size=32, virtual_batch_size=16)
print("from_unsupervised proba", arr(clf2.predict_proba(X_valid), 3))
# class balancing (a WeightedRandomSampler), SMOTE augmentation, grouped
# features, a custom metric and loss, then warm-started training
from pytorch_tabnet.augmentations import ClassificationSMOTE, RegressionSMOTE  # noqa: E402
from pytorch_tabnet.metrics import Metric  # noqa: E402


class Gini(Metric):
    def __init__(self):
        self._name = "gini"
        self._maximize = True

    def __call__(self, y_true, y_score):
        from sklearn.metrics import roc_auc_score
        return max(2 * roc_auc_score(y_true, y_score[:, 1]) - 1, 0.)


clf3 = TabNetClassifier(n_d=8, n_a=8, n_steps=2, seed=5, verbose=0, momentum=0.1,
                        lambda_sparse=1e-4, grouped_features=[[1, 2], [4, 5]],
                        optimizer_params=dict(lr=2e-2))
clf3.fit(X_train, y_train, eval_set=[(X_valid, y_valid)], eval_metric=[Gini, "balanced_accuracy"],
         weights=1, augmentations=ClassificationSMOTE(p=0.5, seed=6), max_epochs=2,
         patience=3, batch_size=32, virtual_batch_size=16,
         loss_fn=torch.nn.CrossEntropyLoss(label_smoothing=0.05))
print("balanced + smote history", {k: [f"{v:.5f}" for v in vs] for k, vs in clf3.history.history.items()})
print("grouped importances", arr(clf3.feature_importances_, F))
clf3.fit(X_train, y_train, eval_set=[(X_valid, y_valid)], max_epochs=1, batch_size=32,
         virtual_batch_size=16, warm_start=True, weights={0: 1.0, 1: 2.0})
print("warm start proba", arr(clf3.predict_proba(X_valid), 3))

reg2 = TabNetRegressor(n_d=8, n_a=8, n_steps=2, seed=7, verbose=0)
reg2.fit(X[:64], yr[:64, :1], eval_set=[(X[64:], yr[64:, :1])], max_epochs=2, batch_size=32,
         virtual_batch_size=16, augmentations=RegressionSMOTE(p=0.5, seed=8))
print("regression smote", {k: [f"{v:.5f}" for v in vs] for k, vs in reg2.history.history.items()})
print("network", type(clf.network).__name__, sum(p.numel() for p in clf.network.parameters()))
