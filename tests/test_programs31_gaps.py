"""What programs31 found missing, against PyTorch 2.13:

* ``F.scaled_dot_product_attention``'s output layout.  PyTorch's CPU flash
  kernel (4-D inputs, unit last strides, no dropout, flash enabled)
  allocates its output in the query's memory layout, so the SDPA
  tutorial's ``y.transpose(1, 2).view(B, -1, H * E)`` (a query that is a
  projection ``view``-ed into heads and transposed) works; tracec returned
  a contiguous output and that ``view`` raised.  The math kernel (dropout,
  3-D inputs, ``sdpa_kernel(SDPBackend.MATH)``, a non-unit last stride)
  still gives a contiguous result, as PyTorch's does.  Under
  ``sdpa_kernel(SDPBackend.FLASH_ATTENTION)`` a call the flash kernel does
  not take (dropout, 3-D / 5-D inputs, a 3-D mask, a non-unit last stride)
  ran the math composite; PyTorch raises "No available kernel".
* ``torch.library`` custom ops (the "Python Custom Operators" tutorial):
  ``ctx.needs_input_grad`` in a registered ``setup_context`` / ``backward``
  held the op Function's own three leading arguments first, so the
  tutorial's ``grad * y if ctx.needs_input_grad[0] else None`` dropped
  every gradient (``x.grad`` None: silently wrong); ``opcheck`` passed a
  fake kernel whose strides differ from the real one's (PyTorch's
  ``test_faketensor`` fails it), and failed an op that only mutates and
  returns nothing for want of a fake kernel (PyTorch generates it).
* ``number * t`` / ``number + t`` (the autograd tutorial's ``c = 2 * b``):
  PyTorch's ``__rmul__`` / ``__radd__`` are ``self.mul(other)`` /
  ``self.add(other)``, so ``grad_fn.next_functions`` lists the tensor's
  edge first; ``number - t`` and ``number ** t`` (``rsub`` /
  ``pow(Scalar, Tensor)``) have the tensor as their node's only input.
  tracec listed ``(None, 0)`` first, or two edges.
* An integer or bool result (``(x * 4).long()``, ``.int()``, ``.to(int32)``)
  required grad and had a ``ToCopyBackward0`` in tracec; in PyTorch it never
  requires grad (no gradient flowed through it in tracec either).
* ``SummaryWriter.add_image`` / ``add_images`` (the TensorBoard recipe)
  raised NotImplementedError; they now write PyTorch's image summary."""
from typing import Sequence

import numpy as np
import pytest
import torch

import tracec

B, H, L, E = 2, 4, 6, 8
# physical orders of the logical (B, H, L, E) dims
LAYOUTS = {"BHLE": (0, 1, 2, 3), "BLHE": (0, 2, 1, 3), "HBLE": (1, 0, 2, 3),
           "LBHE": (2, 0, 1, 3), "BHEL": (0, 1, 3, 2)}


def _laid_out(lib, arr, perm):
    """``arr`` (B, H, L, E) as a ``lib`` tensor stored in the order ``perm``."""
    inv = [perm.index(d) for d in range(4)]
    return lib.tensor(np.ascontiguousarray(arr.transpose(perm))).permute(*inv)


def _inputs(perm, seed=0):
    rng = np.random.RandomState(seed)
    return [rng.randn(B, H, L, E).astype(np.float32) for _ in range(3)]


@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"dropout_p": 0.0, "scale": 0.3},
                                {"math": True}], ids=["plain", "causal", "scale", "math"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_sdpa_output_follows_query_layout(layout, kw):
    perm, arrays = LAYOUTS[layout], _inputs(LAYOUTS[layout])
    kw = dict(kw)
    math = kw.pop("math", False)
    outs = []
    for lib in (torch, tracec):
        q, k, v = (_laid_out(lib, a, perm) for a in arrays)
        if math:
            with lib.nn.attention.sdpa_kernel(lib.nn.attention.SDPBackend.MATH):
                o = lib.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
        else:
            o = lib.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
        outs.append(o)
    want, got = outs
    assert got.stride() == want.stride()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_sdpa_dropout_and_3d_stay_contiguous():
    q, k, v = (_laid_out(tracec, a, LAYOUTS["BLHE"]) for a in _inputs(None))
    F = tracec.nn.functional
    assert F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).is_contiguous()
    q3 = tracec.rand(B, E, L).transpose(1, 2)
    assert F.scaled_dot_product_attention(q3, q3, q3).is_contiguous()


