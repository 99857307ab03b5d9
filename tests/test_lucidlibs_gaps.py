"""Gaps that lucidrains' packages (``tests/programs/lucidlibs``: vit-pytorch,
x-transformers, ...) found in tracec, each checked against torch without
the packages: softmax / log_softmax / layer_norm give contiguous results
whatever the input's strides, so a dropout mask drawn over the result
follows PyTorch's element order (vit_pytorch's CaiT mixes heads with
``einsum('b h i j, h g -> b g i j')`` before its softmax and dropout)."""
import numpy as np
import pytest
import torch

import tracec


def _permuted(lib):
    lib.manual_seed(0)
    x = lib.randn(2, 3, 4, 5)
    mix = lib.randn(3, 3)
    return lib.einsum("b h i j, h g -> b g i j", x, mix)     # strides (60, 1, 15, 3)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "softmax1", "layer_norm"])
def test_normalizations_of_a_permuted_input_are_contiguous(op):
    outs = []
    for lib in (torch, tracec):
        y = _permuted(lib).requires_grad_()
        f = {"softmax": lambda t: t.softmax(-1), "log_softmax": lambda t: t.log_softmax(-1),
             "softmax1": lambda t: lib.nn.Softmax(dim=1)(t),
             "layer_norm": lambda t: lib.nn.functional.layer_norm(t, (5,))}[op]
        z = f(y)
        lib.manual_seed(1)
        d = lib.nn.functional.dropout(z, 0.5)          # the mask follows z's layout
        d.sum().backward()
        outs.append((z.stride(), z.is_contiguous(), d.detach().numpy(), y.grad.numpy()))
    (s0, c0, d0, g0), (s1, c1, d1, g1) = outs
    assert (s1, c1) == (s0, c0) == ((60, 20, 5, 1), True)
    np.testing.assert_allclose(d1, d0, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g1, g0, rtol=1e-5, atol=1e-6)


def _layouts():
    """(shape, permutation) pairs: 4-d tensors with sizes of one in various
    places, seen through permutations of a row-major array (every third
    pair of all 144: each shape meets 8 of the 24 orders)."""
    import itertools
    shapes = [(2, 3, 4, 5), (1, 3, 4, 5), (1, 8, 1, 5), (2, 1, 4, 1), (1, 3, 1, 1), (2, 3, 1, 1)]
    pairs = [(s, p) for s in shapes for p in itertools.permutations(range(4))]
    return pairs[::3]


def test_convolution_result_layout_follows_torchs_suggested_memory_format():
    """A Conv2d's result is channels-last exactly when PyTorch's
    ``suggest_memory_format`` says its input is, with torch's exact strides:
    that test counts the strides of size-one dimensions (vit_pytorch's
    ScalableViT feeds a batch of one rearranged ``b h (x y) d -> b (h d) x y``
    to a Conv2d, which torch does not take for channels-last, and a dropout
    mask follows the layout)."""
    bad = []
    for shape, perm in _layouts():
        inv = tuple(perm.index(i) for i in range(4))
        strides = []
        for lib in (torch, tracec):
            base = lib.arange(float(np.prod(shape))).reshape(tuple(shape[i] for i in perm))
            x = base.permute(*inv)                       # shape `shape`, permuted strides
            y = lib.nn.Conv2d(shape[1], 2, 1)(x)
            z = lib.nn.Conv2d(2, 2, 1)(y)                # reads y's size-one strides
            strides.append((y.stride(), z.stride()))
        if strides[0] != strides[1]:
            bad.append((shape, perm, strides))
    assert not bad, bad[:5]


