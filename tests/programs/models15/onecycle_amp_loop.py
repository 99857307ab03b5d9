# The "modern training loop" of public PyTorch tutorials and Kaggle
# notebooks: a map-style Dataset of variable-length sequences, random_split
# with a seeded generator (fractions), DataLoaders with a custom collate_fn
# (pad_sequence, lengths, sorted for pack_padded_sequence), a GRU
# classifier over pack_padded_sequence / pad_packed_sequence, AdamW with
# OneCycleLR (steps_per_epoch=len(train_loader), cycling the betas),
# torch.autocast on the CPU (enabled by a flag, off here: bfloat16 matmuls
# round differently across libraries) and torch.amp.GradScaler("cpu")
# (scale, unscale_ before clip_grad_norm_, step, update, get_scale, the
# skipped step on an inf gradient, state_dict), an evaluation loop with
# torch.inference_mode, and the best-model state_dict kept by
# copy.deepcopy.
# Changes for a CPU test: data from numpy, a small model, two epochs; the
# split's membership is printed [rng] and training runs on fixed Subsets
# (tracec's random streams are not torch's); then one training step under
# torch.compile against the same step eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset, Subset, random_split

device = "cpu"
use_amp = False     # (bfloat16 autocast rounds differently from run to run of libraries)


class SeqDataset(Dataset):
    def __init__(self, n, vocab, rng):
        self.items = []
        for i in range(n):
            length = int(rng.integers(3, 9))
            label = i % 3
            toks = rng.integers(1, vocab, length)
            toks[: 1 + label] = label + 1          # the class shows in the first tokens
            self.items.append((torch.tensor(toks, dtype=torch.long), label))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


def collate_fn(batch):
    batch = sorted(batch, key=lambda x: len(x[0]), reverse=True)
    seqs, labels = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs])
    padded = pad_sequence(seqs, batch_first=True, padding_value=0)
    return padded, lengths, torch.tensor(labels)


class GRUClassifier(nn.Module):
    def __init__(self, vocab, emb, hidden, n_classes):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb, padding_idx=0)
        self.rnn = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.norm = nn.LayerNorm(2 * hidden)
        self.fc = nn.Linear(2 * hidden, n_classes)

    def forward(self, x, lengths):
        emb = self.embedding(x)
        packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=True)
        out, h = self.rnn(packed)
        out, out_lengths = pad_packed_sequence(out, batch_first=True)
        mask = (torch.arange(out.size(1))[None, :] < out_lengths[:, None]).unsqueeze(-1)
        pooled = (out * mask).sum(1) / out_lengths[:, None].to(out.dtype)
        last = torch.cat([h[-2], h[-1]], dim=-1)
        return self.fc(self.norm(pooled + last))


def init_from_numpy(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy((0.3 * r.standard_normal(p.shape)).astype(np.float32)))
        model.embedding.weight[0].zero_()


rng = np.random.default_rng(0)
dataset = SeqDataset(48, 12, rng)
train_set, val_set = random_split(dataset, [0.75, 0.25], generator=torch.Generator().manual_seed(42))
print("split sizes", len(train_set), len(val_set), type(train_set).__name__)
print("split", sorted(train_set.indices)[:5])
print("int split", [len(s) for s in random_split(range(10), [0.34, 0.33, 0.33], generator=torch.Generator().manual_seed(0))])
try:
    random_split(dataset, [30, 10])
except ValueError as e:
    print("ValueError", e)
train_set, val_set = Subset(dataset, list(range(36))), Subset(dataset, list(range(36, 48)))

train_loader = DataLoader(train_set, batch_size=8, shuffle=False, collate_fn=collate_fn)
val_loader = DataLoader(val_set, batch_size=8, shuffle=False, collate_fn=collate_fn)
xb, lb, yb = next(iter(train_loader))
print("batch", tuple(xb.shape), lb.tolist(), yb.tolist(), len(train_loader), len(val_loader))

model = GRUClassifier(12, 8, 8, 3).to(device)
init_from_numpy(model, 1)
epochs = 2
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, steps_per_epoch=len(train_loader),
                                                epochs=epochs, pct_start=0.3)
print("initial lr", scheduler.get_last_lr(), optimizer.param_groups[0]["betas"],
      f"{optimizer.param_groups[0]['initial_lr']:.6f}", optimizer.param_groups[0]["max_lr"])
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=3)
print("scaler", scaler.is_enabled(), scaler.get_scale(), scaler.get_growth_factor(), scaler.get_backoff_factor())


def evaluate(model, loader):
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    with torch.inference_mode():
        for x, lengths, y in loader:
            logits = model(x, lengths)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(1) == y).sum().item()
            total += y.size(0)
    return loss_sum / total, correct / total


best_acc, best_state = -1.0, None
for epoch in range(epochs):
    model.train()
    running = 0.0
    for step, (x, lengths, y) in enumerate(train_loader):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=use_amp):
            logits = model(x, lengths)
            loss = F.cross_entropy(logits.float(), y, label_smoothing=0.1)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        running += loss.item()
        print(f"epoch {epoch} step {step} loss {loss.item():.4f} norm {grad_norm.item():.4f} "
              f"lr {scheduler.get_last_lr()[0]:.6f} beta1 {optimizer.param_groups[0]['betas'][0]:.4f} "
              f"scale {scaler.get_scale():.0f}")
    val_loss, val_acc = evaluate(model, val_loader)
    print(f"epoch {epoch}: train {running / len(train_loader):.4f} val {val_loss:.4f} acc {val_acc:.3f}")
    if val_acc > best_acc:
        best_acc, best_state = val_acc, copy.deepcopy(model.state_dict())

model.load_state_dict(best_state)
print("best", f"{best_acc:.3f}", f"{evaluate(model, val_loader)[0]:.4f}")
try:
    scheduler.step()
except ValueError as e:
    print("ValueError", str(e)[:60])

# an inf gradient: the scaler skips the step and backs off
model.train()
before = model.fc.weight.detach().clone()
optimizer.zero_grad()
x, lengths, y = next(iter(train_loader))
loss = F.cross_entropy(model(x, lengths), y) * float("inf")
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()
print("inf step skipped", torch.equal(before, model.fc.weight), scaler.get_scale(),
      sorted(scaler.state_dict().items()))
print("unscaled", [f"{v:.4f}" for v in scaler.scale(torch.tensor([1.0, 2.0])).tolist()])


# one training step under torch.compile against the same step eagerly
sched2 = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, total_steps=10)


def train_step(x, lengths, y):
    optimizer.zero_grad(set_to_none=True)
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    return loss


xb, lb = xb[:4, :2], lb[:4].clamp(max=2)         # (a short batch: a short unrolled GRU)
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(xb, lb, yb[:4]).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(xb, lb, yb[:4]).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