def _heads_attention(lib, w_attn, w_proj, x):
    """The SDPA tutorial's CausalSelfAttention.forward, functional."""
    F = lib.nn.functional
    qkv = F.linear(x, w_attn)
    b, t, c3 = qkv.shape
    hd = c3 // (H * 3)
    q, k, v = (s.view(b, -1, H, hd).transpose(1, 2) for s in qkv.chunk(3, -1))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(y.transpose(1, 2).view(b, -1, H * hd), w_proj)


@pytest.fixture(scope="module")
def heads_compiled():
    return tracec.compile(lambda w1, w2, x: _heads_attention(tracec, w1, w2, x).square().mean())


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_sdpa_tutorial_heads_view_matches_torch(compiled, heads_compiled):
    rng = np.random.RandomState(1)
    arrays = [rng.randn(3 * H * 4, H * 4).astype(np.float32) * 0.3,
              rng.randn(H * 4, H * 4).astype(np.float32) * 0.3,
              rng.randn(B, L, H * 4).astype(np.float32)]
    tw = [torch.tensor(a, requires_grad=True) for a in arrays]
    _heads_attention(torch, *tw).square().mean().backward()
    rw = [tracec.tensor(a, requires_grad=True) for a in arrays]
    f = heads_compiled if compiled else (lambda *a: _heads_attention(tracec, *a).square().mean())
    loss = f(*rw)
    loss.backward()
    want = _heads_attention(torch, *[t.detach() for t in tw]).square().mean()
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5)
    for t, r in zip(tw, rw):
        np.testing.assert_allclose(r.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-6)


def _mm3(lib, tag):
    """An op ``x * y * k`` over (Tensor, float, Tensor, int list) recording
    the ``needs_input_grad`` its setup_context and backward see."""
    seen = []

    @lib.library.custom_op(f"p31gaps_{tag}::mm3", mutates_args=())
    def mm3(x: lib.Tensor, k: float, y: lib.Tensor, box: Sequence[int]) -> lib.Tensor:
        return lib.from_numpy(x.numpy(force=True) * y.numpy(force=True) * k)

    def setup_context(ctx, inputs, output):
        seen.append(ctx.needs_input_grad)
        ctx.save_for_backward(inputs[0], inputs[2])
        ctx.k = inputs[1]

    def backward(ctx, grad):
        seen.append(ctx.needs_input_grad)
        x, y = ctx.saved_tensors
        return (grad * y * ctx.k if ctx.needs_input_grad[0] else None, None,
                grad * x * ctx.k if ctx.needs_input_grad[2] else None, None)

    mm3.register_autograd(backward, setup_context=setup_context)
    return mm3, seen


@pytest.mark.parametrize("which", [(True, False), (False, True), (True, True)])
def test_custom_op_needs_input_grad_is_per_op_input(which):
    rng = np.random.RandomState(2)
    a, b = rng.randn(3).astype(np.float32), rng.randn(3).astype(np.float32)
    res = []
    for lib in (torch, tracec):
        op, seen = _mm3(lib, f"{lib.__name__}_{which[0]}_{which[1]}")
        x = lib.tensor(a, requires_grad=which[0])
        y = lib.tensor(b, requires_grad=which[1])
        op(x, 2.0, y, (1, 2)).sum().backward()
        res.append((seen, [None if t.grad is None else t.grad.numpy() for t in (x, y)]))
    (want_seen, want_g), (got_seen, got_g) = res
    assert got_seen == want_seen
    for w, g in zip(want_g, got_g):
        assert (w is None) == (g is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-6)


