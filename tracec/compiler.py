"""``tracec.compile``: trace -> autodiff -> optimize -> backend -> cache.

Invariant: calling a compiled function has the effect of calling the
original eagerly: same results, and the same in-place updates of the
tensors it touches (parameters, ``.grad``, optimizer state, buffers, the
RNG state).  The first call with a new signature (or failing a guard)
runs eagerly while recording; later calls run the compiled code.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import time
import types
import warnings

import numpy as np
from dataclasses import dataclass, field

from tracec import aten_report
from tracec import dtypes as dt
from tracec import autocast_mode, compiled_backward, fast_call, graph, ir, lifted_state
from tracec import size_generic, torch_rng
from tracec import kernel_profiler as profiler
from tracec.nn.modules.module import Module
from tracec.compiled_module import OptimizedModule  # noqa: F401  (tracec.compiler.OptimizedModule)
from tracec.fast_run import MISS
from tracec.ops import recurrent
from tracec.backends import cache, cpu, cuda, interp
from tracec.compiled_entry import Entry, _checks_enabled, donations  # noqa: F401
from tracec.passes.pipeline import checks_level, paused_gc
from tracec.naming import argument_names
from tracec import pytree
from tracec.pytree import flatten_args, path_name, resolve
from tracec.sym_shapes import SymbolTable, bind, choose_dynamic, pattern_key
from tracec.tensor import RECORDERS
from tracec.version import __version__
from tracec.tracing import ArraysRead, ChangedPlainObject, LiftRefused, Trace, TraceError, function_label, record  # noqa: F401
from tracec.stages import STAGES  # noqa: F401  (tracec.compiler.STAGES)

#: Traces a compiled function keeps at most (torch.compile's limit is 8).
DEFAULT_MAX_TRACES = 16
#: Call keys whose fast path is remembered (``CompiledFunction._recent``).
_RECENT_KEYS = 64
BACKENDS = {"interp": interp, "cpu": cpu, "cuda": cuda, "cuda-emulated": cuda.EMULATED}


def call_key(args, kwargs) -> tuple:
    """What a trace is specialized on, for one call: the arguments' structure
    and Python values (``tracec.pytree``), each tensor's shape, dtype and
    requires_grad, which tensors are the same object or share memory (a
    trace of ``f(x, x)`` reads one value for both, so it must not serve
    ``f(x, z)``), the grad mode, the autocast state and the default dtype
    (``tracec.ones(3)``, ``randn``, a Python float made a tensor: a trace
    made under float32 would keep making float32 tensors)."""
    spec, leaves = flatten_args(args, kwargs)
    first: dict = {}
    tensors = []
    for i, (_, t) in enumerate(leaves):
        r = t
        while r._base is not None:   # a view, or a detach() alias: its storage's owner
            r = r._base
        r = first.setdefault(("root", id(r)), i)
        tensors.append((t._data.shape, t.dtype, t.requires_grad,
                        first.setdefault(id(t), i), r))
    return (spec, tuple(tensors), graph.is_grad_enabled(), autocast_mode.state(),
            dt._default_float[0])


def _describe_change(old, new, names=()) -> str:
    if old[0] != new[0]:
        return "the arguments' structure or Python values changed: " + _spec_diff(old[0], new[0])
    for i, (a, b) in enumerate(zip(old[1], new[1])):
        if a != b:
            name = names[i] if i < len(names) else str(i)
            return (f"tensor argument {name} changed: {_fmt_tensor(a)} -> {_fmt_tensor(b)}")
    if len(old[1]) != len(new[1]):
        return "the number of tensor arguments changed"
    if old[2] != new[2]:
        return "grad mode changed"
    if old[3] != new[3]:
        return "autocast changed"
    if old[4:] != new[4:]:
        return f"the default dtype changed ({old[4]} -> {new[4]})"
    return "signature changed"


#: Python number types a number argument is lifted as (``"V"`` specs' names)
_LIFTABLE = {"int", "float", "float64", "float32", "int64", "int32"}
#: a lifted argument's value in a call key
_LIFTED = "<lifted>"


def number_changes(old, new) -> list:
    """The argument paths where call keys ``old`` and ``new`` differ only in
    the value of a Python int or float (the same type), or [] if they
    differ otherwise.  A path is a top-level position or keyword, or, for a
    number inside an argument (``cfg["lr"]``, ``hp.scale``, ``shifts[0]``),
    a ``tracec.pytree`` path whose last container can take a new item
    (a dict, a list, a plain object or a non-frozen dataclass: the trace
    puts the lifted number there during the recording call)."""
    if old[1:] != new[1:] or len(old[0][0]) != len(new[0][0]) or \
            [k for k, _ in old[0][1]] != [k for k, _ in new[0][1]]:
        return []
    out: list = []
    pairs = [(i, a, b) for i, (a, b) in enumerate(zip(old[0][0], new[0][0]))] + \
        [(k, a, b) for (k, a), (_, b) in zip(old[0][1], new[0][1])]
    for where, a, b in pairs:
        if not _number_diffs(a, b, where, out):
            return []
    return out


def _is_plain_number(v) -> bool:
    """An int or float (NumPy's too), not a bool: what a lifted location
    must hold to be read as a number."""
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _is_number_spec(a) -> bool:
    return type(a) is tuple and len(a) == 3 and a[0] == "V" and a[1] in _LIFTABLE


def _children(spec) -> list | None:
    """``[(path step, child spec)]`` of a container spec into whose items a
    lifted number may be put (``tracec.pytree.flatten``'s specs), else
    None (a tuple or namedtuple cannot take one: a retrace serves)."""
    if type(spec) is not tuple or not spec:
        return None
    tag = spec[0]
    if (tag == "l" or isinstance(tag, tuple) and tag[:1] == ("l",)) and len(spec) == 2:
        return [(("i", i), c) for i, c in enumerate(spec[1])]     # a list (or a subclass)
    if tag == "d" and len(spec) == 3:
        return [(("k", k), c) for k, c in spec[2]]
    if tag in ("D", "P") and len(spec) == 4:
        if tag == "D" and getattr(getattr(spec[1], "__dataclass_params__", None), "frozen", True):
            return None
        return [(("a", n), c) for n, c in zip(spec[2], spec[3])]
    return None


def _number_diffs(a, b, path, out) -> bool:
    """Append to ``out`` the paths below ``path`` where specs ``a`` and
    ``b`` differ in a liftable number; False if they differ otherwise."""
    if a == b:
        return True
    if _is_number_spec(a) and _is_number_spec(b) and a[1] == b[1]:
        out.append(path)
        return True
    ca, cb = _children(a), _children(b)
    # the same container (type, keys or field names), items aside
    if ca is None or cb is None or len(ca) != len(cb) or a[:-1] != b[:-1]:
        return False
    for (sa, x), (sb, y) in zip(ca, cb):
        if sa != sb:
            return False
        sub = (path, sa) if not isinstance(path, tuple) else path + (sa,)
        if not _number_diffs(x, y, sub, out):
            return False
    return True


def _replace_spec(spec, steps: tuple, fn):
    """``spec`` with the spec at ``steps`` (path steps below it) replaced
    by ``fn(old)``; None where the path does not lead to a spec."""
    if not steps:
        return fn(spec)
    kids = _children(spec)
    if kids is None:
        return None
    for j, (step, child) in enumerate(kids):
        if step == steps[0]:
            new = _replace_spec(child, steps[1:], fn)
            if new is None:
                return None
            if spec[0] == "d":
                items = list(spec[2])
                items[j] = (items[j][0], new)
                return spec[:2] + (tuple(items),)
            children = list(spec[-1])
            children[j] = new
            return spec[:-1] + (tuple(children),)
    return None


def leaf_names(fn, args, kwargs) -> list[str]:
    """The names of a call's tensor arguments (``x``, ``hidden[0]``), in
    ``call_key`` order."""
    names = argument_names(fn)
    return [path_name(p, names)
            for p, _ in flatten_args(args, kwargs)[1]]


def _spec_diff(a, b) -> str:
    if isinstance(a, tuple) and len(a) == 3 and a[0] == "O" and \
            isinstance(b, tuple) and len(b) == 3 and b[0] == "O" and a[1] == b[1]:
        # (tracec.pytree: objects other than containers and dataclasses are
        # keyed by identity; their ids say nothing to the user)
        return (f"another {a[1]} object (an argument object that holds a module, an "
                "optimizer or other tracec state, holds too many values, was changed by a "
                "call, or is not of a class of yours is keyed by identity: pass the tensors "
                "it holds, or make its class a dataclass, to reuse the trace)")
    if isinstance(a, tuple) and a and a[0] == "A" and isinstance(b, tuple) and b and \
            b[0] == "A":
        if a[1:3] != b[1:3]:
            return f"a NumPy array argument {a[2]}{list(a[1])} -> {b[2]}{list(b[1])}"
        return ("a NumPy array argument's values changed (arrays are keyed by their "
                "contents where the function reads them with NumPy: convert a batch "
                "that changes each call outside the compiled function, or inside it "
                "with torch.from_numpy / torch.as_tensor only)")
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        for x, y in zip(a, b):
            if x != y:
                return _spec_diff(x, y)
    if isinstance(a, tuple) and a and a[0] == "V" and isinstance(b, tuple) and b and b[0] == "V":
        return f"{a[2]!r} -> {b[2]!r}"
    return f"{_short(a)} -> {_short(b)}"


def _short(x) -> str:
    s = repr(x)
    return s if len(s) < 80 else s[:77] + "..."


def _fmt_tensor(k):
    return f"{k[1].name}{list(k[0])}" + (" requires_grad" if k[2] else "")


class CompiledFunction:
    """A function compiled by ``tracec.compile`` (see the module docstring)."""

    #: Guards treat it by identity (its caches change with every call).
    _tracec_opaque = True

    def __init__(self, fn, *, backend=None, dump=None, fallback=None, check=False,
                 max_traces=None, values_only=False, dynamic=None):
        if fallback not in (None, "eager", "error"):
            raise ValueError(f"fallback must be None, 'error' or 'eager', got {fallback!r}")
        self.fn = fn
        self.backend = backend or default_backend()
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}; available: "
                             f"{', '.join(sorted(BACKENDS))}")
        self.dump = dump or os.environ.get("TRACEC_DUMP") or None
        self.fallback = fallback
        self.check = check
        #: Traces kept at most; past it, new signatures run eagerly (a Python
        #: number that changes every call would otherwise retrace forever).
        self.max_traces = int(max_traces if max_traces is not None
                              else os.environ.get("TRACEC_MAX_TRACES", DEFAULT_MAX_TRACES))
        self._warned_limit = False
        #: Results are plain values even where eager ones would carry a graph
        #: (``tracec build`` and ``tracec dump``: nothing backpropagates there).
        self.values_only = values_only
        if dynamic not in (None, True, False):
            raise ValueError(f"dynamic must be None, True or False, got {dynamic!r}")
        #: None: sizes that change between calls become symbolic; True:
        #: every size is; False: always specialize.
        self.dynamic = dynamic
        self._sym: dict = {}          # pattern key -> symbolic entries
        self.compiles = 0             # executables built (not loaded from disk)
        self.loads = 0                # executables loaded from the disk cache
        self._cache: dict = {}
        self._eager_keys: dict = {}
        self._warned = False
        self._last_mutated = None
        #: Numbers earlier calls changed, lifted by later traces
        #: (``[(snapshot path, Location)]``, tracec.lifted_state).
        self._lift: list = []
        self._lift_reason = None
        #: Number arguments whose value changed between calls: position or
        #: keyword -> label.  Later traces lift them (read as inputs, as
        #: ``_lift``'s numbers are); their values leave the call key.
        self._arg_lift: dict = {}
        #: ... and those a trace used as plain numbers: specialized.
        self._arg_static: set = set()
        #: ``(id(container), key)`` of numbers (a module's attribute, a
        #: global, a closure variable) lifted because they changed between
        #: calls, then used as plain numbers by a trace: specialized.
        self._attr_static: set = set()
        #: a trace read a NumPy array argument's values other than through
        #: a tensor conversion: arrays are keyed by contents (pytree)
        self._array_content = False
        self._arg_box = lifted_state.ArgBox()
        self._retired = 0         # entries retired for mispredicted decisions
        self._last: Entry | None = None
        #: ``(match, entry, last)``: the last entry hit and a matcher for its
        #: key (``tracec.fast_call``), tried before the general lookup;
        #: ``last``: the symbolic entry whose code ``entry`` is, else ``entry``.
        self._fast = None
        #: The same per call key, for the latest keys hit (sizes that
        #: alternate, a random sequence length): tried once the key is made.
        self._recent: dict = {}
        self.traces = 0
        self.reasons: list = []
        self.hits = 0
        if isinstance(fn, Module):
            # torch.compile(model): the module's attributes are read from it
            # by the OptimizedModule around this (compiled_module.py), never
            # copied here (``model.last_loss`` set by a call would go stale).
            functools.update_wrapper(self, fn, updated=())
        else:
            functools.update_wrapper(self, fn)
        if not hasattr(self, "__name__"):   # a Module or another callable object
            self.__name__ = type(fn).__name__

    def __get__(self, obj, objtype=None):
        """``@tracec.compile`` on a method: bound to the instance, which is an
        argument like any other (each instance gets its own traces)."""
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args, **kwargs):
        if RECORDERS:
            # Called while another compiled function is being traced: its ops
            # simply become part of that trace (as torch.compile inlines).
            return self.fn(*args, **kwargs)
        if aten_report.LISTENERS:
            # Inside a FlopCounterMode: run eagerly (the same effects, by
            # the compile contract) so the ops it counts are reported.
            return self.fn(*args, **kwargs)
        if graph.SAVED_HOOKS and graph.is_grad_enabled() and graph.saved_hooks() is not None:
            # Under saved-tensor hooks (save_on_cpu, a checkpoint's forward):
            # run eagerly, where the hooks see every tensor saved for
            # backward; compiled code saves its own without calling them.
            return self.fn(*args, **kwargs)
        # (NumPy array arguments: inputs, or keyed by contents: pytree)
        pytree.ARRAY_CONTENT[0] = self._array_content
        fast = self._fast
        if fast is not None and not kwargs and fast[0](args):
            # The last entry's key, matched without building it (fast_call).
            e = fast[1]
            run = e._fast_run
            if run is None:
                run = e.fast_runner(args)
            if run:
                # Its guards, marshalling and write-backs specialized
                # (fast_run); MISS: the general path below decides.
                result = run(args)
                if result is not MISS:
                    self.hits += 1
                    self._last = fast[2]
                    return result
            if e.failed_guard(args, kwargs) is None:
                self.hits += 1
                self._last = fast[2]
                return e.run(args, kwargs)
        key = call_key(args, kwargs)
        if self._arg_lift:
            key = self._lifted_key(key, args, kwargs)
        if not kwargs and self._recent:
            fast = self._recent.get(key)
            if fast is not None and fast is not self._fast:
                # A key hit before (another size of a symbolic trace):
                # the fast path's again, without a new matcher.
                self._fast = fast
                e = fast[1]
                e.use_fast_key(key)
                return self(*args)
        if key in self._eager_keys:
            return self.fn(*args, **kwargs)
        entries = self._cache.get(key)
        reason = None
        if entries:
            for i, e in enumerate(entries):
                failed = e.failed_guard(args, kwargs)
                if failed is None and e.executable is None and self._sym:
                    # A static trace not compiled yet, superseded by a
                    # symbolic one for these sizes: that one's (size-generic)
                    # code serves instead of a second native compile.
                    served = self._run_symbolic(key, args, kwargs)
                    if served is not None:
                        return served[0]
                if failed is None:
                    if i:  # most recently used first: a training loop's steady-state
                        entries.insert(0, entries.pop(i))  # step checks one entry's guards
                    self.hits += 1
                    self._last = e
                    self._remember(key, args, kwargs, e)
                    return e.run(args, kwargs)
                reason = failed
            if reason is not None and self.dynamic is not False:
                # A number in an optimizer's param_groups set between calls
                # (a subclass's own step reading g['lr'], a schedule written
                # by hand): lifted like a number argument, so one trace serves.
                _, locs = lifted_state.optimizer_changes(entries[0].trace.optimizer_numbers)
                if not locs:
                    # A module's number attribute set between calls (a
                    # temperature annealed by the loop), or a global, a
                    # closure variable or an object's attribute (a
                    # global_step the loop advances): lifted likewise.
                    # (an older entry's guard also finds the numbers lifted
                    # since: only new ones count)
                    guards = entries[0].trace.guards
                    locs = self._new_lifts(lifted_state.module_changes(guards, self._attr_static)) \
                        or self._new_lifts(lifted_state.env_changes(guards, self._attr_static))
                if locs and self._add_lifted(locs):
                    reason += (f" ({', '.join(loc.label for _, loc in locs)}: lifted, read as "
                               "an input from now on)")
        elif self._cache:
            last = next(reversed(self._cache))
            reason = _describe_change(last, key, leaf_names(self.fn, args, kwargs))
            # (against the latest trace of the same structure: calls that
            # alternate a keyword argument keep one per structure)
            changed = next((c for k in reversed(self._cache) for c in (number_changes(k, key),)
                            if c), []) if self.dynamic is not False else []
            if changed and not self._arg_static.intersection(changed):
                # A number argument changed (a learning rate, a step index):
                # the retrace reads it as an input, and its code serves
                # every value (as a size that changed becomes symbolic).
                names = argument_names(self.fn)
                for w in changed:
                    self._arg_lift[w] = "argument " + path_name(w, names)
                key = self._lifted_key(call_key(args, kwargs), args, kwargs)
                reason += (f" ({', '.join(self._arg_lift[w] for w in changed)}: "
                           "lifted, read as an input from now on)")
        else:
            reason = "first call"
        if self._sym:
            served = self._run_symbolic(key, args, kwargs)
            if served is not None:
                return served[0]
            reason = self._sym_reason or reason
        if self.traces >= self.max_traces:
            if not self._warned_limit:
                self._warned_limit = True
                warnings.warn(
                    f"tracec.compile({self.__name__}): {self.traces} traces made, the limit "
                    f"(max_traces / TRACEC_MAX_TRACES); calls that match none of them run "
                    f"eagerly from now on. Last reason: {reason}. A Python number that "
                    f"changes every call retraces every call: pass it as a tensor.",
                    stacklevel=2)
            return self.fn(*args, **kwargs)
        return self._trace_and_compile(key, args, kwargs, reason)

    def _run_symbolic(self, key, args, kwargs):
        """``(result,)`` from the first symbolic trace whose sizes and guards
        this call meets, or None (``self._sym_reason``: why the last one
        did not)."""
        sym = self._sym.get(pattern_key(key))
        self._sym_reason = None
        for i, e in enumerate(sym or ()):
            env, failed = bind(e.trace.symbolic, e.trace.inputs, args, kwargs)
            if failed is None:
                failed = e.failed_guard(args, kwargs)
            if failed is None:
                if i:
                    sym.insert(0, sym.pop(i))
                self.hits += 1
                self._last = e
                out = e.run(args, kwargs, env)
                if e.served is not None:
                    # Calls with this very key (these sizes) are this
                    # code's until a new trace: the fast path runs it.
                    self._remember(key, args, kwargs, e.served, e)
                return (out,)
            self._sym_reason = failed
        return None

    def _remember(self, key, args, kwargs, entry, last=None) -> None:
        """Make ``entry`` the fast path's for calls with ``key`` (tensor
        arguments only: ``fast_call.matcher``); ``last``: the entry it
        serves for (a symbolic trace whose code ``entry`` is), else itself."""
        if kwargs:
            return
        fast = self._recent.get(key)
        if fast is None or fast[1] is not entry:
            match = fast[0] if fast is not None else fast_call.matcher(key, len(args))
            if match is None:
                self._fast = None
                return
            fast = (match, entry, entry if last is None else last)
            if len(self._recent) >= _RECENT_KEYS:
                self._recent.pop(next(iter(self._recent)))
            self._recent[key] = fast
        self._fast = fast
        entry.use_fast_key(key)

    def _liftable(self) -> list:
        """The lifted locations (``_lift``) that hold a number now: one set
        to None or another object between calls (a BatchNorm's ``momentum =
        None``) is guarded by its value in this trace, not read as a number."""
        out = []
        for p, loc in self._lift:
            try:
                v = loc.get()
            except (KeyError, IndexError, TypeError, AttributeError):
                continue        # (gone: an attribute deleted, a list shortened)
            if _is_plain_number(v):
                out.append((p, loc))
        return out

    def _lifted_key(self, key, args, kwargs) -> tuple:
        """``key`` with the lifted number arguments' values erased (their
        types kept); sets ``_arg_box`` to this call's values."""
        pos, kw = key[0]
        pos, kw = list(pos), list(kw)
        cur = {}

        def erase(spec):
            return ("V", spec[1], _LIFTED) if _is_number_spec(spec) else None
        for w in self._arg_lift:
            head, steps = (w[0], w[1:]) if isinstance(w, tuple) else (w, ())
            if isinstance(head, int):
                i = head if head < len(pos) else None
                spec = pos[i] if i is not None else None
            else:
                i = next((i for i, (k, _) in enumerate(kw) if k == head), None)
                spec = kw[i][1] if i is not None else None
            if spec is None:
                continue
            new = _replace_spec(spec, steps, erase)
            if new is None:
                continue
            cur[w] = resolve(w, args, kwargs)
            if isinstance(head, int):
                pos[i] = new
            else:
                kw[i] = (head, new)
        self._arg_box.current = cur
        return ((tuple(pos), tuple(kw)),) + key[1:]

    def _arg_locations(self) -> list:
        """``[(None, Location)]`` of the lifted number arguments this call
        has (``_lifted_key`` found them)."""
        return [(None, lifted_state.Location("arg", self._arg_box, w, self._arg_lift[w]))
                for w in self._arg_box.current]

    def _new_lifts(self, changes) -> list:
        """``changes`` but the numbers later traces lift already."""
        return [(p, loc) for p, loc in changes if not any(loc.same(old) for _, old in self._lift)]

    def _add_lifted(self, changes) -> bool:
        """Add the numbers ``changes`` names to those later traces lift;
        False if all of them were lifted already."""
        new = [(p, loc) for p, loc in changes
               if not any(loc.same(old) for _, old in self._lift)]
        self._lift = self._lift + new
        return bool(new)

    def _eager_signature(self, key, why: str) -> None:
        """Calls with ``key`` run eagerly from now on, because ``why``; the
        first such signature warns (from the user's call)."""
        self._eager_keys[key] = why
        if not self._warned:
            warnings.warn(f"tracec.compile({self.__name__}): running eagerly for this "
                          f"signature: {why}", stacklevel=4)
            self._warned = True

    def _trace_and_compile(self, key, args, kwargs, reason):
        # A new trace (or an eager signature) may now serve calls the fast
        # path's entry served: it goes until the next hit sets it again.
        self._fast = None
        self._recent.clear()
        if self._lift_reason is not None:
            reason, self._lift_reason = self._lift_reason, None
        if reason and "came out otherwise" in reason:
            # A speculated decision on tensor data keeps changing (an
            # adaptive solver's loop): after a second retirement these calls
            # run eagerly rather than retrace and recompile every few calls.
            self._retired += 1
            if self._retired >= 2:
                msg = (f"tracec.compile({self.__name__}): running eagerly from now on for this "
                       f"signature: {reason}, for the second time")
                self._eager_keys[key] = msg
                warnings.warn(msg, stacklevel=3)
                return self.fn(*args, **kwargs)
        t0 = time.perf_counter()
        dims = choose_dynamic(self.dynamic, key, args, kwargs, self._cache,
                              self._sym.get(pattern_key(key), ()))
        if torch_rng.FALLBACK_RANDOM[0]:
            # (eager draws need concrete sizes: a symbolic trace's would
            # come from the counter-based stream)
            dims = None
        # (the collector off while recording: the trace builds its IR op by
        # op, and each allocation burst set off a collection finding
        # nothing: see passes.pipeline.paused_gc)
        eager_draws = torch_rng.TRACED_EAGER_DRAWS[0]
        with recurrent.scans(getattr(BACKENDS[self.backend], "SCANS", True)), paused_gc():
            result, trace = record(self.fn, args, kwargs, self.__name__,
                                   fallback=self.fallback == "eager",
                                   symbols=SymbolTable(*dims) if dims else None,
                                   lift=self._liftable() + self._arg_locations(),
                                   views=not self.values_only)
        if torch_rng.TRACED_EAGER_DRAWS[0] != eager_draws:
            # fallback_random: the call drew PyTorch's eager numbers while
            # it was recorded (its result is eager's); compiled code would
            # draw from the counter-based stream instead.
            self._eager_signature(key, "it draws random numbers and torch._inductor.config."
                                  "fallback_random is set: they are PyTorch's eager numbers, "
                                  "which compiled code cannot draw")
            return result
        if isinstance(trace, ArraysRead):
            # It read a NumPy array argument's values (np.asarray(a, dtype),
            # a.mean()): the call ran eagerly; arrays are keyed by their
            # contents from now on, so such values are never stale.
            self._array_content = True
            pytree.ARRAY_CONTENT[0] = True
            self._lift_reason = (f"{trace}: NumPy array arguments are keyed by their contents "
                                 "from now on")
            return result
        if isinstance(trace, ChangedPlainObject):
            # The call changed a plain object it was given and ran eagerly;
            # that class is keyed by identity now, so the next call retraces.
            return result
        if isinstance(trace, LiftRefused):
            # It used a lifted number argument as a plain number (a loop
            # count, an index): the call ran eagerly; calls specialize on
            # those arguments from now on (each value its own trace).
            self._arg_static.update(self._arg_box.current)
            # numbers set between calls: specialized from now on
            between = [loc for _, loc in self._lift if loc.between]
            self._attr_static.update((id(loc.container), loc.key) for loc in between)
            self._lift = [(p, loc) for p, loc in self._lift if not loc.between]
            for w in self._arg_box.current:
                self._arg_lift.pop(w, None)
            self._arg_box.current = {}
            return result
        if isinstance(trace, str):  # fallback="eager": the call ran eagerly to its end
            self._eager_keys[key] = trace
            if not self._warned:
                warnings.warn(f"tracec.compile({self.__name__}): running eagerly from now on "
                              f"for this signature: {trace}", stacklevel=3)
                self._warned = True
            return result
        if trace.mutated is not None and trace.scalar_changes and \
                self._add_lifted(trace.scalar_changes):
            # It changed only Python numbers (a step counter, a learning rate
            # set from it), new ones: the next trace lifts them
            # (tracec.lifted_state), so that it compiles.
            self._last_mutated = None
            self._lift_reason = (f"{trace.mutated} during the call: the next trace reads "
                                 f"{', '.join(loc.label for _, loc in self._lift)} as "
                                 "inputs and writes them back")
            return result
        if trace.mutated is not None:
            # The call changed Python state it reads (a global list it appends
            # to, an attribute it increments): the trace's guard holds the
            # state before the call, so the next call retraces.  Twice in a
            # row: a side effect of every call, which compiled code cannot
            # repeat.
            if self._last_mutated == trace.mutated_root:
                msg = (f"tracec.compile({function_label(self.fn)}): {trace.mutated} during "
                       f"the call, "
                       f"twice in a row: a Python side effect that compiled calls would not "
                       f"repeat. Keep Python state changes outside the compiled function, or "
                       f"use tracec.compile(fn, fallback=\"eager\")")
                if self.fallback != "eager":
                    raise TraceError(msg)
                self._eager_keys[key] = msg
                warnings.warn(msg, stacklevel=3)
                return result
            self._last_mutated = trace.mutated_root
        else:
            self._last_mutated = None
        backward_out = None
        if trace.attr_needs_grad is not None and not self.values_only:
            # a tuple of tensors that require grad set as an attribute
            # (a tensor set alone is a result with a backward: tracing.finish)
            self._eager_signature(key, f"it sets the module attribute {trace.attr_needs_grad} "
                                  "to a tensor that requires grad (a backward outside the "
                                  "compiled function would need its graph); compile the whole "
                                  "training step (forward, backward and optimizer step), or "
                                  "call it under tracec.no_grad() for inference")
            return result
        if trace.returns_grad and not self.values_only:
            # Results need a backward outside (compile(model), then
            # loss.backward()): the entry gets a compiled backward for them.
            backward_out = tuple(trace.returns_grad)
        t1 = time.perf_counter()
        if trace.symbolic is not None and not trace.symbolic.sources:
            trace.size_notes = trace.symbolic.notes
            trace.symbolic = None     # no size was symbolic after all
        entry = self._make_entry(trace, backward_out)
        entry.timings["trace_s"] = t1 - t0
        entry.timings.update(trace_size(trace))
        self.traces += 1
        entry.number = self.traces
        self.reasons.append(reason)
        if trace.symbolic is not None:
            entry.make_sub = lambda env: self._specialization(entry, env, backward_out)
            entry.eager = lambda a, k: self.fn(*a, **k)
            # The traced sizes' code is made now: size-generic code where the
            # backend makes it (every later size runs it), else static code
            # for these sizes (the short last batch of an epoch then costs
            # nothing in the next epoch).
            traced = dict(trace.symbolic.hints)
            sizes = tuple(sorted(traced.items()))
            entry.make_generic = size_generic.maker(self, entry, BACKENDS[self.backend],
                                                    backward_out)
            sub = size_generic.generic_for(entry, traced, sizes) \
                if entry.make_generic is not None else None
            if sub is None:
                sub = entry.subs[sizes] = entry.make_sub(traced)
                sub.ensure_compiled()
            entry.last_sub = sub
            self._sym.setdefault(pattern_key(key), []).insert(0, entry)
        else:
            self._cache.setdefault(key, []).append(entry)
        self._last = entry
        if self.dump:
            self._write_dump(entry)
        return result

    def _make_entry(self, trace: Trace, backward_out) -> Entry:
        entry = self._build(trace)
        if entry.eager is None:   # a call whose speculated decisions fail runs it
            entry.eager = lambda a, k: self.fn(*a, **k)
        if backward_out is not None:
            backend = BACKENDS[self.backend]
            entry.backward_plan = compiled_backward.BackwardPlan(
                entry, backward_out,
                lambda module, optimize: self._cached(backend, module, optimize,
                                                      tag="backward")[0],
                checks_level())
        return entry

    def _specialization(self, entry: Entry, env: dict, backward_out) -> Entry:
        """The static entry of symbolic ``entry`` for the sizes ``env``: its
        trace specialized (``tracec.ir.specialize``), then the passes and
        the backend as for any static trace (through the disk cache)."""
        static = dataclasses.replace(entry.trace, module=ir.specialize(entry.trace.module, env),
                                     symbolic=None)
        sub = self._make_entry(static, backward_out)
        sub.number = f"{entry.number}." + "_".join(f"{k}{v}" for k, v in sorted(env.items()))
        return sub

    def _build(self, trace: Trace) -> Entry:
        if _checks_enabled():
            trace.module.verify()
        backend = BACKENDS[self.backend]
        entry = Entry(trace, None, {"trace": trace.module})
        # requires_grad as the call found it (the call itself may change it:
        # a buffer written with values that require grad); a symbolic
        # trace's too: its guards decide for every size it serves
        entry.state_guards = [(s.source, s.requires_grad) for s in trace.inputs
                              if s.kind == "state"]
        if trace.symbolic is not None:
            entry.on_compiled = None
            return entry
        # Nothing more happens now: the first call's result comes from the
        # eager run.  At the first reuse the executable comes from the disk
        # cache (keyed by the trace: no passes run) or from the passes and
        # the backend; a trace never reused (a first optimizer step, say) is
        # never optimized or compiled.
        donate = donations(trace)
        entry.compile_fn = lambda: self._compile_cached(backend, entry, donate)
        if self.backend == "cpu" and profiler.enabled():   # TRACEC_PROFILE=1
            entry.compile_fn = profiler.profiling_compile(entry, self.__name__)
        entry.on_compiled = self._write_dump if self.dump else None
        if self.check:
            entry.check_backend = backend
        # A guard may carry ``refresh``: Python state the trace reads from a
        # tensor (optim's lifted learning rate), brought up to date per call.
        seen = set()
        for snap, _ in trace.guards:
            refresh = getattr(snap, "refresh", None)
            key = (id(getattr(snap, "opt", snap)), getattr(snap, "index", None))
            if refresh is not None and key not in seen:
                seen.add(key)
                entry.refreshers.append(refresh)
            commit = getattr(snap, "commit", None)
            if commit is not None:        # lifted numbers written back (lifted_state)
                entry.committers.append(commit)
        return entry

    def _compile_cached(self, backend, entry: Entry, donate=None):
        """The backend's executable for ``entry``, from the disk cache when
        the backend produces object code.  The key is the trace's structure
        and source locations (the compiled code names the user's lines in
        its errors), the donation map, the backend, the target, the options
        and a digest of tracec's own source (which decides everything from
        the trace to the object code): a hit needs neither the passes nor
        the backend."""
        return self._cached(backend, entry.stages["trace"], entry.optimized, donate)

    def _cached(self, backend, keyed, optimized, donate=None, tag: str = ""):
        """``backend.compile_module(optimized(), donate=donate)`` through the
        disk cache, keyed by the module ``keyed`` (as above) and ``tag``;
        ``optimized()`` runs only on a miss (it may rewrite ``keyed``)."""
        if not hasattr(backend, "load_object") or os.environ.get("TRACEC_NO_CACHE"):
            self.compiles += 1
            return backend.compile_module(optimized(), donate=donate), {}
        target = backend.target_id() if hasattr(backend, "target_id") else ""
        key = hashlib.sha256("|".join((cache.fingerprint(keyed, locations=True),
                                       self.backend, target, cache.source_digest(),
                                       str(self.check), tag,
                                       str(sorted((donate or {}).items())))).encode()
                             ).hexdigest()
        disk = cache.DiskCache()
        t0 = time.perf_counter()
        hit = disk.get(key)
        if hit is not None:
            header, payload = hit
            try:
                exe = backend.load_object(payload, header["signature"])
                self.loads += 1
                return exe, {"cache_load_s": time.perf_counter() - t0, "cache": "hit"}
            except Exception as e:  # a foreign or stale entry: rebuild it
                warnings.warn(f"tracec cache: discarding unusable entry {key[:12]}: {e}")
        exe = backend.compile_module(optimized(), donate=donate)
        self.compiles += 1
        try:
            disk.put(key, {"signature": exe.signature}, exe.object_code)
        except OSError as e:
            warnings.warn(f"tracec cache: cannot write the cache ({e}); continuing")
        return exe, {"cache": "miss"}

    # --- introspection ---------------------------------------------------------

    def profile(self, *args, repeat: int = 10, echo: bool = True, **kwargs):
        """Run the compiled step ``repeat`` times ordinarily and ``repeat``
        times on a profiling build; print (``echo``) and return its
        per-kernel profile (``tracec.kernel_profiler``)."""
        return profiler.profile(self, args, kwargs, repeat, echo)

    def ir(self, stage: str = "optimized") -> str:
        if stage not in STAGES and stage != "ptx":
            raise ValueError(f"unknown IR stage {stage!r}; stages are {', '.join(STAGES)}")
        if self._last is None:
            raise RuntimeError(f"{self.__name__} has not been compiled yet: call it first")
        s = self._stage(self._last, stage)
        if s is None:
            raise ValueError(f"stage {stage!r} is not produced by the {self.backend!r} backend")
        return s if isinstance(s, str) else ir.print_module(s)

    def _stage(self, entry: Entry, stage: str):
        s = entry.stage(stage)
        if s is None and stage in ("lowered", "llvm", "asm") and \
                hasattr(BACKENDS[self.backend], "load_object"):
            # Loaded from the disk cache, which keeps object code only: the
            # text stages come from compiling the optimized module again (a
            # symbolic trace's: its last code's, under that code's sizes).
            if entry.trace.symbolic is not None and entry.last_sub is not None:
                entry = entry.last_sub
            exe = entry.compile_again(BACKENDS[self.backend].compile_module)
            for name in ("lowered", "llvm"):
                entry.stages[name] = exe.stage(name)
            s = exe.stage(stage)
        return s

    def cache_info(self):
        entries = [e for es in self._cache.values() for e in es] + \
            [e for es in self._sym.values() for e in es]
        entries.sort(key=lambda e: e.number)
        symbolic = [dict(e.trace.symbolic.dims) if e.trace.symbolic else {} for e in entries]
        notes = [n for e in entries for n in (e.trace.symbolic.notes if e.trace.symbolic
                                              else e.trace.size_notes)] + \
            [f"trace {e.number}: static code per size ({e.generic_failed})" for e in entries
             if e.trace.symbolic and e.generic_failed]
        guards = [f"{lhs} {op} {rhs}" for e in entries if e.trace.symbolic
                  for kind, lhs, op, rhs, res, where in e.trace.symbolic.guards
                  if kind == "compare" and res] + \
                 [f"not {lhs} {op} {rhs}" for e in entries if e.trace.symbolic
                  for kind, lhs, op, rhs, res, where in e.trace.symbolic.guards
                  if kind == "compare" and not res]
        lifted = [[loc.label for loc in e.trace.lifted] if e.trace.lifted else []
                  for e in entries]
        speculated = [[f"{loc[0]}:{loc[1]}" for _, _, loc in e._speculated()] for e in entries]
        notes += [n for e in entries for n in e.trace.runtime_notes]
        runtime = [[f"{e.trace.names.get(i, 'a tensor')} ({how} at {where})"
                    for i, how, where in e.trace.runtime_reads] for e in entries]
        return CacheInfo(self.traces, self.hits, list(self.reasons), len(self._eager_keys),
                         dict(self._last.timings) if self._last else {},
                         symbolic, notes, guards, self.compiles, self.loads, lifted,
                         speculated, sum(e.mispredicted_total for e in entries),
                         list(self._eager_keys.values()), runtime)

    def _write_dump(self, entry: Entry) -> None:
        os.makedirs(self.dump, exist_ok=True)
        n = entry.number
        if entry.trace.symbolic is None:   # a symbolic trace's code is its specializations'
            entry.autodiff()
            entry.optimized()
        if entry.executable is not None:
            for stage in ("lowered", "llvm"):
                text = self._stage(entry, stage)
                if text is not None:
                    entry.stages[stage] = text
        for stage in entry.stages:
            path = os.path.join(self.dump, f"{self.__name__}.{n}.{stage}.mlir"
                                if stage in ("trace", "autodiff", "optimized", "lowered")
                                else f"{self.__name__}.{n}.{stage}")
            s = entry.stages[stage]
            text = s if isinstance(s, str) else ir.print_module(s)
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, path)


