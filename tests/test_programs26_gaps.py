"""What programs26 found missing, against PyTorch 2.13:

* products of two dtypes: PyTorch's matmul family does not promote
  (``gmm-torch``'s float32 ``mm`` of a float64 precision matrix raises
  there), so tracec refuses them too, in the words of the ATen op each
  calls (dot, addmv, mm, bmm; addmm, baddbmm, addbmm, tensordot, inner,
  multi_dot, linear);
* a result PyTorch's node saves (``ReluBackward0``, ``SoftmaxBackward0``,
  ``LogSoftmaxBackward0``) changed in place before the backward: PyTorch
  raises (AlexNet's ``nn.Dropout(inplace=True)`` after ``nn.ReLU()``), tracec
  went through with another gradient;
* ``x.data.new().resize_as_(y).normal_()`` (ProdLDA's noise) inside a
  compiled function;
* an in-place ReLU on a non-reentrant checkpoint's output inside a compiled
  function (checkpoint_sequential's last segment)."""
import numpy as np
import pytest
import torch

import tracec

F32, F64 = np.float32, np.float64


def _outcome(fn, lib):
    try:
        r = fn(lib)
    except Exception as e:      # noqa: BLE001 - the outcome compared is the error itself
        return type(e).__name__, str(e).split("\n")[0]
    return "ok", str(r.dtype).split(".")[-1]


def _same_outcome(fn):
    a, b = _outcome(fn, torch), _outcome(fn, tracec)
    assert a == b
    return a


SHAPES = {1: (3,), 2: (2, 3), 3: (2, 2, 3)}
RIGHT = {1: (3,), 2: (3, 2), 3: (2, 3, 2), 4: (1, 2, 3, 2)}


@pytest.mark.parametrize("ra,rb", [(1, 1), (1, 2), (2, 1), (2, 2), (3, 2), (2, 3), (3, 3),
                                   (3, 1), (1, 3), (3, 4)])
@pytest.mark.parametrize("da,db", [("float32", "float64"), ("float64", "float32"),
                                   ("float32", "int64"), ("complex64", "float32")])
def test_matmul_of_two_dtypes_raises_as_torch(ra, rb, da, db):
    def fn(lib):
        a = lib.ones(SHAPES[ra], dtype=getattr(lib, da))
        return a @ lib.ones(RIGHT[rb], dtype=getattr(lib, db))
    kind, _ = _same_outcome(fn)
    assert kind == "RuntimeError"


@pytest.mark.parametrize("case", [
    lambda lib: lib.ones(2, 3).mm(lib.ones(3, 2, dtype=lib.float64)),
    lambda lib: lib.addmm(lib.ones(2, 2, dtype=lib.float64), lib.ones(2, 3), lib.ones(3, 2)),
    lambda lib: lib.addmm(lib.ones(2, 2), lib.ones(2, 3), lib.ones(3, 2, dtype=lib.float64)),
    lambda lib: lib.addmm(lib.ones(2, 2), lib.ones(2, 3, dtype=lib.float64), lib.ones(3, 2)),
    lambda lib: lib.baddbmm(lib.ones(1, 2, 2, dtype=lib.float64), lib.ones(1, 2, 3), lib.ones(1, 3, 2)),
    lambda lib: lib.baddbmm(lib.ones(1, 2, 2), lib.ones(1, 2, 3), lib.ones(1, 3, 2, dtype=lib.float64)),
    lambda lib: lib.baddbmm(lib.ones(1, 2, 2, dtype=lib.int32), lib.ones(1, 2, 3), lib.ones(1, 3, 2)),
    lambda lib: lib.addbmm(lib.ones(2, 2), lib.ones(1, 2, 3), lib.ones(1, 3, 2, dtype=lib.float64)),
    lambda lib: lib.addmv(lib.ones(2), lib.ones(2, 3), lib.ones(3, dtype=lib.float64)),
    lambda lib: lib.mv(lib.ones(2, 3, dtype=lib.float64), lib.ones(3)),
    lambda lib: lib.dot(lib.ones(3), lib.ones(3, dtype=lib.float64)),
    lambda lib: lib.bmm(lib.ones(1, 2, 3), lib.ones(1, 3, 2, dtype=lib.float64)),
    lambda lib: lib.tensordot(lib.ones(2, 3, dtype=lib.float64), lib.ones(3, 2), 1),
    lambda lib: lib.inner(lib.ones(2, 3, dtype=lib.float64), lib.ones(2, 3)),
    lambda lib: lib.linalg.multi_dot([lib.ones(2, 3), lib.ones(3, 2, dtype=lib.float64)]),
    lambda lib: lib.linalg.multi_dot([lib.ones(2, 3), lib.ones(3, 2), lib.ones(2, 2, dtype=lib.float16)]),
    lambda lib: lib.nn.functional.linear(lib.ones(2, 3, dtype=lib.float64), lib.ones(4, 3)),
    lambda lib: lib.nn.functional.linear(lib.ones(2, 3), lib.ones(4, 3), lib.ones(4, dtype=lib.float64)),
    lambda lib: lib.ones(5, 2, 3) @ lib.ones(3, 2, dtype=lib.float64),
])
def test_product_ops_of_two_dtypes_raise_as_torch(case):
    kind, _ = _same_outcome(case)
    assert kind == "RuntimeError"


