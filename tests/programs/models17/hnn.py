# greydanus/hamiltonian-nn: nn_models.py (MLP with orthogonal_ init, a
# bias-free last layer), hnn.py (HNN: forward splits the two scalar fields,
# time_derivative takes torch.autograd.grad(F.sum(), x, create_graph=True)
# and multiplies by the permutation tensor, the Levi-Civita form built with
# strided in-place sign flips, rk4_time_derivative), experiment-spring's
# train loop (L2_loss on the symplectic gradient, backward through the
# gradient, Adam with weight_decay, the flattened gradient norm) and the
# integration of a trajectory with the learned field.  Changes for a CPU
# test: a small MLP, spring data from numpy, the batch indices from numpy
# (torch.randperm draws differ in tracec), a few steps; then one training
# step under torch.compile against the same step eagerly.
import copy

import numpy as np
import torch


def choose_nonlinearity(name):
    nl = None
    if name == 'tanh':
        nl = torch.tanh
    elif name == 'relu':
        nl = torch.relu
    elif name == 'sigmoid':
        nl = torch.sigmoid
    elif name == 'softplus':
        nl = torch.nn.functional.softplus
    elif name == 'selu':
        nl = torch.nn.functional.selu
    elif name == 'elu':
        nl = torch.nn.functional.elu
    elif name == 'swish':
        nl = lambda x: x * torch.sigmoid(x)
    else:
        raise ValueError("nonlinearity not recognized")
    return nl


class MLP(torch.nn.Module):
    '''Just a salt-of-the-earth MLP'''
    def __init__(self, input_dim, hidden_dim, output_dim, nonlinearity='tanh'):
        super(MLP, self).__init__()
        self.linear1 = torch.nn.Linear(input_dim, hidden_dim)
        self.linear2 = torch.nn.Linear(hidden_dim, hidden_dim)
        self.linear3 = torch.nn.Linear(hidden_dim, output_dim, bias=None)

        for l in [self.linear1, self.linear2, self.linear3]:
            torch.nn.init.orthogonal_(l.weight)  # use a principled initialization

        self.nonlinearity = choose_nonlinearity(nonlinearity)

    def forward(self, x, separate_fields=False):
        h = self.nonlinearity(self.linear1(x))
        h = self.nonlinearity(self.linear2(h))
        return self.linear3(h)


def rk4(fun, y0, t, dt, *args, **kwargs):
    dt2 = dt / 2.0
    k1 = fun(y0, t, *args, **kwargs)
    k2 = fun(y0 + dt2 * k1, t + dt2, *args, **kwargs)
    k3 = fun(y0 + dt2 * k2, t + dt2, *args, **kwargs)
    k4 = fun(y0 + dt * k3, t + dt, *args, **kwargs)
    dy = dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)
    return dy


