"""The public programs' own models and training steps (``tests/programs``),
imported twice in this process, once with the real torch and once with
``torch`` resolving to tracec (``install_as_torch``), weights copied from
torch: the same state-dict keys, losses and updated parameters, step by
step.  Then two of the training steps under ``tracec.compile``: compiled
equals eager.

The steps are the programs' own loops, spelled out (their ``main`` scripts
run at import time); dropout is off (``dropout=0`` or ``eval()``) because
the two libraries draw different masks.
"""
import contextlib
import importlib.util
import math
import pathlib
import sys

import numpy as np
import pytest
import torch

import tracec

PROGS = pathlib.Path(__file__).resolve().parent / "programs"


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    # torch's tiny recurrent steps run several times slower with a thread
    # per core on a shared machine
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@contextlib.contextmanager
def _torch_is_tracec():
    saved = {n: m for n, m in sys.modules.items()
             if n.partition(".")[0] in ("torch", "torchvision")}
    for n in saved:
        del sys.modules[n]
    tracec.install_as_torch()
    try:
        yield
    finally:
        tracec.uninstall_as_torch()
        sys.modules.update(saved)


def load(rel, on_tracec):
    """Import ``tests/programs/<rel>`` with torch, or with tracec as torch."""
    path = PROGS / rel
    name = f"_prog_{'tracec' if on_tracec else 'torch'}_{rel.replace('/', '_')[:-3]}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        with _torch_is_tracec() if on_tracec else contextlib.nullcontext():
            spec.loader.exec_module(mod)
    finally:
        sys.path.pop(0)
    return mod


def copy_weights(tm, cm):
    tsd = tm.state_dict()
    assert list(cm.state_dict()) == list(tsd)
    cm.load_state_dict({k: tracec.tensor(v.detach().numpy().copy()) for k, v in tsd.items()})


def assert_same_params(tm, cm, rtol=1e-4, atol=1e-5):
    for (n, tp), (_, cp) in zip(tm.named_parameters(), cm.named_parameters()):
        np.testing.assert_allclose(cp.detach().numpy(), tp.detach().numpy(), rtol=rtol,
                                   atol=atol, err_msg=n)


