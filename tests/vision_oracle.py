"""The real torchvision 0.28 as a test oracle (the ``test`` extra pins it).

Its wheel is the CUDA build: the compiled ops (``torchvision._C``) cannot
load against the CPU torch, and its import-time registrations of those ops
then fail.  The transforms, datasets, models and Python box ops the tests
compare with need none of it, so the two registration modules are left
empty.  Tests skip when torchvision is not installed."""
import sys
import types

import pytest


def torchvision():
    pytest.importorskip("torch")
    if "torchvision" not in sys.modules:
        for name in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
            sys.modules.setdefault(name, types.ModuleType(name))
    return pytest.importorskip("torchvision")


def oracle_env_code() -> str:
    """Python lines that make ``import torchvision`` work in a fresh
    process running the real torch (for whole-program comparisons)."""
    return ("import sys, types\n"
            "for _n in ('torchvision._meta_registrations', "
            "'torchvision._autograd_registrations'):\n"
            "    sys.modules.setdefault(_n, types.ModuleType(_n))\n")
