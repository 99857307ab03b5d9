"""Public udacity/deep-learning-v2-pytorch notebooks, small configurations
(``tests/programs/models42``): the character-level LSTM (numpy one-hot
encoding, the get_batches generator, CharRNN's multi-layer dropout LSTM,
init_hidden through ``next(self.parameters()).data`` and
``weight.new(...).zero_()``, hidden states re-wrapped with ``.data``,
clip_grad_norm_, the validation loop, a torch.save'd checkpoint reloaded,
and top-k sampling with ``F.softmax(out, dim=1).data``, ``p.topk`` and
``np.random.choice``); and the sentiment RNN (Counter vocabulary, numpy
pad_features, TensorDataset / DataLoader(shuffle=True), Embedding + LSTM +
Sigmoid with ``sig_out.view(batch_size, -1)[:, -1]``, BCELoss on
``output.squeeze()``, ``torch.round`` / ``pred.eq(labels.float().view_as(pred))``
/ ``np.squeeze(correct_tensor.numpy())`` accuracy, predict on a review);
and the CIFAR-10 CNN (np.random.shuffle'd indices into two
SubsetRandomSamplers, three conv / pool blocks with dropout, the validation
loss tracked from ``np.inf`` with model_cifar.pt saved and reloaded, per-class
test accuracy from ``class_correct`` / ``class_total``); and
eriklindernoren/PyTorch-GAN's InfoGAN (weights_init_normal via .apply,
numpy to_categorical, nn.Upsample generator, BatchNorm2d(c, 0.8) whose 0.8
is eps, Dropout2d discriminator with adv / implicit-dim Softmax aux / latent
heads, the ``torch.FloatTensor`` / ``LongTensor`` aliases built from numpy
arrays and sizes, ``imgs.type(FloatTensor)``, ``Variable``, an
``itertools.chain`` Adam for the information loss) and AC-GAN
(``torch.mul(self.label_emb(labels), noise)`` conditioning, Sigmoid / BCELoss
adversarial and softmax auxiliary heads, ``labels.type(LongTensor)``, the
discriminator accuracy from ``np.concatenate`` and ``np.argmax``); and
aladdinpersson/Machine-Learning-Collection's PyTorch basics (the
fully-connected net, RNN / GRU / LSTM reading every time step's hidden state
through ``out.reshape(out.shape[0], -1)``, the bidirectional LSTM,
check_accuracy's eval / no_grad / train toggling and its accuracy tensor
formatted by an f-string, LeNet-5 with tuple conv arguments, the
kaiming_uniform_ loop over ``self.modules()``, the Identity head swap on a
frozen network, and ReduceLROnPlateau, whose removed ``verbose`` argument
must raise PyTorch 2.13's TypeError).

Each runs under ``tracec run`` and, as the reference, under torch 2.13 with
``TORCH_COMPILE_DISABLE=1`` (the programs check a compiled step against the
same step run eagerly, and print the verdict); tracec's eager draws follow
PyTorch's, so initialization, data order and dropout masks are compared too.
"""
import pathlib

import pytest

from test_public_programs_tutorials2 import ENV, check_program, torch_refs_fixture

ROOT = pathlib.Path(__file__).resolve().parent.parent
PROGS = ROOT / "tests" / "programs" / "models42"

CASES = ["char_rnn.py", "sentiment_rnn.py", "cifar_cnn.py", "infogan.py", "acgan.py",
         "ml_collection_basics.py", "ml_collection_finetune.py"]
EAGER_FALLBACK = set()

torch_refs = torch_refs_fixture(PROGS, CASES, {**ENV, "TORCH_COMPILE_DISABLE": "1"})


@pytest.mark.parametrize("script", [pytest.param(c, id=c[:-3]) for c in CASES])
def test_models42_program_matches_torch(script, torch_refs, tmp_path):
    check_program(PROGS / script, torch_refs(script), tmp_path, script in EAGER_FALLBACK)
