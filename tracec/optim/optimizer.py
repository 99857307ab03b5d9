"""``Optimizer``: PyTorch's optimizer base class (param groups, state,
``zero_grad``, ``state_dict`` / ``load_state_dict``, step hooks).

Invariants (the compiler traces ``opt.step()`` into IR):
  * every update of a parameter or of optimizer state is a tracec tensor op
    or an in-place Tensor method run under ``no_grad`` -- never arithmetic on
    ``._data``;
  * per-parameter state lives in ``self.state[param]`` as tensors that are
    updated in place (Adam's ``step`` counter included), so a traced step
    carries it as state;
  * hyperparameters are Python numbers read from ``param_groups`` at each
    ``step()``, so a change of ``lr`` takes effect at the next step;
  * the update formulas read a group's learning rate through ``_lr(group)``:
    while ``tracec.compile`` traces a step, that is a 0-d float64 tensor
    the compiled step reads as state and each compiled call refreshes from
    ``group["lr"]``, so a learning-rate schedule neither retraces nor
    recompiles.  (Mixed with a float32 tensor, a 0-d float64 value is
    rounded to float32 first, as a Python number is: compiled results stay
    equal to eager ones.)  A momentum (or Adam's beta1) that a scheduler
    cycles (``_lift``) is read the same way, through ``_hyper``, with a
    guard on the Python branches taken from it.  Other hyperparameters are
    guarded: changing one retraces.
"""
from __future__ import annotations

import copy
import functools
import numbers
import warnings
from collections import OrderedDict, defaultdict
from itertools import chain

from tracec import creation
from tracec import dtypes as dt
from tracec import graph
from tracec.mutation import (EPOCH, Ident, WatchedDict, WatchedList, WatchedState,
                             deep_immutable, epoch_covered)
from tracec.sym_scalar import SymScalar
from tracec.tensor import RECORDERS, Tensor, made_before_call, note_guard
from tracec.tensor_type import typename
from tracec.utils.hooks import RemovableHandle as _RemovableHandle

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Singleton marking a hyperparameter that has no default."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _scalar_dtype() -> dt.DType:
    """PyTorch's ``_get_scalar_dtype``: the dtype of ``state['step']``."""
    return dt.float64 if dt.get_default_dtype() is dt.float64 else dt.float32


#: Hooks every optimizer's ``step`` runs (``register_optimizer_step_*_hook``).
_global_optimizer_pre_hooks: dict = OrderedDict()
_global_optimizer_post_hooks: dict = OrderedDict()


def register_optimizer_step_pre_hook(hook) -> _RemovableHandle:
    """``hook(optimizer, args, kwargs)`` runs before every optimizer's step."""
    handle = _RemovableHandle(_global_optimizer_pre_hooks)
    _global_optimizer_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook) -> _RemovableHandle:
    """``hook(optimizer, args, kwargs)`` runs after every optimizer's step."""
    handle = _RemovableHandle(_global_optimizer_post_hooks)
    _global_optimizer_post_hooks[handle.id] = hook
    return handle