def test_scalable_vit_rearranged_batch_of_one_dropout():
    outs = []
    for lib in (torch, tracec):
        lib.manual_seed(0)
        q = lib.randn(1, 1, 256, 8)
        x = q.permute(0, 1, 3, 2).reshape(1, 8, 16, 16)          # strides (2048, 1, 128, 8)
        conv = lib.nn.Conv2d(8, 8, 1)
        lib.manual_seed(1)
        y = lib.nn.functional.dropout(conv(x), 0.5)
        outs.append((y.stride(), y.detach().numpy()))
    assert outs[0][0] == outs[1][0] == (2048, 256, 16, 1)
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("transposed", [False, True])
def test_convolution_refuses_too_few_or_indivisible_weight_channels(transposed):
    """A convolution whose weight's first dimension has fewer than
    ``groups`` (zero) channels, or a number not divisible by ``groups``,
    raises PyTorch's error (vit_pytorch's CrossFormer, with a stage
    dimension its cross-embed layer splits into zero channels), not a
    reshape's, before the channels are compared."""
    for first, other, g in [(0, 8, 1), (2, 2, 4), (6, 2, 4), (0, 3, 2)]:
        msgs = []
        for lib in (torch, tracec):
            f = lib.nn.functional
            w = lib.zeros(first, other, 1, 1)
            x = lib.randn(1, first if transposed else other * g + 1, 4, 4)
            with pytest.raises(RuntimeError) as e:
                (f.conv_transpose2d if transposed else f.conv2d)(x, w, groups=g)
            msgs.append(str(e.value).splitlines()[0])
        assert msgs[1] == msgs[0], (first, other, g, msgs)


DIFFERENTIABLE_COLLECTIVES = """
import torch
import torch.distributed as dist
import torch.distributed.nn as dnn
from torch.distributed.nn import all_gather, all_reduce, broadcast   # LFQ's import

x = torch.arange(6.).reshape(2, 3).requires_grad_()
w = torch.arange(6.).reshape(2, 3)
y = dnn.all_reduce(x * 2)
print(y.detach(), type(y.grad_fn).__name__)
(y * w).sum().backward()
print(x.grad)
x.grad = None
b = broadcast(x * 3, 0)
(b ** 2).sum().backward()
print(b.detach(), x.grad)
x.grad = None
g = all_gather(x + 1)
(g[0] * w).sum().backward()
print(type(g).__name__, len(g), g[0].detach(), x.grad)
print(all_reduce(x, op=dist.ReduceOp.MAX).detach())
"""


def test_differentiable_collectives_in_a_world_of_one(tmp_path):
    """``torch.distributed.nn``'s all_reduce / broadcast / all_gather
    (vector-quantize-pytorch's LFQ imports the module): new tensors with
    gradients, as torch's on a world of one."""
    import contextlib
    import io
    import warnings

    from program_runner import run_cli
    from test_public_programs_tutorials2 import ENV

    buf = io.StringIO()
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0,
                                         world_size=1)
    try:
        with contextlib.redirect_stdout(buf), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(DIFFERENTIABLE_COLLECTIVES, {"__name__": "__main__"})
    finally:
        torch.distributed.destroy_process_group()
    script = tmp_path / "collectives.py"
    script.write_text(DIFFERENTIABLE_COLLECTIVES.replace(
        "import torch.distributed.nn as dnn\n",
        "import torch.distributed.nn as dnn\ndist.init_process_group('mpi')\n"))
    r = run_cli(["run", str(script)], tmp_path, ENV, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == buf.getvalue(), (r.stdout, buf.getvalue())


ROW_MAJOR_RESULTS = {
    "sum": lambda lib, t: t.sum(0),
    "mean": lambda lib, t: t.mean(0),
    "amax": lambda lib, t: t.amax(0),
    "std": lambda lib, t: t.std(0),
    "argmax": lambda lib, t: t.argmax(0),
    "masked_fill": lambda lib, t: t.masked_fill(t > 0, 0.),
    "cumsum": lambda lib, t: t.cumsum(1),
    "cumprod": lambda lib, t: t.cumprod(-1),
    "rms_norm": lambda lib, t: lib.nn.functional.rms_norm(t, (3,)),
    "instance_norm": lambda lib, t: lib.nn.functional.instance_norm(t),
}


@pytest.mark.parametrize("op", list(ROW_MAJOR_RESULTS))
def test_results_pytorch_allocates_row_major_view_as_torchs(op):
    """Reductions, masked_fill, cumsum / cumprod, rms_norm and instance_norm of a
    transposed tensor are contiguous, as PyTorch allocates them, so a
    ``view`` of the result works as under torch (x-transformers-style
    ``masked_fill(...).view(...)`` after a ``transpose``)."""
    outs = []
    for lib in (torch, tracec):
        x = lib.from_numpy(np.random.default_rng(0).standard_normal((2, 3, 4))
                           .astype(np.float32)).transpose(1, 2)
        y = ROW_MAJOR_RESULTS[op](lib, x)
        outs.append((y.stride(), y.is_contiguous(), y.view(-1).numpy()))
    assert outs[1][:2] == outs[0][:2]
    np.testing.assert_allclose(outs[1][2], outs[0][2], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,key,value", [
    ((10, 16), slice(None, 5), (5, 8)),         # rotary-embedding-torch's freqs cache
    ((10, 16), slice(None, 5), (1, 5, 8)),      # leading ones dropped first
    ((10, 16), slice(None, 5), (2, 5, 16)),
    ((10, 16), (slice(None, 5), 0), (5, 2)),
    ((10, 16), 3, (8,)),
    ((10, 16), (Ellipsis, slice(1, 3)), (10, 3)),
    ((10, 16), [1, 2], (2, 8)),                 # advanced: index_put_'s message
])
def test_setitem_of_a_wrong_shape_raises_torchs_error(shape, key, value):
    """``x[basic index] = value`` of a value that does not broadcast raises
    PyTorch's error: it copies into the view (``copy_``, so ``expand``'s
    message, the tensor's type and sizes named when it has too many
    dimensions); an advanced index keeps index_put_'s "shape mismatch"."""
    msgs = []
    for lib in (torch, tracec):
        k = lib.tensor(key) if isinstance(key, list) else key
        with pytest.raises(RuntimeError) as e:
            lib.zeros(*shape)[k] = lib.zeros(*value)
        msgs.append(str(e.value).splitlines()[0])
    assert msgs[1] == msgs[0]


