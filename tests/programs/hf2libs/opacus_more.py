"""More of opacus: its DP layers (DPLSTM, DPMultiheadAttention) and
ModuleValidator.fix on a text model, the other per-sample gradient engines
(grad_sample_mode "functorch": torch.func's vmap / grad, "ew": expanded
weights, "ghost": ghost clipping with DPLossFastGradientClipping),
per-sample gradients of GroupNorm / InstanceNorm / LayerNorm / Conv1d / Conv2d
(grouped, "same" padding) / Conv3d / ConvTranspose2d / DPGRU / DPRNN layers
checked against a loop, BatchMemoryManager's virtual batches, clipping
per layer, and save_checkpoint / load_checkpoint."""
import os
import random
import tempfile

import numpy as np
import torch
import torch.nn as nn
from opacus import GradSampleModule, PrivacyEngine
from opacus.layers import DPGRU, DPLSTM, DPRNN, DPMultiheadAttention
from opacus.utils.batch_memory_manager import BatchMemoryManager
from opacus.validators import ModuleValidator
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)


def fmt(t):
    return " ".join(f"{v:.5f}" for v in t.detach().flatten()[:5].tolist())


def per_sample_check(name, module, inp, mode="hooks", out_fn=lambda o: o):
    refs = {n: torch.stack([torch.autograd.grad(out_fn(module(inp[i:i + 1])).pow(2).sum(), p)[0]
                            for i in range(len(inp))])
            for n, p in module.named_parameters()}
    gsm = GradSampleModule(module, loss_reduction="sum", force_functorch=mode == "functorch")
    out_fn(gsm(inp)).pow(2).sum().backward()
    errs = {n: (p.grad_sample - refs[n]).abs().max().item()
            for n, p in module.named_parameters()}
    print(name, mode, {n: "equal" if e < 1e-4 else f"{e:.2e}" for n, e in errs.items()},
          fmt(next(module.parameters()).grad_sample))
    gsm._close()


torch.manual_seed(1)
per_sample_check("groupnorm", nn.Sequential(nn.Conv2d(2, 4, 3), nn.GroupNorm(2, 4)),
                 torch.randn(3, 2, 5, 5))
per_sample_check("instancenorm", nn.Sequential(nn.Conv2d(2, 4, 3, stride=2, groups=2),
                                               nn.InstanceNorm2d(4, affine=True)),
                 torch.randn(3, 2, 6, 6))
per_sample_check("dilated-conv1d", nn.Sequential(nn.Conv1d(2, 3, 2, dilation=2),
                                                 nn.Linear(2, 3)),
                 torch.randn(4, 2, 4))
per_sample_check("conv3d", nn.Sequential(nn.Conv3d(2, 3, 2), nn.Flatten(), nn.Linear(3 * 8, 2)),
                 torch.randn(3, 2, 3, 3, 3))
per_sample_check("conv-transpose", nn.Sequential(nn.ConvTranspose2d(2, 3, 2, stride=2),
                                                 nn.Flatten()), torch.randn(3, 2, 2, 2))
per_sample_check("grouped-same-conv", nn.Conv2d(4, 4, 3, padding="same", groups=2),
                 torch.randn(3, 4, 5, 5))
per_sample_check("layernorm-2d", nn.LayerNorm([3, 4]), torch.randn(3, 2, 3, 4))
per_sample_check("dpgru", DPGRU(4, 5, batch_first=True), torch.randn(3, 6, 4),
                 out_fn=lambda o: o[0])
per_sample_check("dprnn", DPRNN(4, 5, batch_first=True, num_layers=2), torch.randn(3, 6, 4),
                 out_fn=lambda o: o[0])
per_sample_check("functorch", nn.Sequential(nn.Linear(3, 4), nn.ELU(), nn.Linear(4, 2)),
                 torch.randn(4, 3), mode="functorch")


class TextModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 6, batch_first=True)
        self.attn = nn.MultiheadAttention(6, 2, batch_first=True)
        self.fc = nn.Linear(6, 2)

    def forward(self, ids):
        h, _ = self.lstm(self.emb(ids))
        a, _ = self.attn(h, h, h)
        return self.fc(a.mean(1))


