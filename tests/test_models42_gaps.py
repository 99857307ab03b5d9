"""Gaps the models42 programs (tests/programs/models42: udacity's char-RNN and
sentiment RNN, PyTorch-GAN's InfoGAN / AC-GAN, Machine-Learning-Collection's
RNN / GRU / LSTM basics) and their probes found in tracec, each against torch:
the recurrent layers' rank checks through dim() (an (h, c) tuple given to a
GRU, numpy inputs); PyTorch's exact message for an in-place op on a leaf
that requires grad, and its refusal of detach_() on a view; Tensor.type() of
complex and unsigned 16/32/64-bit tensors; default_collate's dtype inference
for an int-first batch mixing ints, bools and floats; torch.load's message
for a missing file; F.linear's refusal of operands of different dtypes, and
autocast leaving float64 inputs alone; the message of an in-place op whose
result cannot be cast to the tensor's dtype; softmax / log_softmax refusing
integer and bool inputs without dtype=; convolutions' dtype-mismatch
messages; batch_norm / layer_norm refusing mixed dtypes as PyTorch's CPU
kernels do."""
import numpy as np
import pytest
import torch as real_torch

import tracec as torch


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type and message are compared
        return type(e).__name__, str(e)
    return None


def _pair(make):
    """The same module built by tracec and by torch, torch's weights copied in."""
    real_torch.manual_seed(0)
    r = make(real_torch)
    t = make(torch)
    t.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in r.state_dict().items()})
    return t, r


