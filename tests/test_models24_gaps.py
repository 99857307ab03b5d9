"""Gaps the models24 programs (tests/programs/models24) found in tracec."""
import numpy as np
import pytest

import tracec as torch


def test_to_accepts_none_in_the_device_forms_slots():
    # performer-pytorch: `torch.randn(shape, device=device)` wrapped as
    # `torch.from_numpy(...).to(device)` with device=None (the default of
    # gaussian_orthogonal_random_matrix). PyTorch's to(device=None,
    # dtype=None, ...) overload leaves a None slot as it is; tracec refused
    # "to(): unexpected argument None".
    t = torch.ones(2)
    assert t.to(None) is t
    assert t.to(None, None) is t
    assert t.to("cpu", None) is t
    d = t.to(None, torch.float64)
    assert d.dtype is torch.float64 and d.tolist() == [1.0, 1.0]
    assert t.to(None, torch.float64, False).dtype is torch.float64


@pytest.mark.parametrize("args", [(torch.float64, None), (torch.ones(1), None)])
def test_to_still_refuses_none_outside_the_device_form(args):
    # torch: "to() received an invalid combination of arguments"
    with pytest.raises(TypeError):
        torch.ones(2).to(*args)


def test_isinstance_of_a_legacy_tensor_type_checks_dtype_and_device():
    # pytorch-AdaIN's _calc_feat_flatten_mean_std asserts
    # isinstance(feat, torch.FloatTensor). tracec's FloatTensor was Tensor
    # itself, so a float64 tensor passed; and LongTensor & co. were plain
    # functions, so isinstance() with them raised TypeError. In PyTorch they
    # are torch.tensortype instances: a CPU tensor of exactly that dtype.
    x = torch.ones(2, 3)
    assert isinstance(x, torch.FloatTensor)
    assert isinstance(torch.nn.Parameter(x), torch.FloatTensor)
    assert not isinstance(x.double(), torch.FloatTensor)
    assert isinstance(x.double(), torch.DoubleTensor)
    assert isinstance(x.long(), torch.LongTensor) and not isinstance(x, torch.LongTensor)
    assert not isinstance(x.to("meta"), torch.FloatTensor)
    assert not isinstance([1.0], torch.FloatTensor)
    assert not issubclass(torch.FloatTensor, torch.Tensor)
    assert torch.FloatTensor.dtype is torch.float32 and torch.LongTensor.__name__ == "LongTensor"


def test_legacy_float_tensor_constructor_is_float32_whatever_the_default_dtype():
    # torch.FloatTensor(2) is float32 even under set_default_dtype(float64)
    # (torch.Tensor(2) follows the default); tracec's FloatTensor was Tensor.
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert torch.FloatTensor(2).dtype is torch.float32
        assert torch.FloatTensor([1, 2]).dtype is torch.float32
        assert torch.Tensor(2).dtype is torch.float64
    finally:
        torch.set_default_dtype(old)
    assert torch.ones(2).double().type(torch.FloatTensor).dtype is torch.float32
    assert torch.FloatTensor(2, 3).tolist() == [[0.0] * 3] * 2


# --- error paths the programs' layers hit with bad input, compared with torch

torch_ref = pytest.importorskip("torch")


def _err(lib_fn):
    try:
        lib_fn()
    except Exception as e:  # noqa: BLE001 - the type and message are compared
        return type(e).__name__, str(e)
    return None


def _same_as_torch(fn, check=lambda a, b: a.tolist() == b.tolist()):
    """``fn(tracec)`` raises what ``fn(torch)`` raises (type and message),
    or both succeed and ``check`` holds for their results."""
    want, got = _err(lambda: fn(torch_ref)), _err(lambda: fn(torch))
    assert got == want
    if want is None:
        assert check(fn(torch), fn(torch_ref))


@pytest.mark.parametrize("shape,pad", [
    ((1, 1, 2, 2), (2, 2, 2, 2)), ((1, 2, 3), (1, 0, 2, 0)), ((1, 1, 2, 2), (0, 0, 2, 0)),
    ((1, 1, 2, 2, 2), (0, 0, 0, 0, 2, 0)), ((1, 1, 2, 2, 2), (2, 0, 0, 0, 2, 0))])
