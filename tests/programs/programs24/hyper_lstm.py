# labmlai/annotated_deep_learning_paper_implementations: labml_nn/lstm
# (LSTMCell with layer_norm: chunked gates each through a LayerNorm or
# nn.Identity, LayerNorm on the cell), labml_nn/hypernetworks/hyper_lstm.py
# (HyperLSTMCell: a layer-normed LSTMCell hyper network whose output scales
# the rows of the main LSTM's weights, d_h * einsum('ij,bj->bi', w_h[i], h),
# nn.ParameterList weights initialised to zeros, per-gate LayerNorms;
# HyperLSTM over time and layers with x.new_zeros states and torch.unbind /
# torch.stack of the state), and hypernetworks/experiment.py's
# AutoregressiveModel (Embedding -> HyperLSTM -> Linear) trained on
# characters; labml_helpers' Module (``__call__`` as ``forward``) included.
# Changes for a CPU test: the labml NLPAutoRegressionConfigs trainer replaced
# by a plain loop (Adam, cross-entropy over the flattened logits, the state
# carried between batches detached), a short inline text, d_model 16,
# hyper_size 8, n_z 4, n_layers 2, seq_len 6, batch 3, 3 steps; a zero-state
# vs carried-state check; and one training step under torch.compile checked
# against eager.
import copy
from typing import Optional, Tuple

import torch
from torch import nn


class Module(torch.nn.Module):
    # labml_helpers.module.Module
    def __init_subclass__(cls, **kwargs):
        if cls.__dict__.get('__call__', None) is None:
            return

        setattr(cls, 'forward', cls.__dict__['__call__'])
        delattr(cls, '__call__')


class LSTMCell(Module):
    def __init__(self, input_size: int, hidden_size: int, layer_norm: bool = False):
        super().__init__()

        self.hidden_lin = nn.Linear(hidden_size, 4 * hidden_size)
        self.input_lin = nn.Linear(input_size, 4 * hidden_size, bias=False)

        if layer_norm:
            self.layer_norm = nn.ModuleList([nn.LayerNorm(hidden_size) for _ in range(4)])
            self.layer_norm_c = nn.LayerNorm(hidden_size)
        else:
            self.layer_norm = nn.ModuleList([nn.Identity() for _ in range(4)])
            self.layer_norm_c = nn.Identity()

    def __call__(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        ifgo = self.hidden_lin(h) + self.input_lin(x)
        ifgo = ifgo.chunk(4, dim=-1)

        ifgo = [self.layer_norm[i](ifgo[i]) for i in range(4)]

        i, f, g, o = ifgo

        c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)

        h_next = torch.sigmoid(o) * torch.tanh(self.layer_norm_c(c_next))

        return h_next, c_next


class HyperLSTMCell(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, hyper_size: int, n_z: int):
        super().__init__()

        self.hyper = LSTMCell(hidden_size + input_size, hyper_size, layer_norm=True)

        self.z_h = nn.Linear(hyper_size, 4 * n_z)
        self.z_x = nn.Linear(hyper_size, 4 * n_z)
        self.z_b = nn.Linear(hyper_size, 4 * n_z, bias=False)

        d_h = [nn.Linear(n_z, hidden_size, bias=False) for _ in range(4)]
        self.d_h = nn.ModuleList(d_h)
        d_x = [nn.Linear(n_z, hidden_size, bias=False) for _ in range(4)]
        self.d_x = nn.ModuleList(d_x)
        d_b = [nn.Linear(n_z, hidden_size) for _ in range(4)]
        self.d_b = nn.ModuleList(d_b)

        self.w_h = nn.ParameterList([nn.Parameter(torch.zeros(hidden_size, hidden_size)) for _ in range(4)])
        self.w_x = nn.ParameterList([nn.Parameter(torch.zeros(hidden_size, input_size)) for _ in range(4)])

        self.layer_norm = nn.ModuleList([nn.LayerNorm(hidden_size) for _ in range(4)])
        self.layer_norm_c = nn.LayerNorm(hidden_size)

    def forward(self, x: torch.Tensor,
                h: torch.Tensor, c: torch.Tensor,
                h_hat: torch.Tensor, c_hat: torch.Tensor):
        x_hat = torch.cat((h, x), dim=-1)
        h_hat, c_hat = self.hyper(x_hat, h_hat, c_hat)

        z_h = self.z_h(h_hat).chunk(4, dim=-1)
        z_x = self.z_x(h_hat).chunk(4, dim=-1)
        z_b = self.z_b(h_hat).chunk(4, dim=-1)

        ifgo = []
        for i in range(4):
            d_h = self.d_h[i](z_h[i])
            d_x = self.d_x[i](z_x[i])

            y = d_h * torch.einsum('ij,bj->bi', self.w_h[i], h) + \
                d_x * torch.einsum('ij,bj->bi', self.w_x[i], x) + \
                self.d_b[i](z_b[i])

            ifgo.append(self.layer_norm[i](y))

        i, f, g, o = ifgo

        c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)

        h_next = torch.sigmoid(o) * torch.tanh(self.layer_norm_c(c_next))

        return h_next, c_next, h_hat, c_hat


