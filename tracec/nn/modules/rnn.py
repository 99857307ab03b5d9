"""Recurrent layers: ``RNN``, ``LSTM``, ``GRU`` and their single-step cells
``RNNCell``, ``LSTMCell``, ``GRUCell``, with PyTorch's constructor arguments,
parameter names, shapes, registration order (so ``state_dict()`` keys and
``parameters()`` order match torch's and a torch state dict loads), init,
shape checks and error messages.

A layer computes the input projection ``x @ W_ih^T + b`` of all time steps
with one matmul per layer and direction; the recurrence over time is then
one ``rnn_scan`` primitive (``tracec.ops.recurrent``: its NumPy definition
runs eagerly, its VJP ``rnn_scan_grad`` is the backward, eager and compiled,
and the cpu backend lowers it to a native loop), so a compiled step has one
op per layer and direction whatever the sequence length, and a symbolic
length needs no retrace.  Packed sequences, ``proj_size > 0`` and operands
of mixed or half precision keep a Python loop over the steps (composites of
tensor ops, results assembled with one ``stack``); so do the cells.

Gate layouts are torch's: LSTM rows ``i, f, g, o``; GRU rows ``r, z, n``
with ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``.  Where the math allows
it (RNN, LSTM) ``b_hh`` is folded into the input projection, which saves an
add per step; GRU keeps ``b_hn`` inside the reset gate's product.
"""
from __future__ import annotations

import math
import numbers
import warnings

from tracec import aten_report
from tracec import creation
from tracec import dtypes
from tracec import functions as TF
from tracec import shape_ops as S
from tracec.nn import functional as F
from tracec.nn import init
from tracec.nn.modules.linear import _empty
from tracec.nn.modules.module import Module
from tracec.nn.parameter import Parameter
from tracec.nn.utils.rnn import PackedSequence, batch_size_list
from tracec.ops import elementwise as ew, movement, recurrent

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


# --- the math shared by layers and cells --------------------------------------------------

def _input_projection(mode, x, w_ih, b_ih, b_hh):
    """``x @ W_ih^T + b_ih`` (``+ b_hh`` where it can be folded in) over the
    last dim of ``x``; leading dims are flattened into one matmul."""
    lead = tuple(x.shape[:-1])
    y = TF.matmul(S.reshape(x, (-1, x.shape[-1])), S.t(w_ih))
    if b_ih is not None:
        y = TF.add(y, TF.add(b_ih, b_hh) if mode != "GRU" else b_ih)
    return S.reshape(y, lead + (y.shape[-1],))


def _step(mode, gi, state, w_hh_t, b_hh, w_hr_t):
    """One time step from the input projection ``gi`` ``[N, G]`` and the
    state (``h``, or ``(h, c)`` for LSTM); returns the new state."""
    if mode == "LSTM":
        h, c = state
        gates = TF.add(gi, TF.matmul(h, w_hh_t))
        i, f, g, o = S.chunk(gates, 4, -1)
        c = TF.add(TF.mul(TF.sigmoid(f), c), TF.mul(TF.sigmoid(i), TF.tanh(g)))
        h = TF.mul(TF.sigmoid(o), TF.tanh(c))
        if w_hr_t is not None:
            h = TF.matmul(h, w_hr_t)
        return h, c
    if mode == "GRU":
        gh = TF.matmul(state, w_hh_t)
        if b_hh is not None:
            gh = TF.add(gh, b_hh)
        xr, xz, xn = S.chunk(gi, 3, -1)
        hr, hz, hn = S.chunk(gh, 3, -1)
        r = TF.sigmoid(TF.add(xr, hr))
        z = TF.sigmoid(TF.add(xz, hz))
        n = TF.tanh(TF.add(xn, TF.mul(r, hn)))
        # (1 - z) * n + z * h, written with one multiply
        return TF.add(n, TF.mul(z, TF.sub(state, n)))
    pre = TF.add(gi, TF.matmul(state, w_hh_t))
    return TF.tanh(pre) if mode == "RNN_TANH" else TF.relu(pre)


