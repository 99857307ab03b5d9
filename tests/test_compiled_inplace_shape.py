"""In-place shape changes of a compiled function's inputs (``unsqueeze_``,
``transpose_``, ``t_``, ``resize_``) happen at every compiled call, as
eagerly: the argument or state leaves the call with eager's shape, strides
and values (``OutputSpec.layout``, ``view_outputs.relayout``).  Before,
compiled calls left the shape alone (``unsqueeze_``: silently) or crashed
writing the new shape's values (``resize_``)."""
import numpy as np
import pytest
import torch

import tracec


def _program(T):
    lin = T.nn.Linear(4, 3)
    with T.no_grad():
        lin.weight.copy_(T.arange(12.).reshape(3, 4) / 10)
        lin.bias.zero_()
    buf = T.arange(6.)

    def step(x, y):
        x.unsqueeze_(0).transpose_(0, 1)        # (2, 4) -> (2, 1, 4), strides (4, 8, 1)
        y.resize_(2, 8)                         # same memory, another shape
        with T.no_grad():
            lin.weight.t_()                     # state: transposed and back
            h = x.squeeze(1) @ lin.weight
            lin.weight.t_()
            buf.resize_(2, 3)
        return h.sum() + y[1].sum() + buf[1].sum()
    return step, lin, buf


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_arguments_and_state_reshaped_in_place_match_torch(backend):
    step_t, lin_t, buf_t = _program(torch)
    x0 = np.arange(8, dtype=np.float32).reshape(2, 4)
    y0 = np.arange(16, dtype=np.float32).reshape(4, 4)
    xt, yt = torch.tensor(x0), torch.tensor(y0)
    want = step_t(xt, yt).item()
    step_c, lin_c, buf_c = _program(tracec)
    f = tracec.compile(step_c, backend=backend)
    for _ in range(3):
        xc, yc = tracec.tensor(x0), tracec.tensor(y0)
        assert f(xc, yc).item() == pytest.approx(want, rel=1e-6)
        for a, b in ((xc, xt), (yc, yt), (buf_c, buf_t), (lin_c.weight, lin_t.weight)):
            assert tuple(a.shape) == tuple(b.shape) and a.stride() == b.stride()
            np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
        buf_c.resize_(6)                        # as the next call finds it
    buf_t.resize_(6)
    assert f.cache_info().hits >= 1


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_resize_past_the_storage_gets_new_memory_each_call(backend):
    def step(y):
        y.resize_(4, 8)                         # 16 -> 32 elements: new memory
        return y[3].sum() + y[0].sum()
    f = tracec.compile(step, backend=backend)
    for _ in range(3):
        a = np.arange(16, dtype=np.float32).reshape(4, 4)
        yc, yt = tracec.tensor(a), torch.tensor(a)
        yt.resize_(4, 8)
        yc_out = f(yc)
        assert tuple(yc.shape) == (4, 8)
        np.testing.assert_array_equal(yc.numpy()[:2], yt.numpy()[:2])   # (the rest: unset)
        assert yc_out.item() == pytest.approx(float(yc.numpy()[3].sum() + yc.numpy()[0].sum()))


def test_an_argument_of_another_layout_is_refused_not_misplaced():
    def step(x):
        x.unsqueeze_(0)
        return x.sum()
    f = tracec.compile(step, backend="interp")
    f(tracec.ones(3, 4))
    f(tracec.ones(3, 4))
    x = tracec.ones(4, 3).t()                   # (3, 4), transposed strides
    try:
        r = f(x)
    except RuntimeError as e:
        assert "cannot be replayed" in str(e)
    else:                                       # (or a retrace for the layout)
        assert r.item() == 12.0 and tuple(x.shape) == (1, 3, 4)