def test_expand_to_fewer_dimensions_names_the_tensor():
    msgs = []
    for lib in (torch, tracec):
        for x in (lib.zeros(3, 5, 8), lib.zeros(2, 3, dtype=lib.int64)):
            with pytest.raises(RuntimeError) as e:
                x.expand(5, 16) if x.ndim == 3 else x.expand(3)
            msgs.append(str(e.value))
    assert msgs[2:] == msgs[:2]


@pytest.mark.parametrize("shapes", [((3, 1, 4), (1, 5, 2)), ((2, 3), (4, 3)),
                                    ((2, 1), (1, 3), (4, 3)), ((3, 1), (1, 2), (1, 3))])
def test_broadcast_tensors_refuses_as_torch(shapes):
    """``broadcast_tensors`` of shapes that do not broadcast raises the
    binary ops' sentence, the shapes met pairwise (rotary-embedding-torch's
    ``broadcat``), not ``broadcast_shapes``' own message."""
    msgs = []
    for lib in (torch, tracec):
        with pytest.raises(RuntimeError) as e:
            lib.broadcast_tensors(*[lib.zeros(*s) for s in shapes])
        msgs.append(str(e.value).splitlines()[0])
    assert msgs[1] == msgs[0]


CHANNELS_LAST_KEPT = {
    "nearest": lambda F, x: F.interpolate(x, scale_factor=2),
    "bilinear": lambda F, x: F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True),
    "bicubic": lambda F, x: F.interpolate(x, scale_factor=2, mode="bicubic"),
    "area": lambda F, x: F.interpolate(x, size=(2, 2), mode="area"),
    "adaptive_avg": lambda F, x: F.adaptive_avg_pool2d(x, 3),
    "pixel_shuffle": lambda F, x: F.pixel_shuffle(F.pad(x, (0, 0, 0, 0, 0, 1)), 2),
    "pad": lambda F, x: F.pad(x, (1, 1, 1, 1)),
    "pad_reflect": lambda F, x: F.pad(x, (1, 2, 1, 0), mode="reflect"),
}


@pytest.mark.parametrize("op", list(CHANNELS_LAST_KEPT))
def test_resampling_and_padding_keep_channels_last(op):
    """interpolate (every mode), adaptive average pooling, pixel_shuffle
    and pad lay a channels-last input's result out channels-last, as
    PyTorch's kernels do (a UNet's upsampling under channels_last; the next
    convolution and a dropout mask follow the layout)."""
    outs = []
    for lib in (torch, tracec):
        x = lib.from_numpy(np.random.default_rng(0).standard_normal((2, 3, 4, 4))
                           .astype(np.float32)).to(memory_format=lib.channels_last)
        y = CHANNELS_LAST_KEPT[op](lib.nn.functional, x)
        outs.append((y.stride(), y.contiguous().numpy()))
    assert outs[1][0] == outs[0][0]
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-5, atol=1e-6)