def _scan(mode, proj, state, w_hh, b_hh, reverse):
    """One direction of one layer as one ``rnn_scan`` primitive (any number
    of steps, symbolic included, in one op); returns the outputs ``[T, N, H]``
    and the last state."""
    h0, c0 = state if mode == "LSTM" else (state, None)
    rest = (c0,) if mode == "LSTM" else (b_hh,) if mode == "GRU" and b_hh is not None else ()
    out = recurrent.rnn_scan(proj, S.t(w_hh), h0, *rest, mode=mode, reverse=reverse)
    T, N, H = proj.shape[0], proj.shape[1], h0.shape[1]
    outs = movement.slice_(out, (1, 0, 0), (T + 1, N, H), (1, 1, 1))
    # The final state: row 0 of the packed result, copied (a cast to its own
    # dtype, which the compiled graph drops) so that eagerly h_n and c_n do
    # not share storage with each other and the scan's buffer, as torch's.
    h = ew.cast(S.reshape(movement.slice_(out, (0, 0, 0), (1, N, H), (1, 1, 1)), (N, H)),
                out.dtype)
    if mode != "LSTM":
        return outs, h
    c = ew.cast(S.reshape(movement.slice_(out, (0, 0, H), (1, N, 2 * H), (1, 1, 1)), (N, H)),
                out.dtype)
    return outs, (h, c)


def _scan_applies(proj, state, w_hh, b_hh) -> bool:
    """Whether ``rnn_scan`` runs this direction: every operand of one dtype,
    float32 or float64 (the cpu backend's scan; mixed or half precision, as
    under autocast, keeps the step loop and its per-op promotion), and a
    backend with a scan kernel if a compiled function is being recorded."""
    if not recurrent.scans_enabled():
        return False
    values = [proj, w_hh, *(state if isinstance(state, tuple) else (state,))]
    if b_hh is not None:
        values.append(b_hh)
    d = proj.dtype
    return d in (dtypes.float32, dtypes.float64) and all(v.dtype is d for v in values)


def _direction(mode, proj, state, w_hh, b_hh, w_hr, reverse):
    """Run one direction of one layer over the projections ``proj``
    ``[T, N, G]``; returns the outputs ``[T, N, H_out]`` (in time order) and
    the last state."""
    if w_hr is None and _scan_applies(proj, state, w_hh, b_hh):
        return _scan(mode, proj, state, w_hh, b_hh, reverse)
    gis = S.unbind(proj, 0)
    w_hh_t = S.t(w_hh)
    w_hr_t = None if w_hr is None else S.t(w_hr)
    outs = [None] * len(gis)
    for t in (range(len(gis) - 1, -1, -1) if reverse else range(len(gis))):
        state = _step(mode, gis[t], state, w_hh_t, b_hh, w_hr_t)
        outs[t] = state[0] if mode == "LSTM" else state
    return S.stack(outs, 0), state


def _rows(state, lo, hi):
    return tuple(s[lo:hi] for s in state) if isinstance(state, tuple) else state[lo:hi]


def _cat_rows(parts):
    if isinstance(parts[0], tuple):
        return tuple(S.cat(list(p), 0) for p in zip(*parts))
    return S.cat(parts, 0)


