"""``nn.AdaptiveLogSoftmaxWithLoss`` against PyTorch with copied weights:
state-dict keys, ``(output, loss)``, input and parameter gradients,
``log_prob``, ``predict``, unbatched input, repr and the errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tracec
from nn_helpers import close, compare_params_grads, copy_weights


def _pair(**kw):
    a = tracec.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10], **kw).double()
    b = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10], **kw).double()
    copy_weights(a, b)
    return a, b


@pytest.mark.parametrize("kw", [{}, {"div_value": 2.0, "head_bias": True}])
def test_forward_backward_log_prob_predict(kw):
    a, b = _pair(**kw)
    assert list(a.state_dict()) == list(b.state_dict())
    assert repr(a) == repr(b)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 8))
    t = np.array([0, 5, 19, 3, 12, 9])
    xa, xb = tracec.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    oa, ob = a(xa, tracec.tensor(t)), b(xb, torch.tensor(t))
    assert oa._fields == ob._fields
    close(oa.output, ob.output, rtol=1e-10)
    close(oa.loss, ob.loss, rtol=1e-10)
    oa.loss.backward()
    ob.loss.backward()
    close(xa.grad, xb.grad, rtol=1e-9, atol=1e-12)
    compare_params_grads(a, b, rtol=1e-9, atol=1e-12)
    close(a.log_prob(tracec.tensor(x)), b.log_prob(torch.tensor(x)), rtol=1e-10)
    x2 = rng.standard_normal((10, 8)) * 3
    assert a.predict(tracec.tensor(x2)).tolist() == b.predict(torch.tensor(x2)).tolist()
    ua, ub = a(tracec.tensor(x[0]), tracec.tensor(t[0])), b(torch.tensor(x[0]), torch.tensor(t[0]))
    assert ua.output.shape == ub.output.shape == ()
    close(ua.output, ub.output, rtol=1e-10)


def test_errors():
    with pytest.raises(ValueError, match="cutoffs should be a sequence of unique"):
        tracec.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [5, 3])
    a, _ = _pair()
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 19\], but values "
                       r"in range \[0, 25\] were found"):
        a(tracec.zeros(2, 8, dtype=tracec.float64), tracec.tensor([0, 25]))
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        a(tracec.zeros(3, 8, dtype=tracec.float64), tracec.tensor([0, 2]))
