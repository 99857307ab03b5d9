# Optimizers as users write them, on a small MLP: lucidrains/lion-pytorch's
# lion_pytorch.py (exists(), update_fn with p.data.mul_(1. - lr * wd) and
# exp_avg.clone().mul_(beta1).add(grad, alpha = 1. - beta1).sign_(), Lion's
# step over filter(lambda p: exists(p.grad), group['params']) unpacking
# *group['betas'], decoupled_weight_decay dividing wd by _init_lr, the
# closure under torch.enable_grad()); michaelrzhang/lookahead's
# lookahead_pytorch.py (an Optimizer subclass that never calls
# Optimizer.__init__: its own defaultdict state of cached_params, a
# param_groups property, la_steps / la_alpha, pullback_momentum "pullback"
# through the deprecated add_(Number, Tensor) overload and "reset",
# _backup_and_load_cache / _clear_and_load_backup for evaluating the slow
# weights, state_dict delegated to the inner optimizer) under an
# lr_scheduler.StepLR; alphadl/lookahead.pytorch's variant (slow_param per
# parameter, k / alpha, group["counter"], add_param_group, its
# fast_state / slow_state dict); juntang-zhuang/Adabelief-Optimizer's
# AdaBelief 0.2 (version_higher from a string compare of torch.__version__,
# buffer lists in the defaults, decoupled weight decay, amsgrad through
# torch.max(max_exp_avg_var, exp_avg_var.add_(eps), out=max_exp_avg_var),
# denom = (exp_avg_var.add_(eps).sqrt() / math.sqrt(bias_correction2))
# .add_(eps), the RAdam-style rectification with its N_sma buffer,
# addcdiv_ / addcmul_ with value=); and each optimizer's state_dict saved
# through torch.save / torch.load and resumed, against an uninterrupted run.
# Changes for a CPU test: AdaBelief's colorama / tabulate change log off
# (print_change_log=False), a numpy toy classification problem, a few
# steps; then training steps under torch.compile (Lion, AdaBelief counting
# steps in a Python int, Lookahead counting in an attribute) against eager.
from __future__ import annotations

import io
import math
from collections import defaultdict
from typing import Callable, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.optimizer import Optimizer

version_higher = (torch.__version__ >= "1.5.0")


def fmt(x, n=4):
    return [f"{v:.5f}" for v in x.reshape(-1)[:n].tolist()]


# ---- lion_pytorch/lion_pytorch.py
def exists(val):
    return val is not None


def update_fn(p, grad, exp_avg, lr, wd, beta1, beta2):
    # stepweight decay

    p.data.mul_(1. - lr * wd)

    # weight update

    update = exp_avg.clone().mul_(beta1).add(grad, alpha = 1. - beta1).sign_()
    p.add_(update, alpha = -lr)

    # decay the momentum running average coefficient

    exp_avg.mul_(beta2).add_(grad, alpha = 1. - beta2)


class Lion(Optimizer):
    def __init__(
        self,
        params,
        lr: float = 1e-4,
        betas: Tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
        use_triton: bool = False,
        decoupled_weight_decay: bool = False,
    ):
        assert lr > 0.
        assert all([0. <= beta <= 1. for beta in betas])

        self._init_lr = lr
        self.decoupled_wd = decoupled_weight_decay

        defaults = dict(
            lr = lr,
            betas = betas,
            weight_decay = weight_decay
        )

        super().__init__(params, defaults)

        self.update_fn = update_fn

    @torch.no_grad()
    def step(
        self,
        closure: Callable | None = None
    ):

        loss = None
        if exists(closure):
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            for p in filter(lambda p: exists(p.grad), group['params']):

                grad, lr, wd, beta1, beta2, state, decoupled_wd, init_lr = p.grad, group['lr'], group['weight_decay'], *group['betas'], self.state[p], self.decoupled_wd, self._init_lr

                # maybe decoupled weight decay

                if decoupled_wd:
                    wd /= init_lr

                # init state - exponential moving average of gradient values

                if len(state) == 0:
                    state['exp_avg'] = torch.zeros_like(p)

                exp_avg = state['exp_avg']

                self.update_fn(
                    p,
                    grad,
                    exp_avg,
                    lr,
                    wd,
                    beta1,
                    beta2
                )

        return loss


