"""The real torchvision 0.28 as a test oracle (the ``test`` extra pins it).

Its wheel is the CUDA build: the compiled ops (``torchvision._C``) cannot
load against the CPU torch, and its import-time registrations of those ops
then raise RuntimeError (not ImportError).  The transforms, datasets, models
and Python box ops the tests compare with need none of it, so the two
registration modules are left empty: in this process by ``stub()`` (which
``conftest.py`` calls), in a child process by ``torch_command``.  Tests that
compare with torchvision skip when it is not installed."""
import importlib.util
import os
import sys
import types

import pytest

_STUBS = ("torchvision._meta_registrations", "torchvision._autograd_registrations")


def stub():
    for name in _STUBS:
        sys.modules.setdefault(name, types.ModuleType(name))


def torchvision():
    pytest.importorskip("torch")
    stub()
    return pytest.importorskip("torchvision")


def optional():
    """(torchvision, torch), or (None, None) when either is not installed;
    with ``needs_torchvision`` on the tests that compare with them."""
    try:
        import torch
        stub()
        import torchvision as tv
    except ImportError:
        return None, None
    return tv, torch


def __getattr__(name):
    """``needs_torchvision``, the skip mark of tests that compare with
    torchvision, made on first use: importing torch and torchvision takes
    ~5 s of CPU, which the xdist controller (it imports this module through
    conftest.py, and runs no test) would otherwise spend for nothing."""
    if name == "needs_torchvision":
        mark = pytest.mark.skipif(optional()[0] is None,
                                  reason="torchvision (the test oracle) is not installed")
        globals()[name] = mark
        return mark
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _site():
    """The folder torchvision is imported from here (None when absent)."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(list(spec.submodule_search_locations)[0])


#: torchvision's compiled ``nms`` as Python, for the reference runs of
#: programs whose libraries call it (ultralytics' validation, SAM's automatic
#: masks): greedy over the boxes by descending score (a stable sort), each
#: kept box dropping the later ones whose IoU with it exceeds the threshold,
#: as torchvision's CPU kernel does.
_NMS = (
    "import torch, torchvision.extension as _ext\n"
    "from torchvision.ops.boxes import box_iou as _iou\n"
    "def _nms(dets, scores, iou_threshold):\n"
    "    order = torch.sort(scores, stable=True, descending=True).indices.tolist()\n"
    "    over = (_iou(dets, dets) > iou_threshold).tolist()\n"
    "    gone, keep = set(), []\n"
    "    for i in order:\n"
    "        if i not in gone:\n"
    "            keep.append(i)\n"
    "            gone.update(j for j in order if over[i][j])\n"
    "    return torch.tensor(keep, dtype=torch.long)\n"
    "_lib = torch.library.Library('torchvision', 'DEF')\n"
    "_lib.define('nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor')\n"
    "_lib.impl('nms', _nms, 'CPU')\n"
    "_ext._has_ops = lambda: True\n")


def torch_command(script, args, nms=False):
    """argv running ``script`` as ``python script args`` with the real torch,
    where ``import torchvision`` works when torchvision is installed (and
    fails with ImportError, as programs expect, when it is not); with
    ``nms``, torchvision's ``nms`` works too (``_NMS``)."""
    site = _site()
    code = ("import runpy, sys, types\n"
            f"for _n in {_STUBS!r}:\n"
            "    sys.modules.setdefault(_n, types.ModuleType(_n))\n"
            + (f"sys.path.append({site!r})\n" if site else "")
            + (_NMS if nms and site else "")
            + "sys.argv = sys.argv[1:]\n"
            "sys.path.insert(0, __import__('os').path.dirname(sys.argv[0]))\n"
            "runpy.run_path(sys.argv[0], run_name='__main__')\n")
    return [sys.executable, "-c", code, str(script), *map(str, args)]


def recorded_torch_output(script, cwd, env, extra, nms=False):
    """torch's stdout for ``script`` run by ``torch_command`` in ``cwd``:
    its recording ``<folder>/<name>`` when current (tests/torch_recordings.py),
    else a live run; ``extra`` names the inputs beyond the program's files
    (``nms``: see ``torch_command``)."""
    import subprocess

    import torch_recordings

    def run():
        r = subprocess.run(torch_command(script, [], nms), cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, "torch failed:\n" + r.stderr[-4000:]
        return r.stdout

    return torch_recordings.torch_output(f"{script.parent.name}/{script.stem}",
                                         torch_recordings.program_files(script), [], extra, run)
