"""One specialization of a compiled function: its trace, its executable
and how a call runs it (``Entry``), with the helpers that map a trace's
inputs and outputs onto a call's tensors (``donations``, ``_rebuild``).

Invariant: ``Entry.run`` has the effect of the traced call on this call's
arguments: inputs are read from this call's tensors (containers by path,
state by object, ``.grad`` of arguments by path), results and in-place
writes go to them, and a symbolic trace runs code compiled for every size
(``tracec.size_generic``) whose size guards the call's sizes pass, else the
static code for the call's sizes.  ``tracec.compiler`` decides which entry a
call uses.
"""
from __future__ import annotations

import os
import random
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from tracec import compiled_backward, graph, size_generic, symbolic, view_outputs
from tracec.arg_dict_writes import owner
from tracec.backends import check
from tracec.backends.cpu.output_pool import fresh
from tracec.complex_ops import _as_real_view
from tracec.passes.pipeline import AUTODIFF, OPTIMIZE, checks_level, run_passes
from tracec.mutation import EPOCH, guard_watched
from tracec.pytree import resolve
from tracec.tensor import Tensor
from tracec.tracing import Trace

#: Calls in a row whose speculated decisions on tensor data fail, after
#: which an entry is retired (Entry.mispredicted).
MISPREDICTIONS = 3
#: Sizes a symbolic trace compiles static code for at most, where its
#: size-generic code cannot be made; later new sizes run eagerly.
MAX_SIZE_COMPILES = int(os.environ.get("TRACEC_MAX_SIZE_COMPILES", "8"))


def _checks_enabled() -> bool:
    return os.environ.get("TRACEC_CHECKS", "") not in ("", "0")


