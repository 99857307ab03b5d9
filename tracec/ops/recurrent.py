"""``rnn_scan``: one direction of one recurrent layer over every time step,
and ``rnn_scan_grad``, its reverse-time backward.

A layer's input projections ``gi`` ``[T, N, G]`` are computed for all steps
by one matmul outside; the scan runs the recurrence

    a_t = gi_t + h_{t-1} @ W          (W = W_hh^T, ``[H, G]``)

with the gate math of ``mode`` (torch's gate order):

* ``LSTM``: ``i, f, g, o``; ``c_t = f c_{t-1} + i g``, ``h_t = o tanh(c_t)``;
* ``GRU``: ``r, z, n``, ``gh = h_{t-1} @ W + b`` (``b = b_hh``, which stays
  inside the reset gate's product), ``n = tanh(gi_n + r gh_n)``,
  ``h_t = n + z (h_{t-1} - n)``;
* ``RNN_TANH`` / ``RNN_RELU``: ``h_t = tanh(a_t)`` / ``relu(a_t)``.

Operands: ``gi, w, h0`` then ``c0`` (LSTM) then ``b`` (GRU with bias).
``reverse`` runs the steps from ``T - 1`` down to ``0``.

Invariant (the packed result, one tensor ``[T + 1, N, W]``): row 0 holds the
final state (``h`` in columns ``[0, H)``, an LSTM's ``c`` in ``[H, 2H)``, the
rest zero); row ``t + 1`` holds step ``t``'s output ``h_t`` in ``[0, H)``
(time order in both directions) and the activations the backward reads:
LSTM ``[h, c, i, f, g, o]`` (W = 6H), GRU ``[h, r, z, n, gh_n]`` (5H), RNN
``[h]`` (H).  Every column is a function of the operands and the VJP honours
a cotangent on any of them.

``rnn_scan_grad(g, out, w, h0[, c0])`` runs the steps backwards; its result
``[T + 1, N, K]`` holds in row ``t + 1`` the gradients of the gate
pre-activations of step ``t`` (``gi``'s gradient; a GRU appends the gradient
of ``gh_n``: K = 4H, else K = G) and in row 0 the initial state's gradient
(``dh0`` in ``[0, H)``, LSTM ``dc0`` in ``[H, 2H)``).  ``W``'s gradient is
one GEMM over all steps in the VJP (``h_{t-1}`` stacked ``[T N, H]^T @
dgates [T N, G]``), not T small ones.  T and N may be symbolic sizes.
"""
from __future__ import annotations

import contextlib

import numpy as np

from tracec.ops.core import Primitive, ShapeError
from tracec.ops import elementwise as ew, linalg, movement, reduce

__all__ = ["MODES", "rnn_scan", "rnn_scan_grad", "out_width", "grad_width", "scans",
           "scans_enabled"]

#: Whether layers may use ``rnn_scan`` (the innermost ``scans`` context).
_SCANS = [True]


def scans_enabled() -> bool:
    """False while a function is recorded for a backend with no scan
    kernel (``tracec.compile(..., backend="cuda")``): recurrent layers then
    run their step loops (matmuls and elementwise ops, as PyTorch's CUDA
    RNNs without cuDNN do)."""
    return _SCANS[-1]


@contextlib.contextmanager
def scans(enabled: bool):
    _SCANS.append(bool(enabled))
    try:
        yield
    finally:
        _SCANS.pop()

#: gates per mode
MODES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def out_width(mode: str, H):
    """W, the packed forward result's last dim."""
    return {"LSTM": 6, "GRU": 5}.get(mode, 1) * H


def grad_width(mode: str, H):
    """K, the packed backward result's last dim."""
    return (4 if mode in ("LSTM", "GRU") else 1) * H


def _n_operands(mode, n):
    want = (4,) if mode == "LSTM" else (3, 4) if mode == "GRU" else (3,)
    if mode not in MODES or n not in want:
        raise ShapeError(f"rnn_scan: mode {mode!r} with {n} operands")


