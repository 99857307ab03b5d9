"""float16 conv_transpose1d/2d/3d as PyTorch 2.13's CPU kernel
(slow_conv_transpose: each column a float32 product rounded once, the
columns added into the output in float16 in kernel-offset order, then the
bias; the input's gradient a float32 dot rounded once, the bias's a float32
sum), checked against torch in the same process.  tracec ran float16 as a
float32 convolution rounded once: most outputs and gradients one unit off.
The weight's gradient is PyTorch's up to the order of its vectorized float32
dot (a few elements in a thousand one unit off)."""
import numpy as np
import pytest
import torch

import tracec


def _onednn_half() -> bool:
    """Whether PyTorch runs float16 convolutions through oneDNN here (CPUs
    with AVX512-FP16 / AMX-FP16), not the kernel these tests compare with."""
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "avx512_fp16" in flags or "amx_fp16" in flags


pytestmark = pytest.mark.skipif(_onednn_half(), reason="PyTorch takes oneDNN's float16 path")

CASES = [(1, {}), (1, {"stride": 2, "padding": 1, "output_padding": 1}), (2, {}),
         (2, {"stride": 2}), (2, {"groups": 2}), (2, {"dilation": 2}), (3, {}),
         (3, {"stride": 2, "padding": 1})]


def _run(lib, x, w, b, g, dim, kw):
    h = lib.float16
    xx, ww, bb = (lib.tensor(v).to(h).requires_grad_() for v in (x, w, b))
    fn = getattr(lib.nn.functional, f"conv_transpose{dim}d")
    y = fn(xx, ww, bb, **kw)
    y.backward(lib.tensor(g[tuple(slice(0, s) for s in y.shape)]).to(h))
    return [np.array(t.detach().float().tolist(), np.float32) for t in (y, xx.grad, ww.grad,
                                                                        bb.grad)]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_half_conv_transpose_rounds_as_torch(case):
    dim, kw = CASES[case]
    rng = np.random.default_rng(case)
    groups = kw.get("groups", 1)
    sp = (6,) * dim if dim < 3 else (3,) * dim
    x = rng.standard_normal((2, 8) + sp).astype(np.float32)
    w = (rng.standard_normal((8, 4) + (3,) * dim) * 0.3).astype(np.float32)
    b = rng.standard_normal(4 * groups).astype(np.float32)
    g = rng.standard_normal((2, 4 * groups) + (16,) * dim).astype(np.float32)
    got, want = _run(tracec, x, w, b, g, dim, kw), _run(torch, x, w, b, g, dim, kw)
    for name, u, v in zip(("output", "input grad", "bias grad"), got[:2] + got[3:],
                          want[:2] + want[3:]):
        np.testing.assert_array_equal(u, v, err_msg=name)
    gw, tw = got[2], want[2]
    ulp = np.abs(tw.astype(np.float16).view(np.int16).astype(np.int32)
                 - gw.astype(np.float16).view(np.int16).astype(np.int32))
    assert ulp.max() <= 1 and (ulp > 0).mean() < 0.01
