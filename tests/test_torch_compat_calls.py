"""Calls public scripts make in passing, answered as PyTorch (CPU build)
answers them: ``torch.compile``'s own arguments, ``torch._dynamo`` and
``torch.compiler``, activation checkpointing, ``torch.cuda`` queries,
``torch.version``, ``torch.where(cond)``, the legacy tensor types."""
import numpy as np
import pytest
import torch

import tracec
import tracec.utils.checkpoint as tcp
from program_runner import tracec_cli


def test_torch_compile_arguments_are_accepted():
    lin = tracec.nn.Linear(5, 2)
    x = tracec.randn(4, 5)
    want = lin(x).detach().numpy()
    for kw in ({"mode": "max-autotune", "fullgraph": True, "dynamic": False},
               {"backend": "inductor"}, {"mode": "reduce-overhead"}, {"options": {}}):
        np.testing.assert_allclose(tracec.compile(lin, **kw)(x).detach().numpy(), want,
                                   rtol=1e-6)
    f = lambda a: a + 1  # noqa: E731
    assert tracec.compile(f, backend="eager") is f and tracec.compile(f, disable=True) is f
    with pytest.raises(RuntimeError, match="Unrecognized mode=fast"):
        tracec.compile(f, mode="fast")
    with pytest.raises(TypeError, match="custom backend"):
        tracec.compile(f, backend=lambda gm, ex: gm)


def test_dynamo_and_compiler_namespaces():
    tracec._dynamo.config.suppress_errors = True
    assert tracec._dynamo.config.suppress_errors is True
    tracec._dynamo.reset()
    assert not tracec._dynamo.is_compiling()
    seen = []

    @tracec.compile
    def f(x):
        seen.append(tracec.compiler.is_compiling())
        return x * 2
    f(tracec.ones(2))
    assert seen == [True]
    assert "cpu" in tracec.compiler.list_backends()
    g = lambda a: a  # noqa: E731
    assert tracec.compiler.disable(g) is g and tracec._dynamo.disable()(g) is g


_GPT_FAST_CONFIG = (
    "import torch._dynamo.config\n"
    "import torch._inductor.config\n"
    "import torch._inductor.config as ic\n"
    "from torch._inductor import config\n"
    "torch._inductor.config.coordinate_descent_tuning = True\n"
    "torch._inductor.config.triton.unique_kernel_names = True\n"
    "torch._dynamo.config.cache_size_limit = 64\n"
    "from torch.nn.attention import SDPBackend\n"
    "print(ic.coordinate_descent_tuning, config is ic, torch._dynamo.config.cache_size_limit,"
    " SDPBackend.MATH, f'{SDPBackend.FLASH_ATTENTION}', int(SDPBackend.MATH))\n")


def test_config_submodules_import_as_in_gpt_fast(tmp_path):
    """gpt-fast's ``import torch._dynamo.config`` / ``import
    torch._inductor.config`` (submodule imports, then flags set on them), and
    the attention backend enum printed as PyTorch prints it.  What the real
    torch prints is replayed from its recording (``torch_recordings``: the
    key is the program's text and torch's version; importing
    torch._inductor takes a process seconds)."""
    import torch_recordings
    script = tmp_path / "prog.py"
    script.write_text(_GPT_FAST_CONFIG)
    want = "True True 64 SDPBackend.MATH SDPBackend.FLASH_ATTENTION 0"
    ref = torch_recordings.script_output("torch_compat/gpt_fast_config", script)
    assert ref.strip() == want, ref                                   # real torch
    r = tracec_cli(["run", str(script)])
    assert r.returncode == 0 and r.stdout.strip() == want, r.stderr


