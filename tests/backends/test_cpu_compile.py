"""The cpu backend on whole compiled functions: training steps equal eager
and the interpreter, fused kernels vectorize, errors name the user's line,
objects reload, and kernels split across threads agree with one thread."""
from __future__ import annotations

import json
import numpy as np
import pytest

import tracec
from tracec import dtypes as dt
from tracec import ir
from tracec.backends import cpu, interp
from tracec.backends.cpu.runtime import CpuIndexError, CpuRuntimeError


# --- an MLP trained with SGD, raw tracec ops -------------------------------------

def _mlp_params(seed=0):
    tracec.manual_seed(seed)
    return [tracec.randn(12, 16, requires_grad=True), tracec.zeros(16, requires_grad=True),
            tracec.randn(16, 4, requires_grad=True), tracec.zeros(4, requires_grad=True)]


def _mlp_step(params, lr=0.05):
    W1, b1, W2, b2 = params

    def step(x, y):
        for p in params:
            p.grad = None
        h = tracec.relu(tracec.matmul(x, W1) + b1)
        loss = ((tracec.matmul(h, W2) + b2 - y) ** 2).mean()
        loss.backward()
        with tracec.no_grad():
            for p in params:
                p.sub_(lr * p.grad)
        return loss
    return step


@pytest.fixture(scope="module")
def mlp_runs():
    tracec.manual_seed(7)
    x, y = tracec.randn(32, 12), tracec.randn(32, 4)
    runs = {}
    for mode in ("eager", "interp", "cpu"):
        params = _mlp_params()
        step = _mlp_step(params)
        f = step if mode == "eager" else tracec.compile(step, backend=mode)
        losses = [f(x, y).item() for _ in range(5)]
        runs[mode] = (losses, [p.detach().numpy().copy() for p in params], f)
    return runs


@pytest.mark.parametrize("other", ["eager", "interp"])
def test_mlp_sgd_steps_equal(mlp_runs, other):
    losses, params, _ = mlp_runs["cpu"]
    want_losses, want_params, _ = mlp_runs[other]
    np.testing.assert_allclose(losses, want_losses, rtol=2e-5)
    for p, q in zip(params, want_params):
        np.testing.assert_allclose(p, q, rtol=2e-5, atol=2e-6)
    assert losses[-1] < losses[0]


def test_mlp_stages_print(mlp_runs):
    f = mlp_runs["cpu"][2]
    assert f.cache_info().traces == 1 and f.cache_info().hits == 4
    lowered = f.ir("lowered")
    assert "llvm.func" in lowered and "llvm.getelementptr inbounds" in lowered
    assert "define" in f.ir("llvm") and "ret i32" in f.ir("llvm")
    assert ".text" in f.ir("asm") or "ret" in f.ir("asm")


# --- fused kernels ------------------------------------------------------------------

@pytest.fixture(scope="module")
def fused():
    tracec.manual_seed(3)
    x, b = tracec.randn(64, 256), tracec.randn(256)

    def chain(x, b):
        h = tracec.relu(x + b) * 0.5
        return h, (h * h).sum(dim=1), tracec.exp(-h).sum(dim=0)
    f = tracec.compile(chain, backend="cpu")
    return f, chain, (x, b), f(x, b)


