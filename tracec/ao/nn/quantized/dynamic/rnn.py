"""``torch.ao.nn.quantized.dynamic.LSTM``: an LSTM whose matrix products are
``quantized::linear_dynamic`` (int8 weights per tensor, activations
quantized per call), computed as PyTorch's CPU kernel does: per layer and
direction, the input projection once over the whole sequence (one range
for all its steps), then per step the hidden projection plus it, and the
float gates ``c = f * c + i * g``, ``h = o * tanh(c)``.

Invariant: the integer parts match PyTorch exactly (``linear_dynamic``);
the gates' sigmoid and tanh are NumPy's, within an ulp of PyTorch's.
Inference only (outputs never require grad); no PackedSequence input.
"""
from __future__ import annotations

from tracec import dtypes as dt
from tracec import functions as F
from tracec.ao._qparams import qint8
from tracec.ao.nn.quantized.dynamic.linear import linear_dynamic, quantize_weight
from tracec.creation import zeros
from tracec.graph import no_grad
from tracec.nn import Module
from tracec.nn.modules.rnn import RNNBase
from tracec.shape_ops import cat, stack

__all__ = ["LSTM"]


class LSTM(Module):
    """Made from a float ``nn.LSTM`` by ``from_float`` (``quantize_dynamic``)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, dtype=qint8):
        super().__init__()
        if dtype is not qint8:
            raise NotImplementedError("quantize_dynamic: tracec's dynamic LSTM is qint8 only")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.dtype = bidirectional, dtype
        self.proj_size = 0

    def _get_name(self) -> str:
        return "DynamicQuantizedLSTM"

    extra_repr = RNNBase.extra_repr      # nn.LSTM's: the same text

    @classmethod
    def from_float(cls, mod, use_precomputed_fake_quant: bool = False, dtype=qint8):
        if not mod.bias:
            raise AssertionError("mod.bias must be True")   # (PyTorch's check)
        if getattr(mod, "proj_size", 0):
            raise NotImplementedError("quantize_dynamic: LSTM with proj_size is not supported")
        q = cls(mod.input_size, mod.hidden_size, mod.num_layers, mod.bias, mod.batch_first,
                mod.dropout, mod.bidirectional, dtype)
        with no_grad():
            for layer in range(mod.num_layers):
                for suffix in ("", "_reverse") if mod.bidirectional else ("",):
                    for kind in ("ih", "hh"):
                        name = f"_l{layer}{suffix}"
                        w = getattr(mod, f"weight_{kind}_l{layer}{suffix}").detach()
                        wq, s, z = quantize_weight(w.to(dt.float32))
                        q.register_buffer(f"weight_{kind}{name}_q", wq)
                        q.register_buffer(f"weight_{kind}{name}_scale", s)
                        q.register_buffer(f"weight_{kind}{name}_zero_point", z)
                        b = getattr(mod, f"bias_{kind}_l{layer}{suffix}", None) if mod.bias \
                            else None
                        q.register_buffer(f"bias_{kind}{name}",
                                          None if b is None else b.detach().clone())
        return q

    def _linear(self, x, kind: str, name: str):
        return linear_dynamic(x, getattr(self, f"weight_{kind}{name}_q"),
                              getattr(self, f"weight_{kind}{name}_scale"),
                              getattr(self, f"weight_{kind}{name}_zero_point"),
                              getattr(self, f"bias_{kind}{name}"))

    def forward(self, input, hx=None):
        if not hasattr(input, "ndim"):
            raise NotImplementedError("tracec's dynamic quantized LSTM takes a tensor "
                                      "(no PackedSequence)")
        with no_grad():
            return self._forward(input, hx)

    def _forward(self, input, hx):
        if input.ndim != 3:
            raise RuntimeError(f"input must have 3 dimensions, got {input.ndim}")
        x = input.to(dt.float32)
        if self.batch_first:
            x = x.transpose(0, 1)
        steps, batch = x.shape[0], x.shape[1]
        dirs = 2 if self.bidirectional else 1
        if hx is None:
            h0 = zeros(self.num_layers * dirs, batch, self.hidden_size)
            c0 = zeros(self.num_layers * dirs, batch, self.hidden_size)
        else:
            h0, c0 = hx
        hn, cn = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                name = f"_l{layer}{'_reverse' if d else ''}"
                xw = self._linear(x, "ih", name)         # the whole sequence at once
                h, c = h0[layer * dirs + d], c0[layer * dirs + d]
                ys = [None] * steps
                for t in (reversed(range(steps)) if d else range(steps)):
                    gates = self._linear(h, "hh", name) + xw[t]
                    i, f, g, o = gates.chunk(4, 1)
                    c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
                    h = F.sigmoid(o) * F.tanh(c)
                    ys[t] = h
                outs.append(stack(ys))
                hn.append(h)
                cn.append(c)
            x = cat(outs, 2) if dirs == 2 else outs[0]
        out = x.transpose(0, 1) if self.batch_first else x
        return out, (stack(hn), stack(cn))
