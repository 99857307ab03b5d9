"""The cpu backend's memory traffic savers, against the interpreter:

* matmul operands that are transposes of the last two axes are read through
  the GEMM packing, not materialized (unless something else reads them);
* a materialized transpose is a cache-blocked kernel;
* outputs donated to inputs (``compile_module(donate=...)``, the new values
  of state tensors in ``tracec.compile``) are computed in place when that is
  safe, and only then;
* the worker pool: parallel kernels agree with one thread, from several
  Python threads at once, and without the pool (an object linked alone).
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import tracec
from tracec import dtypes as dt
from tracec import ir
from tracec.backends import cpu, interp

F32, F64 = dt.float32, dt.float64
RNG = np.random.default_rng(42)


def _module(build, arg_types):
    fn = ir.new_function("k", arg_types)
    results = build(fn.body.block, list(fn.body.block.args))
    ir.set_returns(fn, results)
    m = ir.new_module([fn])
    m.verify()
    return m


def _prim(block, name, operands, params, shape, dtype):
    op = ir.make_op(name, operands, params, (shape, dtype), loc=("inplace.py", 7, 3))
    block.add_op(op)
    return op.results[0]


def _t(block, x, shape, dtype):
    """Transpose of the last two axes."""
    n = len(shape)
    perm = tuple(range(n - 2)) + (n - 1, n - 2)
    out = tuple(shape[p] for p in perm)
    return _prim(block, "transpose", [x], {"perm": perm}, out, dtype), out


def _mm(block, a, b, ashape, bshape, dtype):
    batch = np.broadcast_shapes(ashape[:-2], bshape[:-2])
    out = tuple(batch) + (ashape[-2], bshape[-1])
    return _prim(block, "matmul", [a, b], {}, out, dtype)


def _arrays(shapes, dtype):
    if np.dtype(dtype).kind == "f":
        return [RNG.standard_normal(s).astype(dtype) for s in shapes]
    return [RNG.integers(-3, 4, s).astype(dtype) for s in shapes]


def _close(got, want, dtype):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        if g.dtype.kind == "f":
            tol = 2e-4 if g.dtype == np.float32 else 1e-10
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol * 10)
        else:
            np.testing.assert_array_equal(g, w)


def _kernel_names(exe) -> list[str]:
    import re
    return re.findall(r"llvm\.func @\w+?_(transpose\w*|gemm\w*|matmul\w*)\(", exe.stages["lowered"])


# --- transposed matmul operands -----------------------------------------------------

# (M, K, N, batch of a, batch of b): small row-kernel sizes and packed-GEMM sizes
# with edge tiles, batched and broadcast.
MM_SHAPES = [(3, 4, 5, (), ()), (33, 70, 45, (), ()), (70, 65, 50, (), ()),
             (32, 200, 96, (), ()), (9, 64, 130, (2,), (2,)), (50, 60, 70, (2, 1), (3,)),
             (1, 7, 1, (), ()),
             # narrower than the GEMM's register tile: matmul.py's narrow kernel
             # (several power-of-two vector pieces per row, row groups, batches)
             (37, 50, 10, (), ()), (9, 33, 24, (), ()), (5, 8, 31, (3,), (3,)),
             (6, 20, 3, (2, 1), (3,)), (70, 65, 16, (), ()), (4, 5, 1, (), ())]


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_transposed_operands_are_read_in_place(ta, tb, dtype):
    d = dt.from_numpy_dtype(np.dtype(dtype))
    types, shapes = [], []
    for M, K, N, ba, bb in MM_SHAPES:
        sa = ba + ((K, M) if ta else (M, K))
        sb = bb + ((N, K) if tb else (K, N))
        shapes += [sa, sb]
        types += [(sa, d), (sb, d)]

    def build(block, args):
        outs = []
        it = iter(args)
        for M, K, N, ba, bb in MM_SHAPES:
            a, b = next(it), next(it)
            sa = ba + ((K, M) if ta else (M, K))
            sb = bb + ((N, K) if tb else (K, N))
            if ta:
                a, sa = _t(block, a, sa, d)
            if tb:
                b, sb = _t(block, b, sb, d)
            outs.append(_mm(block, a, b, sa, sb, d))
        return outs
    m = _module(build, types)
    arrays = _arrays(shapes, dtype)
    exe = cpu.compile_module(m, asm=False)
    _close(exe(arrays), interp.compile_module(m)(arrays), dtype)
    assert not any(k.startswith("transpose") for k in _kernel_names(exe))


@pytest.mark.parametrize("tb", [False, True])
def test_narrow_products_use_the_register_row_kernel(tb):
    """A classifier's last layer ([B, 512] @ [512, 10], or x @ w.T with w
    [10, 512]) runs the narrow kernel, not the row loop (12x slower)."""
    d = dt.float32
    sb = (10, 512) if tb else (512, 10)

    def build(block, args):
        b, shape = (_t(block, args[1], sb, d) if tb else (args[1], sb))
        return [_mm(block, args[0], b, (64, 512), shape, d)]
    m = _module(build, [((64, 512), d), (sb, d)])
    arrays = _arrays([(64, 512), sb], np.float32)
    exe = cpu.compile_module(m)
    _close(exe(arrays), interp.compile_module(m)(arrays), np.float32)
    assert "matmul_narrow" in _kernel_names(exe)


def test_transpose_with_other_users_is_materialized_once():
    shape = (64, 96)

    def build(block, args):
        a, w = args
        wt, st = _t(block, w, shape, F32)                        # [96, 64]
        y = _mm(block, a, wt, (40, 96), st, F32)                 # a @ w.T: read in place
        s = _prim(block, "mul", [wt, wt], {}, st, F32)           # other readers...
        u = _mm(block, a, _prim(block, "neg", [wt], {}, st, F32), (40, 96), st, F32)
        wtt, _ = _t(block, wt, st, F32)                          # (w.T).T, read by a matmul
        v = _mm(block, _prim(block, "neg", [a], {}, (40, 96), F32),
                _mm(block, wt, wtt, st, shape, F32), (40, 96), (96, 96), F32)
        return [y, s, u, v, wt]                                  # ...and the return
    m = _module(build, [((40, 96), F32), (shape, F32)])
    arrays = _arrays([(40, 96), shape], np.float32)
    exe = cpu.compile_module(m, asm=False)
    got = exe(arrays)
    _close(got, interp.compile_module(m)(arrays), np.float32)
    # One materialized transpose (for mul, neg and the return); (w.T).T is w.
    assert sum(k.startswith("transpose") for k in _kernel_names(exe)) == 1


def test_double_transpose_and_batched_perm_fold():
    shape = (2, 3, 40, 56)

    def build(block, args):
        a, b = args
        bt, st = _t(block, b, shape, F32)           # [2, 3, 56, 40]
        btt, _ = _t(block, bt, st, F32)             # back to [2, 3, 40, 56]
        at, sat = _t(block, a, (2, 3, 56, 40), F32)  # [2, 3, 40, 56]
        return [_mm(block, at, _t(block, btt, shape, F32)[0], sat, st, F32)]
    m = _module(build, [((2, 3, 56, 40), F32), (shape, F32)])
    arrays = _arrays([(2, 3, 56, 40), shape], np.float32)
    exe = cpu.compile_module(m, asm=False)
    _close(exe(arrays), interp.compile_module(m)(arrays), np.float32)
    assert not any(k.startswith("transpose") for k in _kernel_names(exe))


def test_compiled_linear_layers_do_not_transpose_weights():
    tracec.manual_seed(0)
    lin = tracec.nn.Linear(96, 80)
    x = tracec.randn(32, 96)

    @tracec.compile(backend="cpu")
    @tracec.no_grad()
    def f(x):
        return lin(x).sum()
    for _ in range(3):
        f(x)
    want = (x.numpy() @ lin.weight.detach().numpy().T + lin.bias.detach().numpy()).sum()
    np.testing.assert_allclose(f(x).item(), want, rtol=1e-4)
    assert "transpose" not in f.ir("lowered").split("llvm.func @")[0] + "".join(
        s.split("(")[0] for s in f.ir("lowered").split("llvm.func @")[1:])


# --- materialized transposes ----------------------------------------------------------

@pytest.mark.parametrize("shape,perm,dtype", [
    ((70, 45), (1, 0), np.float32), ((512, 784), (1, 0), np.float32),
    ((3, 40, 33), (0, 2, 1), np.float64), ((3, 5, 7, 9), (3, 1, 0, 2), np.float32),
    ((40, 50), (1, 0), np.int64), ((37, 41), (1, 0), np.int32), ((40, 50), (1, 0), np.bool_),
    ((64, 3, 64), (2, 1, 0), np.float32), ((5, 6, 7), (0, 2, 1), np.float16),
    ((2, 1, 3), (1, 2, 0), np.float32), ((4, 6, 5), (1, 0, 2), np.float32),
])
def test_blocked_transpose_matches_interp(shape, perm, dtype):
    d = dt.from_numpy_dtype(np.dtype(dtype))
    out = tuple(shape[p] for p in perm)

    def build(block, args):
        return [_prim(block, "transpose", [args[0]], {"perm": perm}, out, d)]
    m = _module(build, [(shape, d)])
    a = (RNG.random(shape) < 0.5) if dtype is np.bool_ else _arrays([shape], dtype)[0]
    exe = cpu.compile_module(m, asm=False)
    got = exe([a])
    np.testing.assert_array_equal(got[0], a.transpose(perm))
    exe.nthreads = 1
    np.testing.assert_array_equal(exe([a])[0], a.transpose(perm))


# --- donated outputs ---------------------------------------------------------------------

def _update_module():
    """(x, s, m) -> (sum(x), s - 0.1 * (0.9 * m + x), 0.9 * m + x): an SGD step
    as one fused kernel."""
    shape = (300, 70)

    def build(block, args):
        x, s, mom = args
        k = ir.KernelOp([x, s, mom], [ir.tensor_type(shape, F32)] * 2, loc=("u.py", 2, 1))
        kb = k.block
        kx, ks, km = kb.args
        c = ir.constant(np.float32(0.9), loc=("u.py", 1, 1))
        lr = ir.constant(np.float32(0.1), loc=("u.py", 1, 1))
        kb.add_op(c)
        kb.add_op(lr)

        def bc(const_op):
            return _prim(kb, "broadcast_to", [const_op.results[0]], {"shape": shape}, shape, F32)
        nm = _prim(kb, "add", [_prim(kb, "mul", [km, bc(c)], {}, shape, F32), kx], {}, shape, F32)
        ns = _prim(kb, "sub", [ks, _prim(kb, "mul", [nm, bc(lr)], {}, shape, F32)], {}, shape, F32)
        kb.add_op(ir.YieldOp([nm, ns]))
        block.add_op(k)
        total = _prim(block, "reduce_sum", [x], {"axes": (0, 1)}, (), F32)
        return [total, k.results[1], k.results[0]]
    return _module(build, [(shape, F32)] * 3), shape


def test_donated_state_is_updated_in_place_and_equals_interp():
    m, shape = _update_module()
    exe = cpu.compile_module(m, asm=False, donate={1: 1, 2: 2})
    assert exe.signature["donated"] == [[1, 1], [2, 2]]
    arrays = _arrays([shape] * 3, np.float32)
    want = interp.compile_module(m)([a.copy() for a in arrays])
    x, s, mom = arrays
    got = exe(arrays)
    assert got[1] is s and got[2] is mom and got[0] is not x
    _close(got, want, np.float32)
    # Same results on one thread and without donation.
    plain = cpu.compile_module(m, asm=False)
    assert plain.signature["donated"] == []
    again = _arrays([shape] * 3, np.float32)
    _close(plain([a.copy() for a in again]), exe([a.copy() for a in again]), np.float32)


def test_donated_input_sharing_memory_is_copied_first():
    m, shape = _update_module()
    exe = cpu.compile_module(m, asm=False, donate={1: 1, 2: 2})
    a = _arrays([shape], np.float32)[0]
    want = interp.compile_module(m)([a.copy(), a.copy(), a.copy()])
    before = a.copy()
    got = exe([a, a, a])              # one array for all three inputs
    _close(got, want, np.float32)
    assert got[1] is not a and got[2] is not a and got[1] is not got[2]
    np.testing.assert_array_equal(a, before)
    ro = _arrays([shape], np.float32)[0]
    ro.flags.writeable = False
    x, mom = _arrays([shape] * 2, np.float32)
    got = exe([x, ro, mom])
    assert got[1] is not ro and got[2] is mom


def test_unsafe_donations_are_refused():
    shape = (40, 30)

    def build(block, args):
        x, s = args
        upd = _prim(block, "add", [s, x], {}, shape, F32)        # 0: fine alone...
        later = _prim(block, "mul", [s, s], {}, shape, F32)      # ...but s is read later
        st, sts = _t(block, s, shape, F32)
        mm = _mm(block, x, _prim(block, "neg", [st], {}, sts, F32), shape, sts, F32)  # 2: matmul
        sq = _prim(block, "mul", [x, x], {}, shape, F32)                       # 3: does not read s
        return [upd, later, mm, sq, s]
    m = _module(build, [(shape, F32), (shape, F32)])
    exe = cpu.compile_module(m, asm=False, donate={0: 1, 2: 1, 3: 0})
    # output 0 reads s before "later" does; output 2 is a matmul; input 1 is
    # returned; output 3 (x * x, read by nothing later) may take x's buffer.
    assert exe.signature["donated"] == [[3, 0]]
    arrays = _arrays([shape] * 2, np.float32)
    want = interp.compile_module(m)([a.copy() for a in arrays])
    got = exe(arrays)
    assert got[3] is arrays[0]
    _close(got, want, np.float32)


def test_transposed_reads_in_a_fused_kernel_are_not_in_place():
    shape = (24, 24)

    def build(block, args):
        x, s, u = args
        k = ir.KernelOp([x, s], [ir.tensor_type(shape, F32)], loc=("u.py", 3, 1))
        kx, ks = k.block.args
        st, _ = _t(k.block, ks, shape, F32)
        k.block.add_op(ir.YieldOp([_prim(k.block, "add", [kx, st], {}, shape, F32)]))
        block.add_op(k)
        # A materialized transpose is read before the add: the add may then
        # overwrite u, which nothing reads any more.
        ut, _ = _t(block, u, shape, F32)
        w = _prim(block, "add", [x, _prim(block, "exp", [ut], {}, shape, F32)], {}, shape, F32)
        return [k.results[0], w]
    m = _module(build, [(shape, F32)] * 3)
    exe = cpu.compile_module(m, asm=False, donate={0: 1, 1: 2})
    assert exe.signature["donated"] == [[1, 2]]
    arrays = _arrays([shape] * 3, np.float32)
    want = interp.compile_module(m)([a.copy() for a in arrays])
    got = exe(arrays)
    assert got[1] is arrays[2]
    _close(got, want, np.float32)


def _sgd_model(opt_name):
    tracec.manual_seed(3)
    model = tracec.nn.Sequential(tracec.nn.Linear(64, 96), tracec.nn.ReLU(),
                                 tracec.nn.Linear(96, 10))
    opt = (tracec.optim.SGD(model.parameters(), lr=0.05, momentum=0.9) if opt_name == "sgd"
           else tracec.optim.Adam(model.parameters(), lr=1e-2))
    return model, opt


@pytest.mark.parametrize("opt_name", ["sgd", "adam"])
def test_compiled_step_updates_state_in_place(opt_name):
    import tracec.nn.functional as F
    x, y = tracec.randn(32, 64), tracec.randint(0, 10, (32,))
    runs = {}
    for mode in ("eager", "cpu"):
        model, opt = _sgd_model(opt_name)

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        f = step if mode == "eager" else tracec.compile(step, backend="cpu")
        w = model[0].weight                    # a state tensor the user holds
        data = w._data
        held = []
        losses = []
        for _ in range(6):
            loss = f()
            losses.append(loss.item())
            held.append((loss, w.grad))
        runs[mode] = (losses, [p.detach().numpy().copy() for p in model.parameters()])
        if mode == "cpu":
            assert f.cache_info().hits >= 3
            assert f._last.executable.signature["donated"]
            assert w._data is data                    # updated in place, never replaced
            states = [s.source._data for s in f._last.trace.inputs if s.kind == "state"]
            for loss_t, g in held:
                for arr in (loss_t.detach().numpy(), g.numpy()):
                    assert not any(np.shares_memory(arr, s) for s in states)
            grads = [g.numpy() for _, g in held]
            for i in range(len(grads)):
                for j in range(i):
                    assert not np.shares_memory(grads[i], grads[j])
    np.testing.assert_allclose(runs["cpu"][0], runs["eager"][0], rtol=1e-4)
    for p, q in zip(runs["cpu"][1], runs["eager"][1]):
        np.testing.assert_allclose(p, q, rtol=1e-4, atol=1e-5)


def test_unreferenced_grads_are_recycled_and_held_ones_are_not():
    import tracec.nn.functional as F
    x, y = tracec.randn(32, 64), tracec.randint(0, 10, (32,))
    grads = {}
    for mode in ("eager", "cpu"):
        model, opt = _sgd_model("sgd")

        def step():
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        f = step if mode == "eager" else tracec.compile(step, backend="cpu")
        w = model[0].weight
        seq = []
        for i in range(6):
            before = w.grad._data.ctypes.data if w.grad is not None else None
            f()
            seq.append((w.grad.numpy().copy(), before == w.grad._data.ctypes.data))
        held = w.grad
        f()
        assert w.grad is not held and not np.shares_memory(w.grad.numpy(), held.numpy())
        grads[mode] = seq
    assert any(reused for _, reused in grads["cpu"][3:])   # nothing held the old .grad
    for (g, _), (h, _) in zip(grads["cpu"], grads["eager"]):
        np.testing.assert_allclose(g, h, rtol=1e-4, atol=1e-6)


def test_compiled_step_with_a_parameter_as_argument_stays_correct():
    """A state tensor that is also an argument shares its array with it: the
    runtime must not update it in place while the argument is still read."""
    def make():
        tracec.manual_seed(5)
        w = tracec.randn(50, 40)
        mom = tracec.zeros(50, 40)

        def step(z):
            mom.mul_(0.5).add_(z.exp())
            w.sub_(mom * 0.1)
            return z * 2
        return w, mom, step
    w, mom, step = make()
    w2, mom2, step2 = make()
    f = tracec.compile(step2, backend="cpu")
    for _ in range(4):
        out, out2 = step(w), f(w2)
        np.testing.assert_allclose(out2.numpy(), out.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w2.numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(mom2.numpy(), mom.numpy(), rtol=1e-5, atol=1e-6)
    assert f.cache_info().hits >= 2
    assert f._last.executable.signature["donated"]


# --- the worker pool ------------------------------------------------------------------

def _big_module():
    n = 600

    def build(block, args):
        a, b = args
        e = _prim(block, "exp", [_prim(block, "mul", [a, b], {}, (n, n), F32)], {}, (n, n), F32)
        return [e, _mm(block, a, _t(block, b, (n, n), F32)[0], (n, n), (n, n), F32)]
    return _module(build, [((n, n), F32), ((n, n), F32)]), n


def test_pool_from_several_python_threads():
    m, n = _big_module()
    exe = cpu.compile_module(m, asm=False)
    assert "run_for" in exe.stages["lowered"]    # a kernel split across threads
    arrays = _arrays([(n, n)] * 2, np.float32)
    want = interp.compile_module(m)(arrays)
    exe.nthreads = 4
    errors = []

    def run():
        try:
            for _ in range(5):
                _close(exe(arrays), want, np.float32)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_object_runs_without_the_pool(tmp_path):
    """Linked on its own (as ``tracec build`` does), the object finds no pool
    (a weak symbol) and starts its own threads."""
    m, n = _big_module()
    exe = cpu.compile_module(m, asm=False)
    from tracec.backends.cpu.codegen import unpack_objects
    so = tmp_path / "k.so"
    objs = []          # one object, or one per part of a module compiled in parts
    for i, part in enumerate(unpack_objects(exe.object_code)):
        objs.append(tmp_path / f"k{i}.o")
        objs[-1].write_bytes(part)
    from tracec.backends.cpu import gemm_lib
    assert exe.signature["libraries"]       # its GEMMs call the library's routines
    for i, part in enumerate(unpack_objects(gemm_lib.object_code(exe.signature["libraries"]))):
        objs.append(tmp_path / f"gemm_{i}.o")
        objs[-1].write_bytes(part)
    subprocess.run(["cc", "-shared", "-o", str(so), *map(str, objs), "-lm", "-lpthread"],
                   check=True)
    lib = ctypes.CDLL(str(so))
    fn = getattr(lib, exe.signature["entry"])
    fn.restype = ctypes.c_int32
    arrays = _arrays([(n, n)] * 2, np.float32)
    outs = [np.empty((n, n), np.float32) for _ in range(2)]
    ws = np.zeros(exe.signature["workspace"] + 64, np.uint8)
    base = ws.ctypes.data + (-ws.ctypes.data) % 64
    rc = fn((ctypes.c_void_p * 2)(*[a.ctypes.data for a in arrays]),
            (ctypes.c_void_p * 2)(*[o.ctypes.data for o in outs]),
            ctypes.c_void_p(base), ctypes.c_int64(max(2, os.cpu_count() or 2)))
    assert rc == 0
    _close(outs, interp.compile_module(m)(arrays), np.float32)


@pytest.mark.parametrize("gather_first", [True, False])
def test_a_failing_call_leaves_state_unchanged(gather_first):
    """In-place (donated) updates never run before a kernel that can still
    fail: an out-of-range index raises and the state keeps its value."""
    import tracec
    w = tracec.arange(4.0)
    table = tracec.arange(10.0)

    @tracec.compile(backend="cpu")
    def f(i):
        if gather_first:
            out = table[i] * 1
            w.mul_(2)
        else:
            w.mul_(2)
            out = table[i] * 1
        return out
    f(tracec.tensor([1, 2]))
    f(tracec.tensor([1, 2]))
    assert f.cache_info().hits == 1
    before = w.numpy().copy()
    with pytest.raises(IndexError):
        f(tracec.tensor([1, 12]))
    np.testing.assert_array_equal(w.numpy(), before)
    f(tracec.tensor([3, 0]))
    np.testing.assert_array_equal(w.numpy(), before * 2)
    # Donation is kept where it is safe (the index check comes first).
    assert bool(f._last.executable.signature["donated"]) == gather_first


def test_the_gemm_library_is_built_on_a_background_thread_once(tmp_path):
    """With an empty cache and a core to spare, the first GEMM lowered starts
    the build of the library functions it calls on a thread of its own
    (gemm_lib._prefetch);
    linking the module waits for that build instead of making a second
    (each function is compiled once, by whichever thread), and the result
    is right."""
    script = r'''
import re
import threading
import numpy as np
import tracec
from tracec.backends.cpu import codegen, gemm_lib
builders, compiled = [], []
real_build, real_part = gemm_lib._start, codegen._compile_part
def build(*args):
    b = real_build(*args)
    if b is not None:
        builders.append(threading.current_thread().name)
    return b
def part(text, t, want_asm, verify=False, **options):
    compiled.extend(re.findall(r'^define [^@]*@"?(\w+)', text, re.M))
    return real_part(text, t, want_asm, verify, **options)
gemm_lib._start, codegen._compile_part = build, part
f = tracec.compile(lambda a, b: a @ b, backend="cpu")
a, b = tracec.randn(96, 80), tracec.randn(80, 112)
for _ in range(3):
    out = f(a, b)
np.testing.assert_allclose(out.numpy(), a.numpy() @ b.numpy(), rtol=1e-4, atol=1e-4)
assert f.cache_info().traces == 1
print(builders, compiled)
assert builders == ["tracec-gemm-library"], builders
lib = sorted(x for x in compiled if "gemmlib" in x)
assert lib == sorted(set(lib)), lib         # each library function compiled once
assert any("gemm_run_nn_f32" in x for x in lib) and not any("_tt_" in x for x in lib), lib
'''
    # Two compile jobs: the build starts at the GEMM's declaration (with
    # one, once the module is lowered, and the module's thread may take it).
    env = dict(os.environ, TRACEC_CACHE_DIR=str(tmp_path / "cache"), TRACEC_COMPILE_JOBS="2")
    env.pop("TRACEC_NO_CACHE", None)
    env.pop("TRACEC_GEMM_LIBRARY", None)
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
