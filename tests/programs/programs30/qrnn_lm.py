# Quasi-Recurrent Neural Networks (Bradbury et al. 2016) as a word-level
# language model, in the shape of salesforce/pytorch-qrnn (torchqrnn/
# qrnn.py: QRNNLayer with window 1 or 2 (the previous timestep's input
# kept in self.prevX and concatenated along the feature axis), one Linear
# producing Z, F (and O with output_gate) split by .chunk(3, dim=2),
# tanh / sigmoid, zoneout on F in training, and forget_mult.py's
# ForgetMult CPU path: h_t = f_t * x_t + (1 - f_t) * h_{t-1} stepped in a
# Python loop over torch.stack'ed results; QRNN stacking layers with
# per-layer hidden states, reset() between sequences) and the AWD-LSTM-
# style model around it (Embedding, dropout, tied decoder weights,
# CrossEntropyLoss, clip_grad_norm_, truncated BPTT with hidden states
# carried and repackaged by .detach()). Written for this test: a
# synthetic corpus from a repeating grammar (numpy), vocabulary 16,
# embedding / hidden 24, 2 layers (window 2 then 1), zoneout and dropout
# 0, bptt 8, batch 4, 3 epochs with AWD-LSTM's --optimizer adam (lr 1e-2,
# wdecay 1.2e-6); perplexity printed; one compiled training step against
# eager.
import copy
import math

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
rng = np.random.RandomState(0)


class ForgetMult(torch.nn.Module):
    def forward(self, f, x, hidden_init=None):
        result = []
        forgets = f.split(1, dim=0)
        prev_h = hidden_init
        for i, h in enumerate((f * x).split(1, dim=0)):
            if prev_h is not None:
                h = h + (1 - forgets[i]) * prev_h
            h = h.view(h.size()[1:])
            result.append(h)
            prev_h = h
        return torch.stack(result)


class QRNNLayer(nn.Module):
    def __init__(self, input_size, hidden_size=None, save_prev_x=False, zoneout=0, window=1, output_gate=True):
        super(QRNNLayer, self).__init__()
        assert window in [1, 2], "This QRNN implementation currently only handles convolutional window of size 1 or size 2"
        self.window = window
        self.input_size = input_size
        self.hidden_size = hidden_size if hidden_size else input_size
        self.zoneout = zoneout
        self.save_prev_x = save_prev_x
        self.prevX = None
        self.output_gate = output_gate
        self.linear = nn.Linear(self.window * self.input_size,
                                3 * self.hidden_size if self.output_gate else 2 * self.hidden_size)

    def reset(self):
        self.prevX = None

    def forward(self, X, hidden=None):
        seq_len, batch_size, _ = X.size()
        source = None
        if self.window == 1:
            source = X
        elif self.window == 2:
            Xm1 = []
            Xm1.append(self.prevX if self.prevX is not None else X[:1, :, :] * 0)
            if len(X) > 1:
                Xm1.append(X[:-1, :, :])
            Xm1 = torch.cat(Xm1, 0)
            source = torch.cat([X, Xm1], 2)
        Y = self.linear(source)
        if self.output_gate:
            Y = Y.view(seq_len, batch_size, 3 * self.hidden_size)
            Z, F, O = Y.chunk(3, dim=2)
        else:
            Y = Y.view(seq_len, batch_size, 2 * self.hidden_size)
            Z, F = Y.chunk(2, dim=2)
        Z = torch.nn.functional.tanh(Z)
        F = torch.nn.functional.sigmoid(F)
        if self.zoneout:
            if self.training:
                mask = F.new_empty(F.size(), requires_grad=False).bernoulli_(1 - self.zoneout)
                F = F * mask
            else:
                F *= 1 - self.zoneout
        C = ForgetMult()(F, Z, hidden)
        if self.output_gate:
            H = torch.nn.functional.sigmoid(O) * C
        else:
            H = C
        if self.window > 1 and self.save_prev_x:
            self.prevX = X[-1:, :, :].detach()
        return H, C[-1:, :, :]