# ---- michaelrzhang/lookahead: lookahead_pytorch.py
class Lookahead(Optimizer):
    def __init__(self, optimizer, la_steps=5, la_alpha=0.8, pullback_momentum="none"):
        """optimizer: inner optimizer
        la_steps (int): number of lookahead steps
        la_alpha (float): linear interpolation factor. 1.0 recovers the inner optimizer.
        pullback_momentum (str): change to inner optimizer momentum on interpolation update
        """
        self.optimizer = optimizer
        self._la_step = 0  # counter for inner optimizer
        self.la_alpha = la_alpha
        self._total_la_steps = la_steps
        pullback_momentum = pullback_momentum.lower()
        assert pullback_momentum in ["reset", "pullback", "none"]
        self.pullback_momentum = pullback_momentum

        self.state = defaultdict(dict)

        # Cache the current optimizer parameters
        for group in optimizer.param_groups:
            for p in group['params']:
                param_state = self.state[p]
                param_state['cached_params'] = torch.zeros_like(p.data)
                param_state['cached_params'].copy_(p.data)
                if self.pullback_momentum == "pullback":
                    param_state['cached_mom'] = torch.zeros_like(p.data)

    def __getstate__(self):
        return {
            'state': self.state,
            'optimizer': self.optimizer,
            'la_alpha': self.la_alpha,
            '_la_step': self._la_step,
            '_total_la_steps': self._total_la_steps,
            'pullback_momentum': self.pullback_momentum
        }

    def zero_grad(self):
        self.optimizer.zero_grad()

    def get_la_step(self):
        return self._la_step

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict):
        self.optimizer.load_state_dict(state_dict)

    def _backup_and_load_cache(self):
        """Useful for performing evaluation on the slow weights (which typically generalize better)
        """
        for group in self.optimizer.param_groups:
            for p in group['params']:
                param_state = self.state[p]
                param_state['backup_params'] = torch.zeros_like(p.data)
                param_state['backup_params'].copy_(p.data)
                p.data.copy_(param_state['cached_params'])

    def _clear_and_load_backup(self):
        for group in self.optimizer.param_groups:
            for p in group['params']:
                param_state = self.state[p]
                p.data.copy_(param_state['backup_params'])
                del param_state['backup_params']

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def step(self, closure=None):
        """Performs a single Lookahead optimization step.
        Arguments:
            closure (callable, optional): A closure that reevaluates the model
                and returns the loss.
        """
        loss = self.optimizer.step(closure)
        self._la_step += 1

        if self._la_step >= self._total_la_steps:
            self._la_step = 0
            # Lookahead and cache the current optimizer parameters
            for group in self.optimizer.param_groups:
                for p in group['params']:
                    param_state = self.state[p]
                    p.data.mul_(self.la_alpha).add_(param_state['cached_params'], alpha=1.0 - self.la_alpha)  # crucial line
                    param_state['cached_params'].copy_(p.data)
                    if self.pullback_momentum == "pullback":
                        internal_momentum = self.optimizer.state[p]["momentum_buffer"]
                        self.optimizer.state[p]["momentum_buffer"] = internal_momentum.mul_(self.la_alpha).add_(
                            1.0 - self.la_alpha, param_state["cached_mom"])
                        param_state["cached_mom"] = self.optimizer.state[p]["momentum_buffer"]
                    elif self.pullback_momentum == "reset":
                        self.optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p.data)

        return loss


