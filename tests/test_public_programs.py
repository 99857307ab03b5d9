"""Unmodified public PyTorch programs (``tests/programs``, written from
memory: pytorch/examples and nanoGPT) run on tracec through ``tracec run``,
and behave like the same program under the real torch.

Each program runs twice in a subprocess at tiny sizes: ``python prog.py``
(torch 2.13) and ``python -m tracec.cli run prog.py`` (tracec).  Their
random streams differ (tracec need not match torch's RNG), so the printed
numbers are compared loosely: the same lines once every number is masked,
finite losses that fall, and checks that hold whatever the draws
(regression recovers its polynomial, nanoGPT starts at ln(vocab)).  The
exact comparisons are in ``test_public_programs_exact.py``: the programs'
own models and training steps, run in-process with weights copied from
torch.
"""
import inspect
import math
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import torch_recordings

from vision_oracle import torch_command
from program_runner import run_cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs"
NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")


def run(backend, script, args, cwd, extra_env=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "PYTHONWARNINGS": "ignore", **(extra_env or {})}
    if backend == "tracec":
        return run_cli(["run", PROGS / script, *args], cwd, env, timeout=300)
    # python script args, where an installed torchvision imports
    return subprocess.run(torch_command(PROGS / script, args), cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def both(script, args, tmp_path, setup=None, tracec_ok=True, setup_files=()):
    """(torch stdout lines, tracec stdout lines), each run in its own folder;
    torch's replayed from its recording (``torch_recordings``) when current:
    the key covers the program's files, ``setup``'s source and
    ``setup_files`` (the programs ``setup`` runs)."""
    def torch_live():
        cwd = tmp_path / "torch"
        cwd.mkdir()
        if setup:
            setup("torch", cwd)
        r = run("torch", script, args, cwd)
        assert r.returncode == 0, f"torch failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
        return r.stdout

    files = torch_recordings.program_files(PROGS / script, [PROGS / f for f in setup_files])
    extra = "OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore vision_oracle\n" + (
        inspect.getsource(setup) if setup else "")
    ref = torch_recordings.torch_output(f"programs/{script[:-3]}", files, args, extra, torch_live)
    outs = [(ref.splitlines(), None)]
    cwd = tmp_path / "tracec"
    cwd.mkdir()
    if setup:
        setup("tracec", cwd)
    r = run("tracec", script, args, cwd)
    if tracec_ok:
        assert r.returncode == 0, f"tracec failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    outs.append((r.stdout.splitlines(), r))
    return outs


def skeleton(lines):
    # widths of formatted numbers vary: compare the words between them
    return [" ".join(NUM.sub("#", line).split()) for line in lines]


def numbers(lines, pattern):
    return [float(m.group(1)) for line in lines for m in [re.search(pattern, line)] if m]


def falls(losses):
    return all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]


def test_mnist(tmp_path):
    (t, _), (c, _) = both("mnist/main.py", ["--synthetic", 48, "--batch-size", 16,
                                            "--test-batch-size", 24, "--epochs", 2,
                                            "--log-interval", 1], tmp_path)
    assert skeleton(c) == skeleton(t)
    for lines in (t, c):
        assert falls(numbers(lines, r"Loss: ([\d.]+)"))
        # the synthetic digits are easy: both learn them
        assert numbers(lines, r"Average loss: ([\d.]+)")[-1] < 1.0


@pytest.mark.slow
def test_mnist_rnn(tmp_path):
    (t, _), (c, _) = both("mnist_rnn/main.py", ["--synthetic", 64, "--batch-size", 16,
                                                "--test-batch-size", 32, "--epochs", 2,
                                                "--log-interval", 1, "--lr", 1.0], tmp_path)
    assert skeleton(c) == skeleton(t)
    for lines in (t, c):
        assert all(math.isfinite(v) for v in numbers(lines, r"Loss: ([\d.]+)"))


def test_vae(tmp_path):
    # the program saves images to results/ with torchvision's save_image
    (t, _), (c, _) = both("vae/main.py", ["--synthetic", 64, "--batch-size", 16, "--epochs", 2,
                                          "--log-interval", 1], tmp_path,
                          setup=lambda backend, cwd: (cwd / "results").mkdir())
    # tracec always has torchvision (tracec.vision): 8 inputs over 8 reconstructions
    from PIL import Image
    grid = Image.open(tmp_path / "tracec" / "results" / "reconstruction_2.png")
    assert grid.size == (8 * 30 + 2, 2 * 30 + 2)
    assert Image.open(tmp_path / "tracec" / "results" / "sample_1.png").size == (8 * 30 + 2,) * 2
    assert skeleton(c) == skeleton(t)
    for lines in (t, c):
        assert falls(numbers(lines, r"Loss: ([\d.]+)"))
    # BCE + KL of a fresh VAE on the same data: ~784 * ln 2 per image at the start
    np.testing.assert_allclose(numbers(c, r"Loss: ([\d.]+)")[0],
                               numbers(t, r"Loss: ([\d.]+)")[0], rtol=0.02)


def _poly(line):
    return [float(v) for v in re.findall(r"[-+]\d+\.\d+", line.split("=", 1)[1])]


def test_regression_recovers_its_polynomial(tmp_path):
    (t, _), (c, _) = both("regression/main.py", [], tmp_path)
    assert skeleton(c) == skeleton(t)
    for lines in (t, c):
        assert numbers(lines, r"Loss: ([\d.]+)")[0] < 1e-3
        learned = next(line for line in lines if "Learned" in line)
        actual = next(line for line in lines if "Actual" in line)
        np.testing.assert_allclose(_poly(learned), _poly(actual), atol=0.25)


