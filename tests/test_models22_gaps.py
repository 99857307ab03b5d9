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


def _raises(fn, exc, message):
    try:
        fn()
    except exc as e:
        assert str(e).startswith(message), str(e)
    else:
        raise AssertionError(f"no {exc.__name__}")


def test_tensor_flip_method_takes_dims_as_varargs_and_the_function_a_tuple():
    # torch: x.flip(0, 1) and x.flip(0) flip, torch.flip(x, 0) is a TypeError
    # (pytorch-ntm / dreamerv2 style code calls torch.flip(t, [0])); tracec's
    # method took one dims argument and its function accepted an int.
    x = torch.arange(6.0).view(2, 3)
    want = np.flip(x.numpy(), (0, 1))
    np.testing.assert_array_equal(x.flip(0, 1).numpy(), want)
    np.testing.assert_array_equal(x.flip((0, 1)).numpy(), want)
    np.testing.assert_array_equal(x.flip(dims=[0, 1]).numpy(), want)
    np.testing.assert_array_equal(x.flip(0).numpy(), np.flip(x.numpy(), 0))
    np.testing.assert_array_equal(torch.flip(x, [1]).numpy(), np.flip(x.numpy(), 1))
    _raises(lambda: torch.flip(x, 0), TypeError,
            "flip(): argument 'dims' (position 2) must be tuple of ints, not int")
    _raises(lambda: torch.flip(x, [0.5]), TypeError,
            "flip(): argument 'dims' (position 2) must be tuple of ints, but found element of "
            "type float at pos 0")
    _raises(lambda: x.flip(dims=0), TypeError,
            "flip(): argument 'dims' must be tuple of ints, not int")


def test_apply_checks_the_callables_results_as_torch_unpacks_them():
    # pytorch-ntm's y_out_binarized.apply_(lambda x: 0 if x < 0.5 else 1);
    # torch: a float tensor takes any real number, an integral one any int or
    # float (truncated); others are TypeErrors (tracec: ValueError, or None as nan)
    t = torch.tensor([0.2, 0.7, 0.5])
    np.testing.assert_array_equal(t.clone().apply_(lambda x: 0 if x < 0.5 else 1).numpy(), [0, 1, 1])
    np.testing.assert_array_equal(t.clone().apply_(lambda x: True).numpy(), [1, 1, 1])
    np.testing.assert_array_equal(torch.zeros(3, dtype=torch.long).apply_(lambda x: 1.5).numpy(), [1, 1, 1])
    _raises(lambda: torch.zeros(3).apply_(lambda x: None), TypeError, "must be real number, not NoneType")
    _raises(lambda: torch.zeros(3).apply_(lambda x: "a"), TypeError, "must be real number, not str")
    _raises(lambda: torch.zeros(3, dtype=torch.long).apply_(lambda x: "a"), TypeError,
            "'str' object cannot be interpreted as an integer")
    _raises(lambda: torch.zeros(2, 3).map_(torch.ones(3), lambda a, b: "x"), TypeError,
            "must be real number, not str")


def test_error_messages_of_cosine_similarity_heaviside_and_float_tensor_indices():
    # torch's sentences (pytorch-ntm's content addressing, snntorch's ATan)
    _raises(lambda: torch.nn.functional.cosine_similarity(torch.zeros(2, 3), torch.zeros(2, 4)),
            RuntimeError, "The size of tensor a (3) must match the size of tensor b (4) at "
            "non-singleton dimension 1")
    _raises(lambda: torch.heaviside(torch.tensor([1, 0]), torch.tensor([0.5])), RuntimeError,
            "heaviside is not yet implemented for tensors with different dtypes.")
    _raises(lambda: torch.zeros(2, 3)[:, torch.tensor(1.5)], IndexError,
            "tensors used as indices must be long, int, byte or bool tensors")
    _raises(lambda: torch.zeros(2)[1.5], IndexError,
            "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
            "valid indices (got float)")
    # broadcasting shapes still broadcast
    got = torch.nn.functional.cosine_similarity(torch.ones(2, 1, 3), torch.arange(6.0).view(2, 3), dim=-1)
    assert tuple(got.shape) == (2, 2)


def test_legacy_tensor_constructor_of_a_tensor_is_an_alias():
    # torch.Tensor(t) (the legacy new(Tensor other) form) returns an alias of
    # t: same storage and dtype, AliasBackward0; tracec made a float copy.
    x = torch.ones(2, dtype=torch.long)
    a = torch.Tensor(x)
    assert a is not x and a.dtype == torch.int64
    a[0] = 5
    np.testing.assert_array_equal(x.numpy(), [5, 1])
    y = torch.ones(2, 3).t()
    b = torch.Tensor(y)
    b[0, 1] = 3.0
    assert y[0, 1].item() == 3.0 and tuple(b.shape) == (3, 2)
    w = torch.ones(2, requires_grad=True)
    c = torch.Tensor(w)
    assert c.requires_grad and not c.is_leaf and c.grad_fn.name() == "AliasBackward0"
    (c * 2).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0])
    s = torch.tensor(3.0)
    torch.Tensor(s).fill_(4.0)
    assert s.item() == 4.0
    # the other legacy forms are unchanged: sizes, data, an empty tensor
    assert tuple(torch.Tensor(2, 3).shape) == (2, 3) and torch.Tensor([1, 2]).dtype == torch.float32
    assert tuple(torch.Tensor().shape) == (0,)
