"""Gaps found by the models17 public programs, each compared with torch."""
import random
import warnings

import numpy as np
import pytest
import torch

import tracec
import tracec.nn.functional as TFn


def _error(fn):
    with pytest.raises(RuntimeError) as e:
        fn()
    return str(e.value)


@pytest.mark.parametrize("lib", [torch, tracec])
def test_autograd_grad_checks_outputs_before_inputs_like_torch(lib):
    # HNN's time_derivative under no_grad: neither the output nor the input
    # has a graph, and torch names the output
    x = lib.ones(2)
    with lib.no_grad():
        y = (lib.ones(2, requires_grad=True) * x).sum()
    assert _error(lambda: lib.autograd.grad(y, x)) == \
        "element 0 of tensors does not require grad and does not have a grad_fn"
    w = lib.ones(2, requires_grad=True)
    assert _error(lambda: lib.autograd.grad((w * 2).sum(), x)) == \
        "One of the differentiated Tensors does not require grad"
    # the index of the first output without a graph
    assert _error(lambda: lib.autograd.grad([(w * 2).sum(), x.sum()], [w, x])) == \
        "element 1 of tensors does not require grad and does not have a grad_fn"
    assert _error(lambda: lib.autograd.backward([(w * 2).sum(), x.sum()])) == \
        "element 1 of tensors does not require grad and does not have a grad_fn"


def test_legacy_contiguous_format_is_contiguous_format_like_torch():
    assert torch.legacy_contiguous_format is torch.contiguous_format
    assert tracec.legacy_contiguous_format is tracec.contiguous_format
    assert repr(tracec.legacy_contiguous_format) == repr(torch.legacy_contiguous_format)
    # F.gumbel_softmax's straight-through branch, as public code copies it
    for lib in (torch, tracec):
        x = lib.ones(1, 3, 4, 4).contiguous(memory_format=lib.channels_last)
        z = lib.zeros_like(x, memory_format=lib.legacy_contiguous_format)
        assert z.stride() == (48, 16, 4, 1)
        y = lib.zeros_like(lib.ones(2, 3), memory_format=lib.legacy_contiguous_format)
        assert y.scatter_(1, lib.tensor([[1], [2]]), 1.0).tolist() == [[0, 1, 0], [0, 0, 1]]


@pytest.mark.parametrize("lib,F", [(torch, torch.nn.functional), (tracec, TFn)])
def test_loss_size_warning_names_the_callers_line_like_torch(lib, F):
    # F.mse_loss / F.l1_loss: the broadcasting warning points at the line
    # that called the loss, not at a wrapper inside the library
    for loss in (F.mse_loss, F.l1_loss):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            loss(lib.zeros(2, 3, requires_grad=True), lib.zeros(1, 3))
        assert len(w) == 1 and "Using a target size" in str(w[0].message)
        assert w[0].filename == __file__, w[0].filename


GEN = np.random.default_rng(0)
PYGEN = random.Random(0)


def _noise(shape):
    return tracec.from_numpy(GEN.random(shape).astype(np.float32))


def _with_numpy_noise(x):
    return x + _noise(tuple(x.shape))


def _with_python_noise(x):
    return x * PYGEN.random()


def test_compiled_function_drawing_from_a_numpy_generator_object_is_not_baked_in():
    # a global np.random.Generator (not np.random's global state) drawn from
    # inside the compiled function: the trace must not replay its first draw
    ref = np.random.default_rng(0)
    GEN.bit_generator.state = np.random.default_rng(0).bit_generator.state
    cf = tracec.compile(_with_numpy_noise, fallback="eager")
    x = tracec.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = [cf(x).tolist() for _ in range(4)]
    assert outs == [ref.random(3).astype(np.float32).tolist() for _ in range(4)]
    GEN.bit_generator.state = np.random.default_rng(0).bit_generator.state
    strict = tracec.compile(_with_numpy_noise)
    with pytest.raises(Exception, match="global 'GEN'.*changed during the call"):
        for _ in range(4):
            strict(x)


def test_compiled_function_drawing_from_a_random_instance_is_not_baked_in():
    ref = random.Random(0)
    PYGEN.seed(0)
    cf = tracec.compile(_with_python_noise, fallback="eager")
    x = tracec.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = [cf(x).tolist()[0] for _ in range(4)]
    assert outs == pytest.approx([ref.random() for _ in range(4)], rel=1e-6)
