"""torch.library: custom_op (eager, torch.ops.<ns>.<name>, register_fake,
register_autograd, opcheck, infer_schema), Library.define/impl and
torch.library.impl, eager and under tracec.compile, against torch 2.13."""
import warnings
from typing import Optional, Sequence

import numpy as np
import pytest
import torch

import tracec


def define_numpy_sin(T, ns):
    """The PyTorch tutorial's op: a NumPy body with a registered backward."""
    @T.library.custom_op(f"{ns}::numpy_sin", mutates_args=())
    def numpy_sin(x: T.Tensor, scale: float = 1.0) -> T.Tensor:
        return T.from_numpy(np.sin(x.numpy()) * scale)

    @numpy_sin.register_fake
    def _(x, scale=1.0):
        return T.empty_like(x)

    def setup_context(ctx, inputs, output):
        x, scale = inputs
        ctx.save_for_backward(x)
        ctx.scale = scale

    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x.cos() * ctx.scale, None
    numpy_sin.register_autograd(backward, setup_context=setup_context)
    return numpy_sin


@pytest.mark.parametrize("T", [torch, tracec], ids=["torch", "tracec"])
def test_custom_op_eager_matches_torch(T):
    ns = f"tl_eager_{T.__name__}"
    op = define_numpy_sin(T, ns)
    assert repr(op) == f"<CustomOpDef({ns}::numpy_sin)>"
    assert repr(getattr(T.ops, ns).numpy_sin) == f"<OpOverloadPacket(op='{ns}.numpy_sin')>"
    assert str(getattr(T.ops, ns).numpy_sin.default) == f"{ns}.numpy_sin.default"
    assert repr(getattr(T.ops, ns)) == f"<module 'torch.ops.{ns}' from 'torch.ops'>"
    xv = np.linspace(-2, 2, 5, dtype=np.float32)
    x = T.tensor(xv, requires_grad=True)
    y = getattr(T.ops, ns).numpy_sin(x, 2.0)
    assert type(y.grad_fn).__name__ == f"GeneratedBackwardFor_{ns}_numpy_sin_defaultBackward"
    np.testing.assert_allclose(y.detach().numpy(), np.sin(xv) * 2, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos(xv), rtol=1e-6)
    assert op(T.tensor(xv)).requires_grad is False
    assert T.library.opcheck(op, (T.tensor(xv),)) == {
        "test_schema": "SUCCESS", "test_autograd_registration": "SUCCESS",
        "test_faketensor": "SUCCESS", "test_aot_dispatch_dynamic": "SUCCESS"}


@pytest.mark.parametrize("T", [torch, tracec], ids=["torch", "tracec"])
def test_custom_op_errors_match_torch(T):
    ns = f"tl_err_{T.__name__}"

    @T.library.custom_op(f"{ns}::noautograd", mutates_args=())
    def noautograd(x: T.Tensor) -> T.Tensor:
        return x * 2
    y = noautograd(T.ones(2, requires_grad=True))
    assert y.requires_grad
    with pytest.raises(RuntimeError, match=f"Trying to backward through {ns}.noautograd.default "
                                           "but no autograd formula was registered"):
        y.sum().backward()
    with pytest.raises(ValueError, match="Parameter x must have a type annotation"):
        T.library.custom_op(f"{ns}::f", lambda x: x, mutates_args=())

    @T.library.custom_op(f"{ns}::ident", mutates_args=())
    def ident(x: T.Tensor) -> T.Tensor:
        return x
    with pytest.raises(RuntimeError, match="must not also be an input to this custom operator"):
        ident(T.ones(1))

    def g(x: T.Tensor) -> None:
        pass
    with pytest.raises(ValueError, match="in mutates_args were not found"):
        T.library.custom_op(f"{ns}::g", g, mutates_args=("q",))

    @T.library.custom_op(f"{ns}::add_one_", mutates_args=("x",))
    def add_one_(x: T.Tensor) -> None:
        x.add_(1)
    a = T.zeros(2)
    assert add_one_(a) is None and a.tolist() == [1.0, 1.0]


def schemas(T):
    def f(x: T.Tensor, y: Optional[T.Tensor], z: Sequence[T.Tensor], a: int, b: float,
          c: bool, d: str, e: Optional[int] = None, *, k: float = 2.0,
          dd: T.dtype = None) -> tuple[T.Tensor, T.Tensor]:
        pass

    def f4(x: T.Tensor, s: Optional[float] = 1.5, t: str = "hi", u: bool = True) -> int:
        pass

    def f2(x: T.Tensor) -> None:
        pass
    return [T.library.infer_schema(f, mutates_args=("x",)),
            T.library.infer_schema(f4, mutates_args=()),
            T.library.infer_schema(f2, mutates_args="unknown")]


def test_infer_schema_matches_torch():
    got = schemas(tracec)
    assert got == schemas(torch)
    assert got[0].startswith("(Tensor(a0!) x, Tensor? y, Tensor[] z, SymInt a")


