"""Gaps the models26 programs (tests/programs/models26) found in tracec."""
import warnings

import pytest

import tracec as torch


def _grad_after_reassigning(u, make):
    w = make()
    s = u.dot(w) if w.ndim == 1 and u.ndim == 1 else (w @ u if w.shape[-1] == u.shape[0] else u @ w)
    u.data = torch.tensor([10.0, 20.0])
    s.sum().backward()
    return w.grad


def test_dot_and_mv_backward_read_the_vector_data_reassigned_since():
    # SAGAN's SpectralNorm: sigma = u.dot(w.view(h, -1).mv(v)), and the next
    # forward (the discriminator runs on real, then fake images) reassigns
    # u.data / v.data before the backward. PyTorch's dot and mv save their
    # operands themselves and set_data keeps that TensorImpl, so the
    # backward reads the new vectors; tracec's products went through a
    # reshaped view of the old data (its D gradients were 2-5% off).
    u = torch.nn.Parameter(torch.tensor([1.0, 2.0]), requires_grad=False)
    g = _grad_after_reassigning(u, lambda: torch.tensor([3.0, 4.0], requires_grad=True))
    assert g.tolist() == [10.0, 20.0]
    u = torch.tensor([1.0, 2.0])
    g = _grad_after_reassigning(u, lambda: torch.ones(3, 2, requires_grad=True))   # mv
    assert g.tolist() == [[10.0, 20.0]] * 3
    w = torch.ones(3, 2, requires_grad=True)
    v = torch.tensor([1.0, 2.0])
    s = torch.mv(w, v).sum()
    v.data = torch.tensor([5.0, 6.0])
    s.backward()
    assert w.grad.tolist() == [[5.0, 6.0]] * 3
    assert torch.mv(w, v).grad_fn.name() == "MvBackward0"
    assert torch.dot(v, v.clone().requires_grad_()).grad_fn.name() == "DotBackward0"


def test_vector_matrix_product_backward_keeps_the_old_vector_data():
    # PyTorch's matmul(1-D, 2-D) is unsqueeze(0).mm(): it saves the
    # unsqueezed view, which keeps the old storage.
    u = torch.tensor([1.0, 2.0])
    g = _grad_after_reassigning(u, lambda: torch.ones(2, 3, requires_grad=True))
    assert g[:, 0].tolist() == [1.0, 2.0]


def test_mv_dot_values_and_errors_unchanged():
    w = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    v = torch.tensor([0.5, -1.0], requires_grad=True)
    out = w.mv(v)
    assert out.tolist() == [-1.5, -2.5]
    out.sum().backward()
    assert w.grad.tolist() == [[0.5, -1.0], [0.5, -1.0]] and v.grad.tolist() == [4.0, 6.0]
    with pytest.raises(RuntimeError):
        torch.mv(w, torch.ones(3, requires_grad=True))
    with pytest.raises(RuntimeError):
        torch.ones(3, requires_grad=True) @ torch.ones(2)


def test_autograd_grad_runs_only_the_graph_between_outputs_and_inputs():
    # torch.autograd.grad(y, x) runs the nodes on paths from y to x only:
    # the graph behind x is neither freed (a later backward through it
    # works) nor run (its hooks do not fire). tracec ran the whole graph
    # behind x: the freed-graph error below, hooks with wrong gradients, and
    # WGAN-GP's create_graph penalty through convolutions re-ran every
    # earlier layer's double backward inside each layer's (SAGAN: 11 s ->
    # 2 s for one step).
    a = torch.ones(2, requires_grad=True)
    seen = []
    a.register_hook(lambda g: seen.append(g.tolist()))
    x = a.exp()
    y = (x ** 2).sum()
    (gx,) = torch.autograd.grad(y, x)
    assert seen == []
    assert [round(v, 4) for v in gx.tolist()] == [5.4366, 5.4366]
    x.sum().backward()
    assert [round(v, 4) for v in a.grad.tolist()] == [2.7183, 2.7183]
    assert len(seen) == 1


def test_autograd_grad_through_one_input_to_another():
    # an input behind another input: the path through the first is run
    b = torch.ones(2, requires_grad=True)
    x = b * 3
    z = (x * b).sum()
    gx, gb = torch.autograd.grad(z, [x, b], retain_graph=True)
    assert gx.tolist() == [1.0, 1.0] and gb.tolist() == [6.0, 6.0]
    gb2, gx2 = torch.autograd.grad(z, [b, x])
    assert gb2.tolist() == [6.0, 6.0] and gx2.tolist() == [1.0, 1.0]


