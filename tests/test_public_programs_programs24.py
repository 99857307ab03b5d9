"""Public programs, small configurations (``tests/programs/programs24``):
lucidrains/lambda-networks' LambdaLayer (einops rearrange, einsum content
and position lambdas, the local-context F.conv3d and the global relative
position embedding, dim_u > 1) in a small classifier trained with SGD; the
PyTorch tutorial on hooks for autograd saved tensors (``grad_fn._saved_*``,
saved_tensors_hooks packing to a scaled tensor, a list index, a tuple with
a closure, a repr string, save_on_cpu, torch.save / torch.load temp files
deleted when the graph frees them, SaveToDisk under nn.DataParallel); and
the tutorial fusing the optimizer step into backward with
``register_post_accumulate_grad_hook`` (one Adam per parameter, stepped in
backward; the same trajectory as the plain Adam loop; compiled); labml's
annotated PonderNet on the parity task (GRUCell unrolled with bernoulli
halting, the KL regularization to a geometric prior, labml_helpers'
``__call__``-as-forward Module, a DataLoader over a Dataset drawing with
randint / randperm); the recipe on loading a module from a checkpoint
(torch.load(mmap=True), torch.device("meta"), load_state_dict(assign=True),
the no-op copy into meta parameters); and the tutorial on leaf and non-leaf
tensors (is_leaf, retain_grad, retains_grad, the warning on a non-leaf's
``.grad`` and the errors it quotes); karpathy/ng-video-lecture's gpt.py
(dropout attention heads, AdamW, multinomial generation); and
karpathy/pytorch-made's made.py (masked linears whose uint8 numpy masks are
copied through ``.data.copy_``, the autoregressive check by backward); and
labml's HyperLSTM (a layer-normed LSTM cell scaling the rows of the main
LSTM's ParameterList weights through einsum, two layers, carried state);
and lucidrains/memory-efficient-attention-pytorch's FlashAttentionFunction
(an autograd.Function with @torch.no_grad() forward and backward writing
in place into split views, checked against plain attention, compiled).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check a compiled step against the
same step run eagerly, and print the verdict).  The saved-tensor-hooks
program's compiled step runs eagerly: compiled code would not call a pack
hook (tracec says so and runs the call eagerly).
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "programs24"

CASES = ["lambda_networks.py", "saved_tensors_hooks.py", "optimizer_step_in_backward.py",
         "ponder_net.py", "module_load_tips.py", "leaf_vs_nonleaf.py",
         "ng_video_gpt.py", "made.py", "hyper_lstm.py", "flash_attention.py"]
EAGER_FALLBACK = {"saved_tensors_hooks.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_programs24_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