def test_custom_op_under_compile_numpy_body_runs_eagerly_and_says_why():
    op = define_numpy_sin(tracec, "tl_compile_np")
    w = tracec.nn.Parameter(tracec.tensor([0.5, -1.0, 2.0]))

    def step(x):
        w.grad = None
        loss = tracec.ops.tl_compile_np.numpy_sin(x * w, 3.0).sum()
        loss.backward()
        return loss
    f = tracec.compile(step)
    tw = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        for xv in ([1.0, 2.0, 3.0], [0.1, -0.2, 0.3]):
            loss = f(tracec.tensor(xv))
            tw.grad = None
            want = (torch.sin(torch.tensor(xv) * tw) * 3).sum()
            want.backward()
            np.testing.assert_allclose(float(loss), want.item(), rtol=1e-6)
            np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-6)
    info = f.cache_info()
    assert info.traces == 0 and info.eager_signatures == 1
    assert "custom op tl_compile_np::numpy_sin computes in Python on tensor data" in \
        info.eager_reasons[0]
    assert sum("running eagerly" in str(x.message) for x in ws) == 1
    del op


def test_custom_op_with_tensor_body_compiles_with_its_registered_backward():
    @tracec.library.custom_op("tl_compile_t::scaled_tanh", mutates_args=())
    def scaled_tanh(x: tracec.Tensor, s: float) -> tracec.Tensor:
        return tracec.tanh(x) * s

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.s = inputs[1]

    def backward(ctx, g):
        # deliberately not the true derivative: the registered formula wins
        out, = ctx.saved_tensors
        return g * (ctx.s - out * out / ctx.s) * 2, None
    scaled_tanh.register_autograd(backward, setup_context=setup_context)

    @torch.library.custom_op("tl_compile_t::scaled_tanh", mutates_args=())
    def t_scaled_tanh(x: torch.Tensor, s: float) -> torch.Tensor:
        return torch.tanh(x) * s
    t_scaled_tanh.register_autograd(backward, setup_context=setup_context)

    model = tracec.nn.Linear(3, 2)
    tmodel = torch.nn.Linear(3, 2)
    tmodel.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})

    @tracec.compile
    def step(x):
        model.zero_grad()
        loss = tracec.ops.tl_compile_t.scaled_tanh(model(x), 1.5).pow(2).sum()
        loss.backward()
        return loss
    for seed in range(3):
        xv = np.random.default_rng(seed).standard_normal((4, 3)).astype(np.float32)
        loss = step(tracec.tensor(xv))
        tmodel.zero_grad()
        want = torch.ops.tl_compile_t.scaled_tanh(tmodel(torch.tensor(xv)), 1.5).pow(2).sum()
        want.backward()
        np.testing.assert_allclose(float(loss), want.item(), rtol=1e-5)
        np.testing.assert_allclose(model.weight.grad.numpy(), tmodel.weight.grad.numpy(),
                                   rtol=1e-5, atol=1e-6)
    info = step.cache_info()
    assert info.traces == 1 and info.hits == 2 and info.eager_signatures == 0


@pytest.mark.parametrize("T", [torch, tracec], ids=["torch", "tracec"])
def test_library_define_impl(T):
    ns = f"tl_lib_{T.__name__}"
    lib = T.library.Library(ns, "DEF")
    assert lib.define("mul2(Tensor x, float s=2.0) -> Tensor") == "mul2"
    lib.impl("mul2", lambda x, s=2.0: x * s, "CompositeExplicitAutograd")
    ops = getattr(T.ops, ns)
    assert ops.mul2(T.ones(2)).tolist() == [2.0, 2.0]
    assert ops.mul2(T.ones(2), s=3.0).tolist() == [3.0, 3.0]
    assert str(ops.mul2.default._schema).startswith(f"{ns}::mul2(Tensor x, float s=2")
    with pytest.raises(RuntimeError, match="Only a single TORCH_LIBRARY"):
        T.library.Library(ns, "DEF")
    frag = T.library.Library(ns, "FRAGMENT")
    frag.define("cube(Tensor x) -> Tensor")

    @T.library.impl(f"{ns}::cube", "CompositeImplicitAutograd", lib=frag)
    def cube(x):
        return x * x * x
    x = T.tensor([1.0, 2.0], requires_grad=True)
    ops.cube(x).sum().backward()
    assert x.grad.tolist() == [3.0, 12.0]


