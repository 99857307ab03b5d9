# pytorch/vision torchvision/models/densenet.py (_DenseLayer with its
# concatenating bn_function, the memory-efficient path through
# torch.utils.checkpoint, the torch.jit._overload_method forward overloads,
# _DenseBlock as an nn.ModuleDict, _Transition as an nn.Sequential, DenseNet
# with its published init and _load_state_dict's key remapping of old
# checkpoints).  Changes for a CPU test: a tiny configuration (growth_rate=4,
# block_config=(2, 2), num_init_features=8, bn_size=2, 16x16 inputs, 5
# classes), _log_api_usage_once dropped, and the weights come from numpy
# after the published init (whose draws differ between tracec and torch), so
# tracec and torch compute the same numbers.  The memory-efficient model is
# checked against the plain one (outputs and gradients), then a few SGD
# steps, then the training step under torch.compile against the same step
# run eagerly.
import copy
import re
from collections import OrderedDict
from typing import Any, List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from torch import Tensor


class _DenseLayer(nn.Module):
    def __init__(
        self, num_input_features: int, growth_rate: int, bn_size: int, drop_rate: float, memory_efficient: bool = False
    ) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1, stride=1, bias=False)

        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1, padding=1, bias=False)

        self.drop_rate = float(drop_rate)
        self.memory_efficient = memory_efficient

    def bn_function(self, inputs: List[Tensor]) -> Tensor:
        concated_features = torch.cat(inputs, 1)
        bottleneck_output = self.conv1(self.relu1(self.norm1(concated_features)))  # noqa: T484
        return bottleneck_output

    # todo: rewrite when torchscript supports any
    def any_requires_grad(self, input: List[Tensor]) -> bool:
        for tensor in input:
            if tensor.requires_grad:
                return True
        return False

    @torch.jit.unused  # noqa: T484
    def call_checkpoint_bottleneck(self, input: List[Tensor]) -> Tensor:
        def closure(*inputs):
            return self.bn_function(inputs)

        return cp.checkpoint(closure, *input, use_reentrant=False)

    @torch.jit._overload_method  # noqa: F811
    def forward(self, input: List[Tensor]) -> Tensor:  # noqa: D102
        pass

    @torch.jit._overload_method  # noqa: F811
    def forward(self, input: Tensor) -> Tensor:  # noqa: D102
        pass

    # torchscript does not yet support *args, so we overload method
    # allowing it to take either a List[Tensor] or single Tensor
    def forward(self, input: Tensor) -> Tensor:  # noqa: F811
        if isinstance(input, Tensor):
            prev_features = [input]
        else:
            prev_features = input

        if self.memory_efficient and self.any_requires_grad(prev_features):
            if torch.jit.is_scripting():
                raise Exception("Memory Efficient not supported in JIT")

            bottleneck_output = self.call_checkpoint_bottleneck(prev_features)
        else:
            bottleneck_output = self.bn_function(prev_features)

        new_features = self.conv2(self.relu2(self.norm2(bottleneck_output)))
        if self.drop_rate > 0:
            new_features = F.dropout(new_features, p=self.drop_rate, training=self.training)
        return new_features


class _DenseBlock(nn.ModuleDict):
    _version = 2

    def __init__(
        self,
        num_layers: int,
        num_input_features: int,
        bn_size: int,
        growth_rate: int,
        drop_rate: float,
        memory_efficient: bool = False,
    ) -> None:
        super().__init__()
        for i in range(num_layers):
            layer = _DenseLayer(
                num_input_features + i * growth_rate,
                growth_rate=growth_rate,
                bn_size=bn_size,
                drop_rate=drop_rate,
                memory_efficient=memory_efficient,
            )
            self.add_module("denselayer%d" % (i + 1), layer)

    def forward(self, init_features: Tensor) -> Tensor:
        features = [init_features]
        for name, layer in self.items():
            new_features = layer(features)
            features.append(new_features)
        return torch.cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, num_input_features: int, num_output_features: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(num_input_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(num_input_features, num_output_features, kernel_size=1, stride=1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    r"""Densenet-BC model class, based on
    `"Densely Connected Convolutional Networks" <https://arxiv.org/pdf/1608.06993.pdf>`_.
    """

    def __init__(
        self,
        growth_rate: int = 32,
        block_config: Tuple[int, int, int, int] = (6, 12, 24, 16),
        num_init_features: int = 64,
        bn_size: int = 4,
        drop_rate: float = 0,
        num_classes: int = 1000,
        memory_efficient: bool = False,
    ) -> None:

        super().__init__()

        # First convolution
        self.features = nn.Sequential(
            OrderedDict(
                [
                    ("conv0", nn.Conv2d(3, num_init_features, kernel_size=7, stride=2, padding=3, bias=False)),
                    ("norm0", nn.BatchNorm2d(num_init_features)),
                    ("relu0", nn.ReLU(inplace=True)),
                    ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1)),
                ]
            )
        )

        # Each denseblock
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            block = _DenseBlock(
                num_layers=num_layers,
                num_input_features=num_features,
                bn_size=bn_size,
                growth_rate=growth_rate,
                drop_rate=drop_rate,
                memory_efficient=memory_efficient,
            )
            self.features.add_module("denseblock%d" % (i + 1), block)
            num_features = num_features + num_layers * growth_rate
            if i != len(block_config) - 1:
                trans = _Transition(num_input_features=num_features, num_output_features=num_features // 2)
                self.features.add_module("transition%d" % (i + 1), trans)
                num_features = num_features // 2

        # Final batch norm
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))

        # Linear layer
        self.classifier = nn.Linear(num_features, num_classes)

        # Official init from torch repo.
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, 0)

    def forward(self, x: Tensor) -> Tensor:
        features = self.features(x)
        out = F.relu(features, inplace=True)
        out = F.adaptive_avg_pool2d(out, (1, 1))
        out = torch.flatten(out, 1)
        out = self.classifier(out)
        return out