def test_fused_kernels_match_eager(fused):
    f, chain, args, got = fused
    want = chain(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
    assert "tracec.kernel" in f.ir("optimized")


def test_fused_elementwise_kernel_vectorizes(fused):
    asm = fused[0].ir("asm")
    assert "ymm" in asm or "zmm" in asm
    llvm_ir = fused[0].ir("llvm")
    assert "<8 x float>" in llvm_ir or "<16 x float>" in llvm_ir
    # reassoc is set on the accumulating adds of reductions and nowhere else
    flagged = [ln for ln in fused[0].ir("lowered").splitlines() if "reassoc" in ln]
    assert flagged and all("llvm.fadd" in ln for ln in flagged)
    assert len(flagged) == 2  # the two sums


def _kernel_module(build, arg_types, loc=("kernels.py", 3, 1)):
    """A function whose body ``build(block_args)`` -> returned values."""
    fn = ir.new_function("k", arg_types)
    results = build(fn.body.block, list(fn.body.block.args))
    ir.set_returns(fn, results)
    m = ir.new_module([fn])
    m.verify()
    return m


def _kernel(block, inputs, body, result_types, loc=("kernels.py", 9, 2)):
    """Append a tracec.kernel whose body is ``body(args) -> yielded values``."""
    k = ir.KernelOp(inputs, result_types, loc=loc)
    inner = k.block
    ys = body(inner, list(inner.args))
    inner.add_op(ir.YieldOp(ys))
    block.add_op(k)
    return list(k.results)


def _prim(block, name, operands, params, shape, dtype):
    op = ir.make_op(name, operands, params, (shape, dtype), loc=("kernels.py", 20, 4))
    block.add_op(op)
    return op.results[0]


def _compare(m, arrays, rtol=1e-5, atol=1e-6):
    want = interp.compile_module(m)(arrays)
    got = cpu.compile_module(m, asm=False)(arrays)
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and w.shape == g.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got


@pytest.mark.parametrize("axes", [(1,), (0,), (0, 1), (0, 2)])
def test_hand_built_kernel_with_reduction(axes):
    f32 = dt.float32
    shape = (6, 5, 7)
    out_shape = tuple(n for k, n in enumerate(shape) if k not in axes)

    def build(block, args):
        def body(kb, a):
            x, b = a
            t = _prim(kb, "mul", [x, b], {}, shape, f32)
            e = _prim(kb, "exp", [t], {}, shape, f32)
            s = _prim(kb, "reduce_sum", [e], {"axes": axes}, out_shape, f32)
            return [e, s]
        return _kernel(block, args, body, [ir.tensor_type(shape, f32),
                                           ir.tensor_type(out_shape, f32)])
    m = _kernel_module(build, [(shape, f32), ((7,), f32)])
    rng = np.random.default_rng(0)
    _compare(m, [rng.standard_normal(shape, np.float32), rng.standard_normal(7, np.float32)])


def test_kernel_that_is_not_one_loop_nest_runs_op_by_op():
    f32 = dt.float32

    def build(block, args):
        def body(kb, a):
            (x,) = a
            s = _prim(kb, "reduce_max", [x], {"axes": (1,)}, (4,), f32)
            b = _prim(kb, "broadcast_to", [_prim(kb, "reshape", [s], {"shape": (4, 1)},
                                                 (4, 1), f32)], {"shape": (4, 6)}, (4, 6), f32)
            d = _prim(kb, "sub", [x, b], {}, (4, 6), f32)
            r = _prim(kb, "reshape", [d], {"shape": (6, 4)}, (6, 4), f32)
            return [r, x]
        return _kernel(block, args, body, [ir.tensor_type((6, 4), f32),
                                           ir.tensor_type((4, 6), f32)])
    m = _kernel_module(build, [((4, 6), f32)])
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    got = _compare(m, [x])
    assert got[1] is not x and np.array_equal(got[1], x)


def test_returned_inputs_constants_and_duplicates_are_copies():
    f32 = dt.float32

    def build(block, args):
        (x,) = args
        c = ir.constant(np.arange(6, dtype=np.float32).reshape(2, 3), loc=("k.py", 1, 1))
        s = ir.constant(np.float32(2.5), loc=("k.py", 2, 1))
        block.add_op(c)
        block.add_op(s)
        y = _prim(block, "add", [x, c.results[0]], {}, (2, 3), f32)
        r = _prim(block, "reshape", [y], {"shape": (3, 2)}, (3, 2), f32)
        return [x, y, y, c.results[0], s.results[0], r]
    m = _kernel_module(build, [((2, 3), f32)])
    x = np.ones((2, 3), np.float32)
    got = _compare(m, [x])
    assert len({id(g) for g in got}) == len(got)


# --- errors ---------------------------------------------------------------------------

def test_out_of_range_index_raises_naming_the_line():
    E = tracec.randn(5, 3)

    def lookup(i):
        return E[i]  # the line
    line = lookup.__code__.co_firstlineno + 1
    f = tracec.compile(lookup, backend="cpu")
    f(tracec.tensor([1, 4]))
    np.testing.assert_allclose(f(tracec.tensor([0, 2])).numpy(), E.numpy()[[0, 2]])
    with pytest.raises(IndexError) as e:
        f(tracec.tensor([0, 7]))
    assert isinstance(e.value, CpuIndexError)
    msg = str(e.value)
    # The trace's own bounds check (recorded with the indexing, as eager
    # checks) fires first: the user's line and PyTorch's wording, without
    # the offending value, which eager and PyTorch also name ("index 7 is").
    assert f"test_cpu_compile.py:{line}" in msg and \
        "out of bounds for dimension 0 with size 5" in msg, msg


@pytest.mark.parametrize("name", ["gather", "scatter_add", "index_add"])
def test_index_ops_check_bounds(name):
    f32, i64 = dt.float32, dt.int64
    x = np.zeros((3, 4), np.float32)
    if name == "index_add":
        idx, src = np.array([0, 5]), np.ones((3, 2), np.float32)
        shapes = [((3, 4), f32), ((2,), i64), ((3, 2), f32)]
    else:
        idx = np.array([[0, 1], [2, -9], [3, 3]])
        src = np.ones((3, 2), np.float32)
        shapes = [((3, 4), f32), ((3, 2), i64)] + ([((3, 2), f32)] if name == "scatter_add"
                                                  else [])
    arrays = [x, idx] + ([src] if len(shapes) == 3 else [])
    out_shape = (3, 2) if name == "gather" else (3, 4)

    def build(block, args):
        return [_prim(block, name, args, {"axis": 1}, out_shape, f32)]
    exe = cpu.compile_module(_kernel_module(build, shapes), asm=False)
    with pytest.raises(CpuIndexError, match=rf"tracec.{name} .* at kernels.py:20:4: index"):
        exe(arrays)


def test_integer_power_with_negative_exponent_truncates_like_torch():
    i64 = dt.int64

    def build(block, args):
        return [_prim(block, "pow", args, {}, (3,), i64)]
    exe = cpu.compile_module(_kernel_module(build, [((3,), i64), ((3,), i64)]), asm=False)
    np.testing.assert_array_equal(exe([np.array([2, 3, -2]), np.array([10, 0, 3])])[0],
                                  [1024, 1, -8])
    # torch.pow of integer tensors: 1 ** -e = 1, (-1) ** -e = +-1, else 0 (0 ** -1 too)
    for b, e, want in [([2, 3, 4], [1, -1, 2], [2, 0, 16]), ([1, -1, -1], [-3, -3, -2], [1, -1, 1]),
                       ([0, -2, 5], [-1, -1, -9], [0, 0, 0])]:
        np.testing.assert_array_equal(exe([np.array(b), np.array(e)])[0], want)


def test_lowering_error_names_op_and_line():
    f32 = dt.float32

    def build(block, args):
        (x,) = args
        loss = _prim(block, "reduce_sum", [x], {"axes": (0,)}, (), f32)
        bw = ir.BackwardOp(loss, [x], loc=("model.py", 41, 8))
        block.add_op(bw)
        return [bw.results[0]]
    fn = ir.new_function("g", [((3,), f32)])
    ir.set_returns(fn, build(fn.body.block, list(fn.body.block.args)))
    with pytest.raises(cpu.LoweringError, match=r"tracec.backward .* at model.py:41:8"):
        cpu.compile_module(ir.new_module([fn]), asm=False)


# --- objects, threads -------------------------------------------------------------------

def test_load_object_rebuilds_an_equal_executable(mlp_runs):
    exe = mlp_runs["cpu"][2]._last.executable
    sig = json.loads(json.dumps(exe.signature))
    again = cpu.load_object(exe.object_code, sig)
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s).astype(dt.to_dtype(d).np) for s, d in sig["inputs"]]
    # The step's state updates are donated: each call updates its inputs in place.
    assert sig["donated"]
    for a, b in zip(exe([a.copy() for a in arrays]), again([a.copy() for a in arrays])):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="another target"):
        cpu.load_object(exe.object_code, dict(sig, target="riscv64/none"))


