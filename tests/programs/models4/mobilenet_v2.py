# tonylins/pytorch-mobilenet-v2: MobileNetV2.py (conv_bn, conv_1x1_bn,
# make_divisible, InvertedResidual with depthwise convolutions
# groups=hidden_dim and in-place ReLU6, MobileNetV2 with width_mult and
# _initialize_weights) as published, at width_mult=0.5 on 32x32 images (the
# smallest input_size its assert allows) with 10 classes; a few SGD steps
# with a checkpoint saved and loaded through torch.save / torch.load, and a
# training step under torch.compile (of a shortened network, width_mult=0.35)
# against the same step run eagerly.  _initialize_weights draws from torch's
# generator: its statistics are printed, then the weights are reset from
# numpy so both runs compute the same numbers.
import copy
import io
import math

import numpy as np
import torch
import torch.nn as nn


def conv_bn(inp, oup, stride):
    return nn.Sequential(
        nn.Conv2d(inp, oup, 3, stride, 1, bias=False),
        nn.BatchNorm2d(oup),
        nn.ReLU6(inplace=True)
    )


def conv_1x1_bn(inp, oup):
    return nn.Sequential(
        nn.Conv2d(inp, oup, 1, 1, 0, bias=False),
        nn.BatchNorm2d(oup),
        nn.ReLU6(inplace=True)
    )


def make_divisible(x, divisible_by=8):
    import numpy as np
    return int(np.ceil(x * 1. / divisible_by) * divisible_by)


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super(InvertedResidual, self).__init__()
        self.stride = stride
        assert stride in [1, 2]

        hidden_dim = int(inp * expand_ratio)
        self.use_res_connect = self.stride == 1 and inp == oup

        if expand_ratio == 1:
            self.conv = nn.Sequential(
                # dw
                nn.Conv2d(hidden_dim, hidden_dim, 3, stride, 1, groups=hidden_dim, bias=False),
                nn.BatchNorm2d(hidden_dim),
                nn.ReLU6(inplace=True),
                # pw-linear
                nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
                nn.BatchNorm2d(oup),
            )
        else:
            self.conv = nn.Sequential(
                # pw
                nn.Conv2d(inp, hidden_dim, 1, 1, 0, bias=False),
                nn.BatchNorm2d(hidden_dim),
                nn.ReLU6(inplace=True),
                # dw
                nn.Conv2d(hidden_dim, hidden_dim, 3, stride, 1, groups=hidden_dim, bias=False),
                nn.BatchNorm2d(hidden_dim),
                nn.ReLU6(inplace=True),
                # pw-linear
                nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
                nn.BatchNorm2d(oup),
            )

    def forward(self, x):
        if self.use_res_connect:
            return x + self.conv(x)
        else:
            return self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, n_class=1000, input_size=224, width_mult=1.):
        super(MobileNetV2, self).__init__()
        block = InvertedResidual
        input_channel = 32
        last_channel = 1280
        interverted_residual_setting = [
            # t, c, n, s
            [1, 16, 1, 1],
            [6, 24, 2, 2],
            [6, 32, 3, 2],
            [6, 64, 4, 2],
            [6, 96, 3, 1],
            [6, 160, 3, 2],
            [6, 320, 1, 1],
        ]

        # building first layer
        assert input_size % 32 == 0
        # input_channel = make_divisible(input_channel * width_mult)  # first channel is always 32!
        self.last_channel = make_divisible(last_channel * width_mult) if width_mult > 1.0 else last_channel
        self.features = [conv_bn(3, input_channel, 2)]
        # building inverted residual blocks
        for t, c, n, s in interverted_residual_setting:
            output_channel = make_divisible(c * width_mult) if t > 1 else c
            for i in range(n):
                if i == 0:
                    self.features.append(block(input_channel, output_channel, s, expand_ratio=t))
                else:
                    self.features.append(block(input_channel, output_channel, 1, expand_ratio=t))
                input_channel = output_channel
        # building last several layers
        self.features.append(conv_1x1_bn(input_channel, self.last_channel))
        # make it nn.Sequential
        self.features = nn.Sequential(*self.features)

        # building classifier
        self.classifier = nn.Linear(self.last_channel, n_class)

        self._initialize_weights()

    def forward(self, x):
        x = self.features(x)
        x = x.mean(3).mean(2)
        x = self.classifier(x)
        return x

    def _initialize_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                m.weight.data.normal_(0, math.sqrt(2. / n))
                if m.bias is not None:
                    m.bias.data.zero_()
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1)
                m.bias.data.zero_()
            elif isinstance(m, nn.Linear):
                n = m.weight.size(1)
                m.weight.data.normal_(0, 0.01)
                m.bias.data.zero_()


def mobilenet_v2(pretrained=True, **kwargs):
    model = MobileNetV2(**kwargs)

    if pretrained:
        try:
            from torch.hub import load_state_dict_from_url
        except ImportError:
            from torch.utils.model_zoo import load_url as load_state_dict_from_url
        state_dict = load_state_dict_from_url(
            'https://www.dropbox.com/s/47tyzpofuuyyv1b/mobilenetv2_1.0-f2a8633.pth.tar?dl=1', progress=True)
        model.load_state_dict(state_dict)
    return model


