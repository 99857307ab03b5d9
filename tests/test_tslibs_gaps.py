"""Gaps that the time-series packages (``tests/programs/tslibs``:
pytorch-forecasting, tsai) found in tracec, each checked against torch
without the packages: ``torch.DeviceObjType`` / ``torch.StreamObjType``
(TorchScript's types, which pytorch-forecasting's annotations name at
import time), ``torch.jit.TracerWarning`` (which tsai imports), with
the filters importing torch.jit installs, and the layout of an
elementwise result whose operands' layouts differ (TensorIterator's rule:
tsai's ConvTranPlus drew its dropout masks in another order)."""
import numpy as np
import pytest
import torch

import tracec


@pytest.mark.parametrize("name", ["DeviceObjType", "StreamObjType"])
def test_torchscript_object_types(name):
    ours, theirs = getattr(tracec, name), getattr(torch, name)
    assert ours.__name__ == theirs.__name__
    assert issubclass(ours, tracec.Type) and issubclass(theirs, torch.Type)
    assert str(ours.get()) == str(theirs.get()) and repr(ours.get()) == repr(theirs.get())
    assert ours.get() is ours.get()
    assert str | ours == str | ours           # usable in annotations
    for lib in (torch, tracec):
        with pytest.raises(TypeError, match="No constructor defined"):
            getattr(lib, name)()


def test_tracer_warning():
    for lib in (torch, tracec):
        w = lib.jit.TracerWarning
        assert issubclass(w, Warning) and w.__name__ == "TracerWarning"
        assert "TracerWarning" not in lib.jit.__all__
    import warnings
    for lib in (torch, tracec):        # (pytest resets the filters import installed)
        with warnings.catch_warnings():
            warnings.resetwarnings()
            lib.jit.TracerWarning.ignore_lib_warnings()
            got = [(f[0], f[2] is lib.jit.TracerWarning, f[1] and f[1].pattern, f[3] and f[3].pattern)
                   for f in warnings.filters]
        assert got == [("ignore", False, "torch::jit::fuser::cuda", None),
                       ("ignore", True, None, "torch.(?!jit)")]


def _layout_cases(lib):
    lib.manual_seed(0)
    x = lib.randn(4, 16, 24).permute(0, 2, 1)            # strides (384, 1, 24)
    pe = lib.randn(1, 24, 16)
    img = lib.randn(2, 3, 4, 5).to(memory_format=lib.channels_last)
    return [x + pe, pe + x, x * pe[0], x - 1.5, x + x, x.contiguous() + pe,
            img + lib.randn(3, 1, 1), lib.randn(3, 1, 1) * img, img + lib.randn(2, 3, 4, 5),
            lib.randn(2, 3, 4, 5) + img, x.transpose(1, 2) + x.transpose(1, 2).contiguous(),
            lib.maximum(x, pe), lib.atan2(pe, x)]


def test_elementwise_result_layout_follows_tensor_iterator():
    """An elementwise result of operands with different layouts is laid
    out by TensorIterator's rule (the first operand's order, the next where
    it is broadcast), so a dropout mask drawn over it equals PyTorch's
    (tsai's ConvTranPlus adds a positional table to a permuted activation)."""
    ours, theirs = _layout_cases(tracec), _layout_cases(torch)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.stride() == b.stride(), i
        assert a.is_contiguous() == b.is_contiguous(), i
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-6)
        for lib, t in ((tracec, a), (torch, b)):
            lib.manual_seed(1)
            t.dropout_mask = lib.nn.functional.dropout(t, 0.5).numpy()
        np.testing.assert_allclose(a.dropout_mask, b.dropout_mask, rtol=1e-6, atol=1e-6)


def test_comparison_result_layout_follows_tensor_iterator():
    """Comparisons and logical / bitwise ops lay out their bool results by
    the same rule (the first operand's order)."""
    def cases(lib):
        lib.manual_seed(0)
        x = lib.randn(4, 16, 24).permute(0, 2, 1)
        pe = lib.randn(1, 24, 16)
        i = lib.arange(4 * 24 * 16).reshape(4, 16, 24).permute(0, 2, 1)
        return [x > pe, pe > x, x == pe[0], lib.logical_and(x > 0, pe > 0),
                i & lib.arange(16), lib.arange(16) | i]
    for k, (a, b) in enumerate(zip(cases(tracec), cases(torch))):
        assert a.stride() == b.stride(), k
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def _copy_like_cases(lib):
    lib.manual_seed(0)
    cases = {"t": lib.randn(4, 3).t(), "perm3": lib.randn(2, 3, 4).permute(2, 0, 1),
             "cl": lib.randn(2, 3, 4, 5).to(memory_format=lib.channels_last),
             "slice": lib.randn(4, 6)[:, ::2], "tslice": lib.randn(6, 4).t()[:, ::2],
             "expanded": lib.randn(3, 1).expand(3, 4)}
    out = []
    for name, a in cases.items():
        b = lib.randn(a.shape)
        out += [(name, "clone", a.clone()), (name, "double", a.double()), (name, "int", a.int()),
                (name, "to", a.to(lib.float16)), (name, "zeros_like", lib.zeros_like(a)),
                (name, "full_like", lib.full_like(a, 2)), (name, "randn_like", lib.randn_like(a)),
                (name, "where", lib.where(a > 0, a, b)), (name, "where_b", lib.where(b > 0, b, a)),
                (name, "addcmul", lib.addcmul(a, b, a)), (name, "addcmul_b", lib.addcmul(b, a, a)),
                (name, "addcdiv", lib.addcdiv(a, b, a.abs() + 3)), (name, "lerp", lib.lerp(a, b, 0.3)),
                (name, "tanh", a.tanh()), (name, "atan2", lib.atan2(b, a))]
    return out


def test_copies_casts_likes_and_ternary_ops_are_laid_out_as_pytorch():
    """clone, casts and ``*_like`` keep the input's layout (PyTorch's
    ``preserve_format``: any order, not only channels-last), and where /
    addcmul / addcdiv / lerp lay out their result as one TensorIterator
    kernel over their operands; values unchanged."""
    for (name, op, a), (_, _, b) in zip(_copy_like_cases(tracec), _copy_like_cases(torch)):
        assert a.stride() == b.stride(), (name, op, a.stride(), b.stride())
        if op != "randn_like":
            np.testing.assert_allclose(a.double().numpy(), b.double().numpy(), rtol=1e-6,
                                       atol=1e-6, err_msg=f"{name} {op}")
