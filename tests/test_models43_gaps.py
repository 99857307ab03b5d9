"""Gaps the models43 programs (tests/programs/models43: gpt-fast, llama2.c's
train.py, meta's llama, modded-nanogpt, airbench) and their probes found in
tracec, each against torch: a compiled model whose forward sets a module
attribute to a tensor that requires grad (llama2.c's ``self.last_loss``)
read and backpropagated outside the compiled call."""
import warnings

import numpy as np
import torch as real_torch

import tracec as torch


def _last_loss_model(m):
    class Net(m.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = m.nn.Embedding(11, 6)
            self.fc = m.nn.Linear(6, 11)
            self.last_loss = None

        def forward(self, tokens, targets=None):
            logits = self.fc(m.tanh(self.emb(tokens)))
            if targets is not None:
                self.last_loss = m.nn.functional.cross_entropy(
                    logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            else:
                self.last_loss = None
            return logits
    return Net()


def test_compiled_model_setting_last_loss_backpropagates_outside_compiled():
    # llama2.c's train.py: model = torch.compile(model); model(X, Y);
    # loss = raw_model.last_loss; (loss / accum).backward().  tracec ran such a
    # call eagerly ("sets the module attribute last_loss to a tensor that
    # requires grad"); the attribute's tensor is now a result of the compiled
    # call with a compiled backward, as a returned loss is.
    real_torch.manual_seed(0)
    r = _last_loss_model(real_torch)
    t = _last_loss_model(torch)
    t.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in r.state_dict().items()})
    rng = np.random.default_rng(0)
    c = torch.compile(t)
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # no "running eagerly"
        for step in range(4):
            x = rng.integers(0, 11, (3, 5))
            y = rng.integers(-1, 11, (3, 5))  # some ignored targets
            c(torch.tensor(x), torch.tensor(y))
            got = c.last_loss / 2
            got.backward()
            r(real_torch.tensor(x), real_torch.tensor(y))
            want = r.last_loss / 2
            want.backward()
            assert got.requires_grad and got.grad_fn is not None
            np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
            for (n, p), q in zip(t.named_parameters(), r.parameters()):
                np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5,
                                           atol=1e-7, err_msg=n)
        # inference (no targets) sets it to None, as eager
        c(torch.tensor(x))
        assert c.last_loss is None
    info = c.cache_info()
    assert info.eager_signatures == 0 and info.traces >= 1
