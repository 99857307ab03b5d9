"""Gaps the models27 programs (tests/programs/models27) found in tracec,
each checked against torch 2.13."""
import numpy as np
import pytest

import tracec

pt = pytest.importorskip("torch")

LINSPACE_CASES = [(-2.0, 2.0, 11), (-10, 10, 51), (0.1, 0.9, 7), (-1, 1, 4), (3, -3, 10),
                  (0, 1, 5), (-3.3, 7.1, 100), (0.0, 1.0, 1000), (0.123, 5.7, 77), (1e-3, 1e3, 9),
                  (5.0, 5.0, 3), (-7.5, 2.25, 2), (4.0, 9.0, 1), (0, 1, 0)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32"])
def test_linspace_is_torchs_kernel_bit_for_bit(dtype):
    # Kaixhin/Rainbow's support = torch.linspace(V_min, V_max, atoms): torch's
    # CPU kernel computes the upper half from `end` backwards with fused
    # multiply-adds, so linspace(-2, 2, 11)[5] is -2**-25 (printed -0.0000),
    # and many points differ from NumPy's start + i * step in the last place.
    for a, b, n in LINSPACE_CASES:
        want = pt.linspace(a, b, n, dtype=getattr(pt, dtype))
        got = tracec.linspace(a, b, n, dtype=getattr(tracec, dtype))
        assert got.dtype is getattr(tracec, dtype)
        w = want.float().numpy() if dtype == "bfloat16" else want.numpy()
        g = got.float().numpy() if dtype == "bfloat16" else got.numpy()
        assert np.array_equal(np.signbit(w), np.signbit(g)) and np.array_equal(w, g), (a, b, n)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64"])
def test_linspace_with_tensor_ends_is_the_same_kernel(dtype):
    # tensor end points take the recorded (iota) form: it gave NumPy's
    # start + i * step, so eager results differed from the number-ends form
    for a, b, n in LINSPACE_CASES[:9]:
        want = pt.linspace(pt.tensor(a, dtype=pt.float64), pt.tensor(b), n, dtype=getattr(pt, dtype))
        got = tracec.linspace(tracec.tensor(a, dtype=tracec.float64), tracec.tensor(b), n,
                              dtype=getattr(tracec, dtype))
        w, g = want.double().numpy(), got.double().numpy()
        assert np.array_equal(np.signbit(w), np.signbit(g)) and np.array_equal(w, g), (a, b, n)


def test_linspace_with_a_symbolic_count_in_a_compiled_function():
    def pos(x):
        return tracec.linspace(-2.0, 2.0, x.shape[0]) + x
    c = tracec.compile(pos, dynamic=True)
    for n in (11, 51, 100):
        got, want = c(tracec.zeros(n)).numpy(), pt.linspace(-2.0, 2.0, n).numpy()
        assert np.array_equal(got, want), n


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "float16", "bfloat16"])
def test_logspace_follows_torchs_kernel(dtype):
    # logspace's exponents are the kernel's linspace (halves from both ends);
    # integer results truncate base ** e with the ends truncated first
    # (logspace(-2, 2, 11, dtype=int64)[5] is 1). tracec took NumPy's
    # linspace: float64 points and integer ones differed.
    # (float64: within an ulp; PyTorch's float64 pow is not always libm's)
    cases = [(-2, 2, 11), (0, 3, 7), (-10, 10, 51), (1, -1, 10), (0.5, 2.5, 33), (-3, 3, 100),
             (2, 5, 1), (1, 2, 0), (-1, 3, 2)]
    for a, b, n in cases:
        for base in (10.0, 2.0, 2.718281828, 0.5):
            want = pt.logspace(a, b, n, base=base, dtype=getattr(pt, dtype)).double().numpy()
            got = tracec.logspace(a, b, n, base=base, dtype=getattr(tracec, dtype)).double().numpy()
            if dtype == "float64":
                assert np.allclose(want, got, rtol=3e-16, atol=0), (a, b, n, base)
            else:
                assert np.array_equal(want, got), (a, b, n, base)


def test_linspace_default_dtype_and_midpoint_sign():
    assert tracec.linspace(-2, 2, 11)[5].item() == pt.linspace(-2, 2, 11)[5].item() == -2.0 ** -25
    assert tracec.linspace(-2, 2, 11).dtype is tracec.float32


