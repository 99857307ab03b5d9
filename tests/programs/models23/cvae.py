# timbmg/VAE-CVAE-MNIST the way its models.py, utils.py and train.py write
# it: VAE with Encoder / Decoder MLPs built as an empty nn.Sequential filled
# by add_module(name="L{:d}".format(i), module=...) in a loop (ReLU
# between, Sigmoid last), the conditional input through idx2onehot
# (torch.max(idx).item() asserted, unsqueeze, torch.zeros(...).to(device)
# then scatter_(1, idx, 1)) concatenated with torch.cat, the encoder's
# layer_sizes[0] += num_labels side effect on the caller's list, x.view(-1,
# 28*28) for image batches, reparameterize with torch.randn_like(std),
# loss_fn's binary_cross_entropy(reduction='sum') + KLD over the batch
# size, Adam, defaultdict(list) logs and the defaultdict(lambda:
# defaultdict(dict)) latent tracker filled by .item(), inference by label
# with c = torch.arange(0, 10).long().unsqueeze(1) and z = torch.randn.
# Changes for a CPU test: a tiny synthetic "MNIST" (28x28 images in [0, 1]
# drawn from numpy), small hidden sizes, weights from numpy, a few steps;
# the compared training takes eps from numpy through a subclass overriding
# reparameterize (randn_like's own draws, after torch.manual_seed(0), are
# printed on their own lines); then one training step under torch.compile
# against eager.
import copy
from collections import defaultdict

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
import torch.nn as nn


# ---- utils.py ----

def idx2onehot(idx, n):

    assert torch.max(idx).item() < n

    if idx.dim() == 1:
        idx = idx.unsqueeze(1)
    onehot = torch.zeros(idx.size(0), n).to(idx.device)
    onehot.scatter_(1, idx, 1)

    return onehot


# ---- models.py ----

class VAE(nn.Module):

    def __init__(self, encoder_layer_sizes, latent_size, decoder_layer_sizes,
                 conditional=False, num_labels=0):

        super().__init__()

        if conditional:
            assert num_labels > 0

        assert type(encoder_layer_sizes) == list
        assert type(latent_size) == int
        assert type(decoder_layer_sizes) == list

        self.latent_size = latent_size

        self.encoder = Encoder(
            encoder_layer_sizes, latent_size, conditional, num_labels)
        self.decoder = Decoder(
            decoder_layer_sizes, latent_size, conditional, num_labels)

    def forward(self, x, c=None):

        if x.dim() > 2:
            x = x.view(-1, 28*28)

        means, log_var = self.encoder(x, c)
        z = self.reparameterize(means, log_var)
        recon_x = self.decoder(z, c)

        return recon_x, means, log_var, z

    def reparameterize(self, mu, log_var):

        std = torch.exp(0.5 * log_var)
        eps = torch.randn_like(std)

        return mu + eps * std

    def inference(self, z, c=None):

        recon_x = self.decoder(z, c)

        return recon_x


class Encoder(nn.Module):

    def __init__(self, layer_sizes, latent_size, conditional, num_labels):

        super().__init__()

        self.conditional = conditional
        if self.conditional:
            layer_sizes[0] += num_labels

        self.MLP = nn.Sequential()

        for i, (in_size, out_size) in enumerate(zip(layer_sizes[:-1], layer_sizes[1:])):
            self.MLP.add_module(
                name="L{:d}".format(i), module=nn.Linear(in_size, out_size))
            self.MLP.add_module(name="A{:d}".format(i), module=nn.ReLU())

        self.linear_means = nn.Linear(layer_sizes[-1], latent_size)
        self.linear_log_var = nn.Linear(layer_sizes[-1], latent_size)

    def forward(self, x, c=None):

        if self.conditional:
            c = idx2onehot(c, n=10)
            x = torch.cat((x, c), dim=-1)

        x = self.MLP(x)

        means = self.linear_means(x)
        log_vars = self.linear_log_var(x)

        return means, log_vars


class Decoder(nn.Module):

    def __init__(self, layer_sizes, latent_size, conditional, num_labels):

        super().__init__()

        self.MLP = nn.Sequential()

        self.conditional = conditional
        if self.conditional:
            input_size = latent_size + num_labels
        else:
            input_size = latent_size

        for i, (in_size, out_size) in enumerate(zip([input_size]+layer_sizes[:-1], layer_sizes)):
            self.MLP.add_module(
                name="L{:d}".format(i), module=nn.Linear(in_size, out_size))
            if i+1 < len(layer_sizes):
                self.MLP.add_module(name="A{:d}".format(i), module=nn.ReLU())
            else:
                self.MLP.add_module(name="sigmoid", module=nn.Sigmoid())

    def forward(self, z, c):

        if self.conditional:
            c = idx2onehot(c, n=10)
            z = torch.cat((z, c), dim=-1)

        x = self.MLP(z)

        return x


# ---- train.py's loss ----

def loss_fn(recon_x, x, mean, log_var):
    BCE = torch.nn.functional.binary_cross_entropy(
        recon_x.view(-1, 28*28), x.view(-1, 28*28), reduction='sum')
    KLD = -0.5 * torch.sum(1 + log_var - mean.pow(2) - log_var.exp())

    return (BCE + KLD) / x.size(0)


# ---- the test ----

EPS = []


class NumpyEpsVAE(VAE):
    """The compared runs: eps from a queue of numpy draws."""

    def reparameterize(self, mu, log_var):
        std = torch.exp(0.5 * log_var)
        eps = EPS.pop(0)
        return mu + eps * std


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


