"""Gaps the public programs of ``tests/programs/models3`` found, each
against torch: ``Tensor.to_sparse`` (GAT's feature scaling), the factory
keywords ``size=``, ``out=``, ``layout=``, ``pin_memory=`` and ``empty``'s
``memory_format=`` (GAT's ``torch.empty(size=...)``)."""
import numpy as np
import pytest
import torch

import tracec


def _err(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type and message are compared
        return type(e), str(e)
    return None


def test_to_sparse_dense_stand_in_matches_torch():
    a = np.arange(12, dtype=np.float32).reshape(3, 4) * (np.arange(12).reshape(3, 4) % 3 == 0)
    x, t = tracec.tensor(a), torch.tensor(a)
    got = x.to_sparse()
    assert got is not x
    np.testing.assert_array_equal(got.to_dense().numpy(), t.to_sparse().to_dense().numpy())
    np.testing.assert_array_equal(x.to_sparse(1).numpy(), t.to_sparse(1).to_dense().numpy())
    np.testing.assert_array_equal(x.to_sparse_coo().numpy(), t.to_sparse_coo().to_dense().numpy())
    np.testing.assert_array_equal(x.to_sparse(layout=tracec.sparse_coo).numpy(), a)
    # GAT's feature scaling: diag(1 / row sums).to_sparse() @ features
    f = np.random.default_rng(0).integers(0, 2, (5, 6)).astype(np.float32)
    s = 1 / torch.tensor(f).sum(1)
    s[s == float("inf")] = 0
    s2 = 1 / tracec.tensor(f).sum(1)
    s2[s2 == float("inf")] = 0
    np.testing.assert_allclose((tracec.diag(s2).to_sparse() @ tracec.tensor(f)).numpy(),
                               (torch.diag(s).to_sparse() @ torch.tensor(f)).numpy(), rtol=1e-6)
    for d in (3, -1):
        assert _err(lambda: x.to_sparse(d)) == _err(lambda: t.to_sparse(d))


def test_to_sparse_keeps_the_gradient():
    x = tracec.tensor([[1.0, 0.0], [0.0, 2.0]], requires_grad=True)
    (x.to_sparse() * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 3.0, np.float32))


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_size_keyword(name):
    for lib in (tracec, torch):
        f = getattr(lib, name)
        assert tuple(f(size=(2, 3)).shape) == (2, 3)
        assert tuple(f(size=[4]).shape) == (4,)
        assert f(size=(1, 2), dtype=lib.float64).dtype == lib.float64
    assert _err(lambda: getattr(tracec, name)(2, size=(2,)))[0] is TypeError
    assert _err(lambda: getattr(torch, name)(2, size=(2,)))[0] is TypeError


def test_full_and_randint_size_keyword():
    assert tracec.full(size=(2,), fill_value=1.5).tolist() == \
        torch.full(size=(2,), fill_value=1.5).tolist()
    assert tuple(tracec.randint(0, 5, size=(3,)).shape) == (3,)
    assert _err(lambda: tracec.arange(3, size=(2,)))[0] is TypeError


