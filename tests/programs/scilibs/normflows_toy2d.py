# VincentStimper/normalizing-flows (pip normflows), as its README and
# example notebooks (real_nvp.ipynb, neural_spline_flow.ipynb,
# planar.ipynb, glow.ipynb) write it, on 2-D toy densities: a Real NVP of
# AffineCouplingBlocks and swap Permutes, and a Neural Spline Flow of
# autoregressive / coupled rational-quadratic splines and LULinearPermute,
# each trained a few Adam steps by forward KL on TwoMoons samples, then
# log_prob on a grid, sample, inverse round trip and save / load; planar and
# radial flows fitted by reverse KL to TwoModes; MaskedAffineFlow; a residual
# flow with ActNorm; Glow blocks; a conditional flow forward and backward;
# HAIS and a stochastic flow with Metropolis-Hastings / HMC layers; a
# class-conditional multiscale Glow (glow.ipynb); a VAE with a flow posterior.
# Changed for a CPU test: a few layers of small nets, 3 steps.
import torch
import numpy as np
import normflows as nf

torch.manual_seed(0)
np.random.seed(0)


def show(name, t):
    print(name, tuple(t.shape), [f"{v:.5f}" for v in t.detach().flatten()[:6].tolist()])


def train(model, target, steps=3, n=64, lr=5e-4):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-5)
    for it in range(steps):
        optimizer.zero_grad()
        x = target.sample(n)
        loss = model.forward_kld(x)
        if ~(torch.isnan(loss) | torch.isinf(loss)):
            loss.backward()
            optimizer.step()
        print('  step', it, f"{loss.item():.5f}")


# Real NVP (README)
base = nf.distributions.base.DiagGaussian(2)
num_layers = 4
flows = []
for i in range(num_layers):
    # Neural network with two hidden layers having 64 units each
    # Last layer is initialized by zeros making training more stable
    param_map = nf.nets.MLP([1, 16, 16, 2], init_zeros=True)
    flows.append(nf.flows.AffineCouplingBlock(param_map))
    flows.append(nf.flows.Permute(2, mode='swap'))
model = nf.NormalizingFlow(base, flows)
target = nf.distributions.TwoMoons()
print('realnvp')
train(model, target)
grid_size = 5
xx, yy = torch.meshgrid(torch.linspace(-3, 3, grid_size), torch.linspace(-3, 3, grid_size),
                        indexing='ij')
zz = torch.cat([xx.unsqueeze(2), yy.unsqueeze(2)], 2).view(-1, 2)
model.eval()
log_prob = model.log_prob(zz).to('cpu').view(*xx.shape)
prob = torch.exp(log_prob)
prob[torch.isnan(prob)] = 0
show('realnvp prob', prob)
show('target prob', torch.exp(target.log_prob(zz)))
x, lp = model.sample(8)
show('realnvp sample', x)
show('realnvp sample lp', lp)
z = model.inverse(x)
show('realnvp roundtrip', model.forward(z) - x)
model.save('nvp.pt')
model2 = nf.NormalizingFlow(nf.distributions.base.DiagGaussian(2),
                            [m for pair in zip([nf.flows.AffineCouplingBlock(nf.nets.MLP([1, 16, 16, 2]))
                                                for _ in range(num_layers)],
                                               [nf.flows.Permute(2, mode='swap') for _ in range(num_layers)])
                             for m in pair])
model2.load('nvp.pt')
print('loaded', torch.allclose(model2.log_prob(zz), model.log_prob(zz)))

# Neural Spline Flow (neural_spline_flow.ipynb)
torch.manual_seed(1)
K = 2
latent_size = 2
hidden_units = 16
hidden_layers = 2
flows = []
for i in range(K):
    flows += [nf.flows.AutoregressiveRationalQuadraticSpline(latent_size, hidden_layers,
                                                             hidden_units)]
    flows += [nf.flows.LULinearPermute(latent_size)]