def _probs():
    return [[0.1, 0.9, 0.0], [0.8, 0.1, 0.1], [0.2, 0.3, 0.5], [0.3, 0.3, 0.4]]


@pytest.mark.parametrize("k,dim,transpose", [(2, 1, False), (2, 0, False), (2, 1, True), (1, -1, False)])
def test_topk_results_are_fresh_contiguous_tensors(k, dim, transpose):
    # CutMix-PyTorch's accuracy: pred = output.topk(maxk, 1, True, True)[1].t();
    # correct = pred.eq(...); correct[:k].view(-1) fails in torch (the eq
    # follows pred's transposed strides (1, batch)). tracec's indices were a
    # slice of the full argsort, strides (1, n_classes), so the view's error
    # and the strides differed.
    x, tx = torch_pair(_probs())
    if transpose:
        x, tx = x.t(), tx.t()
    v, i = x.topk(k, dim)
    tv, ti = tx.topk(k, dim)
    assert v.stride() == tv.stride() and i.stride() == ti.stride()
    assert i.is_contiguous() and i.tolist() == ti.tolist()


def torch_pair(data):
    """(torch, tracec) tensors of the same data."""
    return pt.tensor(data), tracec.tensor(data)


def test_transposed_topk_eq_view_raises_like_torch():
    x, tx = torch_pair(_probs())
    target, ttarget = pt.tensor([1, 2, 2, 0]), tracec.tensor([1, 2, 2, 0])
    pred, tpred = x.topk(2, 1, True, True)[1].t(), tx.topk(2, 1, True, True)[1].t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    tcorrect = tpred.eq(ttarget.view(1, -1).expand_as(tpred))
    assert tcorrect.stride() == correct.stride() == (1, 2)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        correct[:2].view(-1)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        tcorrect[:2].view(-1)
    assert tcorrect[:1].view(-1).tolist() == correct[:1].view(-1).tolist()


def test_multinomial_without_replacement_is_contiguous():
    assert tracec.multinomial(tracec.ones(3, 5), 2).stride() == \
        pt.multinomial(pt.ones(3, 5), 2).stride() == (2, 1)


def _c51_fix(b):
    # Kaixhin/Rainbow agent.learn: fix disappearing probability mass
    l, u = b.floor().to(tracec.int64), b.ceil().to(tracec.int64)
    l[(u > 0) * (l == u)] -= 1
    u[(l < 3) * (l == u)] += 1
    return l, u


def _no_fallback(fn, *args):
    """fn compiled, called on each argument tuple, refusing any eager fallback."""
    import warnings
    c = tracec.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return [c(*a) for a in args]


def test_augmented_assignment_through_a_boolean_mask_compiles():
    # `l[mask] -= 1` reads l[mask] (a data-dependent size) then stores it
    # back; torch.compile(fullgraph=True) captures it. tracec refused the read
    # and ran Rainbow's whole learn step eagerly.
    calls = [(tracec.tensor([0.0, 1.0, 1.5, 2.0, 3.0]),), (tracec.tensor([0.0, 0.5, 0.75, 1.0, 1.5]),)]
    for (b,), got in zip(calls, _no_fallback(_c51_fix, *calls)):
        want = pt.tensor(b.tolist())
        wl, wu = want.floor().long(), want.ceil().long()
        wl[(wu > 0) * (wl == wu)] -= 1
        wu[(wl < 3) * (wl == wu)] += 1
        assert got[0].tolist() == wl.tolist() and got[1].tolist() == wu.tolist()
        assert got[0].dtype is tracec.int64


@pytest.mark.parametrize("op", ["+=", "*=", "/=", "-="])
def test_masked_augmented_assignment_rows_and_gradients(op):
    # a mask over the leading dim, a per-row operand, gradients through it
    def step(lib, w, x, v):
        y = w * 2.0
        if op == "+=":
            y[x.sum(1) > 0] += v
        elif op == "*=":
            y[x.sum(1) > 0] *= v
        elif op == "/=":
            y[x.sum(1) > 0] /= v
        else:
            y[x.sum(1) > 0] -= 0.5
        return (y * y).sum()

    r = np.random.default_rng(0)
    w0, x0, v0 = (r.normal(size=s).astype(np.float32) for s in ((5, 3), (5, 3), (3,)))
    tw = pt.tensor(w0, requires_grad=True)
    step(pt, tw, pt.tensor(x0), pt.tensor(v0)).backward()

    def fn(w, x, v):
        loss = step(tracec, w, x, v)
        loss.backward()
        return loss
    w = tracec.tensor(w0, requires_grad=True)
    (loss,) = _no_fallback(fn, (w, tracec.tensor(x0), tracec.tensor(v0)))
    assert np.allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5)


