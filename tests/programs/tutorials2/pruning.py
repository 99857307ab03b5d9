# PyTorch tutorial "Pruning Tutorial" (torch.nn.utils.prune on LeNet:
# random_unstructured, l1_unstructured, ln_structured, iterative pruning and
# its history, remove, serialization keys, pruning several parameters,
# global_unstructured, a custom BasePruningMethod), then a few training
# steps of the pruned model.  Weights come from numpy so tracec and torch
# run the same numbers; random draws (torch seeded with manual_seed(0))
# decide which entries random_unstructured prunes.
import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
from torch import nn
import torch.nn.utils.prune as prune
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class LeNet(nn.Module):
    def __init__(self):
        super(LeNet, self).__init__()
        # 1 input image channel, 6 output channels, 5x5 square conv kernel
        self.conv1 = nn.Conv2d(1, 6, 5)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)  # 5x5 image dimension
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.view(-1, int(x.nelement() / x.shape[0]))
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


def numpy_init(model, seed):
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(g.uniform(-0.2, 0.2, tuple(p.shape)).astype(np.float32)))
    return model


model = numpy_init(LeNet().to(device=device), 0)

module = model.conv1
print([name for name, _ in module.named_parameters()])
print(list(module.named_buffers()))

prune.random_unstructured(module, name="weight", amount=0.3)
print([name for name, _ in module.named_parameters()])
print([(name, tuple(b.shape), int(b.sum().item())) for name, b in module.named_buffers()])
print('zeros', int((module.weight == 0).sum()), module.weight.shape)
print(module._forward_pre_hooks.__class__.__name__, len(module._forward_pre_hooks))

prune.l1_unstructured(module, name="bias", amount=3)
print([name for name, _ in module.named_parameters()])
print([name for name, _ in module.named_buffers()])
print(module.bias)
print(len(module._forward_pre_hooks))

prune.ln_structured(module, name="weight", amount=0.5, n=2, dim=0)
print('channels kept', (module.weight.abs().sum((1, 2, 3)) != 0).int().tolist())
for hook in module._forward_pre_hooks.values():
    if hook._tensor_name == "weight":  # select out the correct hook
        break

print(list(hook))  # pruning history in the container
print([type(h).__name__ for h in hook])
print(model.state_dict().keys())

prune.remove(module, 'weight')
print([name for name, _ in module.named_parameters()])
print([name for name, _ in module.named_buffers()])
print(prune.is_pruned(model), prune.is_pruned(nn.Linear(2, 2)))

new_model = numpy_init(LeNet(), 1)
for name, module in new_model.named_modules():
    # prune 20% of connections in all 2D-conv layers
    if isinstance(module, torch.nn.Conv2d):
        prune.l1_unstructured(module, name='weight', amount=0.2)
    # prune 40% of connections in all linear layers
    elif isinstance(module, torch.nn.Linear):
        prune.l1_unstructured(module, name='weight', amount=0.4)

print(dict(new_model.named_buffers()).keys())  # to verify that all masks exist

model = numpy_init(LeNet(), 2)

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

for name, m in [("conv1", model.conv1), ("conv2", model.conv2), ("fc1", model.fc1),
                ("fc2", model.fc2), ("fc3", model.fc3)]:
    print(
        "Sparsity in {}.weight: {:.2f}%".format(name,
            100. * float(torch.sum(m.weight == 0))
            / float(m.weight.nelement())
        )
    )
print(
    "Global sparsity: {:.2f}%".format(
        100. * float(
            torch.sum(model.conv1.weight == 0)
            + torch.sum(model.conv2.weight == 0)
            + torch.sum(model.fc1.weight == 0)
            + torch.sum(model.fc2.weight == 0)
            + torch.sum(model.fc3.weight == 0)
        )
        / float(
            model.conv1.weight.nelement()
            + model.conv2.weight.nelement()
            + model.fc1.weight.nelement()
            + model.fc2.weight.nelement()
            + model.fc3.weight.nelement()
        )
    )
)


class FooBarPruningMethod(prune.BasePruningMethod):
    """Prune every other entry in a tensor
    """
    PRUNING_TYPE = 'unstructured'

    def compute_mask(self, t, default_mask):
        mask = default_mask.clone()
        mask.view(-1)[::2] = 0
        return mask


def foobar_unstructured(module, name):
    FooBarPruningMethod.apply(module, name)
    return module


model = numpy_init(LeNet(), 3)
foobar_unstructured(model.fc3, name='bias')

print(model.fc3.bias_mask)

# beyond the tutorial: the pruned model trains (the masked entries stay zero)
rng = np.random.default_rng(4)
x = torch.from_numpy(rng.standard_normal((8, 1, 32, 32)).astype(np.float32))
y = torch.from_numpy(rng.integers(0, 10, 8))
model = numpy_init(LeNet(), 5)
prune.l1_unstructured(model.fc1, name='weight', amount=0.5)
prune.ln_structured(model.conv2, name='weight', amount=0.25, n=1, dim=1)
prune.custom_from_mask(model.fc2, name='bias', mask=(torch.arange(84) % 3 != 0))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
for step in range(4):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    print('step', step, 'loss %.5f' % loss.item(),
          'fc1 zeros', int((model.fc1.weight == 0).sum()),
          'orig grad zeros', int((model.fc1.weight_orig.grad == 0).sum()))
for m, n in ((model.fc1, 'weight'), (model.conv2, 'weight'), (model.fc2, 'bias')):
    prune.remove(m, n)
print(sorted(model.state_dict().keys()))
print('final %.5f' % F.cross_entropy(model(x), y).item())
for bad in [lambda: prune.l1_unstructured(model.fc3, 'weight', amount=1.5),
            lambda: prune.l1_unstructured(model.fc3, 'weight', amount=-1),
            lambda: prune.l1_unstructured(model.fc3, 'weight', amount=10000),
            lambda: prune.remove(model.fc3, 'weight'),
            lambda: prune.ln_structured(model.fc3, 'weight', amount=0.5, n=2, dim=3),
            lambda: prune.global_unstructured([(model.fc3, 'weight')], pruning_method=prune.LnStructured, amount=0.1, n=2, dim=0)]:
    try:
        bad()
        print('no error')
    except (ValueError, TypeError, IndexError) as e:
        print(type(e).__name__, e)