flows += [nf.flows.CoupledRationalQuadraticSpline(latent_size, hidden_layers, hidden_units)]
q0 = nf.distributions.DiagGaussian(2, trainable=False)
nfm = nf.NormalizingFlow(q0=q0, flows=flows)
print('nsf')
train(nfm, target)
nfm.eval()
show('nsf logprob', nfm.log_prob(zz))
x, lp = nfm.sample(8)
show('nsf sample', x)
show('nsf sample lp', lp)
show('nsf roundtrip', nfm.forward(nfm.inverse(x)) - x)

# Planar flow by reverse KL (planar.ipynb)
torch.manual_seed(2)
flows = [nf.flows.Planar((2,), act='leaky_relu') for _ in range(4)]
flows += [nf.flows.Radial((2,))]
q0 = nf.distributions.DiagGaussian(2)
pf = nf.NormalizingFlow(q0=q0, flows=flows, p=nf.distributions.TwoModes(2, 0.1))
opt = torch.optim.Adam(pf.parameters(), lr=1e-3)
for it in range(3):
    opt.zero_grad()
    loss = pf.reverse_kld(16)
    loss.backward()
    opt.step()
    print('planar', it, f"{loss.item():.5f}")
print('alpha div', f"{pf.reverse_alpha_div(16, alpha=0.5).item():.5f}")

# Real NVP with masks (real_nvp_colab)
torch.manual_seed(3)
b = torch.Tensor([1 if i % 2 == 0 else 0 for i in range(2)])
flows = []
for i in range(3):
    s = nf.nets.MLP([2, 8, 2], init_zeros=True)
    t = nf.nets.MLP([2, 8, 2], init_zeros=True)
    if i % 2 == 0:
        flows += [nf.flows.MaskedAffineFlow(b, t, s)]
    else:
        flows += [nf.flows.MaskedAffineFlow(1 - b, t, s)]
# (no ActNorm here: after its data-dependent init the gradients of its shift
# and of the base's loc are zero up to rounding, which Adam at lr=1e-2 turns
# into steps of +-lr whose signs are rounding noise, in torch as in tracec)
mnvp = nf.NormalizingFlow(nf.distributions.DiagGaussian(2),
                          flows, p=nf.distributions.TwoModes(2, 0.1))
print('masked')
train(mnvp, target, lr=1e-2)
loss = mnvp.reverse_kld(8)
loss.backward()
print('masked rkld', f"{loss.item():.5f}")

# Residual flow and Glow blocks
torch.manual_seed(4)
flows = []
for i in range(2):
    net = nf.nets.LipschitzMLP([2, 8, 2], init_zeros=False, lipschitz_const=0.9)
    flows += [nf.flows.Residual(net, reduce_memory=True)]
    flows += [nf.flows.ActNorm(2)]
rf = nf.NormalizingFlow(nf.distributions.DiagGaussian(2), flows)
print('residual')
train(rf, target, steps=2)

torch.manual_seed(5)
glow = nf.NormalizingFlow(nf.distributions.DiagGaussian((2, 4, 4)),
                          [nf.flows.GlowBlock(2, 8, split_mode='channel', scale=True),
                           nf.flows.GlowBlock(2, 8, split_mode='checkerboard', scale=True)])
x = torch.randn(3, 2, 4, 4)
loss = glow.forward_kld(x)
loss.backward()
print('glow', f"{loss.item():.5f}", f"{sum(p.grad.abs().sum().item() for p in glow.parameters() if p.grad is not None):.5f}")

# Conditional flow
torch.manual_seed(6)
ctx = 3
flows = [nf.flows.MaskedAffineAutoregressive(2, 8, context_features=ctx, num_blocks=1),
         nf.flows.LULinearPermute(2),
         nf.flows.AutoregressiveRationalQuadraticSpline(2, 1, 8, num_context_channels=ctx)]
q0 = nf.distributions.DiagGaussian(2, trainable=False)
cf = nf.ConditionalNormalizingFlow(q0, flows, p=nf.distributions.target.ConditionalDiagGaussian())
context = torch.rand(16, ctx)
x = torch.randn(16, 2)
loss = cf.forward_kld(x, context)
loss.backward()
print('conditional', f"{loss.item():.5f}")
s, lp = cf.sample(4, context[:4])
show('conditional sample', s)