def _crop_op(lib, tag, permuted_kernel):
    @lib.library.custom_op(f"p31gaps_{tag}::crop", mutates_args=())
    def crop(pic: lib.Tensor, box: Sequence[int]) -> lib.Tensor:
        x0, y0, x1, y1 = box
        if permuted_kernel:
            hwc = np.ascontiguousarray(pic.numpy().transpose(1, 2, 0)[y0:y1, x0:x1])
            return lib.from_numpy(hwc).permute(2, 0, 1)
        return lib.from_numpy(np.ascontiguousarray(pic.numpy()[:, y0:y1, x0:x1]))

    @crop.register_fake
    def _(pic, box):
        x0, y0, x1, y1 = box
        return pic.new_empty(y1 - y0, x1 - x0, pic.shape[0]).permute(2, 0, 1)
    return crop


@pytest.mark.parametrize("permuted_kernel", [True, False], ids=["same", "mismatch"])
def test_opcheck_compares_fake_strides(permuted_kernel):
    outcome = []
    for lib in (torch, tracec):
        op = _crop_op(lib, f"{lib.__name__}_{permuted_kernel}", permuted_kernel)
        try:
            lib.library.opcheck(op, [lib.randn(3, 8, 10), (2, 2, 6, 5)])
            outcome.append("ok")
        except Exception as e:
            outcome.append(str(e))
    want, got = outcome
    assert (want == "ok") == permuted_kernel
    if not permuted_kernel:
        assert "Stride mismatch! Strides are (12, 4, 1) and (1, 12, 3) (mismatched at 0)!" in want
    tail = want[want.index("Stride mismatch"):] if "Stride" in want else want
    assert tail in got


def test_opcheck_mutating_op_needs_no_fake():
    """(an op returning nothing without mutating is still refused, as by PyTorch)"""
    for lib in (torch, tracec):
        @lib.library.custom_op(f"p31gaps_{lib.__name__}::nsin", mutates_args={"output"},
                               device_types="cpu")
        def nsin(input: lib.Tensor, output: lib.Tensor) -> None:
            np.sin(input.numpy(), out=output.numpy())

        @lib.library.custom_op(f"p31gaps_{lib.__name__}::noop", mutates_args=())
        def noop(input: lib.Tensor) -> None:
            pass
        for example in ([lib.randn(3), lib.empty(3)], [lib.randn(0, 3), lib.empty(0, 3)]):
            assert lib.library.opcheck(nsin, example)["test_faketensor"] == "SUCCESS"
        with pytest.raises(Exception, match="There was no fake impl registered"):
            lib.library.opcheck(noop, [lib.randn(3)])


REFLECTED = {"radd": lambda b: 2 + b, "rmul": lambda b: 2 * b, "rmul_float": lambda b: 2.5 * b,
             "rsub": lambda b: 2 - b, "rdiv": lambda b: 2 / b, "rpow": lambda b: 2 ** b,
             "rsub_int_tensor": lambda b: 3 - (b * 4).long().float()}


def _edges_names(grad_fn):
    return [(None if n is None else type(n).__name__, i) for n, i in grad_fn.next_functions]


@pytest.mark.parametrize("name", list(REFLECTED))
def test_reflected_operators_next_functions(name):
    got = []
    for lib in (torch, tracec):
        b = lib.tensor([0.3, 0.5, 0.9], requires_grad=True).sin()
        out = REFLECTED[name](b)
        g = out.grad_fn
        got.append((type(g).__name__ if g is not None else None,
                    _edges_names(g) if g is not None else None, out.detach().numpy()))
        if g is not None:
            out.sum().backward()
    (tn, te, tv), (rn, re_, rv) = got
    assert (rn, re_) == (tn, te)
    np.testing.assert_allclose(rv, tv, rtol=1e-6)


def test_reflected_operators_gradients():
    """(the edges changed, not the gradients: 2 * b + 3 - b ** 2 ...)"""
    grads = []
    for lib in (torch, tracec):
        a = lib.tensor([0.3, 0.5, 0.9], requires_grad=True)
        b = a.sin()
        ((2 * b) + (1 + b) * (3 - b) + 2 ** b + 2.5 / b).sum().backward()
        grads.append(a.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5)


INT_RESULTS = {"long": lambda b: (b * 4).long(), "to_int32": lambda b: (b * 4).to(torch_or(b).int32),
               "floor_int": lambda b: b.floor().int(), "round_long": lambda b: (b * 4).round().long(),
               "bool": lambda b: b.bool(), "rsub_of_cast": lambda b: 3 - (b * 4).long().float()}


