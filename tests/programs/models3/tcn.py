# locuslab/TCN: tcn.py (TemporalConvNet: weight_norm'd dilated causal Conv1d,
# Chomp1d, residual 1x1 downsample) and the adding problem (adding_problem/
# model.py, utils.py's data_generator, add_test.py's train / evaluate), small
# sizes; then the same network with the newer
# torch.nn.utils.parametrizations.weight_norm, and its training step under
# torch.compile against the same step run eagerly.  Weights and data come
# from numpy (data_generator's torch.rand is a numpy draw) and dropout is 0
# so tracec and torch compute the same numbers.
import copy
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable
from torch.nn.utils import weight_norm


class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super(Chomp1d, self).__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding, dropout=0.2):
        super(TemporalBlock, self).__init__()
        self.conv1 = weight_norm(nn.Conv1d(n_inputs, n_outputs, kernel_size,
                                           stride=stride, padding=padding, dilation=dilation))
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)

        self.conv2 = weight_norm(nn.Conv1d(n_outputs, n_outputs, kernel_size,
                                           stride=stride, padding=padding, dilation=dilation))
        self.chomp2 = Chomp1d(padding)
        self.relu2 = nn.ReLU()
        self.dropout2 = nn.Dropout(dropout)

        self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                 self.conv2, self.chomp2, self.relu2, self.dropout2)
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()
        self.init_weights()

    def init_weights(self):
        self.conv1.weight.data.normal_(0, 0.01)
        self.conv2.weight.data.normal_(0, 0.01)
        if self.downsample is not None:
            self.downsample.weight.data.normal_(0, 0.01)

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TemporalConvNet(nn.Module):
    def __init__(self, num_inputs, num_channels, kernel_size=2, dropout=0.2):
        super(TemporalConvNet, self).__init__()
        layers = []
        num_levels = len(num_channels)
        for i in range(num_levels):
            dilation_size = 2 ** i
            in_channels = num_inputs if i == 0 else num_channels[i-1]
            out_channels = num_channels[i]
            layers += [TemporalBlock(in_channels, out_channels, kernel_size, stride=1, dilation=dilation_size,
                                     padding=(kernel_size-1) * dilation_size, dropout=dropout)]

        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


class TCN(nn.Module):
    def __init__(self, input_size, output_size, num_channels, kernel_size, dropout):
        super(TCN, self).__init__()
        self.tcn = TemporalConvNet(input_size, num_channels, kernel_size=kernel_size, dropout=dropout)
        self.linear = nn.Linear(num_channels[-1], output_size)
        self.init_weights()

    def init_weights(self):
        self.linear.weight.data.normal_(0, 0.01)

    def forward(self, x):
        y1 = self.tcn(x)
        return self.linear(y1[:, :, -1])


rng = np.random.RandomState(1111)


def data_generator(N, seq_length):
    """
    Args:
        seq_length: Length of the adding problem data
        N: # of data in the set
    """
    X_num = torch.from_numpy(rng.rand(N, 1, seq_length).astype(np.float32))
    X_mask = torch.zeros([N, 1, seq_length])
    Y = torch.zeros([N, 1])
    for i in range(N):
        positions = rng.choice(seq_length, size=2, replace=False)
        X_mask[i, 0, positions[0]] = 1
        X_mask[i, 0, positions[1]] = 1
        Y[i,0] = X_num[i, 0, positions[0]] + X_num[i, 0, positions[1]]
    X = torch.cat((X_num, X_mask), dim=1)
    return Variable(X), Variable(Y)


parser = argparse.ArgumentParser(description='Sequence Modeling - The Adding Problem')
parser.add_argument('--batch_size', type=int, default=32, metavar='N',
                    help='batch size (default: 32)')
parser.add_argument('--cuda', action='store_false',
                    help='use CUDA (default: True)')
parser.add_argument('--dropout', type=float, default=0.0,
                    help='dropout applied to layers (default: 0.0)')
parser.add_argument('--clip', type=float, default=-1,
                    help='gradient clip, -1 means no clip (default: -1)')
parser.add_argument('--epochs', type=int, default=10,
                    help='upper epoch limit (default: 10)')
parser.add_argument('--ksize', type=int, default=7,
                    help='kernel size (default: 7)')
parser.add_argument('--levels', type=int, default=8,
                    help='# of levels (default: 8)')
parser.add_argument('--seq_len', type=int, default=400,
                    help='sequence length (default: 400)')
parser.add_argument('--log-interval', type=int, default=100, metavar='N',
                    help='report interval (default: 100')
parser.add_argument('--lr', type=float, default=4e-3,
                    help='initial learning rate (default: 4e-3)')
parser.add_argument('--optim', type=str, default='Adam',
                    help='optimizer to use (default: Adam)')
parser.add_argument('--nhid', type=int, default=30,
                    help='number of hidden units per layer (default: 30)')
parser.add_argument('--seed', type=int, default=1111,
                    help='random seed (default: 1111)')
args = parser.parse_args(['--batch_size', '8', '--epochs', '2', '--ksize', '3', '--levels', '3',
                          '--seq_len', '20', '--log-interval', '2', '--nhid', '6', '--clip', '0.5'])

torch.manual_seed(args.seed)
if torch.cuda.is_available():
    if not args.cuda:
        print("WARNING: You have a CUDA device, so you should probably run with --cuda")

