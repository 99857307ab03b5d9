# A leaky echo state network after Mantas Lukoševičius' minimalESN
# (https://mantas.info/code/simple_esn/, minimalESN.py, reservoir computing
# on the Mackey-Glass series), in torch: random input and reservoir
# weights rand - 0.5, the reservoir rescaled to spectral radius 1.25 by
# max(abs(torch.linalg.eigvals(W))), the leaky-integrator update
# x = (1-a) x + a tanh(Win [1;u] + W x) with the initial transient
# discarded, the design matrix of [1;u;x], the ridge-regression readout
# Wout = solve(X X' + reg I, X Yt')' (torch.linalg.solve, in float64), and the
# generative mode feeding each prediction back as the next input; then the
# readout fine-tuned by gradient descent on the collected states (an
# nn.Linear readout, MSE, SGD with momentum). Written for this test: a
# Mackey-Glass series (tau 17) integrated in numpy, a 40-unit reservoir,
# 300 training and 50 generated steps; one compiled reservoir run and one
# compiled readout step against eager.
import copy

import numpy as np
import torch
import torch.nn as nn


def mackey_glass(n, tau=17, beta=0.2, gamma=0.1, p=10, dt=1.0, x0=1.2):
    hist = int(tau / dt)
    x = np.full(n + hist, x0)
    for t in range(hist, n + hist - 1):
        xt = x[t - hist]
        x[t + 1] = x[t] + dt * (beta * xt / (1 + xt ** p) - gamma * x[t])
    return x[hist:]


data = torch.tensor(mackey_glass(600)[200:] - 0.9, dtype=torch.float32)   # centred

trainLen, testLen, initLen = 300, 50, 30
inSize = outSize = 1
resSize = 40
a = 0.3  # leaking rate

torch.manual_seed(42)
Win = (torch.rand(resSize, 1 + inSize) - 0.5) * 1
W = torch.rand(resSize, resSize) - 0.5
print('Computing spectral radius...')
rhoW = torch.max(torch.abs(torch.linalg.eigvals(W))).item()
print('rhoW', round(rhoW, 5))
W *= 1.25 / rhoW


def run_reservoir(u_seq, x):
    """the reservoir's states [1;u;x] for each input (rows), and the last x"""
    rows = []
    for u in u_seq:
        u1 = torch.cat([torch.ones(1), u.reshape(1)])
        x = (1 - a) * x + a * torch.tanh(Win @ u1 + W @ x)
        rows.append(torch.cat([u1, x]))
    return torch.stack(rows), x


states, x = run_reservoir(data[:trainLen], torch.zeros(resSize))
X = states[initLen:].T                        # design matrix (1+inSize+resSize) x (trainLen-initLen)
Yt = data[None, initLen + 1:trainLen + 1]     # targets: the next value

reg = 1e-8  # regularization coefficient
X64, Yt64 = X.double(), Yt.double()          # (minimalESN's numpy arrays are float64)
Wout = torch.linalg.solve(X64 @ X64.T + reg * torch.eye(1 + inSize + resSize, dtype=torch.float64),
                          X64 @ Yt64.T).T.float()
train_mse = ((Wout @ X - Yt) ** 2).mean().item()
print('train MSE', f'{train_mse:.4e}')

# generative mode
Y = torch.zeros(outSize, testLen)
u = data[trainLen]
xg = x.clone()
for t in range(testLen):
    u1 = torch.cat([torch.ones(1), u.reshape(1)])
    xg = (1 - a) * xg + a * torch.tanh(Win @ u1 + W @ xg)
    y = Wout @ torch.cat([u1, xg])
    Y[:, t] = y
    u = y[0]
errorLen = 10
mse = ((data[trainLen + 1:trainLen + errorLen + 1] - Y[0, :errorLen]) ** 2).mean().item()
print('MSE = ' + f'{mse:.4e}')
print('generated[:5]', [round(v, 4) for v in Y[0, :5].tolist()])

# the reservoir run compiled
states_c, x_c = torch.compile(run_reservoir)(data[:trainLen], torch.zeros(resSize))
print('compiled reservoir == eager', torch.allclose(states_c, states, atol=1e-5),
      torch.allclose(x_c, x, atol=1e-5))

# readout fine-tuned by gradient descent from a ridge solution with more regularisation
readout = nn.Linear(1 + inSize + resSize, outSize, bias=False)
with torch.no_grad():
    readout.weight.copy_(torch.linalg.solve(X @ X.T + 1e-1 * torch.eye(X.shape[0]), X @ Yt.T).T)
opt = torch.optim.SGD(readout.parameters(), lr=0.05, momentum=0.9)


def readout_step(feats, target):
    opt.zero_grad()
    loss = nn.functional.mse_loss(readout(feats), target)
    loss.backward()
    opt.step()
    return loss


feats, target = X.T.contiguous(), Yt.T.contiguous()
for step in range(30):
    loss = readout_step(feats, target)
    if step % 10 == 0 or step == 29:
        print(f'readout step {step}: mse {loss.item():.5e}')

state, opt_state = copy.deepcopy(readout.state_dict()), copy.deepcopy(opt.state_dict())
loss_c = torch.compile(readout_step)(feats, target)
after_c = copy.deepcopy(readout.state_dict())
readout.load_state_dict(state)
opt.load_state_dict(opt_state)
loss_e = readout_step(feats, target)
print('compiled loss', f'{loss_c.item():.6e}')
print('compiled == eager', torch.allclose(loss_c, loss_e, rtol=1e-5, atol=1e-9),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in readout.state_dict().items()))
