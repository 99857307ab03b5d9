# juho-lee/set_transformer: modules.py (MAB with its own multi-head attention:
# the heads split off with Q.split(dim_split, 2) and stacked on the batch by
# torch.cat(..., 0), softmax of bmm / sqrt(dim_V), the heads put back with
# .split(Q.size(0), 0) / torch.cat(..., 2), the optional ln0 / ln1 read through
# getattr(self, 'ln0', None), O + F.relu(fc_o(O)); SAB, ISAB with its
# inducing points self.I from torch.Tensor + xavier_uniform_, PMA with its
# seeds), models.py (DeepSet, SetTransformer with ln=True) and the
# max_regression_demo notebook (gen_data's sets of random length,
# SmallSetTransformer, the L1Loss training with Adam against a DeepSet).
# Changes for a CPU test: hidden sizes 16, batches of 8 sets, a few steps;
# weights from numpy (the xavier_uniform_ draws differ in tracec: [rng]).
# Then the training step under torch.compile, on sets of three lengths,
# against the same steps run eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- modules.py ----
class MAB(nn.Module):
    def __init__(self, dim_Q, dim_K, dim_V, num_heads, ln=False):
        super(MAB, self).__init__()
        self.dim_V = dim_V
        self.num_heads = num_heads
        self.fc_q = nn.Linear(dim_Q, dim_V)
        self.fc_k = nn.Linear(dim_K, dim_V)
        self.fc_v = nn.Linear(dim_K, dim_V)
        if ln:
            self.ln0 = nn.LayerNorm(dim_V)
            self.ln1 = nn.LayerNorm(dim_V)
        self.fc_o = nn.Linear(dim_V, dim_V)

    def forward(self, Q, K):
        Q = self.fc_q(Q)
        K, V = self.fc_k(K), self.fc_v(K)

        dim_split = self.dim_V // self.num_heads
        Q_ = torch.cat(Q.split(dim_split, 2), 0)
        K_ = torch.cat(K.split(dim_split, 2), 0)
        V_ = torch.cat(V.split(dim_split, 2), 0)

        A = torch.softmax(Q_.bmm(K_.transpose(1,2))/math.sqrt(self.dim_V), 2)
        O = torch.cat((Q_ + A.bmm(V_)).split(Q.size(0), 0), 2)
        O = O if getattr(self, 'ln0', None) is None else self.ln0(O)
        O = O + F.relu(self.fc_o(O))
        O = O if getattr(self, 'ln1', None) is None else self.ln1(O)
        return O


class SAB(nn.Module):
    def __init__(self, dim_in, dim_out, num_heads, ln=False):
        super(SAB, self).__init__()
        self.mab = MAB(dim_in, dim_in, dim_out, num_heads, ln=ln)

    def forward(self, X):
        return self.mab(X, X)


class ISAB(nn.Module):
    def __init__(self, dim_in, dim_out, num_heads, num_inds, ln=False):
        super(ISAB, self).__init__()
        self.I = nn.Parameter(torch.Tensor(1, num_inds, dim_out))
        nn.init.xavier_uniform_(self.I)
        self.mab0 = MAB(dim_out, dim_in, dim_out, num_heads, ln=ln)
        self.mab1 = MAB(dim_in, dim_out, dim_out, num_heads, ln=ln)

    def forward(self, X):
        H = self.mab0(self.I.repeat(X.size(0), 1, 1), X)
        return self.mab1(X, H)


class PMA(nn.Module):
    def __init__(self, dim, num_heads, num_seeds, ln=False):
        super(PMA, self).__init__()
        self.S = nn.Parameter(torch.Tensor(1, num_seeds, dim))
        nn.init.xavier_uniform_(self.S)
        self.mab = MAB(dim, dim, dim, num_heads, ln=ln)

    def forward(self, X):
        return self.mab(self.S.repeat(X.size(0), 1, 1), X)


