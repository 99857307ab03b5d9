"""torch.lstm / gru / rnn_tanh / rnn_relu (and torch._VF's), their packed
overloads and the single-step cells, against PyTorch 2.13 with the same
flat weights: outputs, final states and every gradient."""
import itertools

import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _weights(rng, name, I, H, layers, dirs, bias, proj):
    G = GATES[name] * H
    out = []
    for layer in range(layers):
        for _ in range(dirs):
            lin = I if layer == 0 else (proj or H) * dirs
            shapes = [(G, lin), (G, proj or H)] + ([(G,), (G,)] if bias else [])
            if proj:
                shapes.append((proj, H))
            out += [rng.standard_normal(s) * 0.4 for s in shapes]
    return out


def _both(arrays, dtype):
    t = [torch.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
    c = [tracec.tensor(a, dtype=getattr(tracec, str(dtype).split(".")[1]), requires_grad=True)
         for a in arrays]
    return t, c


def _check(tout, cout, tin, cin, tol):
    tout = [o for o in tout if o is not None]
    cout = [o for o in cout if o is not None]
    assert len(tout) == len(cout)
    for a, b in zip(tout, cout):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=tol, atol=tol)
    rng = np.random.default_rng(5)
    cots = [rng.standard_normal(tuple(o.shape)) for o in tout]
    torch.autograd.backward(tout, [torch.tensor(g, dtype=tout[0].dtype) for g in cots])
    tracec.autograd.backward(cout, [tracec.tensor(g, dtype=cout[0].dtype) for g in cots])
    for a, b in zip(tin, cin):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=tol, atol=tol)


#: (layers, bidirectional, batch_first, has_biases): each option on and off somewhere
CONFIGS = [(1, False, False, True), (2, True, True, True), (2, False, True, False),
           (1, True, False, False)]
CASES = [(name, *config, proj) for name in GATES for config in CONFIGS
         for proj in ((0, 2) if name == "lstm" else (0,))]


@pytest.mark.parametrize("name,layers,bidir,batch_first,bias,proj", CASES)
def test_functional_rnn_matches_torch(name, layers, bidir, batch_first, bias, proj):
    rng = np.random.default_rng(0)
    T, N, I, H = 4, 3, 5, 3
    dirs = 2 if bidir else 1
    x = rng.standard_normal((N, T, I) if batch_first else (T, N, I))
    h0 = rng.standard_normal((layers * dirs, N, proj or H))
    c0 = rng.standard_normal((layers * dirs, N, H))
    ws = _weights(rng, name, I, H, layers, dirs, bias, proj)
    arrays = [x, h0] + ([c0] if name == "lstm" else []) + ws
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 2e-5)):
        tin, cin = _both(arrays, dtype)
        rest = 3 if name == "lstm" else 2
        tfn, cfn = getattr(torch, name), getattr(tracec, name)
        hx_t = tuple(tin[1:3]) if name == "lstm" else tin[1]
        hx_c = tuple(cin[1:3]) if name == "lstm" else cin[1]
        tout = tfn(tin[0], hx_t, tin[rest:], bias, layers, 0.0, True, bidir, batch_first)
        cout = cfn(cin[0], hx_c, cin[rest:], bias, layers, 0.0, True, bidir, batch_first)
        _check(list(tout), list(cout), tin, cin, tol)


@pytest.mark.parametrize("name", list(GATES))
def test_packed_overload_and_vf_match_torch(name):
    rng = np.random.default_rng(1)
    lengths = [4, 3, 1]
    T, N, I, H, layers = 4, 3, 2, 3, 2
    x = rng.standard_normal((T, N, I))
    h0 = rng.standard_normal((layers * 2, N, H))
    c0 = rng.standard_normal((layers * 2, N, H))
    ws = _weights(rng, name, I, H, layers, 2, True, 0)
    arrays = [x, h0] + ([c0] if name == "lstm" else []) + ws
    tin, cin = _both(arrays, torch.float64)
    rest = 3 if name == "lstm" else 2
    tp = torch.nn.utils.rnn.pack_padded_sequence(tin[0], lengths)
    cp = tracec.nn.utils.rnn.pack_padded_sequence(cin[0], lengths)
    hx_t = tuple(tin[1:3]) if name == "lstm" else tin[1]
    hx_c = tuple(cin[1:3]) if name == "lstm" else cin[1]
    tout = getattr(torch._VF, name)(tp.data, tp.batch_sizes, hx_t, tin[rest:], True, layers,
                                    0.0, True, True)
    cout = getattr(tracec._VF, name)(cp.data, cp.batch_sizes, hx_c, cin[rest:], True, layers,
                                     0.0, True, True)
    _check(list(tout), list(cout), tin, cin, 1e-10)