@dataclass
class Entry:
    """One specialization: a trace and its compiled executable.

    ``stages`` holds "trace" from the start; the passes ("autodiff",
    "optimized") run when first needed (``optimized()``): at the first reuse
    when the disk cache misses, never when it hits (the key is the trace's),
    or when a stage is asked for."""
    trace: Trace
    executable: object
    stages: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    state_guards: list = field(default_factory=list)
    check_backend: object = None
    compile_fn: object = None
    number: int = 0
    on_compiled: object = None
    refreshers: list = field(default_factory=list)
    #: Run after the executable (lifted Python numbers written back).
    committers: list = field(default_factory=list)
    #: Calls in a row whose speculated decisions on tensor data came out
    #: otherwise (those calls ran eagerly); at MISPREDICTIONS the entry is
    #: retired and the next call retraces.
    mispredicted: int = 0
    mispredicted_total: int = 0
    backward_plan: object = None     # a compiled backward for the results needing one
    _fresh_grads: list = None
    #: A symbolic trace's static specializations: sizes -> Entry, and how
    #: to make one (``make_sub(env)``); the last one used; sizes seen once
    #: (run by ``eager(args, kwargs)``, the original function).
    subs: dict = field(default_factory=dict)
    make_sub: object = None
    last_sub: object = None
    seen_once: set = field(default_factory=set)
    eager: object = None
    #: A symbolic trace's size-generic entries (most recently used first),
    #: how to make one for sizes ``env`` (``make_generic(env)``, None where
    #: the backend cannot: then ``generic_failed`` says why).
    generic: list = field(default_factory=list)
    make_generic: object = None
    generic_failed: str = None
    generic_served: int = 0       # entries of ``subs`` that are generic ones
    #: A symbolic trace's entry that ran the last call (None: it ran eagerly)
    served: object = None
    #: A size-generic entry's sizes its code was compiled for (the hints
    #: its backend choices were made from); None for other entries.
    size_env: dict = None
    #: The mutation epoch at which every guard last held (tracec.mutation).
    _valid_epoch: object = None
    _unwatched: list = None
    #: ``tracec.fast_run``'s specialized call (None: not made yet; False:
    #: this entry keeps to the general path) and its misses so far.
    _fast_run: object = None
    _fast_misses: int = 0
    #: A size-generic entry's specialized calls per call key (each fixes
    #: the sizes), ``_fast_run`` being the one of ``_fast_key``'s.
    _fast_by_key: dict = None
    _fast_key: object = None

    def optimized(self):
        """The optimized module (running autodiff and the passes on a copy of
        the trace the first time)."""
        if "optimized" not in self.stages:
            verify = checks_level()
            t0 = time.perf_counter()
            module = self.stages["trace"].clone()
            run_passes(AUTODIFF, module, verify=verify)
            # The "autodiff" stage is not kept here: a copy of a training
            # step's module cost as much as a tenth of the passes (and stayed
            # alive for the collector to walk); ``autodiff()`` makes it again
            # on request.
            run_passes(OPTIMIZE, module, verify=verify)
            self.stages["optimized"] = module
            self.timings["passes_s"] = time.perf_counter() - t0
        return self.stages["optimized"]

    def autodiff(self):
        """The "autodiff" stage: the autodiff pass run on a copy of the trace
        (made on first request; the pass is deterministic, so it is the
        module ``optimized()`` started the other passes from)."""
        if "autodiff" not in self.stages:
            module = self.stages["trace"].clone()
            with symbolic.hinted(self.size_env or {}):   # (as ``optimized()`` ran)
                run_passes(AUTODIFF, module, verify=checks_level())
            self.stages["autodiff"] = module
        return self.stages["autodiff"]

    def compile_again(self, compile_module, **kw):
        """The optimized module compiled again by ``compile_module`` (the
        text stages after a disk cache hit, which keeps object code only; a
        profiling build): a size-generic entry's under the sizes its code
        was made for, so the result is that code."""
        with symbolic.hinted(self.size_env or {}):
            return compile_module(self.optimized(), donate=donations(self.trace), **kw)

    def failed_guard(self, args=(), kwargs=None):
        """None if every guard holds, else a description of the first failure.
        Guards the mutation epoch covers are skipped while it stands where
        it stood when they last held (``tracec.mutation``)."""
        if self.mispredicted >= MISPREDICTIONS:
            spec = self._speculated()
            loc = spec[0][2] if spec else self.trace.py_draw_guards[0][4]
            what = "tensor data" if spec else "a random.random() number"
            return (f"its decision on {what} at {loc[0]}:{loc[1]} came out otherwise "
                    f"{MISPREDICTIONS} calls in a row")
        epoch = EPOCH[0]
        skip = self._valid_epoch == epoch
        for path, t in self.trace.arg_identity:
            if resolve(path, args, kwargs) is not t:
                return ("an argument that was also read as state (a parameter, a buffer, "
                        "optimizer state) is now another tensor")
        for i, module, name, j in self.trace.attr_state:
            # recurrent state kept on a module (tracing.Recording.attr_state):
            # this call's tensor there is the input
            v = module.__dict__.get(name)
            if j is not None:
                v = v[j] if type(v) is tuple and len(v) > j else None
            if not isinstance(v, Tensor) or v.requires_grad:
                return f"module attribute {name} no longer holds the tensors the trace reads"
            self.trace.inputs[i].source = v
        for spec in self.trace.inputs:
            if spec.kind == "state":
                t = spec.source
                if tuple(t._data.shape) != spec.shape or t.dtype is not spec.dtype:
                    return (f"state tensor {spec.name} changed: {spec.dtype.name}"
                            f"{list(spec.shape)} -> {t.dtype.name}{list(t.shape)}")
        for t, rg in self.state_guards:
            if t.requires_grad != rg:
                return (f"requires_grad of {self._name(t)} ({t.dtype.name}{list(t.shape)}) "
                        f"changed")
        for leaf, had, path in self.trace.grad_guards:
            name = self._name(leaf, path)
            if path is not None:   # an argument's .grad: this call's argument
                leaf = resolve(path, args, kwargs)
            if (leaf._grad is not None) != had:
                return (f"{name}.grad ({leaf.dtype.name}{list(leaf.shape)}) is "
                        f"{'now None' if had else 'no longer None'}")
            if had and tuple(leaf._grad.shape) != tuple(leaf.shape):
                return f"{name}.grad shape changed"
        for snap, value in (self._unwatched_guards() if skip else self.trace.guards):
            holds = getattr(snap, "holds", None)   # EnvGuard: cheaper than a snapshot
            if holds is not None and holds(value):
                continue
            now = snap()
            if now != value:
                if hasattr(snap, "describe_change"):
                    return f"guarded Python state changed: {snap.describe_change(value, now)}"
                owner = getattr(snap, "__self__", None)
                what = (f"{type(owner).__name__}.{snap.__name__}" if owner is not None
                        else getattr(snap, "__qualname__", type(snap).__name__))
                return f"guarded Python state changed ({what})"
        if graph.is_grad_enabled() != self.trace.grad_mode:
            return "grad mode changed"
        if not skip:
            # Covered guards whose containers are not all watched now (a
            # group dict the user passed in) are checked at every call
            # with the others; the specialized call is made again when
            # that set changed.
            unwatched = [(snap, value) for snap, value in self.trace.guards
                         if guard_watched(snap) is not True]
            if self._fast_run and self._unwatched is not None and \
                    [id(s) for s, _ in unwatched] != [id(s) for s, _ in self._unwatched]:
                self._fast_run = None
                if self._fast_by_key:
                    self._fast_by_key.clear()
            self._unwatched = unwatched
            self._valid_epoch = epoch
        return None

    def _speculated(self) -> list:
        """``[(index among the executable's outputs, decision, location)]``
        of the trace's speculated decisions on tensor data."""
        spec = self.__dict__.get("_spec_cache")
        if spec is None:
            spec, k = [], 0
            for o in self.trace.outputs:
                if o.kind in NO_VALUE:
                    continue
                if o.kind == "data_guard":
                    spec.append((k, o.target[0], o.target[1]))
                k += 1
            self.__dict__["_spec_cache"] = spec
        return spec

    def _name(self, t, path=None) -> str:
        """The user's name of a tensor the trace reads (tracec.naming)."""
        if path is not None:
            return next((s.name for s in self.trace.inputs if s.kind == "arg"
                         and s.source == path), str(path))
        return self.trace.names.get(id(t)) or f"a {t.dtype.name}{list(t.shape)} tensor"

    def _unwatched_guards(self) -> list:
        """The trace's guards that the mutation epoch does not cover (as of
        the last time they all held)."""
        if self._unwatched is None:
            self._unwatched = [(snap, value) for snap, value in self.trace.guards
                               if guard_watched(snap) is not True]
        return self._unwatched

    def fast_runner(self, args):
        """``tracec.fast_run.runner(self, args)``, made once per call key
        (None where this entry keeps to the general path)."""
        run = self._fast_run
        if run is None:
            if self.executable is None:
                return None
            from tracec.fast_run import runner
            run = self._fast_run = runner(self, args) or False
            if self._fast_by_key is not None and len(self._fast_by_key) < 64:
                self._fast_by_key[self._fast_key] = run
        return run or None

    def use_fast_key(self, key) -> None:
        """The fast path serves calls with ``key`` from now on: a
        size-generic entry's specialized call is per key (it binds the
        sizes), another entry's serves every key."""
        if self.size_env is None or key == self._fast_key:
            return
        if self._fast_by_key is None:
            self._fast_by_key = {}
        self._fast_key = key
        self._fast_run = self._fast_by_key.get(key)

    def ensure_compiled(self):
        if self.executable is None:
            t0 = time.perf_counter()
            passes0 = self.timings.get("passes_s", 0.0)
            self.executable, timing = self.compile_fn()
            # backend_s: the backend's own time (the passes, if they ran
            # here, are passes_s).
            self.timings.update(timing, backend_s=time.perf_counter() - t0
                                - (self.timings.get("passes_s", 0.0) - passes0))
            if self.on_compiled is not None:
                self.on_compiled(self)
        return self.executable

    def stage(self, name: str):
        """A stage's module or text, made on request (past "trace", a
        symbolic trace shows its last specialization's)."""
        if self.trace.symbolic is not None and name != "trace":
            return None if self.last_sub is None else self.last_sub.stage(name)
        if name == "autodiff":
            return self.autodiff()
        if name == "optimized":
            self.optimized()
        if name in self.stages:
            return self.stages[name]
        exe = self.ensure_compiled()
        try:
            return exe.stage(name) if hasattr(exe, "stage") else exe.stages[name]
        except (KeyError, AttributeError):
            return None

    def run(self, args, kwargs, env=None):
        if env is not None:
            # A symbolic trace: its size-generic code, else the static code
            # for these sizes (made once).
            sizes = tuple(sorted(env.items()))
            self.served = None
            sub = self.subs.get(sizes)
            if sub is None and self.make_generic is not None:
                sub = size_generic.generic_for(self, env, sizes)
            if sub is None:
                # The cpu backend compiles one static specialization per
                # size (its kernels are not yet size-generic): a size seen
                # for the first time runs eagerly, as a first call does,
                # and is compiled when it comes back.
                if sizes not in self.seen_once or \
                        len(self.subs) - self.generic_served >= MAX_SIZE_COMPILES:
                    # Past MAX_SIZE_COMPILES sizes, new ones stay eager: a
                    # compile per size costs more than it saves when sizes
                    # keep changing (until kernels take sizes at run time).
                    self.seen_once.add(sizes)
                    return self.eager(args, kwargs)
                sub = self.subs[sizes] = self.make_sub(env)
            self.last_sub = self.served = sub
            return sub.run(args, kwargs)
        py_state = None
        if self.trace.py_draws:
            # The call's random.random() draws: drawn again, and the
            # decisions the trace took on them checked, before anything
            # runs; otherwise the generator is put back and the call runs
            # eagerly (drawing as eager code does).
            py_state = random.getstate()
            drawn = [random.random() for _ in range(self.trace.py_draws)]
            if not all(op(drawn[i], other) == r
                       for i, op, other, r, _ in self.trace.py_draw_guards):
                random.setstate(py_state)
                self.mispredicted += 1
                self.mispredicted_total += 1
                return self.eager(args, kwargs)
            if not self._speculated():
                self.mispredicted = 0
        for refresh in self.refreshers:   # lifted Python state (a learning rate)
            refresh()
        arrays = []
        for spec in self.trace.inputs:
            if spec.kind == "arg":
                src = resolve(spec.source, args, kwargs)
                arrays.append(src._data)
            elif spec.kind == "state":
                arrays.append(spec.source._data)
            else:
                leaf = spec.source if spec.arg is None else resolve(spec.arg, args, kwargs)
                arrays.append(leaf._grad._data)
        if self.check_backend is not None:
            check.check_module(self.optimized(), self.check_backend, arrays)
        plan = self.backward_plan if graph.is_grad_enabled() else None
        saved = compiled_backward.save_inputs(plan, arrays) if plan is not None else None
        joint = plan.joint(args, kwargs, arrays) if plan is not None else None
        # (a partitioned call: the forward that also returns what the
        # backward reads; compiled_backward)
        split = plan.split(args, kwargs, arrays) if plan is not None and joint is None and \
            not self._speculated() else None
        if joint is None and split is None and self.executable is None:
            self.ensure_compiled()
        if self._fresh_grads is None and self.executable is not None:
            self._fresh_grads = [] if self._speculated() else \
                _fresh_grad_outputs(self.trace, self.executable)
        out = None
        for k, leaf in (self._fresh_grads or ()) if split is None and joint is None else ():
            # The .grad this call replaces, if nothing but the leaf holds it
            # (tensor and array): its memory is reused for the new .grad (the
            # old tensor is dropped either way, so no one can tell).
            old = leaf._grad
            if old is not None and sys.getrefcount(old) == 3:
                a = old._data
                if (a.base is None or fresh(a)) and sys.getrefcount(a) == 3:
                    if out is None:
                        out = [None] * len(self.trace.outputs)
                    out[k] = a
                del a
            del old
        if joint is not None:
            # the forward and the loss's gradients in one (compiled_backward)
            outs = joint[0](arrays)
            joint = (joint[1], list(outs[len(outs) - len(joint[1]):]))
            outs = outs[:len(outs) - len(joint[0])]
        elif split is not None:
            outs = split[0](arrays)
            n = len(outs) - split[3]
            # (copies of residuals that are views of something else: an
            # input the optimizer will update, another result)
            inputs = {id(a) for a in arrays}
            res = [a if (a.flags.owndata or fresh(a)) and id(a) not in inputs else a.copy()
                   for a in outs[n:]]
            split = (split[1], split[2], res)
            outs = outs[:n]
        else:
            outs = self.executable(arrays) if out is None else \
                self.executable(arrays, out=out)
        if self._speculated():
            # Decisions the trace took on tensor data, checked before any
            # result is applied (nothing was donated): a call that decides
            # otherwise runs eagerly instead.
            for k, decision, _ in self._speculated():
                if type(decision) is tuple and decision[0] == "array":
                    held = tuple(outs[k].reshape(-1).tolist()) == decision[1]
                else:
                    v = outs[k].reshape(-1)[0]
                    held = (v.item() == decision[1]) if type(decision) is tuple else \
                        (bool(v) == decision)
                if not held:
                    self.mispredicted += 1
                    self.mispredicted_total += 1
                    if py_state is not None:
                        random.setstate(py_state)
                    return self.eager(args, kwargs)
            self.mispredicted = 0
        seen = {id(a) for a in arrays}
        returned = []
        by_value = {}   # a result's index among the traced values -> its returned slot or tensor
        parts: list = []     # the tensors of the tuple an "attr_seq" sets
        it = iter(outs)
        for spec in self.trace.outputs:
            if spec.kind == "grad_none":
                (spec.target if spec.arg is None else resolve(spec.arg, args, kwargs))._grad = None
                continue
            if spec.kind == "attr_arg":
                _store(owner(spec.target[0], args, kwargs), spec.target[1],
                       resolve(spec.arg, args, kwargs))
                continue
            if spec.kind == "attr_const":
                _store(owner(spec.target[0], args, kwargs), spec.target[1], spec.target[2])
                continue
            if spec.kind == "attr_seq":
                made = iter(parts)
                _store(owner(spec.target[0], args, kwargs), spec.target[1],
                       tuple(_attr_part(p, made, args, kwargs) for p in spec.target[2]))
                parts = []
                continue
            arr = next(it)
            k_value = len(by_value)
            by_value[k_value] = None
            if spec.kind == "data_guard":
                continue
            if spec.kind in ("attr", "attr_part"):
                if id(arr) in seen or not (arr.flags.owndata or fresh(arr)):
                    arr = arr.copy()
                seen.add(id(arr))
                mod, name, dtype = spec.target
                if spec.kind == "attr_part":
                    parts.append(Tensor._make(arr, dtype))
                else:
                    by_value[k_value] = Tensor._make(arr, dtype)
                    _store(owner(mod, args, kwargs), name, by_value[k_value])
                continue
            if spec.kind == "return":
                if id(arr) in seen or not (arr.flags.owndata or fresh(arr)):
                    arr = arr.copy()
                seen.add(id(arr))
                by_value[k_value] = len(returned)
                returned.append(arr)
            elif spec.kind == "write":
                t = spec.target
                if spec.arg is not None:      # an argument written in place: this call's
                    t = resolve(spec.arg, args, kwargs)
                if spec.layout is not None:   # reshaped in place (unsqueeze_, resize_)
                    t._data = view_outputs.relayout(t._data, spec.layout)
                if arr is not t._data:        # a donated output was updated in place
                    np.copyto(t._data, arr)
                t._vbox[0] += 1
            else:
                leaf = spec.target if spec.arg is None else resolve(spec.arg, args, kwargs)
                cplx = leaf.dtype.category == 3   # computed as its real view [..., 2]
                if spec.inplace:
                    g = _as_real_view(leaf._grad._data) if cplx else leaf._grad._data
                    if arr is not g:
                        np.copyto(g, arr)
                    leaf._grad._vbox[0] += 1
                else:
                    if id(arr) in seen or not (arr.flags.owndata or fresh(arr)) or \
                            (cplx and not arr.flags.c_contiguous):
                        arr = arr.copy()
                    seen.add(id(arr))
                    if cplx:
                        arr = arr.view(leaf.dtype.np)[..., 0]
                    leaf._grad = Tensor._make(arr, leaf.dtype)
        if plan is not None:
            results = []
            for k, d in zip(plan.out_indices, plan.out_dtypes):
                slot = by_value[k]
                if isinstance(slot, Tensor):     # an attribute the call set (tracing.finish)
                    results.append(slot)
                else:
                    results.append(Tensor._make(returned[slot], d))
                    returned[slot] = results[-1]
            compiled_backward.attach(plan, results, saved, args, kwargs, joint, split)
        for commit in self.committers:
            commit()
        return _rebuild(self.trace.template, returned, args, kwargs)