# ---- models.py ----
class DeepSet(nn.Module):
    def __init__(self, dim_input, num_outputs, dim_output, dim_hidden=128):
        super(DeepSet, self).__init__()
        self.num_outputs = num_outputs
        self.dim_output = dim_output
        self.enc = nn.Sequential(
                nn.Linear(dim_input, dim_hidden),
                nn.ReLU(),
                nn.Linear(dim_hidden, dim_hidden),
                nn.ReLU(),
                nn.Linear(dim_hidden, dim_hidden),
                nn.ReLU(),
                nn.Linear(dim_hidden, dim_hidden))
        self.dec = nn.Sequential(
                nn.Linear(dim_hidden, dim_hidden),
                nn.ReLU(),
                nn.Linear(dim_hidden, dim_hidden),
                nn.ReLU(),
                nn.Linear(dim_hidden, dim_hidden),
                nn.ReLU(),
                nn.Linear(dim_hidden, num_outputs*dim_output))

    def forward(self, X):
        X = self.enc(X).mean(-2)
        X = self.dec(X).reshape(-1, self.num_outputs, self.dim_output)
        return X


class SetTransformer(nn.Module):
    def __init__(self, dim_input, num_outputs, dim_output,
            num_inds=32, dim_hidden=128, num_heads=4, ln=False):
        super(SetTransformer, self).__init__()
        self.enc = nn.Sequential(
                ISAB(dim_input, dim_hidden, num_heads, num_inds, ln=ln),
                ISAB(dim_hidden, dim_hidden, num_heads, num_inds, ln=ln))
        self.dec = nn.Sequential(
                PMA(dim_hidden, num_heads, num_outputs, ln=ln),
                SAB(dim_hidden, dim_hidden, num_heads, ln=ln),
                SAB(dim_hidden, dim_hidden, num_heads, ln=ln),
                nn.Linear(dim_hidden, dim_output))

    def forward(self, X):
        return self.dec(self.enc(X))


def numpy_init(module, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.startswith("ln") or ".ln" in name:
                p.copy_(torch.from_numpy(((1.0 if name.endswith("weight") else 0.0)
                                          + 0.1 * r.standard_normal(tuple(p.shape))).astype(np.float32)))
            else:
                fan = p.shape[-1] if p.dim() > 1 else 4
                p.copy_(torch.from_numpy((r.standard_normal(tuple(p.shape)) / np.sqrt(fan)).astype(np.float32)))
    return module


torch.manual_seed(0)
isab = ISAB(3, 8, 2, 4)
bound = math.sqrt(6.0 / (4 * 8 + 1 * 8))
print("xavier", f"{isab.I.sum().item():.5f}")
print("xavier bound", tuple(isab.I.shape), bool(isab.I.abs().max() <= bound), isab.I.requires_grad)

# the amortized clustering model, with layer norms
model = numpy_init(SetTransformer(2, 4, 5, num_inds=6, dim_hidden=16, num_heads=4, ln=True), 0)
print("params", sum(p.numel() for p in model.parameters()), [n for n, _ in model.named_parameters()][:3])
X = torch.from_numpy(np.random.default_rng(1).standard_normal((3, 10, 2)).astype(np.float32))
out = model(X)
print("set transformer", tuple(out.shape), f"{out.sum().item():.5f}", f"{out[1, 2].abs().sum().item():.5f}")
perm = torch.from_numpy(np.random.default_rng(2).permutation(10))
print("permutation invariant", torch.allclose(model(X[:, perm]), out, atol=1e-5))
out.pow(2).mean().backward()
print("grads", f"{model.enc[0].I.grad.abs().sum().item():.6f}", f"{model.dec[0].S.grad.abs().sum().item():.6f}",
      f"{model.dec[1].mab.ln1.weight.grad.sum().item():.6f}")
mab = model.enc[1].mab0
print("no ln", getattr(MAB(4, 4, 4, 2), 'ln0', None), type(getattr(mab, 'ln0', None)).__name__)
ds = numpy_init(DeepSet(2, 4, 5, dim_hidden=16), 3)
print("deepset", tuple(ds(X).shape), f"{ds(X).sum().item():.5f}")


# ---- max_regression_demo.ipynb ----
def gen_data(batch_size, max_length=10, test=False):
    length = np.random.randint(1, max_length + 1)
    x = np.random.randint(1, 100, (batch_size, length))
    y = np.max(x, axis=1)
    x, y = np.expand_dims(x, axis=2), np.expand_dims(y, axis=1)
    return x, y


class SmallDeepSet(nn.Module):
    def __init__(self, pool="max"):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Linear(in_features=1, out_features=16),
            nn.ReLU(),
            nn.Linear(in_features=16, out_features=16),
        )
        self.dec = nn.Sequential(
            nn.Linear(in_features=16, out_features=16),
            nn.ReLU(),
            nn.Linear(in_features=16, out_features=1),
        )
        self.pool = pool

    def forward(self, x):
        x = self.enc(x)
        if self.pool == "max":
            x = x.max(dim=1)[0]
        elif self.pool == "mean":
            x = x.mean(dim=1)
        elif self.pool == "sum":
            x = x.sum(dim=1)
        x = self.dec(x)
        return x