@pytest.mark.parametrize("case", [
    lambda lib: lib.ones(2, 3, dtype=lib.float64) @ lib.ones(3, 2, dtype=lib.float64),
    lambda lib: lib.ones(2, 3, dtype=lib.int64) @ lib.ones(3, 2, dtype=lib.int64),
    lambda lib: lib.outer(lib.ones(2), lib.ones(3, dtype=lib.float64)),
    lambda lib: lib.addr(lib.ones(2, 3), lib.ones(2), lib.ones(3, dtype=lib.float64)),
    lambda lib: lib.ones(2, 3) * lib.ones(2, 3, dtype=lib.float64),
])
def test_promoting_products_still_promote(case):
    kind, dtype = _same_outcome(case)
    assert kind == "ok"


def test_matmul_under_autocast_casts_before_checking():
    def fn(lib):
        with lib.autocast("cpu", dtype=lib.bfloat16):
            return lib.ones(2, 3) @ lib.ones(3, 2, dtype=lib.bfloat16)
    assert _same_outcome(fn) == ("ok", "bfloat16")


def test_gmm_mixed_precision_step_raises_as_torch():
    """gmm-torch's calculate_matmul_n_times on float32 points and float64
    precision matrices (its initial covariances are float64)."""
    def fn(lib):
        x_mu_t = lib.ones(5, 3, 1, 2)
        precision = lib.inverse(lib.eye(2, dtype=lib.float64).reshape(1, 1, 2, 2).repeat(1, 3, 1, 1))
        return x_mu_t[:, 0, :, :].squeeze(-2).mm(precision[0, 0, :, :].squeeze())
    assert _same_outcome(fn)[1].startswith("expected m1 and m2 to have the same dtype")


# --- results saved for backward -------------------------------------------------------------

INPLACE_AFTER = {
    "relu_dropout": lambda lib, x: lib.nn.functional.dropout(lib.nn.functional.relu(x), 0.5, True,
                                                             inplace=True),
    "relu_mul_": lambda lib, x: lib.relu(x).mul_(2),
    "relu_method": lambda lib, x: x.relu().add_(1),
    "relu_inplace_then_mul_": lambda lib, x: lib.nn.functional.relu(x * 1, inplace=True).mul_(2),
    "relu_relu_": lambda lib, x: lib.nn.functional.relu(lib.nn.functional.relu(x), inplace=True),
    "module_relu_dropout": lambda lib, x: lib.nn.Sequential(
        lib.nn.ReLU(), lib.nn.Dropout(0.5, inplace=True), lib.nn.Linear(4, 2))(x),
    "softmax": lambda lib, x: lib.nn.functional.softmax(x, -1).mul_(2),
    "softmax_dim0": lambda lib, x: x.softmax(0).mul_(2),
    "log_softmax": lambda lib, x: lib.nn.functional.log_softmax(x, -1).mul_(2),
    "log_softmax_f64": lambda lib, x: x.double().log_softmax(-1).mul_(2),
}


@pytest.mark.parametrize("name", list(INPLACE_AFTER))
def test_saved_result_changed_in_place_raises_as_torch(name):
    def fn(lib):
        lib.manual_seed(0)
        x = lib.linspace(-1, 1, 8).reshape(2, 4).requires_grad_()
        INPLACE_AFTER[name](lib, x).sum().backward()
        return x.grad
    kind, message = _same_outcome(fn)
    assert kind == "RuntimeError" and "modified by an inplace operation" in message


