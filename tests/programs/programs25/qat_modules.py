# Quantization-aware training with torch.ao.quantization's modules, the way
# the PyTorch static-quantization tutorial's QAT section trains (observers
# on for the first steps, then `model.apply(torch.ao.quantization.
# disable_observer)` to freeze the qparams) and the way hand-built QAT
# models attach fake quantization: QuantStub / DeQuantStub around the model,
# default_fake_quant (MovingAverageMinMaxObserver, quint8, reduce_range) on
# activations, default_per_channel_weight_fake_quant
# (MovingAveragePerChannelMinMaxObserver, qint8 symmetric) and
# default_weight_fake_quant on weights, the FakeQuantize buffers in the state
# dict and loaded back.  Written for this test: a small conv net on synthetic
# images, SGD, 4 steps; one step compiled against eager.
import copy
import warnings

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from torch.ao import quantization as tq

warnings.simplefilter("ignore")


class QATConv2d(nn.Conv2d):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.weight_fake_quant = tq.default_per_channel_weight_fake_quant()

    def forward(self, x):
        return self._conv_forward(x, self.weight_fake_quant(self.weight), self.bias)


class QATLinear(nn.Linear):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.weight_fake_quant = tq.default_weight_fake_quant()

    def forward(self, x):
        return F.linear(x, self.weight_fake_quant(self.weight), self.bias)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = tq.QuantStub()
        self.in_fq = tq.default_fake_quant()
        self.conv = QATConv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.act_fq = tq.default_fake_quant()
        self.fc = QATLinear(4 * 4 * 4, 3)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.in_fq(self.quant(x))
        x = self.act_fq(F.relu(self.bn(self.conv(x))))
        x = F.max_pool2d(x, 2)
        return self.dequant(self.fc(torch.flatten(x, 1)))


rng = np.random.RandomState(0)
images = torch.from_numpy(rng.randn(5, 2, 8, 8).astype(np.float32))
labels = torch.from_numpy(rng.randint(0, 3, size=5))
torch.manual_seed(0)
model = Net()
print("fake quant", model.act_fq.quant_min, model.act_fq.quant_max, model.act_fq.dtype, model.act_fq.qscheme,
      model.conv.weight_fake_quant.qscheme, model.conv.weight_fake_quant.ch_axis)
print("keys", [k for k in model.state_dict() if "fake_quant" in k or "fq" in k][:12])
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(4):
    if step == 2:
        model.apply(tq.disable_observer)
    out = model(images)
    loss = F.cross_entropy(out, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.6f} act scale {model.act_fq.scale.item():.6f} "
          f"zp {model.act_fq.zero_point.item()} observer {model.act_fq.observer_enabled.item()} "
          f"w scales {[round(v, 6) for v in model.conv.weight_fake_quant.scale.tolist()]} "
          f"fc w scale {model.fc.weight_fake_quant.scale.item():.6f}")
print("act minmax", round(model.act_fq.activation_post_process.min_val.item(), 6),
      round(model.act_fq.activation_post_process.max_val.item(), 6))

# the qparams travel in the state dict and load into a fresh model
clone = Net()
clone.load_state_dict(model.state_dict())
print("loaded", clone.conv.weight_fake_quant.scale.shape, clone.conv.weight_fake_quant.activation_post_process.min_val.shape,
      torch.equal(clone.act_fq.scale, model.act_fq.scale))
model.eval()
clone.eval()
clone.apply(tq.disable_observer)
with torch.no_grad():
    print("eval", [round(v, 4) for v in model(images[:2]).flatten().tolist()],
          torch.allclose(model(images), clone(images)))
model.apply(tq.disable_fake_quant)
with torch.no_grad():
    print("float eval", [round(v, 4) for v in model(images[:2]).flatten().tolist()])
model.apply(tq.enable_fake_quant)
model.apply(tq.enable_observer)
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