class SmallSetTransformer(nn.Module):
    def __init__(self,):
        super().__init__()
        self.enc = nn.Sequential(
            SAB(dim_in=1, dim_out=16, num_heads=4),
            SAB(dim_in=16, dim_out=16, num_heads=4),
        )
        self.dec = nn.Sequential(
            PMA(dim=16, num_heads=4, num_seeds=1),
            nn.Linear(in_features=16, out_features=1),
        )

    def forward(self, x):
        x = self.enc(x)
        x = self.dec(x)
        return x.squeeze(-1)


def train(model):
    optim = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.L1Loss()
    losses = []
    for _ in range(4):
        x, y = gen_data(batch_size=8, max_length=10)
        x, y = torch.from_numpy(x).float(), torch.from_numpy(y).float()
        loss = criterion(model(x), y)
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    return losses


np.random.seed(0)
models = [
    ("deepset_mean", numpy_init(SmallDeepSet(pool="mean"), 4)),
    ("deepset_sum", numpy_init(SmallDeepSet(pool="sum"), 4)),
    ("deepset_max", numpy_init(SmallDeepSet(pool="max"), 4)),
    ("set_transformer", numpy_init(SmallSetTransformer(), 5)),
]
for _name, _model in models:
    _losses = train(_model)
    print(_name, [f"{v:.4f}" for v in _losses])

# the training step under torch.compile against the same steps run eagerly,
# on sets of lengths 3, 5 and 7 (dynamic=True: one trace for every length).  The keys' biases (fc_k.bias) get gradients
# that are zero but for rounding (the softmax over the keys does not see
# them), which Adam's first steps turn into full-size steps of either sign,
# so two float-different runs of the same step leave them lr apart: the
# state comparison leaves them out.
model = numpy_init(SmallSetTransformer(), 6)
optim = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.L1Loss()


def train_step(x, y):
    loss = criterion(model(x), y)
    optim.zero_grad()
    loss.backward()
    optim.step()
    return loss


g = np.random.default_rng(7)
batches = []
for length in (4, 3, 5, 7, 5):
    x = g.integers(1, 100, (8, length))
    batches.append((torch.from_numpy(x[..., None]).float(), torch.from_numpy(x.max(axis=1, keepdims=True)).float()))
train_step(*batches[0])
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optim.state_dict())
eager = [train_step(*b).item() for b in batches[1:]]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optim.load_state_dict(opt_state)
cstep = torch.compile(train_step, dynamic=True)
compiled = [cstep(*b).item() for b in batches[1:]]
print("compiled losses", [f"{v:.4f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after if not k.endswith('fc_k.bias')))