@pytest.mark.parametrize("name,bias,batched", itertools.product(GATES, (True, False),
                                                                (True, False)))
def test_cells_match_torch(name, bias, batched):
    rng = np.random.default_rng(2)
    N, I, H = 3, 4, 5
    G = GATES[name] * H
    shape = (N,) if batched else ()
    arrays = [rng.standard_normal(shape + (I,)), rng.standard_normal(shape + (H,))]
    if name == "lstm":
        arrays.append(rng.standard_normal(shape + (H,)))
    arrays += [rng.standard_normal((G, I)), rng.standard_normal((G, H))]
    if bias:
        arrays += [rng.standard_normal(G), rng.standard_normal(G)]
    tin, cin = _both(arrays, torch.float64)
    k = 3 if name == "lstm" else 2
    hx_t = tuple(tin[1:3]) if name == "lstm" else tin[1]
    hx_c = tuple(cin[1:3]) if name == "lstm" else cin[1]
    if not batched:     # torch's cells take only 2-D input: its IndexError
        with pytest.raises(IndexError) as want:
            getattr(torch, name + "_cell")(tin[0], hx_t, *tin[k:])
        with pytest.raises(IndexError) as got:
            getattr(tracec, name + "_cell")(cin[0], hx_c, *cin[k:])
        assert str(got.value) == str(want.value)
        return
    tout = getattr(torch, name + "_cell")(tin[0], hx_t, *tin[k:])
    cout = getattr(tracec, name + "_cell")(cin[0], hx_c, *cin[k:])
    as_list = (lambda o: list(o)) if name == "lstm" else (lambda o: [o])
    _check(as_list(tout), as_list(cout), tin, cin, 1e-10)


def test_functional_lstm_inside_compile_equals_eager():
    rng = np.random.default_rng(3)
    ws = [tracec.tensor(w, dtype=tracec.float32)
          for w in _weights(rng, "lstm", 3, 4, 2, 1, True, 0)]
    x = tracec.tensor(rng.standard_normal((5, 2, 3)), dtype=tracec.float32)
    h = tracec.zeros(2, 2, 4)

    def step(x, h, c):
        out, hn, cn = tracec.lstm(x, (h, c), ws, True, 2, 0.0, False, False, False)
        return out.sum() + hn.sum() + cn.sum()

    fn = tracec.compile(step)
    want = step(x, h, h).item()
    for _ in range(3):
        assert abs(fn(x, h, h).item() - want) < 1e-5


def test_torch_functional_module_names():
    import torch.functional as tf
    for name in tf.__all__:
        assert callable(getattr(tracec.functional, name)), name
    assert tracec.functional.F is tracec.nn.functional
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(tracec.functional.einsum("ij->j", tracec.tensor(a)).numpy(),
                               tf.einsum("ij->j", torch.tensor(a)).numpy())
    with pytest.raises(AttributeError, match="torch._VF"):
        tracec._VF.no_such_function


@pytest.mark.parametrize("bad", ["input", "batch", "hidden"])
def test_cell_shape_errors_match_torch(bad):
    I, H = 4, 5
    x = np.zeros((3, I + (bad == "input")))
    h = np.zeros((3 + (bad == "batch"), H + (bad == "hidden")))
    w_ih, w_hh = np.zeros((3 * H, I)), np.zeros((3 * H, H))
    with pytest.raises(RuntimeError) as want:
        torch.gru_cell(*[torch.tensor(a) for a in (x, h, w_ih, w_hh)])
    with pytest.raises(RuntimeError) as got:
        tracec.gru_cell(*[tracec.tensor(a) for a in (x, h, w_ih, w_hh)])
    assert str(got.value) == str(want.value)