def _direction_packed(mode, gis, state, w_hh, b_hh, w_hr, reverse, sizes):
    """One direction over a packed batch: ``gis[t]`` holds the projections
    of the ``sizes[t]`` sequences still running at step ``t`` (sizes are
    non-increasing).  Returns the per-step outputs and the final state,
    which for each sequence is its state after its own last step (forward)
    or after step 0 (reverse), as PyTorch's packed RNNs give."""
    w_hh_t = S.t(w_hh)
    w_hr_t = None if w_hr is None else S.t(w_hr)
    outs = [None] * len(gis)
    if reverse:
        h0, cur = state, sizes[-1]
        state = _rows(h0, 0, cur)
        for t in range(len(gis) - 1, -1, -1):
            if sizes[t] > cur:  # sequences whose last step is t start here from h0
                state = _cat_rows([state, _rows(h0, cur, sizes[t])])
                cur = sizes[t]
            state = _step(mode, gis[t], state, w_hh_t, b_hh, w_hr_t)
            outs[t] = state[0] if mode == "LSTM" else state
        return outs, state
    finished = []  # final states of sequences that ended, latest-ending first
    cur = sizes[0]
    for t in range(len(gis)):
        if sizes[t] < cur:
            finished.append(_rows(state, sizes[t], cur))
            state, cur = _rows(state, 0, sizes[t]), sizes[t]
        state = _step(mode, gis[t], state, w_hh_t, b_hh, w_hr_t)
        outs[t] = state[0] if mode == "LSTM" else state
    return outs, (_cat_rows([state] + finished[::-1]) if finished else state)


# --- multi-layer sequence modules ------------------------------------------------------------

def _mini_batch(rnn, input, batch_sizes) -> int:
    if batch_sizes is not None:
        return int(batch_sizes[0])
    return input.shape[0] if rnn.batch_first else input.shape[1]


def _permute_hidden(hx, permutation):
    """``hx`` (a tensor or an LSTM's ``(h, c)``) with its batch dim reordered."""
    if permutation is None:
        return hx
    if isinstance(hx, tuple):
        return tuple(h.index_select(1, permutation) for h in hx)
    return hx.index_select(1, permutation)


# --- the ATen ops PyTorch's CPU kernels run (tracec.aten_report) ----------------------------

def _linear_call(shape, contiguous, w, bias, x_grad):
    """``at::linear`` of an input of ``shape`` with weight ``w``."""
    out_f = w.shape[0]
    if bias and (len(shape) == 2 or contiguous):
        rows = math.prod(shape[:-1])
        return [aten_report.AtenCall("addmm", ((rows, shape[-1]), (shape[-1], out_f)),
                                     (x_grad, w.requires_grad))]
    return aten_report.matmul_calls(shape, (w.shape[1], w.shape[0]), x_grad, w.requires_grad,
                                    None if contiguous else (0,) * len(shape))


def _rnn_calls(result, self, input, h0, c0=None, sizes=None):
    """PyTorch's CPU recurrence: a float32 LSTM without projections runs
    oneDNN's layer (no flop formula: nothing); otherwise, per layer and
    direction, ``linear`` over the whole input sequence, then per step
    ``linear(h, W_hh, b_hh)`` (and LSTM's ``h @ W_hr^T``)."""
    if (self.mode == "LSTM" and self.proj_size == 0 and sizes is None
            and input.dtype in (dtypes.float32, dtypes.bfloat16) and input.numel()):
        return []
    if sizes is None:
        T, N = (input.shape[1], input.shape[0]) if self.batch_first else input.shape[:2]
        steps = [N] * T
        shape = (T, N, input.shape[-1])
        contiguous = not self.batch_first and input.is_contiguous() or T == 1 or N == 1
    else:
        steps, shape, contiguous = list(sizes), tuple(input.shape), True
    params_grad = any(p.requires_grad for p in self.parameters())
    x_grad = input.requires_grad
    dirs = 2 if self.bidirectional else 1
    h_out = self.proj_size if self.proj_size > 0 else self.hidden_size
    calls = []
    for layer in range(self.num_layers):
        for direction in range(dirs):
            w = self.all_weights[layer * dirs + direction]
            calls += _linear_call(shape, contiguous, w[0], self.bias, x_grad)
            h_grad = h0.requires_grad or (c0 is not None and c0.requires_grad)
            for n in (reversed(steps) if direction == 1 else steps):
                w_hh = w[1]
                calls.append(aten_report.AtenCall(
                    "addmm" if self.bias else "mm", ((n, h_out), (h_out, w_hh.shape[0])),
                    (h_grad, w_hh.requires_grad)))
                if self.proj_size > 0:
                    calls.append(aten_report.AtenCall(
                        "mm", ((n, self.hidden_size), (self.hidden_size, self.proj_size)),
                        (h_grad or params_grad or x_grad, w[-1].requires_grad)))
                h_grad = h_grad or params_grad or x_grad
        x_grad = x_grad or params_grad
        shape = shape[:-1] + (h_out * dirs,)
        contiguous = True
    return calls


