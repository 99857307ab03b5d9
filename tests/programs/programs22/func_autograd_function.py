"""autograd.Function under torch.func transforms, as PyTorch's docs write it
(pytorch/pytorch docs/source/notes/extending.func.rst, "Extending torch.func
with autograd.Function"): forward without ctx plus a setup_context
staticmethod; NumpySort / NumpyTake calling into numpy with intermediates
returned as outputs, mark_non_differentiable, save_for_backward and
save_for_forward, a backward written with another Function (so it is
differentiable again), hand-written vmap staticmethods (info.batch_size,
in_dims with None, out_dims as a tuple or an int) and a jvp staticmethod;
MyCube with generate_vmap_rule=True and its second-order gradients through
torch.func.grad(grad(...)); then jacrev / jacfwd / hessian / vjp / jvp /
vmap over them, and the same Functions under plain autograd. Changes for a
test: fixed inputs from numpy, and values printed instead of asserted."""
import numpy as np
import torch


def to_numpy(tensor):
    return tensor.cpu().numpy()


class NumpySort(torch.autograd.Function):
    # Note that forward does not take ctx
    @staticmethod
    def forward(x, dim):
        device = x.device
        x = to_numpy(x)
        ind = np.argsort(x, axis=dim)
        ind_inv = np.argsort(ind, axis=dim)
        result = np.take_along_axis(x, ind, axis=dim)
        # Any intermediates to be saved in backward must be returned as
        # outputs.
        return (
            torch.tensor(result, device=device),
            torch.tensor(ind, device=device),
            torch.tensor(ind_inv, device=device),
        )

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, dim = inputs
        _, ind, ind_inv = output
        ctx.mark_non_differentiable(ind, ind_inv)
        ctx.save_for_backward(ind, ind_inv)
        ctx.save_for_forward(ind, ind_inv)
        ctx.dim = dim

    @staticmethod
    def backward(ctx, grad_output, _0, _1):
        ind, ind_inv = ctx.saved_tensors
        return NumpyTake.apply(grad_output, ind_inv, ind, ctx.dim), None

    @staticmethod
    def vmap(info, in_dims, x, dim):
        x_bdim, _ = in_dims
        x = x.movedim(x_bdim, 0)
        # Handle negative dims correctly
        dim = dim if dim >= 0 else dim + x.dim() - 1
        return NumpySort.apply(x, dim + 1), (0, 0, 0)

    @staticmethod
    def jvp(ctx, x_tangent, _):
        ind, ind_inv = ctx.saved_tensors
        return NumpyTake.apply(x_tangent, ind, ind_inv, ctx.dim), None, None


class NumpyTake(torch.autograd.Function):
    @staticmethod
    def forward(x, ind, ind_inv, dim):
        device = x.device
        x = to_numpy(x)
        ind = to_numpy(ind)
        return torch.tensor(np.take_along_axis(x, ind, dim), device=device)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, ind, ind_inv, dim = inputs
        ctx.save_for_backward(ind, ind_inv)
        ctx.save_for_forward(ind, ind_inv)
        ctx.dim = dim

    @staticmethod
    def backward(ctx, grad_output):
        ind, ind_inv = ctx.saved_tensors
        result = NumpyTake.apply(grad_output, ind_inv, ind, ctx.dim)
        return result, None, None, None

    @staticmethod
    def vmap(info, in_dims, x, ind, ind_inv, dim):
        x_bdim, ind_bdim, ind_inv_bdim, _ = in_dims

        # Handle negative dims by wrapping them to be positive
        logical_dim = x.dim() if x_bdim is None else x_bdim - 1
        dim = dim if dim >= 0 else dim + logical_dim

        def maybe_expand_bdim_at_front(x, x_bdim):
            if x_bdim is None:
                return x.expand(info.batch_size, *x.shape)
            return x.movedim(x_bdim, 0)

        x = maybe_expand_bdim_at_front(x, x_bdim)
        ind = maybe_expand_bdim_at_front(ind, ind_bdim)
        ind_inv = maybe_expand_bdim_at_front(ind_inv, ind_inv_bdim)
        return NumpyTake.apply(x, ind, ind_inv, dim + 1), 0

    @staticmethod
    def jvp(ctx, x_tangent, ind_tangent, ind_inv_tangent, _):
        assert ind_tangent is None
        assert ind_inv_tangent is None
        ind, ind_inv = ctx.saved_tensors
        return NumpyTake.apply(x_tangent, ind, ind_inv, ctx.dim)


def numpy_sort(x, dim=-1):
    result, _, _ = NumpySort.apply(x, dim)
    return result


