# PyTorch tutorial "Forward-mode Automatic Differentiation (Beta)", written
# the way the tutorial has it: `import torch.autograd.forward_ad as fwAD`,
# `with fwAD.dual_level():`, make_dual / unpack_dual (.tangent, .primal),
# the tangent used as-is vs copied for a different layout (tangent.T), plain
# tensors with an implicit zero tangent, the tangent gone after the level
# exits; modules through delattr / setattr of dual parameters and through
# torch.func.functional_call; a custom autograd.Function with a jvp
# staticmethod (ctx.result, `del ctx.result`) and one with
# ctx.save_for_forward, checked by autograd.gradcheck(check_forward_ad=True,
# check_backward_ad=False, ...) in float64; then the torch.func jvp /
# functools.partial / functional_call / jacfwd section.  Changes for a CPU
# test: the printed summaries, 4x4 / Linear(5, 5) sizes, and a compiled
# Linear step checked against eager at the end.
import functools

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn as nn

torch.manual_seed(0)

primal = torch.randn(4, 4)
tangent = torch.randn(4, 4)


def fn(x, y):
    return x ** 2 + y ** 2


# All forward AD computation must be performed in the context of
# a ``dual_level`` context.
with fwAD.dual_level():
    # To create a dual tensor we associate a tensor, which we call the
    # primal with another tensor of the same size, which we call the tangent.
    # It is also important to note that the dual tensor created by
    # ``make_dual`` is a view of the primal.
    dual_input = fwAD.make_dual(primal, tangent)
    assert fwAD.unpack_dual(dual_input).tangent is tangent

    # To demonstrate the case where the copy of the tangent happens,
    # we pass in a tangent with a layout different from that of the primal
    dual_input_alt = fwAD.make_dual(primal, tangent.T)
    assert fwAD.unpack_dual(dual_input_alt).tangent is not tangent

    # Tensors that do not have an associated tangent are automatically
    # considered to have a zero-filled tangent of the same shape.
    plain_tensor = torch.randn(4, 4)
    dual_output = fn(dual_input, plain_tensor)

    # Unpacking the dual returns a ``namedtuple`` with ``primal`` and ``tangent``
    # as attributes
    jvp = fwAD.unpack_dual(dual_output).tangent
    print('primal', fwAD.unpack_dual(dual_output).primal[0])
    print('alt tangent', fwAD.unpack_dual(dual_input_alt).tangent[0], fwAD.unpack_dual(dual_input_alt).tangent.is_contiguous())
    unpacked = fwAD.unpack_dual(dual_output)
    print(type(unpacked).__name__, unpacked._fields)

print('jvp', jvp)
print('expected', torch.allclose(jvp, 2 * primal * tangent))
assert fwAD.unpack_dual(dual_output).tangent is None

model = nn.Linear(5, 5)
input = torch.randn(16, 5)

params = {name: p for name, p in model.named_parameters()}
tangents = {name: torch.rand_like(p) for name, p in params.items()}

with fwAD.dual_level():
    for name, p in params.items():
        delattr(model, name)
        setattr(model, name, fwAD.make_dual(p, tangents[name]))

    out = model(input)
    jvp = fwAD.unpack_dual(out).tangent

print('module jvp', jvp[:2].detach())

from torch.func import functional_call

# We need a fresh module because the functional call requires the
# the model to have parameters registered.
model = nn.Linear(5, 5)

dual_params = {}
with fwAD.dual_level():
    for name, p in params.items():
        # Using the same ``tangents`` from the above section
        dual_params[name] = fwAD.make_dual(p, tangents[name])
    out = functional_call(model, dual_params, input)
    jvp2 = fwAD.unpack_dual(out).tangent

# Check our results
assert torch.allclose(jvp, jvp2)
print('functional_call jvp matches', torch.allclose(jvp, jvp2))


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        result = torch.exp(foo)
        # Tensors stored in ``ctx`` can be used in the subsequent forward grad
        # computation.
        ctx.result = result
        return result

    @staticmethod
    def jvp(ctx, gI):
        gO = gI * ctx.result
        # If the tensor stored in ``ctx`` will not also be used in the backward pass,
        # one can manually free it using ``del``
        del ctx.result
        return gO


fn = Fn.apply

primal = torch.randn(4, 4, dtype=torch.double, requires_grad=True)
tangent = torch.randn(4, 4, dtype=torch.double)

