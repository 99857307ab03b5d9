"""Python numbers a compiled function advances at every call, carried by the
compiled code instead of refused (``tracec.sym_scalar`` says how they are
traced).

A traced call that changed int or float values it can see (BERT's
``ScheduledOptim.n_current_steps += 1``, YOLOv5's ``ModelEMA.updates``, a
``global step``) would retrace at every call.  ``scalar_changes`` finds
those values in the guard's snapshots taken before and after the call; the
retrace then *lifts* them (``Lifted``): it reads them as ``SymScalar``
inputs, and what the call stored from them (the counter's new value, a
learning rate in an optimizer's ``param_groups``) becomes a write-back that
each compiled call recomputes from that call's numbers.

Invariants:
  * a lifted trace's guard (``LiftedGuard``) holds while each lifted
    location holds a number of the type it held when traced and every
    decision the trace took on them (comparisons, ``bool()``) comes out the
    same; the snapshot guard ignores the lifted locations' values
    (``coarsen``);
  * ``LiftedGuard.refresh`` (before the compiled code runs) is idempotent:
    it reads the lifted numbers and sets the holder tensors the trace reads;
    ``commit`` (after it ran) writes the new values back, once per call;
  * a trace whose lifted numbers were made plain numbers (``float(n)``, an
    f-string, an index) is refused (``Lifted.refusal``): compiled calls
    would repeat that call's number.
"""
from __future__ import annotations

import functools
import sys
import types

import numpy as np

from tracec.nn.modules.module import Module
from tracec.optim.optimizer import Optimizer
from tracec.pytree import _PLAIN_STDLIB, is_dataclass_instance
from tracec.sym_scalar import ACTIVE, LIFTED, Lifting, SnapshotToken, SymScalar, patched_math
from tracec.tensor import Tensor

__all__ = ["scalar_changes", "tensor_attr_changes", "Lifted", "LiftedGuard", "coarsen",
           "Location", "ANY_TENSOR", "ArgBox"]



def _is_num(v) -> bool:
    """A Python or NumPy real number (not a bool)."""
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


class ArgBox:
    """A compiled function's lifted number arguments for the call at hand
    (``current``: argument position or keyword -> its value), set before
    the call's guards run; the ``"arg"`` Locations read it."""

    __slots__ = ("current",)

    def __init__(self):
        self.current: dict = {}


class Location:
    """Where a Python value lives: ``kind`` "attr" (an object's
    ``__dict__``), "item" (a dict or list), "cell" (a closure cell) or
    "arg" (a number argument of the call: ``container`` is an ``ArgBox``)."""

    __slots__ = ("kind", "container", "key", "label", "after", "between")

    def __init__(self, kind, container, key, label):
        self.kind, self.container, self.key, self.label = kind, container, key, label
        #: the value the call that found it changed left there
        self.after = None
        #: set between calls, not by one (a module's ``self.temperature``
        #: annealed by the loop): a trace that uses it as a plain number
        #: specializes on it instead of being refused (``module_changes``)
        self.between = False

    def get(self):
        if self.kind == "attr":
            return self.container.__dict__[self.key]
        if self.kind == "arg":
            return self.container.current[self.key]
        if self.kind == "cell":
            return self.container.cell_contents
        if self.kind == "titem":        # an element of a tuple in a dict (betas)
            k, i = self.key
            return self.container[k][i]
        return self.container[self.key]

    def set(self, v) -> None:
        if self.kind == "attr":
            if isinstance(self.container, (Module, type)):
                # through __setattr__: the mutation epoch advances, so other
                # traces' guards on this module look again.
                setattr(self.container, self.key, v)
            else:
                self.container.__dict__[self.key] = v
        elif self.kind == "cell":
            self.container.cell_contents = v
        elif self.kind == "arg":
            self.container.current[self.key] = v
        elif self.kind == "titem":
            k, i = self.key
            t = self.container[k]
            self.container[k] = t[:i] + (v,) + t[i + 1:]
        else:
            self.container[self.key] = v

    def same(self, other) -> bool:
        return (self.kind == other.kind and self.container is other.container
                and self.key == other.key)


