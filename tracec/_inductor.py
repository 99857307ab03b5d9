"""``torch._inductor`` as scripts touch it: ``config`` flags they set for
Inductor's code generation (gpt-fast's ``coordinate_descent_tuning``,
``triton.unique_kernel_names``, ``fx_graph_cache``...).

tracec does not use Inductor: the flags are recorded and read back and change
nothing, but ``fallback_random``: compiled functions that draw random numbers
then run eagerly, drawing PyTorch's eager numbers (``torch_rng``).  A flag
Inductor does not have is an AttributeError when read, as there; setting one
is accepted (scripts written for other releases set flags that come and go).
"""
from __future__ import annotations

import sys
import types

from tracec import torch_rng

__all__ = ["config"]


class _Config(types.ModuleType):
    """Flags as attributes (a module: ``import torch._inductor.config``
    imports it)."""

    def __init__(self, name: str, **defaults):
        super().__init__(name.replace("torch.", "tracec.", 1))
        self.__dict__["_name"] = name
        self.__dict__.update(defaults)

    def __getattr__(self, name):
        raise AttributeError(f"{self.__dict__['_name']} has no attribute {name!r}")

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if name == "fallback_random" and self._name == "torch._inductor.config":
            # the one flag that changes what tracec computes (torch_rng)
            torch_rng.FALLBACK_RANDOM[0] = bool(value)


config = _Config(
    "torch._inductor.config", coordinate_descent_tuning=False, fx_graph_cache=True,
    freezing=False, max_autotune=False, max_autotune_gemm=False, epilogue_fusion=True,
    force_fuse_int_mm_with_mul=False, use_mixed_mm=True, debug=False, benchmark_kernel=False,
    aggressive_fusion=False, cpp_wrapper=False, fallback_random=False, conv_1x1_as_mm=False,
    split_reductions=True, compile_threads=1, autotune_local_cache=True, cpp=_Config(
        "torch._inductor.config.cpp", threads=-1, simdlen=None, enable_kernel_profile=False),
    triton=_Config("torch._inductor.config.triton", unique_kernel_names=False,
                   cudagraphs=False, cudagraph_trees=True, autotune_pointwise=True,
                   descriptive_names="original_aten"))

# A package of one submodule, so that ``import torch._inductor.config``
# (gpt-fast) finds it.
__path__: list = []
sys.modules[config.__name__] = config