def wlm_step(lib, model, criterion, data, targets, hidden, lr, ntokens, transformer):
    """One batch of word_language_model/main.py's train()."""
    def repackage_hidden(h):
        if isinstance(h, lib.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    model.zero_grad()
    if transformer:
        output = model(data).view(-1, ntokens)
    else:
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
    loss = criterion(output, targets)
    loss.backward()
    lib.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    return loss.item(), hidden


@pytest.mark.parametrize("rnn_type", ["LSTM", "GRU", "RNN_TANH", "RNN_RELU", "Transformer",
                                      "LSTM-tied"])
def test_word_language_model_steps_match_torch(rnn_type):
    tmod, cmod = load("word_language_model/model.py", False), load("word_language_model/model.py",
                                                                   True)
    ntokens, bsz, bptt = 30, 3, 5
    tied = rnn_type.endswith("-tied")
    rnn_type = rnn_type.removesuffix("-tied")
    torch.manual_seed(0)
    if rnn_type == "Transformer":
        tm = tmod.TransformerModel(ntokens, 8, 2, 12, 2, 0.0)
        cm = cmod.TransformerModel(ntokens, 8, 2, 12, 2, 0.0)
        tm.eval(), cm.eval()       # nn.Transformer's own dropout (0.1) is always on in train()
    else:
        tm = tmod.RNNModel(rnn_type, ntokens, 8, 8, 2, 0.0, tied)
        cm = cmod.RNNModel(rnn_type, ntokens, 8, 8, 2, 0.0, tied)
    copy_weights(tm, cm)
    source = np.random.default_rng(0).integers(0, ntokens, size=(4 * bptt + 1, bsz))
    th = None if rnn_type == "Transformer" else tm.init_hidden(bsz)
    ch = None if rnn_type == "Transformer" else cm.init_hidden(bsz)
    for i in range(0, 4 * bptt, bptt):
        data, targets = source[i:i + bptt], source[i + 1:i + 1 + bptt].reshape(-1)
        tl, th = wlm_step(torch, tm, torch.nn.NLLLoss(), torch.tensor(data),
                          torch.tensor(targets), th, 2.0, ntokens, rnn_type == "Transformer")
        cl, ch = wlm_step(tracec, cm, tracec.nn.NLLLoss(), tracec.tensor(data),
                          tracec.tensor(targets), ch, 2.0, ntokens, rnn_type == "Transformer")
        assert cl == pytest.approx(tl, rel=1e-5)
    assert_same_params(tm, cm)


def test_time_sequence_prediction_lbfgs_matches_torch():
    tmod = load("time_sequence_prediction/train.py", False)
    cmod = load("time_sequence_prediction/train.py", True)
    x = np.arange(8) + np.random.RandomState(2).randint(-80, 80, 3).reshape(3, 1)
    data = np.sin(x / 20.0)
    torch.manual_seed(0)
    tm = tmod.Sequence().double()
    cm = cmod.Sequence().double()
    copy_weights(tm, cm)
    runs = []
    for lib, m in ((torch, tm), (tracec, cm)):
        inp, target = lib.from_numpy(data[1:, :-1]), lib.from_numpy(data[1:, 1:])
        opt = lib.optim.LBFGS(m.parameters(), lr=0.8)
        losses = []

        def closure():
            opt.zero_grad()
            loss = lib.nn.MSELoss()(m(inp), target)
            losses.append(loss.item())
            loss.backward()
            return loss
        opt.step(closure)
        with lib.no_grad():
            pred = m(lib.from_numpy(data[:1, :-1]), future=3)
        runs.append((losses, pred.numpy()))
    (tl, tp), (cl, cp) = runs
    assert len(cl) == len(tl) > 1
    np.testing.assert_allclose(cl, tl, rtol=1e-7)
    np.testing.assert_allclose(cp, tp, rtol=1e-7, atol=1e-10)
    assert_same_params(tm, cm, rtol=1e-7, atol=1e-10)


def _mnist_batches():
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((4, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, 4))
            for _ in range(3)]


def test_mnist_adadelta_steplr_matches_torch():
    tmod, cmod = load("mnist/main.py", False), load("mnist/main.py", True)
    torch.manual_seed(0)
    tm, cm = tmod.Net(), cmod.Net()
    copy_weights(tm, cm)
    tm.eval(), cm.eval()                        # dropout off: the masks differ
    batches = _mnist_batches()
    losses = []
    for lib, m in ((torch, tm), (tracec, cm)):
        opt = lib.optim.Adadelta(m.parameters(), lr=1.0)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
        out = []
        for epoch in range(2):
            for x, y in batches:
                opt.zero_grad()
                loss = lib.nn.functional.nll_loss(m(lib.tensor(x)), lib.tensor(y))
                loss.backward()
                opt.step()
                out.append(loss.item())
            sched.step()
        losses.append(out)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-4)
    assert_same_params(tm, cm, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("bias", [True, False])
def test_nanogpt_adamw_steps_match_torch(bias):
    tmod, cmod = load("nanogpt/model.py", False), load("nanogpt/model.py", True)
    conf = dict(block_size=8, vocab_size=20, n_layer=2, n_head=2, n_embd=8, dropout=0.0,
                bias=bias)
    torch.manual_seed(0)
    tm, cm = tmod.GPT(tmod.GPTConfig(**conf)), cmod.GPT(cmod.GPTConfig(**conf))
    assert cm.get_num_params() == tm.get_num_params()
    assert cm.lm_head.weight is cm.transformer.wte.weight
    copy_weights(tm, cm)
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 20, (3, 9))
    losses = []
    for lib, m in ((torch, tm), (tracec, cm)):
        opt = m.configure_optimizers(0.1, 1e-2, (0.9, 0.99), "cpu")
        out = []
        for _ in range(3):
            _, loss = m(lib.tensor(idx[:, :-1]), lib.tensor(idx[:, 1:]))
            loss.backward()
            lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            out.append(loss.item())
        logits, none = m(lib.tensor(idx[:, :5]))
        assert none is None and tuple(logits.shape) == (3, 1, 20)
        losses.append((out, logits.detach().numpy()))
    np.testing.assert_allclose(losses[1][0], losses[0][0], rtol=1e-5)
    np.testing.assert_allclose(losses[1][1], losses[0][1], rtol=1e-4, atol=1e-5)
    assert_same_params(tm, cm)
    # generate: top-k sampling with multinomial never leaves the top k
    cm.eval()
    out = cm.generate(tracec.tensor(idx[:1, :2]), 10, temperature=0.8, top_k=3)
    assert tuple(out.shape) == (1, 12) and out.dtype == tracec.int64