# ---- alphadl/lookahead.pytorch: lookahead.py
class LookaheadK(Optimizer):
    def __init__(self, optimizer, k=5, alpha=0.5):
        self.optimizer = optimizer
        self.k = k
        self.alpha = alpha
        self.param_groups = self.optimizer.param_groups
        self.state = defaultdict(dict)
        self.fast_state = self.optimizer.state
        for group in self.param_groups:
            group["counter"] = 0

    def update(self, group):
        for fast in group["params"]:
            param_state = self.state[fast]
            if "slow_param" not in param_state:
                param_state["slow_param"] = torch.zeros_like(fast.data)
                param_state["slow_param"].copy_(fast.data)
            slow = param_state["slow_param"]
            slow += (fast.data - slow) * self.alpha
            fast.data.copy_(slow)

    def update_lookahead(self):
        for group in self.param_groups:
            self.update(group)

    def step(self, closure=None):
        loss = self.optimizer.step(closure)
        for group in self.param_groups:
            if group["counter"] == 0:
                self.update(group)
            group["counter"] += 1
            if group["counter"] >= self.k:
                group["counter"] = 0
        return loss

    def state_dict(self):
        fast_state_dict = self.optimizer.state_dict()
        slow_state = {
            (id(k) if isinstance(k, torch.Tensor) else k): v
            for k, v in self.state.items()
        }
        fast_state = fast_state_dict["state"]
        param_groups = fast_state_dict["param_groups"]
        return {
            "fast_state": fast_state,
            "slow_state": slow_state,
            "param_groups": param_groups,
        }

    def add_param_group(self, param_group):
        param_group["counter"] = 0
        self.optimizer.add_param_group(param_group)


# ---- adabelief_pytorch/AdaBelief.py (v0.2.0)
class AdaBelief(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-16,
                 weight_decay=0, amsgrad=False, weight_decouple=True, fixed_decay=False, rectify=True,
                 degenerated_to_sgd=True, print_change_log = True):

        if print_change_log:
            print('Please check your arguments if you have upgraded adabelief-pytorch from version 0.0.5.')

        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))

        self.degenerated_to_sgd = degenerated_to_sgd
        if isinstance(params, (list, tuple)) and len(params) > 0 and isinstance(params[0], dict):
            for param in params:
                if 'betas' in param and (param['betas'][0] != betas[0] or param['betas'][1] != betas[1]):
                    param['buffer'] = [[None, None, None] for _ in range(10)]

        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, buffer=[[None, None, None] for _ in range(10)])
        super(AdaBelief, self).__init__(params, defaults)

        self.degenerated_to_sgd = degenerated_to_sgd
        self.weight_decouple = weight_decouple
        self.rectify = rectify
        self.fixed_decay = fixed_decay
        if self.weight_decouple:
            print('Weight decoupling enabled in AdaBelief')
            if self.fixed_decay:
                print('Weight decay fixed')
        if self.rectify:
            print('Rectification enabled in AdaBelief')
        if amsgrad:
            print('AMSGrad enabled in AdaBelief')

    def __setstate__(self, state):
        super(AdaBelief, self).__setstate__(state)
        for group in self.param_groups:
            group.setdefault('amsgrad', False)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue

                # cast data type
                half_precision = False
                if p.data.dtype == torch.float16:
                    half_precision = True
                    p.data = p.data.float()
                    p.grad = p.grad.float()

                grad = p.grad.data
                if grad.is_sparse:
                    raise RuntimeError(
                        'AdaBelief does not support sparse gradients, please consider SparseAdam instead')
                amsgrad = group['amsgrad']

                state = self.state[p]

                beta1, beta2 = group['betas']

                # State initialization
                if len(state) == 0:
                    state['rho_inf'] = 2.0 / (1.0 - beta2) - 1.0
                    state['step'] = 0
                    # Exponential moving average of gradient values
                    state['exp_avg'] = torch.zeros_like(p.data,memory_format=torch.preserve_format) \
                        if version_higher else torch.zeros_like(p.data)
                    # Exponential moving average of squared gradient values
                    state['exp_avg_var'] = torch.zeros_like(p.data,memory_format=torch.preserve_format) \
                        if version_higher else torch.zeros_like(p.data)
                    if amsgrad:
                        # Maintains max of all exp. moving avg. of sq. grad. values
                        state['max_exp_avg_var'] = torch.zeros_like(p.data,memory_format=torch.preserve_format) \
                            if version_higher else torch.zeros_like(p.data)

                # perform weight decay, check if decoupled weight decay
                if self.weight_decouple:
                    if not self.fixed_decay:
                        p.data.mul_(1.0 - group['lr'] * group['weight_decay'])
                    else:
                        p.data.mul_(1.0 - group['weight_decay'])
                else:
                    if group['weight_decay'] != 0:
                        grad.add_(p.data, alpha=group['weight_decay'])

                # get current state variable
                exp_avg, exp_avg_var = state['exp_avg'], state['exp_avg_var']

                state['step'] += 1
                bias_correction1 = 1 - beta1 ** state['step']
                bias_correction2 = 1 - beta2 ** state['step']

                # Update first and second moment running average
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                grad_residual = grad - exp_avg
                exp_avg_var.mul_(beta2).addcmul_( grad_residual, grad_residual, value=1 - beta2)

                if amsgrad:
                    max_exp_avg_var = state['max_exp_avg_var']
                    # Maintains the maximum of all 2nd moment running avg. till now
                    torch.max(max_exp_avg_var, exp_avg_var.add_(group['eps']), out=max_exp_avg_var)

                    # Use the max. for normalizing running avg. of gradient
                    denom = (max_exp_avg_var.sqrt() / math.sqrt(bias_correction2)).add_(group['eps'])
                else:
                    denom = (exp_avg_var.add_(group['eps']).sqrt() / math.sqrt(bias_correction2)).add_(group['eps'])

                # update
                if not self.rectify:
                    # Default update
                    step_size = group['lr'] / bias_correction1
                    p.data.addcdiv_( exp_avg, denom, value=-step_size)

                else:  # Rectified update, forked from RAdam
                    buffered = group['buffer'][int(state['step'] % 10)]
                    if state['step'] == buffered[0]:
                        N_sma, step_size = buffered[1], buffered[2]
                    else:
                        buffered[0] = state['step']
                        beta2_t = beta2 ** state['step']
                        N_sma_max = 2 / (1 - beta2) - 1
                        N_sma = N_sma_max - 2 * state['step'] * beta2_t / (1 - beta2_t)
                        buffered[1] = N_sma

                        # more conservative since it's an approximated value
                        if N_sma >= 5:
                            step_size = math.sqrt(
                                (1 - beta2_t) * (N_sma - 4) / (N_sma_max - 4) * (N_sma - 2) / N_sma * N_sma_max / (
                                        N_sma_max - 2)) / (1 - beta1 ** state['step'])
                        elif self.degenerated_to_sgd:
                            step_size = 1.0 / (1 - beta1 ** state['step'])
                        else:
                            step_size = -1
                        buffered[2] = step_size

                    if N_sma >= 5:
                        denom = exp_avg_var.sqrt().add_(group['eps'])
                        p.data.addcdiv_(exp_avg, denom, value=-step_size * group['lr'])
                    elif step_size > 0:
                        p.data.add_( exp_avg, alpha=-step_size * group['lr'])

                if half_precision:
                    p.data = p.data.half()
                    p.grad = p.grad.half()

        return loss