def test_reflection_pad_error_names_the_argument_and_dimension_like_torch(shape, pad):
    # pytorch-AdaIN's ReflectionPad2d((1, 1, 1, 1)) on a too-small feature
    # map: PyTorch checks the last dimension first and numbers the pad
    # argument (#4 the last dimension's pair, #6 the one before, #8); tracec
    # checked the first padded dimension first and always said #4.
    import tracec.nn.functional as TF
    import torch.nn.functional as RF
    want = _err(lambda: RF.pad(torch_ref.ones(shape), pad, mode="reflect"))
    got = _err(lambda: TF.pad(torch.ones(shape), pad, mode="reflect"))
    assert want is not None and got == want


@pytest.mark.parametrize("shape,dim,index", [
    ((2, 3), 1, [[3], [0]]), ((2, 3), 1, [[-1], [0]]), ((2, 3), 0, [[0], [5]]),
    ((2, 3), -1, [[-4], [0]]), ((3,), 0, [7]), ((), 0, -1)])
def test_gather_out_of_range_index_is_a_runtime_error_like_torch(shape, dim, index):
    # PER's q_values.gather(1, action.unsqueeze(1)) with a bad action: torch
    # raises RuntimeError("index 3 is out of bounds for dimension 1 with
    # size 3"); tracec raised an IndexError with another message, and a
    # negative index silently counted from the end.
    want = _err(lambda: torch_ref.zeros(shape).gather(dim, torch_ref.tensor(index)))
    got = _err(lambda: torch.zeros(shape).gather(dim, torch.tensor(index)))
    assert want is not None and got == want


def test_compiled_gather_checks_its_own_indices():
    f = torch.compile(lambda x, i: x.gather(1, i) * 2)
    x = torch.arange(6.0).view(2, 3)
    assert f(x, torch.tensor([[2], [0]])).tolist() == [[4.0], [6.0]]
    assert f(x, torch.tensor([[1], [1]])).tolist() == [[2.0], [8.0]]
    with pytest.raises(RuntimeError, match="out of bounds"):
        f(x, torch.tensor([[-1], [0]]))


_FILLS = {
    "masked_fill half -1e10": lambda L: L.zeros(2, dtype=L.float16).masked_fill(L.tensor([True, False]), -1e10),
    "masked_fill_ half": lambda L: L.zeros(2, dtype=L.float16).masked_fill_(L.tensor([True, False]), -1e10),
    "masked_fill half 65519": lambda L: L.zeros(2, dtype=L.float16).masked_fill(L.tensor([True, False]), 65519.0),
    "masked_fill half 65504": lambda L: L.zeros(2, dtype=L.float16).masked_fill(L.tensor([True, False]), 65504.0),
    "masked_fill half -inf": lambda L: L.zeros(2, dtype=L.float16).masked_fill(L.tensor([True, False]), float("-inf")),
    "masked_fill f32 1e40": lambda L: L.zeros(2).masked_fill(L.tensor([True, False]), 1e40),
    "masked_fill bf16 1e39": lambda L: L.zeros(2, dtype=L.bfloat16).masked_fill(L.tensor([True, False]), 1e39),
    "masked_fill f64 1e300": lambda L: L.zeros(2, dtype=L.float64).masked_fill(L.tensor([True, False]), 1e300),
    "full half": lambda L: L.full((2,), 1e10, dtype=L.float16),
    "fill_ half": lambda L: L.zeros(2, dtype=L.float16).fill_(1e10),
    "fill_ int8": lambda L: L.zeros(2, dtype=L.int8).fill_(300),
    "clamp half": lambda L: L.zeros(2, dtype=L.float16).clamp(min=-1e10),
    "int32 1e10": lambda L: L.zeros(2, dtype=L.int32).masked_fill(L.tensor([True, False]), 1e10),
    "int32 2**40": lambda L: L.zeros(2, dtype=L.int32).masked_fill(L.tensor([True, False]), 2 ** 40),
    "int64 nan": lambda L: L.zeros(2, dtype=L.int64).masked_fill(L.tensor([True, False]), float("nan")),
    "uint8 -1": lambda L: L.zeros(2, dtype=L.uint8).masked_fill(L.tensor([True, False]), -1),
    "uint8 full -255": lambda L: L.full((1,), -255, dtype=L.uint8),
    "uint8 fill_ -1": lambda L: L.zeros(1, dtype=L.uint8).fill_(-1),
    "uint8 -256": lambda L: L.zeros(1, dtype=L.uint8).fill_(-256),
}


@pytest.mark.parametrize("name", list(_FILLS))
def test_fill_values_are_range_checked_like_torch(name):
    # The attention mask idiom masked_fill(mask == 0, -1e10) under float16:
    # PyTorch refuses a finite value beyond the dtype's range ("value cannot
    # be converted to type c10::Half without overflow"); tracec filled -inf.
    # fill_ was not checked at all, int32 was named int32_t (PyTorch: int),
    # and a negative int into uint8 (which PyTorch wraps) was refused.
    _same_as_torch(_FILLS[name])


