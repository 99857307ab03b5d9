# Dive into Deep Learning's builders' guide and LeNet chapters
# (https://d2l.ai/chapter_builders-guide/lazy-init.html,
# parameters.html, init-param.html and
# https://d2l.ai/chapter_convolutional-neural-networks/lenet.html, the
# PyTorch tabs): nn.LazyLinear / nn.LazyConv2d whose parameters are
# UninitializedParameter until a first forward, apply_init (a dummy forward,
# then net.apply(init)) with init_cnn matching `type(module) == nn.Linear`
# (the lazy modules become nn.Linear / nn.Conv2d), layer_summary's shapes,
# the parameter-management prints (state_dict, named_parameters, a shared
# layer, nn.init.normal_ / constant_ / xavier_uniform_ and the custom
# uniform init that zeroes small weights), then LeNet with
# nn.LazyBatchNorm2d / LazyBatchNorm1d (batch-norm chapter) trained with SGD.
# Written for this test: 28x28 synthetic images, batch 8, 3 steps; one
# training step compiled against eager.
import copy

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

# --- lazy initialization ------------------------------------------------------------------
net = nn.Sequential(nn.LazyLinear(256), nn.ReLU(), nn.LazyLinear(10))
print(net[0].weight)
X = torch.rand(2, 20)
net(X)
print(net[0].weight.shape)
print(type(net[0]).__name__, isinstance(net[0].weight, nn.parameter.UninitializedParameter))

# --- parameter management -----------------------------------------------------------------
torch.manual_seed(0)
net = nn.Sequential(nn.LazyLinear(8),
                    nn.ReLU(),
                    nn.LazyLinear(1))
X = torch.rand(size=(2, 4))
print("[out]", net(X).shape)
print(net[2].state_dict())
print(type(net[2].bias), net[2].bias.data)
print(net[2].weight.grad == None)
print([(name, param.shape) for name, param in net.named_parameters()])

# We need to give the shared layer a name so that we can refer to its
# parameters
shared = nn.LazyLinear(8)
net = nn.Sequential(nn.LazyLinear(8), nn.ReLU(),
                    shared, nn.ReLU(),
                    shared, nn.ReLU(),
                    nn.LazyLinear(1))

net(X)
# Check whether the parameters are the same
print(net[2].weight.data[0] == net[4].weight.data[0])
net[2].weight.data[0, 0] = 100
# Make sure that they are actually the same object rather than just having the
# same value
print(net[2].weight.data[0] == net[4].weight.data[0])


def init_normal(module):
    if type(module) == nn.Linear:
        nn.init.normal_(module.weight, mean=0, std=0.01)
        nn.init.zeros_(module.bias)


net.apply(init_normal)
print(net[0].weight.data[0], net[0].bias.data[0])


def init_constant(module):
    if type(module) == nn.Linear:
        nn.init.constant_(module.weight, 1)
        nn.init.zeros_(module.bias)


net.apply(init_constant)
print(net[0].weight.data[0], net[0].bias.data[0])


def init_xavier(module):
    if type(module) == nn.Linear:
        nn.init.xavier_uniform_(module.weight)


def init_42(module):
    if type(module) == nn.Linear:
        nn.init.constant_(module.weight, 42)


net[0].apply(init_xavier)
net[2].apply(init_42)
print(net[0].weight.data[0])
print(net[2].weight.data)


def my_init(module):
    if type(module) == nn.Linear:
        print("Init", *[(name, param.shape)
                        for name, param in module.named_parameters()][0])
        nn.init.uniform_(module.weight, -10, 10)
        module.weight.data *= module.weight.data.abs() >= 5


net.apply(my_init)
print(net[0].weight[:2])
net[0].weight.data[:] += 1
net[0].weight.data[0, 0] = 42
print(net[0].weight.data[0])


# --- LeNet ----------------------------------------------------------------------------------
def init_cnn(module):  #@save
    """Initialize weights for CNNs."""
    if type(module) == nn.Linear or type(module) == nn.Conv2d:
        nn.init.xavier_uniform_(module.weight)


class LeNet(nn.Module):  #@save
    """The LeNet-5 model."""
    def __init__(self, lr=0.1, num_classes=10):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(
            nn.LazyConv2d(6, kernel_size=5, padding=2), nn.Sigmoid(),
            nn.AvgPool2d(kernel_size=2, stride=2),
            nn.LazyConv2d(16, kernel_size=5), nn.Sigmoid(),
            nn.AvgPool2d(kernel_size=2, stride=2),
            nn.Flatten(),
            nn.LazyLinear(120), nn.Sigmoid(),
            nn.LazyLinear(84), nn.Sigmoid(),
            nn.LazyLinear(num_classes))

    def forward(self, X):
        return self.net(X)

    def layer_summary(self, X_shape):
        X = torch.randn(*X_shape)
        for layer in self.net:
            X = layer(X)
            print(layer.__class__.__name__, 'output shape:\t', X.shape)

    def apply_init(self, inputs, init=None):
        self.forward(*inputs)
        if init is not None:
            self.net.apply(init)


class BNLeNet(LeNet):
    def __init__(self, lr=0.1, num_classes=10):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(
            nn.LazyConv2d(6, kernel_size=5), nn.LazyBatchNorm2d(),
            nn.Sigmoid(), nn.AvgPool2d(kernel_size=2, stride=2),
            nn.LazyConv2d(16, kernel_size=5), nn.LazyBatchNorm2d(),
            nn.Sigmoid(), nn.AvgPool2d(kernel_size=2, stride=2),
            nn.Flatten(), nn.LazyLinear(120), nn.LazyBatchNorm1d(),
            nn.Sigmoid(), nn.LazyLinear(84), nn.LazyBatchNorm1d(),
            nn.Sigmoid(), nn.LazyLinear(num_classes))


model = LeNet()
model.layer_summary((1, 1, 28, 28))

rng = np.random.RandomState(0)
images = torch.from_numpy(rng.rand(8, 1, 28, 28).astype(np.float32))
labels = torch.from_numpy(rng.randint(0, 10, size=8))
for Model in (LeNet, BNLeNet):
    torch.manual_seed(1)
    model = Model(lr=0.1)
    model.apply_init([images[:2]], init_cnn)
    print(Model.__name__, [type(m).__name__ for m in model.net][:6],
          round(model.net[0].weight.std().item(), 6))
    optimizer = torch.optim.SGD(model.parameters(), lr=model.lr)
    for step in range(3):
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"{Model.__name__} step {step} loss {loss.item():.6f}")
    if Model is BNLeNet:
        print("running mean", [round(v, 5) for v in model.net[1].running_mean.tolist()],
              model.net[1].num_batches_tracked.item())


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
