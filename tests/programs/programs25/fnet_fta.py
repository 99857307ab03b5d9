# Modelled on labmlai/annotated_deep_learning_paper_implementations:
# labml_nn/transformers/fnet/__init__.py (FNetMix: the token mixing of a
# transformer layer replaced by torch.fft.fft over the hidden dimension then
# the sequence dimension, keeping the real part; called with query/key/value
# and asserting they are the same tensor) and labml_nn/activations/fta
# (Fuzzy Tiling Activation: a registered arange of tile edges, the fuzzy
# indicator (x <= eta) * x + (x > eta), the output flattened through view
# over the tiles) used in the feed-forward of a transformer layer.
# Written for this test (not copied): a one-layer sequence classifier with
# the FNet mix and an FTA feed-forward on synthetic tokens, AdamW, 3 steps;
# the FFT checked against a DFT matrix; one step compiled against eager.
import copy
import math

import numpy as np
import torch
from torch import nn


class FNetMix(nn.Module):
    def forward(self, query, key, value, mask=None):
        assert query is key and key is value
        assert mask is None
        x = query
        fft_hidden = torch.fft.fft(x, dim=2)
        fft_seq = torch.fft.fft(fft_hidden, dim=0)
        return torch.real(fft_seq)


class FTA(nn.Module):
    def __init__(self, lower_limit: float, upper_limit: float, delta: float, eta: float):
        super().__init__()
        self.c = nn.Parameter(torch.arange(lower_limit, upper_limit, delta), requires_grad=False)
        self.expansion_factor = len(self.c)
        self.delta = delta
        self.eta = eta

    def fuzzy_i_plus(self, x):
        return (x <= self.eta) * x + (x > self.eta)

    def forward(self, z):
        z = z.view(*z.shape, 1)
        z = 1. - self.fuzzy_i_plus(torch.clip(self.c - z, min=0.) + torch.clip(z - self.delta - self.c, min=0.))
        return z.view(*z.shape[:-2], -1)


class FeedForwardFTA(nn.Module):
    def __init__(self, d_model, d_ff, activation: FTA, dropout=0.1):
        super().__init__()
        self.layer1 = nn.Linear(d_model, d_ff)
        self.layer2 = nn.Linear(d_ff * activation.expansion_factor, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = activation

    def forward(self, x):
        x = self.activation(self.layer1(x))
        x = self.dropout(x)
        return self.layer2(x)


class Layer(nn.Module):
    def __init__(self, d_model, mix, ff, dropout):
        super().__init__()
        self.mix, self.ff = mix, ff
        self.norm_mix = nn.LayerNorm([d_model])
        self.norm_ff = nn.LayerNorm([d_model])
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        z = self.norm_mix(x)
        x = x + self.dropout(self.mix(query=z, key=z, value=z))
        z = self.norm_ff(x)
        return x + self.dropout(self.ff(z))


class Classifier(nn.Module):
    def __init__(self, n_tokens, d_model, n_classes):
        super().__init__()
        self.emb = nn.Embedding(n_tokens, d_model)
        self.layer = Layer(d_model, FNetMix(), FeedForwardFTA(d_model, 8, FTA(-1., 1., 0.25, 0.05), 0.0), 0.0)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, x):
        # x: [seq_len, batch] like labml's NLP classification configs
        h = self.layer(self.emb(x) * math.sqrt(self.emb.embedding_dim))
        return self.head(h[-1])


rng = np.random.RandomState(0)
seq_len, batch, n_tokens, d_model, n_classes = 7, 4, 11, 8, 3
data = torch.from_numpy(rng.randint(0, n_tokens, size=(seq_len, batch)))
labels = torch.from_numpy(rng.randint(0, n_classes, size=batch))

# the FFT is the DFT: check against the matrix form
v = torch.from_numpy(rng.randn(5, 3).astype(np.float64))
k = torch.arange(5, dtype=torch.float64)
ang = -2 * math.pi * k[:, None] * k[None, :] / 5
dft = torch.complex(torch.cos(ang), torch.sin(ang))
f = torch.fft.fft(v, dim=0)
print("fft", f.dtype, tuple(f.shape), torch.allclose(f, dft @ v.to(torch.complex128)))
print("fft real", f.real[:, 0].tolist())
print("fft imag", f.imag[:, 1].tolist())
print("fta c", FTA(-1., 1., 0.25, 0.05).c.tolist())

torch.manual_seed(0)
model = Classifier(n_tokens, d_model, n_classes)
print("params", [(n, tuple(p.shape), p.requires_grad) for n, p in model.named_parameters()])
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
loss_func = nn.CrossEntropyLoss()
for step in range(3):
    out = model(data)
    loss = loss_func(out, labels)
    optimizer.zero_grad()
    loss.backward()
    gnorm = sum(p.grad.norm() ** 2 for p in model.parameters() if p.grad is not None) ** 0.5
    optimizer.step()
    print(f"step {step} loss {loss.item():.6f} grad norm {gnorm.item():.6f} "
          f"acc {(out.argmax(-1) == labels).float().mean().item():.3f}")

# input gradient through fft of fft
x = torch.from_numpy(rng.randn(3, 2, 4).astype(np.float32)).requires_grad_()
w = torch.from_numpy(rng.randn(3, 2, 4).astype(np.float32))
(FNetMix()(x, x, x) * w).sum().backward()
print("fnet input grad", x.grad.flatten()[:6].tolist())


def train_step(data, labels):
    loss = loss_func(model(data), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(data, labels)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(data, labels)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
