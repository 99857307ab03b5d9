# Learning-rate-free and schedule-free optimizers from PyPI, used as their
# READMEs show, each training the same small MLP regressor three steps:
# facebookresearch/schedule_free (AdamWScheduleFree / SGDScheduleFree /
# RAdamScheduleFree with optimizer.train() before training and
# optimizer.eval() before evaluation and saving, the Closure and Reference
# variants, ScheduleFreeWrapper around SGD), konstmish/prodigy (Prodigy,
# with d printed from its param group) and facebookresearch/dadaptation
# (DAdaptAdam / DAdaptSGD / DAdaptAdaGrad / DAdaptAdan / DAdaptLion), then a
# state_dict round trip of an optimizer into a fresh one.
import torch
import torch.nn as nn
import schedulefree
from prodigyopt import Prodigy
import dadaptation

torch.manual_seed(0)
X = torch.randn(16, 4)
Y = (X @ torch.tensor([[1.0], [-2.0], [0.5], [0.0]]) + 0.1 * torch.randn(16, 1))


def make_model():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))


def fmt(model):
    return f"{sum(p.double().sum().item() for p in model.parameters()):.6f}"


def train(name, opt_fn, steps=3, closure=False, sf=False):
    model = make_model()
    opt = opt_fn(model.parameters())
    if sf:
        opt.train()
    losses = []
    for _ in range(steps):
        if closure:
            def closure_fn():
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(X), Y)
                loss.backward()
                return loss
            loss = opt.step(closure_fn)
        else:
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(X), Y)
            loss.backward()
            opt.step()
        losses.append(f"{loss.item():.6f}")
    if sf:
        opt.eval()
    with torch.no_grad():
        ev = nn.functional.mse_loss(model(X), Y).item()
    extra = ''
    group = opt.param_groups[0]
    if 'd' in group:
        extra = f" d={group['d']:.6e}"
    print(name, losses, f"eval={ev:.6f}", fmt(model), extra)
    return model, opt


train('AdamWScheduleFree', lambda p: schedulefree.AdamWScheduleFree(p, lr=1e-2, warmup_steps=2),
      sf=True)
train('AdamWScheduleFree wd', lambda p: schedulefree.AdamWScheduleFree(
    p, lr=1e-2, weight_decay=0.1, foreach=False), sf=True)
train('SGDScheduleFree', lambda p: schedulefree.SGDScheduleFree(p, lr=0.05, momentum=0.9,
                                                                 warmup_steps=1), sf=True)
train('RAdamScheduleFree', lambda p: schedulefree.RAdamScheduleFree(p, lr=1e-2), sf=True)
train('AdamWScheduleFreeClosure', lambda p: schedulefree.AdamWScheduleFreeClosure(p, lr=1e-2),
      closure=True)
train('SGDScheduleFreeClosure', lambda p: schedulefree.SGDScheduleFreeClosure(p, lr=0.05),
      closure=True)
train('AdamWScheduleFreeReference', lambda p: schedulefree.AdamWScheduleFreeReference(p, lr=1e-2),
      sf=True)
train('AdamWScheduleFreePaper', lambda p: schedulefree.AdamWScheduleFreePaper(p, lr=1e-2),
      sf=True)
train('ScheduleFreeWrapper', lambda p: schedulefree.ScheduleFreeWrapper(
    torch.optim.SGD(p, lr=0.05), momentum=0.9, weight_decay_at_y=0.1), sf=True)

train('Prodigy', lambda p: Prodigy(p, lr=1., weight_decay=0.01))
train('Prodigy bc', lambda p: Prodigy(p, lr=1., use_bias_correction=True, safeguard_warmup=True,
                                      d_coef=2.0))
train('Prodigy sliced', lambda p: Prodigy(p, lr=1., slice_p=3, d0=1e-4, betas=(0.9, 0.99),
                                          beta3=0.95, growth_rate=1.02))
train('DAdaptAdam', lambda p: dadaptation.DAdaptAdam(p, lr=1.0, decouple=True, weight_decay=0.01))
train('DAdaptAdam bc', lambda p: dadaptation.DAdaptAdam(p, lr=1.0, d0=1e-3,
                                                       use_bias_correction=True))
train('DAdaptSGD', lambda p: dadaptation.DAdaptSGD(p, lr=1.0, momentum=0.9))
train('DAdaptAdaGrad', lambda p: dadaptation.DAdaptAdaGrad(p, lr=1.0))
train('DAdaptAdan', lambda p: dadaptation.DAdaptAdan(p, lr=1.0))
train('DAdaptLion', lambda p: dadaptation.DAdaptLion(p, lr=1.0))

# save an optimizer's state (in eval mode, as schedule_free's README says)
# and load it into a fresh one, which then continues identically
model, opt = train('save', lambda p: schedulefree.AdamWScheduleFree(p, lr=1e-2), sf=True)
sd = {k: v for k, v in opt.state_dict().items()}
print('state keys', sorted(sd['state'][0].keys()), sd['param_groups'][0]['k'],
      f"{sd['param_groups'][0]['weight_sum']:.6f}")
model2 = make_model()
model2.load_state_dict(model.state_dict())
opt2 = schedulefree.AdamWScheduleFree(model2.parameters(), lr=1e-2)
opt2.load_state_dict(sd)
for m, o in ((model, opt), (model2, opt2)):
    o.train()
    o.zero_grad()
    nn.functional.mse_loss(m(X), Y).backward()
    o.step()
    o.eval()
print('resumed', fmt(model), fmt(model2))
