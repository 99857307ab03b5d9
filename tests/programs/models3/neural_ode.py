# rtqichen/torchdiffeq examples/ode_demo.py (learning the spiral dy/dt =
# (y**3) A with an ODEFunc MLP, RMSprop, RunningAverageMeter) with the
# fixed-grid solver that torchdiffeq's odeint(method='rk4') runs, written
# out: FixedGridODESolver.integrate (a preallocated solution filled by
# index assignment, linear interpolation onto the output times, the
# step_size grid constructor) and rk4_alt_step_func (the 3/8 rule).  The
# reference trajectory is rk4 with a finer step instead of dopri5; the batch
# choice is numpy's (np.random.choice, as in the demo) under a fixed seed.
# Then the training step under torch.compile against the same step eagerly.
import argparse
import copy
import time

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

parser = argparse.ArgumentParser('ODE demo')
parser.add_argument('--method', type=str, choices=['dopri5', 'adams', 'rk4'], default='rk4')
parser.add_argument('--data_size', type=int, default=1000)
parser.add_argument('--batch_time', type=int, default=10)
parser.add_argument('--batch_size', type=int, default=20)
parser.add_argument('--niters', type=int, default=2000)
parser.add_argument('--test_freq', type=int, default=20)
parser.add_argument('--viz', action='store_true')
parser.add_argument('--gpu', type=int, default=0)
parser.add_argument('--adjoint', action='store_true')
args = parser.parse_args(['--data_size', '60', '--batch_time', '5', '--batch_size', '8',
                          '--niters', '6', '--test_freq', '2'])

device = torch.device('cuda:' + str(args.gpu) if torch.cuda.is_available() else 'cpu')


# --- torchdiffeq/_impl/rk_common.py, fixed_grid.py, solvers.py (rk4 only) ---
_one_third = 1 / 3
_two_thirds = 2 / 3
_one_sixth = 1 / 6


def rk4_alt_step_func(func, t0, dt, t1, y0, f0=None):
    """Smaller error with slightly more compute."""
    k1 = f0
    if k1 is None:
        k1 = func(t0, y0)
    k2 = func(t0 + dt * _one_third, y0 + dt * k1 * _one_third)
    k3 = func(t0 + dt * _two_thirds, y0 + dt * (k2 - k1 * _one_third))
    k4 = func(t1, y0 + dt * (k1 - k2 + k3))
    return (k1 + 3 * (k2 + k3) + k4) * dt * 0.125


class FixedGridODESolver(object):
    order = 4

    def __init__(self, func, y0, step_size=None, grid_constructor=None, interp="linear"):
        self.func = func
        self.y0 = y0
        self.dtype = y0.dtype
        self.device = y0.device
        self.step_size = step_size
        self.interp = interp

        if step_size is None:
            if grid_constructor is None:
                self.grid_constructor = lambda f, y0, t: t
            else:
                self.grid_constructor = grid_constructor
        else:
            if grid_constructor is None:
                self.grid_constructor = self._grid_constructor_from_step_size(step_size)
            else:
                raise ValueError("step_size and grid_constructor are mutually exclusive arguments.")

    @staticmethod
    def _grid_constructor_from_step_size(step_size):
        def _grid_constructor(func, y0, t):
            start_time = t[0]
            end_time = t[-1]

            niters = torch.ceil((end_time - start_time) / step_size + 1).item()
            t_infer = torch.arange(0, niters, dtype=t.dtype, device=t.device) * step_size + start_time
            t_infer[-1] = t[-1]

            return t_infer
        return _grid_constructor

    def _step_func(self, func, t0, dt, t1, y0):
        f0 = func(t0, y0)
        return rk4_alt_step_func(func, t0, dt, t1, y0, f0=f0), f0

    def integrate(self, t):
        time_grid = self.grid_constructor(self.func, self.y0, t)
        assert time_grid[0] == t[0] and time_grid[-1] == t[-1]

        solution = torch.empty(len(t), *self.y0.shape, dtype=self.y0.dtype, device=self.y0.device)
        solution[0] = self.y0

        j = 1
        y0 = self.y0
        for t0, t1 in zip(time_grid[:-1], time_grid[1:]):
            dt = t1 - t0
            dy, f0 = self._step_func(self.func, t0, dt, t1, y0)
            y1 = y0 + dy

            while j < len(t) and t1 >= t[j]:
                solution[j] = self._linear_interp(t0, t1, y0, y1, t[j])
                j += 1

            y0 = y1

        return solution

    def _linear_interp(self, t0, t1, y0, y1, t):
        if t == t0:
            return y0
        if t == t1:
            return y1
        slope = (t - t0) / (t1 - t0)
        return y0 + slope * (y1 - y0)


