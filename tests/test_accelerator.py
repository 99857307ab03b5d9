"""tracec.cuda / tracec.accelerator / tracec.backends.mps answer PyTorch's
device questions without raising, detecting CuPy and a GPU when present."""
import sys
import types

import pytest

import tracec


@pytest.fixture
def fresh_count():
    tracec.cuda.gpu_count.cache_clear()
    yield
    tracec.cuda.gpu_count.cache_clear()


def _fake_cupy(get_count):
    runtime = types.SimpleNamespace(getDeviceCount=get_count)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime))


def test_answers_on_this_machine(fresh_count):
    n = tracec.cuda.device_count()
    assert isinstance(n, int) and n >= 0
    assert tracec.cuda.is_available() == (n > 0) == tracec.accelerator.is_available()
    acc = tracec.accelerator.current_accelerator()
    assert acc is None if n == 0 else acc == tracec.device("cuda")
    assert tracec.backends.mps.is_available() is False
    dev = tracec.device("cuda" if tracec.cuda.is_available() else "cpu")
    assert dev.type == ("cuda" if n else "cpu")
    tracec.cuda.manual_seed(0)
    tracec.cuda.manual_seed_all(0)


def test_detects_cupy_devices_and_never_raises(fresh_count, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(lambda: 2))
    assert tracec.cuda.gpu_count() == 2
    # Eager CUDA tensors do not exist yet: the scripts' device choice stays "cpu".
    assert tracec.cuda.device_count() == 0 and not tracec.cuda.is_available()
    assert tracec.accelerator.current_accelerator() is None
    tracec.cuda.gpu_count.cache_clear()

    def no_driver():
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(no_driver))
    assert tracec.cuda.gpu_count() == 0 and not tracec.cuda.is_available()
    assert tracec.accelerator.current_accelerator() is None
    tracec.cuda.gpu_count.cache_clear()
    monkeypatch.setitem(sys.modules, "cupy", None)  # import fails
    assert tracec.cuda.gpu_count() == 0 and tracec.cuda.device_count() == 0
