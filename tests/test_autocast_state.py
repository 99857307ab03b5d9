"""PyTorch's autocast state functions (set_autocast_enabled / _dtype, the
deprecated cpu / gpu spellings, the nesting counter, the cache flag) against
torch 2.13: the same call sequence gives the same answers and the same
dtypes of a matmul, and ``autocast`` regions save and restore that state."""
import warnings

import pytest

import tracec

torch = pytest.importorskip("torch")


def _sequence(T):
    def mm():
        return str((T.ones(2, 2) @ T.ones(2, 2)).dtype).split(".")[-1]

    def name(d):
        return str(d).split(".")[-1]
    out = [T.is_autocast_enabled(), T.is_autocast_enabled("cpu"),
           name(T.get_autocast_dtype("cpu")), name(T.get_autocast_gpu_dtype()),
           T.is_autocast_cache_enabled()]
    T.set_autocast_enabled("cpu", True)
    out += [mm(), T.is_autocast_cpu_enabled()]
    T.set_autocast_dtype("cpu", T.float16)
    out += [mm(), name(T.get_autocast_cpu_dtype())]
    out += [T.autocast_increment_nesting(), T.autocast_increment_nesting(),
            T.autocast_decrement_nesting(), T.autocast_decrement_nesting()]
    with T.autocast("cpu", enabled=False):
        out += [mm(), T.is_autocast_enabled("cpu")]
    out.append(mm())
    T.set_autocast_enabled("cpu", False)
    out += [mm(), name(T.get_autocast_dtype("cpu"))]
    with T.autocast("cpu"):     # no dtype: the current setting (float16 now)
        out += [name(T.get_autocast_dtype("cpu")), mm()]
        with T.autocast("cpu", dtype=T.bfloat16):
            out.append(mm())
        out.append(mm())
    out += [name(T.get_autocast_dtype("cpu")), mm()]
    T.set_autocast_enabled(True)    # the old CUDA spelling: state only
    out += [T.is_autocast_enabled(), T.is_autocast_enabled("cuda"), T.is_autocast_enabled("cpu")]
    T.set_autocast_enabled(False)
    T.set_autocast_cpu_enabled(True)
    out += [T.is_autocast_enabled("cpu"), mm()]
    T.set_autocast_cpu_enabled(False)
    T.set_autocast_cpu_dtype(T.bfloat16)
    T.set_autocast_gpu_dtype(T.bfloat16)
    out += [name(T.get_autocast_dtype("cpu")), name(T.get_autocast_gpu_dtype())]
    T.set_autocast_cache_enabled(False)
    out.append(T.is_autocast_cache_enabled())
    T.clear_autocast_cache()
    with pytest.raises(RuntimeError) as e:
        T.set_autocast_enabled("foo", True)
    out.append(str(e.value))
    # restore the defaults
    T.set_autocast_cache_enabled(True)
    T.set_autocast_gpu_dtype(T.float16)
    return out


def test_autocast_state_functions_match_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _sequence(torch)
        got = _sequence(tracec)
    assert got == want
    assert not tracec.is_autocast_enabled("cpu") and tracec.autocast_mode.ACTIVE == []


def test_compiled_matmul_follows_set_autocast_enabled():
    fn = tracec.compile(lambda a, b: a @ b)
    a = tracec.ones(2, 2)
    assert fn(a, a).dtype is tracec.float32
    tracec.set_autocast_enabled("cpu", True)
    try:
        assert fn(a, a).dtype is tracec.bfloat16      # a new trace: autocast is in the key
    finally:
        tracec.set_autocast_enabled("cpu", False)
    assert fn(a, a).dtype is tracec.float32
