"""opacus as its README and tutorials use it: ModuleValidator.validate /
fix (BatchNorm -> GroupNorm), PrivacyEngine.make_private on a small CNN
with a DataLoader (Poisson sampling, seeded), DP-SGD training steps
(per-sample gradients through GradSampleModule's hooks, clipping, noise),
the RDP accountant's epsilon; make_private_with_epsilon; per-sample
gradients of a GradSampleModule checked against a loop over samples; and
opacus' BERT tutorial (DP fine-tuning of a transformers BERT's last layer)."""
import random

import numpy as np
import torch
import torch.nn as nn
from opacus import GradSampleModule, PrivacyEngine
from opacus.validators import ModuleValidator
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(4 * 4 * 4, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        x = self.pool(torch.relu(self.bn(self.conv(x))))
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


model = Net()
errors = ModuleValidator.validate(model, strict=False)
print("validate", [type(e).__name__ for e in errors], [str(e)[:60] for e in errors])
model = ModuleValidator.fix(model)
print("fixed", type(model.bn).__name__, model.bn.num_groups, model.bn.num_channels)
print("valid now", ModuleValidator.is_valid(model))

x = torch.randn(64, 1, 8, 8)
y = torch.randint(0, 3, (64,))
loader = DataLoader(TensorDataset(x, y), batch_size=16)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
engine = PrivacyEngine(accountant="rdp", secure_mode=False)
gen = torch.Generator().manual_seed(1)
model, optimizer, loader = engine.make_private(
    module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=1.1,
    max_grad_norm=1.0, poisson_sampling=True, noise_generator=gen)
print(type(model).__name__, type(optimizer).__name__, type(loader.batch_sampler).__name__)
criterion = nn.CrossEntropyLoss()
torch.manual_seed(2)
for epoch in range(2):
    losses = []
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        gs = model._module.fc2.weight.grad_sample
        optimizer.step()
        losses.append(loss.item())
        print(f"  batch {len(xb)} loss {loss.item():.5f} grad_sample {tuple(gs.shape)}",
              f"fc2 grad {model._module.fc2.weight.grad.norm().item():.5f}")
    print("epoch", epoch, f"mean loss {np.mean(losses):.5f}",
          f"epsilon {engine.get_epsilon(delta=1e-5):.4f}")
print("steps", engine.accountant.history[-1])
print("weights", model._module.fc2.weight[0, :5])

# a target epsilon: the noise multiplier the accountant chooses
torch.manual_seed(3)
model2 = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
opt2 = torch.optim.Adam(model2.parameters(), lr=1e-2)
data = DataLoader(TensorDataset(torch.randn(40, 6), torch.randint(0, 2, (40,))), batch_size=8)
engine2 = PrivacyEngine()
model2, opt2, data = engine2.make_private_with_epsilon(
    module=model2, optimizer=opt2, data_loader=data, target_epsilon=3.0, target_delta=1e-5,
    epochs=2, max_grad_norm=0.5)
print(f"noise multiplier {opt2.noise_multiplier:.4f}")
for xb, yb in data:
    opt2.zero_grad()
    nn.functional.cross_entropy(model2(xb), yb).backward()
    opt2.step()
print(f"epsilon {engine2.get_epsilon(1e-5):.4f}", engine2.accountant.mechanism())

# per-sample gradients (hooks) against one backward per sample
torch.manual_seed(4)
net = nn.Sequential(nn.Conv1d(2, 3, 3), nn.ReLU(), nn.LayerNorm(4), nn.Flatten(),
                    nn.Linear(3 * 4, 2))
emb = nn.Embedding(10, 4)
inp = torch.randn(5, 2, 6)
refs = {name: torch.stack([torch.autograd.grad(net(inp[i:i + 1]).pow(2).sum(), p)[0]
                           for i in range(5)])
        for name, p in net.named_parameters()}
gsm = GradSampleModule(net, loss_reduction="sum")
gsm(inp).pow(2).sum().backward()
for name, p in net.named_parameters():
    err = (p.grad_sample - refs[name]).abs().max().item()
    print(name, tuple(p.grad_sample.shape), "equal" if err < 1e-5 else f"max err {err:.2e}",
          f"{p.grad_sample.sum().item():.5f}")
gsm.remove_hooks()
gse = GradSampleModule(emb, loss_reduction="sum")
ids = torch.tensor([[1, 2, 2], [3, 1, 9]])
gse(ids).sum().backward()
print("embedding grad_sample", tuple(emb.weight.grad_sample.shape),
      emb.weight.grad_sample.sum((1, 2)).tolist(), emb.weight.grad_sample[0, 2].tolist())

# opacus' BERT tutorial: DP fine-tuning of the last encoder layer and the head
from transformers import BertConfig, BertForSequenceClassification  # noqa: E402

torch.manual_seed(5)
bert = BertForSequenceClassification(BertConfig(
    vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
    intermediate_size=32, max_position_embeddings=16, num_labels=2))
for p in bert.bert.parameters():
    p.requires_grad = False
for p in bert.bert.encoder.layer[-1].parameters():
    p.requires_grad = True
print("bert trainable", sum(p.numel() for p in bert.parameters() if p.requires_grad))
ids = torch.randint(1, 40, (24, 8))
mask = torch.ones_like(ids)
mask[::3, 6:] = 0
labels = torch.randint(0, 2, (24,))
loader = DataLoader(TensorDataset(ids, mask, labels), batch_size=8)
opt = torch.optim.AdamW([p for p in bert.parameters() if p.requires_grad], lr=5e-3)
engine = PrivacyEngine()
bert, opt, loader = engine.make_private(module=bert, optimizer=opt, data_loader=loader,
                                        noise_multiplier=0.5, max_grad_norm=0.1,
                                        noise_generator=torch.Generator().manual_seed(6))
bert.train()
torch.manual_seed(7)
for epoch in range(2):
    for xb, mb, yb in loader:
        opt.zero_grad()
        out = bert(input_ids=xb, attention_mask=mb, labels=yb)
        out.loss.backward()
        opt.step()
        print("bert", epoch, len(xb), f"loss {out.loss.item():.5f}")
print(f"bert epsilon {engine.get_epsilon(1e-5):.4f}")
bert.eval()
with torch.no_grad():
    print("bert logits", bert(input_ids=ids[:2], attention_mask=mask[:2]).logits)


# ----------------------------------------------------------------------------
# opacus_more (one program: the libraries are imported once)
# More of opacus: its DP layers (DPLSTM, DPMultiheadAttention) and
# ModuleValidator.fix on a text model, the other per-sample gradient engines
# (grad_sample_mode "functorch": torch.func's vmap / grad, "ew": expanded
# weights, "ghost": ghost clipping with DPLossFastGradientClipping),
# per-sample gradients of GroupNorm / InstanceNorm / LayerNorm / Conv1d / Conv2d
# (grouped, "same" padding) / Conv3d / ConvTranspose2d / DPGRU / DPRNN layers
# checked against a loop, BatchMemoryManager's virtual batches, clipping
# per layer, and save_checkpoint / load_checkpoint.
# ----------------------------------------------------------------------------
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
