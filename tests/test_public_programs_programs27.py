"""Public programs, small configurations (``tests/programs/programs27``),
written for these tests after public code (the source each follows is named
in its header): a Hugging Face-style fine-tuning loop (no_decay AdamW
groups, frozen embeddings, gradient accumulation, SequentialLR of LinearLR
and PolynomialLR, a ChainedScheduler, inference_mode evaluation, the model
compiled), a CRNN CAPTCHA reader trained with F.ctc_loss (greedy decoding
through unique_consecutive), Dev Nag's "GANs in 50 lines" (BCELoss, two SGD
optimizers, storage().tolist()), a tabular regression with a custom
Dataset, random_split, DataLoader generators, ReduceLROnPlateau and a
checkpoint dict saved and resumed, spro's char-rnn (a GRU stepped one
character at a time, generation by torch.multinomial), and
pytorch-optimizer's optimizer visualisation objectives (Rosenbrock,
Rastrigin) run by torch.optim's Rprop, ASGD, Adadelta, Adagrad, Adamax,
NAdam, RAdam, RMSprop, SGD and LBFGS.

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (each checks a compiled step against the same
step run eagerly).  The CTC step runs eagerly under tracec.compile (its
alignment plan reads the targets and lengths, which tracec says); the GAN's
generator step reads ``mean.tolist()`` (a graph break in torch.compile, an
eager run in tracec).  The optimizer program runs LBFGS for one step: its strong-Wolfe
iterations on Rosenbrock drift from PyTorch's from the first step (x at
the fourth digit), and grow to the second digit after three steps.  (Its
Adamax at lr 0.3 drifted too, until the optimizers' float32 lerp_ /
addcmul_ were rounded once, as PyTorch's kernels: test_programs27_gaps.)
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "programs27"

CASES = ["finetune_schedules.py", "ctc_captcha_ocr.py", "gan_1d_gaussian.py",
         "regression_resume.py", "char_rnn_generate.py", "optimizer_benchmarks.py"]
EAGER_FALLBACK = {"ctc_captcha_ocr.py", "gan_1d_gaussian.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_programs27_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
