"""More public PyTorch programs, unmodified but for small synthetic data
(written from memory, in ``tests/programs/breadth``): yunjey's
pytorch-tutorial (basics, CNN/RNN/BiRNN, ResNet, language model, GAN, VAE),
lucidrains' simple ViT (compiled step), a DDPM with a small UNet, a RealNVP
flow, Mixture-of-Experts with LoRA (compiled), the tutorials "Neural
Transfer" (LBFGS on the image), "Adversarial Example Generation" (FGSM) and
the character-level RNN classification and generation ones, PPO-PyTorch,
pytorch/examples forward-forward and siamese network, d2l's linear and
softmax regression from scratch, a message-passing GNN with scatter ops
(compiled), the "Learn the Basics" tutorials (optimizing, save and load,
transfer learning), pytorch/examples actor-critic, yunjey's image captioning,
karpathy's micrograd tests against torch, PyTorch-GAN's WGAN-GP, bentrevett's packed-LSTM sentiment analysis, and
the torch.func tutorials (per-sample gradients, model ensembling,
jacobians and hessians; without the 'meta' device, which tracec lacks),
PyTorch-GAN's CycleGAN, and a timm-style loop (channels_last, bf16
autocast, GradScaler, checkpointing, mixup, SequentialLR, EMA, compile);
``compiled_variants.py`` checks torch.compile'd training steps of seven of
these models against the same steps run eagerly; milesial's Pytorch-UNet; makemore parts 1 and 2.

Each runs under ``tracec run`` and, as the reference, under torch 2.13.  The
random streams differ, so the outputs are compared once every number is
masked and spaces dropped (a printed tensor's column widths follow its
values): the same lines in the same order.
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
PROGS = ROOT / "tests" / "programs" / "breadth"
NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")

# program, extra args, slow
CASES = [
    ("yunjey_basics.py", [], False),
    ("yunjey_cnn_rnn.py", [], False),
    ("yunjey_resnet.py", [], False),
    ("yunjey_language_model.py", [], False),
    ("yunjey_gan_vae.py", [], False),
    ("simple_vit.py", [], True),
    ("ddpm.py", [], True),
    ("realnvp.py", [], True),
    ("moe_lora.py", [], True),
    ("neural_style.py", [], False),
    ("fgsm.py", [], True),
    ("ppo.py", [], False),
    ("forward_forward.py", [], False),
    ("siamese.py", [], False),
    ("d2l_scratch.py", [], False),
    ("char_rnn.py", [], True),
    ("gnn_scatter.py", [], False),
    ("tutorial_basics.py", [], False),
    ("actor_critic.py", [], False),
    ("image_captioning.py", [], False),
    ("micrograd_vs_torch.py", [], False),
    ("wgan_gp.py", [], False),
    ("sentiment_lstm.py", [], True),
    ("per_sample_grads.py", [], True),
    ("cyclegan.py", [], True),
    ("modern_loop.py", [], False),
    ("compiled_variants.py", [], True),
    ("unet_seg.py", [], False),
    ("makemore_bigram_mlp.py", [], False),
    ("lstm_timeseries.py", [], False),
]


def _run(backend, script, args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    if backend == "tracec":
        r = run_cli(["run", PROGS / script, *args], cwd, env, timeout=600)
    else:
        r = subprocess.run([sys.executable, str(PROGS / script), *args], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{backend} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r.stdout


def _skeleton(text):
    return ["".join(NUM.sub("#", ln).split()) for ln in text.splitlines() if ln.strip()]


@pytest.mark.parametrize("script,args,slow", [
    pytest.param(*c, marks=[pytest.mark.slow] if c[2] else [], id=c[0][:-3]) for c in CASES])
def test_breadth_program_runs_like_torch(script, args, slow, tmp_path):
    (tmp_path / "tracec").mkdir()
    (tmp_path / "torch").mkdir()
    out = _run("tracec", script, args, tmp_path / "tracec")
    ref = torch_recordings.torch_output(
        f"breadth/{script[:-3]}", torch_recordings.program_files(PROGS / script), args,
        "OMP_NUM_THREADS=1", lambda: _run("torch", script, args, tmp_path / "torch"))
    assert _skeleton(out) == _skeleton(ref)
