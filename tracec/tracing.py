"""Recording an eager call into the tracec dialect.

While a ``Recording`` is active, every primitive the eager code applies is
also appended, as one op, to an xDSL ``func.func``; ``loss.backward()`` is
appended as one ``tracec.backward`` op (the eager backward still runs, its
own primitives unrecorded).  Each op carries the user's ``file:line:col``.

Invariants of a finished ``Trace``:
  * inputs: the user's tensor arguments, then every tensor that existed
    before the call and was read (parameters, optimizer buffers, the RNG
    state, ``.grad``), lifted to function arguments in first-use order;
  * outputs: the returned tensors, then the final value of every
    pre-existing tensor written in place, then every ``.grad`` written;
  * guards: what the recorded behaviour depended on (shapes, dtypes,
    requires_grad, ``.grad`` being None, Python state code reported).
Data-dependent Python control flow on a recorded tensor raises TraceError.
A complex tensor is recorded as its real ``[..., 2]`` representation
(``tracec.complex_trace``); complex arguments and results are refused.
"""
from __future__ import annotations

import gc
import os
import random
import re
import sys
import contextlib
import dataclasses
from dataclasses import dataclass, field

import numpy as np

from tracec import arg_arrays, arg_dict_writes, attr_replay, autograd, complex_trace, graph, ir, lifted_state
from tracec import dtypes as dt
from tracec.complex_ops import TRACED_OPS
from tracec.creation import GENERATOR_STATES
from tracec.nn.parameter import Parameter
from tracec import removable_handle, traced_tensor_hooks
from tracec.nn.modules.module import (ATTR_WRITES, BUFFER_WRITES, MODE_WRITES, PLAIN_WRITES, Module,
                                      replayed_token, tensor_leaves)
from tracec.mutation import frozen
from tracec.guards import EnvGuard, GlobalRNGs, _global_names as guards_global_names
from tracec.naming import argument_names, name_trace
from tracec.ops import elementwise as ew
from tracec.ops.core import PRIMITIVES, Aval
from tracec.utils._pytree import tree_leaves
from tracec.pytree import (ARRAY_STEP, KEYED_BY_IDENTITY, array_tensor, flatten, flatten_args,
                           is_dataclass_instance, path_name, plain_class, plain_classes, resolve)
from tracec import runtime_int, runtime_reads, symbolic, view_outputs
from tracec.symbolic import Sym
from tracec.sym_shapes import SymbolTable
from tracec.tensor import (CONCRETE_CHECKS, EPOCH, GRAD_HOOKS, GUARD_HOOKS,  # noqa: F401
                           RECORDERS, SYM_SHAPES)
from tracec.tensor import ITEM_HOOKS, LEAF_HOOKS_ADDED, OPAQUE_CALLS, Size, Tensor, scalar_key, weak_scalar
from tracec.methods_compat import POST_ACCUMULATE_HOOKS
from tracec.item_value import COMPARISONS, DrawValue, ItemValue, plain

__all__ = ["TraceError", "Trace", "Recording", "user_location", "record"]

#: Python's own ``random.random`` (the tracer puts ``Recording.py_random`` in
#: its place while recording).
_PY_RANDOM = random.random

# The package's own folder: frames in it are tracec's, not the user's.
_TRACEC_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARY_DIRS = tuple({os.path.dirname(os.__file__) + os.sep})
_POSITIONS: dict = {}
#: file name -> whether it is tracec's own (frames ``user_location`` skips)
_INSIDE: dict = {}


class TraceError(RuntimeError):
    """Something in a traced function cannot be compiled; the message names
    the user's file and line."""


def _program_location():
    """``user_location()``, skipping library frames too (NumPy's, the
    standard library's): the line of the program that made the call."""
    f = sys._getframe(1)
    while f is not None:
        fname = f.f_code.co_filename
        if not (fname.startswith(_TRACEC_DIR) or fname.startswith(_LIBRARY_DIRS)
                or "-packages" + os.sep in fname) or "/tests/" in fname:
            return (fname, f.f_lineno, 0)
        f = f.f_back
    return user_location()


def _size_values(e, symbols) -> str:
    """`` (sizes at this call: B=3, T=4)`` for the size symbols that the
    message of ``e``, raised while recording a symbolic trace, names (a
    shape check formats the symbolic sizes it compared: ``B*T``)."""
    if symbols is None:
        return ""
    msg = str(e)
    named = [f"{n}={v}" for n, v in symbols.hints.items()
             if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w.])", msg)]
    return f" (sizes at this call: {', '.join(named)})" if named else ""


def user_location():
    """``(file, line, col)`` of the innermost frame outside tracec."""
    f = sys._getframe(1)
    while f is not None:
        code = f.f_code
        fname = code.co_filename
        inside = _INSIDE.get(fname)
        if inside is None:
            inside = _INSIDE[fname] = fname.startswith(_TRACEC_DIR) and "/tests/" not in fname
        if not inside:
            pos = _POSITIONS.get(code)
            if pos is None:
                pos = _POSITIONS[code] = list(code.co_positions())
            i = f.f_lasti // 2
            col = pos[i][2] if 0 <= i < len(pos) and pos[i][2] is not None else 0
            return (fname, f.f_lineno, col)
        f = f.f_back
    return None


def _address(a) -> int:
    return a.__array_interface__["data"][0]


def format_location(loc) -> str:
    return f"{loc[0]}:{loc[1]}" if loc else "<unknown location>"


@dataclass
class InputSpec:
    """Where a function argument comes from at call time."""
    kind: str             # "arg" (a call argument), "state" (a tensor), "grad" (leaf.grad)
    source: object        # arg path (tracec.pytree), the Tensor, or the leaf Tensor
    shape: tuple
    dtype: object
    arg: object = None    # for "grad" of an argument leaf: the argument's path
    name: str = ""        # the user's name for it (tracec.naming): x, model.0.weight.grad
    requires_grad: bool = False  # for "state": its requires_grad when the call first read it


@dataclass
class OutputSpec:
    """Where a function result goes at call time."""
    kind: str             # "return", "write" (in place into a tensor), "grad",
    #                       "attr" (a module attribute set to the value), "attr_const"
    #                       (set to a Python object, no value: None, a tensor that
    #                       existed before the call), "attr_part" (a tensor of a
    #                       tuple set to an attribute) and "attr_seq" (no value:
    #                       sets the tuple of the "attr_part"s just before it,
    #                       target (module, name, parts): ("value", None),
    #                       ("arg", path), ("const", object) or ("seq", tuple or
    #                       list, parts) each)
    target: object = None  # the Tensor written, or the leaf whose .grad is set;
    #                        (module, name, dtype or the object) for "attr*"
    inplace: bool = False  # for "grad": write into the existing .grad tensor
    arg: object = None     # for "write" into an argument, or the "grad" of an argument
    #                        leaf: the argument's path (tracec.pytree);
    #                        the call's own argument is written, not the traced one
    name: str = ""         # the user's name for it (tracec.naming): return[0], opt.state[...]
    layout: object = None  # for "write": the tensor's array after an in-place shape
    #                        change (view_outputs.relayout), None if it kept its own


@dataclass
class Trace:
    module: object
    inputs: list
    outputs: list
    template: object                      # the returned structure, tensors as indices
    guards: list = field(default_factory=list)  # (snapshot fn, value)
    grad_guards: list = field(default_factory=list)  # (leaf, had a grad at entry)
    grad_mode: bool = True
    #: The indices (among the traced function's results) of the tensors the
    #: call returns or sets as a module attribute that were computed in the
    #: call and require grad, when no backward ran inside: eager code could
    #: backpropagate through them later (compiled_backward gives them a node).
    returns_grad: tuple = ()
    #: ``(path, tensor)``: arguments that were also reached as state (a
    #: module's parameter passed in): reused only for that very object.
    arg_identity: list = field(default_factory=list)
    #: The Python state the call itself changed (a side effect compiled calls
    #: would not repeat), or None.
    mutated: str | None = None
    mutated_root: str | None = None   # which root (a global's name, ...) changed
    #: A symbolic trace's symbols and size guards (``tracec.sym_shapes``), or None.
    symbolic: object = None
    #: ``id(tensor) -> name`` of the state the function reaches (tracec.naming).
    names: dict = field(default_factory=dict)
    #: Notes of a trace whose symbolic sizes were all specialized (its
    #: ``symbolic`` then None): for ``cache_info().notes``.
    size_notes: list = field(default_factory=list)
    #: The module attribute the call set to a tuple holding a tensor that
    #: requires grad with no backward inside (a backward outside would need
    #: its graph), or None.
    attr_needs_grad: str | None = None
    #: ``[(snapshot path, Location)]`` when the numbers there are all the
    #: Python state the call changed (a retrace may lift them), else None.
    scalar_changes: list | None = None
    #: The Locations of the numbers this trace lifted (None: none).
    lifted: list | None = None
    #: ``lifted_state.optimizer_numbers`` before the call: a later call
    #: finding them changed (an lr set between calls) lifts them.
    optimizer_numbers: list = field(default_factory=list)
    #: How many ``random.random()`` numbers the call drew, and the decisions
    #: it took on them: ``(index, op, other, result, where)`` each.  Compiled
    #: calls draw as many and check the decisions (``Entry.run``).
    py_draws: int = 0
    py_draw_guards: tuple = ()
    #: ``[(id of the tensor, "int()" / "item()", where)]``: integers the
    #: compiled code reads from tensors at run time (``tracec.runtime_int``)
    runtime_reads: list = field(default_factory=list)
    #: where such a number was specialized instead (a guard), and why
    runtime_notes: list = field(default_factory=list)
    #: state inputs read through a module attribute the call sets
    #: (``Recording.attr_state``)
    attr_state: list = field(default_factory=list)


#: The most elements of an integer state tensor whose value a trace may
#: specialize on (``Recording._guard_value``).
GUARDED_VALUE_MAX = 64

#: The reads of a whole integer or bool tensor a trace speculates on
#: (``Recording.on_concrete``) when it is an argument (or a view of one) of at most
#: ``GUARDED_VALUE_MAX`` elements.
_WHOLE_READS = ("numpy()", "tolist()", "masked_select", "boolean-mask indexing")


class TensorValue:
    """Guard snapshot: the value of a small integer or bool state tensor that
    Python read while the call was traced (its number; or its shape and
    values, for more than one element)."""

    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t

    def __call__(self):
        d = self.t._data
        if d.size == 1:
            return d.item()
        return (d.shape, tuple(d.reshape(-1).tolist()))

    def __eq__(self, other):
        return isinstance(other, TensorValue) and other.t is self.t

    def __hash__(self):
        return id(self.t)

    def describe_change(self, old, new) -> str:
        return (f"the value of a {self.t.dtype.name}{list(self.t.shape)} tensor read by Python "
                f"changed: {old} -> {new}")


_VIEW_OPS = frozenset(("reshape", "transpose", "slice", "broadcast_to"))


def _reader_of_storage(v) -> str | None:
    """The name of a recorded op that read the storage SSA value ``v`` lives
    in (eagerly a view shares it: walking up through view ops, any other
    reader of the values they came from), or of the op that made that
    storage if its gradient reads its own output (tanh, exp, sigmoid);
    None if neither (stop_gradient reads, an alias' own, do not count)."""
    via = None
    while True:
        for u in v.uses:
            if u.operation is not via and not u.operation.name.endswith("stop_gradient"):
                return u.operation.name
        owner = getattr(v, "owner", None)
        name = getattr(owner, "name", "").rpartition(".")[2]
        if name in _VIEW_OPS:
            via, v = owner, owner.operands[0]
            continue
        prim = PRIMITIVES.get(name)
        return owner.name if prim is not None and prim.save_out else None


