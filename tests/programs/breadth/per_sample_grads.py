# PyTorch tutorials (torch.func): "Per-sample-gradients" and "Model
# ensembling" and "Jacobians, Hessians, hvp, vhp, and more".
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, vmap, grad, stack_module_state, jacrev, jacfwd, hessian
import copy

torch.manual_seed(0)

class SimpleCNN(nn.Module):
    def __init__(self):
        super(SimpleCNN, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.fc1 = nn.Linear(16 * 5 * 5, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output

def loss_fn(predictions, targets):
    return F.nll_loss(predictions, targets)

device = 'cpu'
num_models = 4
batch_size = 8
data = torch.randn(batch_size, 1, 14, 14, device=device)
targets = torch.randint(10, (8,), device=device)
model = SimpleCNN().to(device=device)
predictions = model(data)
loss = loss_fn(predictions, targets)
loss.backward()

def compute_grad(sample, target):
    sample = sample.unsqueeze(0)
    target = target.unsqueeze(0)
    prediction = model(sample)
    loss = loss_fn(prediction, target)
    return torch.autograd.grad(loss, list(model.parameters()))

def compute_sample_grads(data, targets):
    sample_grads = [compute_grad(data[i], targets[i]) for i in range(batch_size)]
    sample_grads = zip(*sample_grads)
    sample_grads = [torch.stack(shards) for shards in sample_grads]
    return sample_grads

per_sample_grads = compute_sample_grads(data, targets)
print(per_sample_grads[0].shape)

params = {k: v.detach() for k, v in model.named_parameters()}
buffers = {k: v.detach() for k, v in model.named_buffers()}

def compute_loss(params, buffers, sample, target):
    batch = sample.unsqueeze(0)
    targets = target.unsqueeze(0)
    predictions = functional_call(model, (params, buffers), (batch,))
    loss = F.nll_loss(predictions, targets)
    return loss

ft_compute_grad = grad(compute_loss)
ft_compute_sample_grad = vmap(ft_compute_grad, in_dims=(None, None, 0, 0))
ft_per_sample_grads = ft_compute_sample_grad(params, buffers, data, targets)
for per_sample_grad, ft_per_sample_grad in zip(per_sample_grads, ft_per_sample_grads.values()):
    assert torch.allclose(per_sample_grad, ft_per_sample_grad, atol=3e-3, rtol=1e-5)
print("per-sample grads match")

# ---- model ensembling ----
class SimpleMLP(nn.Module):
    def __init__(self):
        super(SimpleMLP, self).__init__()
        self.fc1 = nn.Linear(784, 32)
        self.fc2 = nn.Linear(32, 16)
        self.fc3 = nn.Linear(16, 10)

    def forward(self, x):
        x = x.flatten(1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.fc2(x)
        x = F.relu(x)
        x = self.fc3(x)
        return x

data = torch.randn(num_models, 16, 1, 28, 28, device=device)
targets = torch.randint(10, (6400,), device=device)
models = [SimpleMLP().to(device) for _ in range(num_models)]
minibatches = data[:num_models]
predictions_diff_minibatch_loop = [model(minibatch) for model, minibatch in zip(models, minibatches)]
minibatch = data[0]
predictions2 = [model(minibatch) for model in models]
params, buffers = stack_module_state(models)
base_model = copy.deepcopy(models[0])
# (the tutorial then moves base_model to the 'meta' device, which tracec lacks)

def fmodel(params, buffers, x):
    return functional_call(base_model, (params, buffers), (x,))

print([p.size(0) for p in params.values()])
minibatches = data[:num_models]
predictions1_vmap = vmap(fmodel)(params, buffers, minibatches)
assert torch.allclose(predictions1_vmap, torch.stack(predictions_diff_minibatch_loop), atol=1e-3, rtol=1e-5)
predictions2_vmap = vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)
assert torch.allclose(predictions2_vmap, torch.stack(predictions2), atol=1e-3, rtol=1e-5)
print("ensemble predictions match")

# ---- jacobians / hessians ----
def predict(weight, bias, x):
    return F.linear(x, weight, bias).tanh()

D = 16
weight = torch.randn(D, D)
bias = torch.randn(D)
x = torch.randn(D)  # feature vector
jacobian = jacrev(predict, argnums=2)(weight, bias, x)
print(jacobian.shape)

def compute_jac(xp):
    jacobian_rows = [torch.autograd.grad(predict(weight, bias, xp), xp, vec)[0]
                     for vec in unit_vectors]
    return torch.stack(jacobian_rows)

xp = x.clone().requires_grad_()
unit_vectors = torch.eye(D)
jacobian2 = compute_jac(xp)
assert torch.allclose(jacobian, jacobian2)
ft_jac_weight, ft_jac_bias = jacrev(predict, argnums=(0, 1))(weight, bias, x)
print(ft_jac_weight.shape, ft_jac_bias.shape)
jacfwd_out = jacfwd(predict, argnums=2)(weight, bias, x)
assert torch.allclose(jacfwd_out, jacobian, atol=1e-5)
hess0 = hessian(predict, argnums=2)(weight, bias, x)
hess1 = jacfwd(jacfwd(predict, argnums=2), argnums=2)(weight, bias, x)
hess2 = jacrev(jacrev(predict, argnums=2), argnums=2)(weight, bias, x)
print(hess0.shape, torch.allclose(hess0, hess1, atol=1e-5), torch.allclose(hess1, hess2, atol=1e-5))
batch_size = 4
x = torch.randn(batch_size, D)
compute_batch_jacobian = vmap(jacrev(predict, argnums=2), in_dims=(None, None, 0))
batch_jacobian0 = compute_batch_jacobian(weight, bias, x)
print(batch_jacobian0.shape)
def predict_with_output_summed(weight, bias, x):
    return predict(weight, bias, x).sum(0)
batch_jacobian1 = jacrev(predict_with_output_summed, argnums=2)(weight, bias, x).movedim(1, 0)
assert torch.allclose(batch_jacobian0, batch_jacobian1, atol=1e-6)
from torch.func import jvp, vjp
def hvp(f, primals, tangents):
    return jvp(grad(f), primals, tangents)[1]
def f(x):
    return x.sin().sum()
x = torch.randn(32)
tangent = torch.randn(32)
result = hvp(f, (x,), (tangent,))
print(result.shape, torch.allclose(result, -x.sin() * tangent, atol=1e-5))