torch.manual_seed(2)
text = TextModel()
print("validate", [str(e)[:50] for e in ModuleValidator.validate(text, strict=False)])
text = ModuleValidator.fix(text)
print("fixed", type(text.lstm).__name__, type(text.attn).__name__)
torch.manual_seed(3)
text = TextModel()
text.lstm = DPLSTM(8, 6, batch_first=True)
text.attn = DPMultiheadAttention(6, 2, batch_first=True)
ids = torch.randint(0, 20, (24, 5))
labels = torch.randint(0, 2, (24,))
engine = PrivacyEngine()
opt = torch.optim.SGD(text.parameters(), lr=0.5)
loader = DataLoader(TensorDataset(ids, labels), batch_size=12)
gen = torch.Generator().manual_seed(4)
text, opt, loader = engine.make_private(module=text, optimizer=opt, data_loader=loader,
                                        noise_multiplier=0.8, max_grad_norm=[1.0] * 4 +
                                        [1.0] * (len(list(text.parameters())) - 4),
                                        clipping="per_layer", noise_generator=gen)
torch.manual_seed(5)
for xb, yb in loader:
    opt.zero_grad()
    loss = nn.functional.cross_entropy(text(xb), yb)
    loss.backward()
    opt.step()
    print("dplstm step", len(xb), f"loss {loss.item():.5f}",
          fmt(text._module.lstm.l0.ih.weight.grad_sample))
print(f"epsilon {engine.get_epsilon(1e-5):.4f}")

# the other engines on the same MLP and data
for mode in ["functorch", "ew", "ghost"]:
    torch.manual_seed(6)
    net = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    data = DataLoader(TensorDataset(torch.randn(32, 5), torch.randint(0, 3, (32,))),
                      batch_size=8)
    opt = torch.optim.SGD(net.parameters(), lr=0.2)
    engine = PrivacyEngine()
    crit = nn.CrossEntropyLoss()
    kw = {"criterion": crit} if mode == "ghost" else {}
    gen = torch.Generator().manual_seed(7)
    out = engine.make_private(module=net, optimizer=opt, data_loader=data,
                              noise_multiplier=1.0, max_grad_norm=1.0, grad_sample_mode=mode,
                              poisson_sampling=False, noise_generator=gen, **kw)
    net, opt, data = (out[0], out[1], out[3]) if mode == "ghost" else out
    crit = out[2] if mode == "ghost" else crit
    losses = []
    for xb, yb in data:
        opt.zero_grad()
        loss = crit(net(xb), yb)
        loss.backward()
        opt.step()
        losses.append(f"{loss.item():.5f}")
    w = net._module[2].weight if hasattr(net, "_module") else net[2].weight
    print(mode, type(net).__name__, losses, fmt(w))

# virtual batches: logical batch 16 in physical batches of at most 5
torch.manual_seed(8)
net = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
data = DataLoader(TensorDataset(torch.randn(48, 4), torch.randint(0, 2, (48,))), batch_size=16)
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
engine = PrivacyEngine()
gen = torch.Generator().manual_seed(9)
net, opt, data = engine.make_private(module=net, optimizer=opt, data_loader=data,
                                     noise_multiplier=1.0, max_grad_norm=1.0,
                                     noise_generator=gen)
torch.manual_seed(10)
with BatchMemoryManager(data_loader=data, max_physical_batch_size=5, optimizer=opt) as mem:
    sizes, steps = [], 0
    for xb, yb in mem:
        opt.zero_grad()
        nn.functional.cross_entropy(net(xb), yb).backward()
        opt.step()
        sizes.append(len(xb))
        steps += not opt._is_last_step_skipped
print("physical batches", sizes, "steps", steps, fmt(net._module[0].weight))
print(f"epsilon {engine.get_epsilon(1e-5):.4f}", engine.accountant.history)

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "ckpt.pt")
    engine.save_checkpoint(path=path, module=net, optimizer=opt)
    net2 = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
    opt2 = torch.optim.Adam(net2.parameters(), lr=1e-2)
    engine2 = PrivacyEngine()
    net2, opt2, _ = engine2.make_private(module=net2, optimizer=opt2, data_loader=data,
                                         noise_multiplier=1.0, max_grad_norm=1.0)
    engine2.load_checkpoint(path=path, module=net2, optimizer=opt2)
    same = all(torch.equal(a, b) for a, b in zip(net.parameters(), net2.parameters()))
    print("checkpoint", same, f"epsilon {engine2.get_epsilon(1e-5):.4f}",
          sorted(opt2.original_optimizer.state_dict()["state"]))
