# The Deep Equilibrium model of the NeurIPS 2020 "Deep Implicit Layers"
# tutorial, chapter 4 (http://implicit-layers-tutorial.org/
# deep_equilibrium_models/, locuslab), as written there: the Anderson
# acceleration solver (history buffers X / F, the bordered (m+1)x(m+1)
# system H solved per batch, torch.solve spelled torch.linalg.solve as in
# its current ports), DEQFixedPoint (the fixed point found under no_grad,
# one re-engaging call of f, and the implicit backward pass as a
# register_hook on z that solves the adjoint fixed point with
# autograd.grad(f0, z0, y, retain_graph=True)), the ResNetLayer cell
# (GroupNorm, weights normal_(0, 0.01)), the Conv2d / BatchNorm2d /
# AvgPool2d / Linear classifier, Adam with CosineAnnealingLR and
# cross-entropy. Written for this test: 8x8 one-channel synthetic images,
# 8 channels, 6 steps; one compiled training step against eager.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.autograd as autograd
import torch.optim as optim


def anderson(f, x0, m=5, lam=1e-4, max_iter=50, tol=1e-2, beta=1.0):
    """ Anderson acceleration for fixed point iteration. """
    bsz, d, H, W = x0.shape
    X = torch.zeros(bsz, m, d * H * W, dtype=x0.dtype, device=x0.device)
    F = torch.zeros(bsz, m, d * H * W, dtype=x0.dtype, device=x0.device)
    X[:, 0], F[:, 0] = x0.view(bsz, -1), f(x0).view(bsz, -1)
    X[:, 1], F[:, 1] = F[:, 0], f(F[:, 0].view_as(x0)).view(bsz, -1)

    H = torch.zeros(bsz, m + 1, m + 1, dtype=x0.dtype, device=x0.device)
    H[:, 0, 1:] = H[:, 1:, 0] = 1
    y = torch.zeros(bsz, m + 1, 1, dtype=x0.dtype, device=x0.device)
    y[:, 0] = 1

    res = []
    for k in range(2, max_iter):
        n = min(k, m)
        G = F[:, :n] - X[:, :n]
        H[:, 1:n + 1, 1:n + 1] = torch.bmm(G, G.transpose(1, 2)) + lam * torch.eye(n, dtype=x0.dtype, device=x0.device)[None]
        alpha = torch.linalg.solve(H[:, :n + 1, :n + 1], y[:, :n + 1])[:, 1:n + 1, 0]   # (bsz x n)

        X[:, k % m] = beta * (alpha[:, None] @ F[:, :n])[:, 0] + (1 - beta) * (alpha[:, None] @ X[:, :n])[:, 0]
        F[:, k % m] = f(X[:, k % m].view_as(x0)).view(bsz, -1)
        res.append((F[:, k % m] - X[:, k % m]).norm().item() / (1e-5 + F[:, k % m].norm().item()))
        if (res[-1] < tol):
            break
    return X[:, k % m].view_as(x0), res


class ResNetLayer(nn.Module):
    def __init__(self, n_channels, n_inner_channels, kernel_size=3, num_groups=8):
        super().__init__()
        self.conv1 = nn.Conv2d(n_channels, n_inner_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.conv2 = nn.Conv2d(n_inner_channels, n_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.norm1 = nn.GroupNorm(num_groups, n_inner_channels)
        self.norm2 = nn.GroupNorm(num_groups, n_channels)
        self.norm3 = nn.GroupNorm(num_groups, n_channels)
        self.conv1.weight.data.normal_(0, 0.01)
        self.conv2.weight.data.normal_(0, 0.01)

    def forward(self, z, x):
        y = self.norm1(F.relu(self.conv1(z)))
        return self.norm3(F.relu(z + self.norm2(x + self.conv2(y))))


class DEQFixedPoint(nn.Module):
    def __init__(self, f, solver, **kwargs):
        super().__init__()
        self.f = f
        self.solver = solver
        self.kwargs = kwargs

    def forward(self, x):
        # compute forward pass and re-engage autograd tape
        with torch.no_grad():
            z, self.forward_res = self.solver(lambda z: self.f(z, x), torch.zeros_like(x), **self.kwargs)
        z = self.f(z, x)

        # set up Jacobian vector product (without additional forward calls)
        z0 = z.clone().detach().requires_grad_()
        f0 = self.f(z0, x)

        def backward_hook(grad):
            g, self.backward_res = self.solver(lambda y: autograd.grad(f0, z0, y, retain_graph=True)[0] + grad,
                                               grad, **self.kwargs)
            return g

        z.register_hook(backward_hook)
        return z


torch.manual_seed(0)
rng = np.random.RandomState(0)
chan = 8
f = ResNetLayer(chan, 16, kernel_size=3, num_groups=4)
deq = DEQFixedPoint(f, anderson, tol=1e-5, max_iter=12, m=5)
model = nn.Sequential(nn.Conv2d(1, chan, kernel_size=3, bias=True, padding=1),
                      nn.BatchNorm2d(chan),
                      deq,
                      nn.BatchNorm2d(chan),
                      nn.AvgPool2d(4, 4),
                      nn.Flatten(),
                      nn.Linear(chan * 2 * 2, 10))

X = torch.tensor(rng.randn(16, 1, 8, 8), dtype=torch.float32)
y = torch.tensor(rng.randint(0, 10, size=16))
opt = optim.Adam(model.parameters(), lr=1e-3)
max_epochs = 6
scheduler = optim.lr_scheduler.CosineAnnealingLR(opt, max_epochs, eta_min=1e-6)


def train_step(X, y):
    opt.zero_grad()
    yp = model(X)
    loss = nn.CrossEntropyLoss()(yp, y)
    loss.backward()
    opt.step()
    return loss, yp


for epoch in range(max_epochs):
    model.train()
    loss, yp = train_step(X, y)
    scheduler.step()
    err = (yp.max(dim=1)[1] != y).float().sum().item() / X.shape[0]
    print(f"epoch {epoch}: loss {loss.item():.6f} err {err:.4f} "
          f"fwd iters {len(deq.forward_res)} res {deq.forward_res[-1]:.3e} "
          f"bwd iters {len(deq.backward_res)}")

model.eval()
out = model(X).detach()   # (the hook needs a graph: evaluated with grad mode on)
print("eval logits[0]", [round(v, 4) for v in out[0].tolist()])

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
model.train()
loss_c, _ = torch.compile(train_step)(X, y)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
opt.load_state_dict(opt_state)
loss_e, _ = train_step(X, y)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-5) for k, v in model.state_dict().items()))