def test_compiled_data_reassignment_after_a_read_matches_eager():
    # Compiled, the autodiff pass would give the dot's gradient u's old
    # value; eagerly (and in PyTorch) it reads the reassigned one. So such a
    # backward is recorded from the eager engine's run (the saved tensors'
    # values at backward time), and the call still compiles: no fallback.
    u = torch.nn.Parameter(torch.tensor([1.0, 2.0]), requires_grad=False)
    w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))

    def step(scale):
        s = u.dot(w)
        u.data = u.data * scale
        w.grad = None
        s.backward()
        return w.grad.clone()

    cstep = torch.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g1 = cstep(torch.tensor(10.0))
        g2 = cstep(torch.tensor(0.5))
    assert g1.tolist() == [10.0, 20.0]
    assert g2.tolist() == [5.0, 10.0] and u.tolist() == [5.0, 10.0]
    assert cstep.traces == 1 and not cstep._eager_keys


def test_new_tensor_of_a_tensor_warns_as_pytorch_at_the_callers_line():
    # Conv-TasNet's overlap_and_add: frame = signal.new_tensor(frame).long().
    # PyTorch names tensor.new_tensor(sourceTensor) and the caller's line;
    # tracec said torch.tensor(sourceTensor) at its own methods_extra.py.
    signal = torch.zeros(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = signal.new_tensor(torch.arange(3))
    assert out.dtype is torch.float32 and out.tolist() == [0.0, 1.0, 2.0]
    (w,) = caught
    assert "rather than tensor.new_tensor(sourceTensor)." in str(w.message)
    assert w.filename == __file__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.tensor(torch.ones(1))
    (w,) = caught
    assert "rather than torch.tensor(sourceTensor)." in str(w.message) and w.filename == __file__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        signal.new_tensor([1, 2])
    assert caught == []


def test_legacy_new_of_a_tensor_of_another_dtype_is_a_type_error():
    # fairseq's GradMultiply.forward: res = x.new(x) (an alias, one dtype).
    # PyTorch refuses another dtype's tensor; tracec returned an alias.
    x = torch.arange(4.0)
    y = x.new(x)
    y[0] = 7.0
    assert x.tolist() == [7.0, 1.0, 2.0, 3.0]
    with pytest.raises(TypeError) as e:
        x.long().new(x)
    assert str(e.value) == (
        "expected TensorOptions(dtype=long int, device=cpu, layout=Strided, requires_grad=false "
        "(default), pinned_memory=false (default), memory_format=(nullopt)) (got TensorOptions("
        "dtype=float, device=cpu, layout=Strided, requires_grad=false (default), pinned_memory="
        "false (default), memory_format=(nullopt)))")
    with pytest.raises(TypeError, match=r"dtype=c10::Half.*got TensorOptions\(dtype=c10::complex<float>"):
        x.half().new(torch.ones(1, dtype=torch.complex64))


@pytest.mark.parametrize("a, b, msg", [
    ((2, 3), (3,), "1D tensors expected, but got 2D and 1D tensors"),
    ((), (3,), "1D tensors expected, but got 0D and 1D tensors"),
    ((3,), (4,), "inconsistent tensor size, expected tensor [3] and src [4] to have the same "
                 "number of elements, but got 3 and 4 elements respectively"),
])
def test_dot_refuses_what_pytorch_refuses(a, b, msg):
    # SpectralNorm's u.dot(...): tracec's dot was matmul, so a 2-D operand
    # or mixed dtypes went through silently
    with pytest.raises(RuntimeError) as e:
        torch.dot(torch.ones(a), torch.ones(b))   # (ones(*()) is a TypeError in PyTorch)
    assert str(e.value) == msg
    with pytest.raises(RuntimeError, match="^dot : expected both vectors to have same dtype, but "
                       "found Float and Double$"):
        torch.ones(3).dot(torch.ones(3, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="^dot : expected both vectors to have same dtype, but "
                       "found Float and Long$"):
        torch.vdot(torch.ones(3), torch.ones(3, dtype=torch.int64))
    assert torch.dot(torch.tensor([1, 2]), torch.tensor([3, 4])).item() == 11


def test_mv_messages_as_pytorch():
    with pytest.raises(RuntimeError, match=r"^addmv input tensors must have the same dtype, but got "
                       "Double, Float, and Double$"):
        torch.mv(torch.ones(2, 3), torch.ones(3, dtype=torch.float64))
    with pytest.raises(RuntimeError, match=r"^vector \+ matrix @ vector expected, got 1, 2, 2$"):
        torch.ones(2, 3).mv(torch.ones(3, 1))


def test_vdot_conjugates_its_first_argument():
    # torch.vdot(a, b) = sum(conj(a) * b); tracec's was dot (no conjugate)
    a = torch.tensor([1 + 2j, 3j], requires_grad=True)
    b = torch.tensor([2 + 1j, 1 - 1j], requires_grad=True)
    out = torch.vdot(a, b)
    assert out.item() == 1 - 6j and out.grad_fn.name() == "VdotBackward0"
    out.real.backward()
    assert a.grad.tolist() == [2 + 1j, 1 - 1j] and b.grad.tolist() == [1 + 2j, 3j]
    assert torch.dot(a, b).item() == 3 + 8j
    assert torch.vdot(torch.ones(2, requires_grad=True), torch.ones(2)).grad_fn.name() == "VdotBackward0"
