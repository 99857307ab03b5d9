"""Loop programs whose dim 0 is reduced (a bias gradient summed over the
batch, with the elementwise gradient it is fused with) are split into
blocks of an outer kept dim so that threads share them
(``LoopProgram.split_for_threads``); equal to eager, and each output sums
its terms in the same order as unsplit (compared bit for bit)."""
import re

import numpy as np
import pytest

import tracec
from tracec.backends.cpu import fuse
from tracec.backends.cpu.loops import LoopProgram


def _parallel(comp) -> bool:
    # a kernel run across threads: the entry calls the module's run_for
    return bool(re.search(r"call [^\n]*@\w+_run_for\(", comp.ir("llvm")))


def _bias_grad(g, x):
    dz = g * (x > 0).float()
    return dz, dz.sum(0)


def _conv_bias_grad(g, y):
    dz = g * (y > 0).float()
    return dz, dz.sum((0, 2, 3))


def _int_and_max(a, b):
    return (a * b).sum(0), (a - b).amax(0)


CASES = [
    (_bias_grad, [(700, 1000), (700, 1000)], np.float32),
    (_conv_bias_grad, [(64, 32, 13, 13), (64, 32, 13, 13)], np.float32),
    (_int_and_max, [(600, 512), (600, 512)], np.int64),
]


def _args(shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.int64:
        return [tracec.tensor(rng.integers(-9, 9, s)) for s in shapes]
    return [tracec.tensor(rng.standard_normal(s).astype(dtype)) for s in shapes]


@pytest.mark.parametrize("fn,shapes,dtype", CASES, ids=[c[0].__name__ for c in CASES])
def test_split_kernels_match_eager_and_unsplit(fn, shapes, dtype, monkeypatch):
    args = _args(shapes, dtype)
    comp = tracec.compile(fn, backend="cpu")
    got = [t.numpy() for t in comp(*args)]
    for g, w in zip(got, fn(*args)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-4)
    assert _parallel(comp)
    # the same programs, unsplit: the same bits
    monkeypatch.setattr(fuse, "SPLIT_MIN_SIZE", 1 << 62)
    monkeypatch.setenv("TRACEC_NO_CACHE", "1")
    plain = tracec.compile(fn, backend="cpu")
    for g, w in zip(got, plain(*args)):
        np.testing.assert_array_equal(g, w.numpy())


def test_no_split_without_a_block_size():
    # 1009 columns (prime): no block of at least SPLIT_MIN_INNER columns.
    prog = LoopProgram([400, 1009], [True, False])
    prog.split_for_threads(1)
    assert prog.shape == [400, 1009]
    prog = LoopProgram([400, 1000], [True, False])
    prog.split_for_threads(1)
    assert prog.shape == [16, 400, 1000 // 16] or prog.shape[0] * prog.shape[2] == 1000
    assert prog.reduced == [False, True, False]
