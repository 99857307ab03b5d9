# Modelled on the PyTorch static-quantization tutorial
# (pytorch/tutorials advanced_source/static_quantization_tutorial.rst): its
# MobileNetV2 built from ConvBNReLU (an nn.Sequential subclass of Conv2d,
# BatchNorm2d, ReLU) and InvertedResidual blocks whose skip connection goes
# through nn.quantized.FloatFunctional().add, wrapped in QuantStub /
# DeQuantStub, and its fuse_model(): torch.ao.quantization.fuse_modules on
# each ConvBNReLU's ['0', '1', '2'] and each InvertedResidual's last
# conv / bn pair, checked to compute the same function in eval mode, then
# fuse_modules_qat for training (ConvBnReLU2d containers).
# Written for this test: a two-block MobileNetV2 at width 8 on synthetic
# 8x8 images, SGD, 2 steps on the fused-for-QAT model against the unfused
# one; one step compiled against eager.
import copy

import numpy as np
import torch
from torch import nn
from torch.ao.quantization import DeQuantStub, QuantStub


def _make_divisible(v, divisor, min_value=None):
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNReLU(nn.Sequential):
    def __init__(self, in_planes, out_planes, kernel_size=3, stride=1, groups=1):
        padding = (kernel_size - 1) // 2
        super(ConvBNReLU, self).__init__(
            nn.Conv2d(in_planes, out_planes, kernel_size, stride, padding, groups=groups, bias=False),
            nn.BatchNorm2d(out_planes, momentum=0.1),
            nn.ReLU(inplace=False)
        )


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super(InvertedResidual, self).__init__()
        self.stride = stride
        assert stride in [1, 2]
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = self.stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU(inp, hidden_dim, kernel_size=1))
        layers.extend([
            ConvBNReLU(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup, momentum=0.1),
        ])
        self.conv = nn.Sequential(*layers)
        self.skip_add = nn.quantized.FloatFunctional()

    def forward(self, x):
        if self.use_res_connect:
            return self.skip_add.add(x, self.conv(x))
        else:
            return self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes=3, width_mult=1.0, inverted_residual_setting=None, round_nearest=8):
        super(MobileNetV2, self).__init__()
        block = InvertedResidual
        input_channel = 8
        last_channel = 16
        if inverted_residual_setting is None:
            inverted_residual_setting = [[1, 8, 1, 1], [2, 8, 2, 1]]
        input_channel = _make_divisible(input_channel * width_mult, round_nearest)
        self.last_channel = _make_divisible(last_channel * max(1.0, width_mult), round_nearest)
        features = [ConvBNReLU(3, input_channel, stride=2)]
        for t, c, n, s in inverted_residual_setting:
            output_channel = _make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                stride = s if i == 0 else 1
                features.append(block(input_channel, output_channel, stride, expand_ratio=t))
                input_channel = output_channel
        features.append(ConvBNReLU(input_channel, self.last_channel, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.quant = QuantStub()
        self.dequant = DeQuantStub()
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.last_channel, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out')
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.quant(x)
        x = self.features(x)
        x = x.mean([2, 3])
        x = self.classifier(x)
        x = self.dequant(x)
        return x

    def fuse_model(self, is_qat=False):
        fuse_modules = torch.ao.quantization.fuse_modules_qat if is_qat else torch.ao.quantization.fuse_modules
        for m in self.modules():
            if type(m) == ConvBNReLU:
                fuse_modules(m, ['0', '1', '2'], inplace=True)
            if type(m) == InvertedResidual:
                for idx in range(len(m.conv)):
                    if type(m.conv[idx]) == nn.Conv2d:
                        fuse_modules(m.conv, [str(idx), str(idx + 1)], inplace=True)


rng = np.random.RandomState(0)
images = torch.from_numpy(rng.randn(4, 3, 8, 8).astype(np.float32))
labels = torch.from_numpy(rng.randint(0, 3, size=4))
torch.manual_seed(0)
float_model = MobileNetV2()
criterion = nn.CrossEntropyLoss()
# batch statistics for the running averages the eval fold uses
float_model.train()
with torch.no_grad():
    float_model(images)
    float_model(images * 0.5 + 0.2)
float_model.eval()
print("size", sum(p.numel() for p in float_model.parameters()))
ref = float_model(images)
fused = copy.deepcopy(float_model)
fused.fuse_model()
print("fused blocks", [type(m).__name__ for m in fused.features[0]], type(fused.features[1].conv[0]).__name__,
      [type(m).__name__ for m in fused.features[2].conv])
out = fused(images)
print("eval logits", [round(v, 5) for v in out.flatten().tolist()])
print("fused == float", torch.allclose(out, ref, atol=1e-5), round((out - ref).abs().max().item(), 5) < 1e-5)
print("fused keys", [k for k in fused.state_dict() if k.startswith("features.2.")])

# QAT fusion keeps training-mode modules: the fused model trains as the float one
torch.manual_seed(1)
model = MobileNetV2()
model.train()
qat_model = copy.deepcopy(model)
qat_model.fuse_model(is_qat=True)
print("qat blocks", type(qat_model.features[0][0]).__name__, [type(m).__name__ for m in qat_model.features[0][0]],
      type(qat_model.features[2].conv[2]).__name__)
for m in (model, qat_model):
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    torch.manual_seed(2)
    for step in range(2):
        loss = criterion(m(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"{'qat' if m is qat_model else 'float'} step {step} loss {loss.item():.6f}")
print("same weights", all(torch.allclose(a, b, atol=1e-6) for a, b in zip(model.parameters(), qat_model.parameters())))

optimizer = torch.optim.SGD(qat_model.parameters(), lr=0.1, momentum=0.9)
qat_model.classifier[0].p = 0.0


def train_step(images, labels):
    loss = criterion(qat_model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(qat_model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(images, labels)
after_c = copy.deepcopy(qat_model.state_dict())
qat_model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(images, labels)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-5) for k, v in qat_model.state_dict().items()))