def test_large_kernels_split_across_threads_agree():
    f32 = dt.float32
    n, m_ = 1024, 600

    def build(block, args):
        x, w = args
        t = _prim(block, "tanh", [_prim(block, "mul", [x, w], {}, (n, m_), f32)], {},
                  (n, m_), f32)
        s = _prim(block, "reduce_sum", [t], {"axes": (1,)}, (n,), f32)
        mm = _prim(block, "matmul", [t, _prim(block, "transpose", [x], {"perm": (1, 0)},
                                             (m_, n), f32)], {}, (n, n), f32)
        return [t, s, mm]
    m = _kernel_module(build, [((n, m_), f32), ((m_,), f32)])
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((n, m_)).astype(np.float32),
              rng.standard_normal(m_).astype(np.float32)]
    exe = cpu.compile_module(m, asm=False)
    assert "run_for" in exe.stages["lowered"]    # a kernel split across threads
    exe.nthreads = 1
    one = exe(arrays)
    exe.nthreads = 4
    many = exe(arrays)
    for a, b in zip(one, many):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)
    want = interp.compile_module(m)(arrays)
    for a, w in zip(many, want):
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("d", [dt.float16, dt.bfloat16])
def test_half_precision_dtypes_round_like_the_interpreter(d):
    shape = (5, 40)

    def build(block, args):
        x, y = args
        s = _prim(block, "add", [x, y], {}, shape, d)
        p = _prim(block, "mul", [s, x], {}, shape, d)
        e = _prim(block, "exp", [_prim(block, "neg", [p], {}, shape, d)], {}, shape, d)
        t = _prim(block, "tanh", [p], {}, shape, d)
        r = _prim(block, "reduce_sum", [e], {"axes": (1,)}, (5,), d)
        c = _prim(block, "cast", [t], {"dtype": dt.float32}, shape, dt.float32)
        return [s, p, e, t, r, c]
    m = _kernel_module(build, [(shape, d), (shape, d)])
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    if d is dt.float16:
        arrays = [a.astype(np.float16) for a in arrays]
    else:
        arrays = [dt.round_bfloat16(a) for a in arrays]
    want = interp.compile_module(m)(arrays)
    got = cpu.compile_module(m, asm=False)(arrays)
    ulp = 2.0 ** -10 if d is dt.float16 else 2.0 ** -7
    for k, (w, g) in enumerate(zip(want, got)):
        assert w.dtype == g.dtype and w.shape == g.shape
        # within one unit in the last place (libm vs NumPy before rounding)
        np.testing.assert_allclose(g, w, rtol=(30 if k == 4 else 1.01) * ulp, atol=1e-3,
                                   err_msg=str(k))
        if k < 2:  # add and mul round exactly as NumPy does
            np.testing.assert_array_equal(g, w)