def test_masked_reads_other_than_augmented_assignment_still_refuse():
    def select_sum(x):
        y = x[x > 0]
        return y.sum()

    def elementwise_operand(x, v):
        x[x > 0] += v      # v combines with the selection element by element
        return x

    x = tracec.tensor([1.0, -2.0, 3.0])
    with pytest.raises(tracec.TraceError, match="boolean-mask indexing"):
        tracec.compile(select_sum)(x)
    with pytest.raises(tracec.TraceError, match="boolean-mask indexing"):
        tracec.compile(elementwise_operand)(x.clone(), tracec.tensor([10.0, 20.0]))
    with pytest.warns(UserWarning, match="boolean-mask indexing"):
        out = tracec.compile(elementwise_operand, fallback="eager")(x.clone(), tracec.tensor([10.0, 20.0]))
    assert out.tolist() == [11.0, -2.0, 23.0]


def test_masked_augmented_assignment_eager_and_dtype_errors_unchanged():
    x = tracec.tensor([1, 2, 3])
    x[x > 1] += 5
    assert x.tolist() == [1, 7, 8]

    def bad(x):
        x[x > 1] += 0.5     # int64 in place with a float: torch refuses
        return x
    with pytest.raises(RuntimeError, match="can't be cast"):
        pt_x = pt.tensor([1, 2, 3])
        pt_x[pt_x > 1] += 0.5
    with pytest.raises(RuntimeError, match="can't be cast"):
        tracec.compile(bad)(tracec.tensor([1, 2, 3]))


_NDARRAY_CALLS = {
    "pad": lambda F, T, img: F.pad(img, 2), "crop": lambda F, T, img: F.crop(img, 0, 0, 2, 2),
    "hflip": lambda F, T, img: F.hflip(img), "rotate": lambda F, T, img: F.rotate(img, 10.0),
    "adjust_hue": lambda F, T, img: F.adjust_hue(img, 0.1),
    "resize": lambda F, T, img: F.resize(img, [3, 3]),
    "center_crop": lambda F, T, img: F.center_crop(img, 3),
    "get_dimensions": lambda F, T, img: F.get_dimensions(img),
    "affine": lambda F, T, img: F.affine(img, 0.0, [0, 0], 1.0, [0.0]),
    "RandomCrop(padding=4)": lambda F, T, img: T.RandomCrop(4, padding=4)(img),
    "RandomCrop": lambda F, T, img: T.RandomCrop(3)(img),
    "RandomHorizontalFlip": lambda F, T, img: T.RandomHorizontalFlip(1.0)(img),
    "RandomResizedCrop": lambda F, T, img: T.RandomResizedCrop(3)(img),
    "gaussian_blur": lambda F, T, img: F.gaussian_blur(img, 3),
}


@pytest.mark.parametrize("name", list(_NDARRAY_CALLS))
def test_transforms_refuse_a_numpy_image_in_torchvisions_words(name):
    # a script that feeds numpy HWC images straight to RandomCrop /
    # RandomHorizontalFlip (without ToTensor or Image.fromarray first) gets
    # torchvision's TypeError: "img should be PIL Image. Got ..." from its PIL
    # backend, or "Unexpected type ..." where the size is read first. tracec
    # said "img should be PIL Image or Tensor" everywhere.
    from vision_oracle import optional
    tv, _ = optional()
    if tv is None:
        pytest.skip("torchvision (the test oracle) is not installed")
    import torchvision.transforms as RT
    import torchvision.transforms.functional as RF
    import tracec.vision.transforms as TT
    import tracec.vision.transforms.functional as TF
    img = np.zeros((6, 7, 3), np.uint8)
    with pytest.raises(TypeError) as want:
        _NDARRAY_CALLS[name](RF, RT, img)
    with pytest.raises(TypeError) as got:
        _NDARRAY_CALLS[name](TF, TT, img)
    assert str(got.value) == str(want.value)