#: Recorded ops past which ``cache_info()`` says a trace is long (a Python
#: loop unrolled into it: every iteration is recorded, and the backend's
#: first compile grows with the number of ops).
LONG_TRACE_OPS = 2000


def trace_size(trace: Trace) -> dict:
    """``{"ops": n}`` and, for a long trace, ``"long_trace"``: a sentence
    naming the user's line that recorded the most ops."""
    n = sum(1 for _ in trace.module.walk())
    out = {"ops": n}
    if n > LONG_TRACE_OPS:
        counts: dict = {}
        for op in trace.module.walk():
            t = ir.loc_tuple(getattr(op, "location", None))
            key = f"{t[0]}:{t[1]}" if t else "<unknown location>"
            counts[key] = counts.get(key, 0) + 1
        where, k = max(counts.items(), key=lambda kv: kv[1])
        out["long_trace"] = (
            f"the trace has {n} ops, {k} of them recorded at {where} (a Python loop is "
            f"unrolled into the trace, one copy per iteration); the first native compile "
            f"takes seconds and grows with it. Shorter sequences per call, or a smaller "
            f"number of iterations per compiled call, keep it short")
    return out


@dataclass
class CacheInfo:
    traces: int
    hits: int
    reasons: list
    eager_signatures: int
    timings: dict
    #: per trace (in order), ``{"x[0]": "B: why it is symbolic"}`` ({} if static)
    symbolic: list = field(default_factory=list)
    #: symbolic sizes that were specialized (``int(B)``), and where
    size_notes: list = field(default_factory=list)
    #: the size guards of the symbolic traces (``T > 128``)
    size_guards: list = field(default_factory=list)
    #: executables the backend built (one per static trace or symbolic trace
    #: and size that ran compiled; disk cache loads are not counted)
    compiles: int = 0
    #: executables loaded from the disk cache instead
    loads: int = 0
    #: per trace, the Python numbers it reads as inputs and writes back
    #: (a step counter, a scheduler's: tracec.lifted_state)
    lifted: list = field(default_factory=list)
    #: per trace, where it decided on tensor data (bool()): speculated
    speculated: list = field(default_factory=list)
    #: calls whose speculated decisions came out otherwise (run eagerly)
    mispredicted: int = 0
    #: why each of the ``eager_signatures`` runs eagerly
    eager_reasons: list = field(default_factory=list)
    #: per trace, the integers its compiled code reads from tensors at run
    #: time (``int(self.queue_ptr)``: tracec.runtime_int), not guarded
    runtime_values: list = field(default_factory=list)

    @property
    def notes(self) -> list:
        """Things worth knowing about the last trace (a long unrolled loop),
        and sizes that a symbolic trace specialized."""
        out = [self.timings["long_trace"]] if "long_trace" in self.timings else []
        return out + list(self.size_notes)


