"""skorch as its README and docs use it: a NeuralNetClassifier on
make_classification (fit, predict_proba, history), in a Pipeline after a
StandardScaler, a GridSearchCV over a tiny grid, a NeuralNetRegressor on
make_regression with callbacks (EpochScoring, EarlyStopping, LRScheduler,
Checkpoint / LoadInitState into the working folder), save_params /
load_params, and pickling a fitted net; then NeuralNetBinaryClassifier,
several inputs in a SliceDict with a predefined validation split, more
callbacks (GradientNormClipping, BatchScoring, WarmRestartLR, CyclicLR,
Freezer, Initializer, TrainEndCheckpoint, ProgressBar), partial_fit,
sklearn's clone and cross_val_score, a GRU classifier, a plain NeuralNet,
compile=True (torch.compile; tracec compiles it), and an ExactGPRegressor
on GPyTorch."""
import os
import pickle
import random

import numpy as np
import torch
from sklearn.datasets import make_classification, make_regression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from torch import nn

from skorch import NeuralNetClassifier, NeuralNetRegressor
from skorch.callbacks import (Checkpoint, EarlyStopping, EpochScoring, LoadInitState,
                              LRScheduler)

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)


def show_history(net, keys):
    for row in net.history:
        print("  epoch", row["epoch"], " ".join(
            f"{k}={row[k]:.5f}" if isinstance(row[k], float) else f"{k}={row[k]}"
            for k in keys if k in row))


X, y = make_classification(120, 20, n_informative=10, random_state=0)
X = X.astype(np.float32)
y = y.astype(np.int64)


class MyModule(nn.Module):
    def __init__(self, num_units=10, nonlin=nn.ReLU()):
        super().__init__()
        self.dense0 = nn.Linear(20, num_units)
        self.nonlin = nonlin
        self.dropout = nn.Dropout(0.5)
        self.dense1 = nn.Linear(num_units, num_units)
        self.output = nn.Linear(num_units, 2)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, X, **kwargs):
        X = self.nonlin(self.dense0(X))
        X = self.dropout(X)
        X = self.nonlin(self.dense1(X))
        X = self.softmax(self.output(X))
        return X


net = NeuralNetClassifier(
    MyModule,
    max_epochs=4,
    lr=0.1,
    batch_size=32,
    # Shuffle training data on each epoch
    iterator_train__shuffle=True,
    verbose=0,
)
net.fit(X, y)
y_proba = net.predict_proba(X)
print("classifier proba", y_proba.shape, y_proba.dtype)
print(np.array2string(y_proba[:4], precision=5))
print("predict", net.predict(X[:12]).tolist())
print(f"score {net.score(X, y):.5f}")
show_history(net, ["train_loss", "valid_loss", "valid_acc", "batches"])
print("history[-1, 'train_loss'] =", f"{net.history[-1, 'train_loss']:.5f}")
print("batches of the last epoch", len(net.history[-1, "batches"]))
print("classes", net.classes_.tolist())

# in an sklearn Pipeline
pipe = Pipeline([
    ("scale", StandardScaler()),
    ("net", NeuralNetClassifier(MyModule, max_epochs=3, lr=0.1, batch_size=32,
                                iterator_train__shuffle=True, verbose=0)),
])
pipe.fit(X, y)
print("pipeline proba", np.array2string(pipe.predict_proba(X)[:3], precision=5))
show_history(pipe.named_steps["net"], ["train_loss", "valid_loss", "valid_acc"])

# grid search: skorch's own train/valid split off, as the README does
net.set_params(train_split=False, verbose=0)
params = {
    "lr": [0.05, 0.1],
    "module__num_units": [8, 12],
}
gs = GridSearchCV(net, params, refit=False, cv=2, scoring="accuracy")
gs.fit(X, y)
print("best score: {:.5f}, best params: {}".format(gs.best_score_, gs.best_params_))
print("mean test scores", [f"{s:.5f}" for s in gs.cv_results_["mean_test_score"]])