def numpy_init(model, seed):
    """_initialize_weights with numpy's draws for torch's, its std from the
    fan-in (the depthwise convolutions' fan-out makes their weights so small
    that BatchNorm's scale invariance gives them huge gradients, and the
    training, in torch too, chaotic: a 1e-6 change of the weights changes
    the second loss in its second digit), and BatchNorm biases of 0.5 to 1
    (with biases around 0 many channels are all but dead after ReLU6, and
    BatchNorm over a few live values again makes the run chaotic)."""
    g = np.random.RandomState(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.in_channels // m.groups
                m.weight.copy_(torch.from_numpy(g.normal(0, math.sqrt(2. / n), tuple(m.weight.shape)).astype(np.float32)))
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.copy_(torch.from_numpy(g.uniform(0.5, 1.5, m.num_features).astype(np.float32)))
                m.bias.copy_(torch.from_numpy(g.uniform(0.5, 1.0, m.num_features).astype(np.float32)))
            elif isinstance(m, nn.Linear):
                m.weight.copy_(torch.from_numpy(g.normal(0, 0.05, tuple(m.weight.shape)).astype(np.float32)))
                m.bias.zero_()
    return model


torch.manual_seed(0)
net = mobilenet_v2(pretrained=False, n_class=10, input_size=32, width_mult=0.5)
print("last_channel", net.last_channel, "make_divisible", [make_divisible(c * 0.5) for c in (24, 32, 64, 96, 160, 320)])
print("blocks", len(net.features), "residual", [b.use_res_connect for b in net.features if isinstance(b, InvertedResidual)])
print(net.features[2])
dw = net.features[2].conv[3]
print("depthwise", dw.groups, tuple(dw.weight.shape))
w = net.features[5].conv[0].weight
print("init std close to sqrt(2/n):", abs(w.std().item() / math.sqrt(2. / w.shape[0]) - 1) < 0.2,
      "bn", net.features[5].conv[1].weight.unique().tolist(), net.features[5].conv[1].bias.unique().tolist(),
      "classifier bias", net.classifier.bias.abs().sum().item())
print("parameters", sum(p.numel() for p in net.parameters()), "buffers", len(list(net.buffers())))
numpy_init(net, 1)

rng = np.random.RandomState(2)
images = torch.from_numpy(rng.randn(32, 3, 32, 32).astype(np.float32))
labels = torch.from_numpy(rng.randint(0, 10, 32))

net.eval()
out = net(images[:4])
print("logits", tuple(out.shape), [f"{v:.5f}" for v in out[0].tolist()])
feat = net.features[:8](images[:2])
print("features[:8]", tuple(feat.shape), f"{feat.abs().sum().item():.4f}", f"{feat.max().item():.5f}")

criterion = nn.CrossEntropyLoss()
net.train()
loss = criterion(net(images[:8]), labels[:8])
loss.backward()
print(f"loss {loss.item():.6f}")
# the last layers' gradients (the first layers' are, through 18 BatchNorms
# over small batches, sensitive to rounding in their third digit, in torch too)
for name, p in net.named_parameters():
    if name.startswith(("features.17.", "features.18.", "classifier")) and not name.endswith("7.bias"):
        print(f"grad {name} {tuple(p.shape)} {p.grad.norm().item():.5e}")
net.zero_grad()

optimizer = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9, weight_decay=4e-5)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
batch_size = 16
for epoch in range(2):
    net.train()
    for i in range(0, len(images), batch_size):
        x, y = images[i:i + batch_size], labels[i:i + batch_size]
        optimizer.zero_grad()
        output = net(x)
        loss = criterion(output, y)
        loss.backward()
        optimizer.step()
        prec1 = output.argmax(1).eq(y).float().mean().item() * 100
        print(f"epoch {epoch} step {i // batch_size} loss {loss.item():.5f} prec@1 {prec1:.2f}")
    scheduler.step()
    print("lr", scheduler.get_last_lr())

# a checkpoint, as train scripts save one
buf = io.BytesIO()
torch.save({'epoch': 2, 'state_dict': net.state_dict(), 'optimizer': optimizer.state_dict()}, buf)
buf.seek(0)
checkpoint = torch.load(buf)
net2 = MobileNetV2(n_class=10, input_size=32, width_mult=0.5)
net2.load_state_dict(checkpoint['state_dict'])
net.eval()
net2.eval()
with torch.no_grad():
    print("checkpoint epoch", checkpoint['epoch'], "same eval output:", torch.equal(net(images[:4]), net2(images[:4])),
          f"{net2(images[:4]).sum().item():.5f}")
print("running_var", [f"{v:.5f}" for v in net2.features[1].conv[1].running_var[:4].tolist()])

# --- a training step: torch.compile against eager ---------------------------
# The compiled step trains a shortened network: the stem, the first three
# inverted residual blocks (expand_ratio 1, a strided block, a residual one)
# and the last 1x1 conv_1x1_bn; the whole network's training step has ~2500
# kernels, whose cold compile alone took ~10 s (the whole network trains
# eagerly above).
model = MobileNetV2(n_class=10, input_size=32, width_mult=0.35)
model.features = nn.Sequential(*model.features[:4], conv_1x1_bn(model.features[3].conv[-1].num_features,
                                                                 model.last_channel))
print("compiled network", [type(m).__name__ for m in model.features],
      [b.use_res_connect for b in model.features if isinstance(b, InvertedResidual)])
model = numpy_init(model, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, weight_decay=4e-5)


def train_step(x, y):
    opt.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    opt.step()
    return loss


model.train()
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
eager = [train_step(images[:8], labels[:8]).item() for _ in range(3)]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(images[:8], labels[:8]).item() for _ in range(3)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
