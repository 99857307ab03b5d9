# Quantization-aware training from scratch, in the style of public QAT code
# that calls the fake-quantization ops directly (e.g. the per-tensor /
# per-channel affine fake quantization PyTorch's FakeQuantize modules wrap):
# moving-average min/max observers held in buffers, qparams computed as
# FakeQuantize does (scale = (max - min) / (qmax - qmin), zero point rounded
# and clamped), weights fake-quantized per output channel (int32 zero points,
# symmetric) and activations per tensor (tensor qparams), trained with the
# straight-through gradient.  Written for this test: a small conv net on
# synthetic images, SGD, 3 steps; one step compiled against eager.
import copy

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F


class ActFakeQuant(nn.Module):
    def __init__(self, quant_min=0, quant_max=255, averaging_constant=0.1):
        super().__init__()
        self.quant_min, self.quant_max, self.c = quant_min, quant_max, averaging_constant
        self.register_buffer("min_val", torch.tensor(float("inf")))
        self.register_buffer("max_val", torch.tensor(float("-inf")))
        self.register_buffer("scale", torch.tensor([1.0]))
        self.register_buffer("zero_point", torch.tensor([0], dtype=torch.int32))

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                lo, hi = torch.aminmax(x.detach())
                first = torch.isinf(self.min_val)
                self.min_val.copy_(torch.where(first, lo, self.min_val + self.c * (lo - self.min_val)))
                self.max_val.copy_(torch.where(first, hi, self.max_val + self.c * (hi - self.max_val)))
                lo = torch.clamp(self.min_val, max=0.0)
                hi = torch.clamp(self.max_val, min=0.0)
                scale = torch.clamp((hi - lo) / float(self.quant_max - self.quant_min), min=1e-8)
                zp = torch.clamp(self.quant_min - torch.round(lo / scale), self.quant_min, self.quant_max)
                self.scale.copy_(scale.view(1))
                self.zero_point.copy_(zp.to(torch.int32).view(1))
        return torch.fake_quantize_per_tensor_affine(x, self.scale, self.zero_point,
                                                     self.quant_min, self.quant_max)


def weight_fake_quant(w, quant_min=-128, quant_max=127):
    with torch.no_grad():
        amax = w.detach().abs().flatten(1).amax(dim=1)
        scale = torch.clamp(amax / ((quant_max - quant_min) / 2), min=1e-8)
        zero_point = torch.zeros(w.shape[0], dtype=torch.int32)
    return torch.fake_quantize_per_channel_affine(w, scale, zero_point, 0, quant_min, quant_max)


class QConv2d(nn.Conv2d):
    def forward(self, x):
        return self._conv_forward(x, weight_fake_quant(self.weight), self.bias)


class QLinear(nn.Linear):
    def forward(self, x):
        return F.linear(x, weight_fake_quant(self.weight), self.bias)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant_in = ActFakeQuant()
        self.conv1 = QConv2d(1, 4, 3, padding=1)
        self.act1 = ActFakeQuant()
        self.conv2 = QConv2d(4, 8, 3, stride=2)
        self.act2 = ActFakeQuant()
        self.fc = QLinear(8 * 3 * 3, 3)

    def forward(self, x):
        x = self.quant_in(x)
        x = self.act1(F.relu(self.conv1(x)))
        x = self.act2(F.relu(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


rng = np.random.RandomState(0)
images = torch.from_numpy(rng.rand(6, 1, 8, 8).astype(np.float32))
labels = torch.from_numpy(rng.randint(0, 3, size=6))
torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(3):
    out = model(images)
    loss = F.cross_entropy(out, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.6f} conv1 grad {model.conv1.weight.grad.abs().sum().item():.6f} "
          f"act1 scale {model.act1.scale.item():.6f} zp {model.act1.zero_point.item()}")
print("buffers", sorted(k for k in model.state_dict() if "act" in k or "quant" in k))
model.eval()
with torch.no_grad():
    print("eval logits", [round(v, 5) for v in model(images[:2]).flatten().tolist()])
model.train()


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
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-6) for k, v in model.state_dict().items()))