def _attr_part(part, made, args, kwargs):
    """One element of the tuple an "attr_seq" sets (``tracec.tracing.OutputSpec``):
    the next tensor of ``made``, this call's argument, a constant, or a new
    tuple or list of such elements ("seq")."""
    kind, v = part[0], part[1]
    if kind == "value":
        return next(made)
    if kind == "arg":
        return resolve(v, args, kwargs)
    if kind == "seq":
        return v(_attr_part(p, made, args, kwargs) for p in part[2])
    return v


def _store(owner, name, value) -> None:
    """Sets what the traced call set there: ``owner``'s attribute ``name``,
    or, ``owner`` a dict (a global cache the call refilled), its entry."""
    if type(owner) is dict:
        owner[name] = value
    else:
        setattr(owner, name, value)


#: Output kinds with no value among the executable's results.
NO_VALUE = frozenset(("grad_none", "attr_const", "attr_arg", "attr_seq"))


def _fresh_grad_outputs(trace: Trace, executable) -> list:
    """``[(output index, leaf)]`` for the outputs that become a new ``.grad``
    tensor, where the executable can compute into a given array."""
    if not getattr(executable, "accepts_out", False):
        return []
    out, k = [], 0
    for spec in trace.outputs:
        if spec.kind in NO_VALUE:
            continue
        if spec.kind == "grad" and not spec.inplace and spec.arg is None and \
                spec.target.dtype.category != 3:
            out.append((k, spec.target))
        k += 1
    return out


