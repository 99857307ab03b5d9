"""Gaps the public programs of ``tests/programs/models40`` found, each against
torch: the ``grad_fn`` names of recurrent layers' outputs (the "Sequence
Models and LSTM Networks" tutorial prints ``lstm(inputs, hidden)``'s output,
``grad_fn=<MkldnnRnnLayerBackward0>`` under PyTorch's CPU kernels)."""
import numpy as np
import pytest
import torch

import tracec


def _arr(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _grad_fn_names(lib, cls, kw, x):
    lib.manual_seed(0)
    m = getattr(lib.nn, cls)(3, 4, **kw)
    inp = lib.tensor(x)
    if inp.dtype == lib.float32 and x.dtype == np.float64:
        inp = inp.double()
    if x.dtype == np.float64:
        m = m.double()
    out, h = m(inp)
    h = h[0] if isinstance(h, tuple) else h
    return type(out.grad_fn).__name__, type(h.grad_fn).__name__


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("kw", [{}, {"batch_first": True}, {"num_layers": 2},
                                {"bidirectional": True}, {"proj_size": 2}],
                         ids=["plain", "batch_first", "two_layers", "bidirectional", "proj"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_recurrent_output_grad_fn_names_match_torch(cls, kw, dtype):
    if "proj_size" in kw and cls != "LSTM":
        pytest.skip("proj_size is LSTM's")
    x = _arr(5, 2, 3).astype(dtype)
    assert _grad_fn_names(tracec, cls, kw, x) == _grad_fn_names(torch, cls, kw, x)


def test_lstm_tutorial_output_prints_like_torch():
    x = _arr(5, 1, 3)

    def run(lib):
        lib.manual_seed(1)
        out, hidden = lib.nn.LSTM(3, 3)(lib.tensor(x))
        return repr(out).split("grad_fn=")[1], [repr(h).split("grad_fn=")[1] for h in hidden]
    assert run(tracec) == run(torch) == ("<MkldnnRnnLayerBackward0>)", ["<StackBackward0>)"] * 2)