def test_opcheck_reports_what_is_wrong():
    @tracec.library.custom_op("tl_opcheck::double", mutates_args=())
    def double(x: tracec.Tensor) -> tracec.Tensor:
        return x * 2
    # no fake: test_faketensor fails, with PyTorch's message
    res = tracec.library.opcheck(double, (tracec.ones(3),), raise_exception=False)
    assert res["test_schema"] == "SUCCESS" and res["test_aot_dispatch_dynamic"] == "SUCCESS"
    assert "no fake impl registered" in str(res["test_faketensor"])
    tracec.library.register_fake("tl_opcheck::double", lambda x: x.new_empty(x.shape[0] + 1))
    with pytest.raises(Exception, match="test_faketensor failed"):
        tracec.library.opcheck(double, (tracec.ones(3),))
    tracec.library.register_fake("tl_opcheck::double", lambda x: tracec.empty_like(x))
    # an input that requires grad with no autograd formula
    res = tracec.library.opcheck(double, (tracec.ones(3, requires_grad=True),),
                                 raise_exception=False)
    assert "no autograd formula" in str(res["test_autograd_registration"])
    tracec.library.register_autograd("tl_opcheck::double", lambda ctx, g: g * 2)
    assert set(tracec.library.opcheck(double, (tracec.ones(3, requires_grad=True),)).values()) \
        == {"SUCCESS"}

    @tracec.library.custom_op("tl_opcheck::sneaky", mutates_args=())
    def sneaky(x: tracec.Tensor) -> tracec.Tensor:
        x.add_(1)          # writes an input the schema does not mark as mutated
        return x * 1
    res = tracec.library.opcheck(sneaky, (tracec.ones(2),), test_utils="test_schema",
                                 raise_exception=False)
    assert "is not defined as mutable but was mutated" in str(res["test_schema"])


def test_library_op_compiles():
    lib = tracec.library.Library("tl_lib_compile", "DEF")
    lib.define("axpy(Tensor x, Tensor y, *, float a=2.0) -> Tensor")
    lib.impl("axpy", lambda x, y, *, a=2.0: a * x + y, "CPU")
    f = tracec.compile(lambda x, y: tracec.ops.tl_lib_compile.axpy(x, y, a=3.0))
    for n in range(2):
        x, y = tracec.arange(3.0) + n, tracec.ones(3)
        assert f(x, y).tolist() == (3 * x + y).tolist()
    assert f.cache_info().traces == 1 and f.cache_info().hits == 1


@pytest.mark.parametrize("kind", ["custom_op", "Function"])
def test_backward_outside_a_compiled_call_uses_the_registered_formula(kind):
    """A compiled forward whose result's gradient goes through the user's
    backward (a custom op's registered formula, an autograd.Function) with
    backward() called outside: the user's backward, recorded beside the
    forward (``tracec.custom_vjp``), is the compiled backward's gradient
    (differentiating the recorded forward would give sin's true gradient,
    as it once did); the signature is compiled, not run eagerly."""
    if kind == "custom_op":
        @tracec.library.custom_op("tl_outside::sin2", mutates_args=())
        def op(x: tracec.Tensor) -> tracec.Tensor:
            return tracec.sin(x)
        op.register_autograd(lambda ctx, g: g * 2 * ctx.x.cos(),
                             setup_context=lambda ctx, inputs, out: setattr(ctx, "x", inputs[0]))
    else:
        class Sin2(tracec.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return tracec.sin(x)

            @staticmethod
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return g * 2 * x.cos()
        op = Sin2.apply
    w = tracec.nn.Parameter(tracec.tensor([0.3, -1.2, 2.0]))
    f = tracec.compile(lambda x: op(x * w).sum())
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        for xv in ([1.0, 2.0, 3.0], [0.5, 0.25, -1.0], [2.0, 1.0, 0.0]):
            w.grad = None
            x = tracec.tensor(xv)
            f(x).backward()
            np.testing.assert_allclose(w.grad.numpy(), (2 * x * (x * w).cos()).detach().numpy(),
                                       rtol=1e-6)
    info = f.cache_info()
    assert info.traces == 1 and info.eager_signatures == 0 and info.hits == 2, info


@pytest.mark.parametrize("T", [torch, tracec], ids=["torch", "tracec"])
def test_tuple_outputs_kernels_and_device_types(T):
    ns = f"tl_multi_{T.__name__}"

    @T.library.custom_op(f"{ns}::sincos", mutates_args=(), device_types="cpu")
    def sincos(x: T.Tensor) -> tuple[T.Tensor, T.Tensor]:
        a = x.numpy()
        return T.from_numpy(np.sin(a)), T.from_numpy(np.cos(a))

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, gs, gc):
        x, = ctx.saved_tensors
        return gs * x.cos() - gc * x.sin()
    sincos.register_autograd(backward, setup_context=setup_context)
    x = T.tensor([0.1, 0.7, -1.3], requires_grad=True)
    s, c = getattr(T.ops, ns).sincos(x)
    (s * 2 + c * 3).sum().backward()
    xv = np.array([0.1, 0.7, -1.3], dtype=np.float32)
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos(xv) - 3 * np.sin(xv), rtol=1e-6)

    @T.library.custom_op(f"{ns}::twice", mutates_args=())
    def twice(x: T.Tensor) -> T.Tensor:
        return x * 2

    @twice.register_kernel("cpu")
    def _(x):
        return x * 20               # the cpu kernel wins over the default body
    assert twice(T.ones(2)).tolist() == [20.0, 20.0]
