# CBAM: Convolutional Block Attention Module (Jongchan/attention-module,
# MODELS/cbam.py and MODELS/model_resnet.py), as written: BasicConv, Flatten,
# ChannelGate pooling with F.avg_pool2d / F.max_pool2d / F.lp_pool2d over
# the whole map and logsumexp_2d, one shared MLP, the sum of its outputs
# through torch.sigmoid(...).unsqueeze(2).unsqueeze(3).expand_as(x);
# ChannelPool (torch.cat of torch.max(x, 1)[0] and torch.mean(x, 1));
# SpatialGate (7x7 BasicConv, relu=False, F.sigmoid scale); CBAM in a
# ResNet BasicBlock with a downsample, init by kaiming_normal and
# m.weight.data.fill_(1); trained with SGD (momentum, weight decay) and
# cross_entropy. Written for this test: 8x8 images, 2 stages, 4 steps; one
# compiled training step against eager.
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import init


class BasicConv(nn.Module):
    def __init__(self, in_planes, out_planes, kernel_size, stride=1, padding=0, dilation=1, groups=1, relu=True, bn=True, bias=False):
        super(BasicConv, self).__init__()
        self.out_channels = out_planes
        self.conv = nn.Conv2d(in_planes, out_planes, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias)
        self.bn = nn.BatchNorm2d(out_planes, eps=1e-5, momentum=0.01, affine=True) if bn else None
        self.relu = nn.ReLU() if relu else None

    def forward(self, x):
        x = self.conv(x)
        if self.bn is not None:
            x = self.bn(x)
        if self.relu is not None:
            x = self.relu(x)
        return x


class Flatten(nn.Module):
    def forward(self, x):
        return x.view(x.size(0), -1)


