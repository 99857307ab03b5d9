# pytorch/examples vae/main.py as the repo writes it, seeded: argparse
# defaults, torch.manual_seed(args.seed), the train DataLoader with
# shuffle=True, the VAE with fc1 / fc21 / fc22 / fc3 / fc4 in their default
# initialization, reparameterize's std = torch.exp(0.5*logvar) and
# eps = torch.randn_like(std), decode's torch.sigmoid, loss_function's
# F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum') plus
# the KLD -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()), the
# train / test loops with their format strings, test's torch.cat of
# data[:n] and recon_batch.view(args.batch_size, 1, 28, 28)[:n], and the
# per-epoch sample = model.decode(torch.randn(64, 20)). Changes for a CPU
# test: torchvision is not installed, so MNIST is random [0, 1] pixels in a
# TensorDataset (ToTensor's range); hidden size 64 instead of 400; 128
# training and 64 test images, batch 32, 2 epochs; save_image is replaced
# by printing the tensors' statistics. Then one training step under
# torch.compile against the same step eagerly, with the reparameterization
# noise drawn eagerly and passed in (a compiled step's own draws differ
# from eager ones, as with torch.compile).
from __future__ import print_function
import argparse
import copy

import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F

parser = argparse.ArgumentParser(description='VAE MNIST Example')
parser.add_argument('--batch-size', type=int, default=32, metavar='N',
                    help='input batch size for training (default: 128)')
parser.add_argument('--epochs', type=int, default=2, metavar='N',
                    help='number of epochs to train (default: 10)')
parser.add_argument('--no-cuda', action='store_true', default=True,
                    help='disables CUDA training')
parser.add_argument('--no-mps', action='store_true', default=True,
                    help='disables macOS GPU training')
parser.add_argument('--seed', type=int, default=1, metavar='S',
                    help='random seed (default: 1)')
parser.add_argument('--log-interval', type=int, default=2, metavar='N',
                    help='how many batches to wait before logging training status')
args = parser.parse_args([])
args.cuda = not args.no_cuda and torch.cuda.is_available()
use_mps = not args.no_mps and torch.backends.mps.is_available()

torch.manual_seed(args.seed)

if args.cuda:
    device = torch.device("cuda")
elif use_mps:
    device = torch.device("mps")
else:
    device = torch.device("cpu")

kwargs = {'num_workers': 1, 'pin_memory': True} if args.cuda else {}
train_set = torch.utils.data.TensorDataset(torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,)))
test_set = torch.utils.data.TensorDataset(torch.rand(64, 1, 28, 28), torch.randint(0, 10, (64,)))
train_loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch_size, shuffle=True, **kwargs)
test_loader = torch.utils.data.DataLoader(test_set, batch_size=args.batch_size, shuffle=False, **kwargs)


class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()

        self.fc1 = nn.Linear(784, 64)
        self.fc21 = nn.Linear(64, 20)
        self.fc22 = nn.Linear(64, 20)
        self.fc3 = nn.Linear(20, 64)
        self.fc4 = nn.Linear(64, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5*logvar)
        eps = torch.randn_like(std)
        return mu + eps*std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')

    # see Appendix B from VAE paper:
    # Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
    # https://arxiv.org/abs/1312.6114
    # 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

    return BCE + KLD


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader),
                loss.item() / len(data)))

    print('====> Epoch: {} Average loss: {:.4f}'.format(
          epoch, train_loss / len(train_loader.dataset)))


def test(epoch):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for i, (data, _) in enumerate(test_loader):
            data = data.to(device)
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()
            if i == 0:
                n = min(data.size(0), 8)
                comparison = torch.cat([data[:n],
                                      recon_batch.view(args.batch_size, 1, 28, 28)[:n]])
                # save_image(comparison.cpu(), 'results/reconstruction_' + str(epoch) + '.png', nrow=n)
                print('comparison', tuple(comparison.shape), '{:.5f}'.format(comparison.mean().item()))

    test_loss /= len(test_loader.dataset)
    print('====> Test set loss: {:.4f}'.format(test_loss))


if __name__ == "__main__":
    for epoch in range(1, args.epochs + 1):
        train(epoch)
        test(epoch)
        with torch.no_grad():
            sample = torch.randn(64, 20).to(device)
            sample = model.decode(sample).cpu()
            # save_image(sample.view(64, 1, 28, 28), 'results/sample_' + str(epoch) + '.png')
            print('sample', tuple(sample.view(64, 1, 28, 28).shape),
                  '{:.5f} {:.5f}'.format(sample.mean().item(), sample[0, :64].std().item()))

    # one training step under torch.compile against the same step eagerly,
    # the reparameterization noise drawn eagerly and passed in
    def train_step(data, eps):
        optimizer.zero_grad()
        mu, logvar = model.encode(data.view(-1, 784))
        z = mu + eps * torch.exp(0.5*logvar)
        loss = loss_function(model.decode(z), data, mu, logvar)
        loss.backward()
        optimizer.step()
        return loss

    data = next(iter(test_loader))[0]
    eps = torch.randn(data.size(0), 20)
    state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
    model.train()
    eager = [train_step(data, eps).item() for _ in range(3)]
    after = {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    optimizer.load_state_dict(opt_state)
    cstep = torch.compile(train_step)
    compiled = [cstep(data, eps).item() for _ in range(3)]
    print("compiled losses", ["{:.3f}".format(v) for v in compiled])
    print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
          all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