@pytest.mark.parametrize("mode", ["GRU", "RNN"])
def test_rnn_gru_given_an_lstm_style_tuple_state_fail_as_torch(mode):
    # A GRU swapped in for an LSTM keeps the (h0, c0) tuple: torch's check
    # calls hx.dim() and fails with an AttributeError naming 'dim'; tracec's
    # checks read .ndim and named 'ndim'.
    t, r = _pair(lambda m: getattr(m.nn, mode)(4, 3, batch_first=True))
    x = np.random.default_rng(0).standard_normal((2, 5, 4)).astype(np.float32)
    h = np.zeros((1, 2, 3), np.float32)
    got = _err(lambda: t(torch.tensor(x), (torch.tensor(h), torch.tensor(h))))
    want = _err(lambda: r(real_torch.tensor(x), (real_torch.tensor(h), real_torch.tensor(h))))
    assert want is not None and got == want
    # the valid call still agrees
    np.testing.assert_allclose(t(torch.tensor(x), torch.tensor(h))[0].detach().numpy(),
                               r(real_torch.tensor(x), real_torch.tensor(h))[0].detach().numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell"])
def test_recurrent_layers_given_a_numpy_input_fail_as_torch(mode):
    # one_hot_encode's numpy array passed without torch.from_numpy: torch
    # fails on input.dim(); tracec's ndim check let the array through to a
    # different error.
    t, r = _pair(lambda m: getattr(m.nn, mode)(4, 3))
    x = np.zeros((5, 2, 4) if "Cell" not in mode else (2, 4), np.float32)
    want = _err(lambda: r(x))
    assert want is not None and _err(lambda: t(x)) == want


def test_lstm_given_numpy_states_fails_as_torch():
    t, r = _pair(lambda m: m.nn.LSTM(4, 3, 2, batch_first=True))
    x = np.zeros((2, 5, 4), np.float32)
    h = (np.zeros((2, 2, 3), np.float32), np.zeros((2, 2, 3), np.float32))
    want = _err(lambda: r(real_torch.tensor(x), h))
    assert want is not None and _err(lambda: t(torch.tensor(x), h)) == want


_INPLACE_ON_LEAF = {
    "add_": lambda x, m: x.add_(1), "mul_": lambda x, m: x.mul_(2), "iadd": lambda x, m: x.__iadd__(1),
    "isub_grad": lambda x, m: x.__isub__(0.1 * m.ones(2)), "zero_": lambda x, m: x.zero_(),
    "copy_": lambda x, m: x.copy_(m.zeros(2)), "relu_": lambda x, m: m.relu_(x),
    "F.relu(inplace)": lambda x, m: m.nn.functional.relu(x, inplace=True),
    "uniform_": lambda x, m: x.uniform_(), "masked_fill_": lambda x, m: x.masked_fill_(
        m.tensor([True, False]), 0.0),
    "setitem": lambda x, m: x.__setitem__(0, 3.0), "view.mul_": lambda x, m: x.view(2).mul_(2),
}


@pytest.mark.parametrize("op", list(_INPLACE_ON_LEAF))
def test_inplace_on_a_leaf_requiring_grad_fails_with_torchs_message(op):
    # The from-scratch update ``w -= lr * w.grad`` outside torch.no_grad():
    # PyTorch's message names no op; tracec's began "add_: " (or "copy_: "
    # for relu_, whose in-place write goes through copy_).
    f = _INPLACE_ON_LEAF[op]
    want = _err(lambda: f(real_torch.ones(2, requires_grad=True), real_torch))
    assert want is not None and _err(lambda: f(torch.ones(2, requires_grad=True), torch)) == want


@pytest.mark.parametrize("make", [
    lambda m: m.ones(2, requires_grad=True).view(2),
    lambda m: m.ones(2, requires_grad=True)[0],
    lambda m: m.ones(3).view(3),
    lambda m: m.ones(2, 2, requires_grad=True).t(),
])
def test_detach_in_place_of_a_view_fails_as_torch(make):
    # PyTorch refuses detach_() on a view (its base would keep the graph the
    # view shares); tracec detached the view alone.
    want = _err(lambda: make(real_torch).detach_())
    assert want is not None and _err(lambda: make(torch).detach_()) == want


def test_detach_in_place_of_a_root_or_detach_alias_still_works():
    for m in (torch, real_torch):
        x = m.ones(2, requires_grad=True)
        y = x * 2
        assert y.detach_() is y and not y.requires_grad and y.grad_fn is None
        d = x.detach()
        assert d.detach_() is d
        # zero_grad detaches a grad made with create_graph=True in place
        w = m.nn.Parameter(m.ones(2))
        (g,) = m.autograd.grad((w * w).sum(), w, create_graph=True)
        w.grad = g
        opt = m.optim.SGD([w], lr=0.1)
        opt.zero_grad(set_to_none=False)
        assert w.grad.grad_fn is None and w.grad.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("dtype", ["complex64", "complex128", "uint16", "uint32", "uint64",
                                   "float32", "bfloat16", "bool"])
def test_type_name_of_every_dtype_matches_torch(dtype):
    # t.type() of a complex (or unsigned 16/32/64-bit) tensor raised KeyError
    # in tracec; PyTorch names them and parses the names back, though it has
    # no torch.ComplexFloatTensor class.
    t, r = torch.zeros(2, dtype=getattr(torch, dtype)), real_torch.zeros(2, dtype=getattr(real_torch, dtype))
    assert t.type() == r.type() and torch.typename(t) == real_torch.typename(r)
    assert torch.ones(2).type(r.type()).dtype == getattr(torch, dtype)
    assert hasattr(torch, r.type()[len("torch."):]) == hasattr(real_torch, r.type()[len("torch."):])


@pytest.mark.parametrize("batch", [
    [1, 2.5], [True, 2], [True, 2.5], [True, False], [1, 2], [1, np.float32(2.5)],
    [True, np.bool_(False)], [(1, 0), (2, 0.5)],
])
def test_default_collate_infers_the_dtype_of_a_mixed_number_batch_as_torch(batch):
    # PyTorch collates a batch whose first element is an int (or bool) with
    # torch.tensor(batch): an int label beside float ones gives float32
    # (a target written 0 in one sample and 0.5 in the next); tracec refused
    # any element not of the first one's kind.
    from torch.utils.data import default_collate as real_collate
    from tracec.utils.data import default_collate
    got, want = default_collate(batch), real_collate(batch)
    if isinstance(want, list):
        got, want = got[1], want[1]
    assert got.dtype.name == str(want.dtype)[len("torch."):] and got.tolist() == want.tolist()


def test_default_collate_still_refuses_a_non_number_beside_an_int():
    from tracec.utils.data import default_collate
    with pytest.raises(TypeError, match="batch item 1 is str but item 0 is int"):
        default_collate([1, "x"])


def test_load_of_a_missing_checkpoint_says_what_torch_says(tmp_path):
    # torch.load("model_cifar.pt") before any save: PyTorch's message is
    # open()'s; tracec's read "[Errno 2] tracec.load: no such file: ...".
    path = str(tmp_path / "model_cifar.pt")
    want = _err(lambda: real_torch.load(path))
    got = _err(lambda: torch.load(path))
    assert want[0] == "FileNotFoundError" and got[1] == want[1]
    with pytest.raises(FileNotFoundError):
        torch.load(path)


@pytest.mark.parametrize("xdtype", ["float64", "int64", "float16", "float32"])
@pytest.mark.parametrize("bdtype", [None, "float32", "float64"])
@pytest.mark.parametrize("shape", [(2,), (1, 2), (3, 1, 2)])
def test_linear_refuses_operands_of_different_dtypes_as_torch(xdtype, bdtype, shape):
    # torch.from_numpy of a float64 array (or an int64 one) fed to a float32
    # nn.Linear: PyTorch's addmm / mm refuse it; tracec promoted to float64
    # (or to float32) and went on.
    def run(m):
        x = m.ones(*shape, dtype=getattr(m, xdtype))
        b = None if bdtype is None else m.ones(2, dtype=getattr(m, bdtype))
        return m.nn.functional.linear(x, m.ones(2, 2), b)
    want = _err(lambda: run(real_torch))
    got = _err(lambda: run(torch))
    assert got == want
    if want is None:
        np.testing.assert_array_equal(run(torch).detach().numpy(), run(real_torch).numpy())


def test_autocast_leaves_float64_inputs_alone_as_torch():
    # PyTorch's autocast casts only eligible (non-double) floating tensors:
    # a float64 batch meets the bfloat16 weight and fails; tracec cast it.
    def run(m):
        lin = m.nn.Linear(2, 2)
        with m.autocast("cpu", dtype=m.bfloat16):
            ok = lin(m.ones(1, 2)).dtype
            return ok, _err(lambda: lin(m.ones(1, 2, dtype=m.float64)))
    (ok_t, err_t), (ok_r, err_r) = run(torch), run(real_torch)
    assert ok_t.name == "bfloat16" and str(ok_r) == "torch.bfloat16"
    assert err_r is not None and err_t == err_r


@pytest.mark.parametrize("op", ["add_", "iadd", "mul_", "div_", "sub_", "bool_add", "u8_mul_",
                                "f_add_complex"])
def test_inplace_result_that_cannot_be_cast_fails_with_torchs_message(op):
    # ``labels += 0.5`` on an int64 tensor: PyTorch's message names no op and
    # uses ScalarType names (Float, Long); tracec's read
    # "add_: result type tracec.float32 can't be cast ... tracec.int64".
    calls = {
        "add_": lambda m: m.ones(2, dtype=m.long).add_(0.5),
        "iadd": lambda m: m.ones(2, dtype=m.long).__iadd__(0.5),
        "mul_": lambda m: m.ones(2, dtype=m.long).mul_(m.ones(2)),
        "div_": lambda m: m.ones(2, dtype=m.long).div_(2),
        "sub_": lambda m: m.ones(2, dtype=m.long).sub_(m.tensor(0.5)),
        "bool_add": lambda m: m.ones(2, dtype=m.bool).add_(1),
        "u8_mul_": lambda m: m.ones(2, dtype=m.uint8).mul_(1.5),
        "f_add_complex": lambda m: m.ones(2).add_(m.ones(2, dtype=m.complex64)),
    }
    want = _err(lambda: calls[op](real_torch))
    assert want is not None and _err(lambda: calls[op](torch)) == want


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype,shape,dim", [("int64", (2, 3), 1), ("int64", (2, 3), 0),
                                             ("int32", (2, 3), -1), ("bool", (3,), 0),
                                             ("int64", (), 0)])
