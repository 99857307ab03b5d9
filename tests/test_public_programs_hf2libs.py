"""Real published packages run unmodified on tracec (``tests/programs/hf2libs``):
libraries built on PyTorch's module hooks, autograd and transformers' models.

- peft: LoRA on a tiny Llama as its quickstart writes it (print_trainable_
  parameters, a training loop, save_pretrained / PeftModel.from_pretrained,
  merge_and_unload) (``peft_lora.py``); LoRA on a BERT classifier
  (modules_to_save, DoRA and its merge) and on GPT-2's Conv1D layers,
  several adapters on one model (set_adapter, disable_adapter,
  add_weighted_adapter, delete_adapter), IA3, LoHa, LoKr, OFT, VeRA, prompt
  / prefix / p-tuning trained, AdaLoRA's rank allocation, greedy and top-k
  generate through LoRA / prefix / prompt tuning (``peft_tuners.py``);
  LoRA on a user's own MLP / CNN (Linear, Embedding, Conv2d,
  modules_to_save) with PiSSA (SVD, randomized SVD), OLoRA (QR) and rsLoRA
  initializations, adapter state dicts, inject_adapter_in_model, and a
  Llama under gradient checkpointing with enable_input_require_grads
  (the second half of ``peft_lora.py``); twenty more tuners (BOFT, C3A, FourierFT, HRA, MiSS,
  RandLoRA, SHiRA, VB-LoRA, LN tuning, trainable tokens, LoRA patterns and
  target_parameters, DeLoRA, RoAd, WaveFT, GraLoRA, OSF, PVeRA, TinyLoRA,
  UniLoRA, Lily, HiRA) trained two steps each (the rest of ``peft_tuners.py``);
- captum: its attribution algorithms (integrated gradients with
  convergence deltas, saliency, DeepLift / DeepLiftShap through its module
  hooks, seeded GradientShap and NoiseTunnel, occlusion and ablation,
  layer / neuron conductance, Grad-CAM, layer integrated gradients on an
  embedding) on an MLP, a CNN and a text classifier (``captum_attr.py``);
  guided backprop, deconvolution, guided Grad-CAM and LRP (backward hooks
  replacing ReLU gradients), KernelShap / Lime / Shapley sampling / feature
  permutation, layer and neuron methods, the infidelity and sensitivity
  metrics, FGSM and PGD (the rest of ``captum_attr.py``); layer integrated gradients
  and conductance inside a BERT classifier, LLMAttribution (feature
  ablation, layer integrated gradients) on a Llama, TracInCP's influence
  scores from saved checkpoints (``captum_nlp.py``);
- opacus: ModuleValidator.fix, PrivacyEngine.make_private with Poisson
  sampling and a seeded noise generator, DP-SGD epochs with the RDP
  accountant's epsilon, make_private_with_epsilon (PRV accountant), and
  GradSampleModule's per-sample gradients (conv, layer norm, linear,
  embedding hooks) against one backward per sample, its BERT fine-tuning
  tutorial on a tiny transformers BERT (``opacus_dpsgd.py``);
  its DPLSTM / DPMultiheadAttention trained with per-layer clipping
  (ModuleValidator.fix clones the model through torch.save / torch.load),
  the functorch, expanded-weights and ghost-clipping engines, group /
  instance norm per-sample gradients, BatchMemoryManager's virtual
  batches, save_checkpoint / load_checkpoint (the rest of ``opacus_dpsgd.py``);
- sentence-transformers: a SentenceTransformer from modules over a tiny
  BERT (encode, similarity, semantic search, paraphrase mining), trained
  with in-batch negatives, cosine and Matryoshka losses, saved and
  reloaded; a CrossEncoder's scores and rank, then trained with its BCE,
  LambdaLoss, ListNet and in-batch-negative losses
  (``sentence_transformers_embed.py``); a SPLADE SparseEncoder (sparse COO
  embeddings, decode, SpladeLoss with FLOPS regularizers), a CSR
  SparseEncoder (top-k sparse autoencoder, CSRLoss), a StaticEmbedding
  (EmbeddingBag) model trained with MatryoshkaLoss, truncate_dim and
  embedding quantization (the rest of ``sentence_transformers_embed.py``).

Programs of one library are one file: importing transformers and the
library is most of each program's time.  Each program runs under ``tracec run`` (the packages' own ``import torch``
is tracec) and, as the reference, under torch 2.13 (recorded, keyed by the
packages' installed versions; transformers imports torchvision, whose
compiled ops ``vision_oracle.torch_command`` leaves out).  The programs
seed torch and Python's ``random`` as a user does; tracec's draws equal
PyTorch's, so dropout and sampling compare strictly.
"""
import pathlib

import pytest

from library_programs import check_library_program

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "hf2libs"

#: transformers' stack, which peft imports (its versions key the recordings)
_HF = ("transformers", "huggingface_hub", "safetensors", "accelerate", "torchvision")
#: program -> the pip packages it imports (pinned in pyproject's test extra)
CASES = {
    "peft_lora.py": ("peft",) + _HF,
    "peft_tuners.py": ("peft",) + _HF,
    "captum_attr.py": ("captum",),
    "captum_nlp.py": ("captum",) + _HF,
    "opacus_dpsgd.py": ("opacus",) + _HF,
    "sentence_transformers_embed.py": ("sentence-transformers",) + _HF,
}


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_hf2libs_program_matches_torch(script, tmp_path):
    check_library_program(PROGS / script, CASES[script], tmp_path)