def default_backend() -> str:
    return os.environ.get("TRACEC_BACKEND", "cpu")


# torch.compile's backend names: Inductor's and the debugging ones compile
# with tracec's default backend; "eager" (Dynamo with no compiler) runs the
# function as it is.
_TORCH_BACKENDS = {"inductor": None, "aot_eager": None, "cudagraphs": None, "openxla": None,
                   "tvm": None, "onnxrt": None, "ipex": None}
_TORCH_MODES = (None, "default", "reduce-overhead", "max-autotune",
                "max-autotune-no-cudagraphs")


def compile(fn=None, *, backend=None, dump=None, fallback=None, check=False,  # noqa: A001
            max_traces=None, dynamic=None, fullgraph=False, mode=None, options=None,
            disable=False):
    """Compile ``fn`` (usable as ``@compile`` or ``@compile(...)``).

    ``dynamic``: None (sizes that change between calls become symbolic at
    the retrace), True (every argument size symbolic from the first trace)
    or False (always specialize); see API.md §4.  ``torch.compile``'s own
    arguments are accepted so scripts run unchanged: ``mode`` and
    ``options`` (tracec has one way to compile), ``fullgraph`` (tracec
    compiles the whole call or raises ``TraceError``; installed as torch,
    ``fullgraph=False``, PyTorch's default, means ``fallback="eager"``, as
    a graph break runs eagerly there), its backend
    names (``"inductor"`` and friends compile with tracec's default;
    ``"eager"`` and ``disable=True`` return ``fn`` uncompiled)."""
    if mode not in _TORCH_MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: "
                           + ", ".join(m for m in _TORCH_MODES if m))
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    if disable or backend == "eager":
        return (lambda f: f) if fn is None else fn
    if isinstance(backend, str) and backend in _TORCH_BACKENDS:
        backend = _TORCH_BACKENDS[backend]
    elif callable(backend):
        raise TypeError("tracec.compile(backend=...): a custom backend function is a "
                        "torch.compile (Dynamo) feature; tracec takes one of "
                        "'cpu', 'interp', 'cuda', 'cuda-emulated'")
    if fallback is None and not fullgraph and dt.PUBLIC_NAME[0] == "torch":
        # Called as torch.compile (install_as_torch): PyTorch's default
        # fullgraph=False runs what it cannot capture eagerly (a graph
        # break), so an unmodified program never fails for it; tracec runs
        # that signature eagerly and says so once.  fullgraph=True raises.
        fallback = "eager"
    def make(f):
        cf = CompiledFunction(f, backend=backend, dump=dump, fallback=fallback, check=check,
                              max_traces=max_traces, dynamic=dynamic)
        if isinstance(f, Module):       # a module stays a module (torch's OptimizedModule)
            return OptimizedModule(f, cf)
        return cf
    return make if fn is None else make(fn)