class HyperLSTM(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, hyper_size: int, n_z: int, n_layers: int):
        super().__init__()

        self.n_layers = n_layers
        self.hidden_size = hidden_size
        self.hyper_size = hyper_size

        self.cells = nn.ModuleList([HyperLSTMCell(input_size, hidden_size, hyper_size, n_z)] +
                                   [HyperLSTMCell(hidden_size, hidden_size, hyper_size, n_z) for _ in
                                    range(n_layers - 1)])

    def forward(self, x: torch.Tensor,
                state: Optional[Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = None):
        n_steps, batch_size = x.shape[:2]

        if state is None:
            h = [x.new_zeros(batch_size, self.hidden_size) for _ in range(self.n_layers)]
            c = [x.new_zeros(batch_size, self.hidden_size) for _ in range(self.n_layers)]
            h_hat = [x.new_zeros(batch_size, self.hyper_size) for _ in range(self.n_layers)]
            c_hat = [x.new_zeros(batch_size, self.hyper_size) for _ in range(self.n_layers)]
        #
        else:
            (h, c, h_hat, c_hat) = state
            h, c = list(torch.unbind(h)), list(torch.unbind(c))
            h_hat, c_hat = list(torch.unbind(h_hat)), list(torch.unbind(c_hat))

        out = []
        for t in range(n_steps):
            inp = x[t]
            for layer in range(self.n_layers):
                h[layer], c[layer], h_hat[layer], c_hat[layer] = \
                    self.cells[layer](inp, h[layer], c[layer], h_hat[layer], c_hat[layer])
                inp = h[layer]
            out.append(h[-1])

        out = torch.stack(out)
        h = torch.stack(h)
        c = torch.stack(c)
        h_hat = torch.stack(h_hat)
        c_hat = torch.stack(c_hat)

        #
        return out, (h, c, h_hat, c_hat)


class AutoregressiveModel(Module):
    # hypernetworks/experiment.py
    def __init__(self, n_vocab: int, d_model: int, rnn_model: nn.Module):
        super().__init__()
        self.src_embed = nn.Embedding(n_vocab, d_model)
        self.lstm = rnn_model
        self.generator = nn.Linear(d_model, n_vocab)

    def __call__(self, x: torch.Tensor):
        x = self.src_embed(x)
        res, state = self.lstm(x)
        return self.generator(res), state


torch.manual_seed(0)
text = "It is a truth universally acknowledged, that a single man in possession of a good fortune must be in want of a wife."
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
seq_len, batch_size, d_model = 6, 3, 16

model = AutoregressiveModel(len(chars), d_model, HyperLSTM(d_model, d_model, 8, 4, 2))
print('parameters', sum(p.numel() for p in model.parameters()), len(list(model.parameters())))
print(model.lstm.cells[0].w_h)
optimizer = torch.optim.Adam(model.parameters(), lr=2.5e-4 * 40)
loss_func = nn.CrossEntropyLoss()


def batch(i):
    # [seq_len, batch_size] as labml's sequential text loaders give
    starts = [i * seq_len + b * 30 for b in range(batch_size)]
    x = torch.stack([data[s:s + seq_len] for s in starts], dim=1)
    y = torch.stack([data[s + 1:s + seq_len + 1] for s in starts], dim=1)
    return x, y


for step in range(3):
    x, y = batch(step)
    output, state = model(x)
    loss = loss_func(output.view(-1, output.shape[-1]), y.view(-1))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    print(f'step {step} loss {loss.item():.6f} w_h grad {model.lstm.cells[1].w_h[2].grad.abs().sum().item():.6f}')

# the state carried on: HyperLSTM takes (h, c, h_hat, c_hat) stacked per layer
with torch.no_grad():
    x, _ = batch(3)
    out0, state = model.lstm(model.src_embed(x))
    out1, state1 = model.lstm(model.src_embed(x), state)
    print('state shapes', [tuple(s.shape) for s in state1])
    print('carried differs', (out1 - out0).abs().max().item() > 0, f'{out1.sum().item():.6f}')

# compiled: one training step checked against eager
state_sd, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
x, y = batch(4)


def train_step(x, y):
    output, _ = model(x)
    loss = loss_func(output.view(-1, output.shape[-1]), y.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


loss_c = torch.compile(train_step)(x, y)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state_sd)
optimizer.load_state_dict(opt_state)
loss_e = train_step(x, y)
print('compiled == eager', torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
