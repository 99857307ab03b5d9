"""torchensemble as its README and docs use it: an MLP base estimator in
VotingClassifier (set_criterion, set_optimizer, set_scheduler, fit with a
test loader, evaluate, predict, the checkpoint it saves into the working
folder and io.load), and the other ensembles (Fusion, Bagging, Gradient
Boosting, Snapshot, Adversarial Training, Fast Geometric, Soft Gradient
Boosting, Neural Forest) as classifiers and regressors, one or two epochs
each on small synthetic data; the library's training log (the root
logger) is printed to stdout."""
import logging
import random
import sys

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

import torchensemble
from torchensemble.utils import io

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)

# torchensemble logs its training through the root logger: show its records
handler = logging.StreamHandler(sys.stdout)
handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
handler.addFilter(lambda record: "torchensemble" in record.pathname)
logging.getLogger().addHandler(handler)
logging.getLogger().setLevel(logging.INFO)

N, F, C = 96, 10, 3
X = torch.rand(N, F)           # in [0, 1], as adversarial training wants
w = torch.randn(F, C)
y = ((X - 0.5) @ w).argmax(1)
yr = ((X - 0.5) @ w[:, :1]) + 0.1 * torch.randn(N, 1)
train_loader = DataLoader(TensorDataset(X[:64], y[:64]), batch_size=16, shuffle=True)
test_loader = DataLoader(TensorDataset(X[64:], y[64:]), batch_size=16)
train_loader_r = DataLoader(TensorDataset(X[:64], yr[:64]), batch_size=16, shuffle=True)
test_loader_r = DataLoader(TensorDataset(X[64:], yr[64:]), batch_size=16)


class MLP(nn.Module):
    def __init__(self, out=C):
        super().__init__()
        self.linear1 = nn.Linear(F, 16)
        self.linear2 = nn.Linear(16, out)

    def forward(self, data):
        data = data.view(data.size(0), -1)
        return self.linear2(torch.relu(self.linear1(data)))


# the README's example
model = torchensemble.VotingClassifier(estimator=MLP, n_estimators=3, cuda=False)
model.set_criterion(nn.CrossEntropyLoss())
model.set_optimizer("Adam", lr=1e-2, weight_decay=5e-4)
model.set_scheduler("CosineAnnealingLR", T_max=2)
model.fit(train_loader, epochs=2, log_interval=2, test_loader=test_loader, save_dir="ens_ckpt")
acc = model.evaluate(test_loader)
print(f"voting accuracy {acc:.5f}")
acc, loss = model.evaluate(test_loader, return_loss=True)
print(f"voting accuracy {acc:.5f} loss {loss:.5f}")
proba = model.predict(X[64:68])
print("voting predict", tuple(proba.shape), [f"{v:.5f}" for v in proba.flatten()])
print("estimators", len(model), type(model[0]).__name__)

reloaded = torchensemble.VotingClassifier(estimator=MLP, n_estimators=3, cuda=False)
try:        # the checkpoint pickles the criterion: torch.load's weights_only refuses it
    io.load(reloaded, "ens_ckpt")
except Exception as e:
    print("io.load refused:", type(e).__name__, "CrossEntropyLoss" in str(e))
with torch.serialization.safe_globals([nn.CrossEntropyLoss]):
    io.load(reloaded, "ens_ckpt")
print("reloaded", len(reloaded), [f"{v:.5f}" for v in reloaded.predict(X[64:66]).flatten()])

classifiers = [
    ("FusionClassifier", torchensemble.FusionClassifier, {}),
    ("BaggingClassifier", torchensemble.BaggingClassifier, {}),
    ("GradientBoostingClassifier", torchensemble.GradientBoostingClassifier, {"shrinkage_rate": 0.5}),
    ("SnapshotEnsembleClassifier", torchensemble.SnapshotEnsembleClassifier, {}),
    ("AdversarialTrainingClassifier", torchensemble.AdversarialTrainingClassifier, {}),
    ("SoftGradientBoostingClassifier", torchensemble.SoftGradientBoostingClassifier, {}),
]
for name, cls, kw in classifiers:
    torch.manual_seed(1)
    ens = cls(estimator=MLP, n_estimators=2, cuda=False, **kw)
    ens.set_optimizer("Adam", lr=1e-2)
    fit_kw = {"epochs": 2, "log_interval": 2, "save_model": False}
    if name == "AdversarialTrainingClassifier":
        fit_kw["epsilon"] = 0.1
    ens.fit(train_loader, test_loader=test_loader, **fit_kw)
    print(name, f"{ens.evaluate(test_loader):.5f}",
          [f"{v:.5f}" for v in ens.predict(X[64:66]).flatten()])

torch.manual_seed(2)
fge = torchensemble.FastGeometricClassifier(estimator=MLP, n_estimators=2, cuda=False)
fge.set_optimizer("SGD", lr=0.1, momentum=0.9)
fge.fit(train_loader, cycle=2, lr_1=0.05, lr_2=0.01, epochs=2, log_interval=2,
        test_loader=test_loader, save_model=False)
print("FastGeometricClassifier", len(fge), f"{fge.evaluate(test_loader):.5f}")

torch.manual_seed(3)
forest = torchensemble.NeuralForestClassifier(n_estimators=2, depth=3, lamda=1e-3, cuda=False)
forest.set_optimizer("Adam", lr=1e-2)
forest.fit(train_loader, epochs=1, log_interval=2, test_loader=test_loader, save_model=False)
print("NeuralForestClassifier", f"{forest.evaluate(test_loader):.5f}")

regressors = [
    ("VotingRegressor", torchensemble.VotingRegressor, {}),
    ("FusionRegressor", torchensemble.FusionRegressor, {}),
    ("BaggingRegressor", torchensemble.BaggingRegressor, {}),
    ("GradientBoostingRegressor", torchensemble.GradientBoostingRegressor, {}),
    ("SnapshotEnsembleRegressor", torchensemble.SnapshotEnsembleRegressor, {}),
]
for name, cls, kw in regressors:
    torch.manual_seed(4)
    ens = cls(estimator=MLP, n_estimators=2, estimator_args={"out": 1}, cuda=False, **kw)
    ens.set_criterion(nn.MSELoss())
    ens.set_optimizer("Adam", lr=1e-2)
    if name == "VotingRegressor":
        ens.set_scheduler("StepLR", step_size=1, gamma=0.5)
    ens.fit(train_loader_r, epochs=2, log_interval=2, test_loader=test_loader_r, save_model=False)
    print(name, f"{ens.evaluate(test_loader_r):.5f}",
          [f"{v:.5f}" for v in ens.predict(X[64:67]).flatten()])
