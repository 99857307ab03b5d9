"""Constants and global configuration (tracec/config.py) against torch
2.13: finfo/iinfo fields, promote_types/can_cast, predicates, typename,
print options changing repr, thread counts reaching the cpu backend's
setting, inference_mode as context manager and decorator, and the flags
that are recorded and reported back."""
from __future__ import annotations

import math
import os

import pytest

import tracec
from _torch_ref import torch

DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "bool"]


def test_constants():
    assert tracec.pi == torch.pi and tracec.e == torch.e and tracec.inf == torch.inf
    assert math.isnan(tracec.nan) and tracec.newaxis is None
    x = tracec.zeros(3)
    assert tuple(x[tracec.newaxis].shape) == (1, 3)


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16"])
def test_finfo(name):
    a, b = tracec.finfo(getattr(tracec, name)), torch.finfo(getattr(torch, name))
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(a, field) == getattr(b, field), field
    assert a.dtype == b.dtype
    assert tracec.finfo().eps == torch.finfo().eps


@pytest.mark.parametrize("name", ["int32", "int64"])
def test_iinfo(name):
    a, b = tracec.iinfo(getattr(tracec, name)), torch.iinfo(getattr(torch, name))
    assert (a.bits, a.min, a.max, a.dtype) == (b.bits, b.min, b.max, b.dtype)


def test_finfo_iinfo_refuse_the_other_kind():
    with pytest.raises(TypeError):
        tracec.finfo(tracec.int64)
    with pytest.raises(TypeError):
        tracec.iinfo(tracec.float32)
    with pytest.raises(TypeError, match="not supported by torch.iinfo"):
        tracec.iinfo(tracec.bool)


@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("b", DTYPES)
def test_promote_types_and_can_cast(a, b):
    assert str(tracec.promote_types(getattr(tracec, a), getattr(tracec, b))).split(".")[-1] == \
        str(torch.promote_types(getattr(torch, a), getattr(torch, b))).split(".")[-1]
    assert tracec.can_cast(getattr(tracec, a), getattr(tracec, b)) == \
        torch.can_cast(getattr(torch, a), getattr(torch, b))


def test_predicates_and_typename():
    for data in ([1.5], [2], [True]):
        a, b = tracec.tensor(data), torch.tensor(data)
        assert tracec.is_signed(a) == torch.is_signed(b) == a.is_signed()
        assert tracec.is_complex(a) is False and a.is_complex() is False
        assert tracec.is_nonzero(a) == torch.is_nonzero(b) == a.is_nonzero()
        assert tracec.typename(a).split(".")[-1] == torch.typename(b).split(".")[-1]
    assert tracec.typename(3) == torch.typename(3) == "int"
    assert tracec.is_same_size(tracec.zeros(2, 3), tracec.ones(2, 3))
    assert not tracec.zeros(2).is_same_size(tracec.zeros(3))
    with pytest.raises(RuntimeError, match="more than one value"):
        tracec.is_nonzero(tracec.zeros(2))
    with pytest.raises(RuntimeError, match="no values"):
        tracec.is_nonzero(tracec.zeros(0))


def test_threads_set_the_cpu_backend_setting(monkeypatch):
    from tracec.backends.cpu.runtime import default_threads
    monkeypatch.delenv("TRACEC_NUM_THREADS", raising=False)
    assert tracec.get_num_threads() == default_threads()
    tracec.set_num_threads(1)
    try:
        assert tracec.get_num_threads() == 1 == default_threads()
    finally:
        os.environ.pop("TRACEC_NUM_THREADS", None)
    with pytest.raises(RuntimeError):
        tracec.set_num_threads(0)
    assert tracec.get_num_interop_threads() >= 1


def test_printoptions_change_repr():
    x = tracec.tensor([1.123456789, 2.5])
    try:
        tracec.set_printoptions(precision=2)
        assert "1.12" in repr(x) and "1.123" not in repr(x)
        tracec.set_printoptions(sci_mode=True)
        assert "e+00" in repr(x)
        tracec.set_printoptions(profile="default", sci_mode=False)
        tracec.set_printoptions(threshold=5, edgeitems=2)
        assert "..." in repr(tracec.arange(100))
        tracec.set_printoptions(profile="full")
        assert "..." not in repr(tracec.arange(2000))
    finally:
        tracec.set_printoptions(profile="default")
    assert "1.1235" in repr(x)