r = np.random.default_rng(0)
device = torch.device('cpu')
oh = idx2onehot(torch.tensor([3, 0, 9]), n=10)
print("idx2onehot", oh.dtype, tuple(oh.shape), oh.argmax(1).tolist(), oh.sum().item(),
      idx2onehot(torch.tensor([[1], [2]]), n=4).tolist())
try:
    idx2onehot(torch.tensor([10]), n=10)
except AssertionError:
    print("assert max < n")

# a synthetic "MNIST": digit-dependent blobs in [0, 1]
labels_all = r.integers(0, 10, 32)
yy, xx = np.mgrid[0:28, 0:28]
imgs = np.stack([np.exp(-((yy - 6 - 1.6 * l) ** 2 + (xx - 14) ** 2) / 30.0) for l in labels_all])
imgs = np.clip(imgs + 0.05 * r.random(imgs.shape), 0, 1).astype(np.float32)[:, None]
data_loader = [(torch.from_numpy(imgs[i:i + 8]), torch.from_numpy(labels_all[i:i + 8])) for i in range(0, 32, 8)]

for conditional in (True, False):
    encoder_layer_sizes = [784, 32]
    vae = NumpyEpsVAE(encoder_layer_sizes=encoder_layer_sizes, latent_size=2, decoder_layer_sizes=[32, 784],
                      conditional=conditional, num_labels=10 if conditional else 0).to(device)
    print("conditional", conditional, "encoder sizes now", encoder_layer_sizes,
          [n for n, _ in vae.encoder.MLP.named_children()], [n for n, _ in vae.decoder.MLP.named_children()],
          type(vae.decoder.MLP.sigmoid).__name__, vae.encoder.MLP.L0.in_features)
    with torch.no_grad():
        for name, p in vae.named_parameters():
            p.copy_(torch.from_numpy(r.normal(0, 0.1, tuple(p.shape)).astype(np.float32)))
    optimizer = torch.optim.Adam(vae.parameters(), lr=0.005)
    logs = defaultdict(list)
    for epoch in range(2):
        tracker_epoch = defaultdict(lambda: defaultdict(dict))
        for iteration, (x, y) in enumerate(data_loader):
            x, y = x.to(device), y.to(device)
            EPS.append(torch.from_numpy(r.normal(size=(x.size(0), 2)).astype(np.float32)))
            if conditional:
                recon_x, mean, log_var, z = vae(x, y)
            else:
                recon_x, mean, log_var, z = vae(x)

            for i, yi in enumerate(y):
                id = len(tracker_epoch)
                tracker_epoch[id]['x'] = z[i, 0].item()
                tracker_epoch[id]['y'] = z[i, 1].item()
                tracker_epoch[id]['label'] = yi.item()

            loss = loss_fn(recon_x, x, mean, log_var)

            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            logs['loss'].append(loss.item())

            if iteration % 2 == 0 or iteration == len(data_loader)-1:
                print("Epoch {:02d}/{:02d} Batch {:04d}/{:d}, Loss {:9.4f}".format(
                    epoch, 2, iteration, len(data_loader)-1, loss.item()))
    print("tracker", len(tracker_epoch), {k: (f"{v:.4f}" if isinstance(v, float) else v)
                                          for k, v in tracker_epoch[5].items()},
          type(tracker_epoch[5]['label']).__name__, len(logs['loss']), f"{np.mean(logs['loss']):.4f}")

    # inference by label: z from torch.randn, then from numpy
    if conditional:
        c = torch.arange(0, 10).long().unsqueeze(1).to(device)
        z = torch.randn([c.size(0), 2]).to(device)
        x = vae.inference(z, c=c)
        print("inference", tuple(x.shape), fmt(x[3], 3), bool(((x >= 0) & (x <= 1)).all()))
        z = torch.from_numpy(r.normal(size=(10, 2)).astype(np.float32))
        x = vae.inference(z, c=c)
    else:
        z = torch.from_numpy(r.normal(size=(10, 2)).astype(np.float32))
        x = vae.inference(z)
    print("inference", tuple(x.shape), fmt(x.view(-1, 28, 28)[4, 10:14, 14], 4), f"{x.sum().item():.3f}")

# randn_like's own draws through the original reparameterize
torch.manual_seed(0)
plain = VAE([784, 16], 2, [16, 784], conditional=True, num_labels=10)
mu, lv = torch.zeros(4000, 2), torch.full((4000, 2), 2 * np.log(0.5), dtype=torch.float32)
zs = plain.reparameterize(mu, lv)
print("randn_like std", f"{zs.std().item():.1f}", fmt(zs, 2))
out = plain(torch.from_numpy(imgs[:3]), torch.tensor([1, 2, 3]))
print("plain forward", [tuple(t.shape) for t in out])


# one training step under torch.compile against the same step eagerly
vae = NumpyEpsVAE([784, 32], 2, [32, 784], conditional=True, num_labels=10)
with torch.no_grad():
    for name, p in vae.named_parameters():
        p.copy_(torch.from_numpy(r.normal(0, 0.1, tuple(p.shape)).astype(np.float32)))
optimizer = torch.optim.Adam(vae.parameters(), lr=0.005)
eps_fixed = torch.from_numpy(r.normal(size=(8, 2)).astype(np.float32))


def train_step(x, y):
    EPS.append(eps_fixed)
    recon_x, mean, log_var, z = vae(x, y)
    loss = loss_fn(recon_x, x, mean, log_var)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


x, y = data_loader[2]
state, opt_state = copy.deepcopy(vae.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(x, y).item() for _ in range(2)]
after = {k: v.clone() for k, v in vae.state_dict().items()}
vae.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(x, y).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(vae.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
