"""PyTorch tutorials on function transforms and custom autograd, written as
the tutorials write them, seeded with ``torch.manual_seed`` and default
initialization, small sizes (``tests/programs/models38``): "Jacobians,
Hessians, hvp, vhp, and more" and "Neural Tangent Kernels" (``torch.func``
jacrev / jacfwd / hessian / vjp / jvp / vmap with ``argnums`` tuples and
``functools.partial``, ``vmap(jacrev(fnet_single), (None, 0))`` over a
``functional_call`` parameter dict, the NTK einsum contractions and the
vjp / jvp ntk_vps variant); "Forward-mode Automatic Differentiation"
(``fwAD.dual_level`` / ``make_dual`` / ``unpack_dual``, dual parameters set
on a module and passed to ``functional_call``, custom Functions with
``jvp`` and ``ctx.save_for_forward``, ``gradcheck(check_forward_ad=True)``);
"Double Backward with Custom Functions" and "Fusing Convolution and Batch
Norm using Custom Function" (Square / Exp / Sinh / SinhBad / Cube with
gradcheck and gradgradcheck, whose random grad_outputs follow PyTorch's
draws; ``once_differentiable``, ``torch.nn.grad.conv2d_input`` /
``conv2d_weight``, the hand-written batch-norm backward, the fused
Conv+BN module trained beside the unfused Net with Adadelta and StepLR);
"Transfer Learning for Computer Vision" (a seeded torchvision resnet18
finetuned and used as a fixed feature extractor, train_model's phases with
``set_grad_enabled``, the best weights through ``torch.save`` /
``torch.load(weights_only=True)`` in a TemporaryDirectory; its reference
runs torchvision's Python code, ``vision_oracle.torch_command``); and the
character-level RNN name classification (2024 version: NamesDataset,
``random_split`` with a seeded Generator, nn.RNN, ``clip_grad_norm_``, the
confusion matrix) and generation tutorials (Dropout(0.1) left on while
sampling with ``topk``, the manual ``p.data.add_`` update): tracec's eager
draws follow PyTorch's, so the split, the dropout masks and the samples
are compared too.

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled part against
the same computation run eagerly, and print the verdict).
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture
from vision_oracle import needs_torchvision, recorded_torch_stdout

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models38"

CASES = ["jacobians_ntk.py", "forward_ad.py", "double_backward_fused.py", "char_rnn.py"]
EAGER_FALLBACK = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models38_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)


@needs_torchvision
def test_models38_transfer_learning_matches_torch(tmp_path):
    script = PROGS / "transfer_learning.py"
    env = {**ENV, "TORCH_COMPILE_DISABLE": "1"}

    ref = recorded_torch_stdout(
        script, tmp_path, env,
        "TORCH_COMPILE_DISABLE=1 OMP_NUM_THREADS=1 torchvision==0.28.0 vision_oracle.torch_command")
    check_program(script, ref, tmp_path, False)