@pytest.mark.slow
def test_time_sequence_prediction(tmp_path):
    def make_data(backend, cwd):
        r = run(backend, "time_sequence_prediction/generate_sine_wave.py",
                ["--length", 16, "--n", 5], cwd)
        assert r.returncode == 0, r.stderr

    (t, _), (c, _) = both("time_sequence_prediction/train.py", ["--steps", 2, "--future", 4],
                          tmp_path, setup=make_data,
                          setup_files=["time_sequence_prediction/generate_sine_wave.py"])
    # LBFGS may stop after a different number of evaluations: compare the rest
    drop = re.compile(r"^loss: ")
    assert skeleton([x for x in c if not drop.match(x)]) == \
        skeleton([x for x in t if not drop.match(x)])
    for lines in (t, c):
        assert falls(numbers(lines, r"^loss: (\S+)"))


def test_reinforce_on_cartpole(tmp_path):
    (t, _), (c, _) = both("reinforcement_learning/reinforce.py",
                          ["--max-episodes", 12, "--log-interval", 4], tmp_path)
    assert skeleton(c) == skeleton(t) and len(c) == 3
    for lines in (t, c):
        rewards = numbers(lines, r"Last reward: ([\d.]+)")
        assert all(1 <= r <= 500 for r in rewards)


def test_nanogpt_char(tmp_path):
    args = ["--batch_size", 4, "--block_size", 16, "--n_layer", 2, "--n_head", 2, "--n_embd", 16,
            "--dropout", 0, "--max_iters", 20, "--lr_decay_iters", 20, "--warmup_iters", 5,
            "--eval_interval", 10, "--eval_iters", 2, "--log_interval", 5, "--text_length", 2000,
            "--max_new_tokens", 20]
    (t, _), (c, _) = both("nanogpt/train.py", args, tmp_path)
    # the last two lines are the sampled text and its rule
    assert skeleton(c[:-2]) == skeleton(t[:-2]) and c[-1] == t[-1] == "-" * 15
    alphabet = set("abcdefghijklmnopqrstuvwxyz \n")
    assert len(c[-2]) >= 1 and set(c[-2]) <= alphabet
    for lines in (t, c):
        # weights ~ N(0, 0.02): the first loss is ln(vocabulary size)
        assert abs(numbers(lines, r"iter 0: loss ([\d.]+)")[0] - math.log(28)) < 0.05
        assert all(math.isfinite(v) for v in numbers(lines, r"loss ([\d.]+)"))


def test_nanogpt_compiled_model_trains_like_eager(tmp_path):
    """nanoGPT's ``model = torch.compile(model)`` (its default; ``--compile``
    here) under tracec: the compiled model's losses, evaluations and sampled
    text equal the eager run's, digit for digit (its dropout masks too: the
    eager run draws from the compiled code's stream, ``TRACEC_TORCH_RNG=0``)."""
    args = ["--batch_size", 4, "--block_size", 16, "--n_layer", 2, "--n_head", 2, "--n_embd", 16,
            "--dropout", 0.1, "--max_iters", 12, "--lr_decay_iters", 12, "--warmup_iters", 3,
            "--eval_interval", 6, "--eval_iters", 2, "--log_interval", 3, "--text_length", 2000,
            "--max_new_tokens", 20]
    outs = []
    for extra in ([], ["--compile"]):
        cwd = tmp_path / ("compiled" if extra else "eager")
        cwd.mkdir()
        r = run("tracec", "nanogpt/train.py", args + extra, cwd, {"TRACEC_TORCH_RNG": "0"})
        assert r.returncode == 0, r.stderr[-4000:]
        outs.append([re.sub(r", time [\d.]+ms", "", line) for line in r.stdout.splitlines()
                     if not line.startswith("compiling the model")])
    assert outs[1] == outs[0]
    assert "running eagerly" not in r.stderr


def _corpus(backend, cwd):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    for name, n in [("train", 40), ("valid", 12), ("test", 12)]:
        with open(cwd / f"{name}.txt", "w") as f:
            for _ in range(n):
                f.write(" " + " ".join(rng.choice(words, size=rng.integers(3, 10))) + " \n")


@pytest.mark.parametrize("model", ["LSTM", "GRU", "RNN_TANH", "Transformer"])
def test_word_language_model(tmp_path, model):
    """Trains, evaluates, saves the whole model (``torch.save(model, f)``:
    pickled, tensors as data), loads it back with ``weights_only=False``
    and tests it, as torch does, to the last line."""
    args = ["--data", ".", "--model", model, "--emsize", 16, "--nhid", 16, "--nlayers", 2,
            "--batch_size", 4, "--bptt", 8, "--epochs", 1, "--log-interval", 4,
            "--dropout", 0, "--lr", 2, "--save", "model.pt"]
    (t, _), (c, _) = both("word_language_model/main.py", args, tmp_path, setup=_corpus)
    assert skeleton(c) == skeleton(t)
    assert any("End of training" in line for line in c)
    for lines in (t, c):
        train = numbers(lines, r"\| loss +([\d.]+)")
        assert len(train) == 2 and all(math.isfinite(v) for v in train)
        # random words (41 with <eos>): nothing to learn beyond the
        # frequencies, so the valid and test losses stay near ln(41)
        assert abs(numbers(lines, r"valid loss +([\d.]+)")[0] - math.log(41)) < 0.5
        assert abs(numbers(lines, r"test loss +([\d.]+)")[0] - math.log(41)) < 0.5
