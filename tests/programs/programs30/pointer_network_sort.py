# Pointer Networks (Vinyals et al. 2015) learning to sort, in the shape of
# shirgur/PointerNet (PointerNet.py: Encoder over an nn.LSTM with
# batch_first, Attention with a Conv1d context projection (kernel 1), the
# input_linear, V parameter initialised uniform(-1, 1), masked softmax
# with inf set by masked_fill on a mask tensor, Decoder stepping its own
# LSTM-cell equations (gates from input_to_hidden + hidden_to_hidden,
# chunk(4, 1), sigmoid / tanh), the hidden_out of torch.cat((h_t, hidden_t))
# through tanh, pointers chosen by max over masked outputs, one_hot
# pointers from (runner == indices.unsqueeze(1).expand(-1, outputs.size()[1]))
# .float() updating the mask, the next input gathered with
# embedded_inputs[one_hot_pointers.byte()] ... .view, torch.stack of the
# per-step outputs and pointers), the 2-D input embedding Linear, Adam and
# the loss CrossEntropy over o.contiguous().view(-1, o.size()[-1]).
# Written for this test: sequences of 5 numbers in [0, 1) (torch.rand),
# embedding 16, hidden 32, 1 layer, unidirectional, batches of 32, 120
# steps; the exact-sort accuracy reported; one compiled training step
# against eager.
import copy

import torch
import torch.nn as nn
from torch.nn import Parameter
import torch.nn.functional as F

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self, embedding_dim, hidden_dim, n_layers, dropout, bidir):
        super(Encoder, self).__init__()
        self.hidden_dim = hidden_dim // 2 if bidir else hidden_dim
        self.n_layers = n_layers * 2 if bidir else n_layers
        self.bidir = bidir
        self.lstm = nn.LSTM(embedding_dim, self.hidden_dim, n_layers, dropout=dropout,
                            bidirectional=bidir, batch_first=True)
        self.h0 = Parameter(torch.zeros(1), requires_grad=False)
        self.c0 = Parameter(torch.zeros(1), requires_grad=False)

    def forward(self, embedded_inputs, hidden):
        outputs, hidden = self.lstm(embedded_inputs, hidden)
        return outputs, hidden

    def init_hidden(self, embedded_inputs):
        batch_size = embedded_inputs.size(0)
        h0 = self.h0.unsqueeze(0).unsqueeze(0).repeat(self.n_layers, batch_size, self.hidden_dim)
        c0 = self.h0.unsqueeze(0).unsqueeze(0).repeat(self.n_layers, batch_size, self.hidden_dim)
        return h0, c0


class Attention(nn.Module):
    def __init__(self, input_dim, hidden_dim):
        super(Attention, self).__init__()
        self.input_dim = input_dim
        self.hidden_dim = hidden_dim
        self.input_linear = nn.Linear(input_dim, hidden_dim)
        self.context_linear = nn.Conv1d(input_dim, hidden_dim, 1, 1)
        self.V = Parameter(torch.FloatTensor(hidden_dim), requires_grad=True)
        self._inf = Parameter(torch.FloatTensor([float('-inf')]), requires_grad=False)
        self.tanh = nn.Tanh()
        self.softmax = nn.Softmax(dim=1)
        nn.init.uniform_(self.V, -1, 1)

    def forward(self, input, context, mask):
        inp = self.input_linear(input).unsqueeze(2).expand(-1, -1, context.size(1))
        context = context.permute(0, 2, 1)
        ctx = self.context_linear(context)
        V = self.V.unsqueeze(0).expand(context.size(0), -1).unsqueeze(1)
        att = torch.bmm(V, self.tanh(inp + ctx)).squeeze(1)
        if len(att[mask]) > 0:
            att[mask] = self.inf[mask]
        alpha = self.softmax(att)
        hidden_state = torch.bmm(ctx, alpha.unsqueeze(2)).squeeze(2)
        return hidden_state, alpha

    def init_inf(self, mask_size):
        self.inf = self._inf.unsqueeze(1).expand(*mask_size)


