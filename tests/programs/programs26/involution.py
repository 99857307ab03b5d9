# Involution (Li et al., CVPR 2021), after d-li14/involution
# (https://github.com/d-li14/involution, cls/mmcls/models/utils/
# involution_naive.py and the RedNet bottleneck in cls/mmcls/models/
# backbones/rednet.py): the kernel generated per pixel by a 1x1 reduce /
# span ConvModule pair (mmcv's Conv2d without bias + BatchNorm2d + ReLU,
# written out here), an nn.Unfold(kernel, 1, padding, stride) of the input
# viewed as (b, groups, group_channels, k*k, h, w) and multiplied with the
# kernel and summed, the stride-2 average pooling of the kernel branch; and
# the nn.Unfold documentation's example: a convolution as Unfold, a matmul
# and nn.Fold, checked against F.conv2d, and fold(unfold(x)) as x times the
# overlap counts.
# Written for this test: a 2-block RedNet stem at 32 channels on 16x16
# images, 4 classes, Adam, 3 steps; one training step compiled against eager.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class ConvModule(nn.Sequential):
    """mmcv.cnn.ConvModule(conv_cfg=None, norm_cfg=dict(type='BN'), act_cfg=dict(type='ReLU'))"""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 conv_cfg=None, norm_cfg=None, act_cfg=dict(type='ReLU')):
        layers = [nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding,
                            bias=norm_cfg is None)]
        if norm_cfg is not None:
            layers.append(nn.BatchNorm2d(out_channels))
        if act_cfg is not None:
            layers.append(nn.ReLU(inplace=True))
        super().__init__(*layers)


class involution(nn.Module):

    def __init__(self,
                 channels,
                 kernel_size,
                 stride):
        super(involution, self).__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.channels = channels
        reduction_ratio = 4
        self.group_channels = 16
        self.groups = self.channels // self.group_channels
        self.conv1 = ConvModule(
            in_channels=channels,
            out_channels=channels // reduction_ratio,
            kernel_size=1,
            conv_cfg=None,
            norm_cfg=dict(type='BN'),
            act_cfg=dict(type='ReLU'))
        self.conv2 = ConvModule(
            in_channels=channels // reduction_ratio,
            out_channels=kernel_size**2 * self.groups,
            kernel_size=1,
            stride=1,
            conv_cfg=None,
            norm_cfg=None,
            act_cfg=None)
        if stride > 1:
            self.avgpool = nn.AvgPool2d(stride, stride)
        self.unfold = nn.Unfold(kernel_size, 1, (kernel_size-1)//2, stride)

    def forward(self, x):
        weight = self.conv2(self.conv1(x if self.stride == 1 else self.avgpool(x)))
        b, c, h, w = weight.shape
        weight = weight.view(b, self.groups, self.kernel_size**2, h, w).unsqueeze(2)
        out = self.unfold(x).view(b, self.groups, self.group_channels, self.kernel_size**2, h, w)
        out = (weight * out).sum(dim=3).view(b, self.channels, h, w)
        return out


class Bottleneck(nn.Module):
    """RedNet's bottleneck: its 3x3 convolution replaced by involution."""
    expansion = 4

    def __init__(self, in_channels, out_channels, stride=1, downsample=None):
        super().__init__()
        mid = out_channels // self.expansion
        self.conv1 = nn.Conv2d(in_channels, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = involution(mid, 7, stride)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class RedNetTiny(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32),
                                  nn.ReLU(inplace=True))
        self.layer1 = Bottleneck(32, 64, downsample=nn.Sequential(
            nn.Conv2d(32, 64, 1, bias=False), nn.BatchNorm2d(64)))
        self.layer2 = Bottleneck(64, 128, stride=2, downsample=nn.Sequential(
            nn.AvgPool2d(2, 2), nn.Conv2d(64, 128, 1, bias=False), nn.BatchNorm2d(128)))
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# the nn.Unfold documentation: convolution = unfold + matmul + fold
torch.manual_seed(0)
inp = torch.randn(1, 3, 10, 12)
w = torch.randn(2, 3, 4, 5)
inp_unf = torch.nn.functional.unfold(inp, (4, 5))
out_unf = inp_unf.transpose(1, 2).matmul(w.view(w.size(0), -1).t()).transpose(1, 2)
out = torch.nn.functional.fold(out_unf, (7, 8), (1, 1))
print("unfold", inp_unf.shape, "fold", out.shape,
      "max diff", (torch.nn.functional.conv2d(inp, w) - out).abs().max().item() < 1e-4)
fold = nn.Fold(output_size=(4, 5), kernel_size=(2, 2))
blocks = torch.randn(1, 3 * 2 * 2, 12)
print("fold", fold(blocks).shape)
x = torch.ones(1, 2, 6, 6)
counts = F.fold(F.unfold(x, 3, padding=1, stride=1), (6, 6), 3, padding=1, stride=1)
print("overlap counts", counts[0, 0, :3, :3].tolist())

rng = np.random.RandomState(0)
images = torch.from_numpy(rng.randn(4, 3, 16, 16).astype(np.float32))
labels = torch.from_numpy(rng.randint(0, 4, size=4))
torch.manual_seed(0)
model = RedNetTiny()
inv = model.layer2.conv2
print("involution", inv.groups, inv.unfold, tuple(inv(torch.randn(2, 32, 16, 16)).shape))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(3):
    loss = F.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.6f} kernel-gen grad "
          f"{model.layer1.conv2.conv2[0].weight.grad.norm().item():.6f}")


def train_step(images, labels):
    loss = F.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(images, labels)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(images, labels)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-5) for k, v in model.state_dict().items()))