# ---- a small MLP on a numpy toy problem
rng = np.random.default_rng(0)
X = torch.from_numpy(rng.normal(size=(48, 8)).astype(np.float32))
W_true = rng.normal(size=(8, 3))
Y = torch.from_numpy(np.argmax(X.numpy() @ W_true + 0.3 * rng.normal(size=(48, 3)), 1))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def make_model(seed=1):
    m = MLP()
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.from_numpy(r.normal(0, 0.4, tuple(p.shape)).astype(np.float32)))
    return m


def batches(step):
    i = (step * 16) % 48
    return X[i:i + 16], Y[i:i + 16]


def train(model, opt, steps, start=0, closure_form=False, zero_grad=None):
    # alphadl's Lookahead has no zero_grad of its own, and Optimizer's needs
    # the defaults it never sets: its users zero the model's gradients
    zero_grad = zero_grad or opt.zero_grad
    losses = []
    for s in range(start, start + steps):
        x, y = batches(s)
        if closure_form:
            def closure():
                zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                return loss
            loss = opt.step(closure)
        else:
            zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        losses.append(loss.item())
    return losses


def roundtrip(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf)


print("version_higher", version_higher)

# Lion, decoupled weight decay, two param groups
model = make_model()
opt = Lion([{'params': model.fc1.parameters()}, {'params': model.fc2.parameters(), 'lr': 3e-3}],
           lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1, decoupled_weight_decay=False)