def test_checkpoint_gives_the_same_values_and_gradients():
    torch.manual_seed(0)
    lt = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    lc = tracec.nn.Sequential(tracec.nn.Linear(3, 4), tracec.nn.Tanh(), tracec.nn.Linear(4, 2))
    lc.load_state_dict({k: tracec.tensor(v.numpy()) for k, v in lt.state_dict().items()})
    a = np.random.RandomState(0).randn(5, 3).astype(np.float32)
    xt, xc = torch.tensor(a, requires_grad=True), tracec.tensor(a, requires_grad=True)
    import torch.utils.checkpoint as cp
    cp.checkpoint(lt, xt, use_reentrant=False).sum().backward()
    tcp.checkpoint(lc, xc, use_reentrant=False).sum().backward()
    np.testing.assert_allclose(xc.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed"):
        tcp.checkpoint(lc, xc)
    y = tcp.checkpoint_sequential(lc, 2, xc, use_reentrant=False)
    np.testing.assert_allclose(y.detach().numpy(), lc(xc).detach().numpy())


def test_cuda_queries_and_version_like_a_cpu_build():
    assert tracec.cuda.memory_allocated() == 0 and tracec.cuda.empty_cache() is None
    assert tracec.cuda.is_bf16_supported() is False
    with pytest.raises(AssertionError, match="not compiled with CUDA"):
        tracec.cuda.synchronize()
    assert tracec.version.cuda is None and torch.version.cuda is None
    # answered as a CPU build of PyTorch 2.13 answers them
    for name in ("max_memory_cached", "memory_cached"):
        with pytest.warns(FutureWarning, match="has been renamed"):
            assert getattr(tracec.cuda, name)() == getattr(torch.cuda, name)() == 0
    for name in ("memory_stats_as_nested_dict", "host_memory_stats", "get_gencode_flags",
                 "is_tf32_supported"):
        assert getattr(tracec.cuda, name)() == getattr(torch.cuda, name)(), name
    # (torch's answer depends on whether nvidia-ml-py is installed: tracec's
    # is the one without it)
    assert tracec.cuda.list_gpu_processes() == "pynvml module not found, please install nvidia-ml-py"
    assert (tracec.cuda.has_half, tracec.cuda.has_magma) == (torch.cuda.has_half, torch.cuda.has_magma)
    for name in ("utilization", "temperature", "power_draw", "memory_usage"):
        with pytest.raises(ModuleNotFoundError, match="nvidia-ml-py"):
            getattr(tracec.cuda, name)()
    for name in ("init", "get_per_process_memory_fraction", "get_sync_debug_mode"):
        with pytest.raises(AssertionError, match="not compiled with CUDA"):
            getattr(tracec.cuda, name)()
    import tracec.cuda.nvtx as nvtx      # (profiling scripts import it at the top)
    with pytest.raises(RuntimeError, match="NVTX functions not installed"):
        with nvtx.range("step {}", 1):
            pass


def test_where_with_the_condition_alone_and_legacy_types():
    a = np.array([[0.0, 1.5], [-2.0, 0.0]], np.float32)
    got = tracec.where(tracec.tensor(a) != 0)
    want = torch.where(torch.tensor(a) != 0)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    x = tracec.tensor([1.5, 2.5])
    assert x.type(tracec.FloatTensor).dtype is tracec.float32
    assert x.type(tracec.LongTensor).dtype is tracec.int64
    assert x.type(tracec.DoubleTensor).dtype is tracec.float64
    assert tracec.LongTensor([1, 2]).dtype is tracec.int64
    assert tracec.ByteTensor(3).shape == (3,) and tracec.ByteTensor(3).dtype is tracec.uint8


def test_set_shares_memory_as_torch_does():
    """Tensor.set_ (fastai's HSV transforms, MONAI's MetaTensor unpickling):
    a tensor, a storage window, nothing; the errors torch gives."""
    def run(lib):
        out = []
        a, b = lib.zeros(3), lib.arange(6.0).reshape(2, 3)
        out.append((a.set_(b) is a, tuple(a.shape), a.stride(), a.data_ptr() == b.data_ptr()))
        b[0, 0] = 100
        a.add_(1)
        out.append((a.tolist(), b.tolist()))
        c = lib.zeros(1)
        c.set_(b.untyped_storage(), 2, (2, 2), (1, 2))
        out.append((c.tolist(), c.stride()))
        out.append(tuple(c.set_(b.untyped_storage()).shape))
        out.append(tuple(c.set_().shape))
        out.append(lib.zeros(4).set_(b, 1, (2,), (2,)).tolist())
        out.append(lib.zeros(1).set_(lib.arange(3.0)[1:]).tolist())
        for bad in (lambda: lib.zeros(2).set_(lib.ones(2, dtype=lib.int64)),
                    lambda: lib.zeros(2, requires_grad=True).set_(lib.ones(3))):
            with pytest.raises(RuntimeError) as e:
                bad()
            out.append(str(e.value).split("\n")[0])
        p = lib.zeros(2, requires_grad=True)
        with lib.no_grad():
            p.set_(lib.tensor([1.0, 2.0, 3.0]))
        (p * p).sum().backward()
        out.append((p.grad.tolist(), p.is_leaf, p.requires_grad))
        return out
    assert run(tracec) == run(torch)
    # (PyTorch grows a storage too small for the window; tracec's storages
    # are fixed memory shared with their tensors, so it says so instead)
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 24"):
        tracec.zeros(1).set_(tracec.arange(6.0).untyped_storage(), 4, (3,))