input_channels = 2
n_classes = 1
batch_size = args.batch_size
seq_length = args.seq_len
epochs = args.epochs

print(args)
print("Producing data...")
X_train, Y_train = data_generator(40, seq_length)
X_test, Y_test = data_generator(16, seq_length)


# Note: We use a very simple setting here (assuming all levels have the same # of channels.
channel_sizes = [args.nhid]*args.levels
kernel_size = args.ksize
dropout = args.dropout
model = TCN(input_channels, n_classes, channel_sizes, kernel_size=kernel_size, dropout=dropout)


def numpy_init(model, seed):
    g = np.random.RandomState(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight_g") or name.endswith("original0"):
                p.copy_(torch.from_numpy(g.uniform(0.5, 1.5, tuple(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy((0.3 * g.randn(*p.shape)).astype(np.float32)))
    return model


numpy_init(model, 7)
print([k for k in model.state_dict()][:12])
print("parameters", sum(p.numel() for p in model.parameters()),
      "state entries", len(model.state_dict()))

lr = args.lr
optimizer = getattr(optim, args.optim)(model.parameters(), lr=lr)


def train(epoch):
    global lr
    model.train()
    batch_idx = 1
    total_loss = 0
    for i in range(0, X_train.size(0), batch_size):
        if i + batch_size > X_train.size(0):
            x, y = X_train[i:], Y_train[i:]
        else:
            x, y = X_train[i:(i+batch_size)], Y_train[i:(i+batch_size)]
        optimizer.zero_grad()
        output = model(x)
        loss = F.mse_loss(output, y)
        loss.backward()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        batch_idx += 1
        total_loss += loss.item()

        if batch_idx % args.log_interval == 0:
            cur_loss = total_loss / args.log_interval
            processed = min(i+batch_size, X_train.size(0))
            print('Train Epoch: {:2d} [{:6d}/{:6d} ({:.0f}%)]\tLearning rate: {:.4f}\tLoss: {:.6f}'.format(
                epoch, processed, X_train.size(0), 100.*processed/X_train.size(0), lr, cur_loss))
            total_loss = 0


def evaluate():
    model.eval()
    with torch.no_grad():
        output = model(X_test)
        test_loss = F.mse_loss(output, Y_test)
        print('\nTest set: Average loss: {:.6f}\n'.format(test_loss.item()))
        return test_loss.item()


# forward, loss and gradients once, before training
out = model(X_train[:4])
print("output", out.flatten().tolist())
loss = F.mse_loss(out, Y_train[:4])
loss.backward()
print(f"loss {loss.item():.6f}")
for name, p in model.named_parameters():
    print(f"grad {name} {tuple(p.shape)} {p.grad.norm().item():.5e}")
optimizer.zero_grad()

for ep in range(1, epochs+1):
    train(ep)
    tloss = evaluate()

# The newer API: torch.nn.utils.parametrizations.weight_norm
from torch.nn.utils import parametrizations
from torch.nn.utils import parametrize

block = numpy_init(TemporalBlock(2, 4, 3, stride=1, dilation=2, padding=4, dropout=0.0), 5)
try:
    copy.deepcopy(block)   # the old weight_norm's weight is not a leaf
except RuntimeError as e:
    print("deepcopy:", str(e)[:48])
pblock = TemporalBlock(2, 4, 3, stride=1, dilation=2, padding=4, dropout=0.0)
pblock.load_state_dict(block.state_dict())
for name in ("conv1", "conv2"):
    conv = getattr(pblock, name)
    torch.nn.utils.remove_weight_norm(conv)
    parametrizations.weight_norm(conv)
pblock.net = nn.Sequential(pblock.conv1, pblock.chomp1, pblock.relu1, pblock.dropout1,
                           pblock.conv2, pblock.chomp2, pblock.relu2, pblock.dropout2)
print(sorted(k for k in pblock.state_dict() if k.startswith("conv1")))
print("parametrized:", parametrize.is_parametrized(pblock.conv1, "weight"),
      parametrize.is_parametrized(block.conv1))
xb = X_train[:3]
print("same output:", torch.allclose(block(xb), pblock(xb), atol=1e-6))
g0 = pblock.conv1.parametrizations.weight.original0
print("g", tuple(g0.shape), [f"{v:.5f}" for v in g0.flatten().tolist()])

net = nn.Sequential(pblock, nn.Flatten(), nn.Linear(4 * seq_length, 1))
numpy_init(net, 3)
opt = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)


def step(x, y):
    opt.zero_grad()
    loss = F.mse_loss(net(x), y)
    loss.backward()
    opt.step()
    return loss


state, opt_state = copy.deepcopy(net.state_dict()), copy.deepcopy(opt.state_dict())
eager = [step(X_train[:8], Y_train[:8]).item() for _ in range(3)]
after = copy.deepcopy(net.state_dict())
net.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(step)
compiled = [cstep(X_train[:8], Y_train[:8]).item() for _ in range(3)]
print("losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(net.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
with parametrize.cached():
    print("cached output", f"{net(X_test[:2]).sum().item():.5f}")
parametrize.remove_parametrizations(pblock.conv1, "weight")
print("removed:", sorted(k for k in pblock.state_dict() if k.startswith("conv1")))
