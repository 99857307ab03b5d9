"""pytorch/examples mnist/main.py as published (``tests/programs/mnist_vision``:
``torchvision.datasets.MNIST`` + ``transforms`` + DataLoader + StepLR), run
unmodified on small MNIST idx files in ``../data/MNIST/raw``, once with
torch 2.13 + torchvision 0.28 and once under ``tracec run`` (where
``torchvision`` is ``tracec.vision``).  The two draw different initial
weights and dropout masks, so the output is compared as in
``test_public_programs.py``: the same lines once numbers are masked, the
same dataset sizes, finite losses starting near ln(10) that fall.  torch's
output is replayed from its recording (``torch_recordings``) while the
program, the data this file writes and the arguments are unchanged."""
import inspect
import math
import os
import subprocess

import numpy as np

from test_public_programs import PROGS, ROOT, numbers, skeleton
from test_vision_datasets import idx_bytes
from vision_oracle import torch_command, torchvision
from program_runner import run_cli
import torch_recordings

torchvision()


def write_digits(n, seed):
    """``n`` 28x28 "digits": label k lights the k-th 7x7 cell of a 4x4 grid."""
    rng = np.random.default_rng(seed)
    images = (rng.random((n, 28, 28)) * 60).astype(np.uint8)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    for img, k in zip(images, labels):
        r, c = divmod(int(k), 4)
        img[r * 7:r * 7 + 7, c * 7:c * 7 + 7] += 180
    return images, labels


def setup_data(root):
    raw = root / "data" / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for prefix, n, seed in (("train", 64, 0), ("t10k", 32, 1)):
        images, labels = write_digits(n, seed)
        (raw / f"{prefix}-images-idx3-ubyte").write_bytes(idx_bytes(images))
        (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(idx_bytes(labels))
    (root / "work").mkdir()
    return root / "work"


def run(backend, args, cwd):
    prog = str(PROGS / "mnist_vision" / "main.py")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "PYTHONWARNINGS": "ignore"}
    if backend == "tracec":
        r = run_cli(["run", prog, *args], cwd, env, timeout=300)
    else:
        r = subprocess.run(torch_command(prog, args), cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=300)
    assert r.returncode == 0, f"{backend} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r.stdout.splitlines()


def test_mnist_with_torchvision_datasets(tmp_path):
    args = ["--epochs", "2", "--batch-size", "16", "--test-batch-size", "16",
            "--log-interval", "1", "--lr", "0.5"]
    prog = PROGS / "mnist_vision" / "main.py"
    # the key covers the data: the source of what writes it
    extra = "OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore vision_oracle.torch_command\n" + "".join(
        inspect.getsource(f) for f in (write_digits, setup_data, idx_bytes))
    ref = torch_recordings.torch_output(
        "programs/mnist_vision/main", torch_recordings.program_files(prog), args, extra,
        lambda: "\n".join(run("torch", args, setup_data(tmp_path / "torch"))) + "\n")
    out = {"torch": ref.splitlines(), "tracec": run("tracec", args, setup_data(tmp_path / "tracec"))}
    assert skeleton(out["tracec"]) == skeleton(out["torch"])
    assert any("[48/64 (75%)]" in line for line in out["tracec"])
    assert any("Accuracy:" in line and "/32" in line for line in out["tracec"])
    for lines in out.values():
        losses = numbers(lines, r"Loss: ([\d.]+)")
        assert len(losses) == 8 and all(math.isfinite(v) for v in losses)
        assert abs(losses[0] - math.log(10)) < 0.5
        assert losses[-1] < losses[0]