# Hamiltonian annealed importance sampling and a stochastic normalizing flow
# (Metropolis-Hastings and HMC layers between coupling layers)
torch.manual_seed(7)
target2 = nf.distributions.TwoModes(2, 0.1)
hais = nf.HAIS(torch.linspace(1, 0, 4), nf.distributions.DiagGaussian(2), target2,
               num_leapfrog=3, step_size=0.1 * torch.ones(2), log_mass=torch.zeros(2))
samples, log_weights = hais.sample(8)
show('hais', samples)
show('hais weights', log_weights)
flows = [nf.flows.AffineCouplingBlock(nf.nets.MLP([1, 8, 2], init_zeros=True)),
         nf.flows.MetropolisHastings(target2, nf.distributions.DiagGaussianProposal((2,), 0.1), 2),
         nf.flows.Permute(2, mode='swap'),
         nf.flows.HamiltonianMonteCarlo(target2, 2, torch.log(0.05 * torch.ones(2)),
                                        torch.zeros(2))]
snf = nf.NormalizingFlow(nf.distributions.DiagGaussian(2), flows, p=target2)
loss = snf.reverse_kld(16)
loss.backward()
print('snf', f"{loss.item():.5f}",
      f"{sum(p.grad.abs().sum().item() for p in snf.parameters() if p.grad is not None):.5f}")

# glow.ipynb: a class-conditional multiscale Glow (2 levels of 2 blocks on
# 3x8x8 images, 4 classes), forward KL and its gradients, class-conditional
# samples, bits per dimension.  (No optimizer step: the ActNorm shifts'
# gradients are zero up to rounding right after their data-dependent init,
# and Adamax would turn that rounding into +-lr steps.)
torch.manual_seed(8)
L, K = 2, 2
input_shape = (3, 8, 8)
channels, hidden_channels, num_classes = 3, 8, 4
q0, merges, flows = [], [], []
for i in range(L):
    flows_ = []
    for j in range(K):
        flows_ += [nf.flows.GlowBlock(channels * 2 ** (L + 1 - i), hidden_channels,
                                      split_mode='channel', scale=True)]
    flows_ += [nf.flows.Squeeze()]
    flows += [flows_]
    if i > 0:
        merges += [nf.flows.Merge()]
        latent_shape = (input_shape[0] * 2 ** (L - i), input_shape[1] // 2 ** (L - i),
                        input_shape[2] // 2 ** (L - i))
    else:
        latent_shape = (input_shape[0] * 2 ** (L + 1), input_shape[1] // 2 ** L,
                        input_shape[2] // 2 ** L)
    q0 += [nf.distributions.ClassCondDiagGaussian(latent_shape, num_classes)]
msglow = nf.MultiscaleFlow(q0, flows, merges)
x = torch.rand(4, 3, 8, 8)
y = torch.randint(num_classes, (4,))
loss = msglow.forward_kld(x, y)
loss.backward()
print('multiscale glow', f"{loss.item():.5f}",
      f"{sum(p.grad.abs().sum().item() for p in msglow.parameters() if p.grad is not None):.4f}")
with torch.no_grad():
    s, lp = msglow.sample(2, torch.tensor([0, 3]))
show('multiscale sample', s)
print('multiscale sample lp', [f"{v:.4f}" for v in lp.tolist()])
print('bpd', f"{(-msglow.log_prob(x, y).mean() / (np.log(2) * np.prod(input_shape))).item():.5f}")

torch.manual_seed(9)
# a VAE whose posterior is a planar flow (examples/vae.py, tiny: 8-pixel
# binary data, a 2-d latent)
enc = nf.nets.MLP([8, 16, 4])
dec = nf.nets.MLP([2, 16, 8])
vae = nf.NormalizingFlowVAE(nf.distributions.DiagGaussian(2, trainable=False),
                            nf.distributions.NNDiagGaussian(enc),
                            [nf.flows.Planar((2,)) for _ in range(3)],
                            nf.distributions.NNBernoulliDecoder(dec))
opt = torch.optim.Adam(vae.parameters(), lr=1e-3)
x = (torch.rand(6, 8) > 0.5).float()
for it in range(2):
    z, log_q, log_p = vae(x, num_samples=3)
    loss = torch.mean(log_q - log_p)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print('vae', it, f"{loss.item():.5f}", tuple(z.shape))