def _is_number_leaf(v) -> bool:
    return (type(v) is tuple and len(v) == 2 and type(v[0]) is type
            and issubclass(v[0], (int, float, np.integer, np.floating))
            and not issubclass(v[0], (bool, np.bool_)))


def _diff(a, b, path, out) -> bool:
    """Append to ``out`` the paths where snapshots ``a`` and ``b`` differ
    by a number only; False if they differ otherwise."""
    if a == b:
        return True
    if _is_number_leaf(a) and _is_number_leaf(b):
        out.append(path)
        return True
    if type(a) is not tuple or type(b) is not tuple or len(a) != len(b) or not a:
        return False
    if a[0] == "P" and len(a) == 3 and a[1] == b[1]:
        items_a, items_b = a[2], b[2]
        if [k for k, _ in items_a] != [k for k, _ in items_b]:
            return False
        return all(_diff(va, vb, path + (("attr", k),), out)
                   for (k, va), (_, vb) in zip(items_a, items_b))
    if a[0] == "M" and len(a) == 3 and a[1] == b[1] and a[2][:2] == b[2][:2]:
        # A module's own attributes (Module.mode_and_tensors): bare values.
        attrs_a, attrs_b = a[2][2], b[2][2]
        if [e[0] for e in attrs_a] != [e[0] for e in attrs_b]:
            return False
        for ea, eb in zip(attrs_a, attrs_b):
            if ea == eb:
                continue
            if len(ea) == len(eb) == 2 and _is_num(ea[1]) and _is_num(eb[1]):
                out.append(path + (("attr", ea[0]),))
            else:
                return False
        return True
    if a[0] is dict and b[0] is dict:
        keys = [k for k, _ in a[1]]
        if keys != [k for k, _ in b[1]] or any(type(k) is tuple for k in keys):
            return False
        return all(_diff(va, vb, path + (("item", k),), out)
                   for (k, va), (_, vb) in zip(a[1], b[1]))
    if a[0] is list and b[0] is list and len(a[1]) == len(b[1]):
        return all(_diff(va, vb, path + (("item", j),), out)
                   for j, (va, vb) in enumerate(zip(a[1], b[1])))
    return False


def _is_tensor_or_none(v) -> bool:
    return type(v) is tuple and v and (v[0] == "T" or (v[0] is type(None)))


def tensor_attr_changes(before, after) -> list:
    """Snapshot paths of plain objects' attributes that changed from a
    tensor or None to a tensor (pix2pix's ``self.fake_B = self.netG(...)``
    on its BaseModel), and of dict entries under a string key that changed
    from one tensor to another (hifi-gan's ``hann_window[str(y.device)] =
    torch.hann_window(...)`` in a global dict), where snapshots ``before``
    and ``after`` differ."""
    out: list = []

    def walk(a, b, path):
        if a == b or type(a) is not tuple or type(b) is not tuple or not a or not b:
            return
        if a[0] == "P" and b[0] == "P" and len(a) == 3 and len(b) == 3 and a[1] == b[1]:
            kb = dict(b[2])
            for k, va in a[2]:
                vb = kb.get(k)
                if vb is None:
                    continue
                if va != vb and _is_tensor_or_none(va) and type(vb) is tuple and vb[0] == "T":
                    out.append(path + (("attr", k),))
                else:
                    walk(va, vb, path + (("attr", k),))
        elif a[0] is dict and b[0] is dict and [k for k, _ in a[1]] == [k for k, _ in b[1]]:
            for (k, va), (_, vb) in zip(a[1], b[1]):
                if type(k) is str and va != vb and type(va) is tuple and va and va[0] == "T" \
                        and type(vb) is tuple and vb and vb[0] == "T":
                    out.append(path + (("item", k),))
                elif type(k) is not tuple:
                    walk(va, vb, path + (("item", k),))
    for i, (a, b) in enumerate(zip(before, after)):
        walk(a, b, (i,))
    return out