def _load_state_dict(model: nn.Module, state_dict) -> None:
    # '.'s are no longer allowed in module names, but previous _DenseLayer
    # has keys 'norm.1', 'relu.1', 'conv.1', 'norm.2', 'relu.2', 'conv.2'.
    # They are also in the checkpoints in model_urls. This pattern is used
    # to find such keys.
    pattern = re.compile(
        r"^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|running_mean|running_var))$"
    )

    for key in list(state_dict.keys()):
        res = pattern.match(key)
        if res:
            new_key = res.group(1) + res.group(2)
            state_dict[new_key] = state_dict[key]
            del state_dict[key]
    model.load_state_dict(state_dict)


def numpy_init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                v = (1.0 if name.endswith("weight") else 0.0) + 0.1 * r.standard_normal(tuple(p.shape))
            else:
                v = r.standard_normal(tuple(p.shape)) * (p[0].numel() ** -0.5)
            p.copy_(torch.from_numpy(v.astype(np.float32)))
    return model


torch.manual_seed(0)
cfg = dict(growth_rate=4, block_config=(2, 2), num_init_features=8, bn_size=2, num_classes=5)
model = DenseNet(**cfg)
print("init", all(m.bias.abs().sum().item() == 0 for m in model.modules() if isinstance(m, nn.BatchNorm2d)),
      f"{model.features.conv0.weight.std().item():.1f}")
numpy_init(model, 0)
print("params", sum(p.numel() for p in model.parameters()), len(model.state_dict()))
print([k for k in model.state_dict() if "denseblock1.denselayer1" in k][:6])

# an old-style checkpoint ('norm.1' keys) through _load_state_dict
old = OrderedDict()
for k, v in model.state_dict().items():
    if not k.endswith("num_batches_tracked"):
        k = re.sub(r"(denselayer\d+\.(?:norm|relu|conv))([12])", r"\1.\2", k)
    old[k] = v.clone()
print("old keys", [k for k in old if "denselayer1." in k][:3])
effnet = DenseNet(memory_efficient=True, **cfg)
_load_state_dict(effnet, old)

rng = np.random.default_rng(1)
x = torch.from_numpy(rng.standard_normal((4, 3, 16, 16)).astype(np.float32))
y = torch.from_numpy(rng.integers(0, 5, 4))

# memory-efficient (checkpointed) against plain: outputs and gradients
outs, grads = [], []
for m in (model, effnet):
    m.train()
    m.zero_grad()
    out = m(x)
    F.cross_entropy(out, y).backward()
    outs.append(out.detach())
    grads.append([p.grad.clone() for p in m.parameters()])
print("out", [f"{v:.5f}" for v in outs[0][0].tolist()])
print("memory_efficient same:", torch.allclose(outs[0], outs[1], atol=1e-5),
      all(torch.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(*grads)))
print("running_mean", [f"{v:.5f}" for v in effnet.features.norm5.running_mean[:4].tolist()])
print("num_batches_tracked", model.features.norm0.num_batches_tracked.item(),
      effnet.features.denseblock1.denselayer1.norm1.num_batches_tracked.item())

# a few SGD steps with the memory-efficient model
optimizer = torch.optim.SGD(effnet.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
criterion = nn.CrossEntropyLoss()
for step in range(3):
    optimizer.zero_grad()
    loss = criterion(effnet(x), y)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.5f}")
effnet.eval()
with torch.no_grad():
    pred = effnet(x).argmax(1)
print("eval pred", pred.tolist(), "acc", (pred == y).float().mean().item())

# the training step under torch.compile against the same step run eagerly
effnet.train()


def train_step(x, y):
    optimizer.zero_grad()
    loss = criterion(effnet(x), y)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(effnet.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(x, y).item() for _ in range(2)]
after = copy.deepcopy(effnet.state_dict())
effnet.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(x, y).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(effnet.state_dict()[k].float(), after[k].float(), rtol=1e-3, atol=1e-5) for k in after))