with fwAD.dual_level():
    dual_input = fwAD.make_dual(primal, tangent)
    dual_output = fn(dual_input)
    jvp = fwAD.unpack_dual(dual_output).tangent

print('Fn jvp', jvp[0].detach(), torch.allclose(jvp, tangent * primal.exp()))

# It is important to use ``autograd.gradcheck`` to verify that your
# custom autograd Function computes the gradients correctly. By default,
# ``gradcheck`` only checks the backward-mode (reverse-mode) AD gradients. Specify
# ``check_forward_ad=True`` to also check forward grads. If you did not
# implement the backward formula for your function, you can also tell ``gradcheck``
# to skip the tests that require backward-mode AD by specifying
# ``check_backward_ad=False``, ``check_undefined_grad=False``, and
# ``check_batched_grad=False``.
ok = torch.autograd.gradcheck(Fn.apply, (primal,), check_forward_ad=True,
                              check_backward_ad=False, check_undefined_grad=False,
                              check_batched_grad=False)
print('gradcheck forward ad', ok)


class MulSin(torch.autograd.Function):
    """x * sin(y) with both formulas, the inputs kept by save_for_forward
    for the jvp and save_for_backward for the backward."""
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_forward(x, y)
        ctx.save_for_backward(x, y)
        return x * torch.sin(y)

    @staticmethod
    def jvp(ctx, gx, gy):
        x, y = ctx.saved_tensors
        return gx * torch.sin(y) + x * torch.cos(y) * gy

    @staticmethod
    def backward(ctx, gO):
        x, y = ctx.saved_tensors
        return gO * torch.sin(y), gO * x * torch.cos(y)


a = torch.randn(3, 3, dtype=torch.double, requires_grad=True)
b = torch.randn(3, 3, dtype=torch.double, requires_grad=True)
print('MulSin gradcheck', torch.autograd.gradcheck(MulSin.apply, (a, b), check_forward_ad=True))
with fwAD.dual_level():
    da = fwAD.make_dual(a, torch.ones_like(a))
    out = MulSin.apply(da, b)
    p, t = fwAD.unpack_dual(out)
    print('MulSin tangent', t[0].detach(), torch.allclose(t, torch.sin(b)))

# torch.func.jvp
primal0 = torch.randn(4, 4)
tangent0 = torch.randn(4, 4)
primal1 = torch.randn(4, 4)
tangent1 = torch.randn(4, 4)


def fn(x, y):
    return x ** 2 + y ** 2


# Here is a basic example to compute the JVP of the above function.
# The ``jvp(func, primals, tangents)`` returns ``func(*primals)`` as well as the
# computed Jacobian-vector product (JVP). Each primal must be associated with a tangent of the same shape.
primal_out, tangent_out = torch.func.jvp(fn, (primal0, primal1), (tangent0, tangent1))
print('func.jvp', tangent_out[0], torch.allclose(tangent_out, 2 * primal0 * tangent0 + 2 * primal1 * tangent1))

# ``torch.func.jvp`` requires every primal to be associated with a tangent.
# If we only want to associate certain inputs to `fn` with tangents,
# then we'll need to create a new function that captures inputs without tangents:
primal = torch.randn(4, 4)
tangent = torch.randn(4, 4)
y = torch.randn(4, 4)

new_fn = functools.partial(fn, y=y)
primal_out, tangent_out = torch.func.jvp(new_fn, (primal,), (tangent,))
print('partial jvp', tangent_out[1])

model = nn.Linear(5, 5)
input = torch.randn(16, 5)

params = dict(model.named_parameters())
tangents = {k: torch.rand_like(v) for k, v in params.items()}


def func_params_only(params):
    return functional_call(model, params, input)


model_output, jvp_out = torch.func.jvp(func_params_only, (params,), (tangents,))
print('params jvp', jvp_out[0].detach())
print('requires grad', model_output.requires_grad)

jac = torch.func.jacfwd(lambda x: model(x).tanh())(input[0])
jac_rev = torch.func.jacrev(lambda x: model(x).tanh())(input[0])
print('jacfwd', jac.shape, torch.allclose(jac, jac_rev, atol=1e-6))
print(jac[0].detach())

# compiled: a training step of the module, checked against eager
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def step(x):
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    return loss


eager_state = {k: v.clone() for k, v in model.state_dict().items()}
loss_c = torch.compile(step)(input)
after_c = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(eager_state)
loss_e = step(input)
print('compiled == eager', torch.allclose(loss_c, loss_e),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
print('loss', loss_e.item())