class Recording:
    """One trace in progress (see the module docstring)."""

    def __init__(self, name: str, fallback: bool = False, symbols: SymbolTable | None = None):
        self.fallback = fallback
        self.name = name
        self.label = name     # ``name (file:line)`` when recording a function (record)
        self.arg_names = None  # its parameters' names, for messages
        self.symbols = symbols
        self.poisoned = None
        #: ``(value, decision, location)`` of each ``bool()`` the call took
        #: on a traced one-element tensor: speculated (see on_concrete).
        self.data_guards: list = []
        self.func = ir.new_function(name, [])
        self.block = self.func.body.block
        self.env: dict = {}          # id(tensor) -> (tensor, SSAValue)
        # id(alias) -> (alias, its and its base's version counters when its
        # value was taken): a detach() / .data alias read after a write to
        # its storage is taken from its base again
        self.alias_seen: dict = {}
        self.inputs: list = []
        self.consts: set = set()
        self.written: dict = {}      # id -> pre-existing tensor written in place
        #: id -> the array an input tensor held when the trace first read it
        #: (an in-place shape change, ``unsqueeze_``, gives it another one)
        self.entry_data: dict = {}
        self.arg_position: dict = {}  # id of an argument tensor -> its position
        self.had_backward = False     # a backward ran inside the call
        #: returned views rebuilt by the caller (record(views=True), view_outputs)
        self.return_views = False
        self.grad_entry: dict = {}   # id(leaf) -> (leaf, .grad at first read)
        self.grad_written: dict = {}
        self.entry_grad_ids: dict = {}  # id(entry grad tensor) -> leaf
        self.guards: list = []
        self._guard_seen: set = set()
        self.suspended = 0
        self.scalars: dict = {}
        # id -> tensor sharing memory with a complex view (view_as_real, .real, ...):
        # an in-place write to one would change the other unseen by the trace.
        self.component_shared: dict = {}
        #: ``id(t) -> [u, ...]``: each ``u`` is ``view_as_real(t)`` or
        #: ``view_as_complex(t)`` (or ``t`` of ``u``), made in the call: one
        #: representation for all (``repr_group``)
        self.same_repr: dict = {}
        #: real/complex views made in the call (.real, .imag, view_as_real,
        #: view_as_complex): they share memory with no view chain, so a write
        #: to that memory the trace does not carry to them (``same_repr``)
        #: makes what was recorded of them stale: ids in ``stale_components``
        self.component_views: list = []
        self.stale_components: set = set()
        # (id(module), name) -> (module, name, value): plain module attributes the
        # call set to a tensor or None; compiled calls set them likewise.
        self.attr_writes: dict = {}
        # (id(module), name) -> (module, name, what it held when the call first set it)
        self.attr_entry: dict = {}
        self._attr_state = None
        self.result_ids: set = set()     # ids of the tensors the call returned
        # (id(module), name) -> (module, name, the buffer's tensor when the call
        # first replaced it): see settle_buffer_writes
        self.buffer_writes: dict = {}
        # id(module) -> [module, its training flag when the call began, the last
        # one train() set]: compiled calls set the flag (no side effect to refuse)
        self.mode_writes: dict = {}
        self.plain_writes: dict = {}
        # parameters whose requires_grad the call set: id -> (tensor, the flag it found)
        self.rg_writes: dict = {}
        # why a backward from now on cannot be compiled (_check_alias_write), or None
        self.dirty_alias_write = None
        # a ``.data =`` replaced a tensor some recorded op had read
        # (on_primitive, "data_rebind"): a later backward is recorded from the eager
        # engine's run, whose VJPs read the saved tensors' new values
        self.data_rebound = False
        # [(the columns tensor a recorded convolution's matmul read, a function
        # computing them from its input as it is now)]: see refresh_conv_columns
        self.conv_columns: list = []
        #: ``ItemValue``s handed out by item() (numbers the call may return)
        self.items: list = []
        #: a NumPy array argument's stand-in was returned (tracec.arg_arrays)
        self.arrays_returned: list = []
        #: integers read from tensors at run time (``tracec.runtime_int``)
        self.runtime = runtime_reads.Reader(self)
        self.py_draws = 0             # random.random() calls recorded
        self.py_draw_guards: list = []
        #: names of the opaque calls (torch.library custom ops) running now
        self.opaque: list = []
        EPOCH[0] += 1
        self.epoch = EPOCH[0]

    def fail(self, msg: str) -> None:
        """Refuse to compile: raise, or (fallback) stop recording and let the
        call finish eagerly.  Inside an opaque call (a custom op's body, which
        PyTorch's compilers never trace either) the call always finishes
        eagerly: the op is the user's to run in Python, not an error."""
        if self.opaque:
            msg = (f"{self.opaque[-1]} computes in Python on tensor data, which "
                   f"compiled native code cannot call back into ({msg.split('. ')[0]}); "
                   "this signature runs eagerly")
        elif not self.fallback:
            raise TraceError(msg)
        if self.poisoned is None:
            self.poisoned = msg
        self.suspended += 1 << 20

    # --- values ------------------------------------------------------------

    def array_input(self, watch) -> Tensor:
        """The input tensor of a NumPy array argument the call converts
        (``tracec.arg_arrays.Watch.tensor``): read at each call from that
        call's array (``pytree.ARRAY_STEP``)."""
        if watch.parent is not None:
            # converted in the call (a.astype(np.float32)): a copy, cast
            return ew.cast(watch.parent.tensor(), dt.from_numpy_dtype(watch.array.dtype))
        t = array_tensor(watch.array)
        t._birth = self.epoch - 1    # (an argument: a write to it is a write to the array)
        self.add_arg(t, tuple(watch.path) + (ARRAY_STEP,))
        return t

    def add_arg(self, t: Tensor, position):
        if t.dtype.category == 3:
            where = path_name(position, self.arg_names)
            return self.fail(f"tracec.compile({self.label}): argument {where} is a "
                             f"{t.dtype} tensor; complex values are eager only (the IR has no "
                             "complex type). Call the function eagerly, or use "
                             "tracec.compile(fn, fallback=\"eager\").")
        shape = tuple(t._data.shape) if self.symbols is None else \
            self.symbols.input_shape(position, t, len(self.inputs))
        arg = self.block.insert_arg(ir.tensor_type(shape, t.dtype), len(self.block.args))
        self.inputs.append(InputSpec("arg", position, shape, t.dtype))
        self.entry_data[id(t)] = t._data
        self.env[id(t)] = (t, arg)
        self.arg_position.setdefault(id(t), position)
        return arg

    def _stale_component_views(self, out: Tensor, group) -> None:
        """``out`` was written (``group`` with it): the real/complex views
        sharing its memory that the write did not reach are stale."""
        reached = {id(out)} | {id(u) for u in group}
        for v in self.component_views:
            if id(v) not in reached and np.may_share_memory(v._data, out._data):
                self.stale_components.add(id(v))

    def repr_group(self, t: Tensor) -> list:
        """The tensors other than ``t`` of ``t``'s representation
        (``same_repr``, followed transitively)."""
        seen, todo, out = {id(t)}, [t], []
        while todo:
            for u in self.same_repr.get(id(todo.pop()), ()):
                if id(u) not in seen:
                    seen.add(id(u))
                    todo.append(u)
                    out.append(u)
        return out

    def value_of(self, t: Tensor):
        if t._view_chain and t._birth == self.epoch and t._view_version != t._vbox[0]:
            # A view whose storage was written through its root or another
            # view since it was recorded (read here without an op's check, as
            # a returned value): re-derived from its root, recorded.
            t._refresh_view()
        e = self.env.get(id(t))
        if e is not None and e[0] is t:
            if self.stale_components and id(t) in self.stale_components:
                return self.fail(f"{format_location(user_location())}: a real/complex view "
                                 "(.real, .imag, view_as_real, view_as_complex) read after the "
                                 "tensor it views was written in place: tracec.compile does "
                                 "not replay such writes; take the view after the write, or "
                                 "clone() it before")
            seen = self.alias_seen.get(id(t))
            if seen is None or seen[0] is not t or t.requires_grad or \
                    seen[1:] == (t._vbox[0], t._base._vbox[0]):
                return e[1]
            # An alias (detach(), .data) whose storage was written, through
            # its base or another view, since its value was taken: its value
            # is its base's current one, taken again below.
        if t._birth == self.epoch and t._base is not None and t._view_chain is not None:
            # An alias made during the call (detach(), .data): a view of its base.
            base = t._base
            if base._view_chain and base._birth == self.epoch and \
                    base._view_version != base._vbox[0]:
                base._refresh_view()     # (a detach() of a stale view: the view first)
            v = self.value_of(base)
            if not t._view_chain:
                # (.data has its own version counter: the base's is kept too)
                self.alias_seen[id(t)] = (t, t._vbox[0], base._vbox[0])
            if not t._view_chain:
                # detach() / .data: the same value with no gradient through it
                # (autodiff follows data flow, so the IR must say so).
                op = ir.make_op("stop_gradient", [v], {}, v.type, loc=user_location())
                self.block.add_op(op)
                v = op.results[0]
            if t.dtype.category == 3:
                return self._complex_view_chain(t, v)
            if runtime_int.SPECIALIZE_ON_REPLAY:
                runtime_int.view_replayed(t._view_chain)
            for prim, params, aval in t._view_chain:
                if getattr(prim, "composite", False):     # (composite_views' step)
                    with complex_trace.emitting(self, user_location()):
                        v = prim.bind(complex_trace.Value(v), **params).ssa
                    continue
                shape = ir.shape_of(v.type) if self.symbols is None else \
                    self.symbols.shape_of_value(v)
                out = prim.abstract_eval(Aval(shape, ir.dtype_of(v.type)), **params)
                op = ir.make_op(prim.name, [v], params, ir.tensor_type(out.shape, out.dtype),
                                loc=user_location())
                self.block.add_op(op)
                v = op.results[0]
            self.env[id(t)] = (t, v)
            return v
        if t.dtype.category == 3:
            return self._complex_input(t)
        if t._birth == self.epoch:
            # Made during the call by no recorded op: a constant.
            loc = user_location()
            ops = _uniform_constant(t, loc) or [ir.constant(t._data, t.dtype, loc=loc)]
            for op in ops:
                self.block.add_op(op)
            self.consts.add(id(t))
            self.env[id(t)] = (t, ops[-1].results[0])
            return ops[-1].results[0]
        leaf = self.entry_grad_ids.get(id(t))
        shape = tuple(t._data.shape)
        if leaf is not None and self.symbols is not None and id(leaf) in self.env:
            shape = self.tensor_shape(leaf) or shape   # an argument's .grad: its sizes
        spec = InputSpec("grad", leaf, shape, t.dtype,
                         self.arg_position.get(id(leaf))) if leaf is not None \
            else InputSpec("state", t, shape, t.dtype,
                           requires_grad=self.rg_writes.get(id(t), (None, t.requires_grad))[1])
        arg = self.block.insert_arg(ir.tensor_type(shape, t.dtype), len(self.block.args))
        self.inputs.append(spec)
        self.entry_data[id(t)] = t._data
        self.env[id(t)] = (t, arg)
        return arg

    def _new_layout(self, t: Tensor):
        """``view_outputs.relayout``'s description of ``t``'s array now if
        an in-place shape change (``unsqueeze_``, ``t_``, ``resize_``,
        ``as_strided_``) replaced the one the call found, else None; a
        symbolic trace specializes its sizes then."""
        a0, a1 = self.entry_data.get(id(t)), t._data
        if a0 is None or a1 is a0 or (a1.shape == a0.shape and a1.strides == a0.strides
                                      and _address(a1) == _address(a0)):
            return None
        if self.symbols is not None:
            for name, hint in list(self.symbols.hints.items()):
                self.symbols.on_decision("specialize", symbolic.symbol(name, hint), "==",
                                         hint, hint, user_location())
        return view_outputs.layout_of(a1, a0)

    # --- returned views (tracec.view_outputs) -------------------------------

    def _view_template(self, x, flatten_tensor, memo, cells):
        """``("view", cell, how)`` for ``x``, a view or alias made in the
        call (``tracec.view_outputs``), or None where it is returned as a
        value of its own.  ``cell[0]`` is ``("pending", base)`` for a view of
        a tensor the call made: ``finish`` points it at that tensor's
        template if the call returns it too, else makes ``x`` a value."""
        base, chain = x._base, x._view_chain
        if chain and any(getattr(step[0], "composite", False) for step in chain):
            chain = None     # (composite_views': rebuilt as the strided alias it is)
        if chain:
            if not all(self.runtime.offsets_specialized(step[1]) for step in chain):
                # a view at an offset read at run time (runtime_int): each
                # call computes its values there; not rebuilt as a view
                return None
            steps = [("prim", prim, params) for prim, params, _ in chain]
        elif x.dtype is base.dtype and x._data.shape == base._data.shape and \
                x._data.strides == base._data.strides and \
                _address(x._data) == _address(base._data):
            steps = [("detach",) if x._vbox is base._vbox else ("data",)]
        else:
            # an alias of another layout made by no recorded view op (as
            # strided_views._alias): that very layout, at static sizes
            if self.symbols is not None:
                for name, hint in list(self.symbols.hints.items()):
                    self.symbols.on_decision("specialize", symbolic.symbol(name, hint), "==",
                                             hint, hint, user_location())
            steps = [("strided", x._data.shape, x._data.strides,
                      _address(x._data) - _address(base._data), x.dtype)]
        btpl = None
        if chain:
            # an argument that is itself a view of ``base`` (the caller passed
            # x[1:]): the view is of this call's argument
            best = 0
            for t, _ in self.env.values():
                pos = self.arg_position.get(id(t))
                c = t._view_chain
                if pos is not None and t._base is base and c and best < len(c) <= len(chain) \
                        and all(a is b for a, b in zip(c, chain)):
                    best, btpl = len(c), ("arg", pos)
            steps = steps[best:]
        if btpl is not None:
            pass
        elif base._birth != self.epoch:
            # an argument, or state (a parameter, a buffer): that object
            btpl = ("arg", self.arg_position[id(base)]) if id(base) in self.arg_position \
                else ("object", base)
        elif base._base is not None and base._view_chain is not None:
            btpl = memo.get(id(base))      # a detach() alias made in the call
            if btpl is None:
                btpl = memo[id(base)] = flatten_tensor(base)
        else:
            btpl = memo.get(id(base)) or ("pending", base)
        cell = [btpl, tuple(steps), ()]
        cells.append((x, cell))
        node = x._node.name() if x.requires_grad and x._node is not None else None
        return ("view", cell, ("_no_grad_view" in x.__dict__, node))

    def _view_sizes(self, cells, env, sym_info) -> None:
        """A symbolic trace's returned views: the size equalities ``env``
        applied to their steps, and where each call reads the sizes left."""
        sources = {}
        for index, d, name in sym_info.sources:
            spec = self.inputs[index]
            if spec.kind == "arg":
                sources.setdefault(name, (spec.source, d))
        for x, cell in cells:
            if cell[1] is None or not view_outputs.has_sizes(cell[1]):
                continue
            if env:
                cell[1] = view_outputs.substitute_steps(cell[1], env)
            names = view_outputs.free_sizes(cell[1])
            missing = names - set(sources)
            if missing:
                raise TraceError(f"tracec.compile({self.label}): a returned view's sizes "
                                 f"({', '.join(sorted(missing))}) are no argument's size")
            cell[2] = tuple((n, *sources[n]) for n in sorted(names))

    def _complex_input(self, t):
        return complex_trace.input_value(self, t, user_location())

    def _complex_view_chain(self, t, v):
        return complex_trace.view_chain(self, t, v, user_location())

    def scalar(self, v, dtype):
        if isinstance(v, Sym):   # a symbolic size as an operand: its value at run time
            key = ("sym", str(v), dtype.name)
            ssa = self.scalars.get(key)
            if ssa is None:
                op = ir.make_op("full", [], {"value": v, "shape": (), "dtype": dtype},
                                ((), dtype), loc=user_location())
                self.block.add_op(op)
                ssa = self.scalars[key] = op.results[0]
            return ssa
        key = scalar_key(v, dtype)
        ssa = self.scalars.get(key)
        if ssa is None:
            # The array the eager op used (an integer wrapped to the dtype's range).
            op = ir.constant(weak_scalar(v, dtype), dtype, loc=user_location())
            self.block.add_op(op)
            ssa = self.scalars[key] = op.results[0]
        return ssa

    # --- hooks ---------------------------------------------------------------

    def on_primitive(self, prim, args, params, out):
        if self.suspended:
            return
        if prim is None and "requires_grad_set" in params:
            if out._birth != self.epoch:   # (a parameter made by the call starts there)
                self.rg_writes.setdefault(id(out), (out, params["requires_grad_set"]))
            return
        if prim is None and "alias_write" in params:
            return self._check_alias_write(out, params["alias_write"])
        if prim is None and "data_rebind" in params:
            e = self.env.get(id(out))
            if e is not None and e[0] is out and _reader_of_storage(e[1]):
                self.data_rebound = True
            return
        if prim is None and "custom_vjp" in params:
            # a user Function's result and its backward, recorded at trace
            # time (autograd._record_vjp): its gradient is that backward
            y, xs, grads, seed = args
            op = ir.CustomVJPOp(self.value_of(y), [self.value_of(x) for x in xs],
                                [self.value_of(g) for g in grads], self.value_of(seed),
                                loc=user_location())
            self.block.add_op(op)
            self.env[id(out)] = (out, op.results[0])
            return
        if prim is None and "conv_columns" in params:
            self.conv_columns.append((args[0], out, params["conv_columns"]))
            return
        if prim is None and "alias_write_input" in params:
            return self._check_conv_input_write(out, params["alias_write_input"])
        if prim is None:  # ``out`` now holds the value of args[0] (an in-place write)
            group = self.repr_group(out) if params.get("inplace") != "view" else ()
            if any(t._view_chain for t in group):
                # (a view_as_complex of a slice or reshape: the write would
                # have to reach that view's root too)
                return self.fail(
                    f"{format_location(user_location())}: an in-place write through "
                    "view_as_real/view_as_complex of a view of another tensor cannot be "
                    "compiled: the trace would not see it reach that tensor. clone() the "
                    "view before writing to it, or write to the tensor itself.")
            for other in group:
                # a complex tensor and its view_as_real: one representation, all written
                self._write(other, args[0])
                self.stale_components.discard(id(other))
            if self.component_views and params.get("inplace") != "view":
                self._stale_component_views(out, group)
            if not group and id(out) in self.component_shared and \
                    params.get("inplace") != "view":
                return self.fail(
                    f"{format_location(user_location())}: an in-place write to a tensor that "
                    "shares memory with a complex view of it (view_as_real, view_as_complex, "
                    ".real, .imag) cannot be compiled: the trace would not see the write "
                    "through the other view. clone() the view before writing to it.")
            self._write(out, args[0])
            self.stale_components.discard(id(out))
            return
        ref = None
        for a in args:
            if isinstance(a, Tensor) and (ref is None or a.dtype.category > ref.category):
                ref = a.dtype
        if out.dtype.category == 3 or (ref is not None and ref.category == 3):
            return self._complex_primitive(prim, args, params, out)
        operands = [self.value_of(a) if isinstance(a, Tensor) else self.scalar(a, ref)
                    for a in args]
        loc = user_location()
        try:
            shape = out._data.shape if self.symbols is None else \
                self.symbols.result_shape(prim, args, params, operands, out)
            if prim.eager_params and params:
                params = {k: v for k, v in params.items() if k not in prim.eager_params}
            op = ir.make_op(prim.name, operands, params, ir.tensor_type(shape, out.dtype),
                            loc=loc)
        except Exception as e:  # an op the dialect cannot express
            return self.fail(f"{format_location(loc)}: cannot record {prim.name}: {e}")
        self.block.add_op(op)
        value = op.results[0]
        if not out.requires_grad and prim.vjp is not None and out.dtype.is_floating_point \
                and any(isinstance(a, Tensor) and a.requires_grad for a in args):
            # Computed from a tensor that requires grad with grad mode off
            # (spectral_norm's power iteration ``with no_grad(): u.copy_(W @ v)``):
            # eagerly a constant, so no gradient may flow back through it
            # (autodiff follows data flow, so the IR must say so).
            cut = ir.make_op("stop_gradient", [value], {}, value.type, loc=loc)
            self.block.add_op(cut)
            value = cut.results[0]
        self.env[id(out)] = (out, value)
        if self.symbols is None and prim.kind != "random" and self._all_consts(args):
            # Computed from constants only (SimCLR's ``~torch.eye(n, dtype=bool)``
            # mask): the same value at every call this trace serves, so Python
            # may read it (boolean-mask indexing by it is a fixed gather).
            self.consts.add(id(out))
        else:
            self.consts.discard(id(out))   # e.g. a constant updated in place by a traced value

    def _check_alias_write(self, t: Tensor, op: str) -> None:
        """``t`` (requires grad, not a leaf) is about to be written through a
        ``.data`` / ``detach()`` alias.  Eagerly the ops that already read
        ``t`` saved it by reference, so their gradients read the written
        values (Tacotron2's parse_output masks the mel frames the postnet's
        first convolution read); the IR's gradient would read the old ones.
        So a write to a value that some recorded op (other than the alias'
        own stop_gradient) already read, followed by a backward, cannot be
        compiled (``on_backward`` refuses it)."""
        e = self.env.get(id(t))
        if e is None or e[0] is not t or self.dirty_alias_write:
            return
        reader = _reader_of_storage(e[1])
        if reader:
            # (refused at the next backward: before it, no gradient reads it)
            self.dirty_alias_write = (
                f"{format_location(user_location())}: {op} through .data or detach() writes "
                f"a tensor after an op read it ({reader}), then a backward runs: "
                "that op's gradient reads the written values eagerly but would read the old "
                "ones compiled")

    def _check_conv_input_write(self, t: Tensor, op: str) -> None:
        """``t`` (requiring no grad) is about to be written through a
        ``.data`` / ``detach()`` alias: if a recorded convolution read it
        for its weight gradient, a later backward cannot be compiled (the
        compiled gradient would read the old columns)."""
        if self.dirty_alias_write:
            return
        for x, _, _ in self.conv_columns:
            if np.shares_memory(x._data, t._data):
                self.dirty_alias_write = (
                    f"{format_location(user_location())}: {op} through .data or detach() "
                    "writes the input of a convolution whose weight gradient reads it, then "
                    "a backward runs: eagerly that gradient reads the written values, "
                    "compiled it would read the old ones")
                return

    def refresh_conv_columns(self) -> None:
        """The trace is refused over a write through ``.data`` after a read,
        and this call finishes eagerly: make the recorded convolutions'
        columns (a copy of their padded input, which the eager weight
        gradient reads) what they are from the input now, as PyTorch's
        convolution, which saves its input by reference, would read them."""
        for _, cols, compute in self.conv_columns:
            now = compute()
            if not np.array_equal(now, cols._data, equal_nan=True):
                np.copyto(cols._data, now)

    def _write(self, out, src):
        """``out`` now holds ``src``'s value (an in-place write)."""
        ssa = self.value_of(src)
        if out.dtype.category == 3 and out._birth != self.epoch:
            # complex state: written back through its real view
            self.env[id(out)] = (out, ssa)
            out = complex_trace.real_view(out)
        if out._birth != self.epoch:
            self.written[id(out)] = out
        if id(src) in self.consts:
            # now holding a constant (``torch.IntTensor([T] * n)``, the
            # legacy constructor's copy): Python may read it
            self.consts.add(id(out))
        else:
            self.consts.discard(id(out))   # a constant overwritten by a traced value
        self.env[id(out)] = (out, ssa)

    def _all_consts(self, args) -> bool:
        # (no tensor operand: a factory such as iota or full, Transformer-XL's
        # triu(new_ones(...)) mask)
        tensors = [a for a in args if isinstance(a, Tensor)]
        return all(id(a) in self.consts and self.env.get(id(a), (None,))[0] is a
                                     for a in tensors)

    def _complex_primitive(self, prim, args, params, out):
        loc = user_location()
        return complex_trace.record_primitive(self, prim, args, params, out,
                                              format_location(loc), loc)

    def on_traced_op(self, name, args, out):
        """A complex op outside the primitive set (``tracec.complex_ops``)."""
        if not self.suspended:
            loc = user_location()
            complex_trace.record_op(self, name, args, out, format_location(loc), loc)

    def on_attr_write(self, module, name, value):
        if self.suspended:
            return
        if any(isinstance(v, Tensor) and v.dtype.category == 3
               for v in (tensor_leaves(value) or () if type(value) is tuple else (value,))):
            return self.fail(f"{format_location(user_location())}: setting {name} to a complex "
                             "tensor inside a compiled function is not supported")
        self.attr_entry.setdefault((id(module), name), (module, name, module.__dict__.get(name)))
        self.attr_writes[(id(module), name)] = (module, name, value)
        # its guard token: whether it is None (tracec.nn.modules.module.ReplayedAttr)
        module.__dict__.setdefault("_tracec_replayed", set()).add(name)

    def on_buffer_write(self, module, name, old):
        if not self.suspended:
            self.buffer_writes.setdefault((id(module), name), (module, name, old))

    def settle_buffer_writes(self):
        """Registered buffers the call replaced by a new tensor (DINO's
        ``self.center = self.center * m + c * (1 - m)``): the buffer's own
        tensor gets the new value in place and stays the buffer, so compiled
        calls write it as they write any state, and the module's guard (its
        buffers' identities) holds.  Only a tensor the call made, of the
        buffer's shape and dtype, outside autograd: anything else stays a
        side effect the guards refuse.  Unlike eager, ``module.name`` keeps
        its identity across calls (a reference taken before a call sees the
        new value)."""
        for module, name, old in self.buffer_writes.values():
            new = module._buffers.get(name)
            if new is old or not isinstance(new, Tensor) or new._birth != self.epoch \
                    or id(new) in self.arg_position or new.shape != old.shape \
                    or new.dtype != old.dtype or new.requires_grad or old.requires_grad:
                continue
            with graph.no_grad():
                old.copy_(new)
            module._buffers[name] = old

    def on_mode_write(self, module, mode):
        if not self.suspended:
            self.mode_writes.setdefault(id(module), [module, module.training, mode])[2] = mode

    def on_plain_write(self, module, name, old):
        if not self.suspended:
            self.plain_writes.setdefault((id(module), name), (module, name, old))

    def restored_guards(self):
        """The module guards, with the value a plain attribute held when
        the call began where the call set it and put the same value back
        (SAM's bypass_bn: a batch norm's momentum 0 -> 0.1 for one forward ->
        0): the module's snapshot, taken when the call first called it, may
        hold the value set for that forward, but what the trace assumes is
        the state the call began with, which it leaves as it found it."""
        entry: dict = {}
        for module, name, old in self.plain_writes.values():
            now = module.__dict__.get(name, old)
            if type(now) is type(old) and now == old and type(old) in (bool, int, float, str):
                entry.setdefault(id(module), {})[name] = old
        if not entry:
            return
        out = []
        for snap, value in self.guards:
            names = entry.get(id(getattr(snap, "__self__", None)))
            if names and getattr(snap, "__name__", "") == "mode_and_tensors":
                p, b, attrs = value
                value = (p, b, [(a[0], names[a[0]]) if a[0] in names and len(a) == 2 else a
                                for a in attrs])
            out.append((snap, value))
        self.guards = out

    def entry_modes(self, which: int) -> None:
        """Set the modules train()/eval() changed to their flag when the call
        began (``which`` 1) or the one the call left (2), bypassing hooks."""
        for entry in self.mode_writes.values():
            entry[0].__dict__["training"] = entry[which]

    def _mode_guards(self):
        """The module guards, a module's flag in them the one the call began
        with (the call itself set the one its code saw)."""
        out = []
        for snap, value in self.guards:
            owner = getattr(snap, "__self__", None)
            entry = self.mode_writes.get(id(owner))
            if entry is not None and getattr(snap, "__name__", "") == "mode_and_tensors":
                p, b, attrs = value
                value = (p, b, [("training", entry[1]) if a[0] == "training" else a
                                for a in attrs])
            out.append((snap, value))
        self.guards = out

    def _coarsen_guards(self):
        mods = attr_replay.modules(self.attr_writes)
        if mods:
            self.guards = attr_replay.coarsen_module_guards(self.guards, mods, self.state_read())

    def state_read(self) -> set:
        """Ids of the state tensors the trace read by identity (not those
        ``attr_state`` reads through their module attribute)."""
        carried = {id(self.inputs[i].source) for i, *_ in self.attr_state()}
        return {id(spec.source) for spec in self.inputs
                if spec.kind == "state" and id(spec.source) not in carried}

    def attr_state(self) -> list:
        """``[(index in inputs, module, name, index in its tuple or None)]``:
        state inputs that read a tensor a module attribute held when the call
        began, which the call set again (an RNN tagger's hidden state kept as
        ``self.hidden = tuple(v.detach() for v in h)``).  Compiled calls read
        that call's tensor there (``Entry.failed_guard`` rebinds the input),
        so the trace serves every later call instead of one.  Not in a
        symbolic trace, nor a tensor written in place or requiring grad."""
        if self._attr_state is not None:
            return self._attr_state
        out: list = []
        # (a tensor the call stores elsewhere or returns as itself, such as
        # ``self.prev = self.cur``, would be replayed as the traced object)
        if self.result_ids is None:
            self._attr_state = out
            return out
        kept = set(self.result_ids)
        for _, _, value in self.attr_writes.values():
            kept.update(id(t) for t in (tensor_leaves(value) or ()) if t is not None)
        if self.symbols is None:
            where = {}
            for module, name, old in self.attr_entry.values():
                items = old if type(old) is tuple else (old,)
                for j, t in enumerate(items):
                    if isinstance(t, Tensor):
                        where[id(t)] = (module, name, j if type(old) is tuple else None)
            for i, spec in enumerate(self.inputs):
                w = where.get(id(spec.source)) if spec.kind == "state" else None
                if w is not None and id(spec.source) not in self.written \
                        and id(spec.source) not in kept and not spec.source.requires_grad:
                    out.append((i,) + w)
        self._attr_state = out
        return out

    def on_item(self, t, caller):
        """``t.item()`` called by the user's code on a recorded one-element
        floating tensor, fallback off: an ``ItemValue`` the call may return
        (``tracec.item_value``); None leaves item() to ``on_concrete``."""
        if not self.suspended and t.dtype.category == 1:
            # a queue pointer: read at run time (or None: on_concrete decides)
            return runtime_reads.on_item(self, t, caller)
        if self.suspended or t.dtype.category != 2 or type(t._data) is not np.ndarray:
            return None
        fname = caller.f_code.co_filename
        if fname.startswith(_TRACEC_DIR) and "/tests/" not in fname:
            return None         # tracec's own code (float(t), format): refused as before
        while True:
            e = self.env.get(id(t))
            if (e is None or e[0] is not t) and t._birth == self.epoch and t._base is not None:
                t = t._base      # loss.detach().item(), loss.data.item()
                continue
            break
        if e is None or e[0] is not t or id(t) in self.consts:
            return None          # a constant, or state: on_concrete decides
        item = ItemValue(t._data.reshape(-1)[0].item(), t, user_location(), self._item_used,
                         self._item_derive)
        self.items.append(item)
        return item

    def py_random(self):
        """``random.random`` while recording: a ``DrawValue`` whose
        comparisons with Python numbers are decisions the trace records."""
        v = _PY_RANDOM()
        if self.suspended:
            return v
        d = DrawValue(v, user_location(), self._draw_used, self.py_draws, self._draw_decided)
        self.py_draws += 1
        self.items.append(d)
        return d

    def _draw_decided(self, d, op, other, result) -> None:
        if not self.suspended:
            self.py_draw_guards.append((d.index, op, other, result, d.where))

    def _draw_used(self, d, what: str) -> None:
        self.fail(
            f"{format_location(_program_location())}: the number random.random() gave at "
            f"{format_location(d.where)} is used here ({what}). Inside tracec.compile such a "
            "number may only be compared with a Python number (`random.random() < ratio`: "
            "each compiled call draws its own and checks the decision); draw with "
            "tracec.rand instead, or use tracec.compile(fn, fallback=\"eager\").")

    def _item_derive(self, a, b, op, reflected):
        """``op(a, b)`` (``op(b, a)`` if ``reflected``; ``op(a)`` for ``b``
        None) of the ``ItemValue`` ``a`` and a Python int or float or a live
        ``ItemValue``: a new ``ItemValue`` whose tensor is computed in
        float64 by recorded ops, the same double arithmetic as Python's;
        None if ``b`` is something else."""
        if self.suspended or a.source is None:
            return None
        if type(b) is ItemValue:
            if b.refuse is None or b.source is None:
                return None
            vb, y = b.value, b.source.reshape(()).to(dt.float64)
        elif b is None or type(b) in (int, float, bool):
            vb = y = None if b is None else float(b)
        else:
            return None
        va, x = a.value, a.source.reshape(()).to(dt.float64)
        if op in COMPARISONS:
            # a decision: bool() of the recorded comparison is speculated
            # (on_concrete), and is the very bool Python's doubles give
            if b is None:
                return None
            return bool(op(y, x) if reflected else op(x, y))
        # eager's number first (a ZeroDivisionError is raised as eagerly)
        if b is None:
            v, t = op(va), op(x)
        else:
            v, t = (op(vb, va), op(y, x)) if reflected else (op(va, vb), op(x, y))
        item = ItemValue(float(v), t, user_location(), self._item_used, self._item_derive)
        self.items.append(item)
        return item

    def _item_used(self, item, what: str) -> None:
        self.fail(
            f"{format_location(_program_location())}: the number item() gave at "
            f"{format_location(item.where)} is used here ({what}). Inside tracec.compile such "
            "a number may only be returned (each compiled call then returns its own value): "
            "compute with the tensor instead, use the returned number outside the compiled "
            "function, or use tracec.compile(fn, fallback=\"eager\").")

    def on_concrete(self, t, why):
        if self.suspended:
            return
        e = self.env.get(id(t))
        if (e is None or e[0] is not t) and t._birth == self.epoch and t._base is not None:
            # An alias made in the call (detach(), .data) and not used by an
            # op yet: its value is its base's.
            return self.on_concrete(t._base, why)
        # A tensor recorded in the call, or one that existed before it (an
        # argument, a parameter, state not read yet): its value may differ
        # at the next call, so a Python value taken from it would be frozen.
        recorded = e is not None and e[0] is t and id(t) not in self.consts
        if recorded or (e is None and t._birth != self.epoch):
            if not recorded and self._guard_value(t):
                return
            loc = user_location()
            if t.numel() == 1 and type(t._data) is np.ndarray and (
                    (why == "bool()" and t.dtype.category != 3)
                    or (why == "item()" and t.dtype.category in (0, 1))):
                # A decision on tensor data (a NaN check, GradScaler's inf
                # check), or an integer read (a length's max used as a
                # size): speculated.  The trace takes this call's branch or
                # number and outputs the value; a compiled call whose value
                # decides otherwise discards its results and runs eagerly
                # (compiled_entry.Entry.run).  (A float's item() stays
                # refused: it would differ at nearly every call.)
                v = t._data.reshape(-1)[0]
                expect = bool(v) if why == "bool()" else ("value", v.item())
                self.data_guards.append((self.value_of(t), expect, loc))
                return
            if why.startswith(_WHOLE_READS) and t.dtype.category in (0, 1) and \
                    type(t._data) is np.ndarray and t.numel() <= GUARDED_VALUE_MAX and \
                    self._of_argument(t):
                # A small integer or bool argument (or a view of one) read
                # whole: pack_padded_sequence's lengths, a padding mask's
                # masked_select; speculated likewise, on all of its values.
                # (One computed in the call, as x > 0, would change nearly
                # every call: refused below.)
                expect = ("array", tuple(t._data.reshape(-1).tolist()))
                self.data_guards.append((self.value_of(t), expect, loc))
                return

            if t.dtype.category == 3 or "complex values are eager only" in why:
                op = why.split(" (")[0]
                return self.fail(complex_trace.message(op, format_location(loc)))
            if "(eager only" in why:
                # an op tracec computes only eagerly (LAPACK through NumPy,
                # a data-driven plan): no control flow of the user's is involved
                return self.fail(
                    f"{format_location(loc)}: {why} cannot be recorded by tracec.compile: "
                    "tracec computes it eagerly only. Call it outside the compiled function, "
                    "or compile with fallback=\"eager\" (torch.compile's default, "
                    "fullgraph=False, runs such a call eagerly).")
            self.fail(
                f"{format_location(loc)}: {why} on a traced tensor makes Python control flow "
                "depend on tensor data, which tracec.compile cannot record. Keep the decision "
                "in tensor ops (e.g. tracec.where), move it out of the compiled function, or "
                "use tracec.compile(fn, fallback=\"eager\").")

    def on_unrecordable(self, what: str) -> None:
        """``graph.UNRECORDABLE``: ``what`` (an autograd hook) has an effect
        the compiled code would not repeat: refused at the user's line."""
        if self.suspended:
            return
        self.fail(f"{format_location(user_location())}: {what} is not supported inside a "
                  "compiled function (compiled code would not call the hook); call it outside, "
                  "or use tracec.compile(fn, fallback=\"eager\")")

    @contextlib.contextmanager
    def opaque_call(self, name: str):
        """``tracec.library``: while ``name`` (``"the custom op ns::op"``)
        runs, what cannot be recorded makes the call run eagerly (``fail``)."""
        self.opaque.append(name)
        try:
            yield
        finally:
            self.opaque.pop()

    def _of_argument(self, t) -> bool:
        """Whether ``t`` is an argument of the call or a view of one."""
        while t is not None:
            if id(t) in self.arg_position:
                return True
            t = t._base
        return False

    def _guard_value(self, t) -> bool:
        """A small integer or bool tensor that existed before the call (not an
        argument) and is read at its entry value (ActNorm's ``initialized``
        buffer, a step counter, CRNN's global CTC ``text`` / ``length``
        tensors), or a finite one-element float Parameter frozen with
        requires_grad=False (KnowledgeGraphEmbedding's
        ``nn.Parameter(torch.Tensor([gamma]), requires_grad=False)`` read by
        ``.item()`` in every score): the trace specializes on that value,
        guarded at every call, instead of refusing the read.  (A frozen
        Parameter is a constant the user set; a float buffer or a trained
        Parameter would change nearly every call, so those stay refused.)"""
        if t.numel() > GUARDED_VALUE_MAX or t.dtype.category == 3 or \
                id(t) in self.arg_position or GENERATOR_STATES.get(id(t)) is t:
            return False
        if t.dtype.is_floating_point and not (
                isinstance(t, Parameter) and t.numel() == 1 and not t.requires_grad
                and type(t._data) is np.ndarray and np.isfinite(t._data).all()):
            return False
        self.on_guard(TensorValue(t))
        return True

    def _local_leaf(self, leaf, returned: set) -> bool:
        """A leaf this call made and drops (a gradient penalty's
        interpolate, ``x.detach().requires_grad_()``): its ``.grad``
        belongs to that call's tensor, which the next call makes anew, so it
        is neither guarded (it was None at entry, the tensor not existing
        yet; the guard failed on every later call, the old tensor keeping
        its gradient, and every call retraced) nor written back.  A
        Parameter made in the call stays state (a lazily built layer), and a
        returned leaf keeps its guard (its caller may read its ``.grad``,
        which compiled calls do not set: they retrace, as before).  A
        returned non-leaf that retains its grad is local too: the template
        ("retained") sets its ``.grad`` at each call."""
        return leaf._birth == self.epoch and id(leaf) not in self.arg_position \
            and (id(leaf) not in returned or leaf._retains_grad) \
            and not isinstance(leaf, Parameter)

    def on_grad(self, t, kind, value):
        if self.suspended:
            return
        key = id(t)
        if kind == "get":
            if key not in self.grad_entry and key not in self.grad_written:
                self.grad_entry[key] = (t, value)
                if value is not None:
                    self.entry_grad_ids[id(value)] = t
        else:
            if key not in self.grad_entry and key not in self.grad_written:
                self.grad_entry[key] = (t, "unread")
            self.grad_written[key] = t

    def tensor_shape(self, t):
        """``t.shape`` while recording a symbolic trace: its recorded value's
        shape with the symbolic sizes, or None for a static one."""
        if self.suspended:
            return None
        e = self.env.get(id(t))
        if e is None or e[0] is not t:
            if t._birth == self.epoch and t._base is not None and t._view_chain == () \
                    and t.dtype is t._base.dtype:
                # detach() / .data of a traced tensor: its base's sizes (a
                # concrete shape here specialized every size it was used with)
                return self.tensor_shape(t._base)
            if not (t._birth == self.epoch and t._base is not None and t._view_chain):
                return None
            v = self.value_of(t)
        else:
            v = e[1]
        if not ir.is_symbolic_type(v.type):
            return None
        shape = self.symbols.shape_of_value(v)
        return shape[:-1] if t.dtype.category == 3 else shape   # a complex representation

    def on_size_decision(self, kind, lhs, op, rhs, result):
        if not self.suspended:
            loc = user_location()
            self.symbols.on_decision(kind, lhs, op, rhs, result,
                                     format_location(loc) if loc else None)

    def on_guard(self, snapshot):
        if not self.suspended:
            try:   # once per snapshot (bound methods compare by their owner)
                if snapshot in self._guard_seen:
                    return
                self._guard_seen.add(snapshot)
            except TypeError:
                pass
            self.guards.append((snapshot, snapshot()))

    def on_backward(self, tensors, grads, inputs, create_graph):
        if self.suspended:
            return None
        if self.dirty_alias_write:
            if self.fallback:
                self.refresh_conv_columns()
            return self.fail(self.dirty_alias_write)
        loc = user_location()
        self.had_backward = True
        if inputs == autograd.GRAD_CALL or create_graph or self.data_rebound:
            # autograd.grad (MAML's inner and meta gradients), create_graph,
            # or a saved tensor's data replaced since its op read it (the
            # autodiff pass would read the old value): the eager engine's run
            # is recorded op by op (its VJPs are tensor ops; with
            # create_graph they are differentiable in turn, else made under
            # no_grad, so constants to a later backward)
            custom = []
            try:
                for t in tensors:
                    self._leaves(t, loc, custom)
            except TraceError as e:
                return self.fail(str(e))
            return self._record_eager_backward(traced_tensor_hooks.hooked_nodes(custom))
        if len(tensors) != 1:
            return self.fail(f"{format_location(loc)}: backward of several tensors at once "
                             "inside a compiled function is not supported yet; sum them first")
        loss, seed = tensors[0], grads[0]
        custom = []
        try:
            leaves = self._leaves(loss, loc, custom)
        except TraceError as e:
            return self.fail(str(e))
        if custom or (POST_ACCUMULATE_HOOKS and any(
                id(x) in POST_ACCUMULATE_HOOKS for x in leaves)):
            # (a post-accumulate-grad hook, e.g. an optimizer step in
            # backward, runs in the engine's run: recorded op by op with it)
            return self._record_eager_backward(traced_tensor_hooks.hooked_nodes(custom))
        if inputs is not None:
            keep = {id(x) for x in inputs}
            leaves = [x for x in leaves if id(x) in keep]
        loss_ssa = self.value_of(loss)
        seed_ssa = None
        if not (loss.numel() == 1 and np.all(seed._data == 1)) or (
                id(seed) in self.env and id(seed) not in self.consts):
            seed_ssa = self.value_of(seed)
        wrt = [self.value_of(x) for x in leaves]
        old = [x.grad for x in leaves]  # through the hook: records entry state
        old_ssa = [self.value_of(g) if g is not None else None for g in old]
        op = ir.BackwardOp(loss_ssa, wrt, seed_ssa, loc=loc)
        self.block.add_op(op)
        self.suspended += 1

        def after():
            self.suspended -= 1
            for x, g_old, g_old_ssa, res in zip(leaves, old, old_ssa, op.results):
                new = x._grad
                if g_old is None:
                    ssa = res
                else:
                    add = ir.make_op("add", [g_old_ssa, res], {}, res.type, loc=loc)
                    self.block.add_op(add)
                    ssa = add.results[0]
                    if new is g_old and g_old._birth != self.epoch:
                        w = complex_trace.real_view(g_old) if g_old.dtype.category == 3 \
                            else g_old    # (a complex .grad: written through its real view)
                        self.written[id(w)] = w
                        self.env[id(w)] = (w, ssa)
                self.env[id(new)] = (new, ssa)
                self.grad_written[id(x)] = x
        return after

    def _record_eager_backward(self, hooked=()):
        """A backward through a user ``autograd.Function``: its ``backward``
        is the user's Python, which the autodiff pass cannot see.  The eager
        engine's run is recorded instead, op by op, as the forward is: each
        node's VJP (the primitives' rules, the user's backward) and the
        accumulation into ``.grad`` (``autograd._accumulate`` builds new
        tensors while ``autograd.RECORDING_BACKWARD``) become ops of the trace, and
        the leaves' new gradients are written back as for a BackwardOp.
        ``hooked``: the nodes holding tensor hooks, run checked
        (``traced_tensor_hooks``)."""
        autograd.RECORDING_BACKWARD[0] += 1
        loc = user_location()
        restore = traced_tensor_hooks.wrap_hooks(
            hooked, lambda why: self.fail(f"{format_location(loc)}: {why}: a compiled call "
                                          "would not update it"))

        def after():
            autograd.RECORDING_BACKWARD[0] -= 1
            restore()
        return after

    def _leaf_hooks_guard(self, leaves) -> None:
        """Guard the hooks the ``leaves`` a backward reaches held when the
        call began (those they hold now but the ones the call registered,
        ``tensor.LEAF_HOOKS_ADDED``): compiled calls replay the hooks the
        trace ran (none, for a leaf that had none), so a hook added or
        removed between calls must retrace."""
        leaves = tuple(leaves)
        key = ("leaf_hooks", tuple(map(id, leaves)))
        if key in self._guard_seen:
            return
        self._guard_seen.add(key)
        added = [h for _, h in LEAF_HOOKS_ADDED]
        before = tuple((i, tuple(_hook_key(h) for h in t._hooks
                                 if not any(h is a for a in added)))
                       for i, t in enumerate(leaves) if t._hooks)
        def hooks_on_the_leaves_a_backward_reaches(leaves=leaves):
            return _hook_ids(leaves)
        self.guards.append((hooks_on_the_leaves_a_backward_reaches,
                            tuple((i, h) for i, h in before if h)))
        # (a post-accumulate-grad hook added or removed between calls: the
        # backward recorded with or without its ops must retrace)
        def post_accumulate_hooks_on_the_leaves(leaves=leaves):
            return _post_accumulate_ids(leaves)
        self.guards.append((post_accumulate_hooks_on_the_leaves, _post_accumulate_ids(leaves)))

    def _leaves(self, loss, loc, custom=None):
        """The leaves requiring grad that ``loss`` reaches, in DFS order.
        ``custom``: a list that collects the user ``autograd.Function``
        nodes met (without it, meeting one fails the trace)."""
        out, seen, traced = [], set(), []
        stack = [graph.edge_of(loss)]
        while stack:
            n = stack.pop()
            if n is None or id(n) in seen:
                continue
            seen.add(id(n))
            if isinstance(n, graph.AccumulateGrad):
                # (a complex leaf: its value in the trace is its real view, so
                # the gradient is view_as_real of PyTorch's dL/da + i dL/db)
                if graph.NODE_PRE_HOOKS.get(n) or graph.NODE_POST_HOOKS.get(n) or \
                        (n.variable._hooks and custom is None):
                    raise TraceError(f"{format_location(loc)}: tensor hooks on leaves are not "
                                     "supported inside a compiled function")
                if n.variable._hooks:
                    # ``p.register_hook(fn)``: the eager engine runs ``fn``
                    # and its tensor ops are recorded (as a user Function's
                    # backward); the leaves' hooks are guarded (below)
                    custom.append(n)
                out.append(n.variable)
                continue
            if isinstance(n, graph.FunctionNode) and getattr(n.fn_cls, "traced", None):
                # a complex op the trace recorded in real primitives: autodiff
                # differentiates those (an eager backward of it is not recorded)
                if custom is not None:
                    traced.append(n)
                stack.extend(reversed([e for e in n.edges if e is not None]))
                continue
            if isinstance(n, graph.FunctionNode):
                if custom is None or (n.fn_cls.__module__.split(".")[0] == "tracec"
                                      and not getattr(n.fn_cls, "recordable", False)):
                    # (tracec's own eager-only Functions compute in NumPy;
                    # ``recordable`` ones -- utils.checkpoint's, CTC's -- in
                    # tensor ops that a compiled backward records like a
                    # user Function's)
                    raise TraceError(f"{format_location(loc)}: a custom autograd.Function "
                                     f"({n.fn_cls.__name__}) inside a compiled backward is "
                                     "not supported yet")
                custom.append(n)
            if graph.NODE_PRE_HOOKS.get(n) or graph.NODE_POST_HOOKS.get(n):
                raise TraceError(f"{format_location(loc)}: node hooks (grad_fn.register_hook, "
                                 "register_prehook) are not supported inside a compiled function")
            if n.pre_hooks:
                if custom is None:
                    raise TraceError(f"{format_location(loc)}: tensor hooks are not supported "
                                     "inside a compiled function")
                # ``h.register_hook(fn)``, ``h.retain_grad()``: the eager
                # engine's run, recorded, calls them (traced_tensor_hooks)
                custom.append(n)
            stack.extend(reversed([e for e in n.edges if e is not None]))
        if custom and traced:
            what = next((f"a custom autograd.Function ({c.fn_cls.__name__})" for c in custom
                         if isinstance(c, graph.FunctionNode) and not c.pre_hooks),
                        "a tensor hook")
            raise TraceError(f"{format_location(loc)}: {what} and complex numbers in one "
                             "compiled backward are not supported yet")
        self._leaf_hooks_guard(out)
        return out

    # --- finishing -----------------------------------------------------------

    def finish(self, result) -> Trace:
        values, outputs = [], []
        returns_grad = []   # indices (among the returned tensors) that require grad
        returned = set()    # ids of the tensors returned
        # id -> template of each tensor returned (a tensor returned twice is
        # one object, as in eager code), and the returned views made during
        # the call (tracec.view_outputs): [(tensor, cell)].  Only where the
        # caller rebuilds views (record(views=True): compiled calls; not a
        # library's C outputs, not tracec.trace's IR).
        memo, view_cells = {}, []
        # a leaf's .grad the call leaves (``return p.grad``): that very
        # tensor, as eager returns it, not a copy of its value
        # (compiled_entry._rebuild's "grad_of", after the grads are set)
        grad_of = {}
        if self.return_views:
            for leaf in self.grad_written.values():
                g = leaf._grad
                if g is not None and not g.requires_grad and g.dtype.category != 3 and (
                        leaf._birth != self.epoch or id(leaf) in self.arg_position
                        or isinstance(leaf, Parameter)):
                    pos = self.arg_position.get(id(leaf))
                    grad_of[id(g)] = ("grad_of", ("arg", pos) if pos is not None
                                      else ("object", leaf))

        def flatten(x):
            if isinstance(x, Tensor) and self.return_views:
                tpl = memo.get(id(x))
                if tpl is None:
                    tpl = memo[id(x)] = grad_of.get(id(x)) or flatten_tensor(x)
                return tpl
            return flatten_other(x)

        def flatten_tensor(x):
            if x._birth == self.epoch and x._base is not None and x._view_chain is not None:
                # A view (or detach() alias) made in the call: rebuilt at each
                # compiled call from this call's tensor (view_outputs).
                tpl = self._view_template(x, flatten_tensor, memo, view_cells)
                if tpl is not None:
                    return tpl
            return flatten_other(x)

        def flatten_other(x):
            if isinstance(x, Tensor) and x._birth != self.epoch and \
                    (id(x) in self.arg_position or id(x) in self.env):
                # A tensor that existed before the call (an argument, a
                # parameter, state): eager code returns that very object, and
                # the compiled call updates it in place, so return it too.
                if id(x) in self.arg_position:
                    return ("arg", self.arg_position[id(x)])
                return ("object", x)
            if isinstance(x, Tensor) and x.dtype.category == 3:
                raise TraceError(f"tracec.compile({self.label}): the function returns a {x.dtype} "
                                 "tensor: the results of a compiled function cannot be complex "
                                 "(the IR has no complex type). Return torch.view_as_real(z) and "
                                 "call torch.view_as_complex on it outside, or call the function "
                                 "eagerly.")
            if isinstance(x, Tensor):
                returned.add(id(x))
                if x.requires_grad:
                    returns_grad.append(len(values))
                values.append(self.value_of(x))
                outputs.append(OutputSpec("return"))
                # Eager code returns it requiring grad; after a backward inside
                # the call its graph is consumed: compiled calls return it
                # requiring grad with a freed grad_fn of the same name.
                freed = (x._node.name() if self.had_backward and x.requires_grad
                         and x._node is not None else None)
                tpl = ("tensor", len(values) - 1, x.dtype, freed)
                if x._retains_grad and x._grad is not None and x._birth == self.epoch:
                    # ``h.retain_grad()`` and a backward in the call: each
                    # compiled call's h gets that call's gradient as .grad
                    values.append(self.value_of(x._grad))
                    outputs.append(OutputSpec("return"))
                    return ("retained", tpl, len(values) - 1)
                return tpl
            if type(x) is ItemValue and x.source is not None:
                # a returned loss.item(): the tensor is an output, its float
                # the result of each compiled call (compiled_entry._rebuild)
                values.append(self.value_of(x.source))
                outputs.append(OutputSpec("return"))
                return ("number", len(values) - 1)
            if type(x) is Size and all(type(v) is int for v in x):
                return ("const", x)     # (a returned distribution's batch shape)
            if isinstance(x, tuple) and hasattr(x, "_fields"):
                return ("namedtuple", type(x), tuple(flatten(v) for v in x))
            if isinstance(x, (tuple, list)):
                return (type(x).__name__, tuple(flatten(v) for v in x))
            if isinstance(x, dict):
                return ("dict", type(x), tuple((k, flatten(v)) for k, v in x.items()))
            if getattr(type(x), "__tracec_flatten__", None) is not None:
                children, aux = x.__tracec_flatten__()
                return ("wrapper", type(x), aux, tuple(flatten(c) for c in children))
            if is_dataclass_instance(x):
                return ("dataclass", type(x), tuple((f.name, f.init, flatten(getattr(x, f.name)))
                                                    for f in dataclasses.fields(x)))
            if x is None or isinstance(x, (bool, int, float, str, np.number)):
                return ("const", x)
            if _returnable_plain(x):
                # an instance of the program's own class made in the call
                # (rectified-flow's LossBreakdown(total, main, ...)): rebuilt
                # at each compiled call from its attributes, as eager makes a
                # new one
                return ("plain", type(x), tuple((k, flatten(v)) for k, v in vars(x).items()))
            raise TraceError(f"a compiled function may return tensors, numbers, strings and "
                             f"tuples, lists, dicts, namedtuples, dataclasses and plain "
                             f"objects of them, not {type(x).__name__}")

        template = flatten(result)
        pending: dict = {}    # views of tensors the call made, by base
        for x, cell in view_cells:
            if cell[0][0] == "pending":
                pending.setdefault(id(cell[0][1]), []).append((x, cell))
        for group in pending.values():
            base = group[0][1][0][1]
            b = memo.get(id(base))      # a view of another returned tensor
            if b is None and base.dtype.category != 3 and \
                    (not base.requires_grad or any(x.requires_grad for x, _ in group)):
                # views of a tensor the call made and does not return
                # (y[0], y.t()): that one becomes a result, so that they have
                # eager's layout and share its memory.  (Not loss.detach():
                # a result that requires grad would need a backward.)
                b = memo[id(base)] = flatten_other(base)
            for x, cell in group:
                if b is not None:
                    cell[0] = b
                else:
                    # a no-grad view of a tensor that requires grad: that
                    # one is no result, so the view is one (its own value)
                    cell[0], cell[1] = flatten_other(x), None
        written_ids = set(self.written)
        for t in self.written.values():
            root = t._base
            if root is not None and id(root) in written_ids:
                continue  # the root's write-back covers its views
            leaf = self.entry_grad_ids.get(id(t))
            if leaf is not None:
                # A leaf's .grad written in place (``zero_grad(set_to_none=
                # False)``): into the .grad of each call (read as this trace's
                # "grad" input), not into this call's tensor: a tensor set as
                # .grad between calls is a new object, and the old one,
                # which the program may hold, is no longer written by eager.
                if id(leaf) not in self.grad_written:
                    values.append(self.env[id(t)][1])
                    outputs.append(OutputSpec("grad", leaf, arg=self.arg_position.get(id(leaf)),
                                              inplace=True))
                    continue
                if leaf._grad is t:
                    continue      # the "grad" write-back below, in place, covers it
            values.append(self.env[id(t)][1])
            outputs.append(OutputSpec("write", t, arg=self.arg_position.get(id(t)),
                                      layout=self._new_layout(t)))
        grad_guards = []
        for key, (leaf, entry) in self.grad_entry.items():
            if not isinstance(entry, str) and not self._local_leaf(leaf, returned):
                grad_guards.append((leaf, entry is not None, self.arg_position.get(id(leaf))))
        for leaf in self.grad_written.values():
            if self._local_leaf(leaf, returned):
                continue
            final = leaf._grad
            if final is None:
                outputs.append(OutputSpec("grad_none", leaf, arg=self.arg_position.get(id(leaf))))
                continue
            entry = self.grad_entry.get(id(leaf), (None, None))[1]
            values.append(self.value_of(final))
            outputs.append(OutputSpec("grad", leaf, arg=self.arg_position.get(id(leaf)),
                                      inplace=final is entry
                                      and not isinstance(entry, str)))
        for mod, name, value in self.attr_writes.values():
            if type(value) is tuple and any(isinstance(v, Tensor) and v._birth == self.epoch
                                            for v in tensor_leaves(value) or ()):
                # a tuple holding tensors the call made (self.hidden = (h, c)),
                # maybe in nested tuples and lists (pytorch-ntm's previous_state):
                # one "attr_part" per new tensor, depth first, then the tuple
                # ("attr_seq"), rebuilt with new inner lists as eager makes them

                def part(v):
                    if type(v) in (tuple, list):
                        return ("seq", type(v), tuple(part(x) for x in v))
                    if isinstance(v, Tensor) and id(v) in self.arg_position:
                        return ("arg", self.arg_position[id(v)])
                    if isinstance(v, Tensor) and v._birth == self.epoch:
                        values.append(self.value_of(v))
                        outputs.append(OutputSpec("attr_part", (mod, name, v.dtype)))
                        return ("value", None)
                    return ("const", v)
                parts = tuple(part(v) for v in value)
                outputs.append(OutputSpec("attr_seq", (mod, name, parts)))
                continue
            if isinstance(value, Tensor) and id(value) in self.arg_position \
                    and not isinstance(mod, Module):
                # an argument stored on a plain object (a BaseModel's
                # set_input): each compiled call stores that call's argument
                outputs.append(OutputSpec("attr_arg", (mod, name),
                                          arg=self.arg_position[id(value)]))
            elif isinstance(value, Tensor) and value._birth == self.epoch:
                if value.requires_grad:
                    # llama2.c's model(X, Y) sets self.last_loss and the
                    # backward runs outside: the attribute's tensor is a
                    # result of the call like a returned one (compiled_backward)
                    returns_grad.append(len(values))
                values.append(self.value_of(value))
                outputs.append(OutputSpec("attr", (mod, name, value.dtype)))
            else:   # None, or a tensor that existed before the call: that object
                outputs.append(OutputSpec("attr_const", (mod, name, value)))
        for mod, _, mode in self.mode_writes.values():
            outputs.append(OutputSpec("attr_const", (mod, "training", mode)))
        for p, _ in self.rg_writes.values():
            outputs.append(OutputSpec("attr_const", (p, "requires_grad", p.requires_grad)))
        if self.mode_writes:
            self._mode_guards()
        self.restored_guards()
        for v, decision, loc in self.data_guards:
            values.append(v)
            outputs.append(OutputSpec("data_guard", (decision, loc)))
        # (a tensor set as the attribute itself is a result with a backward,
        # above; one inside a tuple is not)
        attr_grad = next((name for _, name, v in self.attr_writes.values()
                          if type(v) is tuple and any(isinstance(x, Tensor) and x.requires_grad
                                                      for x in tensor_leaves(v) or ())), None)
        self._coarsen_guards()
        ir.set_returns(self.func, values)
        module = ir.new_module([self.func])
        sym_info = None
        if self.symbols is not None:
            # Sizes the trace found equal to a number or to each other
            # become that number or one symbol (sym_shapes.SymbolTable.resolve).
            env = self.symbols.resolve()
            if env:
                ir.substitute_symbols(module, env, copy=False)
                for spec in self.inputs:
                    spec.shape = tuple(symbolic.substitute(d, env) for d in spec.shape)
            sym_info = self.symbols.finish()
            self._view_sizes(view_cells, env, sym_info)
        return Trace(module, self.inputs, outputs, template, self.guards, grad_guards,
                     graph.is_grad_enabled(),
                     () if self.had_backward else tuple(returns_grad), symbolic=sym_info,
                     attr_needs_grad=None if self.had_backward else attr_grad,
                     py_draws=self.py_draws, py_draw_guards=tuple(self.py_draw_guards),
                     runtime_reads=self.runtime.read_at_run_time(),
                     runtime_notes=list(self.runtime.notes), attr_state=self.attr_state())


