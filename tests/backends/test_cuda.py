"""The cuda backend without a GPU (issue 13): its kernels built for the
host with the launch emulated equal the interpreter (elementwise chains,
reductions of odd sizes, the tiled matmul, index ops, symbolic sizes, a
training step); the PTX of every kernel compiled here is accepted by
``ptxas`` for sm_80 and sm_90; ``fn.ir("ptx")`` and ``tracec dump --stage
ptx`` work; running without CuPy or a GPU raises one clear error."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tracec
import tracec.nn as nn
import tracec.nn.functional as F
from tracec.backends import cuda, interp
from tracec.backends.cuda import build
from tracec.backends.cuda.emulated import compile_emulated
from tracec.backends.cuda.lower import lower_for_gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PTX: list[str] = []        # every PTX module made here, for test_ptxas_accepts_every_kernel


def _optimized(fn, *args):
    cf = tracec.compile(fn, backend="interp")
    cf(*args)
    return cf._last.optimized()


#: Backends run by the tests that compile through ``tracec.compile``: the
#: emulated launch everywhere, the GPU itself where CuPy sees one.
HAS_GPU = tracec.cuda.gpu_count() > 0
BACKENDS = ["cuda-emulated", pytest.param("cuda", marks=pytest.mark.skipif(
    not HAS_GPU, reason="no CUDA GPU (CuPy finds none)"))]


def _check(fn, *args, tol=1e-5):
    """The emulated cuda kernels (and, where there is a GPU, the kernels
    on it) equal the interpreter on ``args``; the module's PTX is kept for
    ptxas."""
    module = _optimized(fn, *args)
    arrays = [a.numpy() for a in args]
    ref = interp.compile_module(module)(arrays)
    runs = [compile_emulated(module)(arrays)]
    if HAS_GPU:
        runs.append(cuda.compile_module(module)(arrays))
    for got in runs:
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=tol, atol=tol)
    PTX.append(build.ptx(lower_for_gpu(module)).ptx)
    return module


@pytest.mark.parametrize("n", [1, 7, 255, 256, 257, 1000])
def test_elementwise_chain(n):
    x, y = tracec.randn(n), tracec.randn(n)
    _check(lambda a, b: ((a * b + 1.0).relu() * 0.5 - b.exp()).tanh(), x, y)


def test_broadcast_and_transpose_views():
    x, b = tracec.randn(13, 7), tracec.randn(7)
    _check(lambda a, c: (a + c).T * 2.0 + a.T.sigmoid(), x, b)


@pytest.mark.parametrize("shape,dim", [((37, 29), 1), ((37, 29), 0), ((5, 3, 300), (0, 2)),
                                       ((1031,), 0), ((3, 1), 1), ((6, 515), 1)])
def test_reductions_odd_sizes(shape, dim):
    x = tracec.randn(*shape)
    _check(lambda a: (a.sum(dim=dim), a.amax(dim=dim), (a * a).mean(dim=dim),
                      a.amin(dim=dim)), x, tol=1e-4)


def test_reduction_with_stored_intermediate_and_ints():
    x = tracec.randn(9, 33)
    i = tracec.randint(-5, 5, (9, 33))
    _check(lambda a, k: (a.softmax(dim=1), k.sum(dim=1), (k > 0).any(dim=1)), x, i, tol=1e-5)


@pytest.mark.parametrize("m,k,n,reg", [(1, 1, 1, 1), (16, 16, 16, 1), (17, 33, 5, 1),
                                       (40, 7, 50, 1), (70, 33, 129, 1), (256, 9, 512, 2),
                                       (250, 17, 511, 2), (1024, 9, 512, 4), (1030, 3, 500, 4)])
def test_tiled_matmul(m, k, n, reg):
    """16 x 16 tiles (one output per thread), 32 x 32 (2 x 2) and 64 x 64
    (4 x 4), chosen by the product's size; edges not tile multiples."""
    from tracec.backends.cuda.lower import matmul_reg
    assert matmul_reg(1, m, n) == reg
    a, b = tracec.randn(m, k), tracec.randn(k, n)
    _check(lambda x, y: x @ y, a, b, tol=1e-4)


def test_matmul_transposed_and_batched():
    a, b = tracec.randn(3, 19, 21), tracec.randn(3, 23, 21)
    w = tracec.randn(21, 21)
    _check(lambda x, y, v: (x @ y.transpose(1, 2), x @ v, (x @ v.T).sum()), a, b, w, tol=1e-4)


def test_register_tiled_matmul_transposed_and_batched():
    """64 x 64 tiles (4 x 4 outputs per thread) with either operand
    transposed, batched and broadcast, edges not multiples of the tile."""
    a, b = tracec.randn(2, 520, 24), tracec.randn(2, 530, 24)     # 4 x 4 per thread
    w = tracec.randn(24, 520)
    _check(lambda x, y, v: (x @ y.transpose(1, 2), x @ v, x.transpose(1, 2) @ x,
                            (v.T @ x[0].T)), a, b, w, tol=1e-4)


