"""Real published packages' own code on tracec (tests/programs/hflibs):
Hugging Face transformers 5.24.0 and safetensors 0.8.0 from PyPI, unmodified,
under ``tracec run`` (``import torch`` is tracec for them too).

``transformers_models.py``: Bert / GPT-2 / Llama / T5 built from tiny
configs (no downloads), trained a few AdamW steps with
``get_linear_schedule_with_warmup`` (losses, clipped gradient norms,
learning rates), evaluated, and greedy ``generate``; transformers
initializes weights through torch's RNG and nn.init, so every number is
compared.  ``safetensors_pretrained.py``: safetensors' torch API (files,
bytes, models, ``safe_open`` slices, bfloat16), a torch-written file read,
and ``save_pretrained`` / ``from_pretrained``; its own file
(``written.safetensors``) is then read here with torch, so files cross
both ways.  ``transformers_trainer.py``: Trainer (through accelerate)
training and evaluating a GPT-2, its log history compared.

The references run under torch 2.13 through torchvision's Python code
(``vision_oracle.torch_command``: transformers imports torchvision when
Pillow is there), recorded with the packages' versions in the key.
"""
import importlib.metadata
import importlib.util
import pathlib
import subprocess

import pytest

import torch_recordings
from test_public_programs_tutorials2 import ENV, check_program
from vision_oracle import torch_command

# Skipped where a library is missing, without importing it here: an import in
# the test process would cost every worker its import time, and some patch
# the real torch they import (Pyro re-registers torch.distributions' biject_to).
_MISSING = [m for m in ('transformers', 'safetensors', 'accelerate') if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {_MISSING}")

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "hflibs"
CASES = ["transformers_models.py", "safetensors_pretrained.py", "transformers_trainer.py"]
VERSIONS = " ".join(f"{p}=={importlib.metadata.version(p)}"
                    for p in ("transformers", "safetensors", "huggingface_hub", "accelerate",
                              "torchvision"))


def _torch_ref(script, cwd):
    path = PROGS / script
    env = {**ENV, "TORCH_COMPILE_DISABLE": "1"}

    def run():
        r = subprocess.run(torch_command(path, []), cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, "torch failed:\n" + r.stderr[-4000:]
        return r.stdout

    files = torch_recordings.program_files(path, [PROGS / "torch_written.safetensors"])
    return torch_recordings.torch_output(
        f"{PROGS.name}/{path.stem}", files, [],
        f"TORCH_COMPILE_DISABLE=1 OMP_NUM_THREADS=1 {VERSIONS} vision_oracle.torch_command", run)


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_hflibs_program_matches_torch(script, tmp_path):
    (tmp_path / "torch").mkdir()
    ref = _torch_ref(script, tmp_path / "torch")
    check_program(PROGS / script, ref, tmp_path, False)
    if script == "safetensors_pretrained.py":
        _torch_reads_what_tracec_wrote(tmp_path / "written.safetensors")


def _torch_reads_what_tracec_wrote(path):
    pt = pytest.importorskip("torch")
    from safetensors import safe_open
    from safetensors.torch import load_file
    pt.manual_seed(0)
    want = {"w": pt.randn(3, 4), "b": pt.arange(5, dtype=pt.int64),
            "h": pt.randn(2, 2).half(), "m": pt.tensor([True, False]),
            "bf": pt.randn(3).bfloat16(), "u": pt.arange(4, dtype=pt.uint8)}
    got = load_file(path)
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and pt.equal(got[k], want[k]), k
    with safe_open(str(path), framework="pt") as f:
        assert f.metadata() == {"format": "pt", "by": "program"}