def test_lowered_stage_parses_back(mlp_runs):
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.llvm import LLVM
    from xdsl.parser import Parser
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(LLVM)
    text = mlp_runs["cpu"][2].ir("lowered")
    module = Parser(ctx, text).parse_module()
    module.verify()
    assert sum(1 for op in module.walk() if op.name == "llvm.func") >= 10


def test_identical_kernels_are_compiled_once():
    """The same computation on same-shaped buffers (a repeated layer, the
    update of same-shaped parameters) is one kernel function called twice:
    LLVM's work grows with the distinct kernels, not with depth."""
    import re
    import tracec

    def f(a, b, c, d):
        return (a * 2 + 1).tanh(), (b * 2 + 1).tanh(), a.T @ c, b.T @ d, (c - d).exp()
    g = tracec.compile(f, backend="cpu")
    args = [tracec.randn(40, 30) for _ in range(4)]
    g(*args)
    got = g(*args)
    want = f(*args)
    for x, y in zip(got, want):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5, atol=1e-5)
    lowered = g.ir("lowered")
    defined = re.findall(r"llvm\.func @(\w+)\(.*\{", lowered)
    called = re.findall(r"llvm\.call @(\w+)\(", lowered)
    kernels = [n for n in defined if n.endswith(("_kernel", "_kernel_1", "_kernel_2"))]
    # tanh(2x+1) twice -> one function; exp(c-d) is another.
    assert len(kernels) == 2, defined
    assert max(called.count(k) for k in kernels) == 2