#: Constants of more elements than this whose elements are all equal are
#: recorded as a broadcast 0-d constant.  (Smaller ones are found equal by
#: the simplifier, ``simplify.splat_value``, which bounds its scan; a dense
#: 0.7M-element zero tensor, CapsNet's routing logits made by
#: ``Variable(torch.zeros(...))``, was 19 MB of LLVM IR and 3 MB of object.)
UNIFORM_CONSTANT = 1 << 16


def _uniform_constant(t: Tensor, loc):
    """``[constant x, broadcast_to]`` for a large constant tensor all of
    whose elements have the bits of its first (so 0.0 and -0.0, or NaNs of
    other payloads, are never merged); None otherwise."""
    a = t._data
    if type(a) is not np.ndarray or a.size <= UNIFORM_CONSTANT or a.dtype.kind not in "biuf" \
            or a.dtype.itemsize not in (1, 2, 4, 8):
        return None
    flat = a.reshape(-1)
    bits = flat.view(np.dtype(f"u{a.dtype.itemsize}"))
    if not (bits == bits[0]).all():
        return None
    c = ir.constant(flat[:1].reshape(()), t.dtype, loc=loc)
    out = ir.make_op("broadcast_to", [c.results[0]], {"shape": tuple(a.shape)},
                     ir.tensor_type(a.shape, t.dtype), loc=loc)
    return [c, out]