_LEGACY = {
    "FloatTensor(int tensor)": lambda L: L.FloatTensor(L.tensor([1, 2])),
    "LongTensor(float tensor)": lambda L: L.LongTensor(L.tensor([1.5, 2.0])),
    "ByteTensor(float tensor)": lambda L: L.ByteTensor(L.tensor([1.0])),
    "HalfTensor(bool tensor)": lambda L: L.HalfTensor(L.tensor([True])),
    "FloatTensor(float tensor)": lambda L: L.FloatTensor(L.tensor([1.0, 2.0])),
    "Tensor(int tensor)": lambda L: L.Tensor(L.tensor([1, 2])),
    "FloatTensor('abc')": lambda L: L.FloatTensor("abc"),
    "Tensor('abc')": lambda L: L.Tensor("abc"),
    "FloatTensor(None)": lambda L: L.FloatTensor(None),
    "FloatTensor(2.0)": lambda L: L.FloatTensor(2.0),
    "Tensor(True)": lambda L: L.Tensor(True),
    "Tensor(dict)": lambda L: L.Tensor({1: 2}),
    "FloatTensor(np.float32 scalar)": lambda L: L.FloatTensor(np.float32(1.0)),
    "Tensor(np.bool_)": lambda L: L.Tensor(np.bool_(True)),
    "FloatTensor(np.int64 size)": lambda L: L.FloatTensor(np.int64(2)).zero_(),
    "FloatTensor(-1)": lambda L: L.FloatTensor(-1),
    "FloatTensor(2, -1)": lambda L: L.FloatTensor(2, -1),
    "FloatTensor(0)": lambda L: L.FloatTensor(0),
    "FloatTensor device=cpu": lambda L: L.FloatTensor([1.0], device="cpu"),
    "FloatTensor(np int64)": lambda L: L.FloatTensor(np.array([1, 2])),
    "LongTensor(list floats)": lambda L: L.LongTensor([1.7, -2.7]),
    "ByteTensor([-1])": lambda L: L.ByteTensor([-1]),
}


@pytest.mark.parametrize("name", list(_LEGACY))
def test_legacy_constructors_accept_and_refuse_like_torch(name):
    # Variable-era code builds tensors with torch.FloatTensor(...) /
    # LongTensor(...): PyTorch refuses a tensor of another dtype (the
    # legacy constructors do not convert), a bare number, None or a str,
    # and a negative size; tracec converted / accepted them or raised
    # NumPy's errors, and refused device='cpu'.
    _same_as_torch(_LEGACY[name], lambda a, b: a.tolist() == b.tolist() and
                   str(a.dtype)[7:] == str(b.dtype)[6:])


_SHAPE_ERRORS = {
    "bmm batch2 rows": lambda L: L.bmm(L.ones(2, 1, 3), L.ones(2, 4, 5)),
    "bmm batch not broadcast": lambda L: L.bmm(L.ones(1, 2, 3), L.ones(4, 3, 5)),
    "bmm 2-D batch1": lambda L: L.bmm(L.ones(1, 3), L.ones(3, 5)),
    "bmm 2-D batch2": lambda L: L.bmm(L.ones(2, 1, 3), L.ones(3, 5)),
    "bmm dtypes": lambda L: L.bmm(L.ones(2, 2, 3), L.ones(2, 3, 4, dtype=L.float64)),
    "bmm ok": lambda L: L.bmm(L.ones(2, 2, 3), L.ones(2, 3, 4)),
    "permute duplicate": lambda L: L.ones(2, 3).permute(1, 1),
    "expand -1 leading": lambda L: L.ones(3).expand(-1, 3),
    "broadcast_to -1 leading": lambda L: L.ones(3).broadcast_to((-1, 3)),
    "expand -1 existing": lambda L: L.ones(2, 3).expand(2, -1, 3),
}


@pytest.mark.parametrize("name", list(_SHAPE_ERRORS))
def test_shape_errors_of_attention_code_like_torch(name):
    # Bahdanau attention's torch.bmm(a, encoder_outputs): PyTorch's bmm
    # neither broadcasts batches nor promotes dtypes and names batch1 /
    # batch2; tracec broadcast a batch of 1 silently, promoted, and said
    # "mat1 and mat2 shapes cannot be multiplied". expand(-1, ...) in a new
    # leading dimension and permute's duplicate dims had other messages.
    _same_as_torch(_SHAPE_ERRORS[name])


