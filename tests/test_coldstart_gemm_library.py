"""The GEMM library built function by function, as modules need it
(tracec/backends/cpu/gemm_lib.py): a parallel build makes the very objects
a serial one does; a module builds only the functions it calls, and a
later module completes a partial library from the disk cache, compiling
only what it adds; processes building at once into one cache all get right
results and leave whole entries; the values equal the in-module code's
(``TRACEC_GEMM_LIBRARY=0``) bit for bit and PyTorch's within float error."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import tracec
from program_runner import python_c
from tracec.backends.cpu import codegen, gemm_lib


def _env(cache, **extra):
    env = dict(os.environ, TRACEC_CACHE_DIR=str(cache), **extra)
    for k in ("TRACEC_NO_CACHE", "TRACEC_GEMM_LIBRARY", "TRACEC_COMPILE_JOBS"):
        if k not in extra:
            env.pop(k, None)
    return env


def _run(code, env, timeout=240):
    """``python -c code`` in a new process (forked from a zygote that has
    imported tracec's compile stack only: nothing built or cached in
    memory, and the library's build threads, daemons, end with the
    process as they do at a plain interpreter's exit): its stdout."""
    return _run_args(code, [], env, timeout)


_LAYOUTS = r'''
import hashlib, re, sys
import numpy as np
import tracec
from tracec.backends.cpu import codegen
modules = []
real = codegen._compile_part
def counted(text, t, want_asm, verify=False, **options):
    names = re.findall(r'^define [^@]*@"?(tracec_gemmlib_\w+)', text, re.M)
    if names:
        modules.append(names)
    return real(text, t, want_asm, verify, **options)
codegen._compile_part = counted
rng = np.random.default_rng(0)
digest = hashlib.sha256()
fns = [lambda a, b: a @ b, lambda a, b: a @ b.t(), lambda a, b: a.t() @ b,
       lambda a, b: a.t() @ b.t(), lambda a, b: a[:20] @ b, lambda a, b: a.t() @ b,
       lambda a, b: a.reshape(2, 48, 80) @ b]
for k, fn in enumerate(fns):
    a = rng.standard_normal((96, 80) if k in (0, 1, 4, 6) else (80, 96)).astype(np.float32)
    b = rng.standard_normal((80, 112) if k in (0, 2, 4, 6) else (112, 80)).astype(np.float32)
    if k == 5:      # 5 rows of C (fewer than the GEMM's MR): the small kernel, A read transposed
        a = rng.standard_normal((80, 5)).astype(np.float32)
        b = rng.standard_normal((80, 112)).astype(np.float32)
    f = tracec.compile(fn, backend="cpu")
    x, y = tracec.from_numpy(a), tracec.from_numpy(b)
    f(x, y)
    out = f(x, y).numpy()
    ref = fn(tracec.from_numpy(a.astype(np.float64)), tracec.from_numpy(b.astype(np.float64)))
    np.testing.assert_allclose(out, ref.numpy(), rtol=1e-4, atol=1e-4)
    digest.update(out.tobytes())
print(digest.hexdigest())
print(modules)
'''


def test_parallel_build_computes_what_the_serial_one_does(tmp_path):
    """Every layout's routines (run / block / small), built serially (one
    module per build) and on four threads (bins of functions, modules of
    their own), give byte-identical products, each function compiled once."""
    outs = []
    for jobs in ("1", "4"):
        out = _run(_LAYOUTS, _env(tmp_path / jobs, TRACEC_COMPILE_JOBS=jobs)).split("\n")
        modules = eval(out[1])
        names = [n for m in modules for n in m]
        assert len(names) == len(set(names)), modules
        assert {"tracec_gemmlib_gemm_run_tt_f32", "tracec_gemmlib_gemm_block_nn_f32",
                "tracec_gemmlib_gemm_small_f32"} <= set(names), names
        if jobs == "4":
            assert max(len(m) for m in modules) < len(names), modules   # compiled in parts
        outs.append(out[0])
    assert outs[0] == outs[1]


_PARTIAL = r'''
import re, sys
import numpy as np
import tracec
from tracec.backends.cpu import codegen
compiled = []
real = codegen._compile_part
def counted(text, t, want_asm, verify=False, **options):
    compiled.extend(re.findall(r'^define [^@]*@"?tracec_gemmlib_(\w+)', text, re.M))
    return real(text, t, want_asm, verify, **options)
codegen._compile_part = counted
f = tracec.compile((lambda a, b: a @ b.t()) if sys.argv[1] == "nt" else (lambda a, b: a @ b),
                   backend="cpu")
rng = np.random.default_rng(0)
a = rng.standard_normal((96, 80)).astype(np.float32)
b = rng.standard_normal((112, 80) if sys.argv[1] == "nt" else (80, 112)).astype(np.float32)
for _ in range(2):
    out = f(tracec.from_numpy(a), tracec.from_numpy(b)).numpy()
ref = a.astype(np.float64) @ (b.T if sys.argv[1] == "nt" else b)
np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
print(" ".join(sorted(compiled)))
'''


def test_a_partial_library_is_completed_on_demand(tmp_path):
    """A product of plain layouts builds the nn routine and what it calls,
    nothing of the other layouts; a later process with a transposed B
    (another layout) reads those from the cache and compiles only the
    functions the new layout adds; a third compiles nothing."""
    env = _env(tmp_path)
    first = set(_run_args(_PARTIAL, ["nn"], env).split())
    assert {"gemm_run_nn_f32", "gemm_block_nn_f32", "gemm_ukernel_f32", "gemm_pack_a_f32",
            "gemm_pack_b_f32"} <= first, first
    assert not any("_nt_" in x or "_tn_" in x or "_tt_" in x or "small" in x for x in first)
    second = set(_run_args(_PARTIAL, ["nt"], env).split())
    assert {"gemm_run_nt_f32", "gemm_block_nt_f32", "gemm_pack_bt_f32"} <= second, second
    assert not second & first, second          # what the cache holds is not compiled again
    assert _run_args(_PARTIAL, ["nt"], env).split() == []


def _run_args(code, args, env, timeout=240):
    r = python_c(code, *args, env=env, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


_STEP = r'''
import sys
import numpy as np
import tracec
import tracec.nn as nn
import tracec.nn.functional as F
tracec.manual_seed(0)
model = nn.Sequential(nn.Linear(96, 80), nn.ReLU(), nn.Linear(80, 64))
opt = tracec.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x = tracec.from_numpy(np.random.default_rng(1).standard_normal((24, 96)).astype(np.float32))
y = tracec.from_numpy(np.random.default_rng(2).integers(0, 64, 24))

@tracec.compile
def step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss
losses = [step(x, y).item() for _ in range(4)]
print((np.array(losses, np.float32).tobytes()
       + b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hex())
'''


def test_concurrent_processes_and_bit_identical_values(tmp_path):
    """Two processes building the library into one empty cache at once both
    compute, bit for bit, what a module with its own GEMM code
    (``TRACEC_GEMM_LIBRARY=0``) does; a third reads every function from the
    cache and agrees too (no entry half-written)."""
    env = _env(tmp_path / "shared")
    procs = [subprocess.Popen([sys.executable, "-c", _STEP], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE) for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()[-3000:]
        outs.append(out.decode())
    third = _run(_STEP, env)
    own = _run(_STEP, _env(tmp_path / "own", TRACEC_GEMM_LIBRARY="0"))
    assert len(own) > 1000 and outs[0] == outs[1] == third == own
    from tracec.backends import cache
    for path in cache.DiskCache(str(tmp_path / "shared" / "runtime")).entries():
        key = os.path.basename(path)[:-len(".tcc")]
        assert cache.DiskCache(str(tmp_path / "shared" / "runtime")).get(key) is not None


def test_training_step_matches_torch():
    """The compiled step (library GEMMs: short and transposed products)
    gives PyTorch's losses and weights."""
    rng = np.random.default_rng(3)
    w1 = rng.standard_normal((80, 96)).astype(np.float32) * 0.1
    w2 = rng.standard_normal((64, 80)).astype(np.float32) * 0.1
    b1, b2 = np.zeros(80, np.float32), np.zeros(64, np.float32)
    x = rng.standard_normal((24, 96)).astype(np.float32)
    y = rng.integers(0, 64, 24)
    results = []
    for lib in (tracec, torch):
        m = lib.nn.Sequential(lib.nn.Linear(96, 80), lib.nn.ReLU(), lib.nn.Linear(80, 64))
        with lib.no_grad():
            for p, v in zip(m.parameters(), (w1, b1, w2, b2)):
                p.copy_(lib.from_numpy(v))
        opt = lib.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)

        def step(xx, yy):
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(m(xx), yy)
            loss.backward()
            opt.step()
            return loss
        if lib is tracec:
            step = tracec.compile(step)
        xx, yy = lib.from_numpy(x), lib.from_numpy(y)
        results.append(([step(xx, yy).item() for _ in range(4)],
                        [p.detach().numpy().copy() for p in m.parameters()]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-6)
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_older_signatures_name_a_dtype():
    """A signature of an older cache entry lists a dtype: it stands for all
    of that dtype's routines."""
    assert gemm_lib._expand(["float64"]) == list(gemm_lib.routines("float64"))
    with pytest.raises(ValueError, match="no GEMM library routine"):
        gemm_lib._expand(["tracec_gemmlib_nothing"])


def test_a_forked_child_builds_what_its_parent_was_building(tmp_path):
    """A child forked while the parent's background builder runs finds no
    build of its parent's under way (threads do not survive fork) and
    builds the routine itself instead of waiting forever.  (The parent has
    compiled before: a fork while another thread imports a module leaves
    that module's import lock held in the child, Python's hazard.)"""
    code = r'''
import os, sys, time
import numpy as np
import tracec
from tracec.backends.cpu import builder, gemm, gemm_lib, gemm_small, split
import tracec.dtypes as dt
g = tracec.compile(lambda a: a * 2 + 1, backend="cpu")
g(tracec.randn(3)); g(tracec.randn(3))
mb = builder.ModuleBuilder("x_")
gemm_lib.declare(mb, "run", dt.float32, False, True)    # starts the background build
time.sleep(0.05)
assert gemm_lib._inflight, "the build ended already"
pid = os.fork()
if pid == 0:
    try:
        f = tracec.compile(lambda a, b: a @ b.t(), backend="cpu")
        a, b = tracec.randn(96, 80), tracec.randn(112, 80)
        f(a, b); out = f(a, b)
        np.testing.assert_allclose(out.numpy(), a.numpy() @ b.numpy().T, rtol=1e-4, atol=1e-4)
        os._exit(0)
    except BaseException:
        import traceback; traceback.print_exc(); os._exit(1)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
'''
    # (Two jobs: the build starts at the declaration, not when a module's
    # lowering is done.)
    _run(code, _env(tmp_path, TRACEC_NO_CACHE="1", TRACEC_COMPILE_JOBS="2"), timeout=120)


def test_objects_of_two_builds_defining_one_function_link_together(tmp_path):
    """A function two objects define (two builds: another process's, or a
    cache whose entries were partly lost) is weak in both: the module links
    them side by side (the JIT, then the shared library built at exit) and
    computes the right product."""
    from tracec.backends import cache
    env = _env(tmp_path, TRACEC_COMPILE_JOBS="1")
    first = set(_run_args(_PARTIAL, ["nt"], env).split())
    assert {"gemm_run_nt_f32", "gemm_block_nt_f32", "gemm_ukernel_f32"} <= first
    disk = cache.DiskCache(str(tmp_path / "runtime"))
    t = codegen.target()
    for n in ("gemm_run_nt_f32", "gemm_block_nt_f32"):     # the entries, not the object
        os.remove(disk._path(gemm_lib._key(t, "tracec_gemmlib_" + n)))
    again = set(_run_args(_PARTIAL, ["nt"], env).split())
    assert again == {"gemm_run_nt_f32", "gemm_block_nt_f32"}, again
    # Both objects again (the shared library of both, linked at the last
    # exit, or the JIT): nothing compiled.
    assert _run_args(_PARTIAL, ["nt"], env).split() == []


def test_without_a_spare_core_one_build_emits_the_module_routines_once(tmp_path):
    """With one compile job the routines a module declares are built once
    its lowering is done, in one build on the background thread (each
    build emits the functions its routines call again); with a spare core
    the first declaration starts a build at once."""
    code = r'''
import sys, threading
import tracec
from tracec.backends.cpu import gemm_lib
builds = []
real = gemm_lib._module
def module(roots):
    builds.append((threading.current_thread().name, sorted(roots)))
    return real(roots)
gemm_lib._module = module
w1 = tracec.randn(80, 96, requires_grad=True)
w2 = tracec.randn(96, 112, requires_grad=True)
@tracec.compile
def step(x):
    loss = ((x @ w1).relu() @ w2).sum()
    loss.backward()
    return loss
x = tracec.randn(24, 80)
step(x); step(x); step(x)   # (the second retraces: the grads exist)
print(builds)
'''
    one = eval(_run(code, _env(tmp_path / "one", TRACEC_COMPILE_JOBS="1")))
    assert len(one) == 1 and one[0][0] == "tracec-gemm-library" and len(one[0][1]) > 1, one
    two = eval(_run(code, _env(tmp_path / "two", TRACEC_COMPILE_JOBS="2")))
    assert {r for _, roots in two for r in roots} == set(one[0][1]), (one, two)


def test_a_missing_helper_function_entry_is_rebuilt(tmp_path, monkeypatch):
    # A process that stops between two compile tasks' cache writes can leave
    # a routine's entry (naming the micro-kernel it calls) without the
    # micro-kernel's: the library then asked to build the micro-kernel as if
    # it were a routine (KeyError) on every later compile needing it.  It is
    # emitted with the routines of its element type now.
    from tracec.backends.cpu import codegen, gemm_lib
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path))
    name = "tracec_gemmlib_gemm_ukernel_f64"
    t = codegen.target()
    gemm_lib._objects.pop((t, name), None)
    out = gemm_lib._collect([name], t, 1)
    assert name in out and out[name][0]
    assert name in out[name][2]