class QRNN(torch.nn.Module):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0, bidirectional=False, layers=None, **kwargs):
        assert bidirectional is False, 'Bidirectional QRNN is not yet supported'
        assert batch_first is False, 'Batch first mode is not yet supported'
        assert bias is True, 'Removing underlying bias is not yet supported'
        super(QRNN, self).__init__()
        self.layers = torch.nn.ModuleList(layers if layers else [
            QRNNLayer(input_size if l == 0 else hidden_size, hidden_size, **kwargs) for l in range(num_layers)])
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = len(layers) if layers else num_layers
        self.dropout = dropout

    def reset(self):
        [layer.reset() for layer in self.layers]

    def forward(self, input, hidden=None):
        next_hidden = []
        for i, layer in enumerate(self.layers):
            input, hn = layer(input, None if hidden is None else hidden[i])
            next_hidden.append(hn)
            if self.dropout != 0 and i < len(self.layers) - 1:
                input = torch.nn.functional.dropout(input, p=self.dropout, training=self.training, inplace=False)
        next_hidden = torch.cat(next_hidden, 0).view(self.num_layers, *next_hidden[0].size()[-2:])
        return input, next_hidden


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid):
        super(RNNModel, self).__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = QRNN(ninp, nhid, layers=[QRNNLayer(ninp, nhid, save_prev_x=True, window=2),
                                            QRNNLayer(nhid, nhid, save_prev_x=True, window=1)])
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight
        self.encoder.weight.data.uniform_(-0.1, 0.1)
        self.decoder.bias.data.zero_()

    def reset(self):
        self.rnn.reset()

    def forward(self, input, hidden):
        emb = self.encoder(input)
        output, hidden = self.rnn(emb, hidden)
        return self.decoder(output), hidden

    def init_hidden(self, bsz):
        return torch.zeros(2, bsz, self.rnn.hidden_size)


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


# a repeating grammar: "subject verb object ." with a few choices each
V = 16
words = []
for _ in range(160):
    words += [rng.randint(0, 4), 4 + rng.randint(0, 3), 7 + rng.randint(0, 6), 15]
data = torch.tensor(words, dtype=torch.long)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


train_data = batchify(data[:512], 4)
val_data = batchify(data[512:], 4)
BPTT = 8
model = RNNModel(V, 24, 24)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1.2e-6)


def get_batch(source, i):
    seq_len = min(BPTT, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def train_step(data, targets, hidden):
    optimizer.zero_grad()
    output, hidden = model(data, hidden)
    loss = criterion(output.view(-1, V), targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
    return loss, hidden


def evaluate(source):
    model.eval()
    model.reset()
    total, hidden = 0.0, model.init_hidden(4)
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, BPTT):
            data, targets = get_batch(source, i)
            output, hidden = model(data, hidden)
            total += len(data) * criterion(output.view(-1, V), targets).item()
    return total / (len(source) - 1)


for epoch in range(1, 4):
    model.train()
    model.reset()
    hidden = model.init_hidden(4)
    total_loss = 0.
    for batch, i in enumerate(range(0, train_data.size(0) - 1, BPTT)):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        loss, hidden = train_step(data, targets, hidden)
        total_loss += loss.item()
        if batch % 5 == 4:
            cur_loss = total_loss / 5
            print(f"| epoch {epoch:3d} | {batch + 1:3d} batches | loss {cur_loss:5.3f} | ppl {math.exp(cur_loss):8.3f}")
            total_loss = 0
    val_loss = evaluate(val_data)
    print(f"| end of epoch {epoch:3d} | valid loss {val_loss:5.3f} | valid ppl {math.exp(val_loss):8.3f}")

model.train()
model.reset()
data, targets = get_batch(train_data, 0)
hidden = model.init_hidden(4)
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c, hidden_c = torch.compile(train_step)(data, targets, hidden)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
model.reset()
loss_e, hidden_e = train_step(data, targets, hidden)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6), torch.allclose(hidden_c, hidden_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
