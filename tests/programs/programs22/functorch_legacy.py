"""The pre-2.0 functorch API as public code still writes it (pytorch/functorch
README.md "make_functional" / "per-sample gradients" examples and
notebooks/ensembling.ipynb, kept in torch as the ``functorch`` package):
``from functorch import make_functional, make_functional_with_buffers,
combine_state_for_ensemble, grad, vmap, jacrev, hessian``; gradients with
respect to the functional parameters, per-sample gradients through
vmap(grad(...), in_dims=(None, 0, 0)), a tied-weight model, an ensemble of
models with BatchNorm buffers combined into stacked params / buffers and
run with vmap over models (same minibatch and one minibatch each), the
disable_autograd_tracking flag and the buffers refusal. Changes for a test:
small MLPs on random data, values printed instead of asserted."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from functorch import (combine_state_for_ensemble, grad, hessian, jacrev, make_functional,
                       make_functional_with_buffers, vmap)

torch.manual_seed(0)

# README: make_functional + grad
model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
x = torch.randn(6, 3)
t = torch.randn(6, 1)
fmodel, params = make_functional(model)
print(type(fmodel).__name__, len(params), [tuple(p.shape) for p in params])
print("same values:", torch.allclose(fmodel(params, x), model(x)))


def compute_loss(params, x, t):
    y = fmodel(params, x)
    return F.mse_loss(y, t)


grad_weights = grad(compute_loss)(params, x, t)
print("grad norms:", [round(g.norm().item(), 5) for g in grad_weights])
loss = compute_loss(params, x, t)
loss.backward()
print("autograd agrees:", all(torch.allclose(g, p.grad) for g, p in zip(grad_weights, params)))

# README: per-sample gradients
per_sample = vmap(grad(compute_loss), in_dims=(None, 0, 0))(params, x[:, None], t[:, None])
print("per-sample:", [tuple(g.shape) for g in per_sample],
      round(sum(g.sum().item() for g in per_sample), 5))
print("mean of per-sample == batch grad:",
      all(torch.allclose(g.mean(0), b, atol=1e-6) for g, b in zip(per_sample, grad_weights)))

# jacobian / hessian with respect to the inputs through the functional model
jac = jacrev(lambda inp: fmodel(params, inp))(x[0])
print("jacrev:", tuple(jac.shape), round(jac.sum().item(), 5))
hess = hessian(lambda inp: fmodel(params, inp).sum())(x[0])
print("hessian:", tuple(hess.shape), round(hess.sum().item(), 5))

# tied weights: one parameter, two names
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 4, bias=False)
        self.dec = nn.Linear(4, 4, bias=False)
        self.dec.weight = self.enc.weight

    def forward(self, inp):
        return self.dec(torch.relu(self.enc(inp)))


tied = Tied()
ftied, tparams = make_functional(tied)
print("tied params:", len(tparams), torch.allclose(ftied(tparams, torch.ones(2, 4)), tied(torch.ones(2, 4))))
frozen, fparams = make_functional(model, disable_autograd_tracking=True)
print("disable_autograd_tracking:", [p.requires_grad for p in fparams])

# notebooks/ensembling.ipynb
class SimpleMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.bn = nn.BatchNorm1d(16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        x = x.flatten(1)
        x = F.relu(self.bn(self.fc1(x)))
        return self.fc2(x)


num_models = 3
data = torch.randn(20, 4, 2)
minibatches = data[:num_models * 5].reshape(num_models, 5, 4, 2)
models = [SimpleMLP().eval() for _ in range(num_models)]
minibatch = minibatches[0]
predictions_diff_minibatch_loop = [model(minibatch) for model, minibatch in zip(models, minibatches)]
predictions2 = [model(minibatch) for model in models]

fmodel, params, buffers = combine_state_for_ensemble(models)
[p.requires_grad_() for p in params]
print("combined:", [tuple(p.shape) for p in params], [tuple(b.shape) for b in buffers])
predictions1_vmap = vmap(fmodel)(params, buffers, minibatches)
print("one minibatch per model:", tuple(predictions1_vmap.shape),
      torch.allclose(predictions1_vmap, torch.stack(predictions_diff_minibatch_loop), atol=1e-3, rtol=1e-5))
predictions2_vmap = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)
print("same minibatch:", torch.allclose(predictions2_vmap, torch.stack(predictions2), atol=1e-3, rtol=1e-5),
      round(predictions2_vmap.sum().item(), 5))
fbn, bparams, bbuffers = make_functional_with_buffers(models[0])
print("with buffers:", len(bparams), len(bbuffers), torch.allclose(fbn(bparams, bbuffers, minibatch), predictions2[0]))
try:
    make_functional(models[0])
except RuntimeError as e:
    print("RuntimeError:", e)