KEPT = {
    "relu_then_out_of_place": lambda lib, x: lib.relu(x) * 2,
    "relu_inplace": lambda lib, x: lib.nn.functional.relu(x * 1, inplace=True),
    "dropout_inplace_on_linear": lambda lib, x: lib.nn.functional.dropout(
        x * 1, 0.5, True, inplace=True).relu(),
    "softmax_eval_dropout": lambda lib, x: lib.nn.functional.dropout(x.softmax(-1), 0.5, False,
                                                                     inplace=True),
    "relu_no_grad_write_after_backward": lambda lib, x: lib.relu(x),
}


@pytest.mark.parametrize("name", list(KEPT))
def test_unmodified_saved_results_backpropagate_as_torch(name):
    grads = []
    for lib in (torch, tracec):
        lib.manual_seed(0)
        x = lib.linspace(-1, 1, 8).reshape(2, 4).requires_grad_()
        y = KEPT[name](lib, x)
        (y * lib.arange(8.).reshape(2, 4)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, atol=1e-7)


def test_saved_result_error_names_the_node():
    for lib in (torch, tracec):
        x = lib.ones(2, 3, requires_grad=True)
        y = lib.relu(x)
        y.mul_(2)
        with pytest.raises(RuntimeError, match="output 0 of Relu, is at version 1; expected "
                                               "version 0"):
            y.sum().backward()


def test_custom_function_saved_output_error_names_it():
    errors = []
    for lib in (torch, tracec):
        class Exp(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x.exp()
                ctx.save_for_backward(y)
                return y

            @staticmethod
            def backward(ctx, g):
                y, = ctx.saved_tensors
                return g * y
        x = lib.ones(3, requires_grad=True)
        with pytest.raises(RuntimeError) as e:
            Exp.apply(x).mul_(2).sum().backward()
        errors.append(str(e.value).split(" Hint")[0].replace("torch.", "").replace("tracec.", ""))
    assert errors[0] == errors[1] and "output 0 of Exp," in errors[0]


def test_relu_inplace_after_saved_result_error_and_compile_unchanged():
    """The compiled step of a relu network equals eager (the saved result
    adds a check, not a value)."""
    tracec.manual_seed(0)
    net = tracec.nn.Sequential(tracec.nn.Linear(4, 8), tracec.nn.ReLU(inplace=True),
                               tracec.nn.Linear(8, 3), tracec.nn.LogSoftmax(-1))
    x = tracec.randn(5, 4)

    def step(x):
        net.zero_grad()
        loss = net(x).sum()
        loss.backward()
        return loss, net[0].weight.grad.clone()
    le, ge = step(x)
    lc, gc = tracec.compile(step)(x)
    assert tracec.allclose(le, lc) and tracec.allclose(ge, gc)


# --- resize_ inside a compiled function ----------------------------------------------------

def test_new_resize_as_normal_compiles():
    """ProdLDA's noise: ``input.data.new().resize_as_(mean.data).normal_()``."""
    def noise(x):
        e = x.data.new().resize_as_(x.data).normal_()
        return x + 0 * e, e.shape

    x = tracec.randn(3, 4)
    y, shape = tracec.compile(noise)(x)
    assert tuple(shape) == (3, 4) and tracec.equal(y, x)


def test_resize_grow_under_compile_matches_torch():
    def grow(lib, x):
        y = x.new_zeros(2, 3)
        y.resize_(4, 2)
        y.fill_(1.5)
        return x.sum() + y.sum()
    x = np.arange(12, dtype=F32).reshape(3, 4)
    want = grow(torch, torch.from_numpy(x))
    got = tracec.compile(lambda t: grow(tracec, t))(tracec.tensor(x))
    assert float(got) == float(want)


# --- checkpoint outputs changed in place under compile -------------------------------------

@pytest.mark.parametrize("compiled", [False, True])
def test_checkpoint_output_relu_inplace_matches_torch(compiled):
    """checkpoint_sequential's last, unchecked segment starting with
    nn.ReLU(inplace=True) on a checkpointed segment's output (its BatchNorm's):
    under tracec.compile the output was a view made without gradient
    recording, which refused the in-place write."""
    import torch.utils.checkpoint as tck
    import tracec.utils.checkpoint as cck
    grads = []
    for lib, ck in ((torch, tck), (tracec, cck)):
        lib.manual_seed(0)
        m = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.ReLU(inplace=True),
                              lib.nn.Linear(4, 2))
        x = lib.tensor(np.linspace(-1, 1, 15, dtype=F32).reshape(5, 3))

        def step(x):
            out = ck.checkpoint_sequential(m, 2, x, use_reentrant=False)
            out.pow(2).sum().backward()
            return out
        out = (tracec.compile(step) if compiled and lib is tracec else step)(x)
        grads.append((out.detach().numpy(), m[0].weight.grad.numpy(),
                      m[1].num_batches_tracked.item()))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-5, atol=1e-6)
    # (a Linear before a BatchNorm: its gradient is a cancellation, rounding-sized)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-4, atol=2e-5)
    assert grads[1][2] == grads[0][2]