def _failing_user_line(tb):
    """The user's line that called into tracec where ``tb`` failed, or None
    when the error was raised by the user's own code."""
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    if not frames or not frames[-1].tb_frame.f_code.co_filename.startswith(_TRACEC_DIR):
        return None
    for t in reversed(frames):
        fname = t.tb_frame.f_code.co_filename
        if not fname.startswith(_TRACEC_DIR):
            return (fname, t.tb_lineno, 0)
    return None


class LiftRefused(str):
    """``record``'s reason when lifted number arguments were used as plain
    numbers: the call ran eagerly; the caller specializes on them."""


class ChangedPlainObject(str):
    """``record``'s reason when the call changed a plain object it was
    given (flattened by ``tracec.pytree``): the call ran eagerly, and that
    object's class is keyed by identity from now on, where guards and
    lifted state follow such changes."""


class ArraysRead(str):
    """``record``'s reason when the call read a NumPy array argument by
    other means than converting it to a tensor (``tracec.arg_arrays``):
    the call ran eagerly, and the compiled function keys such arrays by
    their contents from now on."""


def _unstand(x, arrays: dict, depth: int, found: list):
    """``x`` (a result) with the user's arrays in place of their stand-ins
    (``arrays``: id(stand-in) -> array), in tuples, lists and dicts;
    ``found`` gets True for each (``_arrays_read`` refuses such a trace)."""
    if type(x) is arg_arrays.ArgArray:
        arr = arrays.get(id(x))
        if arr is None:
            return x
        found.append(True)
        return arr
    if depth and type(x) in (list, tuple):
        out = [_unstand(v, arrays, depth - 1, found) for v in x]
        return x if all(a is b for a, b in zip(out, x)) else type(x)(out)
    if depth and type(x) is dict:
        out = {k: _unstand(v, arrays, depth - 1, found) for k, v in x.items()}
        return x if all(out[k] is v for k, v in x.items()) else out
    return x