def _cell_calls(out, self, mode, input, hx, n_states):
    """A cell: ``linear(input, W_ih, b_ih)`` and ``linear(hx, W_hh, b_hh)``
    on the 2-D (batched) input and state."""
    n = input.shape[0] if input.dim() == 2 else 1
    states = () if hx is None else (tuple(hx) if n_states > 1 else (hx,))
    h_grad = bool(states) and states[0].requires_grad
    name = "addmm" if self.bias else "mm"
    return [aten_report.AtenCall(name, ((n, self.input_size), (self.input_size,
                                                                self.weight_ih.shape[0])),
                                 (input.requires_grad, self.weight_ih.requires_grad)),
            aten_report.AtenCall(name, ((n, self.hidden_size), (self.hidden_size,
                                                                 self.weight_hh.shape[0])),
                                 (h_grad, self.weight_hh.requires_grad))]


class RNNBase(Module):
    """What ``RNN``, ``LSTM`` and ``GRU`` share: parameters, checks, the layer
    loop.  ``mode`` is ``'LSTM'``, ``'GRU'``, ``'RNN_TANH'`` or ``'RNN_RELU'``."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        if (not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1
                or isinstance(dropout, bool)):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
        for name, value, kind in (("bias", bias, bool), ("batch_first", batch_first, bool),
                                  ("input_size", input_size, int)):
            if not isinstance(value, kind):
                raise TypeError(f"{name} should be of type {kind.__name__}, got: "
                                f"{type(value).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size = _GATES[mode] * hidden_size
        real_hidden_size = proj_size if proj_size > 0 else hidden_size

        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden_size * num_directions
                shapes = [("weight_ih", (gate_size, layer_input)),
                          ("weight_hh", (gate_size, real_hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes += [("weight_hr", (proj_size, hidden_size))]
                suffix = "_reverse" if direction == 1 else ""
                names = []
                for stem, shape in shapes:
                    name = f"{stem}_l{layer}{suffix}"
                    setattr(self, name, Parameter(_empty(shape, device, dtype)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, n, None) for n in self._flat_weights_names]

    def __getstate__(self):
        # PyTorch's RNNBase keeps the weights' list in its __dict__ and its
        # __setstate__ reads it: a pickle of this layer carries it, so that
        # PyTorch loads it (torch.save(model) under tracec run).
        state = self.__dict__.copy()
        state["_flat_weights"] = self._flat_weights
        return state

    def __setstate__(self, state):
        state = dict(state)
        state.pop("_flat_weights", None)      # (the property above computes it)
        state.pop("_flat_weight_refs", None)
        super().__setstate__(state)

    @property
    def all_weights(self) -> list:
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """A no-op (as PyTorch's off cuDNN): the weights are used as they are."""

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    # --- checks (PyTorch's wording) ----------------------------------------------------

    def check_input(self, input, batch_sizes=None) -> None:
        w = self._flat_weights[0]
        if input.dtype != w.dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({w.dtype}). Convert input: input.to({w.dtype}), or convert "
                             f"model: model.to({input.dtype})")
        want = 2 if batch_sizes is not None else 3
        if input.dim() != want:
            raise RuntimeError(f"input must have {want} dimensions, got {input.dim()}")
        if self.input_size != input.shape[-1]:
            raise RuntimeError("input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")

    def get_expected_hidden_size(self, input, batch_sizes=None) -> tuple:
        mini_batch = _mini_batch(self, input, batch_sizes)
        num_directions = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, mini_batch, size)

    def check_hidden_size(self, hx, expected_hidden_size,
                          msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(hx.shape) != tuple(expected_hidden_size):
            raise RuntimeError(msg.format(tuple(expected_hidden_size), list(hx.shape)))

    def check_forward_args(self, input, hidden, batch_sizes=None) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    # --- forward ----------------------------------------------------------------------

    def _batched_hx(self, input, hx):
        """Unbatched 2-D input: add the batch dim to input and to ``hx``
        (torch's checks, RNN and GRU; LSTM overrides)."""
        # The checks here, in LSTM.forward, check_input and the cells call
        # dim(), as torch's do: an LSTM-style (h, c) tuple given to a GRU, or
        # a numpy array given as input, must fail with torch's AttributeError
        # naming 'dim' (numpy arrays have ndim and went on to other errors).
        if input.dim() not in (2, 3):
            # torch's two wordings differ by one word
            raise ValueError((f"RNN: Expected input to be 2D or 3D, got {input.dim()}D tensor "
                              "instead") if self.mode != "GRU" else
                             f"GRU: Expected input to be 2D or 3D, got {input.dim()}D instead")
        batched = input.dim() == 3
        if not batched:
            input = S.unsqueeze(input, 0 if self.batch_first else 1)
            if hx is not None:
                if hx.dim() != 2:
                    raise RuntimeError("For unbatched 2-D input, hx should also be 2-D but got "
                                       f"{hx.dim()}-D tensor")
                hx = S.unsqueeze(hx, 1)
        elif hx is not None and hx.dim() != 3:
            raise RuntimeError("For batched 3-D input, hx should also be 3-D but got "
                               f"{hx.dim()}-D tensor")
        if hx is None:
            hx = self._zeros(input, self.hidden_size)
        self.check_forward_args(input, hx)
        return input, hx, batched

    def _zeros(self, input, size, batch=None):
        if batch is None:
            batch = input.shape[0] if self.batch_first else input.shape[1]
        num_directions = 2 if self.bidirectional else 1
        return creation.zeros(self.num_layers * num_directions, batch, size, dtype=input.dtype,
                              device=input.device)

    @aten_report.reports(_rnn_calls)
    def _run(self, input, h0, c0=None, sizes=None):
        """The layer stack over time-major or batch-first 3-D ``input`` (or,
        with ``sizes``, a packed ``data`` ``[N, F]`` whose steps have those
        batch sizes); returns the output and the stacked final ``h`` (and ``c``)."""
        x = S.transpose(input, 0, 1) if self.batch_first and sizes is None else input
        if sizes is None and x.shape[0] == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        num_directions = 2 if self.bidirectional else 1
        h0s = S.unbind(h0, 0)
        c0s = None if c0 is None else S.unbind(c0, 0)
        hs, cs = [], []
        weights = self.all_weights
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:
                x = F.dropout(x, self.dropout, True)
            outs = []
            for direction in range(num_directions):
                k = layer * num_directions + direction
                w = weights[k]
                w_ih, w_hh = w[0], w[1]
                b_ih, b_hh = (w[2], w[3]) if self.bias else (None, None)
                w_hr = w[-1] if self.proj_size > 0 else None
                proj = _input_projection(self.mode, x, w_ih, b_ih, b_hh)
                state = h0s[k] if c0s is None else (h0s[k], c0s[k])
                if sizes is None:
                    out, state = _direction(self.mode, proj, state, w_hh, b_hh, w_hr,
                                            reverse=direction == 1)
                else:
                    steps, state = _direction_packed(self.mode, S.split(proj, sizes, 0), state,
                                                     w_hh, b_hh, w_hr, direction == 1, sizes)
                    out = S.cat(steps, 0)
                outs.append(out)
                if c0s is None:
                    hs.append(state)
                else:
                    hs.append(state[0])
                    cs.append(state[1])
            x = outs[0] if num_directions == 1 else S.cat(outs, -1)
        out = self._name_output(x) if sizes is None else x
        return out, S.stack(hs, 0), (S.stack(cs, 0) if cs else None)

    def _name_output(self, x):
        """The returned output of the time-major output ``x``, its
        ``grad_fn`` named as PyTorch's CPU kernels name them (programs print
        ``lstm_out``): one direction's output is the oneDNN layer's for a
        float32 LSTM without projections (``MkldnnRnnLayerBackward0``), else
        the stacked steps' (``StackBackward0``); two directions' is a
        ``CatBackward0``.  Batch-first, LSTM transposes its result
        (``TransposeBackward0``), RNN and GRU transpose it in place
        (``TransposeBackward1``).  Only names change."""
        if not self.bidirectional:
            mkldnn = self.mode == "LSTM" and self.proj_size == 0 and x.dtype is dtypes.float32
            TF._named(x, "MkldnnRnnLayerBackward0" if mkldnn else "StackBackward0")
        if not self.batch_first:
            return x
        return TF._named(S.transpose(x, 0, 1),
                         "TransposeBackward0" if self.mode == "LSTM" else "TransposeBackward1")

    def _forward_packed(self, packed, hx):
        """``forward`` on a ``PackedSequence``: the output is packed like the
        input; ``hx`` and the returned state are in the caller's batch order."""
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        sizes = batch_size_list(packed)
        lstm = self.mode == "LSTM"
        if hx is None:
            real = self.proj_size if self.proj_size > 0 else self.hidden_size
            hx = self._zeros(data, real, sizes[0])
            if lstm:
                hx = (hx, self._zeros(data, self.hidden_size, sizes[0]))
        else:
            hx = _permute_hidden(tuple(hx) if lstm else hx, sorted_indices)
        self.check_forward_args(data, hx, sizes)  # Python ints: no tensor read when traced
        output, h_n, c_n = self._run(data, *(hx if lstm else (hx,)), sizes=sizes)
        hidden = (h_n, c_n) if lstm else h_n
        out = PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices)
        out._sizes = sizes
        return out, _permute_hidden(hidden, unsorted_indices)

    def _forward_one_state(self, input, hx):
        """``forward`` of RNN and GRU (one state tensor)."""
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        input, hx, batched = self._batched_hx(input, hx)
        output, h_n, _ = self._run(input, hx)
        return self._unbatch(output, batched), (h_n if batched else S.squeeze(h_n, 1))

    def _unbatch(self, output, batched):
        return output if batched else S.squeeze(output, 0 if self.batch_first else 1)


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``
    (``nonlinearity='relu'`` for ReLU)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.__dict__["nonlinearity"] = args[3]
            args = args[:3] + args[4:]
        else:
            self.__dict__["nonlinearity"] = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' "
                             "or 'relu'.")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward_one_state(input, hx)


