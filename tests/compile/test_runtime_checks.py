"""Value checks eager mode makes on tensor data also run in compiled calls.

Each case is a function whose eager run raises PyTorch's error for bad
values (integer division by zero, multinomial probabilities, bernoulli p,
one_hot classes, binary_cross_entropy's range, masked_scatter's source size,
negative class targets, mvlgamma's domain, a distribution's parameters).
Compiled (``cpu``, ``interp``) after a call with good values, a call with
bad ones raises a RuntimeError with the same words, naming this file's line
on the cpu backend, and a failing training step leaves parameters and
optimizer state as they were.  The recorded ``check`` op fuses with its
neighbours, and a ``tracec build`` library returns its error code.
"""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import tracec
import tracec.nn.functional as F
from tracec import ops
from tracec.passes.fusion import count_kernels
from tracec.ir import parse_module
from program_runner import tracec_cli

HERE = __file__.rsplit("/", 1)[-1]


def _int_floor_divide(a, b):
    return (a * 2 + 1) // b


def _int_remainder(a, b):
    return (a + 1) % b


def _int_trunc_div(a, b):
    return tracec.div(a, b, rounding_mode="trunc") + 1


def _multinomial(p, seed):
    g = tracec.Generator().manual_seed(0)
    return tracec.multinomial(p * seed, 2, replacement=True, generator=g)


def _bernoulli(p):
    return tracec.bernoulli(p * 1.0)


def _bernoulli_(x, p):
    return (x * 1.0).bernoulli_(p)


def _one_hot(c):
    return F.one_hot(c + 0, 4) * 2


def _bce(x, t):
    return F.binary_cross_entropy(x * 1.0, t)


def _cross_entropy(x, t):
    return F.cross_entropy(x * 2.0, t, ignore_index=-100)


def _mvlgamma(x):
    return tracec.mvlgamma(x * 1.0, 3)


def _normal(x, s):
    return tracec.distributions.Normal(x, s * 1.0).log_prob(x).sum()


def _masked_scatter(x, m, s):
    return x.masked_scatter(m, s * 2.0)


I = tracec.int64
F32 = tracec.float32


def _t(v, d=F32):
    return tracec.tensor(v, dtype=d)


# name -> (function, good args, bad args, PyTorch's message)
CASES = {
    "floor_divide": (_int_floor_divide, (_t([5, -7, 9], I), _t([2, 3, -4], I)),
                     (_t([5, -7, 9], I), _t([2, 0, -4], I)), "ZeroDivisionError"),
    "remainder": (_int_remainder, (_t([5, -7, 9], I), _t([2, 3, -4], I)),
                  (_t([5, -7, 9], I), _t([0, 3, -4], I)), "ZeroDivisionError"),
    "div_trunc": (_int_trunc_div, (_t([5, -7, 9], I), _t([2, 3, -4], I)),
                  (_t([5, -7, 9], I), _t([2, 3, 0], I)), "ZeroDivisionError"),
    "multinomial_negative": (_multinomial, (_t([[0.2, 0.3, 0.5]]), _t(1.0)),
                             (_t([[0.2, 0.3, 0.5]]), _t(-1.0)),
                             # (PyTorch's sampling kernel's words: two draws with replacement)
                             "invalid multinomial distribution (encountering probability entry < 0)"),
    "multinomial_nan": (_multinomial, (_t([0.2, 0.3, 0.5]), _t(1.0)),
                        (_t([0.2, float("nan"), 0.5]), _t(1.0)),
                        # (a NaN fails its entry >= 0 check first)
                        "invalid multinomial distribution (encountering probability entry < 0)"),
    "multinomial_zero_sum": (_multinomial, (_t([0.2, 0.3, 0.5]), _t(1.0)),
                             (_t([0.2, 0.3, 0.5]), _t(0.0)),
                             "invalid multinomial distribution (sum of probabilities <= 0)"),
    "bernoulli": (_bernoulli, (_t([0.0, 0.5, 1.0]),), (_t([0.0, 1.5, 1.0]),),
                  "Expected p_in >= 0 && p_in <= 1 to be true, but got false."),
    "bernoulli_": (_bernoulli_, (_t([1.0, 2.0]), _t([0.5, 0.25])),
                   (_t([1.0, 2.0]), _t([0.5, -0.25])),
                   "Expected p_in >= 0 && p_in <= 1 to be true, but got false."),
    "one_hot_large": (_one_hot, (_t([0, 3, 1], I),), (_t([0, 4, 1], I),),
                      "Class values must be smaller than num_classes."),
    "one_hot_negative": (_one_hot, (_t([0, 3, 1], I),), (_t([0, 3, -1], I),),
                         "Class values must be non-negative."),
    "bce_input": (_bce, (_t([0.25, 0.5]), _t([0.0, 1.0])), (_t([0.25, 1.5]), _t([0.0, 1.0])),
                  "all elements of input should be between 0 and 1"),
    "bce_target": (_bce, (_t([0.25, 0.5]), _t([0.0, 1.0])), (_t([0.25, 0.5]), _t([0.0, -1.0])),
                   "all elements of target should be between 0 and 1"),
    "cross_entropy_negative_target": (
        _cross_entropy, (_t([[0.5, 1.0, 2.0], [1.0, 0.0, 0.0]]), _t([2, -100], I)),
        (_t([[0.5, 1.0, 2.0], [1.0, 0.0, 0.0]]), _t([2, -3], I)), "out of bounds"),
    "mvlgamma": (_mvlgamma, (_t([1.5, 2.0]),), (_t([1.5, 1.0]),),
                 "All elements must be greater than (p-1)/2"),
    "distribution_validate_args": (
        _normal, (_t([0.5, 1.0]), _t([1.0, 2.0])), (_t([0.5, 1.0]), _t([1.0, -2.0])),
        "Expected parameter scale (Tensor of shape (2,)) of distribution Normal"),
    "masked_scatter": (_masked_scatter, (_t([1.0, 2.0, 3.0]), _t([True, False, True], tracec.bool),
                                         _t([7.0, 8.0])),
                       (_t([1.0, 2.0, 3.0]), _t([True, True, True], tracec.bool), _t([7.0, 8.0])),
                       "Number of elements of source < number of ones in mask"),
}