@pytest.mark.parametrize("call", [
    lambda L, o: L.zeros(2, 3, out=o), lambda L, o: L.ones((3,), out=o),
    lambda L, o: L.full((2, 2), 7.0, out=o), lambda L, o: L.arange(1, 7, 2, out=o),
    lambda L, o: L.eye(3, out=o), lambda L, o: L.linspace(0, 1, 5, out=o),
])
def test_factory_out_keyword(call):
    import warnings
    for lib in (tracec, torch):
        o = lib.empty(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = call(lib, o)
        assert r is o
    np.testing.assert_array_equal(call(tracec, tracec.empty(0)).numpy(),
                                  call(torch, torch.empty(0)).numpy())


def test_factory_layout_pin_memory_memory_format():
    for lib in (tracec, torch):
        assert lib.zeros(2, layout=lib.strided, pin_memory=False).tolist() == [0.0, 0.0]
        assert lib.full((2,), 1.5, layout=lib.strided).tolist() == [1.5, 1.5]
        assert lib.arange(3, layout=lib.strided, pin_memory=False).tolist() == [0, 1, 2]
        e = lib.empty(2, 3, 4, 5, memory_format=lib.channels_last)
        assert e.stride() == (60, 1, 15, 3)
        assert e.is_contiguous(memory_format=lib.channels_last)
        assert lib.empty(2, 3, memory_format=lib.contiguous_format).is_contiguous()
    for name in ("zeros", "ones", "rand"):
        assert _err(lambda: getattr(tracec, name)(2, memory_format=tracec.contiguous_format))[0] \
            is _err(lambda: getattr(torch, name)(2, memory_format=torch.contiguous_format))[0] \
            is TypeError
    with pytest.raises(NotImplementedError):
        tracec.zeros(2, layout=tracec.sparse_coo)
    r = tracec.empty(1, 2, 2, 2, memory_format=tracec.channels_last, requires_grad=True)
    assert r.requires_grad and r.is_leaf


def test_deepcopy_refuses_a_non_leaf_like_torch():
    import copy
    for lib in (tracec, torch):
        x = lib.ones(2, requires_grad=True)
        assert copy.deepcopy(x).requires_grad
        assert not copy.deepcopy((x * 2).detach()).requires_grad
        with lib.no_grad():
            assert not copy.deepcopy(x * 2).requires_grad
    got = _err(lambda: copy.deepcopy(tracec.ones(2, requires_grad=True) * 2))
    assert got == _err(lambda: copy.deepcopy(torch.ones(2, requires_grad=True) * 2))
    # the old-style weight_norm's module holds such a tensor (locuslab TCN's blocks)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = tracec.nn.utils.weight_norm(tracec.nn.Conv1d(2, 3, 2))
    assert _err(lambda: copy.deepcopy(m)) == got
    tracec.nn.utils.remove_weight_norm(m)
    assert copy.deepcopy(m).weight.shape == (3, 2, 2)


@pytest.mark.parametrize("mode", ["data", "no_grad"])
def test_compiled_backward_to_a_leaf_given_a_new_value(mode):
    """PixelCNN's MaskedConv2d masks its weight in forward (``weight.data *=
    mask``) and backward follows: compiled, the gradient belongs to the
    weight's new value and stops there.  It used to crash (the value came from
    a stop_gradient, which has no VJP) or, with ``no_grad(): w.mul_(mask)``,
    give zeros from the second call on."""
    def run(lib, compiled):
        w = lib.nn.Parameter(lib.tensor([1.0, 2.0, 3.0]))
        mask = lib.tensor([1.0, 0.0, 1.0])
        opt = lib.optim.SGD([w], lr=0.1)

        def step(x):
            if mode == "data":
                w.data *= mask
            else:
                with lib.no_grad():
                    w.mul_(mask)
            loss = (w * w * x).sum()
            opt.zero_grad()
            loss.backward()
            grad = w.grad.clone()
            opt.step()
            return loss, grad

        fn = lib.compile(step) if compiled else step
        x = lib.tensor([1.0, 2.0, 3.0])
        out = []
        for _ in range(3):
            loss, grad = fn(x)
            out.append((loss.item(), grad.tolist(), w.tolist()))
        return out

    want = run(torch, False)
    for got in (run(tracec, False), run(tracec, True)):
        for g, w in zip(got, want):
            for a, b in zip(g, w):
                np.testing.assert_allclose(a, b, rtol=1e-6)


def test_compiled_boolean_mask_from_constants_is_a_fixed_gather():
    """SimCLR's info_nce_loss indexes the similarity matrix by masks built from
    constants only (``~torch.eye(n, dtype=torch.bool)``, labels from
    ``torch.arange``): the trace reads them like constants, so the step
    compiles (it used to run eagerly: 'boolean-mask indexing')."""
    import warnings

    def nce(lib, f):
        n = f.shape[0] // 2
        labels = lib.cat([lib.arange(n) for _ in range(2)], dim=0)
        labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
        f = lib.nn.functional.normalize(f, dim=1)
        sim = f @ f.T
        mask = lib.eye(labels.shape[0], dtype=lib.bool)
        labels = labels[~mask].view(labels.shape[0], -1)
        sim = sim[~mask].view(sim.shape[0], -1)
        pos = sim[labels.bool()].view(labels.shape[0], -1)
        neg = sim[~labels.bool()].view(sim.shape[0], -1)
        logits = lib.cat([pos, neg], dim=1) / 0.5
        return lib.nn.functional.cross_entropy(logits, lib.zeros(logits.shape[0], dtype=lib.long))

    rng = np.random.default_rng(0)
    comp = tracec.compile(lambda f: nce(tracec, f))
    for _ in range(3):
        a = rng.standard_normal((6, 4)).astype(np.float32)
        x = tracec.tensor(a, requires_grad=True)
        t = torch.tensor(a, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # no fallback to eager
            got = comp(x)
        want = nce(torch, t)
        got.backward()
        want.backward()
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert comp.cache_info().traces == 1


def test_compiled_boolean_mask_from_data_still_refused():
    def by_input(x):
        return x[x > 0].sum()

    def by_overwritten_constant(x):
        m = tracec.zeros(4, dtype=tracec.bool)
        m[0] = x[0] > 0           # a constant, then a traced value written into it
        return x[m].sum()

    def by_added_constant(x):
        m = tracec.zeros(4)
        m.add_(x)                  # in place by a traced value
        return x[m > 0].sum()

    for fn in (by_input, by_overwritten_constant, by_added_constant):
        with pytest.raises(tracec.TraceError, match="boolean-mask indexing"):
            tracec.compile(fn, fallback="error")(tracec.tensor([1.0, -2.0, 3.0, -4.0]))


def _actnorm_step(lib):
    class ActNorm(lib.nn.Module):   # rosinality/glow-pytorch's, data-dependent init
        def __init__(self, c):
            super().__init__()
            self.loc = lib.nn.Parameter(lib.zeros(1, c))
            self.scale = lib.nn.Parameter(lib.ones(1, c))
            self.register_buffer("initialized", lib.tensor(0, dtype=lib.uint8))

        def forward(self, x):
            if self.initialized.item() == 0:
                with lib.no_grad():
                    self.loc.data.copy_(-x.mean(0, keepdim=True))
                    self.scale.data.copy_(1 / (x.std(0, keepdim=True) + 1e-6))
                self.initialized.fill_(1)
            return self.scale * (x + self.loc)

    m = ActNorm(3)
    opt = lib.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        loss = m(x).pow(3).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return m, step


def test_compiled_read_of_a_state_flag_is_guarded():
    """Glow's ActNorm reads its ``initialized`` buffer with ``.item()``: the
    trace specializes on the value and guards it (it used to run eagerly);
    the call that flips the flag is followed by one retrace."""
    import warnings
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(4)]
    m_t, step_t = _actnorm_step(torch)
    want = [step_t(torch.tensor(x)).item() for x in xs]
    m, step = _actnorm_step(tracec)
    comp = tracec.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no fallback to eager
        got = [comp(tracec.tensor(x)).item() for x in xs]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(m.loc.detach().numpy(), m_t.loc.detach().numpy(), rtol=1e-5)
    info = comp.cache_info()
    assert info.traces == 2 and any("changed: 0 -> 1" in r for r in info.reasons), info.reasons
    assert int(m.initialized) == 1


def test_compiled_read_of_float_state_still_refused_an_int_argument_speculated():
    """A float's item() is refused (its number would be baked in); an
    integer argument's item() is a speculated read
    (tests/compile/test_speculated_decisions.py): calls with another value
    run eagerly, so both values give eager's results."""
    count = tracec.tensor(0.5)

    def by_float_state(x):
        return x * 2 if count.item() > 0 else x

    def by_argument(x, flag):
        return x * 2 if flag.item() else x

    x = tracec.ones(2)
    with pytest.raises(tracec.TraceError, match="item"):
        tracec.compile(by_float_state, fallback="error")(x)
    f = tracec.compile(by_argument, fallback="error")
    for v in (1, 1, 0, 1, 0):
        assert f(x, tracec.tensor(v)).tolist() == by_argument(x, tracec.tensor(v)).tolist()


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_interpolate_antialias_matches_torch(mode, align_corners):
    """``F.interpolate(..., antialias=True)`` (torchvision's Resize default on
    tensors): ATen's separable antialiased filters, values and gradients."""
    rng = np.random.default_rng(1)
    cases = [((8, 8), dict(size=(3, 5))), ((9, 7), dict(size=(4, 13))),
             ((10, 10), dict(scale_factor=0.37)), ((6, 6), dict(scale_factor=(0.5, 2.0))),
             ((5, 5), dict(size=(1, 1))), ((7, 9), dict(scale_factor=0.3, recompute_scale_factor=True))]
    for (h, w), kw in cases:
        a = rng.standard_normal((2, 3, h, w)).astype(np.float32)
        t = torch.tensor(a, requires_grad=True)
        x = tracec.tensor(a, requires_grad=True)
        yt = torch.nn.functional.interpolate(t, mode=mode, align_corners=align_corners,
                                             antialias=True, **kw)
        yx = tracec.nn.functional.interpolate(x, mode=mode, align_corners=align_corners,
                                              antialias=True, **kw)
        np.testing.assert_allclose(yx.detach().numpy(), yt.detach().numpy(), atol=1e-5)
        g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
        (yt * torch.tensor(g)).sum().backward()
        (yx * tracec.tensor(g)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=1e-5)
    assert yx.grad_fn.name() == yt.grad_fn.name()


def test_interpolate_antialias_compiled_and_errors():
    a = np.random.default_rng(2).standard_normal((1, 2, 9, 9)).astype(np.float32)
    f = tracec.compile(lambda x: tracec.nn.functional.interpolate(
        x, size=(4, 4), mode="bicubic", antialias=True))
    np.testing.assert_allclose(f(tracec.tensor(a)).numpy(), torch.nn.functional.interpolate(
        torch.tensor(a), size=(4, 4), mode="bicubic", antialias=True).numpy(), atol=1e-5)
    for mode, shape in (("nearest", (1, 1, 4, 4)), ("bilinear", (1, 1, 4)), ("area", (1, 1, 4, 4))):
        got = _err(lambda: tracec.nn.functional.interpolate(tracec.ones(*shape), size=2 if len(
            shape) == 3 else (2, 2), mode=mode, antialias=True))
        want = _err(lambda: torch.nn.functional.interpolate(torch.ones(*shape), size=2 if len(
            shape) == 3 else (2, 2), mode=mode, antialias=True))
        assert got == want


def test_clip_grad_norm_error_if_nonfinite_is_a_recorded_check():
    """``clip_grad_norm_(..., error_if_nonfinite=True)`` in a compiled step
    (Swin's and timm's loops pass it): the norm is checked by the compiled
    code at every call instead of stopping the trace."""
    def make(lib):
        m = lib.nn.Linear(3, 1)
        with lib.no_grad():
            m.weight.fill_(0.5)
            m.bias.fill_(0.0)
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            norm = lib.nn.utils.clip_grad_norm_(m.parameters(), 1.0, error_if_nonfinite=True)
            opt.step()
            return norm
        return step

    comp = tracec.compile(make(tracec), fallback="error")
    ref = make(torch)
    x = np.ones((2, 3), np.float32)
    for _ in range(2):
        np.testing.assert_allclose(comp(tracec.tensor(x)).item(), ref(torch.tensor(x)).item(),
                                   rtol=1e-6)
    bad = np.full((2, 3), np.inf, np.float32)
    got = _err(lambda: comp(tracec.tensor(bad)))
    want = _err(lambda: ref(torch.tensor(bad)))
    assert issubclass(got[0], RuntimeError) and want[0] is RuntimeError
    assert got[1].endswith(": " + want[1])   # compiled: prefixed with the user's line
    assert comp.cache_info().traces == 1


def _mlp(lib):
    m = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.ReLU(), lib.nn.Dropout(0.0),
                          lib.nn.Linear(8, 2))
    with lib.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(lib.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (i + 1))
    return m