def test_bmm_under_autocast_casts_mixed_inputs():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = torch.bmm(torch.ones(2, 2, 3), torch.ones(2, 3, 4, dtype=torch.bfloat16))
    assert out.dtype is torch.bfloat16 and out.shape == (2, 2, 4)


def _load_mismatched(L):
    m = L.nn.Linear(2, 3)
    return m.load_state_dict({"weight": L.ones(2, 2), "bias": L.ones(3)})


_MORE = {
    "load_state_dict size mismatch": _load_mismatched,
    "svd compute_uv=False": lambda L: L.stack([t.abs().sum() for t in L.svd(L.ones(3, 2), compute_uv=False)]),
    "svd compute_uv=False shapes": lambda L: L.tensor([list(t.shape) for t in L.svd(L.ones(2, 4, 3), compute_uv=False)[::2]]),
    "svd 1-D": lambda L: L.svd(L.ones(2)),
    "linalg.svd 1-D": lambda L: L.linalg.svd(L.ones(2)),
    "linalg.qr 1-D": lambda L: L.linalg.qr(L.ones(2)),
    "embedding float indices": lambda L: L.nn.Embedding(3, 2)(L.tensor([1.0])),
    "einsum too few operands": lambda L: L.einsum("ij,jk->ik", L.ones(2, 2)),
    "einsum too many operands": lambda L: L.einsum("ij->i", L.ones(2, 2), L.ones(2)),
    "var of int": lambda L: L.tensor([1, 2, 3]).var(),
    "std of int dim": lambda L: L.tensor([1, 2, 3]).std(dim=0),
    "amax empty no dim": lambda L: L.amax(L.ones(0, 3)),
    "amax empty dim": lambda L: L.amax(L.ones(0, 3), dim=0),
    "amin empty dims": lambda L: L.ones(0, 3).amin(dim=(0, 1)),
    "amax empty other dim": lambda L: L.ones(0, 3).amax(dim=1),
    "max empty dim": lambda L: L.ones(0, 3).max(dim=0),
    "max empty": lambda L: L.ones(0, 3).max(),
    "min empty other dim": lambda L: L.ones(0, 3).min(dim=1).values,
}


@pytest.mark.parametrize("name", list(_MORE))
def test_checks_and_messages_like_torch(name):
    # load_state_dict's size mismatch names torch.Size([...]); torch.svd(...,
    # compute_uv=False) returns zero-filled U and V (tracec computed them);
    # the embedding message names the legacy type (torch.FloatTensor); einsum
    # operand counts, 1-D qr / svd, var / std of integers and max / amax over
    # empty dims are torch's errors (tracec: ValueError, NumPy's LinAlgError,
    # a mean() message, "cannot reduce over a zero-size dimension").
    _same_as_torch(_MORE[name], lambda a, b: str(a).replace("tracec", "torch") == str(b))


def test_autograd_grad_with_an_input_listed_twice():
    # torch.autograd.grad(out, (x, x)) gives x's gradient at both places;
    # tracec sized its capture slots by distinct inputs and failed with
    # "IndexError: list assignment index out of range".
    c = torch.ones(2, requires_grad=True)
    d = torch.ones(2, requires_grad=True)
    out = (c * c * 3 + d).sum()
    g1, g2 = torch.autograd.grad(out, (c, c), retain_graph=True)
    assert g1.tolist() == g2.tolist() == [6.0, 6.0]
    gs = torch.autograd.grad(out, [c, d, c], retain_graph=True)
    assert [g.tolist() for g in gs] == [[6.0, 6.0], [1.0, 1.0], [6.0, 6.0]]
    h1, h2 = torch.autograd.grad(out, [c, c], create_graph=True)
    assert h1.requires_grad and h2.requires_grad and h2.tolist() == [6.0, 6.0]


def test_compiled_autograd_grad_with_an_input_listed_twice():
    def f(x):
        y = (x * x).sum()
        a, b = torch.autograd.grad(y, (x, x), create_graph=True)
        return a + b
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    assert torch.compile(f)(x).tolist() == f(x).tolist() == [4.0, 8.0]


def test_type_with_torch_tensor_itself_still_means_float32():
    # eriklindernoren's CycleGAN: Tensor = torch.cuda.FloatTensor if cuda
    # else torch.Tensor, then x.type(Tensor): kept when FloatTensor became a
    # legacy type of its own.
    assert torch.ones(2).double().type(torch.Tensor).dtype is torch.float32
    assert torch.ones(2).long().type(torch.FloatTensor).dtype is torch.float32