def entry_at(snapshot, path):
    """The snapshot entry at ``path`` (as ``tensor_attr_changes`` and
    ``scalar_changes`` name them), or None."""
    node = snapshot[path[0]]
    for kind, key in path[1:]:
        if type(node) is not tuple or not node:
            return None
        if node[0] == "P" and len(node) == 3:
            node = dict(node[2]).get(key)
        elif node[0] is dict:
            node = dict(node[1]).get(key)
        elif node[0] is list:
            node = node[1][key] if key < len(node[1]) else None
        else:
            return None
    return node


def _root_location(label, getter):
    """The Location of a root that is itself a number (a global, a
    closure variable), or None."""
    if isinstance(getter, functools.partial) and getattr(getter.func, "__self__", None) \
            is not None and isinstance(getter.func.__self__, dict):
        name = getter.args[0]
        return Location("item", getter.func.__self__, name, name)
    defaults = getattr(getter, "__defaults__", None)
    if defaults and type(defaults[0]).__name__ == "cell":
        return Location("cell", defaults[0], None, label.split("'")[1] if "'" in label
                        else label)
    return None


def _root_name(label: str) -> str:
    return label.split("'")[1] if "'" in label else label


def resolve(env, path):
    """The live ``Location`` a snapshot path names, or None."""
    label, getter = env.roots[path[0]]
    steps = path[1:]
    if not steps:
        return _root_location(label, getter)
    obj = getter()
    obj = getattr(obj, "cls", obj) if type(obj).__name__ == "ClassData" else obj
    name = _root_name(label)
    for kind, key in steps[:-1]:
        try:
            obj = obj.__dict__[key] if kind == "attr" else obj[key]
        except (KeyError, IndexError, TypeError, AttributeError):
            return None
        name += f".{key}" if kind == "attr" else f"[{key!r}]"
    kind, key = steps[-1]
    name += f".{key}" if kind == "attr" else f"[{key!r}]"
    if kind == "attr" and not hasattr(obj, "__dict__"):
        return None
    return Location(kind, obj, key, name)


def follow_paths(env, lift) -> list:
    """``lift`` (``[(snapshot path, Location)]``) with each location that has
    a path resolved again in ``env`` (the live object there now), those
    that no longer lead to a number left out (None or a path that is gone:
    the snapshot guard then holds their values)."""
    out = []
    for p, loc in lift:
        if p is not None:
            live = resolve(env, p)
            if live is None:
                continue
            if not live.same(loc):
                live.after, live.between = loc.after, loc.between
                loc = live
            try:
                if not _is_num(loc.get()):
                    continue
            except (KeyError, IndexError, TypeError, AttributeError):
                continue
        out.append((p, loc))
    return out


def scalar_changes(env, before, after):
    """``[(path, Location)]`` of the numbers the call changed, where
    numbers are all it changed; else None."""
    out: list = []
    for i, (a, b) in enumerate(zip(before, after)):
        if not _diff(a, b, (i,), out):
            return None
    locs = []
    for p in out:
        loc = resolve(env, p)
        if loc is None or not _is_num(loc.get()):
            return None
        loc.after = loc.get()
        locs.append((p, loc))
    return locs or None


def _optimizers(x, depth, out, seen) -> None:
    """``out``: the optimizers reachable from ``x`` (a scheduler's
    ``optimizer``, one in a global or an object's attribute)."""
    if depth <= 0 or id(x) in seen or isinstance(x, (Tensor, str, bytes, int, float, type)):
        return
    seen.add(id(x))
    if isinstance(x, Optimizer):
        out.append(x)
        # an optimizer wrapping another (Lookahead's self.optimizer, SAM's
        # self.base_optimizer): that one's numbers too
        for k, v in list(vars(x).items()):
            if k not in ("state", "param_groups", "defaults"):
                _optimizers(v, depth - 1, out, seen)
        return
    if isinstance(x, dict):
        vals = list(x.values())
    elif isinstance(x, (list, tuple)):
        vals = list(x)
    elif isinstance(x, Module):
        return
    else:
        d = getattr(x, "__dict__", None)
        if type(d) is not dict or callable(x):
            return
        vals = list(d.values())
    if len(vals) > 256:
        return
    for v in vals:
        _optimizers(v, depth - 1, out, seen)