def odeint(func, y0, t, *, rtol=1e-7, atol=1e-9, method=None, options=None):
    if method != 'rk4':
        raise ValueError('Invalid method "{}". Only "rk4" is written out here.'.format(method))
    if options is None:
        options = {}
    if not (t[1:] > t[:-1]).all():
        raise ValueError("t must be strictly increasing")
    solver = FixedGridODESolver(func=func, y0=y0, **options)
    return solver.integrate(t)


# --- examples/ode_demo.py ---------------------------------------------------
true_y0 = torch.tensor([[2., 0.]]).to(device)
t = torch.linspace(0., 6., args.data_size).to(device)
true_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]]).to(device)


class Lambda(nn.Module):

    def forward(self, t, y):
        return torch.mm(y**3, true_A)


with torch.no_grad():
    true_y = odeint(Lambda(), true_y0, t, method='rk4', options=dict(step_size=0.025))
print("true_y", tuple(true_y.shape), [f"{v:.5f}" for v in true_y[-1, 0].tolist()],
      f"{true_y.abs().sum().item():.4f}")

np.random.seed(0)


def get_batch():
    s = torch.from_numpy(np.random.choice(np.arange(args.data_size - args.batch_time, dtype=np.int64), args.batch_size, replace=False))
    batch_y0 = true_y[s]  # (M, D)
    batch_t = t[:args.batch_time]  # (T)
    batch_y = torch.stack([true_y[s + i] for i in range(args.batch_time)], dim=0)  # (T, M, D)
    return batch_y0.to(device), batch_t.to(device), batch_y.to(device)


class ODEFunc(nn.Module):

    def __init__(self):
        super(ODEFunc, self).__init__()

        self.net = nn.Sequential(
            nn.Linear(2, 50),
            nn.Tanh(),
            nn.Linear(50, 2),
        )

        for m in self.net.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0, std=0.1)
                nn.init.constant_(m.bias, val=0)

    def forward(self, t, y):
        return self.net(y**3)


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


ii = 0

func = ODEFunc().to(device)
g = np.random.default_rng(1)
with torch.no_grad():
    for p in func.parameters():  # nn.init.normal_'s draws differ: numpy's
        p.copy_(torch.from_numpy((0.1 * g.standard_normal(p.shape) + (0.05 if p.dim() == 1 else 0)).astype(np.float32)))

optimizer = optim.RMSprop(func.parameters(), lr=1e-3)
end = time.time()

time_meter = RunningAverageMeter(0.97)

loss_meter = RunningAverageMeter(0.97)

batch_y0, batch_t, batch_y = get_batch()
pred_y = odeint(func, batch_y0, batch_t, method='rk4')
loss = torch.mean(torch.abs(pred_y - batch_y))
loss.backward()
print(f"first loss {loss.item():.6f}", tuple(pred_y.shape))
for name, p in func.named_parameters():
    print(f"grad {name} {p.grad.norm().item():.5e}")

for itr in range(1, args.niters + 1):
    optimizer.zero_grad()
    batch_y0, batch_t, batch_y = get_batch()
    pred_y = odeint(func, batch_y0, batch_t, method='rk4').to(device)
    loss = torch.mean(torch.abs(pred_y - batch_y))
    loss.backward()
    optimizer.step()

    time_meter.update(time.time() - end)
    loss_meter.update(loss.item())

    if itr % args.test_freq == 0:
        with torch.no_grad():
            pred_y = odeint(func, true_y0, t, method='rk4')
            loss = torch.mean(torch.abs(pred_y - true_y))
            print('Iter {:04d} | Total Loss {:.6f} | Running {:.6f}'.format(itr, loss.item(), loss_meter.avg))
            ii += 1

    end = time.time()

# the training step under torch.compile (the solver's loop over the time grid
# is Python over tensor values: it unrolls at trace time)


def train_step(batch_y0, batch_t, batch_y):
    optimizer.zero_grad()
    pred_y = odeint(func, batch_y0, batch_t, method='rk4')
    loss = torch.mean(torch.abs(pred_y - batch_y))
    loss.backward()
    optimizer.step()
    return loss


batch_y0, batch_t, batch_y = get_batch()
state, opt_state = copy.deepcopy(func.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(batch_y0, batch_t, batch_y).item() for _ in range(3)]
after = copy.deepcopy(func.state_dict())
func.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(batch_y0, batch_t, batch_y).item() for _ in range(3)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(func.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
