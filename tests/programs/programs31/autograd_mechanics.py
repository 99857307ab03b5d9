# PyTorch notes "Autograd mechanics" (docs/source/notes/autograd.rst) and
# the "A Gentle Introduction to torch.autograd" tutorial (beginner/blitz/
# autograd_tutorial), their examples as written: grad_fn's saved tensors
# (y = x.pow(2): y.grad_fn._saved_self), excluding subgraphs
# (requires_grad_(False) on a frozen backbone, the tutorial's resnet
# fine-tuning idiom on a small model), torch.no_grad / torch.enable_grad /
# torch.set_grad_enabled / torch.inference_mode and is_inference, the
# in-place correctness check (a tensor saved for backward modified in
# place: "one of the variables needed for gradient computation has been
# modified by an inplace operation"), Q = 3*a**3 - b**2 with
# Q.backward(gradient=external_grad), tensor hooks (register_hook),
# retain_grad, register_post_accumulate_grad_hook, and
# torch.autograd.grad(..., create_graph=True) for a gradient penalty.
# Written for this test: a small fine-tuning step compiled and checked
# against the same step run eagerly.
import copy

import torch
import torch.nn as nn
from torch import optim

torch.manual_seed(0)

x = torch.randn(5, requires_grad=True)
y = x.pow(2)
print(x.equal(y.grad_fn._saved_self))  # True
print(x is y.grad_fn._saved_self)  # True

x = torch.randn(5, requires_grad=True)
y = x.exp()
print(y.equal(y.grad_fn._saved_result))  # True
print(y is y.grad_fn._saved_result)  # False

a = torch.tensor([2., 3.], requires_grad=True)
b = torch.tensor([6., 4.], requires_grad=True)
Q = 3 * a ** 3 - b ** 2
external_grad = torch.tensor([1., 1.])
Q.backward(gradient=external_grad)
print(9 * a ** 2 == a.grad)
print(-2 * b == b.grad)

x = torch.rand(5, 5)
y = torch.rand(5, 5)
z = torch.rand((5, 5), requires_grad=True)
a = x + y
print(f"Does `a` require gradients?: {a.requires_grad}")
b = x + z
print(f"Does `b` require gradients?: {b.requires_grad}")

x = torch.tensor([1.], requires_grad=True)
with torch.no_grad():
    y = x * 2
print(y.requires_grad)
with torch.no_grad():
    with torch.enable_grad():
        y = x * 2
print(y.requires_grad)
is_train = False
with torch.set_grad_enabled(is_train):
    y = x * 2
print(y.requires_grad)
torch.set_grad_enabled(True)
y = x * 2
print(y.requires_grad)
torch.set_grad_enabled(False)
y = x * 2
print(y.requires_grad)
torch.set_grad_enabled(True)
with torch.inference_mode():
    y = x * 2
print(y.requires_grad, y.is_inference(), x.is_inference())


@torch.inference_mode()
def predict(t):
    return t * 3


print(predict(x).is_inference())

a = torch.randn(3, requires_grad=True)
b = a.sigmoid()
c = b * 2
b.mul_(3)
try:
    c.sum().backward()
    print("no error")
except RuntimeError as e:
    print("RuntimeError:", str(e).split(";")[0])

a = torch.randn(3, requires_grad=True)
b = a * 1
b.add_(1)
b.sum().backward()
print("in-place on a non-saved tensor", a.grad)

v = torch.tensor([0., 0., 0.], requires_grad=True)
h = v.register_hook(lambda grad: grad * 2)  # double the gradient
v.backward(torch.tensor([1., 2., 3.]))
print(v.grad)
h.remove()

x = torch.randn(4, requires_grad=True)
y = x * 3
y.retain_grad()
z = (y ** 2).sum()
z.backward()
print(y.grad is not None, torch.allclose(y.grad, 2 * y), x.grad.shape)

model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
# Freeze all the parameters in the network
for param in model.parameters():
    param.requires_grad = False
# Replace the last layer: a new layer's parameters require grad
model[4] = nn.Linear(8, 3)
optimizer = optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
print([n for n, p in model.named_parameters() if p.requires_grad])

accumulated = []
for p in model[4].parameters():
    p.register_post_accumulate_grad_hook(lambda p: accumulated.append(tuple(p.grad.shape)))

data = torch.randn(16, 6)
labels = torch.randint(0, 3, (16,))
loss_fn = nn.CrossEntropyLoss()


def train_step(inp, target):
    optimizer.zero_grad()
    out = model(inp)
    loss = loss_fn(out, target)
    # a gradient penalty on the input, as WGAN-GP writes it
    inp = inp.detach().requires_grad_(True)
    score = model(inp).logsumexp(dim=1).sum()
    (g,) = torch.autograd.grad(score, inp, create_graph=True)
    loss = loss + 0.1 * (g.norm(2, dim=1) - 1).pow(2).mean()
    loss.backward()
    optimizer.step()
    return loss


for step in range(4):
    print("step", step, "loss", round(train_step(data, labels).item(), 6))
print("post-accumulate hooks", accumulated[:2], len(accumulated))
print("frozen grads", [p.grad is None for p in model[0].parameters()])

accumulated.clear()
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(data, labels)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(data, labels)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
print("hooks ran", len(accumulated))
