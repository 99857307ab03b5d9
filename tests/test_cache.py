"""The on-disk cache across real processes: reuse, corruption, atomicity."""
import json
import os
import textwrap

import pytest
from program_runner import python_c

from tracec.backends.cache import DiskCache

SCRIPT = textwrap.dedent("""
    import json, warnings
    import tracec
    warnings.simplefilter("always")
    tracec.manual_seed(0)
    W = tracec.randn(16, 8)

    @tracec.compile(backend="cpu")
    def f(x):
        return ((x @ W).tanh() * 2 + 1).sum(dim=1)

    x = tracec.ones(4, 16)
    with warnings.catch_warnings(record=True) as w:
        f(x)
        out = f(x)
    timings = f.cache_info().timings
    print(json.dumps({"cache": timings.get("cache"),
                      "passes_ran": "passes_s" in timings,
                      "out": out.tolist(),
                      "lowered": "llvm.func" in f.ir("lowered"),
                      "optimized": "tracec.kernel" in f.ir("optimized"),
                      "warnings": [str(m.message) for m in w]}))
""")


def _run(cache_dir):
    # (a new process: forked from a zygote that has only imported tracec)
    r = python_c(SCRIPT, timeout=300, env={**os.environ, "TRACEC_CACHE_DIR": str(cache_dir)})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_second_process_loads_from_disk_and_corruption_is_rebuilt(tmp_path):
    first = _run(tmp_path)
    assert first["cache"] == "miss"
    assert first["passes_ran"] and first["lowered"] and first["optimized"]
    second = _run(tmp_path)
    assert second["cache"] == "hit" and second["out"] == first["out"]
    # A hit is keyed by the trace: no passes ran; the stages are made on request.
    assert not second["passes_ran"] and second["lowered"] and second["optimized"]
    entries = DiskCache(str(tmp_path)).entries()
    assert len(entries) == 1
    # Truncate the entry: the next process warns, rebuilds, and is right.
    data = open(entries[0], "rb").read()
    with open(entries[0], "wb") as fh:
        fh.write(data[: len(data) // 2])
    third = _run(tmp_path)
    assert third["cache"] == "miss" and third["out"] == first["out"]
    assert any("corrupt" in w for w in third["warnings"])
    # A foreign file under an entry's name is discarded too.
    with open(entries[0], "wb") as fh:
        fh.write(b"\x7fELF not a tracec entry")
    fourth = _run(tmp_path)
    assert fourth["cache"] == "miss" and fourth["out"] == first["out"]
    assert _run(tmp_path)["cache"] == "hit"


def test_entries_are_checked_and_written_atomically(tmp_path):
    c = DiskCache(str(tmp_path))
    c.put("ab" * 32, {"x": 1}, b"payload")
    assert c.get("ab" * 32) == ({"x": 1, "key": "ab" * 32, "size": 7,
                                 "sha256": c.get("ab" * 32)[0]["sha256"]}, b"payload")
    path = c.entries()[0]
    raw = bytearray(open(path, "rb").read())
    raw[-1] ^= 0xFF  # flip a payload bit
    open(path, "wb").write(bytes(raw))
    with pytest.warns(UserWarning, match="checksum"):
        assert c.get("ab" * 32) is None
    assert not os.path.exists(path)
    assert not [f for f in os.listdir(os.path.dirname(path)) if f.startswith(".tmp-")]
    assert c.clear() == 0


def test_same_code_at_another_line_gets_its_own_entry(tmp_path, monkeypatch):
    """Compiled code names the user's lines in its errors, so two functions
    alike but for their lines never share an entry; a second compile of
    the same function is a hit that runs no passes."""
    import tracec
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TRACEC_NO_CACHE", raising=False)

    def f(x):
        return (x * 2).sum()

    def g(x):
        return (x * 2).sum()
    x = tracec.ones(3)
    results = []
    for fn in (f, g, f):
        c = tracec.compile(fn, backend="cpu")
        c(x)
        assert c(x).item() == 6.0
        results.append((c.cache_info().timings["cache"], "passes_s" in c.cache_info().timings))
    assert results == [("miss", True), ("miss", True), ("hit", False)]


def test_worker_pool_object_code_is_cached_on_disk(tmp_path, monkeypatch):
    """The worker pool's object code is made once per machine, not per
    process: the second request reads it from the cache's runtime/ folder."""
    from tracec.backends.cpu import pool
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TRACEC_NO_CACHE", raising=False)
    first = pool.object_code()
    runtime = DiskCache(str(tmp_path / "runtime"))
    assert len(runtime.entries()) == 1 and DiskCache(str(tmp_path)).entries() == []
    with open(runtime.entries()[0], "rb") as f:
        assert first in f.read()
    assert pool.object_code() == first


def test_an_empty_entry_is_discarded(tmp_path):
    """What a crash can leave of an entry written without fsync (an empty
    or short file under its name): discarded with a warning, never loaded."""
    c = DiskCache(str(tmp_path))
    c.put("cd" * 32, {"x": 1}, b"payload")
    path = c.entries()[0]
    open(path, "wb").close()
    with pytest.warns(UserWarning, match="corrupt"):
        assert c.get("cd" * 32) is None
    assert not os.path.exists(path)


def test_fingerprint_tells_apart_what_the_key_must():
    """The cache key's fingerprint describes attributes from their parameters
    (not xDSL's printer): values that compare or print alike but encode
    differently (1, 1.0 and True; 0.0 and -0.0; another column) still get
    their own keys, and equal modules built twice get the same one."""
    from tracec import dtypes as dt
    from tracec import ir
    from tracec.backends.cache import fingerprint
    from xdsl.builder import ImplicitBuilder
    from xdsl.dialects import func
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Block, Region

    def module(scalar, col=0):
        t = ir.tensor_type((2, 3), dt.float32)
        block = Block(arg_types=[t])
        with ImplicitBuilder(block):
            op = ir.make_op("mul", [block.args[0],
                                    ir.make_op("full", [], {"shape": (2, 3), "value": scalar,
                                                            "dtype": dt.float32}, t,
                                               loc=("f.py", 3, col))],
                            {}, t, loc=("f.py", 4, 0))
            func.ReturnOp(op.results[0])
        return ModuleOp([func.FuncOp("f", ((t,), (t,)), Region(block))])

    keys = [fingerprint(module(v), locations=True) for v in (1, 1.0, True, 0.0, -0.0)]
    assert len(set(keys)) == 5
    assert fingerprint(module(2.5), locations=True) == fingerprint(module(2.5), locations=True)
    assert fingerprint(module(2.5, col=7), locations=True) != \
        fingerprint(module(2.5), locations=True)
    assert fingerprint(module(2.5, col=7)) == fingerprint(module(2.5))


def test_fingerprint_key_texts_tell_apart_shapes_dtypes_params_and_names():
    """The texts kept for attributes made from keys (tracec.ir.key_texts:
    locations, static tensor types, parameters, argument names) keep the
    fingerprint exact: a shape, a dtype, a parameter or an argument name
    that differs gets another key; equal modules get equal keys, also
    once those texts are dropped (the attributes are then described)."""
    from tracec import dtypes as dt
    from tracec import ir
    from tracec.backends.cache import fingerprint
    from tracec.ir import key_texts
    from xdsl.builder import ImplicitBuilder
    from xdsl.dialects import func
    from xdsl.dialects.builtin import ModuleOp
    from xdsl.ir import Block, Region

    def module(shape=(2, 3), dtype=dt.float32, perm=(1, 0), name="x"):
        t = ir.tensor_type(shape, dtype)
        out = ir.tensor_type(tuple(shape[i] for i in perm), dtype)
        block = Block(arg_types=[t])
        ir.set_arg_name(block.args[0], name)
        with ImplicitBuilder(block):
            op = ir.make_op("transpose", [block.args[0]], {"perm": perm}, out,
                            loc=("f.py", 4, 0))
            func.ReturnOp(op.results[0])
        return ModuleOp([func.FuncOp("f", ((t,), (out,)), Region(block))])

    variants = [module(), module(shape=(3, 2)), module(dtype=dt.float64),
                module(shape=(2, 3, 1), perm=(2, 0, 1)), module(shape=(2, 3, 1), perm=(1, 0, 2)),
                module(name="y")]
    keys = [fingerprint(m, locations=True) for m in variants]
    assert len(set(keys)) == len(keys)
    assert fingerprint(module(), locations=True) == keys[0]
    key_texts.TEXTS.clear()
    assert fingerprint(module(name="z"), locations=True) == \
        fingerprint(module(name="z"), locations=True)


def test_generated_code_is_compiled_once_per_machine(tmp_path, monkeypatch):
    """tracec.code_cache: a generated function's code object is kept in the
    disk cache (runtime/) under the hash of its text; a corrupt entry is
    discarded and compiled again; another text gets its own entry."""
    import glob
    from tracec import code_cache
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TRACEC_NO_CACHE", raising=False)
    monkeypatch.setattr(code_cache, "_MEMO", {})
    src = "def run(a):\n    return a * 3 + 1\n"
    env: dict = {}
    exec(code_cache.compiled(src, "<t>"), env)
    assert env["run"](2) == 7
    files = glob.glob(str(tmp_path / "runtime" / "v*" / "*" / "*.tcc"))
    assert len(files) == 1
    code_cache._MEMO.clear()
    assert code_cache.compiled(src, "<t>").co_filename == "<t>"      # loaded from disk
    with open(files[0], "r+b") as f:
        f.seek(-3, 2)
        f.write(b"\xff\xfe\xfd")
    code_cache._MEMO.clear()
    env = {}
    with pytest.warns(UserWarning, match="corrupt"):
        exec(code_cache.compiled(src, "<t>"), env)
    assert env["run"](1) == 4
    code_cache._MEMO.clear()
    other: dict = {}
    exec(code_cache.compiled(src.replace("3", "5"), "<t>"), other)  # its own entry
    assert other["run"](1) == 6