model.fc1.bias.requires_grad_(False)       # no grad: filtered out of the step
print("lion", [f"{v:.4f}" for v in train(model, opt, 6)], fmt(model.fc1.weight), fmt(model.fc2.bias),
      len(opt.state), model.fc1.bias in opt.state)
print("lion exp_avg", fmt(opt.state[model.fc2.weight]['exp_avg']), opt.param_groups[1]['betas'])
model.fc1.bias.requires_grad_(True)
m2 = make_model(2)
opt_d = Lion(m2.parameters(), lr=1e-2, weight_decay=1e-3, decoupled_weight_decay=True)
print("lion closure", [f"{v:.4f}" for v in train(m2, opt_d, 4, closure_form=True)], fmt(m2.fc1.weight))

# Lion checkpoint: saved after 3 steps, resumed for 3, against 6 uninterrupted
ma, mb = make_model(3), make_model(3)
oa = Lion(ma.parameters(), lr=5e-3, weight_decay=0.05)
ob = Lion(mb.parameters(), lr=5e-3, weight_decay=0.05)
train(ma, oa, 6)
train(mb, ob, 3)
ck = roundtrip({'model': mb.state_dict(), 'optimizer': ob.state_dict()})
mc = make_model(7)
mc.load_state_dict(ck['model'])
oc = Lion(mc.parameters(), lr=1.0)
oc.load_state_dict(ck['optimizer'])
train(mc, oc, 3, start=3)
print("lion resume", sorted(ck['optimizer']['state'][0]), ck['optimizer']['param_groups'][0]['betas'],
      oc.param_groups[0]['lr'], all(torch.allclose(p, q, atol=1e-6) for p, q in zip(ma.parameters(), mc.parameters())))

# Lookahead(SGD with momentum) under StepLR, pullback momentum
model = make_model(4)
base = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
la = Lookahead(base, la_steps=3, la_alpha=0.5, pullback_momentum="pullback")
sched = torch.optim.lr_scheduler.StepLR(la, step_size=4, gamma=0.5)
losses = []
for s in range(8):
    losses += train(model, la, 1, start=s)
    sched.step()
print("lookahead", [f"{v:.4f}" for v in losses], la.get_la_step(), sched.get_last_lr(), la.param_groups[0]['lr'])
print("lookahead params", fmt(model.fc1.weight), fmt(la.state[model.fc1.weight]['cached_params']),
      fmt(la.state[model.fc1.weight]['cached_mom']),
      la.state[model.fc1.weight]['cached_mom'] is base.state[model.fc1.weight]['momentum_buffer'])
la._backup_and_load_cache()
with torch.no_grad():
    slow_loss = F.cross_entropy(model(X), Y)
la._clear_and_load_backup()
with torch.no_grad():
    fast_loss = F.cross_entropy(model(X), Y)
print("slow / fast", f"{slow_loss.item():.5f}", f"{fast_loss.item():.5f}", sorted(la.state[model.fc1.weight]))
sd = roundtrip(la.state_dict())
print("lookahead sd", sorted(sd), sorted(sd['state'][0]), sd['param_groups'][0]['initial_lr'],
      isinstance(la, Optimizer), la.__getstate__()['_total_la_steps'])

model = make_model(5)
la_r = Lookahead(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5), la_steps=2, la_alpha=0.7,
                 pullback_momentum="reset")
print("lookahead reset", [f"{v:.4f}" for v in train(model, la_r, 5)],
      fmt(la_r.optimizer.state[model.fc2.weight]['momentum_buffer']))

