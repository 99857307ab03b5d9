"""A module compiled in parts on several threads (``cpu/split.py``,
``codegen.compile_llvm(jobs=...)``): the parts define what the module
defines, their objects link into one library, and compiled results equal
the serial compile's."""
import ctypes
import re

import numpy as np
import pytest

import tracec
import tracec.nn as nn
import tracec.nn.functional as F
from tracec.backends.cpu import codegen, runtime, split

IR = r"""; ModuleID = "t"
target triple = "TRIPLE"
@t_pool = global i64 7, align 8
declare double @llvm.fabs.f64(double)
define internal i64 @t_helper(i64 %x) nounwind {
  %p = load i64, ptr @t_pool, align 8
  %y = add i64 %x, %p
  ret i64 %y
}
define internal i64 @"t_k1"(i64 %".1") noinline nounwind
{
entry:
  %a = call i64 @t_helper(i64 %".1")
  %b = mul i64 %a, 3
  ret i64 %b
}
define internal i64 @t_k2(i64 %x) noinline nounwind {
  %a = call i64 @t_helper(i64 %x)
  %b = call i64 @t_k3(i64 %a)
  %c = add i64 %b, 1
  ret i64 %c
}
define internal i64 @t_k3(i64 %x) noinline nounwind {
  %b = shl i64 %x, 2
  ret i64 %b
}
define i64 @t_entry(i64 %x) noinline nounwind {
  %a = call i64 @"t_k1"(i64 %x)
  %b = call i64 @t_k2(i64 %x)
  %c = add i64 %a, %b
  ret i64 %c
}
"""


def _ir():
    return IR.replace("TRIPLE", codegen.host()[0])


def _defined(text):
    return re.findall(r'^define [^@]*@"?([\w.]+)"?\(', text, re.M)


def test_parts_define_each_function_once_and_copy_shared_helpers(monkeypatch):
    monkeypatch.setattr(split, "MIN_PART_LINES", 0)
    parts = split.split_module(_ir(), 2)
    assert len(parts) == 2
    defined = [set(_defined(p)) for p in parts]
    assert defined[0] == {"t_entry", "t_k1", "t_helper"}
    assert defined[1] == {"t_k2", "t_k3", "t_helper"}     # k3 stays with its caller
    # k2 is called across parts: external there, declared in part 0; the
    # copied helper and the kernels used in one part stay internal.
    assert re.search(r"^define i64 @t_k2\(", parts[1], re.M)
    assert re.search(r"^declare i64 @t_k2\(", parts[0], re.M)
    assert re.search(r"^define internal i64 @t_helper", parts[1], re.M)
    assert re.search(r"^define internal i64 @t_k3", parts[1], re.M)
    # The global: defined in part 0 only, external where the copy reads it.
    assert "@t_pool = global i64 7" in parts[0]
    assert "@t_pool = external global i64" in parts[1]
    import llvmlite.binding as lb
    for p in parts:
        lb.parse_assembly(p, context=lb.create_context()).verify()


def test_parts_link_into_one_library_with_the_serial_result(monkeypatch):
    monkeypatch.setattr(split, "MIN_PART_LINES", 0)
    compiled = codegen._compile_parts(split.split_module(_ir(), 2), want_asm=True)
    objects = codegen.unpack_objects(compiled.object_code)
    assert len(objects) == 2
    assert compiled.llvm_ir.count("; ---- part ") == 2 and "t_entry" in compiled.asm
    tracker = runtime._link(compiled.object_code, ["t_entry"])
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(tracker["t_entry"])
    assert fn(5) == (5 + 7) * 3 + ((5 + 7) << 2) + 1


def test_text_it_does_not_understand_stays_whole(monkeypatch):
    assert split.split_module(_ir(), 2) == [_ir()]    # too small to be worth a thread
    monkeypatch.setattr(split, "MIN_PART_LINES", 0)
    assert len(split.split_module(_ir(), 2)) == 2
    assert split.split_module(_ir(), 1) == [_ir()]
    text = _ir().replace('target triple', '$t_k3 = comdat any\ntarget triple')
    assert split.split_module(text, 2) == [text]
    weird = _ir().replace("@t_pool = global i64 7", "@t_pool = global {i64, i64} zeroinitializer")
    assert split.split_module(weird, 2) == [weird]
    table = _ir().replace("@t_pool = global i64 7, align 8",
                          "@t_pool = global i64 7, align 8\n@t_tab = global ptr @t_k3")
    assert split.split_module(table, 2) == [table]      # a global naming a function


def test_packed_objects_round_trip():
    a, b = b"\x7fELF" + b"a" * 10, b"\x7fELF" + b"bb"
    assert codegen.pack_objects([a]) == a
    assert codegen.unpack_objects(a) == [a]
    assert codegen.unpack_objects(codegen.pack_objects([a, b])) == [a, b]
    with pytest.raises(ValueError, match="packed objects"):
        codegen.unpack_objects(codegen.pack_objects([a, b])[:-1])


