"""Official PyTorch tutorials, small configurations (``tests/programs/
models41``): "Introduction to torch.compile" (torch.compile of a function,
the decorator, a nested function, a module; mode="reduce-overhead" /
"max-autotune", torch._dynamo.reset(), a compiled Adam training step checked
against eager, dynamic=True over changing sizes) and "Channels Last Memory
Format" (strides through to / contiguous / empty / clone / empty_like /
casts and pointwise ops, is_contiguous's special cases, Conv2d / BatchNorm2d
/ MaxPool2d / Conv3d results and a conv weight's gradient laid out
channels-last, a compiled conv + batch norm step on channels-last input); and the "Intro
to PyTorch" YouTube series' "Introduction to PyTorch Tensors" (creation,
manual_seed(1729), *_like, dtypes, broadcasting and its errors, math and
linear algebra, in-place ops, out=, clone / detach, squeeze / unsqueeze /
reshape, the NumPy bridge) and "Building Models" / "Training with PyTorch"
(TinyModel, LeNet, LSTMTagger, MaxPool2d / BatchNorm1d / Dropout, a
FashionMNIST-shaped GarmentClassifier trained with train_one_epoch, eval
under no_grad, the best checkpoint saved and loaded, a compiled step); and
"(beta) Dynamic Quantization on an LSTM Word Language Model" (LSTMModel with
init_weights, the Corpus tokenizer, multinomial text generation,
quantize_dynamic over nn.LSTM and nn.Linear and its printed model, the
saved sizes, evaluate with repackage_hidden for both models); and "Writing
Distributed Applications with PyTorch" (two mp.Process ranks started with
the spawn method meeting through init_process_group(backend='gloo') at
MASTER_ADDR / MASTER_PORT: send / recv, isend / irecv, all_reduce over
new_group, distributed synchronous SGD with average_gradients).  That one's
reference runs as its own ``python`` process (its spawned ranks import the
script as their main module, which the one-process driver cannot give).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check a compiled step against the
same step run eagerly, and print the verdict); tracec's eager draws follow
PyTorch's, so initialization and data are compared too.

The tutorial's graph-break section (``torch._dynamo.explain(bar)(...)``
counting Dynamo's graphs and breaks, ``fullgraph=True`` raising on one) is
not among the programs: tracec records a branch on tensor data as a guard
of one trace rather than breaking the graph (``tracec._dynamo.explain``
says 1 graph, 0 breaks where Dynamo says 2 graphs, 1 break), by design.
"""
import pathlib
import subprocess
import sys

import pytest

import torch_recordings
from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models41"

CASES = ["torch_compile_intro.py", "channels_last.py", "introyt_tensors.py",
         "introyt_models_training.py", "dynamic_quantization_lstm.py"]
EAGER_FALLBACK = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models41_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)


def test_models41_dist_tuto_matches_torch(tmp_path):
    script = PROGS / "dist_tuto.py"

    def torch_run():
        r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=ENV,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"torch failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
        return r.stdout
    ref = torch_recordings.torch_output(f"{PROGS.name}/dist_tuto",
                                        torch_recordings.program_files(script), [],
                                        "OMP_NUM_THREADS=1 own process", torch_run)
    check_program(script, ref, tmp_path, False)
