# PyTorch tutorials "Jacobians, Hessians, hvp, vhp, and more: composing
# function transforms" and "Neural Tangent Kernels" (torch.func), written
# the way the tutorials have them: predict = F.linear(...).tanh(), the
# jacobian row by row with autograd.grad over unit vectors, vjp +
# vmap(vjp_fn), jacrev with argnums=2 and argnums=(0, 1), jacfwd,
# hessian / jacfwd(jacfwd) / jacrev(jacrev), vmap(jacrev(...), in_dims=
# (None, None, 0)) batch jacobians and hessians, the summed-output trick with
# movedim, hvp as jvp(grad(f)) and the vjp-of-grad variant; the NTK's CNN
# through functional_call with {k: v.detach() for k, v in
# net.named_parameters()}, vmap(jacrev(fnet_single), (None, 0)), the
# einsum contractions for compute='full' | 'trace' | 'diagonal' and the
# vjp / jvp / vmap(vmap(...)) ntk_vps variant.  Changes for a CPU test:
# small sizes (D=16, batch 8, 8x8 images, 4 channels, 4 classes, 3 train
# and 2 test images; the vps variant's trace / diagonal einsums applied to
# its one 'full' result), the Timer comparison of compute_jac and jacrev
# at timeit(5) printed by title and counts (its delta line marked [rng]),
# and a compiled predict + hvp checked against eager.
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F

_ = torch.manual_seed(0)


def predict(weight, bias, x):
    return F.linear(x, weight, bias).tanh()


D = 16
weight = torch.randn(D, D)
bias = torch.randn(D)
x = torch.randn(D)  # feature vector


def compute_jac(xp):
    jacobian_rows = [torch.autograd.grad(predict(weight, bias, xp), xp, vec)[0]
                     for vec in unit_vectors]
    return torch.stack(jacobian_rows)


xp = x.clone().requires_grad_()
unit_vectors = torch.eye(D)

jacobian = compute_jac(xp)

print(jacobian.shape)
print(jacobian[0])  # show first row

from torch.func import vmap, vjp

_, vjp_fn = vjp(partial(predict, weight, bias), x)

ft_jacobian, = vmap(vjp_fn)(unit_vectors)

# let's confirm both methods compute the same result
assert torch.allclose(ft_jacobian, jacobian)

from torch.func import jacrev

ft_jacobian = jacrev(predict, argnums=2)(weight, bias, x)

# Confirm by running the following:
assert torch.allclose(ft_jacobian, jacobian)

from torch.utils.benchmark import Timer

without_vmap = Timer(stmt="compute_jac(xp)", globals=globals())
with_vmap = Timer(stmt="jacrev(predict, argnums=2)(weight, bias, x)", globals=globals())

no_vmap_timer = without_vmap.timeit(5)
with_vmap_timer = with_vmap.timeit(5)

print(no_vmap_timer.title, '|', with_vmap_timer.title, '|', no_vmap_timer.number_per_run,
      len(with_vmap_timer.times), no_vmap_timer.num_threads)


def get_perf(first, first_descriptor, second, second_descriptor):
    """takes torch.benchmark objects and compares delta of second vs first."""
    second_res = second.times[0]
    first_res = first.times[0]

    gain = (first_res-second_res)/first_res
    if gain < 0: gain *=-1
    final_gain = gain*100

    print(f"[rng] Performance delta: {final_gain:.4f} percent improvement with {first_descriptor} ")


get_perf(no_vmap_timer, "without vmap",  with_vmap_timer, "vmap")

# note the change in input via ``argnums`` parameters of 0,1 to map to weight and bias
ft_jac_weight, ft_jac_bias = jacrev(predict, argnums=(0, 1))(weight, bias, x)

# verify computation
expected_jac_bias = torch.autograd.functional.jacobian(lambda b: predict(weight, b, x), bias)
expected_jac_weight = torch.autograd.functional.jacobian(lambda w: predict(w, bias, x), weight)
print(ft_jac_weight.shape, ft_jac_bias.shape)
assert torch.allclose(ft_jac_bias, expected_jac_bias)
assert torch.allclose(ft_jac_weight, expected_jac_weight)
print('jac weight sum', ft_jac_weight.sum().item(), 'jac bias trace', ft_jac_bias.trace().item())

