"""Domain-adversarial training (DANN) with a gradient reversal layer as
arthurdouillard/deepcourse writes it (docs/code/da/grl.py, dann.py): a
torch.autograd.Function whose forward returns its input as-is with a
default ``factor`` argument (applied with one or two arguments), the factor
saved for backward through ctx.save_for_backward(torch.tensor(factor)),
a backward returning ``factor * grad, None``; the DANN module keeping
GradientReversal.apply as an attribute, a shared CNN feeding a classifier
and, through the reversal, a domain head; training with cross-entropy on
labelled source images and a BCE-with-logits domain loss on source and
target images, the factor ramped by 2 / (1 + exp(-10 p)) - 1. Changes for
a CPU test: random 28 x 28 images for MNIST / MNIST-M, narrower layers, a
few steps; the gradient the reversal sends into the CNN is printed."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class GradientReversal(torch.autograd.Function):
  @staticmethod
  def forward(ctx, x, factor=-1):
    ctx.save_for_backward(torch.tensor(factor))
    return x

  @staticmethod
  def backward(ctx, grad):
    factor, = ctx.saved_tensors

    return factor * grad, None


class DANN(nn.Module):
  def __init__(self):
    super().__init__()  # Important, otherwise will throw an error

    self.cnn = nn.Sequential(
        nn.Conv2d(3, 8, kernel_size=5, stride=1, padding=2),  # 8x28x28
        nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=2, stride=2, padding=0),  # 8x14x14
        nn.Conv2d(8, 12, kernel_size=5, stride=1, padding=2),  # 12x14x14
        nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=2, stride=2, padding=0),  # 12x7x7
    )

    self.classif = nn.Sequential(
        nn.Linear(7 * 7 * 12, 32),
        nn.ReLU(inplace=True),
        nn.Linear(32, 32),
        nn.ReLU(inplace=True),
        nn.Linear(32, 10)
    )

    self.domain = nn.Sequential(
        nn.Linear(7 * 7 * 12, 32),
        nn.ReLU(inplace=True),
        nn.Linear(32, 1)
    )

    self.grl = GradientReversal.apply

  def forward(self, x, factor=1):
    batch_size = len(x)

    x = self.cnn(x)
    x = x.view(batch_size, -1)

    class_pred = self.classif(x)
    domain_pred = self.domain(self.grl(x, -1 * factor))

    return class_pred, domain_pred


torch.manual_seed(0)
rs = np.random.RandomState(0)
source_x = torch.tensor(rs.rand(32, 3, 28, 28).astype(np.float32))
source_y = torch.tensor(rs.randint(0, 10, 32))
target_x = torch.tensor(rs.rand(32, 3, 28, 28).astype(np.float32) * 0.5 + 0.25)

model = DANN()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
steps, bs = 4, 8
for step in range(steps):
    p = step / steps
    factor = 2. / (1. + math.exp(-10 * p)) - 1
    xs, ys = source_x[step * bs:(step + 1) * bs], source_y[step * bs:(step + 1) * bs]
    xt = target_x[step * bs:(step + 1) * bs]
    optimizer.zero_grad()
    class_pred, domain_pred_s = model(xs, factor)
    _, domain_pred_t = model(xt, factor)
    class_loss = F.cross_entropy(class_pred, ys)
    domain_pred = torch.cat((domain_pred_s, domain_pred_t))
    domain_y = torch.cat((torch.zeros(bs, 1), torch.ones(bs, 1)))
    domain_loss = F.binary_cross_entropy_with_logits(domain_pred, domain_y)
    loss = class_loss + domain_loss
    loss.backward()
    print("step {} factor {:.4f} class {:.5f} domain {:.5f} cnn grad {:.6f} domain-head grad {:.6f}".format(
        step, factor, class_loss.item(), domain_loss.item(), model.cnn[0].weight.grad.norm().item(),
        model.domain[0].weight.grad.norm().item()))
    optimizer.step()

# the reversal alone: the CNN's gradient from the domain loss is minus the factor times the plain one
feats = model.cnn(source_x[:4]).view(4, -1)
plain = torch.autograd.grad(model.domain(feats).sum(), model.cnn[3].weight)[0]
feats = model.cnn(source_x[:4]).view(4, -1)
rev = torch.autograd.grad(model.domain(GradientReversal.apply(feats, -0.5)).sum(), model.cnn[3].weight)[0]
print("reversed / plain:", round((rev / plain)[plain.abs() > 1e-6].mean().item(), 5))
one_arg = GradientReversal.apply(feats)
print("default factor:", round(torch.autograd.grad(model.domain(one_arg).sum(), feats)[0].sum().item(), 5),
      round(torch.autograd.grad(model.domain(feats).sum(), feats)[0].sum().item(), 5))
print("output is a new tensor:", one_arg is feats, one_arg.grad_fn.__class__.__name__)
