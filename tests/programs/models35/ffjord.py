# FFJORD on 2-D toy data the way rtqichen/ffjord writes it
# (lib/layers/odefunc.py, lib/layers/cnf.py, lib/layers/diffeq_layers/basic.py,
# lib/utils.py, lib/toy_data.py, train_toy.py): ConcatLinear_v2
# (self._layer(x) + self._hyper_bias(t.view(1, 1))) and ConcatSquashLinear
# in an ODEnet whose activation_fns ModuleList holds one shared
# NONLINEARITIES module, ODEfunc with divergence_approx (Hutchinson:
# torch.autograd.grad(f, y, e, create_graph=True), (e_dzdx * e).view(
# y.shape[0], -1).sum(dim=1)) and divergence_bf (one autograd.grad per
# dimension, used for 2-D data in eval mode), before_odeint resetting
# self._e and the _num_evals buffer, forward's torch.tensor(t).type_as(y),
# `with torch.set_grad_enabled(True):` y.requires_grad_(True) /
# t.requires_grad_(True), sample_gaussian_like / sample_rademacher_like
# (torch.randint(low=0, high=2, size=y.shape).to(y) * 2 - 1), the CNF
# (the sqrt_end_time buffer, integration_times torch.tensor([0.0,
# sqrt_end_time * sqrt_end_time]).to(z), the tuple state (z, logpz)),
# standard_normal_logprob, compute_loss's -torch.mean(logpz - delta_logp),
# RunningAverageMeter and Adam. Changes for a CPU test: torchdiffeq's
# odeint(..., method='rk4') written out as torchdiffeq's fixed-grid solver
# does it (tuple states flattened into one tensor, rk4_alt_step_func's 3/8
# rule, step_size option), the Hutchinson noise drawn from numpy and handed
# to before_odeint (torch.randn_like's draw is printed as [rng] only),
# 8gaussians from numpy, tiny widths, a few iterations; then one training
# step under torch.compile against the same step eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn

_one_third = 1 / 3
_two_thirds = 2 / 3


# torchdiffeq, fixed grid rk4 ----------------------------------------------------
def rk4_alt_step_func(func, t0, dt, t1, y0, f0=None):
    """Smaller error with slightly more compute."""
    k1 = f0
    if k1 is None:
        k1 = func(t0, y0)
    k2 = func(t0 + dt * _one_third, y0 + dt * k1 * _one_third)
    k3 = func(t0 + dt * _two_thirds, y0 + dt * (k2 - k1 * _one_third))
    k4 = func(t1, y0 + dt * (k1 - k2 + k3))
    return (k1 + 3 * (k2 + k3) + k4) * dt * 0.125


def _flat_to_shape(tensor, length, shapes):
    tensor_list = []
    total = 0
    for shape in shapes:
        next_total = total + shape.numel()
        tensor_list.append(tensor[..., total:next_total].view((*length, *shape)))
        total = next_total
    return tuple(tensor_list)


class _TupleFunc(torch.nn.Module):
    def __init__(self, base_func, shapes):
        super(_TupleFunc, self).__init__()
        self.base_func = base_func
        self.shapes = shapes

    def forward(self, t, y):
        f = self.base_func(t, _flat_to_shape(y, (), self.shapes))
        return torch.cat([f_.reshape(-1) for f_ in f])


def odeint(func, y0, t, rtol=1e-7, atol=1e-9, method='rk4', options=None):
    shapes = [y0_.shape for y0_ in y0]
    y0 = torch.cat([y0_.reshape(-1) for y0_ in y0])
    func = _TupleFunc(func, shapes)
    step_size = options['step_size']
    niters = torch.ceil((t[-1] - t[0]) / step_size + 1).item()
    grid = torch.arange(0, niters, dtype=t.dtype, device=t.device) * step_size + t[0]
    grid[-1] = t[-1]
    solution = torch.empty(len(t), *y0.shape, dtype=y0.dtype, device=y0.device)
    solution[0] = y0
    j = 1
    y0_ = y0
    for t0, t1 in zip(grid[:-1], grid[1:]):
        dt = t1 - t0
        dy = rk4_alt_step_func(func, t0, dt, t1, y0_)
        y1 = y0_ + dy
        while j < len(t) and t1 >= t[j]:
            solution[j] = y1
            j += 1
        y0_ = y1
    return _flat_to_shape(solution, (len(t),), shapes)