def _with_hooks(step, guard: bool = False):
    """Wrap a subclass's ``step`` so that registered pre/post hooks run;
    ``guard``: a program's own ``step``, which the built-in steps' guards
    (``_closure_loss``) do not cover, guards here."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        if self.__dict__.get("_in_step"):  # a subclass's step calling super().step()
            return step(self, *args, **kwargs)
        self._in_step = True
        try:
            return _run(self, args, kwargs)
        finally:
            self._in_step = False

    def _run(self, args, kwargs):
        if guard and RECORDERS:
            # A traced step depends on the optimizer's state and
            # hyperparameters as they are now: a subclass's own ``step``
            # (MAE's LARS: ``if 'mu' not in state: state['mu'] = zeros_like(p)``,
            # ``p.add_(mu, alpha=-g['lr'])``) reads them without the built-in
            # steps' guards (``_closure_loss``), and compiled calls would
            # replay the first call's branch and numbers.
            note_guard(self.optimizer_state_and_hyperparameters)
            note_guard(self.parameters_and_state)
        # PyTorch's profile_hook_step: hooks see the bound call's args,
        # ``self`` first, and a pre hook's new args replace them whole.
        args = (self,) + args
        for hook in [*_global_optimizer_pre_hooks.values(),
                     *getattr(self, "_optimizer_step_pre_hooks", {}).values()]:
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{step} must return None or a tuple of "
                                       f"(new_args, new_kwargs), but got {result}.")
                args, kwargs = result
        out = step(*args, **kwargs)
        self._opt_called = True
        for hook in [*getattr(self, "_optimizer_step_post_hooks", {}).values(),
                     *_global_optimizer_post_hooks.values()]:
            hook(self, args, kwargs)
        return out
    wrapper._tracec_hooked = True
    return wrapper


#: ``_update_group`` implementations -> the hyperparameters they read only
#: through ``Optimizer._lr`` / ``Optimizer._hyper`` (``reads_lifted``); a
#: subclass overriding ``_update_group`` is not trusted to, so its values stay
#: guarded until its first traced step lifts them.
_READS_LIFTED: dict = {}


def reads_lifted(*keys):
    """Mark an ``_update_group`` that reads the learning rate only through
    ``self._lr(group)`` and each of ``keys`` (``"momentum"``, ``"beta1"``)
    only through ``self._hyper(group, key, branch)``."""
    def mark(update_group):
        _READS_LIFTED[update_group] = ("lr",) + keys
        return update_group
    return mark


#: ``reads_lifted()`` for an ``_update_group`` that lifts only the lr.
reads_lr_by_lr = reads_lifted()


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _group_value(group: dict, key: str):
    """The number ``key`` names in a group (``'beta1'``: ``betas[0]``)."""
    return group["betas"][0] if key == "beta1" else group[key]


#: Attributes every eager ``step`` sets (``_with_hooks``) that no guard
#: reads: setting them leaves the mutation epoch alone, so an eager step
#: between compiled calls does not make them re-check everything.
_BOOKKEEPING = frozenset(("_in_step", "_opt_called"))


class _Lifted:
    """The guard a traced step reports for a hyperparameter it reads from a
    holder tensor (the lr; a momentum or beta1 a scheduler cycles): it holds
    while the group's value is a plain number that takes the same Python
    branches (``branch(value)``), and its ``refresh`` (run by each compiled
    call before it reads its inputs) copies that number into the holder."""

    def __init__(self, opt: "Optimizer", gi: int, key: str, branch=None):
        self.opt, self.gi, self.key, self.branch = opt, gi, key, branch
        # the compiler runs one refresh per (optimizer, index)
        self.index = gi if key == "lr" else (gi, key)

    #: The mutation epoch covers this guard while ``_watched()`` holds.
    _tracec_epoch_covered = "_watched"

    def _watched(self) -> bool:
        """Whether every change of what this guard reads advances the
        mutation epoch: the groups list and this group are watched
        containers and the value is a plain (immutable) number."""
        groups = self.opt.__dict__.get("param_groups")
        if type(groups) is not WatchedList:
            return False
        if self.gi >= len(groups):
            return True
        g = groups[self.gi]
        if type(g) is not WatchedDict:
            return False
        try:
            v = _group_value(g, self.key)
        except (KeyError, IndexError, TypeError):
            return False
        return type(v) in (int, float)

    def __call__(self):
        groups = self.opt.param_groups
        if self.gi >= len(groups):
            return None
        v = _group_value(groups[self.gi], self.key)
        if type(v) is SymScalar:     # while a traced call set it from a lifted number
            v = v.value
        if not _is_number(v):
            return False
        return True if self.branch is None else (True, self.branch(v))

    def refresh(self) -> None:
        holder = self.opt._holders(self.key)[self.gi]
        holder._data[()] = _group_value(self.opt.param_groups[self.gi], self.key)


class Optimizer:
    """Base class of all optimizers (``tracec.optim.Optimizer``).

    ``params`` is an iterable of tensors, of ``(name, tensor)`` pairs, or of
    dicts each holding ``'params'`` and per-group options; options missing
    from a group take the optimizer's ``defaults``.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_tracec_hooked", False):
            cls.step = _with_hooks(step, guard=not cls.__module__.startswith("tracec."))

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self._optimizer_step_pre_hooks: dict = OrderedDict()
        self._optimizer_step_post_hooks: dict = OrderedDict()
        self._init_state_dict_hooks()
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable "
                            "of Tensors or dicts, but got " + typename(params))
        # Watched (tracec.mutation): a compiled step re-checks its
        # per-parameter guard only after something changed them.
        self.state: defaultdict = WatchedState()
        # Watched too (the hyperparameter guard): the list, and the group
        # made here (a group the user passed stays the user's own dict).
        self.param_groups: list[dict] = WatchedList()
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [WatchedDict(params=param_groups)]
        for param_group in param_groups:
            self.add_param_group(param_group)

    # --- pickling / copying (PyTorch's __getstate__/__setstate__) ---------------

    def __getstate__(self) -> dict:
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setattr__(self, name: str, value) -> None:
        if name not in _BOOKKEEPING:
            EPOCH[0] += 1     # compiled steps re-check their guards (tracec.mutation)
        object.__setattr__(self, name, value)

    def __setstate__(self, state: dict) -> None:
        EPOCH[0] += 1
        self.__dict__.update(state)
        # Loaded or copied containers become watched ones (fresh objects
        # that nothing else refers to yet).
        if type(self.__dict__.get("state")) is not WatchedState:
            self.__dict__["state"] = WatchedState(self.__dict__.get("state", {}))
        groups = self.__dict__.get("param_groups")
        if type(groups) is list:
            groups = self.__dict__["param_groups"] = WatchedList(
                WatchedDict(g) if type(g) is dict else g for g in groups)
        for group in groups or ():
            if type(group.get("params")) is list:
                group["params"] = WatchedList(group["params"])
        self.__dict__.setdefault("_optimizer_step_pre_hooks", OrderedDict())
        self.__dict__.setdefault("_optimizer_step_post_hooks", OrderedDict())
        self._init_state_dict_hooks()
        self.defaults.setdefault("differentiable", False)

    def __repr__(self) -> str:
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"

    # --- groups ---------------------------------------------------------------

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (a dict with ``'params'`` and options)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            param_group["params"] = list(params)

        tensors, names = [], []
        for p in param_group["params"]:
            if isinstance(p, tuple):
                names.append(p[0])
                tensors.append(p[1])
            else:
                tensors.append(p)
        param_group["params"] = WatchedList(tensors)
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. "
                                 "Some param names are missing")
            param_group["param_names"] = names

        for p in tensors:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + typename(p))
            if not self.defaults.get("differentiable", None) and not (
                    p.is_leaf or getattr(p, "_retains_grad", False)):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)

        ids = [id(p) for p in tensors]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "in future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)

        seen: set = set()
        for group in self.param_groups:
            seen.update(id(p) for p in group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                txt = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {txt} to the optimizer")
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)
        # Made now, not while a step is traced: the tracer reads a tensor that
        # existed before the traced call as state (see _lr).
        self.__dict__.setdefault("_lr_holders", []).append(
            creation.zeros((), dtype=dt.float64))
        for holders in self.__dict__.get("_hyper_holders", {}).values():
            holders.append(creation.zeros((), dtype=dt.float64))

    def _lift(self, key: str) -> None:
        """A scheduler will change ``key`` (``'momentum'``, or ``'beta1'``
        for ``betas[0]``) at every step (``OneCycleLR``, ``CyclicLR``): a
        traced step then reads it from a holder tensor, as it reads the lr,
        so that the schedule does not retrace.  The holders are made now,
        outside any trace."""
        holders = self.__dict__.setdefault("_hyper_holders", {}).setdefault(key, [])
        while len(holders) < len(self.param_groups):
            holders.append(creation.zeros((), dtype=dt.float64))

    def _holders(self, key: str):
        if key == "lr":
            return self.__dict__.get("_lr_holders", ())
        return self.__dict__.get("_hyper_holders", {}).get(key, ())

    # --- gradients --------------------------------------------------------------

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized tensors: to ``None`` (the
        default), or to zeros in place with ``set_to_none=False``."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    # Written without reading first: a compiled step then does
                    # not depend on whether .grad was None on entry.
                    p.grad = None
                elif p.grad is None:
                    continue
                else:
                    g = p.grad
                    if g.grad_fn is not None:
                        g.detach_()
                    else:
                        g.requires_grad_(False)
                    with graph.no_grad():
                        g.zero_()

    def step(self, closure=None):
        """Perform one optimization step; ``closure`` re-evaluates the loss
        (run with grad enabled) and its value is returned.  A subclass
        defines ``_update_group(group)`` (or overrides ``step``)."""
        if not hasattr(type(self), "_update_group"):
            raise NotImplementedError
        return self._step_groups(closure)

    def _lr(self, group: dict):
        """``group["lr"]`` for the update formulas: the number itself, or,
        while ``tracec.compile`` traces this step, the group's 0-d float64
        holder set to it (read by the compiled step as state; each compiled
        call first copies the group's current lr into it: ``_Lifted``)."""
        return self._lifted_value(group, "lr", None)

    def _hyper(self, group: dict, key: str, branch):
        """The number ``key`` (``'momentum'``, ``'beta1'``) names in
        ``group``; while a step is traced and a scheduler cycles it
        (``_lift``), its holder instead, as ``_lr``.  ``branch(value)`` is
        what the update decides in Python from the number (``m != 0``...):
        the trace guards on it.  Call it once per group, whether or not the
        value is used, and branch on the group's number, not on this."""
        return self._lifted_value(group, key, branch)

    def _lifted_value(self, group: dict, key: str, branch):
        v = _group_value(group, key)
        sym = type(v) is SymScalar   # set in the traced call from a lifted number
        if not RECORDERS or not (sym or _is_number(v)):
            return v
        holders = self._holders(key)
        gi = next((i for i, g in enumerate(self.param_groups) if g is group), None)
        if gi is None or gi >= len(holders):
            return v
        holder = holders[gi]
        if sym:
            # Compiled calls compute it from that call's numbers, after
            # _Lifted.refresh copied the group's (previous) value in.
            v.lift.holders.append((holder, v.fn))
            v = v.value
        holder._data[()] = v       # its value for the eager run of the traced call
        self.__dict__.setdefault("_lifted", set()).add((gi, key))
        EPOCH[0] += 1    # the hyperparameter guard reads _lifted
        note_guard(_Lifted(self, gi, key, branch))
        return holder

    @epoch_covered(watched="_hyper_watched")
    def optimizer_state_and_hyperparameters(self):
        """What a compiled step specializes on: each group's hyperparameters
        (but a learning rate the compiled step reads as state: ``_lr``) and
        parameters, and which state tensors each parameter has (a momentum
        buffer is created on the first step, which takes another path)."""
        lifted = self.__dict__.get("_lifted", ())

        def shown(gi, k, v):
            if type(v) is SymScalar and k != "betas":
                # A lifted number read while tracing (a subclass's own step
                # reading ``g['lr']`` that tracec.lifted_state lifted, or one
                # a scheduler stepped inside set): compiled calls read it as
                # an input, so this guard leaves it out from now on (a trace
                # made before it was lifted recorded the number, and fails).
                if (gi, k) not in lifted:
                    self.__dict__.setdefault("_lifted", set()).add((gi, k))
                    EPOCH[0] += 1
                return "lifted"
            if k == "betas" and (gi, "beta1") in lifted:
                return ("lifted",) + tuple(e.value if type(e) is SymScalar else e
                                           for e in v[1:])
            if (gi, k) in lifted:
                return "lifted"
            if type(v) is tuple:
                return tuple(e.value if type(e) is SymScalar else e for e in v)
            return v.value if type(v) is SymScalar else v
        # The groups' "params" lists by identity: which tensors they hold is
        # the per-parameter guard's (parameters_and_state).  (A SymScalar:
        # a number a traced call set from a lifted one, tracec.sym_scalar.)
        groups = tuple(tuple(sorted((k, shown(gi, k, v))
                                    for k, v in g.items() if k != "params"
                                    and isinstance(v, (int, float, bool, str, tuple,
                                                       type(None), SymScalar))))
                       + (Ident(g["params"]), Ident(self.state))
                       for gi, g in enumerate(self.param_groups))
        return groups

    @epoch_covered
    def parameters_and_state(self):
        """The per-parameter part of the guard: which tensors each group
        optimizes, which state each has, and which tensor objects hold it (a
        trace reads and updates those very tensors, so after
        load_state_dict, new tensors, it must not be reused).  O(parameters):
        compiled calls skip it while the mutation epoch stands still."""
        params = tuple(tuple(map(id, g["params"])) for g in self.param_groups)
        state = tuple(tuple(sorted((k, id(v) if isinstance(v, Tensor) else None)
                                   for k, v in self.state[p].items())) if p in self.state else ()
                      for g in self.param_groups for p in g["params"])
        return params, state

    def _hyper_watched(self) -> bool:
        """Whether every change of what ``optimizer_state_and_hyperparameters``
        reads advances the mutation epoch: the groups list and each group
        are watched containers (a group dict the user passed in is not) and
        every value it compares is immutable (``_lifted`` and ``state`` are
        set with a bump)."""
        groups = self.__dict__.get("param_groups")
        return (type(groups) is WatchedList
                and all(type(g) is WatchedDict and all(
                    deep_immutable(v) for k, v in g.items() if k != "params"
                    and isinstance(v, (int, float, bool, str, tuple, type(None))))
                    for g in groups))

    def _guard_watched(self) -> bool:
        """Whether every change of what ``parameters_and_state`` reads
        advances the mutation epoch (``tracec.mutation``)."""
        state = self.__dict__.get("state")
        return (type(state) is WatchedState
                and all(type(v) is WatchedDict for v in state.values())
                and all(type(g.get("params")) is WatchedList for g in self.param_groups))

    def _step_groups(self, closure):
        """The body of a per-group optimizer's ``step``: run ``closure``
        (with grad enabled), then ``self._update_group(group)`` for each
        group under ``no_grad``; return the closure's loss."""
        loss = self._closure_loss(closure)
        # (PyTorch's _use_grad_for_differentiable: a differentiable
        # optimizer's update is recorded, so gradients flow through it)
        with graph.set_grad_enabled(bool(self.defaults.get("differentiable"))):
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _steps_as_tensors(self) -> None:
        """``state['step']`` as a 0-d tensor (an old checkpoint may hold a
        number), as PyTorch's ``__setstate__`` converts it."""
        for group in self.param_groups:
            for p in group["params"]:
                p_state = self.state.get(p, {})
                if "step" in p_state and not isinstance(p_state["step"], Tensor):
                    p_state["step"] = creation.tensor(float(p_state["step"]),
                                                      dtype=_scalar_dtype())

    def _closure_loss(self, closure):
        keys = _READS_LIFTED.get(getattr(type(self), "_update_group", None), ())
        if RECORDERS and keys:
            # This step will read each numeric lr through _lr (and a cycled
            # momentum through _hyper): leave them out of the guard from this
            # first trace on (else the next call retraces).
            lifted = self.__dict__.setdefault("_lifted", set())
            EPOCH[0] += 1    # the hyperparameter guard reads _lifted
            for key in keys:
                holders = self._holders(key)
                for gi, g in enumerate(self.param_groups[:len(holders)]):
                    if _is_number(_group_value(g, key)):
                        lifted.add((gi, key))
        if RECORDERS and closure is None and hasattr(self, "_init_state"):
            self._state_before_traced_step()
        # A compiled caller guards on these (tracec.compile retraces when they change).
        note_guard(self.optimizer_state_and_hyperparameters)
        note_guard(self.parameters_and_state)
        if closure is None:
            return None
        with graph.enable_grad():
            return closure()

    def _state_before_traced_step(self) -> None:
        """A traced first step of an optimizer whose state starts as zeros
        (``_init_state``: Adam, AdamW, RMSprop): make that state now, as
        tensors the trace reads as state, so the traced step is the steady
        one (from zeros the update gives the first step's values) and the
        second call reuses it instead of retracing.  Same values as eager."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and not self.state.get(p):
                    for v in self._init_state(group, p).values():
                        if isinstance(v, Tensor):
                            made_before_call(v)

    # --- hooks ------------------------------------------------------------------

    def register_step_pre_hook(self, hook) -> _RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs before each ``step``; it may
        return ``(new_args, new_kwargs)``."""
        handle = _RemovableHandle(self._optimizer_step_pre_hooks)
        self._optimizer_step_pre_hooks[handle.id] = hook
        return handle

    def register_step_post_hook(self, hook) -> _RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs after each ``step``."""
        handle = _RemovableHandle(self._optimizer_step_post_hooks)
        self._optimizer_step_post_hooks[handle.id] = hook
        return handle

    _STATE_DICT_HOOKS = ("_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
                         "_optimizer_load_state_dict_pre_hooks",
                         "_optimizer_load_state_dict_post_hooks")

    def _init_state_dict_hooks(self) -> None:
        for name in self._STATE_DICT_HOOKS:
            self.__dict__.setdefault(name, OrderedDict())

    def _register(self, table: str, hook, prepend: bool) -> _RemovableHandle:
        hooks = self.__dict__[table]
        handle = _RemovableHandle(hooks)
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_state_dict_pre_hook(self, hook, prepend: bool = False) -> _RemovableHandle:
        """``hook(optimizer)`` runs before ``state_dict`` builds its dict."""
        return self._register("_optimizer_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend: bool = False) -> _RemovableHandle:
        """``hook(optimizer, state_dict)`` runs on the built dict; a non-None
        result replaces it."""
        return self._register("_optimizer_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend: bool = False) -> _RemovableHandle:
        """``hook(optimizer, state_dict)`` runs on the (shallow-copied) dict
        before loading; a non-None result replaces it."""
        return self._register("_optimizer_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend: bool = False) -> _RemovableHandle:
        """``hook(optimizer)`` runs after ``load_state_dict`` has loaded."""
        return self._register("_optimizer_load_state_dict_post_hooks", hook, prepend)

    # --- state dicts ------------------------------------------------------------

    def state_dict(self) -> dict:
        """``{'state': {index: {...}}, 'param_groups': [{..., 'params': [index, ...]}]}``
        as in PyTorch: parameters are replaced by their running index over
        the groups; state tensors are the optimizer's own (not copies)."""
        for pre_hook in self._optimizer_state_dict_pre_hooks.values():
            pre_hook(self)
        param_mappings: dict[int, int] = {}
        start_index = 0

        def pack_group(group):
            nonlocal start_index
            packed = {k: v for k, v in group.items() if k != "params"}
            param_mappings.update({id(p): i for i, p in enumerate(group["params"], start_index)
                                   if id(p) not in param_mappings})
            packed["params"] = [param_mappings[id(p)] for p in group["params"]]
            start_index += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {}
        for k, v in self.state.items():
            key = param_mappings[id(k)] if isinstance(k, Tensor) else k
            packed_state[key] = dict(v) if isinstance(v, dict) else v
        state_dict = {"state": packed_state, "param_groups": param_groups}
        for post_hook in self._optimizer_state_dict_post_hooks.values():
            result = post_hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    @staticmethod
    def _process_value(param: Tensor, value: Tensor, key, group: dict) -> Tensor:
        """A loaded state tensor under PyTorch's policy: ``step`` is kept as
        it is (float32 on the parameter's device for a fused or capturable
        group), other floating state takes the parameter's dtype and device.
        Like PyTorch's, ``.to`` aliases the loaded tensor when nothing
        changes, so an optimizer loaded from a live ``state_dict()`` shares
        its state tensors with the one that made it."""
        if key == "step":
            if group.get("capturable", False) or group.get("fused", False):
                return value.to(dtype=dt.float32, device=param.device)
            return value
        if param.dtype.is_floating_point:
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)

    def load_state_dict(self, state_dict: dict) -> None:
        """Load state made by ``state_dict()`` (of this optimizer, another
        instance, or a checkpoint). Groups must match in number and size;
        hyperparameters (``lr`` ...) come from the loaded dict (copied).
        Loaded state tensors are aliased where dtype and device already
        match, as PyTorch's are (``_process_value``)."""
        state_dict = state_dict.copy()
        for pre_hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = pre_hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")

        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        group_of = {i: g for g in saved_groups for i in g["params"]}

        def cast(param, value, group, key=None):
            if isinstance(value, Tensor):
                return Optimizer._process_value(param, value, key, group)
            if isinstance(value, dict):
                return {k: cast(param, v, group, key=k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v, group) for v in value)
            return value

        state: defaultdict = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                param = id_map[k]
                state[param] = cast(param, v, group_of[k])
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})
        for post_hook in self._optimizer_load_state_dict_post_hooks.values():
            post_hook(self)


# The base step is hooked once here; subclasses that inherit it get the hooks.
Optimizer.step = _with_hooks(Optimizer.step)


