"""Published libraries built on PyTorch, from PyPI, run unmodified on
tracec (``tests/programs/pyglibs``): PyTorch Geometric's karate-club
introduction (KarateClub ships with PyG: GCNConv, GATConv, SAGEConv, a
compiled SGD step, which runs eagerly after PyG's data-dependent
self-loop removal) and a graph classification network on random graphs
(PyG's DataLoader, GIN / Graph / Cheb / Transformer / GATv2 convolutions,
a custom MessagePassing, BatchNorm, GraphNorm, TopKPooling, readouts and
torch_geometric.utils); torchdiffeq's ode_demo (odeint and the adjoint
through every solver); torchmetrics' module and functional metrics;
PyTorch Lightning's README LitAutoEncoder (Trainer fit / validate / test /
predict, ModelCheckpoint, EarlyStopping, a scheduler, load_from_checkpoint);
Hugging Face Accelerate's README loop (prepare, accumulate, backward,
clip_grad_norm_, gather_for_metrics, unwrap_model, save); diffusers'
"Train a diffusion model" tutorial (UNet2DModel, DDPMScheduler, a cosine
warmup schedule, DDPMPipeline and DDIM sampling, save_pretrained /
from_pretrained); Pyro's Bayesian regression and SVI Part I tutorials
(AutoNormal, SVI with Trace_ELBO, Predictive, pyro.param with a
constraint); kornia's color, filter, warp, augmentation and loss functions;
MONAI's 3D segmentation tutorial (synthetic volumes, array and dictionary
transforms under set_determinism, MetaTensor batches through its collate,
a 3D UNet, DiceLoss, sliding-window inference, DiceMetric) and its network
zoo (UNet variants, SegResNet, DynUNet, UNETR, SwinUNETR, DenseNet, ResNet,
autoencoders, ViT) with its losses and metrics; segmentation_models_pytorch's
README training loop (a Unet on torchvision's ResNet-18 encoder, Dice and
Focal losses, its metrics) and its decoders (Unet++, FPN, Linknet, PSPNet,
MAnet, DeepLabV3+, UPerNet, Segformer) on timm and torchvision encoders;
torchinfo / torchsummary / thop model summaries and torch-optimizer's
optimizers; PyTorch-Ignite's quickstart (supervised trainer and evaluator,
metrics, handlers, EarlyStopping, Checkpoint, a parameter scheduler).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1``.  The libraries import ``torch``, which is
tracec there, so every torch call they make is tracec's.
"""
import importlib.util
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

# Skipped where a library is missing, without importing it here: an import in
# the test process would cost every worker its import time, and some patch
# the real torch they import (Pyro re-registers torch.distributions' biject_to).
_MISSING = [m for m in ('torch_geometric', 'torchdiffeq', 'torchmetrics', 'pytorch_lightning',
                        'accelerate', 'diffusers', 'pyro', 'kornia', 'monai',
                        'segmentation_models_pytorch', 'torchinfo', 'torchsummary', 'thop',
                        'torch_optimizer', 'ignite')
            if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {_MISSING}")

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "pyglibs"

CASES = ["pyg_karate_club.py", "pyg_graph_classification.py", "torchdiffeq_ode_demo.py",
         "torchmetrics_eval.py", "lightning_autoencoder.py", "accelerate_loop.py",
         "diffusers_ddpm.py", "pyro_svi.py", "kornia_augment.py", "monai_tutorials.py",
         "smp_segmentation.py", "model_tools.py", "ignite_quickstart.py"]
EAGER_FALLBACK = {"pyg_karate_club.py"}

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_pyglibs_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
