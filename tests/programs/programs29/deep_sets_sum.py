# Deep Sets (Zaheer et al. 2017), the digit-sum experiment in the shape of
# the authors' PyTorch code (https://github.com/manzilzaheer/DeepSets,
# DigitSum/text_sum.ipynb: an nn.Embedding phi of the digits, an MLP
# with ELU, the permutation-invariant sum over the set dimension, a rho
# MLP to one output, L1Loss, Adam, variable set sizes per batch), with the
# padded-batch form common in its re-implementations (a boolean mask
# multiplied into phi's output before the sum, lengths from mask.sum(1)).
# Written for this test: digit sets of 2-6 elements (numpy), 40 Adam
# steps, the invariance to permuting each set checked, one compiled
# training step against eager.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class DeepSet(nn.Module):
    def __init__(self, vocab=10, embed=16, hidden=32):
        super(DeepSet, self).__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.phi = nn.Sequential(nn.Linear(embed, hidden), nn.ELU(inplace=True),
                                 nn.Linear(hidden, hidden), nn.ELU(inplace=True))
        self.rho = nn.Sequential(nn.Linear(hidden, hidden), nn.ELU(inplace=True),
                                 nn.Linear(hidden, 1))

    def forward(self, x, mask):
        h = self.phi(self.embed(x))                      # (B, N, H)
        h = h * mask.unsqueeze(-1).float()               # padding contributes nothing
        pooled = h.sum(dim=1)                            # permutation-invariant pooling
        return self.rho(pooled).squeeze(-1)


rng = np.random.RandomState(0)


def batch(bsz, max_len=6):
    lengths = rng.randint(2, max_len + 1, size=bsz)
    x = rng.randint(0, 10, size=(bsz, max_len))
    mask = np.arange(max_len)[None, :] < lengths[:, None]
    x = np.where(mask, x, 0)
    y = (x * mask).sum(1)
    return (torch.from_numpy(x).long(), torch.from_numpy(mask),
            torch.from_numpy(y).float())


torch.manual_seed(0)
model = DeepSet()
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, weight_decay=1e-5)
criterion = nn.L1Loss()


def train_step(x, mask, y):
    optimizer.zero_grad()
    pred = model(x, mask)
    loss = criterion(pred, y)
    loss.backward()
    optimizer.step()
    return loss


for step in range(40):
    x, mask, y = batch(32)
    loss = train_step(x, mask, y)
    if step % 10 == 0 or step == 39:
        print(f"step {step}: L1 {loss.item():.5f} lengths {mask.sum(1)[:4].tolist()}")

x, mask, y = batch(8)
model.eval()
with torch.no_grad():
    pred = model(x, mask)
    perm = torch.stack([torch.randperm(6) for _ in range(8)])
    pred_perm = model(torch.gather(x, 1, perm), torch.gather(mask, 1, perm))
print("targets", y.tolist())
print("predictions", [round(v, 3) for v in pred.tolist()])
print("permutation invariant", torch.allclose(pred, pred_perm, atol=1e-4),
      "mae", round(F.l1_loss(pred, y).item(), 5))

model.train()
x, mask, y = batch(32)
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(x, mask, y)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(x, mask, y)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