def _scan_shape(gi, w, h0, *rest, mode, reverse):
    _n_operands(mode, 3 + len(rest))
    if len(gi) != 3 or len(w) != 2 or len(h0) != 2:
        raise ShapeError(f"rnn_scan: expected gi [T, N, G], w [H, G], h0 [N, H], got "
                         f"{tuple(gi)}, {tuple(w)}, {tuple(h0)}")
    T, N, G = gi
    H = h0[1]
    if tuple(w) != (H, G) or G != MODES[mode] * H or h0[0] != N:
        raise ShapeError(f"rnn_scan {mode}: gi {tuple(gi)}, w {tuple(w)}, h0 {tuple(h0)} "
                         f"do not agree")
    for r in rest:
        want = (N, H) if mode == "LSTM" else (G,)
        if tuple(r) != want:
            raise ShapeError(f"rnn_scan {mode}: operand of shape {tuple(r)}, expected {want}")
    return (T + 1, N, out_width(mode, H))


def _same_dtype(*ds, **_):
    if any(d is not ds[0] for d in ds) or not ds[0].is_floating_point:
        raise ShapeError(f"rnn_scan: operands must share one floating dtype, got "
                         f"{', '.join(d.name for d in ds)}")
    return ds[0]


def _sig(x):
    return ew._sigmoid(x)


def _order(T, reverse):
    return range(T - 1, -1, -1) if reverse else range(T)


def _scan_impl(gi, w, h0, *rest, mode, reverse):
    T, N, G = gi.shape
    H = h0.shape[1]
    out = np.zeros((T + 1, N, out_width(mode, H)), gi.dtype)
    h = h0
    c = rest[0] if mode == "LSTM" else None
    b = rest[0] if mode == "GRU" and rest else None
    for t in _order(T, reverse):
        row = out[t + 1]
        if mode == "LSTM":
            a = gi[t] + h @ w
            # the gates straight into the packed row: one sigmoid call over
            # all four (g's columns then overwritten by its tanh), the same
            # elementwise values as one call per gate
            gates = row[:, 2 * H:]
            gates[...] = _sig(a)
            gates[:, 2 * H:3 * H] = np.tanh(a[:, 2 * H:3 * H])
            i, f, g, o = (gates[:, k * H:(k + 1) * H] for k in range(4))
            c = f * c + i * g
            h = o * np.tanh(c)
            row[:, H:2 * H] = c
        elif mode == "GRU":
            gh = h @ w
            if b is not None:
                gh = gh + b
            r = _sig(gi[t, :, :H] + gh[:, :H])
            z = _sig(gi[t, :, H:2 * H] + gh[:, H:2 * H])
            hn = gh[:, 2 * H:]
            n = np.tanh(gi[t, :, 2 * H:] + r * hn)
            h = n + z * (h - n)
            row[:, H:] = np.concatenate([r, z, n, hn], 1)
        else:
            a = gi[t] + h @ w
            h = np.tanh(a) if mode == "RNN_TANH" else np.maximum(a, 0)
        row[:, :H] = h
    out[0, :, :H] = h
    if mode == "LSTM":
        out[0, :, H:2 * H] = c
    return out


def _grad_shape(g, out, w, h0, *rest, mode, reverse):
    if tuple(g) != tuple(out) or len(out) != 3 or len(w) != 2 or len(h0) != 2:
        raise ShapeError(f"rnn_scan_grad: shapes {tuple(g)}, {tuple(out)}, {tuple(w)}, "
                         f"{tuple(h0)} do not agree")
    if len(rest) != (mode == "LSTM"):
        raise ShapeError(f"rnn_scan_grad {mode}: {4 + len(rest)} operands")
    T1, N, _ = out
    return (T1, N, grad_width(mode, h0[1]))


