# torch.nn.utils as public programs use it: jik876/hifi-gan models.py
# (ResBlock2 with weight_norm'd Conv1d layers, init_weights through
# m.weight.data.normal_ -- a no-op on a weight-normed layer, whose weight is
# recomputed from weight_g / weight_v -- get_padding, leaky_relu residuals,
# remove_weight_norm), torch.nn.utils.parametrizations.weight_norm (the
# parametrizations.weight.original0 / original1 state_dict keys,
# parametrize.remove_parametrizations, is_parametrized), the PyTorch
# pruning tutorial (intermediate/pruning_tutorial.py: LeNet,
# prune.random_unstructured, l1_unstructured, ln_structured, the
# weight_orig / weight_mask names, the forward pre-hooks, prune.remove,
# global_unstructured with its sparsity report) and ikostrikov's
# pytorch-trpo (parameters_to_vector / vector_to_parameters: get_flat_grad,
# set_flat_params and a backtracking line search).  Changes for a CPU test:
# tiny widths (channels=4, LeNet with 3x3 convs on 10x10 inputs), the random
# pruning's mask (whose RNG differs between tracec and torch) is printed
# for its count only, and the weights come from numpy, so tracec and torch
# compute the same numbers.  Then the weight-normed training step under
# torch.compile against the same step run eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.prune as prune
from torch.nn import Conv1d
from torch.nn.utils import parameters_to_vector, remove_weight_norm, vector_to_parameters, weight_norm
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm as p_weight_norm

LRELU_SLOPE = 0.1


def init_weights(m, mean=0.0, std=0.01):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.normal_(mean, std)


def get_padding(kernel_size, dilation=1):
    return int((kernel_size*dilation - dilation)/2)


class ResBlock2(torch.nn.Module):
    def __init__(self, h, channels, kernel_size=3, dilation=(1, 3)):
        super(ResBlock2, self).__init__()
        self.h = h
        self.convs = nn.ModuleList([
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=dilation[0],
                               padding=get_padding(kernel_size, dilation[0]))),
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=dilation[1],
                               padding=get_padding(kernel_size, dilation[1])))
        ])
        self.convs.apply(init_weights)

    def forward(self, x):
        for c in self.convs:
            xt = F.leaky_relu(x, LRELU_SLOPE)
            xt = c(xt)
            x = xt + x
        return x

    def remove_weight_norm(self):
        for l in self.convs:
            remove_weight_norm(l)


def numpy_init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            v = r.standard_normal(tuple(p.shape)) * (0.5 if p.dim() > 1 else 0.1) + (1.0 if name.endswith("_g") else 0)
            p.copy_(torch.from_numpy(v.astype(np.float32)))
    return model


# ---- hifi-gan ResBlock2 ----
torch.manual_seed(0)
block = ResBlock2(None, 4)
c0 = block.convs[0]
print("params", [n for n, _ in block.named_parameters()], type(c0.weight).__name__,
      isinstance(c0.weight, nn.Parameter), tuple(c0.weight_g.shape))
print("init_weights is undone", f"{c0.weight.std().item() > 0.05}")
numpy_init(block, 0)
x = torch.from_numpy(np.random.default_rng(1).standard_normal((2, 4, 12)).astype(np.float32))
target = torch.sin(torch.arange(12.)).expand(2, 4, 12)
opt = torch.optim.AdamW(block.parameters(), 0.01, betas=[0.8, 0.99])
for step in range(3):
    opt.zero_grad()
    loss = F.l1_loss(block(x), target)
    loss.backward()
    opt.step()
    print(f"hifigan step {step} loss {loss.item():.5f} g_grad {c0.weight_g.grad.norm().item():.5f}")
print("weight from g, v", torch.allclose(c0.weight, c0.weight_g * c0.weight_v / c0.weight_v.norm(dim=(1, 2), keepdim=True),
                                         atol=1e-6))
with torch.no_grad():
    before = block(x)
block.remove_weight_norm()
with torch.no_grad():
    after = block(x)
print("removed", [n for n, _ in block.named_parameters()], torch.allclose(before, after, atol=1e-5),
      isinstance(c0.weight, nn.Parameter))
try:
    remove_weight_norm(c0)
except ValueError as e:
    print("ValueError:", e)
try:
    weight_norm(weight_norm(nn.Linear(2, 2)))
except RuntimeError as e:
    print("RuntimeError:", e)
