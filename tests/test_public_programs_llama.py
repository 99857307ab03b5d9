"""LLaMA-style public programs (``tests/programs/llama``), unmodified, on
tracec against torch 2.13: Meta's llama ``model.py`` (complex RoPE with
``polar`` / ``view_as_complex``, the KV cache written by slice assignment,
the causal mask from ``full(-inf)`` / ``triu`` / ``hstack``) with
``generation.py``'s greedy loop (logprobs by ``cross_entropy`` with
``ignore_index``, echo), and karpathy's llama2.c ``model.py``
(real RoPE, ``scaled_dot_product_attention(is_causal=True)`` and the manual
mask path, weight tying, ``configure_optimizers``' AdamW groups,
``generate`` with top-k, ``self.last_loss`` set by ``forward``).

Each program's ``check.py`` runs under real torch first, which writes its
freshly initialized weights; the tracec runs (``tracec run``) load them, so
both compute with the same numbers.  Every saved array (logits, KV-cached
logits, generated tokens, losses, every parameter's gradient, parameters
after AdamW steps) must agree to float32 tolerances, eagerly and with the
forward passes and training step under ``torch.compile`` (tracec's, the
``interp`` and ``cpu`` backends), where the compiled code must also have
run (calls that hit a trace).
"""
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from program_runner import run_cli

pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "llama"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
PROGRAMS = ["meta", "llama2c"]


@pytest.fixture(scope="module")
def torch_refs(tmp_path_factory):
    """``program -> (reference .npz, weights .npz)``, from one torch run each."""
    out = tmp_path_factory.mktemp("llama_refs")
    procs = {}
    for prog in PROGRAMS:
        procs[prog] = subprocess.Popen(
            [sys.executable, "check.py", str(out / f"{prog}.npz"), str(out / f"{prog}.w.npz"),
             "eager"], cwd=PROGS / prog, env=ENV, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
    done = {}

    def get(prog):
        if prog not in done:
            so, se = procs[prog].communicate(timeout=600)
            assert procs[prog].returncode == 0, f"torch failed:\n{so[-2000:]}\n{se[-4000:]}"
            done[prog] = (out / f"{prog}.npz", out / f"{prog}.w.npz")
        return done[prog]
    yield get
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.wait()


def _run_tracec(prog, weights, mode, tmp_path):
    out = tmp_path / "got.npz"
    r = run_cli(["run", "check.py", out, weights, mode], PROGS / prog,
                {**ENV, "TRACEC_CACHE_DIR": str(tmp_path / "cache")}, timeout=900)
    assert r.returncode == 0, f"tracec failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return np.load(out), r.stdout


def _compare(got, want):
    assert sorted(got.files) == sorted(want.files)
    for k in want.files:
        g, w = got[k], want[k]
        assert g.shape == w.shape and g.dtype == w.dtype, (k, g.shape, w.shape, g.dtype, w.dtype)
        if g.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=k)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5, err_msg=k)


@pytest.mark.parametrize("mode", ["eager", "interp", "cpu"])
@pytest.mark.parametrize("prog", PROGRAMS)
def test_llama_program_matches_torch(prog, mode, torch_refs, tmp_path):
    ref, weights = torch_refs(prog)
    got, stdout = _run_tracec(prog, weights, mode, tmp_path)
    _compare(got, np.load(ref))
    if mode != "eager":
        # the compiled code ran: calls after the first of each signature hit a trace
        hits = [int(h) for h in re.findall(r"hits (\d+)", stdout)]
        assert hits and all(h > 0 for h in hits), stdout