def _grad_impl(g, out, w, h0, *rest, mode, reverse):
    T, N = out.shape[0] - 1, out.shape[1]
    H = h0.shape[1]
    res = np.zeros((T + 1, N, grad_width(mode, H)), out.dtype)
    wt = w.T
    dh = g[0, :, :H].copy()
    dc = g[0, :, H:2 * H].copy() if mode == "LSTM" else None
    steps = list(_order(T, reverse))
    prev = {t: (steps[k - 1] if k else None) for k, t in enumerate(steps)}
    for t in reversed(steps):
        row, gr, p = out[t + 1], g[t + 1], prev[t]
        hprev = h0 if p is None else out[p + 1, :, :H]
        dh = dh + gr[:, :H]
        if mode == "LSTM":
            cprev = rest[0] if p is None else out[p + 1, :, H:2 * H]
            c = row[:, H:2 * H]
            i, f, gg, o = (row[:, k * H:(k + 1) * H] for k in range(2, 6))
            gi_, gf, gg_, go = (gr[:, k * H:(k + 1) * H] for k in range(2, 6))
            tc = np.tanh(c)
            dc = dc + gr[:, H:2 * H] + dh * o * (1 - tc * tc)
            da = res[t + 1]          # written in place (no concatenate and copy)
            da[:, :H] = (dc * gg + gi_) * i * (1 - i)
            da[:, H:2 * H] = (dc * cprev + gf) * f * (1 - f)
            da[:, 2 * H:3 * H] = (dc * i + gg_) * (1 - gg * gg)
            da[:, 3 * H:] = (dh * tc + go) * o * (1 - o)
            dc = dc * f
            dh = da @ wt
        elif mode == "GRU":
            r, z, n, hn = (row[:, k * H:(k + 1) * H] for k in range(1, 5))
            gr_, gz, gn, ghn = (gr[:, k * H:(k + 1) * H] for k in range(1, 5))
            dn = (dh * (1 - z) + gn) * (1 - n * n)
            dr = (dn * hn + gr_) * r * (1 - r)
            dz = (dh * (hprev - n) + gz) * z * (1 - z)
            dhn = dn * r + ghn
            res[t + 1] = np.concatenate([dr, dz, dn, dhn], 1)
            dh = dh * z + np.concatenate([dr, dz, dhn], 1) @ wt
        else:
            h = row[:, :H]
            da = dh * (1 - h * h) if mode == "RNN_TANH" else dh * (h > 0)
            res[t + 1] = da
            dh = da @ wt
    res[0, :, :H] = dh
    if mode == "LSTM":
        res[0, :, H:2 * H] = dc
    return res


def _rows(x, lo, hi, c0, c1):
    """``x[lo:hi, :, c0:c1]`` of a 3-D value."""
    return movement.slice_(x, (lo, 0, c0), (hi, x.shape[1], c1), (1, 1, 1))


def _scan_vjp(g, gi, w, h0, *rest, out, mode, reverse):
    T, N, G = gi.shape
    H = h0.shape[1]
    lstm = mode == "LSTM"
    d = rnn_scan_grad(g, out, w, h0, *(rest[:1] if lstm else ()), mode=mode, reverse=reverse)
    dgi = _rows(d, 1, T + 1, 0, G)
    dgh = dgi if mode != "GRU" else movement.concatenate(
        [_rows(d, 1, T + 1, 0, 2 * H), _rows(d, 1, T + 1, 3 * H, 4 * H)], 2)
    # h_{t-1} of every step, in time order: h0 then h_0..h_{T-2} (forward),
    # h_1..h_{T-1} then h0 (reverse); cut from [T + 1] rows, so that no value
    # has T - 1 rows (a symbolic trace would take a guard on T - 1 == 1).
    first = movement.reshape(h0, (1, N, H))
    hs = _rows(out, 1, T + 1, 0, H)
    if reverse:
        hprev = _rows(movement.concatenate([hs, first], 0), 1, T + 1, 0, H)
    else:
        hprev = _rows(movement.concatenate([first, hs], 0), 0, T, 0, H)
    hp = movement.reshape(hprev, (T * N, H))
    dw = linalg.matmul(movement.transpose(hp, (1, 0)), movement.reshape(dgh, (T * N, G)))
    dh0 = movement.reshape(_rows(d, 0, 1, 0, H), (N, H))
    cts = [dgi, dw, dh0]
    if lstm:
        cts.append(movement.reshape(_rows(d, 0, 1, H, 2 * H), (N, H)))
    elif rest:      # GRU's b_hh
        cts.append(reduce.reduce_sum(dgh, (0, 1)))
    return tuple(cts)


rnn_scan_p = Primitive("rnn_scan", kind="recurrent", impl=_scan_impl, shape_rule=_scan_shape,
                       dtype_rule=_same_dtype, vjp=_scan_vjp,
                       save=lambda xs, needs=None: tuple(range(1, len(xs))),
                       save_out=True, variadic=True)

rnn_scan_grad_p = Primitive("rnn_scan_grad", kind="recurrent", impl=_grad_impl,
                            shape_rule=_grad_shape, dtype_rule=_same_dtype, vjp=None,
                            variadic=True)


def rnn_scan(gi, w, h0, *rest, mode: str, reverse: bool = False):
    """The packed result described in the module docstring."""
    return rnn_scan_p.bind(gi, w, h0, *rest, mode=mode, reverse=int(bool(reverse)))


def rnn_scan_grad(g, out, w, h0, *rest, mode: str, reverse: int = 0):
    return rnn_scan_grad_p.bind(g, out, w, h0, *rest, mode=mode, reverse=int(bool(reverse)))
