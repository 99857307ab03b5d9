"""PyTorch's functional recurrent ops: ``torch.lstm``, ``torch.gru``,
``torch.rnn_tanh``, ``torch.rnn_relu`` (also ``torch._VF.*``, where code
that re-implements ``nn.LSTM.forward`` calls them) and the single steps
``lstm_cell``, ``gru_cell``, ``rnn_tanh_cell``, ``rnn_relu_cell``.

They take the layer's weights as a flat list in ``nn.LSTM``'s
``_flat_weights`` order (per layer and direction ``w_ih, w_hh[, b_ih,
b_hh][, w_hr]``) and run the same math as the modules
(``tracec.nn.modules.rnn``): ``_FlatRNN`` gives that layer loop the
attributes it reads, so there is one definition of the recurrence.

Both of torch's overloads are served: ``(input, hx, params, has_biases,
num_layers, dropout, train, bidirectional, batch_first)`` and the packed
``(data, batch_sizes, hx, params, has_biases, num_layers, dropout, train,
bidirectional)``, told apart as torch tells them: by whether the second
argument is a tensor (``batch_sizes``) or, for ``lstm``, a list/tuple (``hx``)."""
from __future__ import annotations

from tracec import shape_ops as S
from tracec.nn.modules import rnn as _rnn
from tracec.tensor import Tensor

__all__ = ["lstm", "gru", "rnn_tanh", "rnn_relu",
           "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"]


class _FlatRNN:
    """The attributes ``RNNBase._run`` reads, from a flat weight list."""

    def __init__(self, mode, params, has_biases, num_layers, dropout, train, bidirectional,
                 batch_first, proj):
        dirs = 2 if bidirectional else 1
        per = (4 if has_biases else 2) + (1 if proj else 0)
        params = list(params)
        if len(params) != per * num_layers * dirs:
            raise RuntimeError(f"{mode.lower()}: expected {per * num_layers * dirs} parameter "
                               f"tensors for {num_layers} layer(s), "
                               f"{'2' if bidirectional else '1'} direction(s) "
                               f"(has_biases={has_biases}), got {len(params)}")
        self.mode = mode
        self.all_weights = [params[k * per:(k + 1) * per] for k in range(num_layers * dirs)]
        self._params = params
        self.bias = bool(has_biases)
        self.num_layers = int(num_layers)
        self.dropout = float(dropout)
        self.training = bool(train)
        self.bidirectional = bool(bidirectional)
        self.batch_first = bool(batch_first)
        w_hh = params[1]
        self.proj_size = params[per - 1].shape[0] if proj else 0
        self.hidden_size = params[per - 1].shape[1] if proj else w_hh.shape[1]

    def parameters(self):
        return iter(self._params)

    def _name_output(self, x):
        return _rnn.RNNBase._name_output(self, x)

    def run(self, input, h0, c0=None, sizes=None):
        return _rnn.RNNBase._run(self, input, h0, c0, sizes)


def _sizes(batch_sizes) -> list:
    return [int(s) for s in batch_sizes.tolist()]


def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
         batch_first=None):
    """``torch.lstm``: returns ``(output, h_n, c_n)``."""
    if isinstance(hx, Tensor):          # packed overload: (data, batch_sizes, hx, params, ...)
        data, batch_sizes, hx = input, hx, params
        params, has_biases, num_layers, dropout, train, bidirectional = (
            has_biases, num_layers, dropout, train, bidirectional, batch_first)
        h0, c0 = hx
        rnn = _FlatRNN("LSTM", params, has_biases, num_layers, dropout, train, bidirectional,
                       False, h0.shape[-1] != c0.shape[-1])
        return rnn.run(data, h0, c0, _sizes(batch_sizes))
    h0, c0 = hx
    rnn = _FlatRNN("LSTM", params, has_biases, num_layers, dropout, train, bidirectional,
                   batch_first, h0.shape[-1] != c0.shape[-1])
    return rnn.run(input, h0, c0)


def _one_state(mode):
    def fn(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
           batch_first=None):
        if not isinstance(params, (list, tuple)):   # packed: (data, batch_sizes, hx, params, ...)
            data, batch_sizes, hx = input, hx, params
            params, has_biases, num_layers, dropout, train, bidirectional = (
                has_biases, num_layers, dropout, train, bidirectional, batch_first)
            rnn = _FlatRNN(mode, params, has_biases, num_layers, dropout, train, bidirectional,
                           False, False)
            out, h, _ = rnn.run(data, hx, None, _sizes(batch_sizes))
            return out, h
        rnn = _FlatRNN(mode, params, has_biases, num_layers, dropout, train, bidirectional,
                       batch_first, False)
        out, h, _ = rnn.run(input, hx, None)
        return out, h
    fn.__name__ = fn.__qualname__ = {"GRU": "gru", "RNN_TANH": "rnn_tanh",
                                     "RNN_RELU": "rnn_relu"}[mode]
    fn.__doc__ = f"``torch.{fn.__name__}``: returns ``(output, h_n)``."
    return fn


gru = _one_state("GRU")
rnn_tanh = _one_state("RNN_TANH")
rnn_relu = _one_state("RNN_RELU")


def _cell(mode, input, states, w_ih, w_hh, b_ih, b_hh):
    if (b_ih is None) != (b_hh is None):
        raise RuntimeError(f"{mode.lower()}_cell: b_ih and b_hh must both be given or both None")
    # torch's checks (check_rnn_cell_forward_input / _hidden), in its order;
    # size(1) of a 1-D input raises its IndexError
    if input.size(1) != w_ih.shape[1]:
        raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} "
                           f"expected {w_ih.shape[1]}")
    hidden = w_hh.shape[1]
    for k, h in enumerate(states if isinstance(states, tuple) else (states,)):
        if input.size(0) != h.size(0):
            raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{k} "
                               f"batch size {h.size(0)}")
        if h.size(1) != hidden:
            raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {h.size(1)}, "
                               f"expected {hidden}")
    gi = _rnn._input_projection(mode, input, w_ih, b_ih, b_hh)
    return _rnn._step(mode, gi, states, S.t(w_hh), b_hh, None)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.lstm_cell``: one step; ``hx`` is ``(h, c)``; returns ``(h', c')``."""
    h, c = hx
    return _cell("LSTM", input, (h, c), w_ih, w_hh, b_ih, b_hh)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.gru_cell``: one step; returns ``h'``."""
    return _cell("GRU", input, hx, w_ih, w_hh, b_ih, b_hh)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.rnn_tanh_cell``: ``tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    return _cell("RNN_TANH", input, hx, w_ih, w_hh, b_ih, b_hh)


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """``torch.rnn_relu_cell``: ``relu(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    return _cell("RNN_RELU", input, hx, w_ih, w_hh, b_ih, b_hh)
