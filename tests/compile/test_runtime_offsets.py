"""Integers read from a one-element buffer inside a compiled call are read at
run time (guards.md row 24g, ``tracec.runtime_int``): MoCo's queue pointer
(``ptr = int(self.queue_ptr)``; ``self.queue[:, ptr:ptr + B] = keys.T``;
``self.queue_ptr[0] = (ptr + B) % K``) is served by one trace and one
native compile for every pointer value, equal to eager after every call on
``interp`` and ``cpu``; gradients flow through the dynamic slice (a gather)
and the dynamic write (a where of the scattered slab); an offset out of
range is refused with a clear error naming the line (eager would clamp to
another shape) and changes no state; every other use of the number
(a comparison, ``range``, returning it, a write through the view) falls
back to a guard on the value and says so in ``cache_info()``."""
import inspect
import operator
import subprocess
import sys

import numpy as np
import pytest

import tracec
import tracec.nn as nn
from tracec import runtime_int, runtime_reads

HERE = __file__.rsplit("/", 1)[-1]
BACKENDS = ["interp", "cpu"]


class Queue(nn.Module):
    """facebookresearch/moco builder.py's queue and ``_dequeue_and_enqueue``."""

    def __init__(self, dim=8, K=16):
        super().__init__()
        self.K = K
        gen = np.random.default_rng(1)
        self.register_buffer("queue", tracec.tensor(gen.standard_normal((dim, K)).astype(
            np.float32)))
        self.register_buffer("queue_ptr", tracec.zeros(1, dtype=tracec.long))

    @tracec.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]

        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0  # for simplicity

        # replace the keys at ptr (dequeue and enqueue)
        self.queue[:, ptr:ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K  # move pointer

        self.queue_ptr[0] = ptr

    def forward(self, keys):
        self._dequeue_and_enqueue(keys)
        return self.queue.sum(1)


def _keys(n, sizes):
    gen = np.random.default_rng(0)
    return [tracec.tensor(gen.standard_normal((b, 8)).astype(np.float32))
            for b in (sizes * n)[:n]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_moco_queue_pointer_one_trace_one_compile(backend):
    compiled, eager = Queue(), Queue()
    f = tracec.compile(compiled, backend=backend)
    for i, k in enumerate(_keys(10, [4])):
        out, ref = f(k), eager(k)
        np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(compiled.queue.numpy(), eager.queue.numpy())
        assert compiled.queue_ptr.tolist() == eager.queue_ptr.tolist() == [(i + 1) * 4 % 16]
    info = f.cache_info()
    assert info.traces == 1 and info.compiles + info.loads == 1 and info.hits == 9, info
    assert len(info.runtime_values) == 1 and len(info.runtime_values[0]) == 1
    assert info.runtime_values[0][0].startswith("queue_ptr (int() at "), info.runtime_values
    assert HERE in info.runtime_values[0][0]
    assert not info.notes, info.notes
    assert not runtime_int.ACTIVE and sys.gettrace() is None


def test_moco_queue_pointer_with_a_symbolic_batch_size():
    compiled, eager = Queue(), Queue()
    f = tracec.compile(compiled, backend="cpu", dynamic=True)
    for k in _keys(8, [4, 2, 2, 4]):
        np.testing.assert_allclose(f(k).numpy(), eager(k).numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(compiled.queue.numpy(), eager.queue.numpy())
        assert compiled.queue_ptr.tolist() == eager.queue_ptr.tolist()
    info = f.cache_info()
    assert info.traces == 1 and info.compiles + info.loads == 1, info
    assert info.symbolic == [{"arg0[0]": "B: dynamic=True"}], info.symbolic


class Window(nn.Module):
    """A loss over ``w[p:p + 2]`` with ``p`` read from a buffer by item()."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(tracec.tensor(np.linspace(-1.0, 1.0, 7)))
        self.register_buffer("ptr", tracec.zeros(1, dtype=tracec.long))
        self.c = tracec.tensor(np.array([1.5, -2.0]))

    def loss(self, p):
        return (self.w[p:p + 2] ** 3 * self.c).sum()

    def forward(self):
        p = self.ptr.item()
        loss = self.loss(p)
        loss.backward()
        self.ptr[0] = (p + 2) % 6
        return loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_through_a_slice_at_a_run_time_offset(backend):
    compiled, eager = Window(), Window()
    f = tracec.compile(compiled, backend=backend)
    for i in range(6):
        p = int(eager.ptr)
        compiled.w.grad = eager.w.grad = None
        np.testing.assert_allclose(f().item(), eager().item(), rtol=1e-12)
        np.testing.assert_allclose(compiled.w.grad.numpy(), eager.w.grad.numpy(), rtol=1e-12)
        # finite differences of the eager loss at the same offset
        w0, h, fd = eager.w.detach().numpy().copy(), 1e-6, np.zeros(7)
        with tracec.no_grad():
            for j in range(7):
                for sign in (1, -1):
                    eager.w.data[j] = w0[j] + sign * h
                    fd[j] += sign * eager.loss(p).item() / (2 * h)
                eager.w.data[j] = w0[j]
        np.testing.assert_allclose(compiled.w.grad.numpy(), fd, rtol=1e-6, atol=1e-8)
        assert fd[p] != 0 and fd[(p + 2) % 7] == 0
    info = f.cache_info()
    assert info.traces == 1 and info.compiles + info.loads == 1, info
    assert info.runtime_values[0][0].startswith("ptr (item() at "), info.runtime_values


class Scatter(nn.Module):
    """``b[p:p + 2] = w * 3`` at a run-time offset, then a loss over ``b``."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(tracec.tensor(np.array([0.5, 0.25])))
        self.register_buffer("ptr", tracec.zeros(1, dtype=tracec.long))
        self.register_buffer("buf", tracec.tensor(np.linspace(0.0, 1.0, 6)))
        self.c = tracec.tensor(np.arange(6, dtype=np.float64) + 1)

    def forward(self):
        p = int(self.ptr)
        b = self.buf.clone()
        b[p:p + 2] = self.w * 3
        loss = (b * b * self.c).sum()
        loss.backward()
        self.ptr[0] = (p + 1) % 5
        return loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_through_a_write_at_a_run_time_offset(backend):
    compiled, eager = Scatter(), Scatter()
    f = tracec.compile(compiled, backend=backend)
    for i in range(7):
        p = int(eager.ptr)
        compiled.w.grad = eager.w.grad = None
        np.testing.assert_allclose(f().item(), eager().item(), rtol=1e-12)
        g = compiled.w.grad.numpy()
        np.testing.assert_allclose(g, eager.w.grad.numpy(), rtol=1e-12)
        # d/dw of sum(c * b^2) with b[p:p+2] = 3w: 18 * c[p:p+2] * w
        np.testing.assert_allclose(g, 18 * (np.arange(6) + 1.0)[p:p + 2] * eager.w.detach().numpy())
    info = f.cache_info()
    assert info.traces == 1 and info.compiles + info.loads == 1, info


class Reader(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("q", tracec.tensor(np.arange(8, dtype=np.float32) * 10))
        self.register_buffer("ptr", tracec.zeros(1, dtype=tracec.long))

    def forward(self, x):
        p = int(self.ptr)
        y = self.q[p:p + 3].sum() * x
        self.ptr[0] = p + 2
        return y


def _line(cls, text):
    lines, start = inspect.getsourcelines(cls.forward)
    return start + next(i for i, s in enumerate(lines) if text in s)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_offset_out_of_range_is_refused_naming_the_line_and_changes_nothing(backend):
    m = Reader()
    f = tracec.compile(m, backend=backend)
    x = tracec.ones(2)
    assert [f(x).tolist() for _ in range(3)] == [[30.0] * 2, [90.0] * 2, [150.0] * 2]
    assert int(m.ptr) == 6          # 6 + 3 > 8: eager would clamp to two elements
    eager = Reader()
    eager.ptr[0] = 6
    assert eager(x).tolist() == [130.0, 130.0]
    with pytest.raises(RuntimeError) as info:
        f(x)
    msg = str(info.value)
    assert "must lie inside its dimension of size 8 (offset in [0, 5])" in msg, msg
    assert f"{HERE}:{_line(Reader, 'self.q[p:p + 3]')}" in msg, msg
    assert int(m.ptr) == 6 and f.cache_info().traces == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_write_out_of_range_raises_as_eager_does(backend):
    compiled, eager = Queue(K=16), Queue(K=16)
    f = tracec.compile(compiled, backend=backend)
    k4 = _keys(1, [4])[0]
    f(k4), eager(k4)
    compiled.queue_ptr[0] = eager.queue_ptr[0] = 14
    with pytest.raises(RuntimeError, match="expanded size of the tensor"):
        eager(k4)          # (a slice: torch's copy_ into the view, expand's error)
    before = compiled.queue.numpy().copy()
    with pytest.raises(RuntimeError, match="must lie inside its dimension of size 16"):
        f(k4)
    np.testing.assert_array_equal(compiled.queue.numpy(), before)
    assert int(compiled.queue_ptr) == 14


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_offset_out_of_range_at_the_traced_call_is_eager_s_slice(backend):
    m = Reader()
    m.ptr[0] = 7
    f = tracec.compile(m, backend=backend)
    x = tracec.ones(2)
    assert f(x).tolist() == [70.0, 70.0]     # q[7:10]: one element, as eager
    assert any("slice start out of range" in n and "specialized on its value 7" in n
               for n in f.cache_info().notes), f.cache_info().notes


class OtherUses(nn.Module):
    """Uses of the number compiled code cannot read at run time."""

    def __init__(self):
        super().__init__()
        self.register_buffer("q", tracec.tensor(np.arange(8, dtype=np.float32)))
        self.register_buffer("ptr", tracec.zeros(1, dtype=tracec.long))

    def forward(self, x):
        p = int(self.ptr)
        if p > 3:
            x = x * 2
        v = self.q[p:p + 2]
        v.mul_(2)                       # written through: eager's aliasing
        s = sum(range(p))
        self.ptr[0] = (p + 1) % 6
        return x + s + v.sum(), p


@pytest.mark.parametrize("backend", BACKENDS)
def test_other_uses_specialize_on_the_value_and_say_so(backend):
    compiled, eager = OtherUses(), OtherUses()
    f = tracec.compile(compiled, backend=backend)
    x = tracec.ones(2)
    for i in range(9):
        (a, pa), (b, pb) = f(x), eager(x)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert type(pa) is int and pa == pb
        np.testing.assert_array_equal(compiled.q.numpy(), eager.q.numpy())
    info = f.cache_info()
    assert info.traces == 6 and info.runtime_values == [[]] * 6, info
    line = _line(OtherUses, "if p > 3")
    assert any(n.startswith(f"{__file__}:{line}: the number read from a tensor at ")
               and "(a comparison (>))" in n and "the trace is specialized on its value 0" in n
               for n in info.notes), info.notes


class Written(nn.Module):
    """The number written back and used as a tensor operand and an index."""

    def __init__(self):
        super().__init__()
        self.register_buffer("q", tracec.tensor(np.arange(12, dtype=np.float32).reshape(3, 4)))
        self.register_buffer("ptr", tracec.zeros(1, dtype=tracec.long))
        self.register_buffer("ptr2", tracec.tensor([1], dtype=tracec.int32))
        self.register_buffer("out", tracec.zeros(2, dtype=tracec.long))

    def forward(self, x, i):
        p = int(self.ptr)
        p2 = self.ptr2.item()
        r = x + p
        j = i * p2                      # an int32 0-d tensor stays int32
        t = tracec.tensor(p * 2)
        self.out.fill_(p + p2)
        row = self.q[p % 3]
        self.q[(p + 1) % 3] = row * 2
        col = self.q[:, p2:p2 + 2]
        self.ptr[0] = (p + 1) % 5
        self.ptr2[0] = (p2 - 1) % 3
        return r, j, t, row, col


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_number_as_an_operand_an_index_and_a_value_written(backend):
    compiled, eager = Written(), Written()
    f = tracec.compile(compiled, backend=backend)
    x, i = tracec.ones(2), tracec.tensor(3, dtype=tracec.int32)
    for _ in range(7):
        for u, v in zip(f(x, i), eager(x, i)):
            assert u.dtype == v.dtype and u.shape == v.shape
            np.testing.assert_array_equal(u.numpy(), v.numpy())
        for n in ("q", "ptr", "ptr2", "out"):
            np.testing.assert_array_equal(getattr(compiled, n).numpy(), getattr(eager, n).numpy())
    info = f.cache_info()
    assert info.traces == 1 and info.compiles + info.loads == 1 and not info.notes, info
    assert sorted(v.split(" ")[0] for v in info.runtime_values[0]) == ["ptr", "ptr2"]


class Inline(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("q", tracec.tensor(np.arange(8, dtype=np.float32)))
        self.register_buffer("ptr", tracec.zeros(1, dtype=tracec.long))

    def forward(self):
        y = self.q[int(self.ptr):int(self.ptr) + 2] * 1   # int() not stored in a local
        self.ptr += 1
        return y


@pytest.mark.parametrize("backend", ["interp"])
def test_int_not_stored_in_a_local_is_guarded_as_before(backend):
    compiled, eager = Inline(), Inline()
    f = tracec.compile(compiled, backend=backend)
    for _ in range(3):
        np.testing.assert_array_equal(f().numpy(), eager().numpy())
    info = f.cache_info()
    assert info.traces == 3 and info.runtime_values == [[]] * 3, info


#: Uses of ``p = int(self.ptr)`` and whether the compiled code still reads it
#: at run time (True) or the trace specializes on each value (False).
USES = {
    "operand": (lambda p, x: x * p, True),
    "rsub": (lambda p, x: (7 - p) * x, True),
    "compare_tensor": (lambda p, x: (tracec.arange(8) == p).float() * x, True),
    "full": (lambda p, x: tracec.full((8,), p) * x, True),
    "zeros": (lambda p, x: tracec.zeros(p + 1).sum() + x, False),
    "arange": (lambda p, x: tracec.arange(p + 1).sum() * x, False),
    "isinstance": (lambda p, x: x * (2 if isinstance(p, int) else 3), False),
    "numpy": (lambda p, x: x * float(np.cos(p)), False),
    "float": (lambda p, x: x * (p * 0.5), False),
    "list_index": (lambda p, x: x * [1, 2, 3, 4][p], False),
    "format": (lambda p, x: x * len(f"{p:03d}"), False),
    "slice_to_end": (lambda p, x: x[p:].sum() * 1, False),
    "slice_step": (lambda p, x: x[p:p + 4:2].sum() * 1, False),
    "negative_index": (lambda p, x: x[-p - 1] * 1, False),
    "narrow": (lambda p, x: x.narrow(0, p, 2) * 1, False),
    "split": (lambda p, x: x.split(p + 1)[0].sum() * 1, False),
    "int_method": (lambda p, x: x * (p.bit_length() + p.real), False),
    "sum_of_list": (lambda p, x: x * sum([p, 1]), True),
}


class Use(nn.Module):
    def __init__(self, use):
        super().__init__()
        self.use = use
        self.register_buffer("ptr", tracec.zeros(1, dtype=tracec.long))

    def forward(self, x):
        p = int(self.ptr)
        y = self.use(p, x)
        self.ptr[0] = (p + 1) % 4
        return y


@pytest.mark.parametrize("name", sorted(USES))
def test_each_use_of_the_number_equals_eager(name):
    use, at_run_time = USES[name]
    compiled, eager = Use(use), Use(use)
    f = tracec.compile(compiled, backend="interp")
    x = tracec.arange(8, dtype=tracec.float32)
    for _ in range(6):
        a, b = f(x), eager(x)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    info = f.cache_info()
    assert info.traces == (1 if at_run_time else 4), info
    assert bool(info.runtime_values[-1]) == at_run_time
    assert at_run_time or any("specialized on its value" in n for n in info.notes)


class Indexed(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("q", tracec.tensor(np.arange(4, dtype=np.float32)))
        self.register_buffer("ptr", tracec.zeros(1, dtype=tracec.long))

    def forward(self):
        p = int(self.ptr)
        y = self.q[p] * 2
        self.ptr[0] = p + 1
        return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_out_of_range_is_refused_where_eager_raises(backend):
    compiled, eager = Indexed(), Indexed()
    f = tracec.compile(compiled, backend=backend)
    for _ in range(4):
        assert f().item() == eager().item()
    with pytest.raises(IndexError):
        eager()
    with pytest.raises(RuntimeError, match="an index read from a tensor at run time"):
        f()
    assert int(compiled.ptr) == 4 and f.cache_info().traces == 1


class Returned(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(tracec.tensor(np.linspace(-1.0, 1.0, 7)))
        self.register_buffer("ptr", tracec.zeros(1, dtype=tracec.long))

    def forward(self, x):
        p = int(self.ptr)
        y = (self.w[p:p + 2] ** 2 * x).sum()
        self.ptr[0] = (p + 2) % 6
        return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_outside_the_call_through_a_slice_at_a_run_time_offset(backend):
    compiled, eager = Returned(), Returned()
    f = tracec.compile(compiled, backend=backend)
    x = tracec.tensor(np.array([1.0, 3.0]))
    for _ in range(7):
        compiled.w.grad = eager.w.grad = None
        a, b = f(x), eager(x)
        a.backward()
        b.backward()
        np.testing.assert_allclose(a.item(), b.item(), rtol=1e-12)
        np.testing.assert_allclose(compiled.w.grad.numpy(), eager.w.grad.numpy(), rtol=1e-12)
    assert f.cache_info().traces == 1


class Both(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("q", tracec.tensor(np.arange(8, dtype=np.float32)))
        self.register_buffer("ptr", tracec.zeros(1, dtype=tracec.long))

    def forward(self, x):
        a = int(self.ptr)
        b = operator.index(self.ptr)
        y = self.q[a:a + 2] * x + self.q[b:b + 2]
        self.ptr[0] = (a + 1) % 6
        return y


def test_code_run_eagerly_many_times_first_still_reads_at_run_time():
    # (CPython 3.11 specializes a hot call site: operator.index's call then
    # happens at its PRECALL instruction)
    compiled, eager = Both(), Both()
    x = tracec.ones(2)
    for _ in range(30):
        compiled(x), eager(x)
    f = tracec.compile(compiled, backend="interp")
    for _ in range(8):
        np.testing.assert_array_equal(f(x).numpy(), eager(x).numpy())
        np.testing.assert_array_equal(compiled.ptr.numpy(), eager.ptr.numpy())
    info = f.cache_info()
    assert info.traces == 1 and len(info.runtime_values[0]) == 2, info


class Converted(nn.Module):
    """Conversions other than ``name = int(buf)``: not rebound."""

    def __init__(self):
        super().__init__()
        self.register_buffer("q", tracec.tensor(np.arange(8, dtype=np.float32)))
        self.register_buffer("ptr", tracec.zeros(1, dtype=tracec.long))
        self.bufs = [self.ptr]

    def forward(self, x):
        n = range(self.ptr)                  # __index__ inside range(): guarded
        a = int(self.bufs[0])
        b = operator.index(self.ptr)
        y = self.q[a:a + 2] * x + self.q[b:b + 2] + len(n)
        self.ptr[0] = (a + 1) % 6
        return y, type(n).__name__


def test_only_the_stored_result_of_int_is_rebound():
    compiled, eager = Converted(), Converted()
    f = tracec.compile(compiled, backend="interp")
    x = tracec.ones(2)
    for _ in range(12):
        (a, n), (b, m) = f(x), eager(x)
        assert n == m == "range"
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    info = f.cache_info()
    assert info.traces == 6 and info.runtime_values == [[]] * 6, info


def test_rebinding_leaves_no_trace_function_behind():
    f = tracec.compile(Queue(), backend="interp")
    for k in _keys(3, [4]):
        f(k)
    assert sys.gettrace() is None and not runtime_int.ACTIVE and not runtime_reads._PENDING


def test_one_module_on_emulated_cuda_kernels_equals_interp_for_every_offset():
    from tracec.backends import interp
    from tracec.backends.cuda.emulated import compile_emulated
    m = Queue()
    f = tracec.compile(m, backend="interp")
    keys = _keys(1, [4])[0]
    f(keys)
    entry = f._last
    module = entry.optimized()
    arrays = [keys.numpy() if s.kind == "arg" else s.source.numpy().copy()
              for s in entry.trace.inputs]
    (at,) = [i for i, s in enumerate(entry.trace.inputs) if s.source is m.queue_ptr]
    ref_exe, gpu_exe = interp.compile_module(module), compile_emulated(module)
    for ptr in (0, 4, 8, 12):
        arrays[at][...] = ptr
        ref, got = ref_exe(arrays), gpu_exe(arrays)
        assert len(ref) == len(got)
        for g, r in zip(got, ref):      # (the sum's order differs on the gpu)
            np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-6, atol=1e-6)


class Window2d(nn.Module):
    """A 2-d window at two run-time offsets, read (with a gradient) and written."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(tracec.tensor(np.linspace(-1.0, 1.0, 30).reshape(5, 6)))
        self.register_buffer("q", tracec.tensor(np.arange(30, dtype=np.float64).reshape(5, 6)))
        self.register_buffer("r", tracec.zeros(1, dtype=tracec.long))
        self.register_buffer("c", tracec.tensor([1]))

    def forward(self, x):
        r = int(self.r)
        c = int(self.c)     # (r, c = int(..), int(..) stores no single result: guarded)
        loss = (self.w[r:r + 2, c:c + 3] ** 2 * x).sum()
        loss.backward()
        self.q[r:r + 2, c:c + 3] = self.q[r:r + 2, c:c + 3] * 2 + x
        self.q[r, c + 2] = -1.0
        self.r[0] = (r + 1) % 4
        self.c[0] = (c + 2) % 4
        return loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_run_time_offsets_in_one_index(backend):
    compiled, eager = Window2d(), Window2d()
    f = tracec.compile(compiled, backend=backend)
    x = tracec.tensor(np.arange(6, dtype=np.float64).reshape(2, 3) + 1)
    for _ in range(8):
        compiled.w.grad = eager.w.grad = None
        np.testing.assert_allclose(f(x).item(), eager(x).item(), rtol=1e-12)
        np.testing.assert_allclose(compiled.w.grad.numpy(), eager.w.grad.numpy(), rtol=1e-12)
        np.testing.assert_array_equal(compiled.q.numpy(), eager.q.numpy())
        assert compiled.r.tolist() == eager.r.tolist() and compiled.c.tolist() == eager.c.tolist()
    info = f.cache_info()
    assert info.traces == 1 and info.compiles + info.loads == 1 and not info.notes, info
    assert sorted(v.split(" ")[0] for v in info.runtime_values[0]) == ["c", "r"]


class TwoPointers(nn.Module):
    """Two pointers in one buffer: ``int(self.ptrs[0])``, ``self.ptrs[1].item()``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("q", tracec.tensor(np.arange(10, dtype=np.float32)))
        self.register_buffer("ptrs", tracec.tensor([0, 5]))

    def forward(self, x):
        head = int(self.ptrs[0])
        tail = self.ptrs[1].item()
        self.q[head:head + 2] = self.q[tail:tail + 2] + x
        self.ptrs[0] = (head + 2) % 8
        self.ptrs[1] = (tail + 3) % 8
        return self.q.sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_pointers_read_from_elements_of_one_buffer(backend):
    compiled, eager = TwoPointers(), TwoPointers()
    f = tracec.compile(compiled, backend=backend)
    x = tracec.ones(2)
    for _ in range(9):
        np.testing.assert_array_equal(f(x).numpy(), eager(x).numpy())
        np.testing.assert_array_equal(compiled.q.numpy(), eager.q.numpy())
        assert compiled.ptrs.tolist() == eager.ptrs.tolist()
    info = f.cache_info()
    assert info.traces == 1 and not info.notes, info
    assert [v.split(" (")[0] for v in info.runtime_values[0]] == ["ptrs", "ptrs"]


AOT_STEP = '''
import numpy as np
import tracec as torch
import tracec.nn as nn


class Queue(nn.Module):
    def __init__(self, dim=8, K=16):
        super().__init__()
        self.K = K
        self.register_buffer("queue", torch.tensor(np.arange(dim * K, dtype=np.float32)
                                                   .reshape(dim, K)))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    def forward(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        self.queue[:, ptr:ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K
        self.queue_ptr[0] = ptr
        return self.queue.sum(1)


model = Queue()


def step(keys):
    return model(keys)
'''

AOT_DRIVER = r'''
#include <stdio.h>
#include "libstep.h"
int main(void) {
    float keys[32], queue[128], out[8];
    int64_t ptr[1];
    step_init_state(ptr, queue);
    for (int i = 0; i < 32; i++) keys[i] = 1000.0f + i;
    for (int call = 0; call < 5; call++) {
        int rc = step(keys, ptr, queue, out);
        printf("%d %ld %.0f %.0f\n", rc, (long)ptr[0], queue[4 * call % 16], out[0]);
    }
    ptr[0] = 14;
    int rc = step(keys, ptr, queue, out);
    printf("%d %ld %s\n", rc, (long)ptr[0], step_error_message(rc));
    return 0;
}
'''


def test_a_tracec_build_library_reads_the_pointer_at_run_time(tmp_path):
    from aot_helpers import CC, compile_c, tracec_build
    if CC is None:
        pytest.skip("needs a C compiler")
    (tmp_path / "step.py").write_text(AOT_STEP)
    r = tracec_build(tmp_path / "step.py", "step", tmp_path / "out" / "libstep.so",
                     "--arg", "keys=f32[4,8]")
    assert r.returncode == 0, r.stderr
    exe = compile_c(AOT_DRIVER, tmp_path / "drive", tmp_path / "out")
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    lines = lines.splitlines()
    # each call writes keys.T (column j of the block holds 1000 + 8 j) at its pointer
    queue = np.arange(128, dtype=np.float32).reshape(8, 16)
    for call in range(5):
        p = 4 * call % 16
        queue[:, p:p + 4] = (1000 + np.arange(32, dtype=np.float32)).reshape(4, 8).T
        rc, ptr, first, out0 = lines[call].split()
        assert (int(rc), int(ptr), float(first), float(out0)) == \
            (0, (p + 4) % 16, 1000.0, float(queue[0].sum())), lines[call]
    rc, ptr, msg = lines[5].split(" ", 2)
    assert rc != "0" and ptr == "14", lines[5]
    assert "step.py:18" in msg and "must lie inside its dimension of size 16" in msg, msg


class _SameLine(Queue):
    @tracec.no_grad()
    def _dequeue_and_enqueue(self, keys):
        b = keys.shape[0]
        ptr = int(self.queue_ptr); self.queue[:, ptr:ptr + b] = keys.T  # noqa: E702
        self.queue_ptr[0] = (ptr + b) % self.K


def test_a_use_of_the_number_before_its_local_is_rebound_is_guarded():
    """On Python 3.12 a frame already running gets line events only, so
    ``ptr = int(buf); <use of ptr>`` on one line used the plain number
    before any rebinding: that value was baked in without a guard (every
    later call wrote the first pointer's slot).  The number is specialized
    there; on 3.11 the opcode event rebinds it at once."""
    compiled, eager = _SameLine(), _SameLine()
    f = tracec.compile(compiled, backend="cpu")
    for i, k in enumerate(_keys(8, [4])):
        np.testing.assert_allclose(f(k).numpy(), eager(k).numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(compiled.queue.numpy(), eager.queue.numpy())
        assert compiled.queue_ptr.tolist() == [(i + 1) * 4 % 16]


class _SplitLine(Queue):
    @tracec.no_grad()
    def _dequeue_and_enqueue(self, keys):
        b = keys.shape[0]
        ptr = \
            int(self.queue_ptr)
        self.queue[:, ptr:ptr + b] = keys.T
        self.queue_ptr[0] = (ptr + b) % self.K


def test_an_assignment_split_over_lines_is_rebound():
    """``ptr = \\`` then ``int(buf)`` on the next line: the store belongs to
    the first line, so a line event comes at the store itself; the
    rebinding waits for the instruction after it (one trace)."""
    compiled, eager = _SplitLine(), _SplitLine()
    f = tracec.compile(compiled, backend="cpu")
    for i, k in enumerate(_keys(8, [4])):
        np.testing.assert_allclose(f(k).numpy(), eager(k).numpy(), rtol=1e-6, atol=1e-6)
        assert compiled.queue_ptr.tolist() == [(i + 1) * 4 % 16]
    assert f.cache_info().traces == 1, f.cache_info()


def test_a_rebinding_never_made_specializes_the_number(monkeypatch):
    """Wherever the interpreter gives no event to rebind the local (the
    trace function is never called), the number is guarded: calls with
    another pointer retrace instead of reusing the first one's slot."""
    monkeypatch.setattr(runtime_reads, "_rebind_after_store", _rebind_never)
    compiled, eager = Queue(), Queue()
    f = tracec.compile(compiled, backend="cpu")
    for k in _keys(8, [4]):
        np.testing.assert_allclose(f(k).numpy(), eager(k).numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(compiled.queue.numpy(), eager.queue.numpy())
    info = f.cache_info()
    assert info.traces == 4, info           # one per pointer value 0, 4, 8, 12
    assert any("could not be rebound" in n for n in info.size_notes), info.size_notes


def _rebind_never(frame, target, ri):
    """``_rebind_after_store`` on an interpreter that never calls the frame's
    trace function: the rebinding stays pending until the call ends."""
    runtime_reads._PENDING.append((frame, frame.f_trace, frame.f_trace_opcodes, [ri]))
