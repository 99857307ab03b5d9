# A CAPTCHA reader trained with CTC, after the CRNN captcha tutorials
# (https://github.com/carnotaur/crnn-tutorial, crnn.py / train.py, and
# https://github.com/GabrielDornelles/pytorch-ocr, models/crnn.py): a
# small convolutional feature extractor, the height folded into the
# channels (permute + view), a bidirectional GRU over the width, the
# class scores' log_softmax(2) in (T, N, C) order, F.ctc_loss with
# input_lengths from torch.full(size=(N,), fill_value=T) and the targets
# concatenated with their lengths (blank=0, zero_infinity=True), and the
# greedy decoder (argmax, unique_consecutive, blanks dropped).
# Written for this test: 8 images 16x48 of 4-character strings over a
# 10-symbol alphabet, 4 Adam steps; one compiled step against eager.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ALPHABET = "0123456789"
rng = np.random.RandomState(0)
texts = ["".join(rng.choice(list(ALPHABET), size=rng.randint(3, 5))) for _ in range(8)]
images = torch.from_numpy(rng.rand(8, 1, 16, 48).astype(np.float32))


def encode(texts):
    targets = torch.tensor([ALPHABET.index(c) + 1 for t in texts for c in t], dtype=torch.long)
    target_lengths = torch.tensor([len(t) for t in texts], dtype=torch.long)
    return targets, target_lengths


class CRNN(nn.Module):
    def __init__(self, num_chars, rnn_hidden=16):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d((2, 1)))
        self.linear1 = nn.Linear(16 * 4, 24)
        self.drop = nn.Dropout(0.0)
        self.gru = nn.GRU(24, rnn_hidden, bidirectional=True, batch_first=True)
        self.output = nn.Linear(rnn_hidden * 2, num_chars + 1)

    def forward(self, images):
        bs = images.size(0)
        x = self.cnn(images)                       # (N, C, H, W)
        x = x.permute(0, 3, 1, 2)                  # (N, W, C, H)
        x = x.view(bs, x.size(1), -1)
        x = self.drop(F.relu(self.linear1(x)))
        x, _ = self.gru(x)
        x = self.output(x)
        x = x.permute(1, 0, 2)                     # (T, N, C)
        return x


def ctc_loss(x, targets, target_lengths):
    log_probs = F.log_softmax(x, 2)
    input_lengths = torch.full(size=(x.size(1),), fill_value=log_probs.size(0), dtype=torch.int32)
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0,
                      zero_infinity=True)


def decode_predictions(preds):
    preds = preds.permute(1, 0, 2).softmax(2).argmax(2)
    out = []
    for p in preds:
        p = torch.unique_consecutive(p)
        out.append("".join(ALPHABET[i - 1] for i in p.tolist() if i != 0))
    return out


torch.manual_seed(0)
model = CRNN(len(ALPHABET))
targets, target_lengths = encode(texts)
print("texts", texts, "targets", targets.shape[0], target_lengths.tolist())
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)


def train_step(images, targets, target_lengths):
    optimizer.zero_grad()
    preds = model(images)
    loss = ctc_loss(preds, targets, target_lengths)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    optimizer.step()
    return loss


for step in range(4):
    loss = train_step(images, targets, target_lengths)
    print(f"step {step} ctc loss {loss.item():.5f}")

# the per-sample losses, reduction='none' and 'sum', and nn.CTCLoss
with torch.no_grad():
    preds = model(images)
    lp = preds.log_softmax(2)
    T = lp.size(0)
    lens = torch.full((8,), T, dtype=torch.long)
    per = F.ctc_loss(lp, targets, lens, target_lengths, reduction="none")
    print("per sample", [round(v, 4) for v in per.tolist()])
    print("sum", round(F.ctc_loss(lp, targets, lens, target_lengths, reduction="sum").item(), 4),
          "module", round(nn.CTCLoss(blank=0)(lp, targets, lens, target_lengths).item(), 5))
    padded = torch.zeros(8, 4, dtype=torch.long)
    for i, t in enumerate(texts):
        padded[i, :len(t)] = torch.tensor([ALPHABET.index(c) + 1 for c in t])
    print("padded targets", round(F.ctc_loss(lp, padded, lens, target_lengths).item(), 5))

model.eval()
with torch.inference_mode():
    print("decoded", decode_predictions(model(images)))
model.train()

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(images, targets, target_lengths)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(images, targets, target_lengths)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-5) for k, v in model.state_dict().items()))
