"""``torch.nn.attention.sdpa_kernel`` and the ``torch.backends.cuda`` attention
switches: which kernels attention may use, restored after the block; with
neither the math nor the flash kernel enabled attention raises PyTorch's
error; results equal PyTorch's whatever is chosen."""
import numpy as np
import pytest
import torch

import tracec
import tracec.nn.functional as F
from tracec.nn.attention import SDPBackend, sdpa_kernel


def test_backends_match_pytorch():
    assert {k: int(v) for k, v in SDPBackend.__members__.items()} == \
        {k: int(v) for k, v in torch.nn.attention.SDPBackend.__members__.items()}


@pytest.mark.parametrize("names", [["MATH"], ["FLASH_ATTENTION"], ["EFFICIENT_ATTENTION"],
                                   ["CUDNN_ATTENTION"], ["OVERRIDEABLE"],
                                   ["EFFICIENT_ATTENTION", "MATH"]])
def test_sdpa_kernel_like_pytorch(names):
    q = np.random.default_rng(0).standard_normal((2, 3, 4, 8)).astype(np.float32)
    outs = []
    for lib, mod in ((torch, torch.nn.attention), (tracec, tracec.nn.attention)):
        backends = [getattr(mod.SDPBackend, n) for n in names]
        t = lib.tensor(q)
        try:
            with mod.sdpa_kernel(backends):
                outs.append(lib.nn.functional.scaled_dot_product_attention(
                    t, t, t, is_causal=True).numpy())
        except RuntimeError as e:
            outs.append(str(e))
        # restored after the block
        assert lib.backends.cuda.math_sdp_enabled() and lib.backends.cuda.flash_sdp_enabled()
    if isinstance(outs[0], str):
        assert outs[1] == outs[0]
    else:
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)


def test_single_backend_and_bad_argument():
    x = tracec.randn(1, 2, 3, 4)
    with sdpa_kernel(SDPBackend.MATH):
        F.scaled_dot_product_attention(x, x, x)
    with pytest.raises(AssertionError, match="instance of SDPBackend"):
        with sdpa_kernel("math"):
            pass


def test_legacy_switches_share_the_state():
    x = tracec.randn(1, 2, 3, 4)
    tracec.backends.cuda.enable_math_sdp(False)
    tracec.backends.cuda.enable_flash_sdp(False)
    try:
        with pytest.raises(RuntimeError, match="No viable backend"):
            F.scaled_dot_product_attention(x, x, x)
        with tracec.backends.cuda.sdp_kernel(enable_math=True):
            F.scaled_dot_product_attention(x, x, x)
        assert not tracec.backends.cuda.math_sdp_enabled()
    finally:
        tracec.backends.cuda.enable_math_sdp(True)
        tracec.backends.cuda.enable_flash_sdp(True)
