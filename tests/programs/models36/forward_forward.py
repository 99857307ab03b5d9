# Hinton's forward-forward algorithm the way pytorch/examples'
# mnist_forward_forward/main.py writes it: overlay_y_on_x (zero the first
# 10 pixels, x_[range(n), y] = x.max(), with a tensor of labels or a plain
# int label in predict), get_y_neg's per-sample torch.randint over the
# allowed labels, Net keeping its Layers in a plain Python list (so Net has
# no parameters) and overriding nn.Module.train(x_pos, x_neg), Layer
# subclassing nn.Linear with its own Adam and its own train(), the
# direction-normalized forward x / (x.norm(2, 1, keepdim=True) + 1e-4)
# through torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0),
# goodness h.pow(2).mean(1), the loss
# torch.log(1 + torch.exp(torch.cat([-g_pos + threshold, g_neg - threshold]))).mean(),
# x_neg from torch.randperm, predict's sum(goodness) over layers and
# argmax, and the MNIST DataLoader with shuffle=True after
# torch.manual_seed(args.seed). Changes for a CPU test: random
# MNIST-shaped data (784 features, normalized as the Normalize transform
# does) in a TensorDataset instead of torchvision's MNIST, layers [784, 32,
# 32], 20 epochs per layer, no visualize_sample; then one layer's training
# step under torch.compile against the same step eagerly.
import argparse
import copy

import torch
import torch.nn as nn
from torch.optim import Adam
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--lr", type=float, default=0.03)
parser.add_argument("--no_cuda", action="store_true", default=True)
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--train_size", type=int, default=64)
parser.add_argument("--threshold", type=float, default=2)
parser.add_argument("--test_size", type=int, default=32)
parser.add_argument("--log-interval", type=int, default=5)
args = parser.parse_args([])
use_cuda = not args.no_cuda and torch.cuda.is_available()
device = torch.device("cuda" if use_cuda else "cpu")


def get_y_neg(y):
    y_neg = y.clone()
    for idx, y_samp in enumerate(y):
        allowed_indices = list(range(10))
        allowed_indices.remove(y_samp.item())
        y_neg[idx] = torch.tensor(allowed_indices)[
            torch.randint(len(allowed_indices), size=(1,))
        ].item()
    return y_neg.to(device)


def overlay_y_on_x(x, y, classes=10):
    """Replace the first 10 pixels of data [x] with one-hot-encoded label [y]"""
    x_ = x.clone()
    x_[:, :classes] *= 0.0
    x_[range(x.shape[0]), y] = x.max()
    return x_


class Net(torch.nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.layers = []
        for d in range(len(dims) - 1):
            self.layers = self.layers + [Layer(dims[d], dims[d + 1]).to(device)]

    def predict(self, x):
        goodness_per_label = []
        for label in range(10):
            h = overlay_y_on_x(x, label)
            goodness = []
            for layer in self.layers:
                h = layer(h)
                goodness = goodness + [h.pow(2).mean(1)]
            goodness_per_label += [sum(goodness).unsqueeze(1)]
        goodness_per_label = torch.cat(goodness_per_label, 1)
        return goodness_per_label.argmax(1)

    def train(self, x_pos, x_neg):
        h_pos, h_neg = x_pos, x_neg
        for i, layer in enumerate(self.layers):
            print("training layer: ", i)
            h_pos, h_neg = layer.train(h_pos, h_neg)


class Layer(nn.Linear):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias, device, dtype)
        self.relu = torch.nn.ReLU()
        self.opt = Adam(self.parameters(), lr=args.lr)
        self.threshold = args.threshold
        self.num_epochs = args.epochs

    def forward(self, x):
        x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
        return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

    def train(self, x_pos, x_neg):
        for i in range(self.num_epochs):
            g_pos = self.forward(x_pos).pow(2).mean(1)
            g_neg = self.forward(x_neg).pow(2).mean(1)
            # The following loss pushes pos (neg) samples to
            # values larger (smaller) than the self.threshold.
            loss = torch.log(
                1 + torch.exp(torch.cat([-g_pos + self.threshold, g_neg - self.threshold]))
            ).mean()
            self.opt.zero_grad()
            # this backward just compute the derivative and hence
            # is not considered backpropagation.
            loss.backward()
            self.opt.step()
            if i % args.log_interval == 0:
                print("Loss: ", loss.item())
        return self.forward(x_pos).detach(), self.forward(x_neg).detach()


torch.manual_seed(args.seed)
# MNIST-shaped data: ToTensor's [0, 1] pixels, Normalize((0.1307,), (0.3081,)),
# Lambda(lambda x: torch.flatten(x))
train_x = ((torch.rand(256, 1, 28, 28) - 0.1307) / 0.3081).flatten(1)
train_y = torch.randint(0, 10, (256,))
test_x = ((torch.rand(64, 1, 28, 28) - 0.1307) / 0.3081).flatten(1)
test_y = torch.randint(0, 10, (64,))
train_loader = DataLoader(TensorDataset(train_x, train_y), batch_size=args.train_size, shuffle=True)
test_loader = DataLoader(TensorDataset(test_x, test_y), batch_size=args.test_size, shuffle=False)

net = Net([784, 32, 32])
print("net parameters:", len(list(net.parameters())), "layer 0:", net.layers[0])
x, y = next(iter(train_loader))
x, y = x.to(device), y.to(device)
print("batch labels:", y[:12].tolist())
x_pos = overlay_y_on_x(x, y)
rnd = torch.randperm(x.size(0))
x_neg = overlay_y_on_x(x, y[rnd])
y_neg = get_y_neg(y)
print("randperm head:", rnd[:8].tolist(), "y_neg head:", y_neg[:8].tolist())
print("overlay:", x_pos[0, :10].tolist()[:4], "max", round(x.max().item(), 4))
x_neg2 = overlay_y_on_x(x, y_neg)
print("neg differs:", bool((x_neg2[:, :10] != x_pos[:, :10]).any(1).all()))
snapshot = copy.deepcopy(net.layers[1])

net.train(x_pos, x_neg)

print("train error:", 1.0 - net.predict(x).eq(y).float().mean().item())

x_te, y_te = next(iter(test_loader))
x_te, y_te = x_te.to(device), y_te.to(device)
print("test error:", 1.0 - net.predict(x_te).eq(y_te).float().mean().item())
print("layer 0 weight:", [f"{v:.5f}" for v in net.layers[0].weight[0, :4].tolist()])

# one layer's training step under torch.compile against the same step eagerly
layer = snapshot
h_pos, h_neg = net.layers[0](x_pos).detach(), net.layers[0](x_neg).detach()


def train_step(x_pos, x_neg):
    g_pos = layer.forward(x_pos).pow(2).mean(1)
    g_neg = layer.forward(x_neg).pow(2).mean(1)
    loss = torch.log(1 + torch.exp(torch.cat([-g_pos + layer.threshold, g_neg - layer.threshold]))).mean()
    layer.opt.zero_grad()
    loss.backward()
    layer.opt.step()
    return loss


state, opt_state = copy.deepcopy(layer.state_dict()), copy.deepcopy(layer.opt.state_dict())
eager = [train_step(h_pos, h_neg).item() for _ in range(3)]
after = {k: v.clone() for k, v in layer.state_dict().items()}
layer.load_state_dict(state)
layer.opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(h_pos, h_neg).item() for _ in range(3)]
print("compiled losses", [f"{v:.4f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(layer.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