from torch.func import jacrev, jacfwd

Din = 8
Dout = 24
weight = torch.randn(Dout, Din)
bias = torch.randn(Dout)
x = torch.randn(Din)

print(weight.shape)
ft_jacobian = jacfwd(predict, argnums=2)(weight, bias, x)
ft_jacobian_rev = jacrev(predict, argnums=2)(weight, bias, x)
print('fwd', ft_jacobian.shape, 'rev', ft_jacobian_rev.shape)
print('fwd == rev', torch.allclose(ft_jacobian, ft_jacobian_rev, atol=1e-6))
print(ft_jacobian[:2, :4])

from torch.func import hessian

Din = 12
Dout = 6
weight = torch.randn(Dout, Din)
bias = torch.randn(Dout)
x = torch.randn(Din)

hess_api = hessian(predict, argnums=2)(weight, bias, x)
hess_fwdfwd = jacfwd(jacfwd(predict, argnums=2), argnums=2)(weight, bias, x)
hess_revrev = jacrev(jacrev(predict, argnums=2), argnums=2)(weight, bias, x)
print(hess_api.shape)
print('hessians agree', torch.allclose(hess_api, hess_fwdfwd, atol=1e-6),
      torch.allclose(hess_api, hess_revrev, atol=1e-6))
print('hess', hess_api[0, :2, :3])

batch_size = 8
Din = 7
Dout = 5

weight = torch.randn(Dout, Din)
print(f"weight shape = {weight.shape}")

bias = torch.randn(Dout)

x = torch.randn(batch_size, Din)

compute_batch_jacobian = vmap(jacrev(predict, argnums=2), in_dims=(None, None, 0))
batch_jacobian0 = compute_batch_jacobian(weight, bias, x)


def predict_with_output_summed(weight, bias, x):
    return predict(weight, bias, x).sum(0)


batch_jacobian1 = jacrev(predict_with_output_summed, argnums=2)(weight, bias, x).movedim(1, 0)
assert torch.allclose(batch_jacobian0, batch_jacobian1)
print(batch_jacobian0.shape, batch_jacobian0[3, 1])

compute_batch_hessian = vmap(hessian(predict, argnums=2), in_dims=(None, None, 0))

batch_hess = compute_batch_hessian(weight, bias, x)
print(batch_hess.shape, batch_hess.sum(dim=(1, 2, 3)))

from torch.func import jvp, grad, vjp


def hvp(f, primals, tangents):
    return jvp(grad(f), primals, tangents)[1]


def f(x):
    return x.sin().sum()


x = torch.randn(32)
tangent = torch.randn(32)

result = hvp(f, (x,), (tangent,))
print('hvp', result[:6])


def hvp_revrev(f, primals, tangents):
    _, vjp_fn = vjp(grad(f), *primals)
    return vjp_fn(*tangents)


result_hvp_revrev = hvp_revrev(f, (x,), (tangent,))
assert torch.allclose(result, result_hvp_revrev[0])
print('hvp fwd-rev == rev-rev', torch.allclose(result, result_hvp_revrev[0]))

# Neural Tangent Kernels
from torch.func import functional_call, vmap, vjp, jvp, jacrev
device = 'cuda' if torch.cuda.device_count() > 0 else 'cpu'


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, (3, 3))
        self.conv2 = nn.Conv2d(4, 4, (3, 3))
        self.conv3 = nn.Conv2d(4, 4, (3, 3))
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        x = self.conv1(x)
        x = x.relu()
        x = self.conv2(x)
        x = x.relu()
        x = self.conv3(x)
        x = x.flatten(1)
        x = self.fc(x)
        return x


x_train = torch.randn(3, 3, 8, 8, device=device)
x_test = torch.randn(2, 3, 8, 8, device=device)

net = CNN().to(device)

# Detaching the parameters because we won't be calling Tensor.backward().
params = {k: v.detach() for k, v in net.named_parameters()}


def fnet_single(params, x):
    return functional_call(net, params, (x.unsqueeze(0),)).squeeze(0)


