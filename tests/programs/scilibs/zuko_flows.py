# probabilists/zuko, as its README and tutorials (basics, train_from_data,
# learn_your_own) write it, on a 2-D toy density (a noisy ring; a 1-D
# context: its radius): the README's conditional NSF trained a few Adam
# steps by -flow(c).log_prob(x), sampled with rsample / log_prob /
# rsample_and_log_prob; MAF, RealNVP, NICE, SOSPF, NAF, UNAF (sampled by
# bisection), BPF, GF and GMM forward, backward and sampled; a CNF's
# log_prob and samples (its own adaptive ODE solver, exact trace and
# Hutchinson's estimator); a flow built by hand from zuko's
# transforms and UnconditionalDistribution; the transform's inverse and
# log-abs-det-Jacobian; state_dict save / load.
import torch
import zuko

torch.manual_seed(0)


def ring(n):
    r = 1 + torch.rand(n, 1)
    theta = 2 * torch.pi * torch.rand(n, 1)
    x = torch.cat([r * torch.cos(theta), r * torch.sin(theta)], dim=1) + 0.05 * torch.randn(n, 2)
    return x, r


def fmt(t, k=6):
    return [f"{v:.5f}" for v in t.detach().flatten()[:k].tolist()]


# Neural spline flow (NSF) with 2 sample features and 1 context feature
flow = zuko.flows.NSF(2, 1, transforms=2, hidden_features=[16] * 2)
print(flow)
optimizer = torch.optim.Adam(flow.parameters(), lr=1e-3)
for step in range(3):
    x, c = ring(32)
    loss = -flow(c).log_prob(x)  # -log p(x | c)
    loss = loss.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print('nsf', step, f"{loss.item():.5f}")

c_star = torch.tensor([1.5])
dist = flow(c_star)
x = dist.sample((8,))
print('sample', tuple(x.shape), fmt(x))
print('log_prob', fmt(dist.log_prob(x)))
x, lp = dist.rsample_and_log_prob((4,))
print('rsample_and_log_prob', fmt(x), fmt(lp))
t = flow(c_star).transform
z = t(x)
print('inverse', fmt(t.inv(z) - x), fmt(t.log_abs_det_jacobian(x, z)))

sd = flow.state_dict()
torch.save(sd, 'nsf.pt')
flow2 = zuko.flows.NSF(2, 1, transforms=2, hidden_features=[16] * 2)
flow2.load_state_dict(torch.load('nsf.pt'))
print('reloaded', torch.allclose(flow2(c_star).log_prob(x), flow(c_star).log_prob(x)))

# the other flows of zuko.flows, unconditional and conditional
x, c = ring(16)
for name, make in [
    ('MAF', lambda: zuko.flows.MAF(2, 1, transforms=2, hidden_features=[16, 16])),
    ('MAF passes', lambda: zuko.flows.MAF(2, 1, transforms=2, passes=2, hidden_features=[16])),
    ('RealNVP', lambda: zuko.flows.RealNVP(2, 1, transforms=2, hidden_features=[16])),
    ('NICE', lambda: zuko.flows.NICE(2, 1, transforms=2, hidden_features=[16])),
    ('SOSPF', lambda: zuko.flows.SOSPF(2, 1, transforms=2, hidden_features=[16])),
    ('NAF', lambda: zuko.flows.NAF(2, 1, transforms=1, signal=4, hidden_features=[16],
                                    network={'hidden_features': [8]})),
    ('UNAF', lambda: zuko.flows.UNAF(2, 1, transforms=1, signal=4, hidden_features=[16],
                                      network={'hidden_features': [8]})),
    ('BPF', lambda: zuko.flows.BPF(2, 1, transforms=2, degree=4, hidden_features=[16])),
    ('GF', lambda: zuko.flows.GF(2, 1, transforms=2, components=4, hidden_features=[16])),
    ('GMM', lambda: zuko.flows.GMM(2, 1, components=3, hidden_features=[16])),
    ('NSF uncond', lambda: zuko.flows.NSF(2, transforms=2, hidden_features=[16], bins=4)),
]:
    torch.manual_seed(1)
    f = make()
    cond = c if name != 'NSF uncond' else None
    d = f(cond) if cond is not None else f()
    lp = d.log_prob(x)
    (-lp.mean()).backward()
    g = sum(p.grad.abs().sum().item() for p in f.parameters() if p.grad is not None)
    s = (f(c[:2]) if cond is not None else f()).sample((3,))
    print(name, f"{lp.mean().item():.5f}", f"{g:.5f}", fmt(s, 4))

# a continuous normalizing flow (exact trace)
torch.manual_seed(2)
cnf = zuko.flows.CNF(2, 1, hidden_features=[16], exact=True)
lp = cnf(c[:4]).log_prob(x[:4])
lp.mean().backward()
print('CNF', fmt(lp), f"{sum(p.grad.abs().sum().item() for p in cnf.parameters()):.5f}")
with torch.no_grad():
    print('CNF sample', fmt(cnf(c[:2]).sample((2,))))
# Hutchinson's trace estimator (exact=False): a seeded Rademacher / normal draw
torch.manual_seed(7)
cnf2 = zuko.flows.CNF(2, hidden_features=[8], exact=False)
lp = cnf2().log_prob(x[:3])
lp.sum().backward()
print('CNF hutchinson', fmt(lp))

# a flow built by hand (learn_your_own tutorial)
torch.manual_seed(3)
flow = zuko.flows.Flow(
    transform=[
        zuko.flows.MaskedAutoregressiveTransform(2, 1, hidden_features=[16]),
        zuko.flows.UnconditionalTransform(zuko.transforms.RotationTransform, torch.randn(2, 2)),
        zuko.flows.MaskedAutoregressiveTransform(
            2, 1, univariate=zuko.transforms.MonotonicRQSTransform, shapes=[(4,), (4,), (3,)],
            hidden_features=[16]),
    ],
    base=zuko.flows.UnconditionalDistribution(
        zuko.distributions.DiagNormal, torch.zeros(2), torch.ones(2), buffer=True),
)
opt = torch.optim.AdamW(flow.parameters(), lr=1e-2)
for step in range(2):
    loss = -flow(c).log_prob(x).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print('custom', step, f"{loss.item():.5f}")
