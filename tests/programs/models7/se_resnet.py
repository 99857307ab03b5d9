# moskomule/senet.pytorch senet/se_module.py (SELayer: AdaptiveAvgPool2d(1),
# the squeeze / excite Linear layers, Sigmoid gating through expand_as) and
# senet/se_resnet.py (CifarSEBasicBlock with its 1x1 downsample or identity
# lambda, CifarSEResNet with _make_layer and its init), trained as its
# cifar.py does (SGD with momentum and weight decay, StepLR).  Changes for a
# CPU test: n_size=1, reduction=4, 8x8 inputs and a batch of 4, and the
# weights come from numpy after the published init (whose draws differ
# between tracec and torch), so tracec and torch compute the same numbers.
# Then the training step under torch.compile against the same step run
# eagerly.
import copy

import numpy as np
import torch
from torch import nn


class SELayer(nn.Module):
    def __init__(self, channel, reduction=16):
        super(SELayer, self).__init__()
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Sequential(
            nn.Linear(channel, channel // reduction, bias=False),
            nn.ReLU(inplace=True),
            nn.Linear(channel // reduction, channel, bias=False),
            nn.Sigmoid()
        )

    def forward(self, x):
        b, c, _, _ = x.size()
        y = self.avg_pool(x).view(b, c)
        y = self.fc(y).view(b, c, 1, 1)
        return x * y.expand_as(x)


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class CifarSEBasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1, reduction=16):
        super(CifarSEBasicBlock, self).__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.se = SELayer(planes, reduction)
        if inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, kernel_size=1, stride=stride, bias=False),
                                            nn.BatchNorm2d(planes))
        else:
            self.downsample = lambda x: x
        self.stride = stride

    def forward(self, x):
        residual = self.downsample(x)
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)
        out = self.se(out)

        out += residual
        out = self.relu(out)

        return out


class CifarSEResNet(nn.Module):
    def __init__(self, block, n_size, num_classes=10, reduction=16):
        super(CifarSEResNet, self).__init__()
        self.inplane = 16
        self.conv1 = nn.Conv2d(
            3, self.inplane, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplane)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(
            block, 16, blocks=n_size, stride=1, reduction=reduction)
        self.layer2 = self._make_layer(
            block, 32, blocks=n_size, stride=2, reduction=reduction)
        self.layer3 = self._make_layer(
            block, 64, blocks=n_size, stride=2, reduction=reduction)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)
        self.initialize()

    def initialize(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes, blocks, stride, reduction):
        strides = [stride] + [1] * (blocks - 1)
        layers = []
        for stride in strides:
            layers.append(block(self.inplane, planes, stride, reduction))
            self.inplane = planes

        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)

        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)

        x = self.avgpool(x)
        x = x.view(x.size(0), -1)
        x = self.fc(x)

        return x


def se_resnet20(**kwargs):
    """Constructs a ResNet-18 model.

    """
    model = CifarSEResNet(CifarSEBasicBlock, 3, **kwargs)
    return model


def numpy_init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                v = (1.0 if name.endswith("weight") else 0.0) + 0.1 * r.standard_normal(tuple(p.shape))
            else:
                v = r.standard_normal(tuple(p.shape)) * (2.0 / p[0].numel()) ** 0.5
            p.copy_(torch.from_numpy(v.astype(np.float32)))
    return model


se = SELayer(8, reduction=4)
numpy_init(se, 3)
z = torch.from_numpy(np.random.default_rng(7).standard_normal((2, 8, 3, 3)).astype(np.float32) - 1.0)
gate = se.fc(se.avg_pool(z).view(2, 8))
print("gate", [f"{v:.5f}" for v in gate[0].tolist()], tuple(se(z).shape))

torch.manual_seed(0)
model = CifarSEResNet(CifarSEBasicBlock, 1, num_classes=10, reduction=4)
print("init", f"{model.bn1.weight.mean().item():.1f}", isinstance(model.layer1[0].downsample, nn.Module),
      isinstance(model.layer2[0].downsample, nn.Sequential), sum(p.numel() for p in model.parameters()))
numpy_init(model, 0)
rng = np.random.default_rng(1)
x = torch.from_numpy(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
y = torch.from_numpy(rng.integers(0, 10, 4))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(params=model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2, 0.1)
for epoch in range(3):
    model.train()
    output = model(x)
    loss = criterion(output, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    print(f"epoch {epoch} loss {loss.item():.5f} lr {scheduler.get_last_lr()[0]:.4f}")
print("se grad", f"{model.layer2[0].se.fc[0].weight.grad.norm().item():.5f}")
model.eval()
with torch.no_grad():
    out = model(x)
print("eval", [f"{v:.5f}" for v in out[0].tolist()[:5]])


def train_step(x, y):
    output = model(x)
    loss = criterion(output, y)
    optimizer.zero_grad()
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
compile_check(model, optimizer, train_step, x, y)
