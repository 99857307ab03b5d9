"""Gaps that vision-model packages (``tests/programs/visionlibs``:
open_clip, segment-anything, ultralytics) found in tracec, each checked
against torch without the packages."""
import numpy as np
import pytest
import torch

import tracec


def test_tensor_type_is_importable_from_torch():
    """open_clip's hf_model does ``from torch import TensorType`` (TorchScript's
    type of a tensor) to annotate its poolers' arguments."""
    from tracec import TensorType, Type
    assert issubclass(TensorType, Type)
    assert TensorType.get() is TensorType.get()
    assert str(TensorType.get()) == str(torch.TensorType.get()) == "Tensor"
    assert TensorType.__name__ == torch.TensorType.__name__


@pytest.mark.parametrize("need_weights", [False, True])
def test_multi_head_attention_forward_out_proj_of_another_width(need_weights):
    """The result's width is out_proj's rows, not embed_dim (CLIP's
    ModifiedResNet attention pool projects 64 channels to its 1024-d embedding)."""
    outs = []
    for lib in (torch, tracec):
        lib.manual_seed(0)
        x = lib.randn(5, 2, 8, requires_grad=True)
        wq, wk, wv = (lib.randn(8, 8) for _ in range(3))
        wo, bo = lib.randn(6, 8), lib.randn(6)
        out, w = lib.nn.functional.multi_head_attention_forward(
            x, x, x, 8, 2, None, lib.zeros(24), None, None, False, 0.0, wo, bo,
            training=False, need_weights=need_weights, use_separate_proj_weight=True,
            q_proj_weight=wq, k_proj_weight=wk, v_proj_weight=wv)
        out.square().sum().backward()
        outs.append((tuple(out.shape), out.detach().numpy(), x.grad.numpy()))
    (s0, o0, g0), (s1, o1, g1) = outs
    assert s1 == s0 == (5, 2, 6)
    np.testing.assert_allclose(o1, o0, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g1, g0, rtol=1e-4, atol=1e-4)


def test_jit_tracer_warning():
    """ultralytics filters ``torch.jit.TracerWarning`` at import."""
    assert tracec.jit.TracerWarning.__name__ == torch.jit.TracerWarning.__name__
    assert issubclass(tracec.jit.TracerWarning, Warning)
    assert callable(tracec.jit.TracerWarning.ignore_lib_warnings)


def test_utils_deterministic_flag():
    """ultralytics' init_seeds sets ``torch.utils.deterministic.fill_uninitialized_memory``
    after a plain ``import torch``."""
    d = tracec.utils.deterministic
    assert d.fill_uninitialized_memory is torch.utils.deterministic.fill_uninitialized_memory
    d.fill_uninitialized_memory = False
    try:
        assert tracec.utils.deterministic.fill_uninitialized_memory is False
    finally:
        d.fill_uninitialized_memory = True