class GRU(RNNBase):
    """Gated recurrent unit, gates ``r, z, n`` in torch's row order."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        return self._forward_one_state(input, hx)


class LSTM(RNNBase):
    """Long short-term memory, gates ``i, f, g, o``; with ``proj_size > 0``
    the hidden state is projected by ``weight_hr`` (``h_t = W_hr h_t``)."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes=None) -> tuple:
        mini_batch = _mini_batch(self, input, batch_sizes)
        num_directions = 2 if self.bidirectional else 1
        return (self.num_layers * num_directions, mini_batch, self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes=None) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if input.dim() not in (2, 3):
            raise ValueError(f"LSTM: Expected input to be 2D or 3D, got {input.dim()}D instead")
        batched = input.dim() == 3
        if not batched:
            input = S.unsqueeze(input, 0 if self.batch_first else 1)
        if hx is None:
            real = self.proj_size if self.proj_size > 0 else self.hidden_size
            hx = (self._zeros(input, real), self._zeros(input, self.hidden_size))
        else:
            want = 3 if batched else 2
            if hx[0].dim() != want or hx[1].dim() != want:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx and cx should also be {want}-D but "
                                   f"got ({hx[0].dim()}-D, {hx[1].dim()}-D) tensors")
            if not batched:
                hx = (S.unsqueeze(hx[0], 1), S.unsqueeze(hx[1], 1))
        self.check_forward_args(input, hx)
        output, h_n, c_n = self._run(input, hx[0], hx[1])
        if not batched:
            h_n, c_n = S.squeeze(h_n, 1), S.squeeze(c_n, 1)
        return self._unbatch(output, batched), (h_n, c_n)