def test_softmax_of_an_integer_tensor_fails_as_torch(fn, dtype, shape, dim):
    # F.softmax(torch.tensor([1, 2, 3]), 0): PyTorch's kernels have no
    # integer instance; tracec promoted to float as exp does. With dtype=
    # both cast first and agree.
    def run(m, **kw):
        return getattr(m.nn.functional, fn)(m.ones(shape, dtype=getattr(m, dtype)), dim, **kw)
    want = _err(lambda: run(real_torch))
    assert want is not None and _err(lambda: run(torch)) == want
    np.testing.assert_allclose(run(torch, dtype=torch.float32).numpy(),
                               run(real_torch, dtype=real_torch.float32).numpy(), rtol=1e-6)


@pytest.mark.parametrize("xdtype", ["float64", "int64", "float16", "bfloat16"])
@pytest.mark.parametrize("layer", ["Conv2d", "Conv2d-nobias", "Conv1d", "ConvTranspose2d"])
def test_conv_given_another_dtype_fails_with_torchs_message(xdtype, layer):
    # A float64 image batch (torch.from_numpy) into a float32 conv: PyTorch
    # names the bias first (C type names) or "expected scalar type Double
    # but found Float"; tracec said "Input type (torch.float64) and weight
    # type (torch.float32) should be the same" for all of them.
    def run(m):
        name, _, nb = layer.partition("-")
        mod = getattr(m.nn, name)(1, 1, 2, bias=not nb)
        x = m.ones((1, 1, 4) if name == "Conv1d" else (1, 1, 4, 4), dtype=getattr(m, xdtype))
        return mod(x)
    want = _err(lambda: run(real_torch))
    assert want is not None and _err(lambda: run(torch)) == want