# regression with callbacks
Xr, yr = make_regression(100, 8, n_informative=5, noise=0.5, random_state=0)
Xr = Xr.astype(np.float32)
yr = (yr / 100).astype(np.float32).reshape(-1, 1)


class RegressorModule(nn.Module):
    def __init__(self, num_units=16, nonlin=nn.Tanh()):
        super().__init__()
        self.dense0 = nn.Linear(8, num_units)
        self.nonlin = nonlin
        self.dense1 = nn.Linear(num_units, 8)
        self.output = nn.Linear(8, 1)

    def forward(self, X, **kwargs):
        X = self.nonlin(self.dense0(X))
        X = torch.relu(self.dense1(X))
        return self.output(X)


cp = Checkpoint(dirname="skorch_cp", monitor="valid_loss_best")
reg = NeuralNetRegressor(
    RegressorModule,
    max_epochs=6,
    lr=0.05,
    batch_size=25,
    optimizer=torch.optim.SGD,
    optimizer__momentum=0.9,
    callbacks=[
        EpochScoring("r2", lower_is_better=False, name="valid_r2"),
        EarlyStopping(patience=3),
        LRScheduler(policy="StepLR", step_size=2, gamma=0.5),
        cp,
    ],
    verbose=0,
)
reg.fit(Xr, yr)
show_history(reg, ["train_loss", "valid_loss", "valid_r2", "valid_loss_best", "event_cp"])
print("regressor predict", np.array2string(reg.predict(Xr[:4]).ravel(), precision=5))
print(f"regressor score {reg.score(Xr, yr):.5f}")
print("lr now", [f"{g['lr']:.5f}" for g in reg.optimizer_.param_groups])

# save / load parameters, then a fresh net warm-started from the checkpoint
reg.save_params(f_params="reg_params.pt", f_optimizer="reg_opt.pt", f_history="reg_history.json")
reg2 = NeuralNetRegressor(RegressorModule, lr=0.05, optimizer=torch.optim.SGD,
                          optimizer__momentum=0.9, verbose=0).initialize()
reg2.load_params(f_params="reg_params.pt", f_optimizer="reg_opt.pt",
                 f_history="reg_history.json")
print("reloaded equal", np.allclose(reg2.predict(Xr), reg.predict(Xr)),
      "history length", len(reg2.history))
print("optimizer state keys", sorted(reg2.optimizer_.state_dict()["state"])[:4])

reg3 = NeuralNetRegressor(RegressorModule, max_epochs=2, lr=0.05, batch_size=25,
                          callbacks=[LoadInitState(cp)], verbose=0)
reg3.fit(Xr, yr)
print("resumed from checkpoint, epochs", [row["epoch"] for row in reg3.history])
show_history(reg3, ["train_loss", "valid_loss"])

# a fitted net pickles (the module, optimizer and history with it)
blob = pickle.dumps(net)
net_again = pickle.loads(blob)
print("unpickled proba equal", np.allclose(net_again.predict_proba(X[:5]), net.predict_proba(X[:5])))
print(repr(net.module_))

# more of the API: a binary classifier on logits, several inputs in a
# SliceDict, a predefined validation split, gradient clipping, freezing,
# initialisation, warm restarts / cyclic learning rates, BatchScoring,
# partial_fit, sklearn's clone and cross_val_score, an RNN module
from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import cross_val_score  # noqa: E402

from skorch import NeuralNet, NeuralNetBinaryClassifier  # noqa: E402
from skorch.callbacks import (BatchScoring, Freezer, GradientNormClipping,  # noqa: E402
                              Initializer, ProgressBar, TrainEndCheckpoint)
from skorch.callbacks.lr_scheduler import CyclicLR, WarmRestartLR  # noqa: E402
from skorch.dataset import Dataset  # noqa: E402
from skorch.helper import SliceDict, predefined_split  # noqa: E402