def donations(trace: Trace) -> dict[int, int]:
    """``{output index: input index}``: the executable's outputs that are the
    new value of one of its inputs (a state tensor it writes back, an
    argument written in place, or a ``.grad`` it updates in place), which the backend may compute in that
    input's own array (``compile_module(donate=...)``): then ``Entry.run``
    finds the array already updated and copies nothing.  Returned tensors
    and fresh ``.grad`` tensors are never donated."""
    if any(spec.kind == "data_guard" for spec in trace.outputs):
        return {}     # results are applied only after the speculated decisions hold
    where = {}
    for j, spec in enumerate(trace.inputs):
        if spec.kind in ("state", "grad"):
            where.setdefault((spec.kind, id(spec.source)), j)
        elif spec.kind == "arg":      # an argument written in place (dist.all_reduce(x))
            where.setdefault(("arg", repr(spec.source)), j)
    out = {}
    k = 0
    for spec in trace.outputs:
        if spec.kind in NO_VALUE:
            continue
        if spec.kind == "write":
            j = where.get(("state", id(spec.target))) if spec.arg is None else \
                where.get(("arg", repr(spec.arg)))
        elif spec.kind == "grad" and spec.inplace:
            j = where.get(("grad", id(spec.target)))
        else:
            j = None
        if j is not None and j not in out.values():
            out[k] = j
        k += 1
    return out