def _mlp_run(monkeypatch, jobs, cache_dir=None):
    if cache_dir is None:
        monkeypatch.setenv("TRACEC_NO_CACHE", "1")
    else:
        monkeypatch.delenv("TRACEC_NO_CACHE", raising=False)
        monkeypatch.setenv("TRACEC_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("TRACEC_COMPILE_JOBS", str(jobs))
    tracec.manual_seed(0)
    model = nn.Sequential(nn.Linear(24, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(),
                          nn.Linear(32, 5))
    opt = tracec.optim.Adam(model.parameters(), lr=1e-2)
    x, y = tracec.randn(8, 24), tracec.randint(0, 5, (8,))

    @tracec.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    losses = [step(x, y).item() for _ in range(4)]
    return step, losses, [p.detach().numpy().copy() for p in model.parameters()]


def test_training_step_compiled_in_parts_equals_the_serial_compile(monkeypatch, tmp_path):
    step1, losses1, params1 = _mlp_run(monkeypatch, 1)
    step2, losses2, params2 = _mlp_run(monkeypatch, 2)
    exe = step2._last.executable
    assert len(codegen.unpack_objects(exe.object_code)) == 2     # it was split
    assert len(codegen.unpack_objects(step1._last.executable.object_code)) == 1
    np.testing.assert_allclose(losses2, losses1, rtol=1e-6)
    for a, b in zip(params2, params1):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    # Through the disk cache: the packed objects are stored and loaded back.
    first, losses3, _ = _mlp_run(monkeypatch, 2, tmp_path)
    second, losses4, _ = _mlp_run(monkeypatch, 2, tmp_path)
    assert (first.cache_info().compiles, second.cache_info().loads) == (1, 1)
    assert second.cache_info().compiles == 0
    np.testing.assert_allclose(losses4, losses1, rtol=1e-6)


def test_a_part_llvm_refuses_falls_back_to_the_whole_module(monkeypatch):
    """A split LLVM cannot parse (here: a part made invalid on purpose) is
    compiled whole instead, with a warning; the result is the same."""
    import warnings
    real = split.split_module

    def broken(text, n):
        parts = real(text, n)
        return parts[:1] + [parts[1].replace("define i64 @t_k2", "define i64 @t_k2 garbage")]
    monkeypatch.setattr(split, "MIN_PART_LINES", 0)
    monkeypatch.setattr(split, "split_module", broken)
    monkeypatch.setattr(codegen, "_splice", lambda text, helpers: _ir())
    from xdsl.dialects.builtin import ModuleOp
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        codegen._warn_once.cache_clear()
        compiled = codegen.compile_llvm(ModuleOp([]), exported={"t_entry"}, want_asm=False,
                                        jobs=2)
    assert any("compiling it whole" in str(w.message) for w in caught)
    assert len(codegen.unpack_objects(compiled.object_code)) == 1
    tracker = runtime._link(compiled.object_code, ["t_entry"])   # kept: the code lives in it
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(tracker["t_entry"])
    assert fn(5) == (5 + 7) * 3 + ((5 + 7) << 2) + 1


def test_compile_jobs_follow_idle_cores_and_the_environment(monkeypatch):
    monkeypatch.delenv("TRACEC_COMPILE_JOBS", raising=False)
    monkeypatch.setattr(codegen.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    monkeypatch.setattr(codegen.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    assert codegen.compile_jobs() == 4          # at most 4
    monkeypatch.setattr(codegen.os, "getloadavg", lambda: (4.2, 1.0, 1.0))
    assert codegen.compile_jobs() == 3          # 6 cores, 4.2 busy, one of them ours
    monkeypatch.setattr(codegen.os, "getloadavg", lambda: (9.0, 1.0, 1.0))
    assert codegen.compile_jobs() == 1          # a busy machine: compiled whole
    monkeypatch.setattr(codegen.os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setattr(codegen.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert codegen.compile_jobs() == 1
    monkeypatch.setenv("TRACEC_COMPILE_JOBS", "3")
    assert codegen.compile_jobs() == 3


def test_llvm_verifier_checks_parts_under_tracec_checks():
    """With ``verify`` (TRACEC_CHECKS, on in tests) each part goes through
    LLVM's verifier before optimization: a use its definition does not
    dominate, which LLVM's parser accepts, is refused with an error; without
    it LLVM's optimizer aborts the whole process on an assertion."""
    codegen._init()
    bad = (f'target triple = "{codegen.target()[0]}"\n'
           "define i64 @f(i1 %c, i64 %x) {\n"
           "entry:\n  br i1 %c, label %a, label %b\n"
           "a:\n  %y = add i64 %x, 1\n  br label %b\n"
           "b:\n  %z = add i64 %y, 1\n  ret i64 %z\n}\n")
    with pytest.raises(RuntimeError, match="dominate"):
        codegen._compile_part(bad, codegen.target(), False, verify=True)
    good = bad.replace("%z = add i64 %y, 1", "%z = add i64 %x, 1")
    assert codegen._compile_part(good, codegen.target(), False, verify=True)[1]