# lib/layers/diffeq_layers/basic.py ------------------------------------------------
class ConcatLinear_v2(nn.Module):
    def __init__(self, dim_in, dim_out):
        super(ConcatLinear_v2, self).__init__()
        self._layer = nn.Linear(dim_in, dim_out)
        self._hyper_bias = nn.Linear(1, dim_out, bias=False)

    def forward(self, t, x):
        return self._layer(x) + self._hyper_bias(t.view(1, 1))


class ConcatSquashLinear(nn.Module):
    def __init__(self, dim_in, dim_out):
        super(ConcatSquashLinear, self).__init__()
        self._layer = nn.Linear(dim_in, dim_out)
        self._hyper_bias = nn.Linear(1, dim_out, bias=False)
        self._hyper_gate = nn.Linear(1, dim_out)

    def forward(self, t, x):
        return self._layer(x) * torch.sigmoid(self._hyper_gate(t.view(1, 1))) \
            + self._hyper_bias(t.view(1, 1))


# lib/layers/odefunc.py -------------------------------------------------------------
NONLINEARITIES = {
    "tanh": nn.Tanh(),
    "relu": nn.ReLU(),
    "softplus": nn.Softplus(),
    "elu": nn.ELU(),
}


def divergence_bf(dx, y, **unused_kwargs):
    sum_diag = 0.
    for i in range(y.shape[1]):
        sum_diag += torch.autograd.grad(dx[:, i].sum(), y, create_graph=True)[0].contiguous()[:, i].contiguous()
    return sum_diag.contiguous()


def divergence_approx(f, y, e=None):
    e_dzdx = torch.autograd.grad(f, y, e, create_graph=True)[0]
    e_dzdx_e = e_dzdx * e
    approx_tr_dzdx = e_dzdx_e.view(y.shape[0], -1).sum(dim=1)
    return approx_tr_dzdx


def sample_rademacher_like(y):
    return torch.randint(low=0, high=2, size=y.shape).to(y) * 2 - 1


def sample_gaussian_like(y):
    return torch.randn_like(y)


class ODEnet(nn.Module):
    def __init__(self, hidden_dims, input_shape, layer_type="concat_v2", nonlinearity="softplus"):
        super(ODEnet, self).__init__()
        base_layer = {
            "concat_v2": ConcatLinear_v2,
            "concatsquash": ConcatSquashLinear,
        }[layer_type]

        # build layers and add them
        layers = []
        activation_fns = []
        hidden_shape = input_shape

        for dim_out in hidden_dims + (input_shape[0],):
            layer = base_layer(hidden_shape[0], dim_out)
            layers.append(layer)
            activation_fns.append(NONLINEARITIES[nonlinearity])

            hidden_shape = list(copy.copy(hidden_shape))
            hidden_shape[0] = dim_out

        self.layers = nn.ModuleList(layers)
        self.activation_fns = nn.ModuleList(activation_fns[:-1])

    def forward(self, t, y):
        dx = y
        for l, layer in enumerate(self.layers):
            dx = layer(t, dx)
            # if not last layer, use nonlinearity
            if l < len(self.layers) - 1:
                dx = self.activation_fns[l](dx)
        return dx


class ODEfunc(nn.Module):

    def __init__(self, diffeq, divergence_fn="approximate", residual=False, rademacher=False):
        super(ODEfunc, self).__init__()
        assert divergence_fn in ("brute_force", "approximate")

        self.diffeq = diffeq
        self.residual = residual
        self.rademacher = rademacher

        if divergence_fn == "brute_force":
            self.divergence_fn = divergence_bf
        elif divergence_fn == "approximate":
            self.divergence_fn = divergence_approx

        self.register_buffer("_num_evals", torch.tensor(0.))

    def before_odeint(self, e=None):
        self._e = e
        self._num_evals.fill_(0)

    def num_evals(self):
        return self._num_evals.item()

    def forward(self, t, states):
        assert len(states) >= 2
        y = states[0]

        # increment num evals
        self._num_evals += 1

        # convert to tensor
        t = torch.tensor(t).type_as(y)
        batchsize = y.shape[0]

        # Sample and fix the noise.
        if self._e is None:
            if self.rademacher:
                self._e = sample_rademacher_like(y)
            else:
                self._e = sample_gaussian_like(y)

        with torch.set_grad_enabled(True):
            y.requires_grad_(True)
            t.requires_grad_(True)
            for s_ in states[2:]:
                s_.requires_grad_(True)
            dy = self.diffeq(t, y, *states[2:])
            # Hack for 2D data to use brute force divergence computation.
            if not self.training and dy.view(dy.shape[0], -1).shape[1] == 2:
                divergence = divergence_bf(dy, y).view(batchsize, 1)
            else:
                divergence = self.divergence_fn(dy, y, e=self._e).view(batchsize, 1)
        if self.residual:
            dy = dy - y
            divergence -= torch.ones_like(divergence) * torch.tensor(np.prod(y.shape[1:]), dtype=torch.float32
                                                                     ).to(divergence)
        return tuple([dy, -divergence] + [torch.zeros_like(s_).requires_grad_(True) for s_ in states[2:]])