def test_index_ops_run_as_device_functions():
    x = tracec.randn(11, 6)
    idx = tracec.randint(0, 6, (11, 1))
    _check(lambda a, i: (a.gather(1, i), a.argmax(dim=1), a.scatter_add(1, i, a[:, :1])),
           x, idx)


def test_bad_index_is_a_python_error():
    x = tracec.randn(4, 6)
    module = _optimized(lambda a, i: a.gather(1, i), x, tracec.zeros(4, 1, dtype=tracec.int64))
    exe = compile_emulated(module)
    bad = np.full((4, 1), 9, np.int64)
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        exe([x.numpy(), bad])


def _model_step(backend):
    tracec.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 20), nn.ReLU(), nn.Linear(20, 4))
    opt = tracec.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return model, (tracec.compile(step, backend=backend) if backend else step)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_step_equals_eager(fresh_cache, backend):
    x, y = tracec.randn(9, 12), tracec.randint(0, 4, (9,))
    m1, eager = _model_step(None)
    m2, comp = _model_step(backend)
    tol = 1e-5 if backend == "cuda-emulated" else 1e-4     # the GPU's sums reassociate
    for _ in range(4):
        np.testing.assert_allclose(eager(x, y).item(), comp(x, y).item(), rtol=tol)
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), atol=tol)
    assert comp.cache_info().compiles >= 1
    ptx = comp.ir("ptx")         # the emulation's kernels are the GPU's: same stages
    assert ".visible .entry" in ptx and "tracec_main" in comp.ir("llvm")


@pytest.mark.parametrize("backend", BACKENDS)
def test_symbolic_sizes_are_kernel_arguments(fresh_cache, backend):
    """One compile serves every batch size: the sizes are kernel arguments."""
    w = tracec.randn(10, 3)

    def f(x):
        return ((x @ w).relu().sum(dim=1), x.amax(dim=0))
    comp = tracec.compile(f, backend=backend)
    for n in (5, 17, 64, 3, 300):
        x = tracec.randn(n, 10)
        tracec.mark_dynamic(x, 0)
        got = comp(x)
        xn, wn = x.numpy(), w.numpy()
        np.testing.assert_allclose(got[0].numpy(), np.maximum(xn @ wn, 0).sum(1), rtol=1e-4,
                                   atol=1e-4)
        np.testing.assert_allclose(got[1].numpy(), xn.max(0))
    assert comp.cache_info().compiles == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("pool", [lambda x: F.max_pool2d(x, 2), lambda x: F.max_pool2d(x, 3, 2),
                                  lambda x: F.avg_pool2d(x, 2)], ids=["max2", "max3s2", "avg2"])
def test_pool_taps_over_symbolic_image_sizes(fresh_cache, backend, pool):
    """A max pool's window taps are one "slices" step of the cpu lowering
    (several slices in one program); the cuda lowering once emitted only
    the first tap, so the others were read unwritten."""
    def f(x):
        x.grad = None
        y = pool(x * 1.0)
        (y * y).sum().backward()
        return y
    c = tracec.compile(f, backend=backend)
    rng = np.random.default_rng(0)
    for h in (8, 10, 9, 12, 11):
        a = rng.standard_normal((2, 3, h, h)).astype(np.float32)
        xe, xc = (tracec.tensor(a, requires_grad=True) for _ in range(2))
        np.testing.assert_allclose(c(xc).detach().numpy(), f(xe).detach().numpy(), atol=1e-6)
        np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), atol=1e-6)
    assert c.cache_info().compiles <= 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_sum_of_pads_gradient(fresh_cache, backend):
    """The gradient of a value sliced once per step is a sum of pads
    (``padsum`` in the cpu lowering): its windows written one by one."""
    tracec.manual_seed(0)
    p = tracec.randn(5, 3, 8, requires_grad=True)

    def step(x):
        p.grad = None
        total = 0
        for t in range(p.shape[0]):
            a, b, c, d = p[t].chunk(4, dim=1)
            total = total + ((a * x).tanh() + b.sigmoid() * c - d * d).sum()
        total.backward()
        return p.grad
    comp = tracec.compile(step, backend=backend)
    x = tracec.randn(3, 2)
    want = step(x).numpy().copy()
    for _ in range(2):
        np.testing.assert_allclose(comp(x).numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_recurrent_training_step(fresh_cache, backend, cell):
    """Recurrent layers recorded for cuda run their step loops (the cpu
    backend's ``rnn_scan`` is a serial body calling the host's GEMM
    library, which PTX cannot call): equal to eager, weights included."""
    def make():
        tracec.manual_seed(0)
        rnn = getattr(nn, cell)(5, 4, batch_first=True, bidirectional=True)
        head = nn.Linear(8, 3)
        opt = tracec.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-2)

        def step(x, y):
            opt.zero_grad()
            out, _ = rnn(x)
            loss = F.cross_entropy(head(out[:, -1]), y)
            loss.backward()
            opt.step()
            return loss
        return rnn, step
    r1, eager = make()
    r2, step = make()
    comp = tracec.compile(step, backend=backend)
    x, y = tracec.randn(3, 3, 5), tracec.randint(0, 3, (3,))
    for _ in range(3):
        np.testing.assert_allclose(comp(x, y).item(), eager(x, y).item(), rtol=1e-4)
    for p, q in zip(r1.parameters(), r2.parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), atol=1e-4)
    assert "rnn_scan" not in comp.ir("optimized")


