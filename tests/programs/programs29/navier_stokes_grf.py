# The 2-D Navier-Stokes data generator of the Fourier Neural Operator paper
# (https://github.com/zongyi-li/fourier_neural_operator,
# data_generation/navier_stokes/ns_2d.py and random_fields.py, in their
# torch.fft versions), as written there: GaussianRF's spectrum sqrt_eig
# from the wavenumbers torch.cat((arange(0, k_max), arange(-k_max, 0)))
# .repeat(size, 1), sampled as complex torch.randn(..., dtype=torch.cfloat)
# times sqrt_eig through torch.fft.ifftn(...).real; the pseudo-spectral
# vorticity solver (rfft2 of the vorticity and the forcing, the negative
# Laplacian with lap[0, 0] = 1, the 2/3 dealiasing mask from
# torch.logical_and, velocities and gradients as 2 pi i k times the
# transforms through irfft2(s=(N, N)), the Crank-Nicolson update, the
# solution recorded every record_time steps); the forcing
# 0.1 (sin 2 pi (X + Y) + cos 2 pi (X + Y)) on a meshgrid(indexing='ij').
# Then a small convolutional surrogate (Conv2d, padding_mode='circular')
# trained to map w0 to the recorded final vorticity. Written for this
# test: a 16x16 grid, 2 samples, 40 steps of 1e-3 recorded 4 times, 15
# Adam steps; one compiled solver run and one compiled training step
# against eager.
import copy
import math

import torch
import torch.nn as nn


class GaussianRF(object):

    def __init__(self, dim, size, alpha=2, tau=3, sigma=None, boundary="periodic", device=None):

        self.dim = dim
        self.device = device

        if sigma is None:
            sigma = tau**(0.5 * (2 * alpha - self.dim))

        k_max = size // 2

        if dim == 2:
            wavenumers = torch.cat((torch.arange(start=0, end=k_max, step=1, device=device),
                                    torch.arange(start=-k_max, end=0, step=1, device=device)), 0).repeat(size, 1)

            k_x = wavenumers.transpose(0, 1)
            k_y = wavenumers

            self.sqrt_eig = (size**2) * math.sqrt(2.0) * sigma * ((4 * (math.pi**2) * (k_x**2 + k_y**2) + tau**2)**(-alpha / 2.0))
            self.sqrt_eig[0, 0] = 0.0

        self.size = []
        for j in range(self.dim):
            self.size.append(size)

        self.size = tuple(self.size)

    def sample(self, N):

        coeff = torch.randn(N, *self.size, dtype=torch.cfloat, device=self.device)
        coeff = self.sqrt_eig * coeff

        return torch.fft.ifftn(coeff, dim=list(range(-1, -self.dim - 1, -1))).real