def test_inference_mode():
    w = tracec.ones(2, requires_grad=True)
    assert not tracec.is_inference_mode_enabled()
    with tracec.inference_mode():
        assert tracec.is_inference_mode_enabled()
        assert not (w * 2).requires_grad
    assert (w * 2).requires_grad and not tracec.is_inference_mode_enabled()
    with tracec.inference_mode(False):
        assert (w * 2).requires_grad

    @tracec.inference_mode()
    def f(x):
        return x * 2

    @tracec.inference_mode
    def g(x):
        return x * 3
    assert not f(w).requires_grad and not g(w).requires_grad


def test_flags_are_recorded():
    assert not tracec.are_deterministic_algorithms_enabled()
    tracec.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert tracec.are_deterministic_algorithms_enabled()
        assert tracec.is_deterministic_algorithms_warn_only_enabled()
    finally:
        tracec.use_deterministic_algorithms(False)
    assert tracec.get_float32_matmul_precision() == torch.get_float32_matmul_precision()
    tracec.set_float32_matmul_precision("high")
    assert tracec.get_float32_matmul_precision() == "high"
    tracec.set_float32_matmul_precision("highest")
    with pytest.raises(RuntimeError):
        tracec.set_float32_matmul_precision("low")
    assert tracec.set_flush_denormal(True) is False
    tracec.set_warn_always(True)
    assert tracec.is_warn_always_enabled()
    tracec.set_warn_always(False)
    with tracec.autograd.detect_anomaly():
        assert tracec.is_anomaly_enabled()
    with tracec.autograd.set_detect_anomaly(True):
        assert tracec.is_anomaly_enabled()
    tracec.autograd.set_detect_anomaly(False)
    assert not tracec.is_anomaly_enabled()


def test_deterministic_debug_mode_and_anomaly_nan():
    for mode, want in (("warn", 1), ("error", 2), (0, 0), ("default", 0)):
        tracec.set_deterministic_debug_mode(mode)
        torch.set_deterministic_debug_mode(mode)
        assert tracec.get_deterministic_debug_mode() == want == \
            torch.get_deterministic_debug_mode()
        assert tracec.are_deterministic_algorithms_enabled() == \
            torch.are_deterministic_algorithms_enabled()
    with pytest.raises(RuntimeError):
        tracec.set_deterministic_debug_mode("loud")
    with tracec.autograd.detect_anomaly(check_nan=False):
        assert not tracec.is_anomaly_check_nan_enabled()
    assert tracec.is_anomaly_check_nan_enabled() == torch.is_anomaly_check_nan_enabled()


def test_top_level_inplace_linalg():
    a, m, v = tracec.zeros(2), tracec.ones(2, 3), tracec.ones(3)
    assert tracec.addmv_(a, m, v) is a and a.tolist() == [3.0, 3.0]
    r = tracec.matrix_rank(tracec.eye(3))
    assert r.item() == 3 and r.dtype is tracec.int64


def test_backend_flags_as_torch():
    m, tm = tracec.backends.cuda.matmul, torch.backends.cuda.matmul
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                 "allow_bf16_reduced_precision_reduction"):
        assert getattr(m, name) == getattr(tm, name), name
    m.allow_tf32 = True
    assert m.allow_tf32
    m.allow_tf32 = False
    assert tracec.backends.cuda.is_built() is False
    assert tracec.backends.cuda.flash_sdp_enabled() == torch.backends.cuda.flash_sdp_enabled()
    with tracec.backends.cuda.sdp_kernel(enable_flash=False, enable_math=True):
        assert not tracec.backends.cuda.flash_sdp_enabled()
        assert tracec.backends.cuda.math_sdp_enabled()
    assert tracec.backends.cuda.flash_sdp_enabled()
    tracec.backends.cuda.enable_mem_efficient_sdp(False)
    assert not tracec.backends.cuda.mem_efficient_sdp_enabled()
    tracec.backends.cuda.enable_mem_efficient_sdp(True)
    assert tracec.backends.openmp.is_available() in (True, False)


def test_default_device():
    assert str(tracec.get_default_device()) == "cpu"
    tracec.set_default_device("cpu")
    tracec.set_default_device(None)
    with pytest.raises(RuntimeError, match="cpu tensors only"):
        tracec.set_default_device("cuda")