def _arrays_read(rec, watches, result) -> str | None:
    """Why the traced call's NumPy array arguments cannot be inputs (a
    read of their values the trace would bake in, an in-place write
    through the tensor sharing their memory, the array itself returned),
    or None."""
    for w in watches:
        name = path_name(w.path, rec.arg_names)
        if w.reads:
            return f"the NumPy array argument {name} was read by {w.reads[0]}"
        if w.input is not None and id(w.input) in rec.written:
            # (through from_numpy's shared memory: the write is a side
            # effect on the user's array, which may alias another argument)
            return f"the NumPy array argument {name} was written in place"
    if rec.arrays_returned:
        return "a NumPy array argument is returned"
    return None


def _put(x, steps: tuple, value, swaps: list):
    """``x`` with ``value`` at ``steps`` (a ``tracec.pytree`` path's steps):
    tuples (namedtuples too) rebuilt, lists, dicts and objects set in place
    (``swaps`` gets ``(parent, kind, key, old, value)`` to put back)."""
    if not steps:
        return value
    kind, k = steps[0]
    if kind == "a":
        new = _put(getattr(x, k), steps[1:], value, swaps)
        swaps.append((x, "a", k, getattr(x, k), new))
        object.__setattr__(x, k, new)      # (a frozen dataclass too)
        return x
    new = _put(x[k], steps[1:], value, swaps)
    if isinstance(x, tuple):
        items = list(x)
        items[k] = new
        return type(x)._make(items) if hasattr(x, "_fields") else type(x)(items)
    swaps.append((x, "i", k, x[k], new))
    x[k] = new
    return x


