"""What the published-library program tests share
(tests/test_public_programs_{lucidlibs,gplibs,hf2libs,rllibs}.py): the skip
when a library of the test extra is missing (found with importlib, never
imported here), the torch recording keyed by the libraries' installed
versions, and the check of ``tracec run`` against it."""
import importlib.metadata
import importlib.util

import pytest

from test_public_programs_tutorials2 import ENV, check_program
from vision_oracle import recorded_torch_output

#: the programs' environment (torch.compile is eager in the reference run)
LIBRARY_ENV = {**ENV, "TORCH_COMPILE_DISABLE": "1"}


def versions_or_skip(packages) -> str:
    """``name==version`` of each of ``packages`` (part of the recordings'
    key); skips the test when one, or torch, is not installed."""
    try:
        versions = " ".join(f"{p}=={importlib.metadata.version(p)}" for p in packages)
    except importlib.metadata.PackageNotFoundError:
        versions = None
    if versions is None or importlib.util.find_spec("torch") is None:
        pytest.skip(f"{' / '.join(packages)} (the test extra) not installed")
    return versions


def recording_key(versions: str, nms: bool = False) -> str:
    """The inputs of a recording beyond the program's files."""
    return (f"TORCH_COMPILE_DISABLE=1 OMP_NUM_THREADS=1 {versions} vision_oracle.torch_command"
            + (" nms" if nms else ""))


def check_library_program(path, packages, tmp_path, nms=False) -> None:
    """``tracec run path`` prints what torch 2.13 printed (recorded; with
    ``nms``, the reference has torchvision's ``nms``: vision_oracle._NMS)."""
    versions = versions_or_skip(packages)
    ref = recorded_torch_output(path, tmp_path, LIBRARY_ENV, recording_key(versions, nms), nms)
    check_program(path, ref, tmp_path, False)
