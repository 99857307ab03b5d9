# The PyTorch "Stochastic Weight Averaging" recipe as published in the
# torch.optim docs (section "Weight Averaging (SWA and EMA)") and the PyTorch
# blog's SWA tutorial: AveragedModel with update_parameters after swa_start,
# SWALR (cos and linear annealing, anneal_epochs) switched in from
# CosineAnnealingLR, torch.optim.swa_utils.update_bn over the DataLoader at the
# end, predictions with the averaged model; the EMA variants (a custom
# avg_fn lambda, multi_avg_fn=get_ema_multi_avg_fn(0.999) with
# use_buffers=True), and the averaged model's state_dict / n_averaged.
# Changes for a CPU test: a tiny MLP with BatchNorm1d on a TensorDataset of
# random numbers (a DataLoader without shuffling), 8 epochs with swa_start=4
# (300 and 160), and the weights come from numpy, so tracec and torch compute
# the same numbers.  Then the training step under torch.compile against the
# same step run eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
from torch.optim.lr_scheduler import CosineAnnealingLR
from torch.optim.swa_utils import SWALR, AveragedModel, get_ema_multi_avg_fn, update_bn
from torch.utils.data import DataLoader, TensorDataset


def numpy_init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            v = (0.1 * r.standard_normal(tuple(p.shape)) + (1.0 if "1.weight" in name else 0.0)) if p.dim() == 1 \
                else r.standard_normal(tuple(p.shape)) * (1.0 / p.shape[1]) ** 0.5
            p.copy_(torch.from_numpy(v.astype(np.float32)))
    return model


rng = np.random.default_rng(0)
X = torch.from_numpy(rng.standard_normal((32, 6)).astype(np.float32))
Y = torch.from_numpy((X[:, :2].sum(1) > 0).long().numpy())
loader = DataLoader(TensorDataset(X, Y), batch_size=8, shuffle=False)
test_input = torch.from_numpy(rng.standard_normal((5, 6)).astype(np.float32))

model = numpy_init(nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2)), 0)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

swa_model = torch.optim.swa_utils.AveragedModel(model)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=8)
swa_start = 4
swa_scheduler = SWALR(optimizer, swa_lr=0.05)
print("swa", swa_model.n_averaged.item(), swa_model.n_averaged.dtype, type(swa_model.module).__name__,
      swa_model.module is model, swa_scheduler.anneal_epochs, swa_scheduler.anneal_func.__name__)

for epoch in range(8):
    for input, target in loader:
        optimizer.zero_grad()
        loss_fn(model(input), target).backward()
        optimizer.step()
    if epoch > swa_start:
        swa_model.update_parameters(model)
        swa_scheduler.step()
    else:
        scheduler.step()
    print(f"epoch {epoch} loss {loss_fn(model(X), Y).item():.5f} lr {optimizer.param_groups[0]['lr']:.5f} "
          f"n_averaged {swa_model.n_averaged.item()}")

print("before update_bn", [f"{v:.5f}" for v in swa_model.module[1].running_mean[:4].tolist()])
# Update bn statistics for the swa_model at the end
torch.optim.swa_utils.update_bn(loader, swa_model)
print("after update_bn", [f"{v:.5f}" for v in swa_model.module[1].running_mean[:4].tolist()],
      swa_model.module[1].momentum, swa_model.module[1].num_batches_tracked.item(), swa_model.training)
# Use swa_model to make predictions on test data
swa_model.eval()
with torch.no_grad():
    preds = swa_model(test_input)
print("preds", [[f"{v:.5f}" for v in row] for row in preds.tolist()])
sd = swa_model.state_dict()
print("state_dict", list(sd)[:3], list(sd)[-1], sd["n_averaged"].item())

# SWALR's linear annealing over anneal_epochs, with a per-group swa_lr
opt2 = torch.optim.SGD([{"params": [nn.Parameter(torch.zeros(2))], "lr": 0.5},
                        {"params": [nn.Parameter(torch.zeros(2))], "lr": 0.1}], lr=0.5)
sw = SWALR(opt2, swa_lr=[0.05, 0.2], anneal_epochs=3, anneal_strategy="linear")
lrs = []
for _ in range(5):
    lrs.append([f"{g['lr']:.4f}" for g in opt2.param_groups])
    opt2.step()
    sw.step()
print("swalr linear", lrs)
for bad in (dict(anneal_strategy="exp"), dict(anneal_epochs=-1)):
    try:
        SWALR(opt2, swa_lr=0.05, **bad)
    except ValueError as e:
        print("ValueError:", e)

# EMA with a custom avg_fn, and with get_ema_multi_avg_fn and use_buffers=True
ema_avg = lambda averaged_model_parameter, model_parameter, num_averaged: \
    0.1 * averaged_model_parameter + 0.9 * model_parameter
ema_model = torch.optim.swa_utils.AveragedModel(model, avg_fn=ema_avg)
ema_model2 = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999), use_buffers=True)
for step, (input, target) in enumerate(loader):
    optimizer.zero_grad()
    loss_fn(model(input), target).backward()
    optimizer.step()
    ema_model.update_parameters(model)
    ema_model2.update_parameters(model)
print("ema", f"{ema_model.module[0].weight.sum().item():.5f}", f"{ema_model2.module[0].weight.sum().item():.5f}",
      [f"{v:.5f}" for v in ema_model2.module[1].running_mean[:3].tolist()], ema_model2.n_averaged.item())
print("ema buffers", ema_model2.module[1].num_batches_tracked.item(),
      [f"{v:.5f}" for v in ema_model.module[1].running_mean[:3].tolist()])
update_bn(loader, ema_model)
print("ema update_bn", [f"{v:.5f}" for v in ema_model.module[1].running_var[:3].tolist()])


def train_step(input, target):
    optimizer.zero_grad()
    loss = loss_fn(model(input), target)
    loss.backward()
    optimizer.step()
    return loss


# the training step under torch.compile against the same step run eagerly
def compile_check(model, optimizer, train_step, *batch, steps=2):
    model.train()
    state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
    eager = [train_step(*batch).item() for _ in range(steps)]
    after = copy.deepcopy(model.state_dict())
    model.load_state_dict(state)
    optimizer.load_state_dict(opt_state)
    cstep = torch.compile(train_step)
    compiled = [cstep(*batch).item() for _ in range(steps)]
    print("compiled losses", [f"{v:.5f}" for v in compiled])
    print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
          all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-3, atol=1e-5)
              for k in after))
compile_check(model, optimizer, train_step, X, Y)