def _swap_in(args, kwargs, path: tuple, value) -> tuple:
    """Put ``value`` (a lifted number's SymScalar) at ``path`` inside a
    call's arguments, in the container itself (a dict, a list, a plain
    object or dataclass: ``compiler.number_changes`` lifts no other), so
    that a call changing the container changes the user's; returns what
    puts the number back."""
    parent = resolve(path[:-1] if len(path) > 2 else path[0], args, kwargs)
    kind, k = path[-1]
    if kind == "a":
        before = getattr(parent, k)
        setattr(parent, k, value)
    else:
        before = parent[k]
        parent[k] = value
    return parent, kind, k, before, value


def record(fn, args, kwargs, name: str, fallback: bool = False,
           symbols: SymbolTable | None = None, lift=None, views: bool = False):
    """Run ``fn(*args, **kwargs)`` eagerly while recording; returns
    ``(result, Trace)``, or with ``fallback`` and something uncompilable,
    ``(result, reason)`` after finishing the call eagerly.

    Every tensor in the arguments, containers included, is an input read at
    each call (``tracec.pytree``); the Python state ``fn`` can see besides
    them (closures, globals, defaults, the attributes of ``self`` and of
    objects passed in) is guarded as one snapshot (``tracec.guards``).

    With ``symbols`` (a ``tracec.sym_shapes.SymbolTable``) the trace is
    symbolic in the argument sizes it names: Python reading those sizes
    gets ``Sym`` objects, and what it decides on them becomes guards.

    With ``lift`` (``[(snapshot path, Location)]``: numbers an earlier
    call changed, ``tracec.lifted_state``) those numbers are traced as
    inputs and what the call stores from them is written back by every
    compiled call (the trace's ``LiftedGuard``)."""
    rec = Recording(name, fallback, symbols)
    rec.return_views = views
    rec.label, rec.arg_names = function_label(fn), argument_names(fn)
    others: list = []
    spec, leaves = flatten_args(args, kwargs, others)
    for path, t in leaves:
        if id(t) not in rec.arg_position:
            rec.add_arg(t, path[0] if len(path) == 1 else path)
    # NumPy array arguments: inputs where the call converts them to tensors
    # (tracec.arg_arrays), read at each call through their path
    watches = [arg_arrays.Watch(o, p, rec.array_input) for p, o in others
               if type(o) is np.ndarray]
    others = [(p, o) for p, o in others if type(o) is not np.ndarray]
    env = EnvGuard(fn, [(f"argument {path_name(p)}", o) for p, o in others])
    env_before = env.snapshot()
    rng_before = GlobalRNGs.state()
    LEAF_HOOKS_ADDED.clear()
    hooks = ((RECORDERS, rec.on_primitive),
             (CONCRETE_CHECKS, rec.on_concrete),
             (graph.UNRECORDABLE, rec.on_unrecordable),
             (OPAQUE_CALLS, rec.opaque_call),
             (ITEM_HOOKS, rec.on_item),
             (GRAD_HOOKS, rec.on_grad),
             (GUARD_HOOKS, rec.on_guard),
             (autograd.BACKWARD_LISTENERS, rec.on_backward),
             (TRACED_OPS, rec.on_traced_op),
             (ATTR_WRITES, rec.on_attr_write),
             (BUFFER_WRITES, rec.on_buffer_write),
             (MODE_WRITES, rec.on_mode_write),
             (PLAIN_WRITES, rec.on_plain_write))
    if symbols is not None:
        hooks += ((SYM_SHAPES, rec.tensor_shape),
                  (symbolic.GUARD_SINKS, rec.on_size_decision),
                  (symbolic.HINT_ENVS, symbols.hints))
    if RECORDERS:
        raise TraceError("tracec.compile: a compiled function called another one while "
                         "tracing; nested compiled functions are not supported yet")
    for lst, h in hooks:
        lst.append(h)
    # hooks the call registers (and removes: a feature extractor's
    # ``h = layer.register_forward_hook(save); model(x); h.remove()``) are
    # not part of the modules' guards: the state the call began with is
    removable_handle.TRACE_FLOOR[0] = removable_handle.RemovableHandle.next_id
    py_random_before = random.random
    random.random = rec.py_random
    opt_before = lifted_state.optimizer_numbers([get() for _, get in env.roots])
    lifted = None
    if lift:
        # A lifted number found through a path (``cfg.scale`` of a global
        # ``cfg``) is read where that path leads now: the guard follows the
        # path, so a ``cfg`` rebound to a new object must not leave the trace
        # reading the old one's number (then one no guard looks at).
        lift = lifted_state.follow_paths(env, lift)
    if lift:
        lifted = lifted_state.Lifted(lift, user_location)
        lifted.number_args = any(
            isinstance(a, (int, float, np.number)) and not isinstance(a, bool)
            for v in list(args) + list(kwargs.values())
            for a in (v if isinstance(v, (tuple, list)) else (v,)))
        lifted.install()
    # Numbers lifted because they changed between calls (a module's
    # temperature, a global step): a trace that cannot use one as a traced
    # number (``x.topk(self.k)``) finishes the call eagerly and the compiled
    # function specializes on them instead, as it did before lifting them.
    between = lifted is not None and any(loc.between for loc in lifted.locations)
    if between:
        rec.fallback = True
    call_args, call_kwargs = args, kwargs
    swapped: list = []      # lifted numbers put inside argument containers
    if lifted is not None and any(loc.kind == "arg" for loc in lifted.locations):
        # lifted number arguments: the call gets their SymScalars
        call_args, call_kwargs = list(args), dict(kwargs)
        for loc in lifted.locations:
            if loc.kind == "arg":
                if isinstance(loc.key, tuple):
                    swapped.append(_swap_in(args, kwargs, loc.key, loc.get()))
                elif isinstance(loc.key, int):
                    call_args[loc.key] = loc.get()
                else:
                    call_kwargs[loc.key] = loc.get()
        call_args = tuple(call_args)
    array_swaps: list = []   # (parent, kind, key, the user's value, the stand-in)
    if watches:
        call_args, call_kwargs = list(call_args), dict(call_kwargs)
        for w in watches:
            head = w.path[0]
            box = call_args if isinstance(head, int) else call_kwargs
            box[head] = _put(box[head], w.path[1:], w.stand_in, array_swaps)
        box = None     # (the list holds lifted numbers: finish's leak check counts references)
        call_args = tuple(call_args)
    watching = arg_arrays.watching(watches)
    watching.__enter__()
    result = None
    try:
        result = fn(*call_args, **call_kwargs)
        result = rec.runtime.finish(result)
        try:
            returned: list = []
            flatten(result, (), returned)
            rec.result_ids = {id(t) for _, t in returned}
        except Exception:      # (an unusual result: nothing kept as state)
            rec.result_ids = None
        if watches:
            result = _unstand(result, {id(w.stand_in): w.array for w in watches}, 4,
                              rec.arrays_returned)
        rec.settle_buffer_writes()
    except TraceError:
        raise
    except (RuntimeError, TypeError, IndexError, ValueError) as e:
        loc = _failing_user_line(e.__traceback__)
        if loc is None:
            raise
        try:
            # An eager error's notes (a broadcast's two shapes: the message
            # itself is PyTorch's sentence) join the located message here,
            # which is tracec's own anyway.
            notes = "".join(f" {n}" for n in getattr(e, "__notes__", ()))
            err = type(e)(f"{format_location(loc)}: {e}{notes}{_size_values(e, symbols)}")
        except Exception:
            raise e from None
        raise err.with_traceback(e.__traceback__) from None
    finally:
        watching.__exit__(None, None, None)
        for parent, kind, k, before, stand_in in reversed(array_swaps):
            # the user's containers get their arrays back (unless the call
            # stored something else there: a change _changed_arguments sees)
            try:
                now = getattr(parent, k) if kind == "a" else parent[k]
            except (KeyError, IndexError, AttributeError):
                continue
            if now is stand_in:
                if kind == "a":
                    object.__setattr__(parent, k, before)
                else:
                    parent[k] = before
        for lst, h in hooks:
            lst.remove(h)
        removable_handle.TRACE_FLOOR[0] = None
        random.random = py_random_before
        rec.runtime.close()
        _inert(rec.items)         # the call has returned: plain numbers from now on
        autograd.RECORDING_BACKWARD[0] = 0   # (a backward that raised left it set)
        for parent, kind, k, before, sym in swapped:
            # the user's container gets its number back (unless the call
            # stored something else there, or removed it: a change
            # _changed_arguments sees)
            try:
                now = getattr(parent, k, None) if kind == "a" else parent[k]
            except (KeyError, IndexError):
                now = None
            if now is sym:
                if kind == "a":
                    setattr(parent, k, before)
                else:
                    parent[k] = before
        swapped = sym = now = None
        if lifted is not None:
            call_args = call_kwargs = None   # (references finish's leak check would count)
            lifted.finish([get() for _, get in env.roots], result, f"tracec.compile({rec.label})")
    if lifted is not None and lifted.refusal is not None and rec.poisoned is None:
        if any(loc.kind == "arg" or loc.between for loc in lifted.locations):
            # A lifted number argument used as a plain number (a loop count,
            # an index): this call ran eagerly to its end; the compiled
            # function specializes on those arguments from now on.
            _settle_items(rec)
            return lifted_state.unsym(plain(result)), LiftRefused(lifted.refusal)
        rec.fail(lifted.refusal)
    if watches and rec.poisoned is None:
        why = _arrays_read(rec, watches, result)
        if why is not None:
            # An argument array's values reached the call other than as an
            # input: it ran eagerly; the function keys arrays by contents
            # from now on.
            _settle_items(rec)
            return lifted_state.unsym(plain(result)), ArraysRead(why)
    if rec.poisoned is None:
        why = _changed_arguments(fn, args, kwargs, spec, leaves)
        stored = why and arg_dict_writes.find(args, kwargs, spec, leaves)
        if stored:
            # only tensors stored into argument dicts (SchNet's
            # inputs["energy"] = y): each compiled call stores its own
            for owner, k, v in stored:
                rec.attr_writes[(owner.path, k)] = (owner, k, v)
            why = None
        if why is not None and plain_classes(spec):
            # A plain object was changed (``self.n += 1``), or beside it a
            # container: key their classes by identity, as before
            # flattening, and let the next call retrace.
            KEYED_BY_IDENTITY.update(plain_classes(spec))
            _settle_items(rec)
            return lifted_state.unsym(plain(result)), ChangedPlainObject(why)
        why = why or _side_effects(fn, rng_before, rec.py_draws) or _leaf_hooks_kept()
        if why is not None:
            rec.fail(why)
    if rec.poisoned is not None and between:
        _settle_items(rec)
        return lifted_state.unsym(plain(result)), LiftRefused(rec.poisoned)
    if rec.poisoned is not None:
        out, result = plain(result), None
        _settle_items(rec)
        return out, rec.poisoned
    # (after a backward inside the call, returned graphs count as consumed: finish)
    custom = None if rec.had_backward else _user_function_behind(result)
    if custom is not None:
        # Its gradient is the user's backward (a custom op's registered
        # formula), which only the eager graph runs: a compiled call's
        # backward would differentiate the recorded forward instead.  This
        # call ran eagerly; so do later ones of this signature.
        out, result = plain(result), None
        _settle_items(rec)
        return out, (f"a returned tensor's gradient goes through {custom} "
                     "(Python), which a backward outside the compiled call cannot run; call "
                     "backward() inside the compiled function to compile it, or this "
                     "signature runs eagerly")
    before_tensors = env.tensors
    rec.entry_modes(1)      # flags train()/eval() set: compiled calls set them too
    try:
        env_after = env.snapshot()
    finally:
        rec.entry_modes(2)
    # The tensors the call could read as state are those there before it
    # (an argument it stored on an object is not state: _state_identities).
    env.tensors = before_tensors
    replayed = _plain_object_attrs(env, rec, env_before, env_after)
    # Only where a tensor was there before: an attribute that held None
    # keeps that in the guard (the call may have decided on it: a lazily
    # made scale), so the next call retraces once, as a module's does.
    replayed = [p for p in replayed if (lifted_state.entry_at(env_before, p) or ("",))[0] == "T"]
    if replayed:
        # Tensors the call stored on plain objects (a pix2pix BaseModel's
        # self.fake_B): set again by each compiled call, as a module's are.
        env_before = lifted_state.coarsen(env_before, replayed, lifted_state.ANY_TENSOR)
        env_after = lifted_state.coarsen(env_after, replayed, lifted_state.ANY_TENSOR)
    mods = attr_replay.modules(rec.attr_writes)
    if mods:
        # The attributes compiled calls set are no side effect to refuse; the
        # guard keeps whether each held None (ReplayedAttr).
        read = rec.state_read()
        env_after = attr_replay.coarsen(env_after, mods, lambda a: None)
        env_compare = attr_replay.coarsen(env_before, mods, lambda a: None)
        env_before = attr_replay.coarsen(env_before, mods, lambda a: replayed_token(a, read))
    else:
        env_compare = env_before
    if lifted is not None:
        # The lifted numbers' values are the LiftedGuard's to check.
        env_before = lifted_state.coarsen(env_before, lifted.paths)
        env_compare = lifted_state.coarsen(env_compare, lifted.paths)
        env_after = lifted_state.coarsen(env_after, lifted.paths)
        lifted_mods = lifted_state.module_attrs(lifted.locations)
        if lifted_mods:
            # a module's lifted attribute (set between calls): its entry in
            # a snapshot that holds the module is any number
            env_before, env_compare, env_after = (
                attr_replay.coarsen(e, lifted_mods, lifted_state.lifted_entry)
                for e in (env_before, env_compare, env_after))
    try:
        trace = rec.finish(result)
        name_trace(trace, fn, args, kwargs, others)
        trace.guards.append((env, env_before))
        if lifted is not None:
            g = lifted.guard()
            trace.guards.append((g, g.value()))
            trace.lifted = lifted.locations
        _check_argument_aliasing(rec, trace, leaves)
    except TraceError as e:
        if fallback:
            out, result = plain(result), None
            _settle_items(rec)
            return out, str(e)
        raise
    result = plain(result)
    kept = _kept_item(rec.items)
    if kept is not None:
        # (an attribute, a global, a list the function appended to: compiled
        # calls would leave the first call's number there)
        what = "random.random()" if type(kept) is DrawValue else "item()"
        msg = (f"{format_location(kept.where)}: the number {what} gave here is kept after "
               f"the call (stored in an attribute, a global or a container of the program's "
               f"state); compiled calls would leave this call's number there. Inside "
               f"tracec.compile such a number may only be returned, or use "
               f"tracec.compile(fn, fallback=\"eager\").")
        if fallback:
            kept = None
            _settle_items(rec)
            return result, msg
        rec.items = []
        raise TraceError(msg)
    rec.items = []
    env_changed = env_after != env_compare
    # Optimizers guard themselves, but not the learning rate compiled calls
    # refresh: a call that changed one (scheduler.step() inside) is found here.
    opt_change, opt_locs = lifted_state.optimizer_changes(opt_before, lifted)
    trace.optimizer_numbers = opt_before
    if env_changed or opt_change:
        changes: list | None = []
        if env_changed:
            trace.mutated = env.describe_change(env_compare, env_after)
            trace.mutated_root = env.changed_root(env_compare, env_after)
            changes = lifted_state.scalar_changes(env, env_compare, env_after)
        else:
            trace.mutated = opt_change
            trace.mutated_root = opt_change.split(" ")[0]
        if changes is not None and opt_locs is not None:
            trace.scalar_changes = (changes + opt_locs) or None
    return result, trace