torch.manual_seed(1)


class BinaryModule(nn.Module):
    def __init__(self, hidden=8):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(20, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, X):
        return self.seq(X).squeeze(-1)


bin_net = NeuralNetBinaryClassifier(
    BinaryModule, max_epochs=3, lr=0.1, batch_size=40, threshold=0.4,
    optimizer=torch.optim.Adam, optimizer__lr=0.01,
    callbacks=[GradientNormClipping(gradient_clip_value=0.5),
               BatchScoring("neg_log_loss", name="valid_nll", lower_is_better=False),
               ("warm", LRScheduler(WarmRestartLR, min_lr=1e-3, max_lr=1e-2, base_period=2)),
               ProgressBar(), TrainEndCheckpoint(dirname="skorch_end")],
    verbose=0,
)
bin_net.fit(X, y.astype(np.float32))
show_history(bin_net, ["train_loss", "valid_loss", "valid_acc", "valid_nll"])
print("binary proba", np.array2string(bin_net.predict_proba(X[:3]), precision=5),
      "predict", bin_net.predict(X[:10]).tolist())
print("end checkpoint files", sorted(os.listdir("skorch_end")))


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 6)
        self.b = nn.Linear(8, 6)
        self.out = nn.Linear(12, 2)

    def forward(self, left, right):
        return self.out(torch.cat([torch.tanh(self.a(left)), torch.tanh(self.b(right))], 1))


Xd = SliceDict(left=X[:, :12], right=X[:, 12:])
print("SliceDict", Xd.shape, sorted(Xd[:3].keys()), Xd[:3]["left"].shape)
valid_ds = Dataset(SliceDict(left=X[100:, :12], right=X[100:, 12:]), y[100:])
two = NeuralNetClassifier(
    TwoInputs, criterion=nn.CrossEntropyLoss, max_epochs=3, lr=0.2, batch_size=25,
    train_split=predefined_split(valid_ds),
    callbacks=[Initializer("out.weight", fn=nn.init.zeros_),
               Freezer("a.*"),
               ("cyc", LRScheduler(CyclicLR, base_lr=0.05, max_lr=0.2, step_size_up=2,
                                   step_every="batch"))],
    verbose=0,
)
two.fit(Xd[:100], y[:100])
show_history(two, ["train_loss", "valid_loss", "valid_acc"])
print("lr now", f"{two.optimizer_.param_groups[0]['lr']:.5f}",
      "out.bias", np.array2string(two.module_.out.bias.detach().numpy(), precision=5))
a_before = two.module_.a.weight.detach().clone()
b_before = two.module_.b.weight.detach().clone()
two.partial_fit(Xd[:100], y[:100])
print("frozen a unchanged", torch.equal(a_before, two.module_.a.weight.detach()),
      "b changed", not torch.equal(b_before, two.module_.b.weight.detach()))
print("after partial_fit epochs", len(two.history), f"{two.history[-1, 'train_loss']:.5f}")
print("proba", np.array2string(two.predict_proba(Xd[100:104]), precision=5))

cloned = clone(net)
print("clone unfitted", not hasattr(cloned, "module_"), cloned.get_params()["lr"])
cv_net = NeuralNetClassifier(MyModule, max_epochs=2, lr=0.1, batch_size=32,
                             train_split=False, verbose=0)
scores = cross_val_score(cv_net, X, y, cv=2, scoring="accuracy")
print("cross_val_score", [f"{v:.5f}" for v in scores])


class RNNClassifier(nn.Module):
    def __init__(self, hidden=8):
        super().__init__()
        self.emb = nn.Embedding(10, 6)
        self.rnn = nn.GRU(6, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 2)

    def forward(self, X):
        _, h = self.rnn(self.emb(X))
        return self.out(h[-1])