def navier_stokes_2d(w0, f, visc, T, delta_t=1e-4, record_steps=1):

    # Grid size - must be power of 2
    N = w0.size()[-1]

    # Maximum frequency
    k_max = math.floor(N / 2.0)

    # Number of steps to final time
    steps = math.ceil(T / delta_t)

    # Initial vorticity to Fourier space
    w_h = torch.fft.rfft2(w0)

    # Forcing to Fourier space
    f_h = torch.fft.rfft2(f)

    # If same forcing for the whole batch
    if len(f_h.size()) < len(w_h.size()):
        f_h = torch.unsqueeze(f_h, 0)

    # Record solution every this number of steps
    record_time = math.floor(steps / record_steps)

    # Wavenumbers in y-direction
    k_y = torch.cat((torch.arange(start=0, end=k_max, step=1, device=w0.device),
                     torch.arange(start=-k_max, end=0, step=1, device=w0.device)), 0).repeat(N, 1)
    # Wavenumbers in x-direction
    k_x = k_y.transpose(0, 1)

    # Truncate redundant modes
    k_x = k_x[..., :k_max + 1]
    k_y = k_y[..., :k_max + 1]

    # Negative Laplacian in Fourier space
    lap = 4 * (math.pi**2) * (k_x**2 + k_y**2)
    lap[0, 0] = 1.0
    # Dealiasing mask
    dealias = torch.unsqueeze(torch.logical_and(torch.abs(k_y) <= (2.0 / 3.0) * k_max,
                                                torch.abs(k_x) <= (2.0 / 3.0) * k_max).float(), 0)

    # Saving solution and time
    sol = torch.zeros(*w0.size(), record_steps, device=w0.device)
    sol_t = torch.zeros(record_steps, device=w0.device)

    # Record counter
    c = 0
    # Physical time
    t = 0.0
    for j in range(steps):
        # Stream function in Fourier space: solve Poisson equation
        psi_h = w_h / lap

        # Velocity field in x-direction = psi_y
        q = 2. * math.pi * k_y * 1j * psi_h
        q = torch.fft.irfft2(q, s=(N, N))

        # Velocity field in y-direction = -psi_x
        v = -2. * math.pi * k_x * 1j * psi_h
        v = torch.fft.irfft2(v, s=(N, N))

        # Partial x of vorticity
        w_x = 2. * math.pi * k_x * 1j * w_h
        w_x = torch.fft.irfft2(w_x, s=(N, N))

        # Partial y of vorticity
        w_y = 2. * math.pi * k_y * 1j * w_h
        w_y = torch.fft.irfft2(w_y, s=(N, N))

        # Non-linear term (u.grad(w)): compute in physical space then back to Fourier space
        F_h = torch.fft.rfft2(q * w_x + v * w_y)

        # Dealias
        F_h = dealias * F_h

        # Crank-Nicolson update
        w_h = (-delta_t * F_h + delta_t * f_h + (1.0 - 0.5 * delta_t * visc * lap) * w_h) / (1.0 + 0.5 * delta_t * visc * lap)

        # Update real time (used only for recording)
        t += delta_t

        if (j + 1) % record_time == 0:
            # Solution in physical space
            w = torch.fft.irfft2(w_h, s=(N, N))

            # Record solution and time
            sol[..., c] = w
            sol_t[c] = t

            c += 1

    return sol, sol_t


torch.manual_seed(0)
s, N = 16, 2
GRF = GaussianRF(2, s, alpha=2.5, tau=7)
t = torch.linspace(0, 1, s + 1)
t = t[0:-1]
X, Y = torch.meshgrid(t, t, indexing='ij')
f = 0.1 * (torch.sin(2 * math.pi * (X + Y)) + torch.cos(2 * math.pi * (X + Y)))

record_steps = 4
w0 = GRF.sample(N)
print("w0", tuple(w0.shape), "mean", round(w0.mean().item(), 6), "std", round(w0.std().item(), 5),
      "w0[0,:3,0]", [round(v, 4) for v in w0[0, :3, 0].tolist()])
sol, sol_t = navier_stokes_2d(w0, f, 1e-3, 0.04, 1e-3, record_steps)
print("sol", tuple(sol.shape), "times", [round(v, 4) for v in sol_t.tolist()])
for k in range(record_steps):
    print(f"record {k}: enstrophy {0.5 * (sol[..., k] ** 2).mean().item():.6f} "
          f"max |w| {sol[..., k].abs().max().item():.5f}")

sol_c, _ = torch.compile(navier_stokes_2d)(w0, f, 1e-3, 0.01, 1e-3, 2)
sol_e, _ = navier_stokes_2d(w0, f, 1e-3, 0.01, 1e-3, 2)
print("compiled solver == eager", torch.allclose(sol_c, sol_e, atol=1e-5))

model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1, padding_mode='circular'), nn.GELU(),
                      nn.Conv2d(8, 1, 3, padding=1, padding_mode='circular'))
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
inp, target = w0[:, None], sol[..., -1][:, None]


def train_step(inp, target):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(inp), target) / target.pow(2).mean()
    loss.backward()
    optimizer.step()
    return loss


for step in range(15):
    loss = train_step(inp, target)
    if step % 5 == 0 or step == 14:
        print(f"surrogate step {step}: relative mse {loss.item():.6f}")

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
loss_c = torch.compile(train_step)(inp, target)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e = train_step(inp, target)
print("compiled loss", round(loss_c.item(), 6))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()))