def _returnable_plain(x) -> bool:
    """``x`` is a plain object a compiled call may return rebuilt: its class
    is the program's own (``pytree.plain_class``), made by ``object.__new__``
    with its state in ``__dict__`` alone."""
    tx = type(x)
    return ((plain_class(tx) or getattr(tx, "_tracec_returned_by_attributes", False))
            and tx.__new__ is object.__new__ and "__slots__" not in vars(tx)
            and isinstance(getattr(x, "__dict__", None), dict))


def _user_function_behind(result):
    """``"<class>'s backward"`` of a user ``autograd.Function`` (or
    ``torch.library`` custom op) that the graph of a returned tensor
    requiring grad reaches, or the tensor hook (``register_hook``,
    ``retain_grad``) a node of it holds, or None.  (tracec's own Functions
    are excluded: their backward is the true gradient of what the trace
    records.)"""
    stack = [graph.edge_of(t) for t in tree_leaves(result)
             if isinstance(t, Tensor) and t.requires_grad]
    seen: set = set()
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, graph.FunctionNode) and not getattr(n.fn_cls, "traced", None) and (
                n.fn_cls.__module__.split(".")[0] != "tracec"
                or n.fn_cls.__module__ == "tracec.library") and \
                not getattr(n.ctx, "_recorded_vjp", False):    # (tracec.custom_vjp in the trace)
            return f"{n.fn_cls.__name__}'s backward"
        if traced_tensor_hooks.hooked_nodes([n]):
            return traced_tensor_hooks.hook_name(n.pre_hooks[0])
        stack.extend(e for e in getattr(n, "edges", ()) or () if e is not None)
    return None