def empirical_ntk_jacobian_contraction(fnet_single, params, x1, x2, compute='full'):
    # Compute J(x1)
    jac1 = vmap(jacrev(fnet_single), (None, 0))(params, x1)
    jac1 = jac1.values()
    jac1 = [j.flatten(2) for j in jac1]

    # Compute J(x2)
    jac2 = vmap(jacrev(fnet_single), (None, 0))(params, x2)
    jac2 = jac2.values()
    jac2 = [j.flatten(2) for j in jac2]

    # Compute J(x1) @ J(x2).T
    einsum_expr = None
    if compute == 'full':
        einsum_expr = 'Naf,Mbf->NMab'
    elif compute == 'trace':
        einsum_expr = 'Naf,Maf->NM'
    elif compute == 'diagonal':
        einsum_expr = 'Naf,Maf->NMa'
    else:
        assert False

    result = torch.stack([torch.einsum(einsum_expr, j1, j2) for j1, j2 in zip(jac1, jac2)])
    result = result.sum(0)
    return result


result = empirical_ntk_jacobian_contraction(fnet_single, params, x_train, x_test)
print(result.shape)
print('ntk full [0, 0]', result[0, 0, :3, :3])
result = empirical_ntk_jacobian_contraction(fnet_single, params, x_train, x_test, 'trace')
print(result.shape)
print('ntk trace', result)
result_diag = empirical_ntk_jacobian_contraction(fnet_single, params, x_train, x_test, 'diagonal')
print(result_diag.shape, 'diag sums to trace', torch.allclose(result_diag.sum(-1), result, rtol=1e-4))


def empirical_ntk_ntk_vps(func, params, x1, x2, compute='full'):
    def get_ntk(x1, x2):
        def func_x1(params):
            return func(params, x1)

        def func_x2(params):
            return func(params, x2)

        output, vjp_fn = vjp(func_x1, params)

        def get_ntk_slice(vec):
            # This computes ``vec @ J(x2).T``
            # `vec` is some unit vector (a single slice of the Identity matrix)
            vjps = vjp_fn(vec)
            # This computes ``J(X1) @ vjps``
            _, jvps = jvp(func_x2, (params,), vjps)
            return jvps

        # Here's our identity matrix
        basis = torch.eye(output.numel(), dtype=output.dtype, device=output.device).view(output.numel(), -1)
        return vmap(get_ntk_slice)(basis)

    # ``get_ntk(x1, x2)`` computes the NTK for a single data point x1, x2
    # Since the x1, x2 inputs to ``empirical_ntk_ntk_vps`` are batched,
    # we actually wish to compute the NTK between every pair of data points
    # between {x1} and {x2}. That's what the ``vmaps`` here do.
    result = vmap(vmap(get_ntk, (None, 0)), (0, None))(x1, x2)

    if compute == 'full':
        return result
    if compute == 'trace':
        return torch.einsum('NMKK->NM', result)
    if compute == 'diagonal':
        return torch.einsum('NMKK->NMK', result)


result_from_jacobian_contraction = empirical_ntk_jacobian_contraction(fnet_single, params, x_test, x_train)
result_from_ntk_vps = empirical_ntk_ntk_vps(fnet_single, params, x_test, x_train)

assert torch.allclose(result_from_jacobian_contraction, result_from_ntk_vps, atol=1e-5)
print('vps shape', result_from_ntk_vps.shape)
print('vps trace', torch.einsum('NMKK->NM', result_from_ntk_vps))
print('vps diagonal [1]', torch.einsum('NMKK->NMK', result_from_ntk_vps)[1])

# compiled: the tutorial's predict and hvp, checked against eager
weight = torch.randn(D, D)
bias = torch.randn(D)
xs = torch.randn(4, D)
compiled_predict = torch.compile(predict)
out_c = compiled_predict(weight, bias, xs)
out_e = predict(weight, bias, xs)
print('compiled == eager (predict)', torch.allclose(out_c, out_e, atol=1e-6))


def hvp_predict(w, b, x, v):
    return hvp(lambda xx: predict(w, b, xx).sum(), (x,), (v,))


compiled_hvp = torch.compile(hvp_predict)
v = torch.randn(D)
compiled_hvp(weight, bias, xs[0], v)
print('compiled == eager (hvp)',
      torch.allclose(compiled_hvp(weight, bias, xs[1], v), hvp_predict(weight, bias, xs[1], v), atol=1e-5))
