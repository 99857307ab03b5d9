"""gaps9, continued: ``F.ctc_loss`` inside ``tracec.compile``.

With the lengths given as numbers (lists / ints), the alignment plan (the
extended labels and the skip mask) is built in tensor ops from the
targets, so the loss and its backward are recorded; each compiled call
builds the plan from its own targets.  Lengths given as tensors must be
read: eager only, refused at the user's line (or run eagerly with
``fallback="eager"``)."""
import numpy as np
import pytest
import torch

import tracec

T, N, C = 8, 3, 6
IN_LENS, TGT_LENS = [8, 7, 6], [3, 2, 3]


def _targets(seed, flat):
    rng = np.random.RandomState(seed)
    tg = rng.randint(1, C, size=(N, 3)).astype(np.int64)
    tg[1, :2] = tg[1, 0]                       # a repeated label: no skip there
    if flat:
        return np.concatenate([tg[i, :n] for i, n in enumerate(TGT_LENS)])
    return tg


def _step(lib, reduction):
    def step(x, targets):
        loss = lib.nn.functional.ctc_loss(x.log_softmax(2), targets, IN_LENS, TGT_LENS,
                                          reduction=reduction)
        (loss if reduction != "none" else loss.sum()).backward()
        return loss
    return step


# (every option on the interpreter; the cpu backend, slower to compile, on two)
CASES = [(r, f, "interp") for r in ("mean", "sum", "none") for f in (False, True)] + \
    [("mean", False, "cpu"), ("none", True, "cpu")]


@pytest.mark.parametrize("reduction,flat,backend", CASES, ids=str)
def test_ctc_loss_compiled_matches_torch(reduction, flat, backend):
    lp = np.random.RandomState(0).randn(T, N, C).astype(np.float32)
    fn = tracec.compile(_step(tracec, reduction), backend=backend)
    for seed in (1, 2):                        # the second call: other targets, compiled
        tg = _targets(seed, flat)
        tx = torch.tensor(lp, requires_grad=True)
        want = _step(torch, reduction)(tx, torch.tensor(tg))
        x = tracec.tensor(lp, requires_grad=True)
        got = fn(x, tracec.tensor(tg))
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=2e-6)
    info = fn.cache_info()
    assert info.eager_signatures == 0 and info.hits == 1


def test_ctc_loss_tensor_lengths_refused_in_compile():
    def step(x, targets, lens):
        return tracec.nn.functional.ctc_loss(x.log_softmax(2), targets, lens, TGT_LENS)
    x = tracec.tensor(np.random.RandomState(0).randn(T, N, C).astype(np.float32))
    with pytest.raises(tracec.TraceError, match=r"test_gaps9_ctc.py:\d+: ctc_loss\(\) \(eager "
                                                 "only: its alignment plan reads the lengths"):
        tracec.compile(step)(x, tracec.tensor(_targets(1, False)), tracec.tensor(IN_LENS))