wn0 = weight_norm(nn.Linear(3, 2), dim=None)
print("dim=None", tuple(wn0.weight_g.shape), f"{wn0.weight_g.item():.5f}" if False else wn0.weight_g.dim())

# ---- parametrizations.weight_norm ----
torch.manual_seed(0)
lin = p_weight_norm(nn.Linear(4, 3))
print("parametrized", parametrize.is_parametrized(lin), parametrize.is_parametrized(lin, "weight"),
      list(lin.state_dict().keys()), type(lin.parametrizations.weight[0]).__name__)
numpy_init(lin, 2)
with torch.no_grad():
    g, v = lin.parametrizations.weight.original0, lin.parametrizations.weight.original1
    print("weight", torch.allclose(lin.weight, g * v / v.norm(dim=1, keepdim=True)), tuple(g.shape))
xl = torch.from_numpy(np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32))
lin(xl).pow(2).sum().backward()
print("original grads", [f"{p.grad.norm().item():.5f}" for p in lin.parameters()])
with parametrize.cached():
    a = lin.weight
    print("cached", a is lin.weight)
w_before = lin.weight.detach().clone()
parametrize.remove_parametrizations(lin, "weight", leave_parametrized=True)
print("removed", list(lin.state_dict().keys()), torch.allclose(lin.weight, w_before),
      parametrize.is_parametrized(lin))


# ---- the pruning tutorial ----
class LeNet(nn.Module):
    def __init__(self):
        super(LeNet, self).__init__()
        # 1 input image channel, 6 output channels, 3x3 square conv kernel
        self.conv1 = nn.Conv2d(1, 6, 3)
        self.conv2 = nn.Conv2d(6, 16, 3)
        self.fc1 = nn.Linear(16 * 1 * 1, 12)  # 5x5 image dimension
        self.fc2 = nn.Linear(12, 8)
        self.fc3 = nn.Linear(8, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(-1, int(x.nelement() / x.shape[0]))
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


model = numpy_init(LeNet(), 4)
module = model.conv1
print(list(module.named_parameters())[0][0], list(module.named_buffers()))
prune.random_unstructured(module, name="weight", amount=0.3)
print("random", [n for n, _ in module.named_parameters()], [n for n, _ in module.named_buffers()],
      int((module.weight_mask == 0).sum()), int((module.weight == 0).sum()))
prune.l1_unstructured(module, name="bias", amount=3)
print("bias mask", module.bias_mask.tolist(), [f"{v:.4f}" for v in module.bias.tolist()])
print("hooks", len(module._forward_pre_hooks), type(list(module._forward_pre_hooks.values())[0]).__name__)
prune.ln_structured(module, name="weight", amount=0.5, n=2, dim=0)
print("ln_structured", int((module.weight_mask.sum(dim=(1, 2, 3)) == 0).sum()),
      type(list(module._forward_pre_hooks.values())[1]).__name__,
      [type(m).__name__ for m in list(module._forward_pre_hooks.values())[1]] if hasattr(
          list(module._forward_pre_hooks.values())[1], "__iter__") else None)
prune.remove(module, 'weight')
print("removed", [n for n, _ in module.named_parameters()], [n for n, _ in module.named_buffers()],
      prune.is_pruned(model))

model = numpy_init(LeNet(), 5)
parameters_to_prune = (
    (model.conv1, 'weight'),
    (model.conv2, 'weight'),
    (model.fc1, 'weight'),
    (model.fc2, 'weight'),
    (model.fc3, 'weight'),
)
prune.global_unstructured(
    parameters_to_prune,
    pruning_method=prune.L1Unstructured,
    amount=0.2,
)
for name, m in (("conv1", model.conv1), ("conv2", model.conv2), ("fc1", model.fc1), ("fc2", model.fc2),
                ("fc3", model.fc3)):
    print(
        "Sparsity in {}.weight: {:.2f}%".format(name,
            100. * float(torch.sum(m.weight == 0))
            / float(m.weight.nelement())
        )
    )
total = sum(float(torch.sum(m.weight == 0)) for m, _ in parameters_to_prune)
print("Global sparsity: {:.2f}%".format(100. * total / sum(float(m.weight.nelement()) for m, _ in parameters_to_prune)))
img = torch.from_numpy(np.random.default_rng(6).standard_normal((3, 1, 10, 10)).astype(np.float32))
out = model(img)
out.sum().backward()
print("pruned grads zero", bool((model.fc1.weight_orig.grad[model.fc1.weight_mask == 0] == 0).all()),
      prune.is_pruned(model), f"{out.sum().item():.5f}")
mask = (torch.arange(12 * 16).view(12, 16) % 3 != 0).float()
prune.custom_from_mask(model.fc1, name="bias", mask=torch.tensor([0., 1.] * 6))
print("custom mask", int(model.fc1.bias.eq(0).sum()))


# ---- pytorch-trpo: flat parameters ----
def get_flat_params_from(model):
    params = []
    for param in model.parameters():
        params.append(param.data.view(-1))

    flat_params = torch.cat(params)
    return flat_params


def set_flat_params_to(model, flat_params):
    prev_ind = 0
    for param in model.parameters():
        flat_size = int(np.prod(list(param.size())))
        param.data.copy_(
            flat_params[prev_ind:prev_ind + flat_size].view(param.size()))
        prev_ind += flat_size


def get_flat_grad_from(net, grad_grad=False):
    grads = []
    for param in net.parameters():
        if grad_grad:
            grads.append(param.grad.grad.view(-1))
        else:
            grads.append(param.grad.view(-1))

    flat_grad = torch.cat(grads)
    return flat_grad


def linesearch(model, f, x, fullstep, expected_improve_rate, max_backtracks=10, accept_ratio=.1):
    fval = f(True).data
    print("fval before", f"{fval.item():.5f}")
    for (_n_backtracks, stepfrac) in enumerate(.5**np.arange(max_backtracks)):
        xnew = x + stepfrac * fullstep
        set_flat_params_to(model, xnew)
        newfval = f(True).data
        actual_improve = fval - newfval
        expected_improve = expected_improve_rate * stepfrac
        ratio = actual_improve / expected_improve
        print("a/e/r", f"{actual_improve.item():.5f}", f"{expected_improve.item():.5f}", f"{ratio.item():.5f}")

        if ratio.item() > accept_ratio and actual_improve.item() > 0:
            print("fval after", f"{newfval.item():.5f}")
            return True, xnew
    return False, x


policy = numpy_init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)), 7)
states = torch.from_numpy(np.random.default_rng(8).standard_normal((16, 4)).astype(np.float32))
advantages = torch.from_numpy(np.random.default_rng(9).standard_normal(16).astype(np.float32))


