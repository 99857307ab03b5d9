"""Models saved whole (``torch.save(model, f)``) by one library and loaded
by the other (tests/test_whole_model_checkpoints.py).  ``import torch`` is
whichever runs this module: PyTorch in the test process, tracec under
``tracec run``; the user class ``Net`` is pickled by this module's name,
as a user's own class is."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    """A user's model: containers, a buffer, a functional activation kept
    as an attribute, a recurrent layer, attention."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(11, 8, padding_idx=0)
        self.lstm = nn.LSTM(8, 6, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(12, 5, batch_first=True)
        self.attn = nn.MultiheadAttention(5, 1, batch_first=True)
        self.heads = nn.ModuleList([nn.Linear(5, 3), nn.Linear(5, 3)])
        self.extra = nn.ModuleDict({"norm": nn.LayerNorm(3), "act": nn.GELU(approximate="tanh")})
        self.act = F.silu
        self.register_buffer("scale", torch.tensor([2.0, 0.5, 1.0]))
        self.register_buffer("scratch", torch.zeros(1), persistent=False)

    def forward(self, tokens):
        h, _ = self.lstm(self.embed(tokens))
        h, _ = self.gru(h)
        h, _ = self.attn(h, h, h)
        h = self.act(h)
        out = sum(head(h) for head in self.heads)
        return self.extra["act"](self.extra["norm"](out)) * self.scale


def zoo():
    """name -> (model in eval mode, input); built with the same seed, the
    models are the same in both libraries."""
    torch.manual_seed(0)
    img = torch.randn(2, 3, 8, 8)
    seq = torch.randn(2, 5, 4)
    models = {
        "convnet": (nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), nn.BatchNorm2d(4),
            nn.LeakyReLU(0.1), nn.MaxPool2d(2), nn.Conv2d(4, 8, 3, stride=2, groups=4, bias=False),
            nn.GroupNorm(2, 8), nn.PReLU(), nn.ConvTranspose2d(8, 4, 2, stride=2),
            nn.InstanceNorm2d(4, affine=True), nn.Upsample(scale_factor=2), nn.SiLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(4, 3),
            nn.Softmax(dim=-1)), img),
        "conv1d": (nn.Sequential(nn.Conv1d(5, 6, 3, padding="same", dilation=2),
                                 nn.BatchNorm1d(6), nn.Tanh(), nn.AvgPool1d(2),
                                 nn.Conv1d(6, 2, 1)), seq),
        "transformer": (nn.TransformerEncoder(nn.TransformerEncoderLayer(
            4, 2, 16, dropout=0.1, batch_first=True, norm_first=True), 2,
            norm=nn.LayerNorm(4), enable_nested_tensor=False), seq),
        "decoder_layer": (nn.TransformerDecoderLayer(4, 2, 8, activation="gelu",
                                                     batch_first=True), (seq, seq)),
        "rnn": (nn.RNN(4, 3, nonlinearity="relu", batch_first=True), seq),
        "pixel": (nn.Sequential(nn.Conv2d(3, 8, 1), nn.PixelShuffle(2), nn.Identity(),
                                nn.Hardswish(), nn.Unflatten(1, (1, 2))), img),
        "net": (Net(), torch.randint(0, 11, (2, 7))),
    }
    for model, _ in models.values():
        model.eval()
    return models


def run(model, x):
    with torch.no_grad():
        out = model(*x) if isinstance(x, tuple) else model(x)
    return out[0] if isinstance(out, tuple) else out
