"""``tracec.optim.swa_utils``: PyTorch's Stochastic Weight Averaging and
EMA helpers (``AveragedModel``, ``SWALR``, ``update_bn`` and the averaging
function factories).

Invariants (PyTorch's): ``AveragedModel`` holds a deep copy under
``module`` (state_dict keys ``module.*`` plus ``n_averaged``); its first
``update_parameters`` copies the model, later ones apply the averaging
function (default: the running mean ``a + (p - a) / (n + 1)``); without
``use_buffers`` the buffers are copied, not averaged.  ``SWALR`` anneals
each group's lr to its ``swa_lr`` over ``anneal_epochs`` steps.  All
averaging runs without autograd, with the counter ``n_averaged`` kept a
tensor that Python only decides on (``bool(n == 0)``, as PyTorch writes
it), never reads: in a compiled step a decision is speculated, a read would
be a guard that changes at every update.
"""
from __future__ import annotations

import copy
import itertools
import math

from tracec import graph
from tracec.creation import tensor
from tracec import dtypes as dt
from tracec.nn.modules.module import Module
from tracec.nn.modules.normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d
from tracec.optim._scheduler_base import (LRScheduler, _format_param,
                                          _warn_get_lr_called_within_step)

__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def get_ema_multi_avg_fn(decay=0.999):
    def ema_update(ema_param_list, current_param_list, _):
        with graph.no_grad():
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                if p_ema.dtype.is_floating_point:
                    p_ema.lerp_(p_model, 1 - decay)
                else:
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        with graph.no_grad():
            # ``num_averaged`` stays a tensor (PyTorch's weight 1 / (n + 1) is
            # a 0-d tensor): a compiled step must not read the counter.
            w = 1 / (num_averaged + 1)
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                if p_avg.dtype.is_floating_point:
                    p_avg.lerp_(p_model, w)
                else:
                    p_avg.copy_(p_avg + (p_model - p_avg) / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    def ema_update(ema_param, current_param, num_averaged):
        with graph.no_grad():
            return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    def swa_update(averaged_param, current_param, num_averaged):
        with graph.no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=dt.int64))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        with graph.no_grad():
            self._update(model)

    def _update(self, model):
        self_param = (itertools.chain(self.module.parameters(), self.module.buffers())
                      if self.use_buffers else self.parameters())
        model_param = (itertools.chain(model.parameters(), model.buffers())
                       if self.use_buffers else model.parameters())
        mine, theirs = [], []
        # Decisions on the counter, not reads of it (PyTorch's): traced, a
        # decision is speculated, so a compiled step keeps its code from the
        # second update on instead of tracing again for every count.
        copy_param = bool(self.n_averaged == 0)
        for p_avg, p_model in zip(self_param, model_param):
            p_model_ = p_model.detach()
            mine.append(p_avg.detach())
            theirs.append(p_model_)
            if copy_param:
                p_avg.detach().copy_(p_model_)
        if bool(self.n_averaged > 0):
            if self.avg_fn is None:
                # PyTorch groups by (device, dtype); on devices without
                # foreach kernels (the CPU) its default is get_swa_avg_fn per
                # tensor, a + (p - a) / (n + 1), not the lerp of the multi fn.
                groups: dict = {}
                for a, b in zip(mine, theirs):
                    groups.setdefault((a.device.type, a.dtype), ([], []))
                    groups[(a.device.type, a.dtype)][0].append(a)
                    groups[(a.device.type, a.dtype)][1].append(b)
                for (device, _), (a_list, b_list) in groups.items():
                    if self.multi_avg_fn is not None:
                        self.multi_avg_fn(a_list, b_list, self.n_averaged.clone())
                    elif device == "cuda":
                        get_swa_multi_avg_fn()(a_list, b_list, self.n_averaged.clone())
                    else:
                        avg_fn = get_swa_avg_fn()
                        for a, b in zip(a_list, b_list):
                            a.copy_(avg_fn(a, b, self.n_averaged.clone()))
            else:
                for a, b in zip(mine, theirs):
                    a.copy_(self.avg_fn(a, b, self.n_averaged.clone()))
        if not self.use_buffers:
            for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                b_swa.detach().copy_(b_model.detach())
        self.n_averaged += 1


def update_bn(loader, model, device=None):
    """Recompute every batch norm's running statistics with one pass over
    ``loader`` (cumulative averages; momenta and train flag restored)."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, (BatchNorm1d, BatchNorm2d, BatchNorm3d)):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with graph.no_grad():
        for inp in loader:
            if isinstance(inp, (list, tuple)):
                inp = inp[0]
            if device is not None:
                inp = inp.to(device)
            model(inp)
    for module, m in momenta.items():
        module.momentum = m
    model.train(was_training)


class SWALR(LRScheduler):
    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        swa_lrs = _format_param("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', "
                             f"instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = (self._cosine_anneal if anneal_strategy == "cos"
                            else self._linear_anneal)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha)
                    for g in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha)
                for g, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
