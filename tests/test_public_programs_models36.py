"""Public seeded-training programs, small configurations
(``tests/programs/models36``), written as their repos write them now that
tracec's eager random draws follow PyTorch's after the same seed:
pytorch/examples' mnist_forward_forward (overlay_y_on_x with a label tensor
and a plain int, get_y_neg's per-sample torch.randint, x_neg from
torch.randperm, Layer subclassing nn.Linear with its own Adam and its own
train(), Net keeping its layers in a Python list and overriding
nn.Module.train, the log(1 + exp(cat(...))) loss, predict's sum of
goodness); pytorch/examples' vae (reparameterize's torch.randn_like, BCE
with reduction='sum' plus the KLD term, the shuffled DataLoader, the
torch.randn(64, 20) samples); pytorch/examples' siamese_network (a
ResNet-shaped trunk cut with nn.Sequential(*list(children())[:-1]),
init_weights through .apply, APP_MATCHER's np.where class groups and
random.randint pair draws, nn.BCELoss, Adadelta with StepLR,
torch.where(outputs > 0.5, 1, 0)); pytorch/examples' word_language_model
trained with dropout and then generate.py's torch.multinomial(word_weights,
1)[0] sampling with temperature and input.fill_; karpathy/minGPT's chargpt
(CfgNode and merge_from_args, the Trainer's RandomSampler(replacement=True,
num_samples=int(1e10)) loader, configure_optimizers' two AdamW groups,
generate with do_sample=True and top_k through torch.topk / F.softmax /
torch.multinomial, and its greedy path); and d2l.ai's chapter 3-4
from-scratch code (synthetic_data with torch.normal, data_iter with
random.shuffle, sgd under torch.no_grad, softmax regression and the MLP
from scratch, dropout_layer with (torch.rand(X.shape) > dropout).float(),
init_weights with nn.init.normal_ through net.apply).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check their compiled steps against
the same steps run eagerly, without dropout, and print the verdict); every
draw is an eager one after torch.manual_seed, so every line is compared
numerically.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models36"

CASES = ["forward_forward.py", "vae_seeded.py", "siamese.py", "wlm_generate.py",
         "mingpt_chargpt.py", "d2l_scratch.py"]
EAGER_FALLBACK = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models36_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
