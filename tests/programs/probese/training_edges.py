"""A small training loop that leans on PyTorch's edges: a label-smoothed
cross-entropy whose grad_fn graph is printed, a rolling buffer shifted with
clone() (the unsafe x[1:] = x[:-1] is refused, as PyTorch refuses it), an
expanded mask filled in place, a second backward through an unfold /
interpolation (allowed: their nodes save no tensors) and through a scaled
loss (refused: x * 0.5 saves the 0.5)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def names(fn, depth=0):
    out = [type(fn).__name__]
    if depth < 3:
        for nf, _ in fn.next_functions:
            if nf is not None:
                out.append(names(nf, depth + 1))
    return out


model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(32, 8)
y = (x[:, :4].argmax(1))
history = torch.zeros(5)
for step in range(20):
    loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    history[:-1] = history[1:].clone()
    history[-1] = loss.detach()
    if step == 0:
        print("graph", names(loss.grad_fn))
print("losses", [round(v, 4) for v in history.tolist()])
try:
    history[1:] = history[:-1]
except RuntimeError as e:
    print("shift refused:", str(e)[:60])

mask = torch.zeros(1, 6).expand(3, 6)
print("expanded row write", mask[0].add(0).sum().item())
mask[0] = 1.0
print("after x[0] = 1:", mask.sum().item())

img = torch.arange(16.0).reshape(1, 1, 4, 4).requires_grad_()
cols = F.unfold(img, 2).sum() + F.interpolate(img, scale_factor=2, mode="bilinear").sum()
cols.backward()
cols.backward()
print("twice through unfold + bilinear:", img.grad.sum().item())
scaled = (img * 0.5).sum()
scaled.backward()
try:
    scaled.backward()
except RuntimeError as e:
    print("twice through x * 0.5:", str(e)[:50])
try:
    torch.ones(2).cuda()
except AssertionError as e:
    print("cuda:", e)
