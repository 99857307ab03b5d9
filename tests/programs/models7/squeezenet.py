# pytorch/vision torchvision/models/squeezenet.py (Fire with its
# concatenated 1x1 / 3x3 expands, SqueezeNet 1_0 and 1_1 with ceil_mode
# max pools, the final conv's separate init, the classifier's
# AdaptiveAvgPool2d and flatten), trained with SGD as torchvision's
# references/classification does.  Changes for a CPU test: every channel
# count is divided by 16 (the `w` helper), 32x32 inputs (1_1) and 64x64
# (1_0), dropout=0.0 (dropout masks differ between tracec and torch), and
# the weights come from numpy after the published init (whose draws differ
# between tracec and torch), so tracec and torch compute the same numbers.
# Then the training step under torch.compile against the same step run
# eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.init as init


def w(c):
    return max(2, c // 16)


class Fire(nn.Module):
    def __init__(self, inplanes: int, squeeze_planes: int, expand1x1_planes: int, expand3x3_planes: int) -> None:
        super().__init__()
        self.inplanes = inplanes
        self.squeeze = nn.Conv2d(inplanes, squeeze_planes, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze_planes, expand1x1_planes, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze_planes, expand3x3_planes, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat(
            [self.expand1x1_activation(self.expand1x1(x)), self.expand3x3_activation(self.expand3x3(x))], 1
        )


class SqueezeNet(nn.Module):
    def __init__(self, version: str = "1_0", num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.num_classes = num_classes
        if version == "1_0":
            self.features = nn.Sequential(
                nn.Conv2d(3, w(96), kernel_size=7, stride=2),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(w(96), w(16), w(64), w(64)),
                Fire(w(128), w(16), w(64), w(64)),
                Fire(w(128), w(32), w(128), w(128)),
                nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(w(256), w(32), w(128), w(128)),
                Fire(w(256), w(48), w(192), w(192)),
                Fire(w(384), w(48), w(192), w(192)),
                Fire(w(384), w(64), w(256), w(256)),
                nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(w(512), w(64), w(256), w(256)),
            )
        elif version == "1_1":
            self.features = nn.Sequential(
                nn.Conv2d(3, w(64), kernel_size=3, stride=2),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(w(64), w(16), w(64), w(64)),
                Fire(w(128), w(16), w(64), w(64)),
                nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(w(128), w(32), w(128), w(128)),
                Fire(w(256), w(32), w(128), w(128)),
                nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
                Fire(w(256), w(48), w(192), w(192)),
                Fire(w(384), w(48), w(192), w(192)),
                Fire(w(384), w(64), w(256), w(256)),
                Fire(w(512), w(64), w(256), w(256)),
            )
        else:
            # FIXME: Is this needed? SqueezeNet should only be called from the
            # FIXME: squeezenet1_x() functions
            # FIXME: This checking is not done for the other models
            raise ValueError(f"Unsupported SqueezeNet version {version}: 1_0 or 1_1 expected")

        # Final convolution is initialized differently from the rest
        final_conv = nn.Conv2d(w(512), self.num_classes, kernel_size=1)
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout), final_conv, nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1))
        )

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                if m is final_conv:
                    init.normal_(m.weight, mean=0.0, std=0.01)
                else:
                    init.kaiming_uniform_(m.weight)
                if m.bias is not None:
                    init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.classifier(x)
        return torch.flatten(x, 1)


def numpy_init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                v = 0.1 + 0.05 * r.standard_normal(tuple(p.shape))
            else:
                v = r.standard_normal(tuple(p.shape)) * (2.0 / p[0].numel()) ** 0.5
            p.copy_(torch.from_numpy(v.astype(np.float32)))
    return model


try:
    SqueezeNet("1_2")
except ValueError as e:
    print("ValueError:", e)

rng = np.random.default_rng(1)
criterion = nn.CrossEntropyLoss()
for version, size in (("1_0", 64), ("1_1", 32)):
    torch.manual_seed(0)
    model = SqueezeNet(version, num_classes=6, dropout=0.0)
    final = model.classifier[1]
    print(version, "init", f"{final.weight.std().item():.2f}", final.bias.abs().sum().item(),
          sum(p.numel() for p in model.parameters()))
    numpy_init(model, 0)
    x = torch.from_numpy(rng.standard_normal((4, 3, size, size)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 6, 4))
    print("features", tuple(model.features(x).shape))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=2e-4)
    for step in range(3):
        output = model(x)
        loss = criterion(output, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        acc1 = (output.argmax(1) == y).float().sum() * 100.0 / y.numel()
        print(f"{version} step {step} loss {loss.item():.5f} acc1 {acc1.item():.1f}")
    model.eval()
    with torch.no_grad():
        out = model(x)
    print("eval", [f"{v:.5f}" for v in out[0].tolist()])


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
