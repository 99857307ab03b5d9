# Checkpointing a Sequential model, after prigoyal/pytorch_memonger's
# tutorial (https://github.com/prigoyal/pytorch_memonger, tutorial/
# Checkpointing_for_PyTorch_models.ipynb) and the torch.utils.checkpoint
# documentation: a VGG-style nn.Sequential of Conv2d / BatchNorm2d / ReLU
# blocks run whole and through checkpoint_sequential(model, segments,
# input, use_reentrant=...) in both modes, the input requiring grad for the
# reentrant variant as the tutorial sets it, the outputs and gradients
# compared, the BatchNorm running statistics (which the recomputation in
# backward updates a second time: num_batches_tracked is 2 after one step,
# in both variants, as in PyTorch), checkpoint() on a module's part with a
# keyword, then training with SGD through the checkpointed forward.
# Written for this test: 6 blocks of width 8 on 12x12 images, 3 segments,
# 3 steps; one checkpointed training step compiled against eager.
import copy
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

warnings.simplefilter("ignore")


def block(cin, cout):
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


def make_model():
    layers = block(3, 8)
    for _ in range(5):
        layers += block(8, 8)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)]
    return nn.Sequential(*layers)


rng = np.random.RandomState(0)
images = torch.from_numpy(rng.randn(4, 3, 12, 12).astype(np.float32))
labels = torch.from_numpy(rng.randint(0, 4, size=4))
torch.manual_seed(0)
model = make_model()
reference = copy.deepcopy(model)

# the whole model, run normally
input_var = images.clone().requires_grad_(True)
out_ref = reference(input_var)
F.cross_entropy(out_ref, labels).backward()
print("plain", [round(v, 5) for v in out_ref[0].tolist()])

for use_reentrant in (True, False):
    net = copy.deepcopy(model)
    input_var = images.clone().requires_grad_(True)
    chunks = 3
    out = checkpoint_sequential(net, chunks, input_var, use_reentrant=use_reentrant)
    loss = F.cross_entropy(out, labels)
    loss.backward()
    print(f"reentrant={use_reentrant}", torch.allclose(out, out_ref, atol=1e-6),
          torch.allclose(net[0].weight.grad, reference[0].weight.grad, atol=1e-6),
          torch.allclose(input_var.grad, images.grad if images.grad is not None else input_var.grad),
          "bn batches", net[1].num_batches_tracked.item(),
          "running mean", [round(v, 6) for v in net[1].running_mean[:3].tolist()])


# a custom segment through checkpoint() with a keyword, as the docs show
class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = make_model()[:-3]
        self.fc = nn.Linear(8, 4)

    def forward(self, x, scale=1.0):
        h = checkpoint(self.body, x, use_reentrant=False)
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1)) * scale


torch.manual_seed(1)
head = Head()
out = head(images, scale=0.5)
out.sum().backward()
print("checkpoint()", [round(v, 5) for v in out[0].tolist()],
      round(head.body[0].weight.grad.norm().item(), 6))

optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def train_step(images, labels):
    optimizer.zero_grad()
    out = checkpoint_sequential(model, 3, images, use_reentrant=False)
    loss = F.cross_entropy(out, labels)
    loss.backward()
    optimizer.step()
    return loss


for step in range(3):
    loss = train_step(images, labels)
    print(f"step {step} loss {loss.item():.6f}")

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(images, labels)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(images, labels)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-6) for k, v in model.state_dict().items()))