def _rebuild(tpl, returned, args, kwargs, made=None):
    """The call's result from the trace's template (``tracing.finish``):
    ``returned`` holds the executable's returned arrays, each replaced by
    its tensor when made (a tensor returned twice, or the base of a
    returned view, is one object, as in eager code; ``made``: the views
    made so far in this call)."""
    kind = tpl[0]
    if made is None:
        made = {}
    if kind == "tensor":
        r = returned[tpl[1]]
        if isinstance(r, Tensor):
            return r
        t = Tensor._make(r, tpl[2])
        if tpl[3] is not None and graph.is_grad_enabled():
            t.requires_grad = True
            t._node = graph.FreedNode(tpl[3])
        returned[tpl[1]] = t
        return t
    if kind == "retained":  # h after h.retain_grad() and a backward in the call
        t = _rebuild(tpl[1], returned, args, kwargs, made)
        g = returned[tpl[2]]
        t._retains_grad = True
        t._grad = g if isinstance(g, Tensor) else Tensor._make(g, t.dtype)
        return t
    if kind == "view":      # a view of an argument, state or result (tracec.view_outputs)
        cell = tpl[1]
        base = _rebuild(cell[0], returned, args, kwargs, made)
        if cell[1] is None:     # (not a view after all: its own value)
            return base
        v = made.get(id(cell))
        if v is None:
            v = made[id(cell)] = view_outputs.rebuild(cell, tpl[2], base, args, kwargs)
        return v
    if kind == "number":    # a returned loss.item() (tracec.item_value)
        r = returned[tpl[1]]
        return (r._data if isinstance(r, Tensor) else r).reshape(-1)[0].item()
    if kind == "const":
        return tpl[1]
    if kind == "arg":
        return resolve(tpl[1], args, kwargs)
    if kind == "object":
        return tpl[1]
    if kind == "grad_of":   # a leaf's .grad, as this call left it (tracing.finish)
        return _rebuild(tpl[1], returned, args, kwargs, made)._grad
    if kind == "namedtuple":
        return tpl[1](*[_rebuild(t, returned, args, kwargs, made) for t in tpl[2]])
    if kind == "dict":
        d = {k: _rebuild(v, returned, args, kwargs, made) for k, v in tpl[2]}
        return d if tpl[1] is dict else tpl[1](d)
    if kind == "wrapper":
        return tpl[1].__tracec_unflatten__(tpl[2], [_rebuild(t, returned, args, kwargs, made)
                                                   for t in tpl[3]])
    if kind == "plain":     # an object of the program's class (tracing._returnable_plain)
        obj = object.__new__(tpl[1])
        obj.__dict__.update((k, _rebuild(v, returned, args, kwargs, made)) for k, v in tpl[2])
        return obj
    if kind == "dataclass":
        vals = [(name, init, _rebuild(v, returned, args, kwargs, made)) for name, init, v in tpl[2]]
        obj = tpl[1](**{n: v for n, init, v in vals if init})
        for n, init, v in vals:
            if not init:
                object.__setattr__(obj, n, v)
        return obj
    seq = [_rebuild(t, returned, args, kwargs, made) for t in tpl[1]]
    return tuple(seq) if kind == "tuple" else seq
