"""Gaps the models22 programs (tests/programs/models22) found in tracec."""
import warnings

import numpy as np

import tracec as torch
from tracec import nn


class _Recurrent(nn.Module):
    # pytorch-ntm's EncapsulatedNTM: init_sequence stores the initial state,
    # forward replaces it with (reads list, (h, c), head-weights list)
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        with torch.no_grad():
            self.lin.weight.copy_(torch.from_numpy(np.arange(9.0, dtype=np.float32).reshape(3, 3) / 10))
            self.lin.bias.fill_(0.5)

    def init_sequence(self, b):
        self.batch_size = b
        self.previous_state = ([torch.zeros(b, 3)], (torch.ones(b, 3), torch.zeros(b, 3)), [None])

    def forward(self, x):
        (r,), (h, c), (w,) = self.previous_state
        h = torch.tanh(self.lin(x + r) + h)
        self.previous_state = ([h * 2], (h, c + h), [x])
        return h


def test_compiled_call_replays_a_module_attribute_holding_nested_lists_and_tuples():
    # pytorch-ntm: `o, self.previous_state = self.ntm(x, self.previous_state)`
    # with previous_state = (reads list, (h, c), heads_states list) inside a
    # compiled training step. tracec replayed a flat tuple of tensors only and
    # refused this as "global 'net' changed during the call, twice in a row";
    # torch.compile (dynamo) replays the attribute store.
    m = _Recurrent()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def step(xs):
        opt.zero_grad()
        m.init_sequence(xs.shape[1])
        for t in range(xs.shape[0]):
            out = m(xs[t])
        loss = out.pow(2).sum() + m.previous_state[1][1].sum()
        loss.backward()
        opt.step()
        return loss

    xs = [torch.from_numpy(np.random.default_rng(i).normal(size=(3, 2, 3)).astype(np.float32))
          for i in range(4)]
    state = {k: v.clone() for k, v in m.state_dict().items()}
    eager, eager_states = [], []
    for x in xs:
        eager.append(step(x).item())
        eager_states.append(m.previous_state)
    after = {k: v.clone() for k, v in m.state_dict().items()}
    m.load_state_dict(state)
    cstep = torch.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x, want, ws in zip(xs, eager, eager_states):
            got = cstep(x).item()
            np.testing.assert_allclose(got, want, rtol=1e-5)
            (r,), (h, c), (w,) = m.previous_state
            assert type(m.previous_state) is tuple and type(m.previous_state[0]) is list \
                and type(m.previous_state[1]) is tuple and type(m.previous_state[2]) is list
            np.testing.assert_allclose(r.detach().numpy(), ws[0][0].detach().numpy(), rtol=1e-5)
            np.testing.assert_allclose(c.detach().numpy(), ws[1][1].detach().numpy(), rtol=1e-5)
            assert w is x[2] or np.array_equal(w.numpy(), x[2].numpy())
    assert cstep.traces == 1
    for k in after:
        np.testing.assert_allclose(m.state_dict()[k].numpy(), after[k].numpy(), rtol=1e-5, atol=1e-6)