class TracedIR:
    """The IR of one traced call: ``.module`` and its text (``str()``)."""

    def __init__(self, trace: Trace, result):
        self.trace = trace
        self.module = trace.module
        self.result = result

    def __str__(self):
        return ir.print_module(self.module)

    text = property(__str__)


def trace(fn, *args, **kwargs) -> TracedIR:
    """Run ``fn`` once eagerly, recording it; returns the recorded IR (no
    passes, no compilation)."""
    result, tr = record(fn, args, kwargs, getattr(fn, "__name__", "fn"))
    return TracedIR(tr, result)


# ``torch.compiler``'s functions (``tracec.compiler`` is this module).
def reset() -> None:
    """Accepted: compiled code lives in each compiled function and on disk."""


def disable(fn=None, recursive: bool = True, *, reason=None):
    """``fn`` itself (tracec traces through every Python call)."""
    return (lambda f: f) if fn is None else fn


def is_compiling() -> bool:
    """True while a trace is being recorded."""
    return bool(RECORDERS)


is_dynamo_compiling = is_compiling


def is_exporting() -> bool:
    return False


def list_backends(exclude_tags=None) -> list:
    return sorted(BACKENDS)


def allow_in_graph(fn):
    return fn


def assume_constant_result(fn):
    return fn


def cudagraph_mark_step_begin() -> None:
    """Accepted (no CUDA graphs in tracec)."""