def test_compiled_module_is_an_optimized_module_like_torch():
    """``model = torch.compile(model)`` then ``model.parameters()``,
    ``model.train()``, ``model.state_dict()`` (keys under ``_orig_mod.``),
    attribute reads and writes on the wrapped model: PyTorch's
    OptimizedModule (it was a bare compiled function)."""
    ref = torch.compile(_mlp(torch), backend="eager")   # Dynamo's wrapper, no Inductor
    m = _mlp(tracec)
    cm = tracec.compile(m)
    assert isinstance(cm, tracec.nn.Module) and type(cm).__name__ == type(ref).__name__
    assert cm._orig_mod is m
    assert list(cm.state_dict()) == list(ref.state_dict())
    assert [n for n, _ in cm.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert len(list(cm.parameters())) == 4
    cm.eval()
    assert not m.training and not cm.training
    cm.train()
    assert m.training and cm.training
    cm.note = "kept"          # attribute writes go to the wrapped module, as in torch
    ref.note = "kept"
    assert m.note == ref._orig_mod.note == "kept"
    opt = tracec.optim.SGD(cm.parameters(), lr=0.1)
    topt = torch.optim.SGD(ref.parameters(), lr=0.1)
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    for i in range(3):
        for mod, o, lib in ((cm, opt, tracec), (ref, topt, torch)):
            o.zero_grad()
            loss = lib.nn.functional.mse_loss(mod(lib.tensor(x) * (i + 1)), lib.zeros(3, 2))
            loss.backward()
            o.step()
    for (k, a), (_, b) in zip(cm.state_dict().items(), ref.state_dict().items()):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert cm.cache_info().traces == 1          # the compiled function's own methods
    fresh = tracec.compile(_mlp(tracec))
    fresh.load_state_dict(cm.state_dict())
    np.testing.assert_allclose(fresh(tracec.tensor(x)).detach().numpy(),
                               cm(tracec.tensor(x)).detach().numpy())


def test_module_compile_method_compiles_in_place():
    m, ref = _mlp(tracec), _mlp(torch)
    keys = list(m.state_dict())
    assert m.compile() is None and ref.compile(backend="eager") is None
    assert list(m.state_dict()) == keys == list(ref.state_dict())
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    for _ in range(2):
        np.testing.assert_allclose(m(tracec.tensor(x)).detach().numpy(),
                                   ref(torch.tensor(x)).detach().numpy(), rtol=1e-6)
    assert m.__dict__["_compiled_call_impl"].cache_info().hits >= 1


def test_dynamo_and_inductor_config_flags_are_accepted():
    tracec._inductor.config.coordinate_descent_tuning = True
    tracec._inductor.config.triton.unique_kernel_names = True
    tracec._inductor.config.fx_graph_cache = True
    assert tracec._inductor.config.coordinate_descent_tuning is True
    for lib in (tracec, torch):
        with pytest.raises(AttributeError):
            lib._inductor.config.no_such_flag_at_all
    f = lambda x: x + 1  # noqa: E731
    assert tracec._dynamo.allow_in_graph(f) is f
