"""Public attention, detection, speech, recurrent and implicit-network
programs, small configurations (``tests/programs/models28``):
lucidrains/reformer-pytorch (LSH attention: random-rotation hashing by
einsum, argmax over [rotated, -rotated], the sort of bucket * seqlen +
ticker with sort_key_val and argsort, batched_index_select by gather with
an expanded index, chunks looking one back by roll, masked_fill_ with
-finfo.max and the self-attention value, logsumexp softmax, the outputs
unsorted by scatter; reversible.py's Deterministic with get_rng_state /
fork_rng / set_rng_state, ReversibleBlock.backward_pass recomputing under
enable_grad inside the custom _ReversibleFunction, checked against the
irreversible path, dropout replay included).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, and print the verdict); weights and data come
from numpy, and lines marked ``[rng]`` are not compared numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models28"

CASES = ["reformer.py"]
EAGER_FALLBACK: set = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models28_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