class MyCube(torch.autograd.Function):
    # Set generate_vmap_rule to True to ask PyTorch to automatically generate
    # a vmap rule.
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        result = x ** 3
        # In regular PyTorch, if we had just run y = x ** 3, then the backward
        # pass computes dx = 3 * x ** 2. Here that happens in the forward.
        dx = 3 * x ** 2
        return result, dx

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, = inputs
        result, dx = output
        ctx.save_for_backward(x, dx)

    @staticmethod
    def backward(ctx, grad_output, grad_dx):
        x, dx = ctx.saved_tensors
        # In order for the autograd.Function to work with higher-order
        # gradients, we must add the gradient contribution of `dx`.
        result = grad_output * dx + grad_dx * 6 * x
        return result


def my_cube(x):
    result, _ = MyCube.apply(x)
    return result


def show(name, t):
    t = t.detach() if isinstance(t, torch.Tensor) else torch.as_tensor(t)
    print(f"{name}: shape={tuple(t.shape)} dtype={t.dtype} "
          f"sum={t.double().sum().item():.6f} first={t.flatten()[:4].tolist()}")


rng = np.random.RandomState(0)
x = torch.tensor(rng.randn(2, 3).astype(np.float32))
w = torch.tensor(rng.randn(2, 3).astype(np.float32))

# Example 1 sanity check: grad of a numpy-backed sort
grad_x = torch.func.grad(lambda x: numpy_sort(x).sum())(x)
show("grad sort.sum", grad_x)
print("allclose ones:", torch.allclose(grad_x, torch.ones_like(x)))
grad_w = torch.func.grad(lambda x: (numpy_sort(x) * w).sum())(x)
show("grad weighted sort", grad_w)

# Example 2: second-order gradients through MyCube
s = torch.tensor(0.7)
ggx = torch.func.grad(torch.func.grad(my_cube))(s)
show("ggx", ggx)
print("ggx == 6x:", torch.allclose(ggx, 6 * s))

# generate_vmap_rule=True
v = torch.tensor(rng.randn(3).astype(np.float32))
result = torch.vmap(my_cube)(v)
show("vmap my_cube", result)
print("vmap == x**3:", torch.allclose(result, v ** 3))
show("vmap grad my_cube", torch.vmap(torch.func.grad(my_cube))(v))
show("jacrev my_cube", torch.func.jacrev(my_cube)(v))
# hessian is jacfwd(jacrev(.)): forward mode needs MyCube's jvp, which it lacks
try:
    torch.func.hessian(lambda z: my_cube(z).sum())(v)
except NotImplementedError as e:
    print("hessian:", type(e).__name__, e)

# hand-written vmap rules
result = torch.vmap(numpy_sort)(x)
show("vmap numpy_sort", result)
print("vmap sort == sort dim 1:", torch.allclose(result, numpy_sort(x, 1)))
show("vmap numpy_sort in_dims=1", torch.vmap(numpy_sort, in_dims=1)(x))
show("vmap sort dim=0 out_dims=1",
     torch.vmap(lambda r: numpy_sort(r, 0), in_dims=1, out_dims=1)(torch.tensor(rng.randn(4, 3).astype(np.float32))))
# jacrev runs vmap over NumpyTake's backward
J = torch.func.jacrev(numpy_sort)(x[0])
show("jacrev numpy_sort", J)
print(J)
show("vmap jacrev", torch.vmap(torch.func.jacrev(numpy_sort))(x))

# forward mode through the jvp staticmethods
t = torch.tensor(rng.randn(2, 3).astype(np.float32))
out, tangent = torch.func.jvp(numpy_sort, (x,), (t,))
show("jvp out", out)
show("jvp tangent", tangent)
show("jacfwd numpy_sort", torch.func.jacfwd(numpy_sort)(x[1]))
out, vjp_fn = torch.func.vjp(numpy_sort, x)
(gx,) = vjp_fn(t)
show("vjp", gx)

# the same Functions under plain autograd
xr = x.clone().requires_grad_()
y, ind, ind_inv = NumpySort.apply(xr, 1)
print("requires_grad:", y.requires_grad, ind.requires_grad, ind_inv.requires_grad, ind.dtype)
(y * w).sum().backward()
show("autograd grad", xr.grad)
cr = v.clone().requires_grad_()
r3, dx = MyCube.apply(cr)
g, = torch.autograd.grad(r3.sum(), cr, create_graph=True)
show("first grad", g)
g2, = torch.autograd.grad(g.sum(), cr)
show("second grad", g2)
print("grad_fn:", type(r3.grad_fn).__name__)
