"""A small causal language-model training step (embedding, positional
embedding sliced to the sequence length, one masked attention layer, a
head, cross-entropy, Adam) for the symbolic-shape tests and benchmark."""
import numpy as np

import tracec
import tracec.nn as nn
import tracec.nn.functional as F


class TinyLM(nn.Module):
    def __init__(self, vocab=32, width=16, max_len=48):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Parameter(tracec.randn(1, max_len, width) * 0.02)
        self.qkv = nn.Linear(width, 3 * width)
        self.head = nn.Linear(width, vocab)

    def forward(self, idx):
        B, T = idx.shape
        x = self.tok(idx) + self.pos[:, :T]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / np.sqrt(q.size(-1)))
        mask = tracec.tril(tracec.ones(T, T))
        att = att.masked_fill(mask == 0, float("-inf")).softmax(dim=-1)
        x = x + att @ v
        return self.head(x)


def make_step(seed=0, vocab=32, width=16):
    """``(model, step)``: ``step(idx, tgt)`` trains one step, returns the loss."""
    tracec.manual_seed(seed)
    model = TinyLM(vocab, width)
    opt = tracec.optim.Adam(model.parameters(), lr=1e-2)

    def step(idx, tgt):
        opt.zero_grad()
        logits = model(idx)
        B, T = idx.shape
        loss = F.cross_entropy(logits.view(B * T, -1), tgt.view(-1))
        loss.backward()
        opt.step()
        return loss
    return model, step


def random_batches(n, lo=5, hi=40, batch=4, vocab=32, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        T = int(rng.integers(lo, hi + 1))
        yield (tracec.tensor(rng.integers(0, vocab, (batch, T))),
               tracec.tensor(rng.integers(0, vocab, (batch, T))))