def _same_error(fn):
    """fn(lib) raises the same exception type and message under torch and tracec."""
    with pytest.raises(Exception) as want:
        fn(pt)
    with pytest.raises(Exception) as got:
        fn(tracec)
    assert (type(got.value).__name__, str(got.value).split("\n")[0]) == \
        (type(want.value).__name__, str(want.value).split("\n")[0])


_INDEX_ERRORS = {
    # index_add_ (Rainbow's projection, SchNet's aggregation) and its kin
    # refuse bad input each in its own words; tracec said one thing for all
    "add oob": lambda m: m.zeros(6, 2).index_add_(0, m.tensor([0, 7]), m.ones(2, 2)),
    "add oob 1-d": lambda m: m.zeros(6).index_add_(0, m.tensor([0, 7]), m.ones(2)),
    "add float index": lambda m: m.zeros(6, 2).index_add_(0, m.tensor([0., 1.]), m.ones(2, 2)),
    "add count": lambda m: m.zeros(6, 2).index_add_(0, m.tensor([0, 1, 2]), m.ones(2, 2)),
    "add count dim 1": lambda m: m.zeros(6, 2).index_add_(1, m.tensor([0, 1, 1]), m.ones(6, 2)),
    "add shape": lambda m: m.zeros(6, 2).index_add_(0, m.tensor([0, 1]), m.ones(2, 3)),
    "add 2-d index": lambda m: m.zeros(6, 2).index_add_(0, m.tensor([[0, 1]]), m.ones(2, 2)),
    "add dtype": lambda m: m.zeros(6).index_add_(0, m.tensor([0, 1]), m.ones(2).double()),
    "copy oob": lambda m: m.zeros(6, 2).index_copy_(0, m.tensor([0, 7]), m.ones(2, 2)),
    "copy float index": lambda m: m.zeros(6, 2).index_copy_(0, m.tensor([0., 1.]), m.ones(2, 2)),
    "copy int32 index": lambda m: m.zeros(6, 2).index_copy_(0, m.tensor([0, 1], dtype=m.int32),
                                                             m.ones(2, 2)),
    "copy count": lambda m: m.zeros(6, 2).index_copy_(0, m.tensor([0, 1, 2]), m.ones(2, 2)),
    "copy slice": lambda m: m.zeros(6, 2, 3).index_copy_(1, m.tensor([0, 1]), m.ones(5, 2, 3)),
    "copy rank": lambda m: m.zeros(6, 2).index_copy_(0, m.tensor([0, 1]), m.ones(2)),
    "copy 2-d index": lambda m: m.zeros(6, 2).index_copy_(0, m.tensor([[0, 1]]), m.ones(2, 2)),
    "copy dtype": lambda m: m.zeros(6).index_copy_(0, m.tensor([0, 1]), m.ones(2).double()),
    "fill float index": lambda m: m.zeros(6, 2).index_fill_(0, m.tensor([0., 1.]), 1.0),
    "fill 2-d index": lambda m: m.zeros(6).index_fill_(0, m.tensor([[0, 1]]), 1.0),
    "fill oob": lambda m: m.zeros(6, 2).index_fill_(0, m.tensor([0, 9]), 1.0),
    # NoisyLinear's epsilon_out.ger(epsilon_in) and its kin
    "ger self": lambda m: m.ones(2, 2).ger(m.ones(2)),
    "ger vec2": lambda m: m.ones(2).ger(m.ones(2, 2)),
    "outer self": lambda m: m.outer(m.ones(2, 2), m.ones(2)),
    "outer vec2": lambda m: m.outer(m.ones(2), m.ones(2, 2)),
    "dot rank": lambda m: m.dot(m.ones(2, 2), m.ones(2)),
    "dot size": lambda m: m.dot(m.ones(2), m.ones(3)),
    "dot dtype": lambda m: m.dot(m.ones(2), m.ones(2).double()),
}


@pytest.mark.parametrize("case", list(_INDEX_ERRORS))
def test_index_ops_and_products_refuse_bad_input_as_torch(case):
    _same_error(_INDEX_ERRORS[case])


