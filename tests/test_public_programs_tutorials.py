"""More public PyTorch programs, unmodified but for synthetic data (written
from memory: harvardnlp's The Annotated Transformer, the PyTorch tutorials "What is torch.nn really?", "Neural
networks" / autograd / tensors, seq2seq translation, DQN, DCGAN, spatial
transformer, text classification; pytorch/examples fast_neural_style,
mnist_hogwild and dcgan; karpathy's minGPT and makemore part 3).

Each runs under ``tracec run`` and, as the reference, under torch 2.13.  The
random streams differ, so the outputs are compared once every number is
masked (the same lines in the same order), warnings aside (PyTorch reports
them at its own file, tracec at the user's line).
"""
import os
import pathlib
import re
import subprocess
import sys

import pytest

import torch_recordings
from program_runner import run_cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "tutorials"
NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")

# program, extra args, compare with torch (hogwild's torch run forks a
# multi-threaded process: skipped), slow; MASKS: words that depend on the draws
CASES = [
    ("nn_tutorial.py", [], True, True),
    ("nn_lenet_autograd_tensors.py", [], True, False),
    ("seq2seq_translation.py", [], True, True),
    ("dqn.py", [], True, False),
    ("dcgan.py", [], True, True),
    ("spatial_transformer.py", [], True, False),
    ("text_classification.py", [], True, False),
    ("fast_neural_style.py", [], True, True),
    ("mnist_hogwild.py", ["--epochs", "1"], False, False),
    ("mingpt.py", [], True, True),
    ("makemore_part3.py", [], True, False),
    ("annotated_transformer.py", [], True, True),
]


MASKS = {"text_classification.py": re.compile(r"This is a \S+ news"),
         "makemore_part3.py": re.compile(r"^[a-z]*\.$", re.M)}  # the sampled names


def _run(backend, script, args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    if backend == "tracec":
        r = run_cli(["run", PROGS / script, *args], cwd, env, timeout=600)
    else:
        r = subprocess.run([sys.executable, str(PROGS / script), *args], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{backend} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r.stdout


GRAD_FN = re.compile(r"<\w+ object at 0x[0-9a-f]+>|(?<=grad_fn=)<\w+>")


def _skeleton(text):
    # grad_fn reprs name the last primitive (MeanBackward0 where PyTorch has
    # MseLossBackward0) and an address: masked.
    lines = [GRAD_FN.sub("<grad_fn>", ln) for ln in text.splitlines() if ln.strip()]
    return [" ".join(NUM.sub("#", ln).split()) for ln in lines]


@pytest.mark.parametrize("script,args,compare,slow", [
    pytest.param(*c, marks=[pytest.mark.slow] if c[3] else [], id=c[0][:-3]) for c in CASES])
def test_tutorial_program_runs_like_torch(script, args, compare, slow, tmp_path):
    (tmp_path / "tracec").mkdir()
    out = _run("tracec", script, args, tmp_path / "tracec")
    assert "Traceback" not in out
    if compare:
        (tmp_path / "torch").mkdir()
        ref = torch_recordings.torch_output(
            f"tutorials/{script[:-3]}", torch_recordings.program_files(PROGS / script), args,
            "OMP_NUM_THREADS=1", lambda: _run("torch", script, args, tmp_path / "torch"))
        mask = MASKS.get(script)
        if mask is not None:
            out, ref = mask.sub("#", out), mask.sub("#", ref)
        assert _skeleton(out) == _skeleton(ref)