def optimizer_numbers(roots) -> list:
    """``[(Location, value)]``: the hyperparameters (numbers and tuples of
    numbers) of every optimizer reachable from ``roots``, the numbers in its
    per-parameter state and its own number attributes.  The guard's
    snapshot leaves optimizers to their own guard, which compares neither a
    learning rate (compiled calls refresh it) nor a number a custom
    optimizer counts with (AdaBelief's ``state['step'] += 1``, Lookahead's
    ``self._la_step``): a call that changes one (``scheduler.step()``
    inside the step, a step counter) is found by comparing these."""
    opts: list = []
    seen: set = set()
    for r in roots:
        _optimizers(r, 4, opts, seen)
    out = []
    for o in opts:
        label = type(o).__name__.lower()
        for k, v in vars(o).items():
            if _is_num(v):
                out.append((Location("attr", o, k, f"{label}.{k}"), v))
        state = vars(o).get("state")
        if isinstance(state, dict):
            params = [p for g in o.param_groups for p in g["params"]]
            for pi, p in enumerate(params):
                st = state.get(p)
                for k, v in (st.items() if isinstance(st, dict) else ()):
                    if _is_num(v):
                        out.append((Location("item", st, k, f"{label}.state[param {pi}][{k!r}]"),
                                    v))
        for gi, g in enumerate(o.param_groups):
            for k, v in g.items():
                where = f"{label}.param_groups[{gi}][{k!r}]"
                if k == "params":
                    continue
                if _is_num(v):
                    out.append((Location("item", g, k, where), v))
                elif type(v) is tuple and all(_is_num(e) for e in v):
                    out += [(Location("titem", g, (k, i), f"{where}[{i}]"), e)
                            for i, e in enumerate(v)]
    return out


def optimizer_changes(before, lifted=None) -> tuple:
    """``(description, locations)`` of the hyperparameters ``before``
    (``optimizer_numbers``) lists that the call changed: ``locations``
    None when one of them is not a number now or then (a ``betas``
    tuple); ``(None, [])`` when none changed."""
    changed, locs = None, []
    done = [] if lifted is None else lifted.locations + [w for w, _ in lifted.writes]
    for loc, v in before:
        if any(loc.same(x) for x in done):
            continue
        now = loc.get()
        if now == v and type(now) is type(v):
            continue
        if changed is None:
            changed = f"{loc.label} changed ({v!r} -> {now!r})"
        if _is_num(v) and _is_num(now) and locs is not None:
            loc.after = now
            locs.append((None, loc))
        else:
            locs = None
    return changed, locs


def module_changes(guards, static=frozenset()) -> list:
    """``[(None, Location)]`` of the number attributes (int or float, not
    bool) of the modules whose ``mode_and_tensors`` guard in ``guards``
    failed because of them alone (a Gumbel-softmax temperature annealed
    between calls: ``self.temperature = max(0.5, t * decay)``); empty when
    any other part of such a guard changed, or when a changed number is in
    ``static`` (``(id(module), name)``: a lifted trace used it as a plain
    number before)."""
    out: list = []
    for snap, value in guards:
        owner = getattr(snap, "__self__", None)
        if not isinstance(owner, Module) or getattr(snap, "__name__", "") != "mode_and_tensors":
            continue
        now = snap()
        if now == value:
            continue
        if now[0] != value[0] or now[1] != value[1]:
            return []
        old = {a[0]: a for a in value[2]}
        new = {a[0]: a for a in now[2]}
        if set(old) != set(new):
            return []
        for k, a in old.items():
            b = new[k]
            if a == b:
                continue
            if len(a) != 2 or len(b) != 2 or not _is_num(a[1]) or not _is_num(b[1]) \
                    or type(a[1]) is not type(b[1]) or (id(owner), k) in static:
                return []
            loc = Location("attr", owner, k, f"{type(owner).__name__}.{k}")
            loc.between = True
            out.append((None, loc))
    return out