# ---- tracec.compile on two programs' training steps: compiled == eager ----

def _two_copies(make):
    a, b = make(), make()
    b.load_state_dict({k: v.detach().clone() for k, v in a.state_dict().items()})
    return a, b


@pytest.mark.slow
def test_word_language_model_lstm_step_compiled_equals_eager():
    cmod = load("word_language_model/model.py", True)
    tracec.manual_seed(0)
    eager, comp = _two_copies(lambda: cmod.RNNModel("LSTM", 30, 8, 8, 2, 0.0))
    crit = tracec.nn.NLLLoss()

    def make_step(model):
        def step(data, targets, h, c):
            model.zero_grad()
            output, hidden = model(data, (h, c))
            loss = crit(output, targets)
            loss.backward()
            tracec.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-2.0)
            return loss, hidden[0].detach(), hidden[1].detach()
        return step

    estep, cstep = make_step(eager), tracec.compile(make_step(comp))
    source = np.random.default_rng(0).integers(0, 30, size=(21, 3))
    eh, ch = eager.init_hidden(3), comp.init_hidden(3)
    for i in range(0, 20, 5):
        data = tracec.tensor(source[i:i + 5])
        targets = tracec.tensor(source[i + 1:i + 6].reshape(-1))
        el, *eh = estep(data, targets, *eh)
        cl, *ch = cstep(data, targets, *ch)
        assert cl.item() == pytest.approx(el.item(), rel=1e-5)
        np.testing.assert_allclose(ch[0].numpy(), eh[0].numpy(), rtol=1e-5, atol=1e-6)
    for (n, p), (_, q) in zip(eager.named_parameters(), comp.named_parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=n)


@pytest.mark.slow
def test_mnist_step_compiled_equals_eager():
    cmod = load("mnist/main.py", True)
    tracec.manual_seed(0)
    eager, comp = _two_copies(cmod.Net)
    eager.eval(), comp.eval()

    def make_step(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = tracec.nn.functional.nll_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step

    eopt = tracec.optim.Adadelta(eager.parameters(), lr=1.0)
    copt = tracec.optim.Adadelta(comp.parameters(), lr=1.0)
    estep, cstep = make_step(eager, eopt), tracec.compile(make_step(comp, copt))
    for x, y in _mnist_batches():
        el = estep(tracec.tensor(x), tracec.tensor(y))
        cl = cstep(tracec.tensor(x), tracec.tensor(y))
        assert cl.item() == pytest.approx(el.item(), rel=1e-4)
    for (n, p), (_, q) in zip(eager.named_parameters(), comp.named_parameters()):
        np.testing.assert_allclose(q.detach().numpy(), p.detach().numpy(), rtol=1e-3,
                                   atol=1e-5, err_msg=n)
    assert not math.isnan(cl.item())
