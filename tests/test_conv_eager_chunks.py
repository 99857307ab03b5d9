"""The eager convolution's im2col in chunks of images (``_conv.CHUNK_BYTES``)
and its weight gradient from columns either kept (``KEEP_BYTES``) or taken
again from the input in the backward: PyTorch's values on every path,
chunk boundaries that do not divide the batch, groups, padding, stride,
bias, and a write through ``x.data`` between forward and backward."""
import numpy as np
import pytest
import torch

import tracec
from tracec.nn import _conv

CASES = [  # input shape, weight shape, stride, padding, dilation, groups
    ((5, 4, 9, 7), (6, 4, 3, 3), 1, 1, 1, 1),
    ((5, 4, 9, 7), (6, 2, 3, 2), 2, (1, 0), 1, 2),
    ((3, 6, 11), (4, 6, 3), 1, 2, 2, 1),
    ((5, 3, 8, 8), (3, 1, 3, 3), 1, 1, 1, 3),     # depthwise, below the plan threshold
]


@pytest.fixture(params=["recompute", "keep"])
def path(request, monkeypatch):
    # one or two images per chunk, so that chunks end inside the batch
    monkeypatch.setattr(_conv, "CHUNK_BYTES", 4000)
    monkeypatch.setattr(_conv, "KEEP_BYTES", 0 if request.param == "recompute" else 1 << 30)
    return request.param


def _conv_fn(lib, nsp):
    return getattr(lib.nn.functional, f"conv{nsp}d")


@pytest.mark.parametrize("case", CASES)
def test_chunked_conv_matches_torch(path, case):
    xs, ws, stride, padding, dilation, groups = case
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    b = rng.standard_normal(ws[0])
    outs = []
    for lib in (torch, tracec):
        args = [lib.tensor(v, requires_grad=True) for v in (x, w, b)]
        y = _conv_fn(lib, len(xs) - 2)(*args, stride=stride, padding=padding,
                                        dilation=dilation, groups=groups)
        g = np.random.default_rng(4).standard_normal(tuple(y.shape))
        y.backward(lib.tensor(g))
        outs.append([y.detach().numpy()] + [a.grad.numpy() for a in args])
    for c, t in zip(outs[1], outs[0]):
        np.testing.assert_allclose(c, t, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("case", CASES[:3])
def test_weight_grad_reads_the_input_written_after_the_forward(path, case):
    xs, ws, stride, padding, dilation, groups = case
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    grads = []
    for lib in (torch, tracec):
        tx = lib.tensor(x.copy())
        tw = lib.tensor(w, requires_grad=True)
        y = _conv_fn(lib, len(xs) - 2)(tx, tw, stride=stride, padding=padding,
                                       dilation=dilation, groups=groups)
        tx.data[:, :1] = 0.0
        y.sum().backward()
        grads.append(tw.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-11, atol=1e-12)
    assert not np.allclose(grads[1], _unwritten_grad(x, w, case))


def _unwritten_grad(x, w, case):
    _, _, stride, padding, dilation, groups = case
    tw = torch.tensor(w, requires_grad=True)
    _conv_fn(torch, x.ndim - 2)(torch.tensor(x), tw, stride=stride, padding=padding,
                                dilation=dilation, groups=groups).sum().backward()
    return tw.grad.numpy()


def test_chunks_cover_the_batch_once():
    for n, per_image in ((1, 10), (7, _conv.CHUNK_BYTES // 3 + 1), (5, 1), (4, 10 << 20)):
        spans = _conv._chunks(n, per_image)
        assert spans[0][0] == 0 and spans[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
        assert all(n1 - n0 >= 1 and (n1 - n0) * per_image <= max(per_image, _conv.CHUNK_BYTES)
                   for n0, n1 in spans)
