# rtqichen/torchdiffeq's examples/ode_demo.py (the spiral fitted by a
# neural ODE), with the library itself from PyPI: odeint through dopri5 on
# the true dynamics, an ODEFunc MLP trained by RMSprop through the solver,
# then the adjoint method and the fixed-step and other adaptive solvers.
# Changed for a CPU test: 20 time points instead of 1000, 3 iterations
# instead of 2000, fixed batch starts, no plotting, and looser tolerances
# (rtol/atol options) so that each solve takes tens of steps, not thousands.
import torch
import torch.nn as nn
from torchdiffeq import odeint, odeint_adjoint

torch.manual_seed(0)
true_y0 = torch.tensor([[2., 0.]])
t = torch.linspace(0., 2., 20)
true_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]])


class Lambda(nn.Module):

    def forward(self, t, y):
        return torch.mm(y**3, true_A)


with torch.no_grad():
    true_y = odeint(Lambda(), true_y0, t, method='dopri5', rtol=1e-5, atol=1e-6)
print(true_y.shape, true_y[-1])


def get_batch(batch_time=5, batch_size=4):
    s = torch.from_numpy(__import__('numpy').array([0, 3, 7, 11])[:batch_size])
    batch_y0 = true_y[s]  # (M, D)
    batch_t = t[:batch_time]  # (T)
    batch_y = torch.stack([true_y[s + i] for i in range(batch_time)], dim=0)  # (T, M, D)
    return batch_y0, batch_t, batch_y


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


func = ODEFunc()
optimizer = torch.optim.RMSprop(func.parameters(), lr=1e-3)
for itr in range(1, 4):
    optimizer.zero_grad()
    batch_y0, batch_t, batch_y = get_batch()
    pred_y = odeint(func, batch_y0, batch_t, rtol=1e-4, atol=1e-5)
    loss = torch.mean(torch.abs(pred_y - batch_y))
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        pred_y = odeint(func, true_y0, t, rtol=1e-4, atol=1e-5)
        loss = torch.mean(torch.abs(pred_y - true_y))
        print('Iter {:04d} | Total Loss {:.6f}'.format(itr, loss.item()))

for m in ['rk4', 'euler', 'midpoint', 'explicit_adams', 'adaptive_heun', 'bosh3', 'fehlberg2', 'dopri8']:
    opts = dict(step_size=0.05) if m in ('rk4', 'euler', 'midpoint', 'explicit_adams') else None
    tol = dict(rtol=1e-6, atol=1e-7) if m == 'dopri8' else dict(rtol=1e-3, atol=1e-4)
    print(m, odeint(Lambda(), true_y0, t[:5], method=m, options=opts, **tol)[-1])
y = odeint_adjoint(func, true_y0, t[:5], rtol=1e-5, atol=1e-6)
loss = y.pow(2).sum()
loss.backward()
print('adjoint', round(loss.item(), 5), func.net[0].weight.grad.abs().sum().item())
