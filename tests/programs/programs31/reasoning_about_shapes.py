# PyTorch recipe "Reasoning about Shapes in PyTorch" (recipes/recipes/
# reasoning_about_shapes), written the way the recipe has it: the
# conv/pool output-size formula checked against a real Conv2d, tensors and
# modules on the "meta" device (t = torch.rand(2, 3, 10, 10, device="meta"),
# conv = torch.nn.Conv2d(3, 5, 2, device="meta"), print(out)), a model built
# under `with torch.device("meta"):` with a forward hook on every module
# printing f"Shape of output to {module} is {output.shape}." and a model
# moved off the meta device with to_empty() and initialised.  The recipe
# walks torchvision's resnet50; here a small CNN of the same kinds of layers
# (Conv2d, BatchNorm2d, ReLU, MaxPool2d, AdaptiveAvgPool2d, Linear).
# Written for this test: the real model trained for a few steps, and one
# compiled training step checked against the same step run eagerly.
import copy
import math

import torch
import torch.nn as nn

torch.manual_seed(0)


def conv_out_size(i, k, s=1, p=0, d=1):
    return math.floor((i + 2 * p - d * (k - 1) - 1) / s + 1)


print(conv_out_size(10, 2), torch.nn.Conv2d(3, 5, 2)(torch.rand(2, 3, 10, 10)).shape)
print(conv_out_size(28, 3, s=2, p=1), nn.Conv2d(1, 4, 3, stride=2, padding=1)(torch.rand(1, 1, 28, 28)).shape)
print(conv_out_size(28, 3, s=2, d=2), nn.MaxPool2d(3, stride=2, dilation=2)(torch.rand(1, 1, 28, 28)).shape)

t = torch.rand(2, 3, 10, 10, device="meta")
conv = torch.nn.Conv2d(3, 5, 2, device="meta")
out = conv(t)
print(out)
print(out.device, out.is_meta, conv.weight.is_meta, conv.weight.shape)


class SmallNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, kernel_size=3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
            nn.Conv2d(8, 16, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


def fw_hook(module, input, output):
    print(f"Shape of output to {module} is {output.shape}.")


# Any tensor created within this torch.device context manager will be
# on the meta device.
with torch.device("meta"):
    model = SmallNet()
    input = torch.randn(2, 3, 32, 32)

for name, layer in model.named_modules():
    layer.register_forward_hook(fw_hook)

out = model(input)
print(out.shape, out.is_meta, next(model.parameters()).is_meta)

model = model.to_empty(device="cpu")
torch.manual_seed(1)
for m in model.modules():
    if hasattr(m, "reset_parameters"):
        m.reset_parameters()
    if isinstance(m, nn.BatchNorm2d):
        m.reset_running_stats()
print("materialized", next(model.parameters()).device, next(model.parameters()).is_meta)

for name, layer in model.named_modules():
    layer._forward_hooks.clear()

data = torch.randn(8, 3, 32, 32)
labels = torch.randint(0, 10, (8,))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()


def train_step(x, y):
    optimizer.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


for step in range(3):
    print("step", step, "loss", round(train_step(data, labels).item(), 6))

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(data, labels)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(data, labels)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-5) for k, v in model.state_dict().items()))