# --- single-step cells -----------------------------------------------------------------

class RNNCellBase(Module):
    """What the cells share: ``weight_ih``, ``weight_hh``, ``bias_ih``,
    ``bias_hh`` with ``num_chunks`` gates, uniform(+-1/sqrt(hidden)) init."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(_empty((num_chunks * hidden_size, input_size), device, dtype))
        self.weight_hh = Parameter(_empty((num_chunks * hidden_size, hidden_size), device,
                                          dtype))
        if bias:
            self.bias_ih = Parameter(_empty((num_chunks * hidden_size,), device, dtype))
            self.bias_hh = Parameter(_empty((num_chunks * hidden_size,), device, dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, input, hx, n_states: int):
        """Checks (torch's wording) and batching: returns the 2-D input, the
        2-D states (zeros when ``hx`` is None) and whether input was batched."""
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        states = None if hx is None else (tuple(hx) if n_states > 1 else (hx,))
        if states is not None:
            for idx, value in enumerate(states):
                if value.dim() not in (1, 2):
                    what = f"hx[{idx}]" if n_states > 1 else "hidden"
                    raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got "
                                     f"{value.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = S.unsqueeze(input, 0)
        if states is None:
            zeros = creation.zeros(input.shape[0], self.hidden_size, dtype=input.dtype,
                                   device=input.device)
            states = (zeros,) * n_states
        elif not batched:
            states = tuple(S.unsqueeze(s, 0) for s in states)
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} "
                               f"expected {self.input_size}")
        for k, s in enumerate(states):
            if input.shape[0] != s.shape[0]:
                raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match "
                                   f"hidden{k} batch size {s.shape[0]}")
            if s.shape[1] != self.hidden_size:
                raise RuntimeError(f"hidden{k} has inconsistent hidden_size: got {s.shape[1]}, "
                                   f"expected {self.hidden_size}")
        return input, states, batched

    @aten_report.reports(_cell_calls)
    def _cell(self, mode, input, hx, n_states):
        input, states, batched = self._prepare(input, hx, n_states)
        gi = _input_projection(mode, input, self.weight_ih, self.bias_ih, self.bias_hh)
        out = _step(mode, gi, states if n_states > 1 else states[0], S.t(self.weight_hh),
                    self.bias_hh, None)
        if batched:
            return out
        return tuple(S.squeeze(o, 0) for o in out) if n_states > 1 else S.squeeze(out, 0)


class RNNCell(RNNCellBase):
    """``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or ReLU)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device,
                         dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        mode = "RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU"
        return self._cell(mode, input, hx, 1)


class LSTMCell(RNNCellBase):
    """One LSTM step; returns ``(h', c')``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device,
                         dtype=dtype)

    def forward(self, input, hx=None):
        return self._cell("LSTM", input, hx, 2)


class GRUCell(RNNCellBase):
    """One GRU step; returns ``h'``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device,
                         dtype=dtype)

    def forward(self, input, hx=None):
        return self._cell("GRU", input, hx, 1)
