"""PyTorch tutorials written as the tutorials write them, seeded with
``torch.manual_seed`` and default initialization, small sizes
(``tests/programs/models40``): "Saving and Loading Models" with the recipes
"What is a state_dict" and "Zeroing out gradients" (state_dict /
optimizer.state_dict printouts, ``torch.load(weights_only=True)``, the
whole model pickled by ``torch.save(model, PATH)`` and loaded with
``weights_only=False`` while the default refuses it, a general checkpoint
resumed with its momentum buffers, several models in one file, warmstarting
with ``strict=False``, ``map_location`` as a string, a device, a lambda and
a dict); "Sequence Models and LSTM Networks" and "Word Embeddings" (the
LSTM warm-up printing ``grad_fn=<MkldnnRnnLayerBackward0>``, LSTMTagger,
NGramLanguageModeler, CBOW); "Learning PyTorch with Examples" (every
variant: NumPy, tensors, autograd, LegendrePolynomial3, nn with
``Flatten(0, 1)``, RMSprop, Polynomial3, DynamicNet with
``random.randint``); the FX Conv/BN fuser and FX profiler tutorials
(``torch.fx.symbolic_trace``, the printed ``GraphModule.code`` and graph,
node edits, ``recompile``, a ``torch.fx.Interpreter`` subclass); and
"Language Modeling with nn.Transformer"
(PositionalEncoding's buffer, the ``triu`` causal mask, clip_grad_norm_,
SGD with StepLR, dropout in training, the best state dict saved and
reloaded).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check a compiled step against the
same step run eagerly, and print the verdict); tracec's eager draws follow
PyTorch's, so initialization, data and dropout masks are compared too.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models40"

CASES = ["saving_loading.py", "lstm_word_embeddings.py", "pytorch_with_examples.py",
         "fx_fuser_profiler.py", "transformer_lm.py"]
EAGER_FALLBACK = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models40_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
