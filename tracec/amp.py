"""``tracec.amp``: PyTorch's ``torch.amp.GradScaler`` (dynamic loss scaling
for mixed-precision training), as nanoGPT-style scripts use it.

Follows ``torch.amp.grad_scaler`` step for step: the scale is a float32 0-d
tensor made lazily by the first ``scale()``; ``unscale_`` multiplies each
gradient by the float32 reciprocal of the scale (computed in float64, as
PyTorch does) and records whether any gradient is inf/NaN; ``step`` skips
``optimizer.step()`` when one was; ``update`` backs the scale off after a
skipped step and grows it after ``growth_interval`` clean ones.  A scaler
for ``"cuda"`` when no GPU is usable warns and disables itself, as PyTorch's
does.  Inside ``tracec.compile`` the inf check and the scale update are
tensor ops, and ``step``'s branch on the check is a speculated decision
(a call that finds an inf runs eagerly).

``autocast`` is ``tracec/autocast_mode.py``'s (CPU bfloat16/float16).
"""
from __future__ import annotations

import collections.abc
import functools
import sys
import types
import warnings
from collections import defaultdict
from enum import Enum

from tracec import creation
from tracec.autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from tracec import dtypes as dt
from tracec import functions as F
from tracec.cuda import is_available as _cuda_available
from tracec.graph import no_grad
from tracec.methods_extra import isfinite
from tracec.tensor import Tensor

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if self._device == "cuda" and enabled and not _cuda_available():
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  "
                          "Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale = None
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _check_scale_growth_tracker(self, funcname: str):
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, device) -> None:
        self._scale = creation.full((), self._init_scale, dtype=dt.float32, device=device)
        self._growth_tracker = creation.full((), self._init_growth_tracker, dtype=dt.int32,
                                             device=device)

    def scale(self, outputs):
        """``outputs`` (a tensor, or an iterable of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(outputs.device)

        def apply_scale(val):
            if isinstance(val, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(val.device)
                return val * self._scale.to(val.device)
            if isinstance(val, (list, tuple)):
                iterable = map(apply_scale, val)
                return type(val)(iterable)
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale: Tensor, allow_fp16: bool):
        found_inf = creation.full((), 0.0, dtype=dt.float32)
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if param.grad is None:
                        continue
                    if not allow_fp16 and param.grad.dtype == dt.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    g = param.grad
                    # In tensor ops (no Python branch): a compiled step
                    # records it (torch._amp_foreach_non_finite_check_and_unscale_).
                    bad = F.logical_not(isfinite(g).all()).to(dt.float32)
                    found_inf.copy_(F.maximum(found_inf, bad))
                    g.mul_(inv_scale.to(g.dtype))
        return {str(self._scale.device): found_inf}

    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale (once per step)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # The reciprocal in float64, as PyTorch computes it.
        inv_scale = F.reciprocal(self._scale.double()).float()
        optimizer_state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        optimizer_state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``unscale_`` (unless done) then ``optimizer.step()``, skipped when a
        gradient is inf/NaN.  Returns what ``optimizer.step`` returned."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if optimizer_state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        retval = None
        # bool() of a tensor: inside tracec.compile a speculated decision
        # (the step compiles; a call that finds an inf runs eagerly).
        found = sum(optimizer_state["found_inf_per_device"].values())
        if not bool(found):
            retval = optimizer.step(*args, **kwargs)
        optimizer_state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None) -> None:
        """Back the scale off after a skipped step, grow it after
        ``growth_interval`` clean ones (or set it to ``new_scale``)."""
        if not self._enabled:
            return
        _scale, _growth_tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                self._scale.fill_(new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                          "torch.FloatTensor with requires_grad=False.")
                if (new_scale.device.type != self._device or new_scale.numel() != 1
                        or new_scale.requires_grad):
                    raise AssertionError(reason)
                self._scale.copy_(new_scale.reshape(()))
        else:
            found_infs = [found_inf for state in self._per_optimizer_states.values()
                          for found_inf in state["found_inf_per_device"].values()]
            if len(found_infs) == 0:
                raise AssertionError("No inf checks were recorded prior to update.")
            # torch._amp_update_scale_, in tensor ops (a compiled step
            # records it): back off after an inf, grow after
            # growth_interval clean steps (unless the grown scale is inf).
            found = sum(found_infs) > 0
            successful = _growth_tracker + 1
            grow = F.logical_and(F.logical_not(found), successful == self._growth_interval)
            grown = _scale * self._growth_factor
            new_scale = F.where(found, _scale * self._backoff_factor,
                                F.where(F.logical_and(grow, isfinite(grown)), grown, _scale))
            _scale.copy_(new_scale)
            _growth_tracker.copy_(F.where(F.logical_or(found, grow),
                                          creation.zeros_like(successful), successful))
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    def _get_scale_async(self):
        return self._scale

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        if self._enabled:
            return self._init_scale if self._scale is None else float(self._scale.item())
        return 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if self._enabled:
            return (self._init_growth_tracker if self._growth_tracker is None
                    else int(self._growth_tracker.item()))
        return 0

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        if self._enabled:
            return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                    "backoff_factor": self._backoff_factor,
                    "growth_interval": self._growth_interval,
                    "_growth_tracker": self._get_growth_tracker()}
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])


def _cast(value, device_type: str, dtype):
    """``value`` with its floating tensors on ``device_type`` (float64 ones
    excepted) cast to ``dtype``, through lists, tuples and mappings
    (``torch.amp.autocast_mode._cast``)."""
    if isinstance(value, Tensor):
        eligible = (value.dtype.is_floating_point and value.device.type == device_type
                    and value.dtype is not dt.float64)
        return value.to(dtype) if eligible else value
    if isinstance(value, (str, bytes)) or type(value).__module__ == "numpy":
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype)
                for k, v in value.items()}
    if isinstance(value, collections.abc.Iterable):
        iterable = (_cast(v, device_type, dtype) for v in value)
        return type(value)(iterable) if isinstance(value, (list, tuple)) else iterable
    return value


def custom_fwd(fwd=None, *, device_type: str, cast_inputs=None):
    """``torch.amp.custom_fwd``: decorates a custom ``autograd.Function``'s
    forward.  Inside an autocast region, with ``cast_inputs`` the forward
    runs with autocast off on its inputs cast to ``cast_inputs``; without,
    it runs under the region and records that it did (for custom_bwd)."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        autocast_context = is_autocast_enabled(device_type)
        args[0]._fwd_used_autocast = False
        if autocast_context:
            with autocast(device_type=device_type, enabled=False):
                return fwd(*_cast(args, device_type, cast_inputs),
                           **_cast(kwargs, device_type, cast_inputs))
        return fwd(*args, **kwargs)
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type: str):
    """``torch.amp.custom_bwd``: the backward runs under the autocast state
    its forward ran under."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type=device_type, enabled=args[0]._fwd_used_autocast,
                      dtype=args[0]._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd


# ``torch.cuda.amp`` and ``torch.cpu.amp``: the older spellings, with the
# device fixed.  ``tracec.cuda`` is a module, not a package, so these live in
# ``sys.modules`` under their dotted names (what ``import torch.cuda.amp``
# resolves to through ``install_as_torch``).
def _legacy_amp(name: str, device: str, default_dtype):
    mod = types.ModuleType(name, f"``{name}``: ``autocast`` and ``GradScaler`` for {device!r}.")

    class _Autocast(autocast):
        def __init__(self, enabled: bool = True, dtype=default_dtype, cache_enabled: bool = True):
            warnings.warn(f"`torch.{device}.amp.autocast(args...)` is deprecated. Please use "
                          f"`torch.amp.autocast('{device}', args...)` instead.", FutureWarning,
                          stacklevel=2)
            super().__init__(device, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    class _GradScaler(GradScaler):
        def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                     backoff_factor: float = 0.5, growth_interval: int = 2000,
                     enabled: bool = True) -> None:
            warnings.warn(f"`torch.{device}.amp.GradScaler(args...)` is deprecated. Please use "
                          f"`torch.amp.GradScaler('{device}', args...)` instead.", FutureWarning,
                          stacklevel=2)
            super().__init__(device, init_scale, growth_factor, backoff_factor,
                             growth_interval, enabled)

    _Autocast.__name__ = _Autocast.__qualname__ = "autocast"
    _GradScaler.__name__ = _GradScaler.__qualname__ = "GradScaler"
    mod.autocast, mod.GradScaler = _Autocast, _GradScaler
    mod.__all__ = ["autocast", "GradScaler"]
    sys.modules[name] = mod
    return mod


def _install_legacy_amp():
    from tracec import cuda
    if not hasattr(cuda, "__path__"):
        cuda.__path__ = []  # a package to the import system: ``import tracec.cuda.amp``
    cuda.amp = _legacy_amp("tracec.cuda.amp", "cuda", dt.float16)


_install_legacy_amp()


# ``torch.amp`` is a package whose modules libraries import by name
# (fastai: ``from torch.amp.grad_scaler import OptState``); both are this
# module to the import system, as ``tracec.cuda.amp`` above.
__path__: list = []
grad_scaler = sys.modules[__name__ + ".grad_scaler"] = sys.modules[__name__]
sys.modules[__name__ + ".autocast_mode"] = sys.modules[__name__]