#: PyTorch's exception where it is not a RuntimeError (compiled calls raise
#: a RuntimeError naming the line for every failed check).
EAGER_ERROR = {"cross_entropy_negative_target": IndexError,
               "distribution_validate_args": ValueError}


def _line_of(fn) -> int:
    """The line of ``fn``'s last statement (the one that fails)."""
    lines, start = inspect.getsourcelines(fn)
    return start + len(lines) - 1


@pytest.mark.parametrize("backend", ["cpu", "interp"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_call_raises(name, backend):
    fn, good, bad, message = CASES[name]
    with pytest.raises(EAGER_ERROR.get(name, RuntimeError), match=re.escape(message)):
        fn(*bad)                            # eager
    cf = tracec.compile(fn, backend=backend)
    first = cf(*good)                       # traced
    again = cf(*good)                       # compiled
    if not name.startswith(("bernoulli", "multinomial")):   # random draws differ per call
        np.testing.assert_allclose(again.numpy(), fn(*good).numpy(), rtol=1e-6)
        np.testing.assert_allclose(again.numpy(), first.numpy(), rtol=1e-6)
    assert again.shape == first.shape and again.dtype == first.dtype
    with pytest.raises(RuntimeError, match=re.escape(message)) as info:
        cf(*bad)
    if backend == "cpu":
        assert f"{HERE}:{_line_of(fn)}:" in str(info.value), str(info.value)
    # Good values still run after a failed call.
    assert cf(*good).shape == first.shape


@pytest.mark.parametrize("backend", [
    "cuda-emulated",
    pytest.param("cuda", marks=pytest.mark.skipif(tracec.cuda.gpu_count() == 0,
                                                   reason="no CUDA GPU (CuPy finds none)"))])
@pytest.mark.parametrize("name", ["floor_divide", "one_hot_negative"])
def test_cuda_reports_the_check(backend, name):
    fn, good, bad, message = CASES[name]
    cf = tracec.compile(fn, backend=backend)
    cf(*good)
    np.testing.assert_array_equal(cf(*good).numpy(), fn(*good).numpy())
    with pytest.raises(RuntimeError, match=re.escape(message)):
        cf(*bad)


class _Net(tracec.nn.Module):
    def __init__(self):
        super().__init__()
        tracec.manual_seed(0)
        self.lin = tracec.nn.Linear(3, 2)

    def forward(self, x, k, d):
        # An integer scale k // d: d == 0 must fail the whole step.
        return self.lin(x) * (k // d).to(tracec.float32)


def _setup():
    net = _Net()
    opt = tracec.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step(x, k, d, t):
        opt.zero_grad()
        loss = F.binary_cross_entropy(tracec.sigmoid(net(x, k, d)), t)
        loss.backward()
        opt.step()
        return loss
    return net, opt, step


def _state(net, opt):
    out = [p.detach().numpy().copy() for p in net.parameters()]
    for s in opt.state.values():
        out += [v.numpy().copy() for v in s.values() if isinstance(v, tracec.Tensor)]
    return out


@pytest.mark.parametrize("backend", ["cpu", "interp"])
def test_failing_step_changes_no_state(backend):
    x = tracec.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    k, d, t = _t([[3, 1]], I), _t([[2, 1]], I), _t([[1.0, 0.0], [0.0, 1.0]])
    net, opt, step = _setup()
    cstep = tracec.compile(step, backend=backend)
    ref_net, ref_opt, ref_step = _setup()
    for _ in range(6):                  # past the first calls' slower paths
        np.testing.assert_allclose(cstep(x, k, d, t).item(), ref_step(x, k, d, t).item(),
                                   rtol=1e-5)
    before = _state(net, opt)
    assert len(before) == 4            # weight, bias and their momentum buffers
    for _ in range(2):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            cstep(x, k, _t([[2, 0]], I), t)
    for a, b in zip(before, _state(net, opt)):
        np.testing.assert_array_equal(a, b)
    # ... and the next good step is the eager one's.
    np.testing.assert_allclose(cstep(x, k, d, t).item(), ref_step(x, k, d, t).item(),
                               rtol=1e-5)
    for a, b in zip(_state(net, opt), _state(ref_net, ref_opt)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _kernels(fn, *args) -> int:
    cf = tracec.compile(fn)
    cf(*args)
    cf(*args)
    return count_kernels(parse_module(cf.ir("optimized")))


def test_check_fuses_with_its_neighbours():
    a, b = _t([5, -7, 9], I), _t([2, 3, -4], I)

    def checked(a, b):
        return (a * 2 + 1) // b

    def unchecked(a, b):       # the same arithmetic, no check recorded
        q = ops.div(a * 2 + 1, b)
        r = (a * 2 + 1) - q * b
        return ops.where(ops.logical_and(ops.ne(r, 0), ops.ne(ops.lt(r, 0), ops.lt(b, 0))),
                         q - 1, q)
    np.testing.assert_array_equal(checked(a, b).numpy(), unchecked(a, b).numpy())
    cf = tracec.compile(checked)
    cf(a, b)
    assert "tracec.check" in cf.ir("optimized")
    assert _kernels(checked, a, b) == _kernels(unchecked, a, b) == 1


def test_check_primitive_rules():
    x = _t([1.0, 2.0], F32).requires_grad_(True)
    y = ops.check(x, ops.gt(x, 0.0), "must be positive")
    (y * y).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    with pytest.raises(RuntimeError, match="^must be positive$"):
        ops.check(x, ops.gt(x, 1.5), "must be positive")
    # cond broadcasts with x; the result has the broadcast shape
    z = ops.check(_t([1.0]), _t([True, True], tracec.bool), "m")
    assert tuple(z.shape) == (2,)


AOT_USER = '''
def step(a, b):
    return (a * 2 + 1) // (b + 1)
'''


def test_aot_library_returns_the_checks_error_code(tmp_path):
    """A ``tracec build`` library returns the failed check's code, which
    ``<fn>_error_message`` explains (the user's file:line, PyTorch's words)."""
    import ctypes
    user = tmp_path / "step.py"
    user.write_text(AOT_USER)
    lib_path = tmp_path / "libstep.so"
    # (the build traces with zeros: b + 1 is then no zero)
    r = tracec_cli(["build", f"{user}:step", "--arg", "a=i64[4]", "--arg", "b=i64[4]",
                    "-o", str(lib_path)], timeout=300)
    assert r.returncode == 0, r.stderr
    lib = ctypes.CDLL(str(lib_path))
    lib.step_error_message.restype = ctypes.c_char_p
    a = np.array([5, -7, 9, 1], np.int64)
    out = np.zeros(4, np.int64)

    def call(b):
        return lib.step(*[v.ctypes.data_as(ctypes.c_void_p) for v in (a, b, out)])
    assert call(np.array([1, 2, -3, 0], np.int64)) == 0
    np.testing.assert_array_equal(out, (a * 2 + 1) // np.array([2, 3, -2, 1]))
    rc = call(np.array([1, -1, 2, 0], np.int64))
    assert rc > 0
    msg = lib.step_error_message(rc)
    assert b"ZeroDivisionError" in msg and b"step.py:3:" in msg, msg


def test_failure_anywhere_in_a_threaded_kernel_is_reported():
    def f(x):
        return ops.check(x, ops.ge(x, 0.0), "must not be negative") * 2.0 + 1.0
    cf = tracec.compile(f)
    x = np.random.default_rng(0).random(1 << 19, dtype=np.float32)   # split across threads
    cf(tracec.tensor(x))
    np.testing.assert_allclose(cf(tracec.tensor(x)).numpy(), x * 2 + 1, rtol=1e-6)
    for k in (0, len(x) // 2 + 3, len(x) - 1):
        bad = x.copy()
        bad[k] = -1.0
        with pytest.raises(RuntimeError, match="must not be negative"):
            cf(tracec.tensor(bad))