def _inert(items: list) -> None:
    # (no loop variable left in the caller's frame: _kept_item counts references)
    for i in range(len(items)):
        items[i].refuse = None


def _settle_items(rec) -> None:
    """After a call that runs eagerly (``fallback``): the ``ItemValue``s it
    left in lists and dicts (an appended history, an attribute: an object's
    ``__dict__``), also in tuples there (``history.append((step, v))``),
    replaced by their floats, so the program's state holds the floats eager
    code would have put there."""
    items, rec.items = rec.items, []
    for i in range(len(items)):
        items[i].source = None
        if sys.getrefcount(items[i]) <= 2:
            continue
        it = items[i]
        _replace_in_referrers(it, it.value, items, 2)
        del it


def _replace_in_referrers(old, new, skip, depth: int) -> None:
    """``old`` replaced by ``new`` in the lists and dicts that hold it (and,
    ``depth`` levels up, in the lists and dicts holding the tuples that hold
    it, by a new tuple); ``skip``: a list left alone."""
    for ref in gc.get_referrers(old):
        if ref is skip:
            continue
        if type(ref) is list:
            for k, v in enumerate(ref):
                if v is old:
                    ref[k] = new
        elif type(ref) is dict:
            for k, v in list(ref.items()):
                if v is old:
                    ref[k] = new
        elif isinstance(ref, tuple) and depth > 1:
            vals = [new if v is old else v for v in ref]
            made = type(ref)(*vals) if hasattr(ref, "_fields") else type(ref)(vals)
            _replace_in_referrers(ref, made, skip, depth - 1)
        elif not isinstance(ref, type) and isinstance(getattr(ref, "__dict__", None), dict):
            # Python 3.13 keeps an instance's attributes inline: the object
            # itself refers to the value, not a dict
            d = ref.__dict__
            for k, v in list(d.items()):
                if v is old:
                    d[k] = new


def _kept_item(items: list):
    """The first of ``items`` (``ItemValue``s; the function has returned and
    its result holds none any more) that something besides ``items`` still
    refers to: stored in Python state by the call; else None."""
    for i in range(len(items)):
        items[i].source = None    # (the trace holds its value; the tensor may go)
        # the list's reference and getrefcount's argument
        if sys.getrefcount(items[i]) > 2:
            return items[i]
    return None


def _plain_object_attrs(env, rec, before, after) -> list:
    """Snapshot paths of plain (non-Module) objects' attributes, and of
    dicts' string-keyed entries, the call set to a tensor, added to
    ``rec.attr_writes`` (replayed by compiled calls: ``setattr`` or an item
    store); one whose previous tensor the trace read only where compiled
    calls can read the attribute's tensor of the call instead (an object's
    attribute, not written in place: ``Recording.attr_state``), else it
    would read a stale object at the next call."""
    read = {id(spec.source) for spec in rec.inputs if spec.kind == "state"}
    out = []
    for p in lifted_state.tensor_attr_changes(before, after):
        loc = lifted_state.resolve(env, p)
        if loc is None or isinstance(loc.container, Module) or not (
                loc.kind == "attr" or (loc.kind == "item" and type(loc.container) is dict)):
            continue
        old = lifted_state.entry_at(before, p)
        if old is not None and old[0] == "T" and old[1] in read:
            src = next(spec.source for spec in rec.inputs
                       if spec.kind == "state" and id(spec.source) == old[1])
            if loc.kind != "attr" or src.requires_grad or id(src) in rec.written \
                    or rec.result_ids is None or id(src) in rec.result_ids \
                    or any(src is t for _, _, v in rec.attr_writes.values()
                           for t in (tensor_leaves(v) or ())) \
                    or any(lifted_state.entry_at(after, q) == old
                           for q in lifted_state.tensor_attr_changes(before, after) if q != p):
                continue
            # state kept on the object (a trainer's self.ema = 0.9 * self.ema
            # + 0.1 * loss): read at each call from the attribute, as a
            # module's (Recording.attr_state)
            rec.attr_entry.setdefault((id(loc.container), loc.key), (loc.container, loc.key, src))
        value = loc.get()
        if not isinstance(value, Tensor) or value.dtype.category == 3:
            continue
        rec.attr_writes[(id(loc.container), loc.key)] = (loc.container, loc.key, value)
        out.append(p)
    return out


def _hook_ids(leaves) -> tuple:
    """``(index, hooks)`` of the ``leaves`` that hold hooks, each hook as
    ``_hook_key``."""
    return tuple((i, tuple(map(_hook_key, t._hooks))) for i, t in enumerate(leaves) if t._hooks)


def _post_accumulate_ids(leaves) -> tuple:
    """``(index, hook ids)`` of the ``leaves`` holding
    ``register_post_accumulate_grad_hook`` hooks."""
    if not POST_ACCUMULATE_HOOKS:
        return ()
    out = []
    for i, t in enumerate(leaves):
        entry = POST_ACCUMULATE_HOOKS.get(id(t))
        if entry is not None and entry[0]() is t and entry[1]:
            out.append((i, tuple(map(id, entry[1]))))
    return tuple(out)


def _hook_key(h):
    """A hook's identity and what its closure cells, defaults and the globals
    it names hold (numbers by value: ``lambda g: g.clamp(-clip, clip)`` with
    ``clip`` rebound is another hook to a trace that ran it)."""
    cells = tuple(_cell_key(c) for c in getattr(h, "__closure__", None) or ())
    code, g = getattr(h, "__code__", None), getattr(h, "__globals__", None)
    names = () if code is None or g is None else tuple(
        (n, _value_key(g.get(n))) for n in sorted(guards_global_names(code)))
    return (id(h), cells, tuple(map(_value_key, getattr(h, "__defaults__", None) or ())), names)


def _cell_key(c):
    try:
        return _value_key(c.cell_contents)
    except ValueError:      # an empty cell
        return None


def _value_key(v):
    """Numbers by value, lists, tuples and dicts by contents, else identity."""
    return (type(v), frozen(v, 2))


def _leaf_hooks_kept() -> str | None:
    """Why the call just recorded cannot be replayed: it registered a hook
    on a leaf and left it there (eager calls would add one more each time)."""
    added = list(LEAF_HOOKS_ADDED)
    LEAF_HOOKS_ADDED.clear()
    for t, h in added:
        if any(h is x for x in t._hooks or ()):
            return ("a hook registered on a leaf tensor inside the compiled function stays "
                    "registered after the call (eager calls would add one more each time); "
                    "remove it in the call (handle.remove()) or register it once outside")
    return None


def _changed_arguments(fn, args, kwargs, spec, leaves) -> str | None:
    """Why the call just recorded cannot be replayed by compiled code, or
    None: it changed its argument containers in place."""
    spec2, leaves2 = flatten_args(args, kwargs)
    if spec2 != spec or [id(t) for _, t in leaves2] != [id(t) for _, t in leaves]:
        where = _first_difference(leaves, leaves2) or "a container argument"
        return (f"{function_label(fn)} changed {where} in place (a list, dict or dataclass "
                "argument); compiled calls would not repeat that Python side effect. Return "
                "the new values instead (e.g. `return loss, (h, c)`)")
    return None


def _side_effects(fn, rng_before, py_draws=0) -> str | None:
    """Why the call just recorded cannot be replayed by compiled code, or
    None: it drew from Python's or NumPy's global random generator (other
    than the ``py_draws`` ``random.random()`` calls it recorded)."""
    name = function_label(fn)
    if py_draws:
        replay = random.Random()
        replay.setstate(rng_before[0])
        for _ in range(py_draws):
            replay.random()
        if replay.getstate() == random.getstate():
            # every draw from Python's generator is one the trace recorded
            rng_before = (random.getstate(),) + tuple(rng_before[1:])
    drew = GlobalRNGs.changed(rng_before)
    if drew is not None:
        return (f"{name} drew random numbers from {drew}; compiled calls would repeat the "
                "first call's draw. Use tracec.rand / tracec.randn / tracec.randint (traced, "
                "seeded by tracec.manual_seed) inside compiled functions")
    return None


def function_label(fn) -> str:
    """``name (file.py:line)`` of a traced function, for error messages."""
    name = getattr(fn, "__qualname__", getattr(fn, "__name__", "the function"))
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None and hasattr(fn, "forward"):      # a Module: its forward
        code = getattr(type(fn).forward, "__code__", None)
    return f"{name} ({code.co_filename}:{code.co_firstlineno})" if code is not None else name


def _first_difference(a, b):
    for (p1, t1), (p2, t2) in zip(a, b):
        if p1 != p2 or t1 is not t2:
            return f"argument {path_name(p1)}"
    if len(a) != len(b):
        longer = a if len(a) > len(b) else b
        return f"argument {path_name(longer[min(len(a), len(b))][0])}"
    return None


def _root(t):
    while t._base is not None:
        t = t._base
    return t


def _check_argument_aliasing(rec, trace, leaves) -> None:
    """Refuse what the trace's inputs cannot express: two different argument
    tensors sharing memory (views of one base) while the call writes one of
    them; record identity guards for arguments also reached as state."""
    view_roots = {id(_root(t)): path for path, t in leaves if t._base is not None}
    for s in trace.outputs:
        if s.kind == "write" and s.arg is None and id(s.target) in view_roots:
            raise TraceError(
                f"tracec.compile: the function writes in place to the argument "
                f"{path_name(view_roots[id(s.target)])}, a view of another tensor; compiled "
                "code would write the first call's base tensor. Pass the base tensor itself "
                "(and index it inside), or clone() the view")
    written_args = {id(s.target) for s in trace.outputs if s.kind == "write"
                    and s.arg is not None}
    if written_args:
        by_root: dict = {}
        for path, t in leaves:
            by_root.setdefault(id(_root(t)), {})[id(t)] = path
        for group in by_root.values():
            if len(group) > 1 and written_args & set(group):
                names = ", ".join(path_name(p) for p in group.values())
                raise TraceError(
                    f"tracec.compile: the arguments {names} share memory (views of one "
                    "tensor) and the function writes one of them in place; compiled code "
                    "treats arguments as separate buffers. Pass the base tensor once, or "
                    "clone() the views")
    state_ids = _state_identities(trace)
    for path, t in leaves:
        if id(t) in state_ids:
            trace.arg_identity.append((path[0] if len(path) == 1 else path, t))


def _state_identities(trace) -> set:
    """Identities of the tensors the guards say the trace read as state
    (module parameters, buffers and tensor attributes, optimizer state)."""
    ids = set()
    for snap, value in trace.guards:
        if isinstance(snap, EnvGuard):
            ids.update(id(t) for t in snap.tensors)
            continue
        owner = getattr(snap, "__self__", None)
        if owner is None:
            continue
        for p in getattr(owner, "_parameters", {}).values():
            ids.add(id(p))
        for b in getattr(owner, "_buffers", {}).values():
            ids.add(id(b))
        for k, v in getattr(owner, "__dict__", {}).items():
            if isinstance(v, Tensor):
                ids.add(id(v))
        state = getattr(owner, "state", None)
        if isinstance(state, dict) and hasattr(owner, "param_groups"):
            for g in owner.param_groups:
                ids.update(id(p) for p in g["params"])
            for st in state.values():
                ids.update(id(v) for v in st.values() if isinstance(v, Tensor))
    return ids
