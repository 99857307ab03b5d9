# torch.compile on the training steps of the models the public programs use
# (yunjey's ConvNet with BatchNorm, an LSTM language model, a GRU classifier,
# a TransformerEncoder with key-padding mask, a Conv1d/GroupNorm/SiLU stack,
# a ConvTranspose2d/InstanceNorm decoder, an sdpa attention block): the same
# steps eagerly and compiled, from the same weights, must agree.
import copy
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Conv2d(1, 8, 5, 1, 2), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.fc = nn.Linear(8 * 14 * 14, 10)
    def forward(self, x):
        out = self.layer1(x)
        return self.fc(out.reshape(out.size(0), -1))

class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 16)
        self.lstm = nn.LSTM(16, 24, 2, batch_first=True)
        self.linear = nn.Linear(24, 20)
    def forward(self, x):
        out, (h, c) = self.lstm(self.embed(x))
        return self.linear(out.reshape(-1, out.size(2)))

class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(6, 12, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(24, 3)
    def forward(self, x):
        out, h = self.gru(x)
        return self.fc(torch.cat([h[-2], h[-1]], dim=1))

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(32, 2)
    def forward(self, x, pad):
        h = self.enc(self.emb(x), src_key_padding_mask=pad)
        h = h.masked_fill(pad.unsqueeze(-1), 0.0).sum(1) / (~pad).sum(1, keepdim=True)
        return self.out(h)

class Conv1dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(4, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU(),
                                 nn.Conv1d(16, 16, 3, padding=2, dilation=2), nn.GELU(),
                                 nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(16, 3))
    def forward(self, x):
        return self.net(x)

class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 16 * 4 * 4)
        self.up = nn.Sequential(nn.ConvTranspose2d(16, 8, 4, 2, 1), nn.InstanceNorm2d(8, affine=True),
                                nn.LeakyReLU(0.2), nn.ConvTranspose2d(8, 3, 4, 2, 1), nn.Tanh())
    def forward(self, z):
        return self.up(self.fc(z).view(-1, 16, 4, 4))

class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(32, 96)
        self.proj = nn.Linear(32, 32)
        self.ln = nn.LayerNorm(32)
    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln(x)).split(32, dim=2)
        q, k, v = [t.view(B, T, 4, 8).transpose(1, 2) for t in (q, k, v)]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))

def cases():
    x28 = torch.randn(6, 1, 28, 28); y10 = torch.randint(0, 10, (6,))
    tok = torch.randint(0, 20, (4, 7))
    seq = torch.randn(5, 9, 6); y3 = torch.randint(0, 3, (5,))
    src = torch.randint(1, 30, (3, 6)); pad = torch.tensor([[False] * 6, [False] * 4 + [True] * 2, [False] * 3 + [True] * 3])
    sig = torch.randn(4, 4, 12); y3b = torch.randint(0, 3, (4,))
    z = torch.randn(2, 8); img = torch.rand(2, 3, 16, 16) * 2 - 1
    xa = torch.randn(2, 5, 32)
    yield "convnet", ConvNet(), lambda m: F.cross_entropy(m(x28), y10), torch.optim.Adam
    yield "lstm_lm", LM(), lambda m: F.cross_entropy(m(tok[:, :-1]), tok[:, 1:].reshape(-1)), torch.optim.SGD
    yield "gru", GRUClassifier(), lambda m: F.cross_entropy(m(seq), y3), torch.optim.RMSprop
    yield "transformer", Encoder(), lambda m: F.cross_entropy(m(src, pad), torch.tensor([0, 1, 1])), torch.optim.AdamW
    yield "conv1d", Conv1dNet(), lambda m: F.cross_entropy(m(sig), y3b), torch.optim.Adagrad
    yield "decoder", Decoder(), lambda m: F.l1_loss(m(z), img), torch.optim.Adam
    yield "attention", Attn(), lambda m: m(xa).pow(2).mean(), torch.optim.AdamW

for name, model, loss_of, opt_cls in cases():
    twin = copy.deepcopy(model)
    results = []
    for m, compiled in ((model, False), (twin, True)):
        opt = opt_cls(m.parameters(), lr=0.01)
        def step():
            opt.zero_grad()
            loss = loss_of(m)
            loss.backward()
            opt.step()
            return loss
        run = torch.compile(step) if compiled else step
        losses = [run().item() for _ in range(3)]
        results.append((losses, [p.detach().clone() for p in m.parameters()],
                        [p.grad.abs() for p in m.parameters()]))
    (le, pe, ge), (lc, pc, _) = results
    loss_ok = all(abs(a - b) <= 1e-4 * max(1.0, abs(a)) for a, b in zip(le, lc))
    # parameters whose true gradient is 0 (a bias before a norm layer, attention's
    # key bias) get Adam updates of rounding noise: compared only where it is not
    param_diff = max(((a - b).abs() * (g > 1e-5)).max().item() for a, b, g in zip(pe, pc, ge))
    print(f"{name}: losses agree {loss_ok}, params agree {param_diff < 1e-4}")
    if not (loss_ok and param_diff < 1e-4):
        print("   ", le, lc, param_diff)