def test_conv_bias_of_another_dtype_fails_with_torchs_message():
    def run(m):
        return m.nn.functional.conv2d(m.ones(1, 1, 3, 3), m.ones(1, 1, 2, 2),
                                      m.ones(1, dtype=m.float64))
    want = _err(lambda: run(real_torch))
    assert want is not None and _err(lambda: run(torch)) == want


_NORM_CASES = [(x, p) for x in ("float64", "int64", "bfloat16", "float16", "float32")
               for p in ("float32", "float64", "bfloat16")
               # (bfloat16 parameters beside a float32 / float16 input: not refused,
               # see nn.functional._check_norm_dtypes)
               if not (p == "bfloat16" and x in ("float32", "float16"))]


@pytest.mark.parametrize("xdtype,pdtype", _NORM_CASES)
@pytest.mark.parametrize("kind", ["bn_train", "bn_eval", "bn_stats_only", "ln", "bn_none",
                                  "ln_none"])
def test_batch_and_layer_norm_dtype_checks_match_torch(xdtype, pdtype, kind):
    # A float64 batch (torch.from_numpy) into a float32 BatchNorm2d /
    # LayerNorm: PyTorch's CPU kernels refuse mixed dtypes (only float32
    # parameters beside a half input are allowed); tracec promoted and ran.
    def run(m):
        F = m.nn.functional
        x = m.ones(2, 3, dtype=getattr(m, xdtype))
        w = m.ones(3, dtype=getattr(m, pdtype))
        return {"bn_train": lambda: F.batch_norm(x, None, None, w, w, True),
                "bn_eval": lambda: F.batch_norm(x, w.clone(), w.clone(), w, w, False),
                "bn_stats_only": lambda: F.batch_norm(x, w.clone(), w.clone(), None, None, True),
                "ln": lambda: F.layer_norm(x, (3,), w, w),
                "bn_none": lambda: F.batch_norm(x, None, None, None, None, True),
                "ln_none": lambda: F.layer_norm(x, (3,))}[kind]()
    want, got = _err(lambda: run(real_torch)), _err(lambda: run(torch))
    assert got == want
    if want is None:
        assert run(torch).dtype.name == str(run(real_torch).dtype)[len("torch."):]