def test_symbolic_module_ptx_takes_sizes():
    w = tracec.randn(10, 3)
    comp = tracec.compile(lambda x: (x @ w).relu().sum(dim=1), backend="cuda")
    x = tracec.randn(6, 10)
    tracec.mark_dynamic(x, 0)
    comp(x)
    ptx = comp.ir("ptx")
    assert ".entry" in ptx and "bar.sync" in ptx
    PTX.append(ptx)


def test_ir_ptx_and_missing_runtime_error():
    comp = tracec.compile(lambda a, b: (a * b).sum(dim=1) + 1.0, backend="cuda")
    x, y = tracec.randn(8, 70), tracec.randn(8, 70)
    np.testing.assert_allclose(comp(x, y).numpy(), (x.numpy() * y.numpy()).sum(1) + 1,
                               rtol=1e-5)      # the first call runs eagerly
    try:
        import cupy  # noqa: F401
        has_gpu = tracec.cuda.gpu_count() > 0
    except ImportError:
        cupy, has_gpu = None, False
    if has_gpu:
        np.testing.assert_allclose(comp(x, y).numpy(), (x.numpy() * y.numpy()).sum(1) + 1,
                                   rtol=1e-5)
    else:
        want = "needs CuPy, which is not installed" if cupy is None else "needs a CUDA GPU"
        with pytest.raises(cuda.CudaUnavailableError, match=want):
            comp(x, y)
    ptx = comp.ir("ptx")
    assert ".target sm_80" in ptx or ".target sm_9" in ptx
    assert "llvm.nvvm" not in ptx and "%tid.x" in ptx and "%ctaid.x" in ptx
    for stage in ("lowered", "llvm"):
        assert "tracec_main" in comp.ir(stage)
    PTX.append(ptx)


def test_dump_stage_ptx_cli(tmp_path):
    src = tmp_path / "prog.py"
    src.write_text("def f(x, y):\n    return (x @ y).relu().sum(dim=0)\n")
    out = subprocess.run([sys.executable, "-m", "tracec.cli", "dump", f"{src}:f",
                          "--arg", "x=f32[5,7]", "--arg", "y=f32[7,9]", "--stage", "ptx",
                          "--backend", "cuda"], capture_output=True, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                             [ROOT, *filter(None, [os.environ.get("PYTHONPATH")])])))
    assert out.returncode == 0, out.stderr
    assert ".visible .entry" in out.stdout
    PTX.append(out.stdout)


def test_argsort_runs_as_one_device_function():
    module = _optimized(lambda a: a.argsort(dim=1), tracec.randn(3, 5))
    exe = compile_emulated(module)        # argsort: the cpu body, one device function
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_array_equal(exe([x])[0], np.argsort(x, axis=1, kind="stable"))
    PTX.append(build.ptx(lower_for_gpu(module)).ptx)


def test_a_host_function_in_a_kernel_is_refused_with_the_users_line(monkeypatch):
    """A kernel calling what the GPU cannot run (here libm's erf, as the
    float64 erf was lowered before mathfns64) is a LoweringError naming the
    op and the user's line; LLVM's instruction selector would abort the
    process."""
    from tracec.backends.cpu import scalar
    from tracec.backends.cpu.scalar import LoweringError
    module = _optimized(lambda a: a.erf() * 2.0, tracec.randn(5, dtype=tracec.float64))

    def libm_erf(fb, x):
        fb.mb.declare("erf", [x.type], x.type)
        return fb.call("erf", [x], x.type)
    monkeypatch.setattr(scalar.mathfns64, "erf64", libm_erf)
    with pytest.raises(LoweringError, match=r"test_cuda\.py:\d+.*cannot run erf on the GPU"):
        build.ptx(lower_for_gpu(module))


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
def test_ptxas_accepts_every_kernel(tmp_path):
    """Runs last in this file: every PTX module the tests above made."""
    if not PTX:
        pytest.skip("no PTX was made (run the whole file)")
    for k, text in enumerate(PTX):
        path = tmp_path / f"m{k}.ptx"
        path.write_text(text)
        # PTX made for this machine's GPU (sm_90 on a Hopper) assembles for
        # that architecture and newer only.
        target = int(text.split(".target sm_", 1)[1][:2])
        for arch in [a for a in ("sm_80", "sm_90") if int(a[3:]) >= target]:
            r = subprocess.run(["ptxas", f"-arch={arch}", str(path), "-o",
                                str(tmp_path / f"m{k}_{arch}.cubin")],
                               capture_output=True, text=True)
            assert r.returncode == 0, f"module {k} for {arch}: {r.stderr}"
