"""A compiled MNIST-style CNN step with ``Dropout2d`` (channel dropout drawn
from tracec's traced generator), Adadelta and StepLR equals eager, step by
step, on interp and cpu (issue 9)."""
import numpy as np
import pytest

import tracec
import tracec.nn as nn
import tracec.nn.functional as F


class Net(nn.Module):
    """pytorch/examples mnist's Net (older revision with Dropout2d), small."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(8 * 4 * 4, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = tracec.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


def _setup():
    tracec.manual_seed(0)
    model = Net()
    opt = tracec.optim.Adadelta(model.parameters(), lr=1.0)
    sched = tracec.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)

    def step(data, target):
        opt.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        opt.step()
        return loss
    return model, step, sched


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.usefixtures("counter_rng")
def test_cnn_with_dropout2d_compiled_equals_eager(backend):
    me, se, she = _setup()
    mc, sc, shc = _setup()
    sc = tracec.compile(sc, backend=backend)
    rng = np.random.default_rng(0)
    for i in range(5):
        x = tracec.tensor(rng.standard_normal((6, 1, 12, 12)).astype(np.float32))
        y = tracec.tensor(rng.integers(0, 10, 6))
        tracec.manual_seed(100 + i)
        le = se(x, y)
        tracec.manual_seed(100 + i)
        lc = sc(x, y)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-5, atol=1e-6)
        she.step()
        shc.step()
    for (n, a), b in zip(me.named_parameters(), mc.parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=n)
    info = sc.cache_info()
    assert info.traces <= 2 and info.hits >= 3, info.reasons   # the LR schedule never retraces