def env_changes(guards, static=frozenset()) -> list:
    """``[(snapshot path, Location)]`` of the numbers set between calls in
    what the function sees besides its arguments (a ``global_step`` the
    loop advances, ``cfg["kl_weight"]``, ``hp.beta``): the places where the
    snapshot guard (``tracec.guards.EnvGuard``) in ``guards`` differs from
    now, when numbers are all that differ there and none is in ``static``
    (``(id(container), key)``: a lifted trace used it as a plain number
    before); else empty."""
    for snap, value in guards:
        if type(snap).__name__ != "EnvGuard":
            continue
        if getattr(snap, "holds", None) is not None and snap.holds(value):
            return []
        locs = scalar_changes(snap, value, snap.snapshot()) or []
        if any((id(loc.container), loc.key) in static for _, loc in locs):
            return []
        for _, loc in locs:
            loc.between = True
        return locs
    return []


def module_attrs(locations) -> dict:
    """``id(module) -> {names}`` of the module attributes among the lifted
    ``locations`` (their entries in a guard's snapshot: ``coarsen_modules``)."""
    mods: dict = {}
    for loc in locations:
        if loc.kind == "attr" and isinstance(loc.container, Module):
            mods.setdefault(id(loc.container), set()).add(loc.key)
    return mods


def lifted_entry(entry):
    """A module attribute's snapshot entry ``(name, value)`` made the lifted
    token (any number)."""
    return (entry[0], LIFTED) if len(entry) == 2 else entry


#: Stands for a lifted number in a snapshot (equal to any number's entry).
ANY = LIFTED


#: A replayed attribute in a guard's snapshot: any tensor's entry (a new one
#: each compiled call), not None (the call may decide on that).
ANY_TENSOR = SnapshotToken(lambda o: type(o) is tuple and bool(o) and o[0] == "T",
                           "<replayed tensor attribute>")


def coarsen(snapshot: tuple, paths, token=None) -> tuple:
    """``snapshot`` with the entries at ``paths`` replaced by ``token``
    (``ANY``: a lifted number)."""
    for p in paths:
        snapshot = _replace(snapshot, p, 0, ANY if token is None else token)
    return snapshot


def _replace(node, path, depth, token=None):
    if depth == len(path):
        return ANY if token is None else token
    if depth == 0:
        i = path[0]
        return node[:i] + (_replace(node[i], path, 1, token),) + node[i + 1:]
    kind, key = path[depth]
    if type(node) is not tuple:
        return node
    if node[0] == "P":
        items = tuple((k, _replace(v, path, depth + 1, token) if k == key else v)
                      for k, v in node[2])
        return (node[0], node[1], items)
    if node[0] == "M" and depth == len(path) - 1:
        p, b, attrs = node[2]
        return ("M", node[1], (p, b, [(e[0], ANY if token is None else token)
                                      if e[0] == key and len(e) == 2 else e for e in attrs]))
    if node[0] is dict:
        return (dict, tuple((k, _replace(v, path, depth + 1, token) if k == key else v)
                            for k, v in node[1]))
    if node[0] is list:
        return (list, tuple(_replace(v, path, depth + 1, token) if j == key else v
                            for j, v in enumerate(node[1])))
    return node


def _walk(x, depth, budget, out, seen) -> None:
    """``out``: Locations holding a SymScalar, reachable from ``x``."""
    if depth <= 0 or budget[0] <= 0 or id(x) in seen:
        return
    seen.add(id(x))
    budget[0] -= 1
    if isinstance(x, (Tensor, types.ModuleType)):
        # (a Python module among the roots, ``import torch``: code, not
        # state; walking it touched deprecated attributes, which warn)
        return
    if isinstance(x, dict):
        items = list(x.items())
        kind, cont = "item", x
    elif isinstance(x, list):
        items = list(enumerate(x))
        kind, cont = "item", x
    elif isinstance(x, Optimizer):
        _walk(x.param_groups, depth, budget, out, seen)
        d = getattr(x, "__dict__", None)
        items = [] if d is None else [(k, v) for k, v in d.items() if k != "state"]
        kind, cont = "attr", x
    elif isinstance(x, Module) or (hasattr(x, "__dict__") and not isinstance(x, type)
                                   and not callable(x)):
        d = getattr(x, "__dict__", None)
        if type(d) is not dict:
            return
        items = [(k, v) for k, v in d.items()
                 if not (isinstance(x, Module) and k in ("_parameters", "_buffers"))]
        kind, cont = "attr", x
    else:
        return
    for k, v in items:
        if type(v) is SymScalar:
            out.append(Location(kind, cont, k, str(k)))
        elif type(v) is tuple and kind == "item" and isinstance(cont, dict):
            out += [Location("titem", cont, (k, i), f"{k}[{i}]")
                    for i, e in enumerate(v) if type(e) is SymScalar]
        elif not isinstance(v, (str, bytes, int, float, Tensor)):
            _walk(v, depth - 1, budget, out, seen)