class ChannelGate(nn.Module):
    def __init__(self, gate_channels, reduction_ratio=16, pool_types=['avg', 'max']):
        super(ChannelGate, self).__init__()
        self.gate_channels = gate_channels
        self.mlp = nn.Sequential(
            Flatten(),
            nn.Linear(gate_channels, gate_channels // reduction_ratio),
            nn.ReLU(),
            nn.Linear(gate_channels // reduction_ratio, gate_channels)
            )
        self.pool_types = pool_types

    def forward(self, x):
        channel_att_sum = None
        for pool_type in self.pool_types:
            if pool_type == 'avg':
                avg_pool = F.avg_pool2d(x, (x.size(2), x.size(3)), stride=(x.size(2), x.size(3)))
                channel_att_raw = self.mlp(avg_pool)
            elif pool_type == 'max':
                max_pool = F.max_pool2d(x, (x.size(2), x.size(3)), stride=(x.size(2), x.size(3)))
                channel_att_raw = self.mlp(max_pool)
            elif pool_type == 'lp':
                lp_pool = F.lp_pool2d(x, 2, (x.size(2), x.size(3)), stride=(x.size(2), x.size(3)))
                channel_att_raw = self.mlp(lp_pool)
            elif pool_type == 'lse':
                # LSE pool only
                lse_pool = logsumexp_2d(x)
                channel_att_raw = self.mlp(lse_pool)

            if channel_att_sum is None:
                channel_att_sum = channel_att_raw
            else:
                channel_att_sum = channel_att_sum + channel_att_raw

        scale = torch.sigmoid(channel_att_sum).unsqueeze(2).unsqueeze(3).expand_as(x)
        return x * scale


def logsumexp_2d(tensor):
    tensor_flatten = tensor.view(tensor.size(0), tensor.size(1), -1)
    s, _ = torch.max(tensor_flatten, dim=2, keepdim=True)
    outputs = s + (tensor_flatten - s).exp().sum(dim=2, keepdim=True).log()
    return outputs


class ChannelPool(nn.Module):
    def forward(self, x):
        return torch.cat((torch.max(x, 1)[0].unsqueeze(1), torch.mean(x, 1).unsqueeze(1)), dim=1)


class SpatialGate(nn.Module):
    def __init__(self):
        super(SpatialGate, self).__init__()
        kernel_size = 7
        self.compress = ChannelPool()
        self.spatial = BasicConv(2, 1, kernel_size, stride=1, padding=(kernel_size - 1) // 2, relu=False)

    def forward(self, x):
        x_compress = self.compress(x)
        x_out = self.spatial(x_compress)
        scale = F.sigmoid(x_out)  # broadcasting
        return x * scale


class CBAM(nn.Module):
    def __init__(self, gate_channels, reduction_ratio=16, pool_types=['avg', 'max'], no_spatial=False):
        super(CBAM, self).__init__()
        self.ChannelGate = ChannelGate(gate_channels, reduction_ratio, pool_types)
        self.no_spatial = no_spatial
        if not no_spatial:
            self.SpatialGate = SpatialGate()

    def forward(self, x):
        x_out = self.ChannelGate(x)
        if not self.no_spatial:
            x_out = self.SpatialGate(x_out)
        return x_out


def conv3x3(in_planes, out_planes, stride=1):
    "3x3 convolution with padding"
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, use_cbam=False, pool_types=['avg', 'max']):
        super(BasicBlock, self).__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

        if use_cbam:
            self.cbam = CBAM(planes, 4, pool_types)
        else:
            self.cbam = None

    def forward(self, x):
        residual = x

        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)

        if self.downsample is not None:
            residual = self.downsample(x)

        if not self.cbam is None:
            out = self.cbam(out)

        out += residual
        out = self.relu(out)

        return out


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes, pool_types):
        self.inplanes = 8
        super(ResNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(block, 8, layers[0], pool_types=pool_types[0])
        self.layer2 = self._make_layer(block, 16, layers[1], stride=2, pool_types=pool_types[1])
        self.fc = nn.Linear(16 * block.expansion, num_classes)

        init.kaiming_normal_(self.fc.weight)
        for key in self.state_dict():
            if key.split('.')[-1] == "weight":
                if "conv" in key:
                    init.kaiming_normal_(self.state_dict()[key], mode='fan_out')
                if "bn" in key:
                    if "SpatialGate" in key:
                        self.state_dict()[key][...] = 0
                    else:
                        self.state_dict()[key][...] = 1
            elif key.split(".")[-1] == 'bias':
                self.state_dict()[key][...] = 0

    def _make_layer(self, block, planes, blocks, stride=1, pool_types=['avg', 'max']):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion,
                          kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion),
            )

        layers = []
        layers.append(block(self.inplanes, planes, stride, downsample, use_cbam=True, pool_types=pool_types))
        self.inplanes = planes * block.expansion
        for i in range(1, blocks):
            layers.append(block(self.inplanes, planes, use_cbam=True, pool_types=pool_types))

        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.layer1(x)
        x = self.layer2(x)
        x = F.avg_pool2d(x, 4)
        x = x.view(x.size(0), -1)
        x = self.fc(x)
        return x


torch.manual_seed(0)
# stage 1 pools avg + max (the repo's default), stage 2 adds lp and lse
model = ResNet(BasicBlock, [1, 1], 5, pool_types=[['avg', 'max'], ['avg', 'max', 'lp', 'lse']])
print("params", sum(p.numel() for p in model.parameters()),
      "spatial bn", model.layer1[0].cbam.SpatialGate.spatial.bn.weight.item())
optimizer = torch.optim.SGD(model.parameters(), 0.05, momentum=0.9, weight_decay=1e-4)
criterion = nn.CrossEntropyLoss()

images = torch.randn(6, 3, 8, 8)
target = torch.tensor([0, 1, 2, 3, 4, 0])


def train_step(input, target):
    output = model(input)
    loss = criterion(output, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss, output


model.train()
for step in range(4):
    loss, output = train_step(images, target)
    prec1 = (output.argmax(1) == target).float().mean() * 100
    print(f"step {step} loss {loss.item():.5f} prec@1 {prec1.item():.1f}")

x = torch.randn(6, 3, 8, 8)
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c, out_c = torch.compile(train_step)(x, target)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e, out_e = train_step(x, target)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-5),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-5) for k, v in model.state_dict().items()))
model.eval()
with torch.no_grad():
    att = model.layer2[0].cbam.ChannelGate(torch.randn(2, 16, 4, 4))
    print("eval logits", [round(v, 4) for v in model(x[:2]).flatten().tolist()])
    print("gate", att.shape, round(att.abs().sum().item(), 4))