# lib/layers/cnf.py -------------------------------------------------------------------
NOISE = [None]


class CNF(nn.Module):
    def __init__(self, odefunc, T=1.0, train_T=False, solver='rk4', step_size=0.25):
        super(CNF, self).__init__()
        if train_T:
            self.register_parameter("sqrt_end_time", nn.Parameter(torch.sqrt(torch.tensor(T))))
        else:
            self.register_buffer("sqrt_end_time", torch.sqrt(torch.tensor(T)))
        self.odefunc = odefunc
        self.solver = solver
        self.atol = 1e-5
        self.rtol = 1e-5
        self.solver_options = {"step_size": step_size}

    def forward(self, z, logpz=None, integration_times=None, reverse=False):

        if logpz is None:
            _logpz = torch.zeros(z.shape[0], 1).to(z)
        else:
            _logpz = logpz

        if integration_times is None:
            integration_times = torch.tensor([0.0, self.sqrt_end_time * self.sqrt_end_time]).to(z)
        if reverse:
            integration_times = _flip(integration_times, 0)

        # Refresh the odefunc statistics (the noise from numpy, see NOISE).
        self.odefunc.before_odeint(e=NOISE[0])

        state_t = odeint(
            self.odefunc,
            (z, _logpz),
            integration_times.to(z),
            atol=self.atol,
            rtol=self.rtol,
            method=self.solver,
            options=self.solver_options,
        )

        if len(integration_times) == 2:
            state_t = tuple(s[1] for s in state_t)

        z_t, logpz_t = state_t[:2]

        if logpz is not None:
            return z_t, logpz_t
        else:
            return z_t

    def num_evals(self):
        return self.odefunc._num_evals.item()


def _flip(x, dim):
    indices = [slice(None)] * x.dim()
    indices[dim] = torch.arange(x.size(dim) - 1, -1, -1, dtype=torch.long, device=x.device)
    return x[tuple(indices)]


# lib/utils.py, lib/toy_data.py, train_toy.py ----------------------------------------
class RunningAverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self, momentum=0.99):
        self.momentum = momentum
        self.reset()

    def reset(self):
        self.val = None
        self.avg = 0

    def update(self, val):
        if self.val is None:
            self.avg = val
        else:
            self.avg = self.avg * self.momentum + val * (1 - self.momentum)
        self.val = val


def inf_train_gen(data, rng=None, batch_size=200):
    if rng is None:
        rng = np.random.RandomState()
    if data == "8gaussians":
        scale = 4.
        centers = [(1, 0), (-1, 0), (0, 1), (0, -1), (1. / np.sqrt(2), 1. / np.sqrt(2)),
                   (1. / np.sqrt(2), -1. / np.sqrt(2)), (-1. / np.sqrt(2),
                                                         1. / np.sqrt(2)), (-1. / np.sqrt(2), -1. / np.sqrt(2))]
        centers = [(scale * x, scale * y) for x, y in centers]

        dataset = []
        for i in range(batch_size):
            point = rng.randn(2) * 0.5
            idx = rng.randint(8)
            center = centers[idx]
            point[0] += center[0]
            point[1] += center[1]
            dataset.append(point)
        dataset = np.array(dataset, dtype="float32")
        dataset /= 1.414
        return dataset
    raise ValueError(data)


def standard_normal_logprob(z):
    logZ = -0.5 * math.log(2 * math.pi)
    return logZ - z.pow(2) / 2