class HNN(torch.nn.Module):
    '''Learn arbitrary vector fields that are sums of conservative and solenoidal fields'''
    def __init__(self, input_dim, differentiable_model, field_type='solenoidal',
                 baseline=False, assume_canonical_coords=True):
        super(HNN, self).__init__()
        self.baseline = baseline
        self.differentiable_model = differentiable_model
        self.assume_canonical_coords = assume_canonical_coords
        self.M = self.permutation_tensor(input_dim)  # Levi-Civita permutation tensor
        self.field_type = field_type

    def forward(self, x):
        # traditional forward pass
        if self.baseline:
            return self.differentiable_model(x)

        y = self.differentiable_model(x)
        assert y.dim() == 2 and y.shape[1] == 2, "Output tensor should have shape [batch_size, 2]"
        return y.split(1, 1)

    def rk4_time_derivative(self, x, dt):
        return rk4(fun=self.time_derivative, y0=x, t=0, dt=dt)

    def time_derivative(self, x, t=None, separate_fields=False):
        '''NEURAL ODE-STLE VECTOR FIELD'''
        if self.baseline:
            return self.differentiable_model(x)

        '''NEURAL HAMILTONIAN-STLE VECTOR FIELD'''
        F1, F2 = self.forward(x)  # traditional forward pass

        conservative_field = torch.zeros_like(x)  # start out with both components set to 0
        solenoidal_field = torch.zeros_like(x)

        if self.field_type != 'solenoidal':
            dF1 = torch.autograd.grad(F1.sum(), x, create_graph=True)[0]  # gradients for conservative field
            conservative_field = dF1 @ torch.eye(*self.M.shape)

        if self.field_type != 'conservative':
            dF2 = torch.autograd.grad(F2.sum(), x, create_graph=True)[0]  # gradients for solenoidal field
            solenoidal_field = dF2 @ self.M.t()

        if separate_fields:
            return [conservative_field, solenoidal_field]

        return conservative_field + solenoidal_field

    def permutation_tensor(self, n):
        M = None
        if self.assume_canonical_coords:
            M = torch.eye(n)
            M = torch.cat([M[n // 2:], -M[:n // 2]])
        else:
            '''Constructs the Levi-Civita permutation tensor'''
            M = torch.ones(n, n)  # matrix of ones
            M *= 1 - torch.eye(n)  # clear diagonals
            M[::2] *= -1  # pattern of signs
            M[:, ::2] *= -1

            for i in range(n):  # make asymmetric
                for j in range(i + 1, n):
                    M[i, j] *= -1
        return M


def L2_loss(u, v):
    return (u - v).pow(2).mean()


# ---- experiment-spring/data.py, with numpy noise ----
def hamiltonian_fn(coords):
    q, p = np.split(coords, 2)
    H = p ** 2 + q ** 2  # spring hamiltonian (linear oscillator)
    return H


def dynamics_fn(t, coords):
    q, p = np.split(coords, 2)
    dcoords = np.concatenate([2 * p, -2 * q], axis=-1)  # the symplectic gradient of p**2 + q**2
    return dcoords


def get_dataset(rng, samples=16, noise_std=0.1):
    xs, dxs = [], []
    for s in range(samples):
        radius = rng.random() + 0.1
        t = np.linspace(0, 3, 8)
        y0 = rng.random(2) * 2 - 1
        y0 = y0 / np.sqrt((y0 ** 2).sum()) * radius
        q, p = y0[0] * np.cos(2 * t) + y0[1] * np.sin(2 * t), -y0[0] * np.sin(2 * t) + y0[1] * np.cos(2 * t)
        x = np.stack([q, p], axis=1)
        dx = np.stack([dynamics_fn(None, c) for c in x])
        x = x + rng.normal(size=x.shape) * noise_std
        xs.append(x)
        dxs.append(dx)
    data = {'x': np.concatenate(xs), 'dx': np.concatenate(dxs)}
    split_ix = int(len(data['x']) * 0.75)
    split_data = {}
    for k in ['x', 'dx']:
        split_data[k], split_data['test_' + k] = data[k][:split_ix], data[k][split_ix:]
    return split_data


def init_from_numpy(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(r.normal(0, 0.5, tuple(p.shape)).astype(np.float32)))


rng = np.random.default_rng(0)
torch.manual_seed(0)
nn_model = MLP(2, 32, 2, 'tanh')
w = nn_model.linear2.weight
print("orthogonal_", tuple(w.shape), torch.allclose(w @ w.t(), torch.eye(32), atol=1e-4))
model = HNN(2, differentiable_model=nn_model, field_type='solenoidal')
print("M canonical", model.M.tolist())
print("M levi-civita", HNN(4, MLP(4, 8, 2), assume_canonical_coords=False).M.tolist())
init_from_numpy(model, 1)
optim = torch.optim.Adam(model.parameters(), 1e-2, weight_decay=1e-4)

data = get_dataset(rng)
x = torch.tensor(data['x'], requires_grad=True, dtype=torch.float32)
test_x = torch.tensor(data['test_x'], requires_grad=True, dtype=torch.float32)
dxdt = torch.Tensor(data['dx'])
test_dxdt = torch.Tensor(data['test_dx'])
print("data", tuple(x.shape), tuple(test_x.shape), dxdt.dtype)

stats = {'train_loss': [], 'test_loss': []}
batch_size = 32
for step in range(31):
    # train step
    ixs = torch.from_numpy(rng.permutation(x.shape[0])[:batch_size])
    dxdt_hat = model.time_derivative(x[ixs])
    loss = L2_loss(dxdt[ixs], dxdt_hat)
    loss.backward()
    grad = torch.cat([p.grad.flatten() for p in model.parameters()]).clone()
    optim.step()
    optim.zero_grad()

    # run test data
    test_ixs = torch.from_numpy(rng.permutation(test_x.shape[0])[:batch_size])
    test_dxdt_hat = model.time_derivative(test_x[test_ixs])
    test_loss = L2_loss(test_dxdt[test_ixs], test_dxdt_hat)

    # logging
    stats['train_loss'].append(loss.item())
    stats['test_loss'].append(test_loss.item())
    if step % 10 == 0:
        print("step {}, train_loss {:.4e}, test_loss {:.4e}, grad norm {:.4e}, grad std {:.4e}"
              .format(step, loss.item(), test_loss.item(), grad @ grad, grad.std()))

train_dxdt_hat = model.time_derivative(x)
train_dist = (dxdt - train_dxdt_hat) ** 2
test_dxdt_hat = model.time_derivative(test_x)
test_dist = (test_dxdt - test_dxdt_hat) ** 2
print('Final train loss {:.4e} +/- {:.4e}\nFinal test loss {:.4e} +/- {:.4e}'
      .format(train_dist.mean().item(), train_dist.std().item() / np.sqrt(train_dist.shape[0]),
              test_dist.mean().item(), test_dist.std().item() / np.sqrt(test_dist.shape[0])))

# both fields, separately, and the rk4 step of the learned field
both = HNN(2, differentiable_model=model.differentiable_model, field_type='both')
cons, sol = both.time_derivative(test_x[:5], separate_fields=True)
print("fields", f"{cons.abs().sum().item():.5f}", f"{sol.abs().sum().item():.5f}",
      torch.allclose(sol, model.time_derivative(test_x[:5])))
F1, F2 = model(test_x[:3])
print("scalar fields", tuple(F1.shape), [f"{v:.5f}" for v in F2.flatten().tolist()])


# integrate a trajectory with the learned field (as integrate_model does, with rk4)
def integrate_model(model, y0, steps, dt):
    ys = [y0]
    y = torch.tensor(y0, requires_grad=True, dtype=torch.float32).view(1, 2)
    for _ in range(steps):
        y = (y + model.rk4_time_derivative(y, dt)).detach().requires_grad_()
        ys.append(y.detach().numpy().reshape(-1))
    return np.stack(ys)


traj = integrate_model(model, np.array([1.0, 0.0], dtype=np.float32), 10, 0.1)
true_e = hamiltonian_fn(traj.T).ravel()
print("trajectory", traj.shape, [f"{v:.4f}" for v in traj[-1]], f"energy {true_e[0]:.4f} -> {true_e[-1]:.4f}")
with torch.no_grad():
    try:
        model.time_derivative(test_x[:2].detach())
    except RuntimeError as e:
        print("no_grad:", e)


# one training step under torch.compile against the same step eagerly
def train_step(xb, dxb):
    optim.zero_grad(set_to_none=True)
    dxdt_hat = model.time_derivative(xb)
    loss = L2_loss(dxb, dxdt_hat)
    loss.backward()
    optim.step()
    return loss


xb = x[:16].detach().requires_grad_()
dxb = dxdt[:16]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optim.state_dict())
eager = [train_step(xb, dxb).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optim.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(xb, dxb).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
