"""Official PyTorch tutorials, small-shape versions (``tests/programs/
tutorials2``): seq2seq translation with Bahdanau attention, spatial
transformer networks (every affine_grid / grid_sample option), text
classification with EmbeddingBag and a collate_fn DataLoader, pruning
(``torch.nn.utils.prune``), parametrizations, model ensembling and
per-sample gradients with ``torch.func``, knowledge distillation, and custom
``autograd.Function``s with non-reentrant checkpointing.

Each runs under ``tracec run`` and, as the reference, under torch 2.13.
Weights and data come from numpy, so the two runs compute the same numbers:
the outputs must have the same lines (numbers masked, spaces dropped) and
every number must agree to a tolerance, except on lines marked ``[rng]``
(values that depend on the generators' draws, e.g. dropout in training).
Warnings go to stderr and are not compared.  The torch references run in one
process, started once for the module (importing torch costs seconds each).
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
PROGS = ROOT / "tests" / "programs" / "tutorials2"
NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")
ADDR = re.compile(r" at 0x[0-9a-f]+")
MODULE = re.compile(r"\b(?:torch|tracec)\.(?=nn\.utils)|\b(?:torch|tracec)\.(?:tensor\.)?(?=Tensor\b)")

CASES = ["seq2seq_attention.py", "spatial_transformer.py", "text_classification.py",
         "pruning.py", "parametrizations.py", "ensembling_func.py", "distillation.py",
         "custom_autograd.py"]


ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}

# Runs each program (argv: out_dir, scripts...) in this one process, its
# stdout to out_dir/<script>.out, or its traceback to <script>.err.
DRIVER = """
import contextlib, io, os, runpy, sys, traceback, types
# torchvision's CUDA wheel cannot register its compiled ops against the CPU
# torch: skip those registrations (tests/vision_oracle.py), so that programs
# and libraries importing torchvision (torchmetrics) run under torch.
for name in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
    sys.modules.setdefault(name, types.ModuleType(name))
out = sys.argv[1]
for path in sys.argv[2:]:
    name = os.path.basename(path)
    work = os.path.join(out, name + '.cwd')
    os.makedirs(work)
    os.chdir(work)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            runpy.run_path(path, run_name='__main__')
    except BaseException:
        open(os.path.join(out, name + '.err'), 'w').write(buf.getvalue() + traceback.format_exc())
    else:
        open(os.path.join(out, name + '.out'), 'w').write(buf.getvalue())
"""


def torch_refs_fixture(progs, cases, env):
    """A module-scoped fixture: the torch references of ``cases`` (scripts
    in ``progs``): their current recordings (``torch_recordings``), and the
    rest run by DRIVER in one process started once; the fixture's value
    gives a script's stdout."""
    extra = f"TORCH_COMPILE_DISABLE={env.get('TORCH_COMPILE_DISABLE', '')} OMP_NUM_THREADS=1 driver"

    def key(c):
        return f"{progs.name}/{c[:-3]}", torch_recordings.program_files(progs / c), [], extra

    @pytest.fixture(scope="module")
    def torch_refs(tmp_path_factory):
        out = tmp_path_factory.mktemp("torch_refs")
        replay = {c: torch_recordings.stored(*key(c)) for c in cases}
        live = [c for c in cases if replay[c] is None]
        proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(out)] +
                                [str(progs / c) for c in live], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True) if live else None
        done = {}

        def run(script):
            if not done:
                _, err = proc.communicate(timeout=600)
                done["rc"] = (proc.returncode, err)
            if (out / (script + ".err")).exists():
                pytest.fail("torch failed:\n" + (out / (script + ".err")).read_text()[-4000:])
            assert (out / (script + ".out")).exists(), f"torch driver failed: {done['rc']}"
            return (out / (script + ".out")).read_text()

        def get(script):
            if replay[script] is not None:
                return replay[script]
            return torch_recordings.torch_output(*key(script), lambda: run(script))
        yield get
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
    return torch_refs


#: The environment for a program whose compiled step draws random numbers
#: and is checked against its eager step bit for bit: eager draws from the
#: compiled code's counter-based stream (by default they follow PyTorch's
#: Mersenne Twister, and, as with torch.compile, compiled draws do not).
COUNTER_RNG_ENV = {**ENV, "TRACEC_TORCH_RNG": "0"}


def run_tracec(path, cwd, env=None):
    """``tracec run path`` in ``cwd``: (stdout, stderr); fails the test if it fails."""
    r = run_cli(["run", path], cwd, ENV if env is None else env, timeout=600)
    assert r.returncode == 0, f"tracec failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r.stdout, r.stderr


#: stderr lines saying that a compiled step ran eagerly
FALLBACK_WARNINGS = ("running eagerly", "a Python side effect that compiled calls would not repeat")


def check_program(path, ref, cwd, eager_fallback: bool, env=None):
    """``tracec run path`` prints torch's ``ref`` (``assert_output_matches``,
    strict), and says its compiled step ran eagerly exactly when
    ``eager_fallback``."""
    out, err = run_tracec(path, cwd, env)
    assert any(w in err for w in FALLBACK_WARNINGS) == eager_fallback, err[-3000:]
    assert_output_matches(out, ref, strict=True)


torch_refs = torch_refs_fixture(PROGS, CASES, ENV)


def _run_tracec(script, cwd):
    return run_tracec(PROGS / script, cwd)[0]


def _lines(text):
    return [MODULE.sub("", ADDR.sub("", ln)) for ln in text.splitlines() if ln.strip()]


def _numbers(line):
    out = []
    for m in NUM.findall(line):
        out.append(float(m))
    return out


def _close(a, b, rtol=2e-3, atol=2e-4):
    if a != a or b != b:
        return a != a and b != b
    if a == b:      # (equal infinities: a printed -inf mask)
        return True
    return abs(a - b) <= atol + rtol * abs(b)


def assert_output_matches(out, ref, strict=False):
    """tracec's output ``out`` has torch's ``ref``'s lines (numbers masked,
    spaces dropped) and every number agrees, except on ``[rng]`` lines;
    ``strict``: as many numbers on each line, and no "compiled == eager"
    line saying False (under tracec: tracec.compile against eager)."""
    got, want = _lines(out), _lines(ref)
    assert ["".join(NUM.sub("#", ln).split()) for ln in got] == \
        ["".join(NUM.sub("#", ln).split()) for ln in want]
    for g, w in zip(got, want):
        if "[rng]" in w:
            continue
        if strict:
            assert len(_numbers(g)) == len(_numbers(w))
        for a, b in zip(_numbers(g), _numbers(w)):
            assert _close(a, b), f"tracec: {g}\ntorch:  {w}"
    if strict:
        for ln in got:
            if "compiled == eager" in ln:
                assert "False" not in ln, ln


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_tutorial2_program_matches_torch(script, torch_refs, tmp_path):
    assert_output_matches(_run_tracec(script, tmp_path), torch_refs(script))