def compute_loss(model, x):
    zero = torch.zeros(x.shape[0], 1).to(x)

    # transform to z
    z, delta_logp = model(x, zero)

    # compute log q(z)
    logpz = standard_normal_logprob(z).sum(1, keepdim=True)

    logpx = logpz - delta_logp
    loss = -torch.mean(logpx)
    return loss


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed, std=0.4):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


data_rng = np.random.RandomState(0)
noise_rng = np.random.default_rng(1)
batch_size = 16

torch.manual_seed(0)
diffeq = ODEnet(hidden_dims=(16, 16), input_shape=(2,), layer_type="concat_v2", nonlinearity="tanh")
odefunc = ODEfunc(diffeq=diffeq, divergence_fn="approximate", residual=False, rademacher=False)
model = CNF(odefunc=odefunc, T=0.5, train_T=False, solver='rk4', step_size=0.25)
load_numpy(model, 0)
print(model.odefunc.diffeq.activation_fns, model.sqrt_end_time.item() ** 2 == 0.5)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-5)
loss_meter = RunningAverageMeter(0.93)
nfef_meter = RunningAverageMeter(0.93)

for itr in range(1, 4):
    optimizer.zero_grad()
    x = torch.from_numpy(inf_train_gen("8gaussians", data_rng, batch_size)).type(torch.float32)
    NOISE[0] = torch.from_numpy(noise_rng.normal(0, 1, (batch_size, 2)).astype(np.float32))
    loss = compute_loss(model, x)
    loss_meter.update(loss.item())
    nfe_forward = model.num_evals()
    loss.backward()
    optimizer.step()
    nfef_meter.update(nfe_forward)
    print('Iter {:04d} | Loss {:.4f}({:.4f}) | NFE Forward {:.0f}({:.1f})'.format(
        itr, loss_meter.val, loss_meter.avg, nfef_meter.val, nfef_meter.avg))
print("grad", fmt(diffeq.layers[0]._hyper_bias.weight.grad), fmt(diffeq.layers[-1]._layer.weight.grad))

# the two divergences agree in expectation; brute force is exact
with torch.no_grad():
    y = torch.from_numpy(inf_train_gen("8gaussians", data_rng, 4))
with torch.set_grad_enabled(True):
    y.requires_grad_(True)
    t = torch.tensor(0.25).requires_grad_(True)
    dy = diffeq(t, y)
    bf = divergence_bf(dy, y)
    e1, e2 = torch.tensor([[1.0, 0.0]]).expand(4, 2), torch.tensor([[0.0, 1.0]]).expand(4, 2)
    ap = divergence_approx(dy, y, e1) + divergence_approx(dy, y, e2)
print("divergence", fmt(bf), torch.allclose(bf, ap, atol=1e-5), bf.requires_grad)
r = sample_rademacher_like(y)
print("rademacher", tuple(r.shape), r.dtype, sorted(set(r.reshape(-1).tolist())) in ([-1.0, 1.0], [-1.0], [1.0]))
print("gaussian", tuple(sample_gaussian_like(y).shape))

# evaluation: brute-force divergence for 2-D data in eval mode
model.eval()
x_test = torch.from_numpy(inf_train_gen("8gaussians", data_rng, 8))
NOISE[0] = None
test_loss = compute_loss(model, x_test)
print("test", f"{test_loss.item():.4f}", "nfe", model.num_evals(), model.odefunc._e is not None)
model.train()
ssl = ConcatSquashLinear(2, 3)
load_numpy(ssl, 5)
print("squash", fmt(ssl(torch.tensor(0.5), x_test[:2])))


# one training step under torch.compile against the same step eagerly (the
# noise tensor is refilled in place before each call)
def train_step(x):
    optimizer.zero_grad()
    loss = compute_loss(model, x)
    loss.backward()
    optimizer.step()
    return loss


def run(step, x, e):
    NOISE[0].copy_(e)
    return step(x).item()


xs = [torch.from_numpy(inf_train_gen("8gaussians", data_rng, batch_size)) for _ in range(2)]
es = [torch.from_numpy(noise_rng.normal(0, 1, (batch_size, 2)).astype(np.float32)) for _ in range(2)]
NOISE[0] = torch.zeros(batch_size, 2)
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [run(train_step, x, e) for x, e in zip(xs, es)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [run(cstep, x, e) for x, e in zip(xs, es)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