class Decoder(nn.Module):
    def __init__(self, embedding_dim, hidden_dim):
        super(Decoder, self).__init__()
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.input_to_hidden = nn.Linear(embedding_dim, 4 * hidden_dim)
        self.hidden_to_hidden = nn.Linear(hidden_dim, 4 * hidden_dim)
        self.hidden_out = nn.Linear(hidden_dim * 2, hidden_dim)
        self.att = Attention(hidden_dim, hidden_dim)
        self.mask = Parameter(torch.ones(1), requires_grad=False)
        self.runner = Parameter(torch.zeros(1), requires_grad=False)

    def forward(self, embedded_inputs, decoder_input, hidden, context):
        batch_size = embedded_inputs.size(0)
        input_length = embedded_inputs.size(1)
        mask = self.mask.repeat(input_length).unsqueeze(0).repeat(batch_size, 1)
        self.att.init_inf(mask.size())
        runner = self.runner.repeat(input_length)
        for i in range(input_length):
            runner.data[i] = i
        runner = runner.unsqueeze(0).expand(batch_size, -1).long()
        outputs = []
        pointers = []

        def step(x, hidden):
            h, c = hidden
            gates = self.input_to_hidden(x) + self.hidden_to_hidden(h)
            input, forget, cell, out = gates.chunk(4, 1)
            input = F.sigmoid(input)
            forget = F.sigmoid(forget)
            cell = F.tanh(cell)
            out = F.sigmoid(out)
            c_t = (forget * c) + (input * cell)
            h_t = out * F.tanh(c_t)
            hidden_t, output = self.att(h_t, context, torch.eq(mask, 0))
            hidden_t = F.tanh(self.hidden_out(torch.cat((hidden_t, h_t), 1)))
            return hidden_t, c_t, output

        for _ in range(input_length):
            h_t, c_t, outs = step(decoder_input, hidden)
            hidden = (h_t, c_t)
            masked_outs = outs * mask
            max_probs, indices = masked_outs.max(1)
            one_hot_pointers = (runner == indices.unsqueeze(1).expand(-1, outs.size()[1])).float()
            mask = mask * (1 - one_hot_pointers)
            embedding_mask = one_hot_pointers.unsqueeze(2).expand(-1, -1, self.embedding_dim).byte()
            decoder_input = embedded_inputs[embedding_mask.data.bool()].view(batch_size, self.embedding_dim)
            outputs.append(outs.unsqueeze(0))
            pointers.append(indices.unsqueeze(1))
        outputs = torch.cat(outputs).permute(1, 0, 2)
        pointers = torch.cat(pointers, 1)
        return (outputs, pointers), hidden


class PointerNet(nn.Module):
    def __init__(self, embedding_dim, hidden_dim, lstm_layers, dropout, bidir=False):
        super(PointerNet, self).__init__()
        self.embedding_dim = embedding_dim
        self.bidir = bidir
        self.embedding = nn.Linear(2, embedding_dim)
        self.encoder = Encoder(embedding_dim, hidden_dim, lstm_layers, dropout, bidir)
        self.decoder = Decoder(embedding_dim, hidden_dim)
        self.decoder_input0 = Parameter(torch.FloatTensor(embedding_dim), requires_grad=False)
        nn.init.uniform_(self.decoder_input0, -1, 1)

    def forward(self, inputs):
        batch_size = inputs.size(0)
        input_length = inputs.size(1)
        decoder_input0 = self.decoder_input0.unsqueeze(0).expand(batch_size, -1)
        inputs = inputs.view(batch_size * input_length, -1)
        embedded_inputs = self.embedding(inputs).view(batch_size, input_length, -1)
        encoder_hidden0 = self.encoder.init_hidden(embedded_inputs)
        encoder_outputs, encoder_hidden = self.encoder(embedded_inputs, encoder_hidden0)
        decoder_hidden0 = (encoder_hidden[0][-1], encoder_hidden[1][-1])
        (outputs, pointers), decoder_hidden = self.decoder(embedded_inputs, decoder_input0,
                                                           decoder_hidden0, encoder_outputs)
        return outputs, pointers


def make_batch(batch_size=32, n=5):
    x = torch.rand(batch_size, n)
    points = torch.stack([x, torch.arange(n).float().expand(batch_size, n) / n], 2)
    return points, torch.argsort(x, dim=1)


model = PointerNet(16, 32, 1, 0.0)
CCE = torch.nn.CrossEntropyLoss()
model_optim = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=1e-2)


def train_step(train_batch, target_batch):
    o, p = model(train_batch)
    o = o.contiguous().view(-1, o.size()[-1])
    target_batch = target_batch.view(-1)
    loss = CCE(o, target_batch)
    model_optim.zero_grad()
    loss.backward()
    model_optim.step()
    return loss, p


losses = []
for i_batch in range(120):
    train_batch, target_batch = make_batch()
    loss, p = train_step(train_batch, target_batch)
    losses.append(loss.item())
    if i_batch % 30 == 29:
        acc = (p == target_batch).all(1).float().mean().item()
        print(f"batch {i_batch + 1} loss {sum(losses[-30:]) / 30:.5f} exact-sort acc {acc:.4f}")

with torch.no_grad():
    x, t = make_batch(64)
    _, p = model(x)
print("test exact-sort acc", round((p == t).all(1).float().mean().item(), 4),
      "position acc", round((p == t).float().mean().item(), 4))
print("example", [round(v, 3) for v in x[0, :, 0].tolist()], p[0].tolist(), t[0].tolist())

train_batch, target_batch = make_batch()
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(model_optim.state_dict())
loss_c, p_c = torch.compile(train_step)(train_batch, target_batch)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
model_optim.load_state_dict(opt_state)
loss_e, p_e = train_step(train_batch, target_batch)
print("compiled loss", round(loss_c.item(), 5))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-5), torch.equal(p_c, p_e),
      all(torch.allclose(after_c[k], v, atol=1e-5) for k, v in model.state_dict().items()))