# alphadl's Lookahead(Adam): k / alpha, a second param group added later
model = make_model(6)
inner = torch.optim.Adam([model.fc1.weight, model.fc1.bias], lr=1e-2)
lk = LookaheadK(inner, k=3, alpha=0.5)
l1 = train(model, lk, 4, zero_grad=model.zero_grad)
lk.add_param_group({'params': [model.fc2.weight, model.fc2.bias], 'lr': 5e-3})
l2 = train(model, lk, 4, start=4, zero_grad=model.zero_grad)
sd = lk.state_dict()
print("lookaheadK", [f"{v:.4f}" for v in l1 + l2], [g["counter"] for g in lk.param_groups],
      sorted(sd), len(sd['fast_state']), len(sd['slow_state']), sd['param_groups'][1]['counter'],
      sd['param_groups'][1]['betas'], fmt(model.fc2.weight))

# AdaBelief: rectified (default), amsgrad, plain with fixed decay; a checkpoint
for kw in (dict(weight_decay=1e-2), dict(amsgrad=True, rectify=False, weight_decay=5e-4),
           dict(weight_decouple=False, weight_decay=1e-3, rectify=False, betas=(0.8, 0.99)),
           dict(fixed_decay=True, weight_decay=1e-3, rectify=False)):
    model = make_model(8)
    ab = AdaBelief(model.parameters(), lr=1e-2, eps=1e-12, print_change_log=False, **kw)
    l = train(model, ab, 7)
    st = ab.state[model.fc1.weight]
    print("adabelief", sorted(kw), [f"{v:.4f}" for v in l], fmt(model.fc1.weight), st['step'],
          f"{st['rho_inf']:.1f}", fmt(st['exp_avg_var'], 2), fmt(st.get('max_exp_avg_var', st['exp_avg']), 2))
print("buffer", [b[0] for b in ab.param_groups[0]['buffer']][:4])

model = make_model(8)
ab = AdaBelief(model.parameters(), lr=1e-2, eps=1e-12, print_change_log=False)
train(model, ab, 7)
print("rectify buffer", [[b[0], None if b[1] is None else round(b[1], 4)] for b in ab.param_groups[0]['buffer'][:8]])
ck = roundtrip({'model': model.state_dict(), 'optimizer': ab.state_dict()})
m9 = make_model(9)
m9.load_state_dict(ck['model'])
ab9 = AdaBelief(m9.parameters(), lr=1e-2, eps=1e-12, print_change_log=False)
ab9.load_state_dict(ck['optimizer'])
la_ = train(model, ab, 3, start=7)
lb_ = train(m9, ab9, 3, start=7)
print("adabelief resume", [f"{v:.4f}" for v in lb_], la_ == lb_, ab9.state[m9.fc1.weight]['step'],
      type(ab9.state[m9.fc1.weight]['step']).__name__, sorted(ck['optimizer']['state'][0]))
print("bad eps:", end=" ")
try:
    AdaBelief(model.parameters(), eps=-1.0, print_change_log=False)
except ValueError as e:
    print(e)


# training steps under torch.compile against the same steps eagerly: Lion;
# AdaBelief (its Python int state['step'] and bias corrections) and
# michaelrzhang's Lookahead (its self._la_step counter deciding when to pull
# back), each built twice from the same numbers, one run eager, one compiled
def compare(name, make_opt, n=5):
    runs = []
    for compiled in (False, True):
        model = make_model(10)
        opt = make_opt(model)
        train(model, opt, 2)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        f = torch.compile(step) if compiled else step
        x, y = batches(0)
        runs.append(([f(x, y).detach() for _ in range(n)], [p.detach().clone() for p in model.parameters()]))
    (eager, after), (got, now) = runs
    print(name, "compiled loss", [f"{l.item():.5f}" for l in got])
    print(name, "compiled == eager:", all(torch.allclose(c, e, rtol=1e-4, atol=1e-6) for c, e in zip(got, eager)),
          all(torch.allclose(a, b, rtol=1e-4, atol=1e-6) for a, b in zip(after, now)))


compare("lion", lambda m: Lion(m.parameters(), lr=1e-2, weight_decay=0.1))
compare("adabelief", lambda m: AdaBelief(m.parameters(), lr=1e-2, eps=1e-12, rectify=False, amsgrad=True,
                                         weight_decay=1e-3, print_change_log=False))
compare("lookahead", lambda m: Lookahead(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), la_steps=2,
                                         la_alpha=0.5, pullback_momentum="pullback"))