def get_loss(volatile=False):
    with torch.set_grad_enabled(not volatile):
        return -(policy(states)[:, 0] * advantages).mean()


loss = get_loss()
policy.zero_grad()
loss.backward()
flat = get_flat_grad_from(policy)
vec = parameters_to_vector(policy.parameters())
print("flat", tuple(flat.shape), tuple(vec.shape), torch.equal(vec, get_flat_params_from(policy)),
      f"{flat.norm().item():.5f}")
ok, xnew = linesearch(policy, get_loss, vec, -5.0 * flat, (flat * flat).sum() * 5.0)
print("linesearch", ok, f"{(xnew - vec).norm().item():.5f}")
vector_to_parameters(vec * 0.5, policy.parameters())
print("vector_to_parameters", f"{policy[0].weight[0, 0].item():.5f}", f"{vec[0].item() * 0.5:.5f}")
try:
    vector_to_parameters([1.0], policy.parameters())
except TypeError as e:
    print("TypeError:", e)

# the weight-normed (hifi-gan) training step under torch.compile
block = numpy_init(ResBlock2(None, 4), 10)
model, optimizer = block, torch.optim.AdamW(block.parameters(), 0.01, betas=[0.8, 0.99])


def train_step(x, target):
    optimizer.zero_grad()
    loss = F.l1_loss(block(x), target)
    loss.backward()
    optimizer.step()
    return loss


# the training step under torch.compile against the same step run eagerly
def compile_check(model, optimizer, train_step, *batch, steps=2):
    model.train()
    state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
    eager = [train_step(*batch).item() for _ in range(steps)]
    after = copy.deepcopy(model.state_dict())
    model.load_state_dict(state)
    optimizer.load_state_dict(opt_state)
    cstep = torch.compile(train_step)
    compiled = [cstep(*batch).item() for _ in range(steps)]
    print("compiled losses", [f"{v:.5f}" for v in compiled])
    print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
          all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-3, atol=1e-5)
              for k in after))
compile_check(model, optimizer, train_step, x, target)