@pytest.mark.parametrize("name", ["pow_scalar_base", "pow_tensor_exponent", "relu", "exp"])
def test_modified_error_names_numbered_nodes_as_torch(name):
    """PyTorch names ``PowBackward2``'s output "Pow2" in the version error
    (a ``Backward0`` node drops its number, others keep it)."""
    make = {"pow_scalar_base": lambda lib, x: lib.pow(2.0, x),
            "pow_tensor_exponent": lambda lib, x: x.pow(x),
            "relu": lambda lib, x: x.relu(), "exp": lambda lib, x: x.exp()}[name]

    def fn(lib):
        x = lib.ones(3, requires_grad=True)
        y = make(lib, x)
        y.mul_(2)
        y.sum().backward()
    assert _same_outcome(fn)[0] == "RuntimeError"


# --- in-place activations: their nodes' names and saved results ----------------------------

ACTS = {
    "elu": lambda lib, t, ip: lib.nn.functional.elu(t, inplace=ip),
    "elu_": lambda lib, t, ip: lib.nn.functional.elu_(t) if ip else lib.nn.functional.elu(t),
    "selu": lambda lib, t, ip: lib.nn.functional.selu(t, inplace=ip),
    "celu": lambda lib, t, ip: lib.nn.functional.celu(t, inplace=ip),
    "leaky_relu": lambda lib, t, ip: lib.nn.functional.leaky_relu(t, inplace=ip),
    "leaky_relu_": lambda lib, t, ip: (lib.nn.functional.leaky_relu_(t) if ip
                                       else lib.nn.functional.leaky_relu(t)),
    "hardtanh": lambda lib, t, ip: lib.nn.functional.hardtanh(t, inplace=ip),
    "relu6": lambda lib, t, ip: lib.nn.functional.relu6(t, inplace=ip),
    "threshold": lambda lib, t, ip: lib.nn.functional.threshold(t, 0.5, 0.0, inplace=ip),
    "rrelu": lambda lib, t, ip: lib.nn.functional.rrelu(t, inplace=ip),
    "rrelu_training": lambda lib, t, ip: lib.nn.functional.rrelu(t, training=True, inplace=ip),
    "relu": lambda lib, t, ip: lib.nn.functional.relu(t, inplace=ip),
    "silu": lambda lib, t, ip: lib.nn.functional.silu(t, inplace=ip),
}


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("name", list(ACTS))
def test_activation_node_names_match_torch(name, inplace):
    names, grads = [], []
    for lib in (torch, tracec):
        lib.manual_seed(0)
        x = lib.linspace(-1, 1, 6, requires_grad=True)
        y = ACTS[name](lib, x * 1, inplace)
        names.append(type(y.grad_fn).__name__)
        (y * lib.arange(6.)).sum().backward()
        grads.append(x.grad.numpy())
    assert names[0] == names[1]
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", list(ACTS))
def test_inplace_activation_result_changed_again_as_torch(name):
    """elu_ / celu_ / selu_ / leaky_relu_ / rrelu_ / relu_ save their result
    (PyTorch raises when it is changed again before the backward);
    hardtanh_ and threshold_ do not."""
    def fn(lib):
        lib.manual_seed(0)
        x = lib.linspace(-1, 1, 6, requires_grad=True)
        ACTS[name](lib, x * 1, True).mul_(2).sum().backward()
        return x.grad
    _same_outcome(fn)