class Lifted:
    """Lifting for one traced call: ``install`` before it, ``finish``
    after (see the module docstring)."""

    def __init__(self, locations, where):
        self.locations = [loc for _, loc in locations]
        self.paths = [p for p, _ in locations if p is not None]
        self.lifting = Lifting([loc.label for loc in self.locations], where)
        self.types: tuple = ()
        self.writes: list = []
        self.refusal: str | None = None
        #: the call has Python number arguments (guarded: part of its key)
        self.number_args = False
        self._math = patched_math()

    def install(self) -> None:
        vals = [loc.get() for loc in self.locations]
        self.types = _kinds(vals)
        for i, (loc, v) in enumerate(zip(self.locations, vals)):
            loc.set(self.lifting.input(i, v))
        ACTIVE[0] = self.lifting
        self._math.__enter__()

    def finish(self, roots, result, label: str) -> None:
        """After the call (also after one that raised): every SymScalar it
        left where the tracer looks becomes its number and a write-back."""
        self._math.__exit__(None, None, None)
        ACTIVE[0] = None
        found: list = []
        seen: set = set()
        budget = [4096]
        varying = None
        for loc in self.locations:
            if loc.kind == "arg":
                # (an argument: nothing to write back; the box lets go of
                # its SymScalar, which the leak check below counts)
                v = loc.get()
                if type(v) is SymScalar:
                    loc.set(v.value)
                continue
            v = loc.get()
            if type(v) is SymScalar:
                found.append(loc)
            elif (v == loc.after and type(v) is type(loc.after)) or self.lifting.guards \
                    or self.number_args:
                # A plain number: the same the call that found it changed
                # left there (a reset, ``self.n = 0``), one a guarded
                # decision on lifted numbers chose (SequentialLR's switch to
                # its next schedule), or possibly one computed from a number
                # argument (part of the trace's key: N-BEATS' lr from the
                # step index): a constant write-back.  (A number from
                # untraced state, the clock, in such a call would be stored
                # as this call's: not detected.)
                self.writes.append((loc, lambda vals, c=v: c))
            elif varying is None:
                varying = loc     # computed from nothing traced (time.time())
        v = None
        for obj in roots:
            _walk(obj, 5, budget, found, seen)
        roots.clear()      # (references the leak check below would count)
        obj = None
        done = []
        for loc in found:
            if any(loc.same(d) for d in done):
                continue
            v = loc.get()
            if type(v) is not SymScalar:
                continue
            done.append(loc)
            self.writes.append((loc, v.fn))
            loc.set(v.value)
        v = None           # (a reference the leak check below would count)
        lift = self.lifting
        if varying is not None:
            self.refusal = (f"{label} sets {varying.label} at every call to a number computed "
                            "from nothing it traces (the clock, a Python object's state): "
                            "compiled calls would store this call's number")
        elif _has_sym(result):
            self.refusal = (f"{label} returns a Python number computed from "
                            f"{', '.join(lift.labels)}, which it changes at every call; "
                            "compiled calls would return this call's number. Return a tensor")
        elif lift.concrete:
            text, why, where = lift.concrete[0]
            at = f" at {where[0]}:{where[1]}" if where else ""
            self.refusal = (f"{label} changes {', '.join(lift.labels)} at every call and uses "
                            f"{text} as a plain number ({why}){at}; compiled calls would repeat "
                            "this call's number. Keep that use outside the compiled function, "
                            "or pass the number as a tensor")
        else:
            for s in lift.made:
                # Held elsewhere than ``made`` and this loop: stored where the
                # write-backs above do not reach.
                if sys.getrefcount(s) > 3:
                    self.refusal = (f"{label} stores a Python number computed from "
                                    f"{', '.join(lift.labels)} (which it changes at every "
                                    "call) where compiled calls cannot update it")
                    break
        lift.made.clear()

    def guard(self) -> "LiftedGuard":
        g = LiftedGuard(self.locations, self.types,
                        [(fn, d, where) for fn, d, where in self.lifting.guards],
                        self.lifting.holders, self.writes)
        return g