seqs = torch.randint(0, 10, (60, 7)).numpy()
labels = (seqs.sum(1) > 31).astype(np.int64)
rnn_net = NeuralNetClassifier(RNNClassifier, max_epochs=2, lr=0.05, batch_size=20,
                              criterion=nn.CrossEntropyLoss, optimizer=torch.optim.RMSprop,
                              iterator_train__shuffle=True, verbose=0)
rnn_net.fit(seqs, labels)
show_history(rnn_net, ["train_loss", "valid_loss", "valid_acc"])
generic = NeuralNet(RegressorModule, criterion=nn.MSELoss, max_epochs=1, lr=0.01,
                    batch_size=50, train_split=None, verbose=0)
generic.fit(Xr, yr)
print("NeuralNet forward", tuple(generic.forward(Xr[:5]).shape),
      f"{generic.history[-1, 'train_loss']:.5f}",
      "infer", np.array2string(generic.predict(Xr[:2]).ravel(), precision=5))

# compile=True wraps the module (and the criterion) in torch.compile (eager
# in the reference run, TORCH_COMPILE_DISABLE=1; a module without dropout,
# as compiled code draws its own random numbers); the saved parameters load
# into a compiled net, and an uncompiled one refuses their _orig_mod. keys
torch.manual_seed(2)


class NoDropout(nn.Module):
    def __init__(self, num_units=8):
        super().__init__()
        self.dense0 = nn.Linear(20, num_units)
        self.output = nn.Linear(num_units, 2)

    def forward(self, X):
        return self.output(torch.relu(self.dense0(X)))


compiled = NeuralNetClassifier(NoDropout, criterion=nn.CrossEntropyLoss, max_epochs=2, lr=0.1,
                               batch_size=40, compile=True, verbose=0)
compiled.fit(X, y)
show_history(compiled, ["train_loss", "valid_loss", "valid_acc"])
print("compiled module", type(compiled.module_).__name__,
      np.array2string(compiled.predict_proba(X[:2]), precision=5))
compiled.save_params(f_params="compiled_params.pt")
again = NeuralNetClassifier(NoDropout, criterion=nn.CrossEntropyLoss, compile=True,
                            verbose=0).initialize()
again.load_params(f_params="compiled_params.pt")
print("loaded into a compiled net", np.allclose(again.predict_proba(X), compiled.predict_proba(X), atol=1e-6))
plain = NeuralNetClassifier(NoDropout, criterion=nn.CrossEntropyLoss, verbose=0).initialize()
try:
    plain.load_params(f_params="compiled_params.pt")
except RuntimeError as e:
    print("uncompiled net:", str(e).splitlines()[0], "_orig_mod.dense0.weight" in str(e))

# skorch's Gaussian-process regressor on GPyTorch (its GP tutorial)
import gpytorch  # noqa: E402

from skorch.probabilistic import ExactGPRegressor  # noqa: E402

torch.manual_seed(3)
Xg = torch.linspace(0, 1, 40).reshape(-1, 1)
yg = torch.sin(Xg * 6).ravel() + 0.1 * torch.randn(40)


class RbfModule(gpytorch.models.ExactGP):
    def __init__(self, likelihood, noise_init=None):
        super().__init__(train_inputs=None, train_targets=None, likelihood=likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.RBFKernel()

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


gpr = ExactGPRegressor(RbfModule, optimizer=torch.optim.Adam, lr=0.1, max_epochs=5,
                       batch_size=-1, verbose=0)
gpr.fit(Xg, yg)
show_history(gpr, ["train_loss"])
y_pred, y_std = gpr.predict(Xg[:5], return_std=True)
print("GP mean", y_pred.round(5), "std", y_std.round(5))
lower, upper = gpr.confidence_region(Xg[:3])
print("GP confidence", lower.detach().numpy().round(5), upper.detach().numpy().round(5))
samples = gpr.sample(Xg[:4], n_samples=3)
print("GP samples", tuple(samples.shape), samples.detach().numpy().round(5))
print(f"GP lengthscale {gpr.module_.covar_module.lengthscale.item():.5f}")