def test_index_add_valid_forms_unchanged():
    for lib in (pt, tracec):
        m = lib.zeros(6)
        m.view(-1).index_add_(0, lib.tensor([1, 1, 2], dtype=lib.int32), lib.tensor([0.5, 0.25, 1.0]),
                              alpha=2)
        assert m.tolist() == [0.0, 1.5, 2.0, 0.0, 0.0, 0.0]
    assert tracec.zeros(()).index_add_(0, tracec.tensor([0]), tracec.tensor(2.)).item() == 2.0
    assert tracec.outer(tracec.ones(2), tracec.ones(3).double()).dtype is tracec.float64


def test_weighted_random_sampler_weights_are_a_float64_tensor():
    # torch keeps `weights` as torch.as_tensor(weights, dtype=torch.double);
    # scripts read it (sampler.weights.sum()) or replace it between epochs.
    from tracec.utils.data import WeightedRandomSampler
    s = WeightedRandomSampler([1, 0, 3], 4)
    ref = pt.utils.data.WeightedRandomSampler([1, 0, 3], 4)
    assert isinstance(s.weights, tracec.Tensor) and s.weights.dtype is tracec.float64
    assert s.weights.tolist() == ref.weights.tolist() and ref.weights.dtype is pt.float64
    s.weights = tracec.tensor([0.0, 5.0, 0.0], dtype=tracec.float64)
    assert list(s) == [1, 1, 1, 1]


def test_masked_copy_between_tensors_compiles():
    # `out[m] = src[m]` (torch.compile(fullgraph=True) captures it): the read
    # of src[m] is the statement's value, stored by the same mask
    def copy(x, y):
        m = y > 0
        x[m] = y[m]
        return x

    calls = [(tracec.zeros(4), tracec.tensor([1., -1, 2, -2])),
             (tracec.zeros(4), tracec.tensor([-1., 1, -2, 2]))]
    got = _no_fallback(copy, *calls)
    assert [g.tolist() for g in got] == [[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 0.0, 2.0]]

    class Keep(tracec.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", tracec.zeros(3, 2))

        def forward(self, y):
            m = y[:, 0] > 0
            self.buf[m] = y[m]
            return self.buf * 1

    k = Keep()
    (out,) = _no_fallback(k, (tracec.tensor([[1., 2], [-1, 3], [4, 5]]),))
    assert out.tolist() == k.buf.tolist() == [[1.0, 2.0], [0.0, 0.0], [4.0, 5.0]]


def test_masked_copy_gradients_and_refusals():
    def fn(w, x):
        y = w * 3.0
        out = x.clone()
        m = x < 0
        out[m] = y[m]
        loss = (out * out).sum()
        loss.backward()
        return loss

    r = np.random.default_rng(1)
    w0, x0 = r.normal(size=(4, 3)).astype(np.float32), r.normal(size=(4, 3)).astype(np.float32)
    tw = pt.tensor(w0, requires_grad=True)
    tx = pt.tensor(x0)
    o = tx.clone()
    o[tx < 0] = (tw * 3.0)[tx < 0]
    (o * o).sum().backward()
    w = tracec.tensor(w0, requires_grad=True)
    _no_fallback(fn, (w, tracec.tensor(x0)))
    assert np.allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-6)

    def other_key(x, y):
        x[x > 0] = y[y > 0]      # another mask: sizes may differ, data-dependent
        return x

    def other_dtype(x, y):
        m = y > 0
        x[m] = y[m]              # torch: index_put_ requires matching dtypes
        return x
    with pytest.raises(tracec.TraceError, match="boolean-mask indexing"):
        tracec.compile(other_key)(tracec.tensor([1., -1]), tracec.tensor([2., -2]))
    with pytest.raises(tracec.TraceError, match="boolean-mask indexing"):
        tracec.compile(other_dtype)(tracec.zeros(2, dtype=tracec.int64), tracec.tensor([2., -2]))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_linspace_of_a_symbolic_count_is_one_trace_and_the_eager_bits(dtype):
    """The kernel-exact linspace keeps a symbolic count symbolic (float() of
    steps - 1 specialized the trace on each size)."""
    d = getattr(tracec, dtype)
    f = tracec.compile(lambda x: tracec.linspace(-2, 3, x.shape[0], dtype=d) + x.to(d) * 0,
                       dynamic=True)
    for n in (5, 7, 11, 2):
        got = f(tracec.zeros(n))
        assert bool((got == tracec.linspace(-2, 3, n, dtype=d)).all()), n
    assert f.cache_info().traces == 1
