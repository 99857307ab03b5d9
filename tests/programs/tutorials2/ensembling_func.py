# PyTorch tutorials "Model ensembling" and "Per-sample-gradients" and
# "Jacobians, Hessians, hvp, vhp, and more" (torch.func): stack_module_state
# + functional_call + vmap (in_dims), a 'meta'-device base model, grad with
# has_aux, jacrev/jacfwd/hessian, vmap over per-sample grads; then an
# ensemble trained with vmap(grad(...)).  Weights and data come from numpy
# so tracec and torch run the same numbers.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, stack_module_state, vmap

device = 'cpu'
rng = np.random.default_rng(0)


def npt(*shape):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


class SimpleMLP(nn.Module):
    def __init__(self):
        super(SimpleMLP, self).__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 10)

    def forward(self, x):
        x = x.flatten(1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.fc2(x)
        x = F.relu(x)
        x = self.fc3(x)
        return x


num_models = 4
data = npt(10, 16, 1, 8, 8)
targets = torch.from_numpy(rng.integers(0, 10, 160))

models = [SimpleMLP().to(device) for _ in range(num_models)]
with torch.no_grad():
    for m in models:
        for p in m.parameters():
            p.copy_(0.2 * npt(*p.shape))

minibatches = data[:num_models]
predictions_diff_minibatch_loop = [model(minibatch) for model, minibatch in zip(models, minibatches)]

minibatch = data[0]
predictions2 = [model(minibatch) for model in models]

params, buffers = stack_module_state(models)

base_model = copy.deepcopy(models[0])
base_model = base_model.to('meta')
print(base_model.fc1.weight.is_meta, tuple(base_model.fc1.weight.shape))


def fmodel(params, buffers, x):
    return functional_call(base_model, (params, buffers), (x,))


print([p.size(0) for p in params.values()])  # show the leading 'num_models' dimension
assert minibatches.shape == (num_models, 16, 1, 8, 8)  # verify minibatch has leading dimension of size 'num_models'

predictions1_vmap = vmap(fmodel)(params, buffers, minibatches)

# verify the ``vmap`` predictions match the
assert torch.allclose(predictions1_vmap, torch.stack(predictions_diff_minibatch_loop), atol=1e-3, rtol=1e-5)
predictions2_vmap = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)

assert torch.allclose(predictions2_vmap, torch.stack(predictions2), atol=1e-3, rtol=1e-5)
print('ensemble', tuple(predictions1_vmap.shape), '%.5f' % predictions1_vmap.sum().item(),
      tuple(predictions2_vmap.shape), '%.5f' % predictions2_vmap.sum().item())

# per-sample gradients
model = models[0]
params1 = {k: v.detach() for k, v in model.named_parameters()}
buffers1 = {k: v.detach() for k, v in model.named_buffers()}


def compute_loss(params, buffers, sample, target):
    batch = sample.unsqueeze(0)
    targets = target.unsqueeze(0)
    predictions = functional_call(model, (params, buffers), (batch,))
    loss = F.cross_entropy(predictions, targets)
    return loss


ft_compute_grad = grad(compute_loss)
ft_compute_sample_grad = vmap(ft_compute_grad, in_dims=(None, None, 0, 0))
ft_per_sample_grads = ft_compute_sample_grad(params1, buffers1, data[0], targets[:16])
for name, g in ft_per_sample_grads.items():
    print('per-sample', name, tuple(g.shape), '%.5f' % g.abs().sum().item())
params1['fc1.weight'].requires_grad_()
loop = [torch.autograd.grad(compute_loss(params1, buffers1, data[0][i], targets[i]),
                            params1['fc1.weight'])[0] for i in range(3)]
print(torch.allclose(torch.stack(loop), ft_per_sample_grads['fc1.weight'][:3], atol=1e-5))
params1['fc1.weight'].requires_grad_(False)


# grad with has_aux and argnums
def loss_with_aux(params, x, t):
    out = functional_call(model, params, (x,))
    loss = F.cross_entropy(out, t)
    return loss, out.argmax(1)


g, pred = grad(loss_with_aux, has_aux=True)(params1, data[1], targets[16:32])
print('has_aux', '%.5f' % g['fc3.bias'].sum().item(), pred.tolist()[:8])
gx = grad(lambda p, x: loss_with_aux(p, x, targets[:16])[0], argnums=1)(params1, data[0])
print('argnums', tuple(gx.shape), '%.5f' % gx.abs().sum().item())

# jacobians and hessians
D = 8
weight = npt(D, D)
bias = npt(D)
x = npt(D)


def predict(weight, bias, x):
    return F.linear(x, weight, bias).tanh()


jacobian = jacrev(predict, argnums=2)(weight, bias, x)
print('jacrev', tuple(jacobian.shape), '%.5f' % jacobian.sum().item())
jacfwd_j = jacfwd(predict, argnums=2)(weight, bias, x)
print(torch.allclose(jacobian, jacfwd_j, atol=1e-6))
ft_jac_weight, ft_jac_bias = jacrev(predict, argnums=(0, 1))(weight, bias, x)
print('jac weight', tuple(ft_jac_weight.shape), '%.5f' % ft_jac_weight.sum().item(),
      'bias', '%.5f' % ft_jac_bias.sum().item())
batch_x = npt(4, D)
compute_batch_jacobian = vmap(jacrev(predict, argnums=2), in_dims=(None, None, 0))
batch_jacobian0 = compute_batch_jacobian(weight, bias, batch_x)
print('batch jacobian', tuple(batch_jacobian0.shape), '%.5f' % batch_jacobian0.sum().item())
hess_api = hessian(predict, argnums=2)(weight, bias, x)
hess_fwdrev = jacfwd(jacrev(predict, argnums=2), argnums=2)(weight, bias, x)
print('hessian', tuple(hess_api.shape), '%.5f' % hess_api.sum().item(),
      torch.allclose(hess_api, hess_fwdrev, atol=1e-5))


def hvp(f, primals, tangents):
    return torch.func.jvp(torch.func.grad(f), primals, tangents)[1]


def f(x):
    return x.sin().sum()


xh, th = npt(16), npt(16)
print('hvp %.5f' % hvp(f, (xh,), (th,)).sum().item())

# beyond the tutorial: train the ensemble with one vmapped step
params = {k: v.detach().clone() for k, v in params.items()}


def ensemble_loss(p, b, x, t):
    return F.cross_entropy(functional_call(base_model, (p, b), (x,)), t)


step_grad = vmap(grad(ensemble_loss), in_dims=(0, 0, 0, None))
t0 = targets[:16]
for step in range(4):
    grads = step_grad(params, buffers, minibatches, t0)
    params = {k: v - 0.5 * grads[k] for k, v in params.items()}
    losses = vmap(ensemble_loss, in_dims=(0, 0, 0, None))(params, buffers, minibatches, t0)
    print('ensemble step', step, ['%.5f' % v for v in losses.tolist()])