def torch_or(t):
    return torch if isinstance(t, torch.Tensor) else tracec


@pytest.mark.parametrize("name", list(INT_RESULTS))
def test_integer_results_do_not_require_grad(name):
    seen = []
    for lib in (torch, tracec):
        b = lib.tensor([0.3, 0.5, 1.9], requires_grad=True)
        out = INT_RESULTS[name](b)
        seen.append((out.requires_grad, out.grad_fn is None, str(out.dtype).split(".")[-1]))
    assert seen[1] == seen[0]


IMAGES = {"CHW_float": ((3, 5, 7), "CHW", np.float32), "HWC_uint8": ((5, 7, 3), "HWC", np.uint8),
          "CHW_one_channel": ((1, 4, 6), "CHW", np.float32), "HW": ((4, 6), "HW", np.float64),
          "NCHW_grid": ((10, 1, 3, 4), "NCHW", np.float32), "NHWC": ((3, 4, 5, 3), "NHWC", np.float32)}


@pytest.mark.parametrize("name", list(IMAGES))
def test_tensorboard_image_summary_matches_torch(name):
    """SummaryWriter.add_image / add_images raised NotImplementedError: the
    image summary, PyTorch's pixels and PNG, for every data format."""
    pytest.importorskip("tensorboard")
    pytest.importorskip("PIL")
    from torch.utils.tensorboard.summary import image as torch_image
    from tracec.utils.tensorboard.images import image
    shape, fmt, dtype = IMAGES[name]
    rng = np.random.RandomState(3)
    a = (rng.rand(*shape) * (255 if dtype == np.uint8 else 1.2) - (0 if dtype == np.uint8 else 0.1)).astype(dtype)
    want = torch_image("img", torch.from_numpy(a), dataformats=fmt)
    got = image("img", tracec.from_numpy(a).numpy(), dataformats=fmt)
    assert got == want


def test_tensorboard_add_image_reads_back(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tracec.utils.tensorboard import SummaryWriter
    with SummaryWriter(str(tmp_path)) as w:
        w.add_image("grid", tracec.rand(3, 8, 12), 0)
        w.add_images("batch", tracec.rand(4, 1, 5, 5), 1)
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert sorted(acc.Tags()["images"]) == ["batch", "grid"]
    assert (acc.Images("grid")[0].width, acc.Images("grid")[0].height) == (12, 8)
    assert (acc.Images("batch")[0].width, acc.Images("batch")[0].height, acc.Images("batch")[0].step) == (20, 5, 1)


def _flash_case(lib, name):
    q = lib.tensor(np.random.RandomState(4).rand(2, 4, 6, 8).astype(np.float32))
    return {"ok": (q, q, q, {}),
            "stride": (q.transpose(-1, -2).contiguous().transpose(-1, -2), q, q, {}),
            "dropout": (q, q, q, {"dropout_p": 0.3}), "3d": (q[0], q[0], q[0], {}),
            "mask3d": (q, q, q, {"attn_mask": lib.ones(4, 6, 6, dtype=lib.bool)}),
            "mask4d": (q, q, q, {"attn_mask": lib.ones(2, 4, 6, 6, dtype=lib.bool)}),
            "5d": (q[None], q[None], q[None], {})}[name]


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", ["ok", "stride", "dropout", "3d", "mask3d", "mask4d", "5d"])
def test_forced_flash_refuses_what_flash_cannot_run(name):
    res = []
    for lib in (torch, tracec):
        q, k, v, kw = _flash_case(lib, name)
        try:
            with lib.nn.attention.sdpa_kernel(lib.nn.attention.SDPBackend.FLASH_ATTENTION):
                out = lib.nn.functional.scaled_dot_product_attention(q, k, v, **kw)
            res.append(("ok", out.shape if "dropout_p" in kw else out.detach().numpy()))
        except RuntimeError as e:
            res.append(("error", str(e)))
    (tk, tv), (rk, rv) = res
    assert rk == tk
    if tk == "error":
        assert rv == tv == "No available kernel.  Aborting execution."
    elif not isinstance(tv, torch.Size):
        np.testing.assert_allclose(rv, tv, rtol=1e-5, atol=1e-6)
