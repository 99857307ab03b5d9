"""Public programs, small configurations (``tests/programs/programs31``):
official pytorch/tutorials pages a new user runs first, as published (the
page each follows is named in its header), on small synthetic data: the
"Implementing High-Performance Transformers with Scaled Dot Product
Attention" tutorial (sdpa_kernel backends, torch.utils.benchmark.Timer,
CausalSelfAttention, a compiled model), "Deep Learning for NLP with
PyTorch" (its tensor and autograd introduction and the BoWClassifier), and
"Python Custom Operators" (torch.library.custom_op with register_fake,
register_autograd, a mutating op, opcheck), and the "PyTorch Profiler"
recipe (record_function ranges, key_averages tables, a schedule with
on_trace_ready, a profiled training loop; what it prints is what does not
depend on timings or operator names), and the Intro to PyTorch series'
"The Fundamentals of Autograd" (grad_fn chains through next_functions,
TinyModel trained by hand, no_grad / detach, the in-place leaf error,
autograd.functional.jacobian and vjp), and the "Autograd mechanics" notes
with the blitz autograd tutorial (saved tensors, grad modes, inference
mode, the in-place correctness error, tensor and post-accumulate hooks, a
frozen backbone, a create_graph gradient penalty), and the TensorBoard
recipes (SummaryWriter scalars, add_scalars, add_image, add_histogram, read
back with tensorboard's EventAccumulator), and the "Reasoning about Shapes"
recipe (the meta device, torch.device("meta") as a context, forward hooks
printing shapes, to_empty), and the torch.export tutorial's first sections
(export, ep.module(), Dim dynamic shapes, the static-shape guard).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1``; each checks a compiled training step against
the same step run eagerly.  The SDPA tutorial's
``y.transpose(1, 2).view(...)`` needs the attention output in the query's
memory layout, as PyTorch's CPU flash kernel allocates it; the custom-op
tutorial's backward reads ``ctx.needs_input_grad`` per op input, and its
mutating op needs no fake kernel in opcheck; the autograd tutorial's
``2 * b`` lists the tensor's edge first in next_functions, and an integer
cast's result does not require grad, and SummaryWriter.add_image writes
PyTorch's image summary (test_programs31_gaps).  The
custom-op program's compiled step runs eagerly under tracec.compile: its op
computes in NumPy, which compiled native code cannot call back into (tracec
says so; torch.compile keeps such an op as an opaque call in its graph).
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "programs31"

CASES = ["sdpa_tutorial.py", "nlp_bow_classifier.py", "python_custom_ops.py",
         "profiler_recipe.py", "autograd_yt.py",
         "autograd_mechanics.py", "tensorboard_recipe.py",
         "reasoning_about_shapes.py", "export_tutorial.py"]
EAGER_FALLBACK = {"python_custom_ops.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_programs31_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