# --- short products (few rows of C): B read in place -------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_short_matmuls_read_b_in_place(dtype):
    """An RNN step's products (few rows, B stored [K, N]: the unpacked
    kernel), A plain or read transposed, one or several batches, with a
    narrow last column panel; against NumPy."""
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(dtype)
    a, at, b = r(20, 72), r(72, 13), r(72, 83)
    ab, bb = r(3, 9, 40), r(3, 40, 50)

    def f(a, at, b, ab, bb):
        return a @ b, at.T @ b, ab @ bb

    cf = tracec.compile(f, backend="cpu")
    args = list(map(tracec.tensor, (a, at, b, ab, bb)))
    cf(*args)           # the first call runs eagerly
    got = cf(*args)
    assert cf.cache_info().compiles + cf.cache_info().loads == 1
    tol = 1e-4 if dtype == np.float32 else 1e-10
    for g, want in zip(got, (a @ b, at.T @ b, ab @ bb)):
        np.testing.assert_allclose(g.numpy(), want, rtol=tol, atol=tol)


# --- describe(op): the operand names of error messages ------------------------------

def test_describe_names_operands_in_linear_time_on_deep_kernel_chains(monkeypatch):
    """``describe`` names a kernel's operands by the argument they come from
    (``from x``), looking through the kernels before it.  Kernels share
    operands (here each takes ``y`` and a reduction of ``y``), so the walk
    keeps each value's answer: it once took 2**depth steps (minutes on a
    transformer's training step)."""
    from tracec.backends.cpu import lower
    from tracec.passes.pipeline import AUTODIFF, OPTIMIZE, run_passes

    def chain(x):
        for _ in range(18):
            x = x * x.sum(1, keepdim=True).tanh()
        return x

    module = tracec.trace(chain, tracec.ones(4, 8)).module
    run_passes(AUTODIFF + OPTIMIZE, module)
    kernels = [op for op in module.walk() if isinstance(op, ir.KernelOp)]
    assert len(kernels) >= 18
    walk, steps = lower._origin_name_walk, []

    def counted(*args):
        steps.append(1)
        return walk(*args)
    monkeypatch.setattr(lower, "_origin_name_walk", counted)
    assert lower.describe(kernels[-1]).startswith(
        "tracec.kernel (f32[4,1] from x, f32[4,8] from x) -> f32[4,8] at ")
    assert len(steps) <= 8 * len(kernels)


def test_x86_target_machines_prefer_no_gathers():
    """x86-64 target machines are tuned away from gathers and scatters
    (strided loops vectorize with shuffles); other targets keep their
    features as they are."""
    from tracec.backends.cpu import codegen
    feats = codegen.machine_features("x86_64-unknown-linux-gnu", "+avx2,+fma")
    assert feats.split(",") == ["+avx2", "+fma", "+prefer-no-gather", "+prefer-no-scatter"]
    assert codegen.machine_features("aarch64-unknown-linux-gnu", "+neon") == "+neon"
