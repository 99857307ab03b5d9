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