def _kinds(vals) -> tuple:
    """int, float or the type itself, per value: what a lifted trace's
    guard requires of its numbers (a learning rate that was a Python float
    and is now a NumPy float64 computes the same)."""
    return tuple(int if isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                 else float if isinstance(v, (float, np.floating)) else type(v)
                 for v in vals)


def unsym(x, depth=4):
    """``x`` with the ``SymScalar``s in it (and in its tuples, lists,
    dicts, dataclasses and namespaces) made their numbers."""
    if type(x) is SymScalar:
        return x.value
    if depth and type(x) in (tuple, list):
        return type(x)(unsym(v, depth - 1) for v in x)
    if depth and type(x) is dict:
        return {k: unsym(v, depth - 1) for k, v in x.items()}
    if depth and (is_dataclass_instance(x) or type(x) in _PLAIN_STDLIB):
        # (made by the call: its fields are set in place, frozen or not)
        for k, v in list(vars(x).items()):
            if _has_sym(v, depth - 1):
                object.__setattr__(x, k, unsym(v, depth - 1))
    return x


def _has_sym(x, depth=4) -> bool:
    if type(x) is SymScalar:
        return True
    if depth and isinstance(x, (tuple, list)):
        return any(_has_sym(v, depth - 1) for v in x)
    if depth and isinstance(x, dict):
        return any(_has_sym(v, depth - 1) for v in x.values())
    if depth and (is_dataclass_instance(x) or type(x) in _PLAIN_STDLIB):
        # (a dataclass or namespace returned with a number computed from a
        # lifted one: its steps counter)
        return any(_has_sym(v, depth - 1) for v in vars(x).values())
    return False


class LiftedGuard:
    """The guard, refresh and commit of a lifted trace (module docstring)."""

    def __init__(self, locations, types, decisions, holders, writes):
        self.locations, self.types = locations, types
        self.decisions, self.holders, self.writes = decisions, holders, writes
        self._vals = None

    def _read(self):
        return [loc.get() for loc in self.locations]

    def __call__(self):
        try:
            vals = self._read()
        except (KeyError, IndexError, AttributeError, ValueError):
            return ("missing",)
        types = _kinds(vals)
        if types != self.types:
            return ("types", types)
        out = []
        for fn, _, _ in self.decisions:
            try:
                out.append(fn(vals))
            except (ArithmeticError, ValueError, TypeError):
                out.append(None)
        return (types, tuple(out))

    def value(self) -> tuple:
        """What ``__call__`` returned while tracing."""
        return (self.types, tuple(d for _, d, _ in self.decisions))

    def describe_change(self, old, now) -> str:
        names = ", ".join(loc.label for loc in self.locations)
        if now[0] in ("missing", "types"):
            return f"the lifted Python numbers {names} are gone or no longer numbers"
        for (fn, d, where), new in zip(self.decisions, now[1]):
            if new != d:
                at = f" at {where[0]}:{where[1]}" if where else ""
                return f"a decision on {names}{at} came out {new} (traced: {d})"
        return f"the lifted Python numbers {names} changed"

    def refresh(self) -> None:
        vals = self._vals = self._read()
        for h, fn in self.holders:
            h._data[()] = fn(vals)

    def commit(self) -> None:
        vals = self._vals if self._vals is not None else self._read()
        self._vals = None
        new = [(loc, fn(vals)) for loc, fn in self.writes]
        for loc, v in new:
            loc.set(v)
