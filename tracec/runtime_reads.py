"""The recording half of run-time integers (``tracec.runtime_int``): the
``Reader`` a recording keeps, what ``int()`` / ``item()`` of an integer
buffer give while recording (``on_item``), and the rebinding of ``name =
int(buf)`` after its store.  It sits in the tracing layer (it reads the
recording's values and locations); ``RuntimeInt`` itself sits below, where
the tensor operations that take it live.
"""
from __future__ import annotations

import dis
import operator
import sys
import weakref

import numpy as np

from tracec import dtypes as dt
from tracec.runtime_int import ACTIVE, SPECIALIZE_ON_REPLAY, RuntimeInt
from tracec.torch_function_switch import caller as skip_wrappers, unwrapped

__all__ = ["Reader", "on_item"]


class Reader:
    """The ``RuntimeInt``s of one recording (``Recording.runtime``)."""

    def __init__(self, rec):
        self.rec = rec
        self.made: list = []
        #: ``(the buffer, "int()" or "item()", where)`` of each read
        self.reads: list = []
        #: sentences for ``cache_info()``: the numbers that were specialized
        self.notes: list = []
        self._guarded: set = set()
        #: ``SPECIALIZE_ON_REPLAY`` as ``close`` found it: the ids of the
        #: buffers each view step's run-time offsets were read from
        self.replay_offsets: dict = {}

    # --- making ---------------------------------------------------------------------

    def make(self, value, tensor, sources, text, base=None, offset=0) -> RuntimeInt:
        ri = RuntimeInt(value, tensor, sources, self, text, base, offset)
        self.made.append(ri)
        return ri

    def read(self, t, source, how: str, where) -> RuntimeInt:
        """The ``RuntimeInt`` of ``t``'s value (a one-element integer
        tensor, or view of ``source``: see ``source``)."""
        from tracec import ops
        from tracec.tracing import TensorValue, format_location
        value = int(t._data.reshape(-1)[0])
        # a copy (cast always copies): the buffer may be written later in the call
        tensor = ops.cast(ops.reshape(t.detach(), ()), dt.int64)
        self.reads.append((source, how, format_location(where)))
        if not ACTIVE:
            ACTIVE.append(self)
        return self.make(value, tensor, ((source, TensorValue(source)(), where),),
                         f"{how} at {format_location(where)}")

    def source(self, t):
        """The tensor a read of ``t`` depends on, if the compiled code may
        read it at run time: ``t`` itself, a one-element integer tensor
        that existed before the call, is not an argument and was not written
        in the call so far; or the base of such a view made in the call
        (``int(self.ptrs[1])``: a small integer tensor likewise).  Else None."""
        from tracec.tracing import GUARDED_VALUE_MAX
        rec = self.rec
        if rec.suspended or t.numel() != 1 or t.dtype.category != 1 \
                or type(t._data) is not np.ndarray:
            return None
        if t._base is not None:
            if t._birth != rec.epoch or not t._view_chain:
                return None          # (a view from before the call: guarded as before)
            t = t._base
            if t.numel() > GUARDED_VALUE_MAX or t.dtype.category != 1:
                return None
        if id(t) in rec.arg_position or t._birth == rec.epoch or t._base is not None:
            return None
        from tracec.creation import GENERATOR_STATES
        if GENERATOR_STATES.get(id(t)) is t:
            return None
        e = rec.env.get(id(t))
        if e is None:
            return t
        # read already (a second int()): still its entry value?
        entry = e[0] is t and any(spec.kind == "state" and spec.source is t
                                  for spec in rec.inputs) and e[1] in rec.block.args
        return t if entry else None

    def read_at_run_time(self) -> list:
        """The reads of tensors the trace is not guarded on (here, or by
        another read of their value): ``[(id of the tensor, how, where)]``."""
        from tracec.tracing import TensorValue
        return [(id(t), how, where) for t, how, where in self.reads
                if TensorValue(t) not in self.rec._guard_seen]

    # --- specializing ---------------------------------------------------------------

    def specialize(self, ri: RuntimeInt, why: str) -> None:
        """Guard the trace on the entry value of every buffer ``ri`` comes
        from (the use needs the number itself)."""
        from tracec.tracing import TensorValue, format_location, user_location
        new = [s for s in ri.sources if id(s[0]) not in self._guarded]
        if not new:
            return
        where = format_location(user_location())
        for t, value, src in new:
            self._guarded.add(id(t))
            snap = TensorValue(t)
            if snap not in self.rec._guard_seen:
                self.rec._guard_seen.add(snap)
                self.rec.guards.append((snap, value))
            self.notes.append(
                f"{where}: the number read from a tensor at {format_location(src)} is used "
                f"here ({why}), which compiled code cannot read at run time: the trace is "
                f"specialized on its value {value} (a guard: another value retraces)")

    def offsets_specialized(self, params) -> bool:
        """Is the trace specialized on every run-time offset of the view
        step with ``params`` (none: True)?  Asked after ``close``."""
        return all(i in self._guarded for i in self.replay_offsets.get(id(params), ()))

    # --- the end of the call ----------------------------------------------------------

    def finish(self, result):
        """The call returned ``result``: the ``RuntimeInt``s in it (in
        tuples, lists and dicts) become their numbers, specialized, as do
        those kept anywhere else; all become inert.  Returns ``result``."""
        result = _returned(result, self)
        self.close()
        made = self.made
        for i in range(len(made)):
            made[i].base = made[i].tensor = None   # (links that count as references)
        for i in range(len(made)):
            if sys.getrefcount(made[i]) > 2:
                if not self.rec.suspended:
                    self.specialize(made[i], "kept after the call (an attribute, a global, a "
                                             "container)")
            made[i].reader = None
        self.made = []
        return result

    def close(self) -> None:
        """Stop handing out and tracking (also after a call that raised)."""
        _stop_rebinding()           # (first: one never made specializes its number)
        if self in ACTIVE:
            ACTIVE.remove(self)
        # (kept for the recording's finish: a returned view at a run-time
        # offset not specialized is returned as a value, not rebuilt)
        # (ids only: a reference to a RuntimeInt would count as one kept)
        self.replay_offsets.update((k, tuple(id(src[0]) for ri in v for src in ri.sources))
                                   for k, v in SPECIALIZE_ON_REPLAY.items())
        SPECIALIZE_ON_REPLAY.clear()   # (one recording at a time)
        for ri in self.made:        # (a call that raised: finish did not run)
            ri.reader = None


def _returned(x, reader):
    if type(x) is RuntimeInt:
        return x.use("returned by the function") if x.reader is reader else x.value
    if type(x) in (tuple, list):
        ys = [_returned(v, reader) for v in x]
        return x if all(a is b for a, b in zip(x, ys)) else type(x)(ys)
    if type(x) is dict:
        ys = {k: _returned(v, reader) for k, v in x.items()}
        return x if all(ys[k] is v for k, v in x.items()) else ys
    return x


# --- making: int() and item() ---------------------------------------------------------

def on_item(rec, t, caller):
    """``Recording.on_item`` for an integer tensor: what ``item()`` gives
    (a ``RuntimeInt``, or for ``name = int(t)`` the number, ``name`` being
    rebound after the store), or None (``on_concrete`` decides as before)."""
    from tracec.tensor import Tensor
    from tracec.tracing import user_location
    reader = rec.runtime
    source = reader.source(t)
    if source is None:
        return None
    code = caller.f_code
    is_int = code is unwrapped(Tensor.__int__).__code__
    if is_int or code is unwrapped(Tensor.__index__).__code__:
        user = skip_wrappers(caller.f_back)
        if user is None or sys.gettrace() is not None or _PENDING or _own(user.f_code):
            return None
        target = _store_after_call(user, is_int)
        if target is None:
            return None
        ri = reader.read(t, source, "int()" if is_int else "__index__()", user_location())
        _rebind_after_store(user, target, ri)
        return ri.value
    if _own(code):
        return None          # tracec's own code: a number it needs (specialized as before)
    return reader.read(t, source, "item()", user_location())


_TRACEC_DIR = __file__.rsplit("/", 1)[0]


def _own(code) -> bool:
    """Code of tracec itself (which reads numbers it needs as numbers)."""
    return code.co_filename.startswith(_TRACEC_DIR) and "/tests/" not in code.co_filename


#: code object -> its instructions (weakly: code made at run time may go)
_INSTRUCTIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


#: Straight-line instructions an argument expression may consist of
#: (``self.queue_ptr``, ``buf``, ``self.ptrs[0]``).
_ARGUMENT_OPS = frozenset(("LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_CONST",
                           "LOAD_ATTR", "BINARY_SUBSCR", "LOAD_CLOSURE"))


def _store_after_call(frame, is_int: bool):
    """``(local name, offset of its store, offset of the next instruction)``
    if ``frame`` is executing ``name = int(<expr>)`` (``name =
    operator.index(<expr>)`` for
    ``is_int`` False), ``<expr>`` straight-line loads, attributes and
    subscripts and ``int`` the builtin, else None.  (``Tensor.__int__``
    runs inside any C function that converts, ``range(t)``: only this
    very call has its result stored as the number.)"""
    code = frame.f_code
    ins = _INSTRUCTIONS.get(code)
    if ins is None:
        ins = _INSTRUCTIONS[code] = list(dis.get_instructions(code))
    k = next((k for k, i in enumerate(ins) if i.offset == frame.f_lasti), None)
    if k is not None and ins[k].opname == "PRECALL" and k + 1 < len(ins):
        k += 1     # (3.11's specialized PRECALL makes a builtin's call itself)
    if k is None or k + 1 >= len(ins) or not ins[k].opname.startswith("CALL") \
            or ins[k].arg != 1 or ins[k + 1].opname != "STORE_FAST":
        return None
    j = k - 1
    while j >= 0 and ins[j].opname in ("PRECALL", "CACHE"):
        j -= 1
    need = 1                      # stack slots the argument expression fills
    while need > 0:
        if j < 0 or ins[j].opname not in _ARGUMENT_OPS or getattr(ins[j], "is_jump_target",
                                                                  False):
            return None
        need -= dis.stack_effect(ins[j].opcode, ins[j].arg)
        j -= 1
    if need != 0 or j < 0:
        return None
    if ins[j].opname == "PUSH_NULL" and j > 0:
        j -= 1          # (3.13 pushes the callable, then NULL, before the arguments)
    f = ins[j]
    if is_int:
        ok = f.opname in ("LOAD_GLOBAL", "LOAD_NAME") and f.argval == "int" and \
            frame.f_globals.get("int", frame.f_builtins.get("int")) is int
    else:
        ok = f.opname in ("LOAD_ATTR", "LOAD_METHOD") and f.argval == "index" and j > 0 and \
            ins[j - 1].opname in ("LOAD_GLOBAL", "LOAD_NAME") and \
            getattr(frame.f_globals.get(ins[j - 1].argval), "index", None) is operator.index
    after = ins[k + 2].offset if k + 2 < len(ins) else None
    return (ins[k + 1].argval, ins[k + 1].offset, after) if ok else None


#: the rebinding in progress (at most one): [frame, previous f_trace settings]
_PENDING: list = []


def _rebind_after_store(frame, target, ri) -> None:
    """Once ``frame`` has executed its store to the local ``target[0]``,
    rebind that local to ``ri`` (a trace function may write ``f_locals``:
    CPython copies them back to the frame after it returns)."""
    name, store_at, after = target
    box = [ri]          # (emptied when done: a closure cell would count as a reference)

    def local(f, event, arg):
        # The first event past the store rebinds.  Python 3.12 gives no
        # opcode events to a frame already running when they are asked for,
        # only line events: one at the instruction right after the store
        # rebinds too.  An event at the store itself (a line event where
        # the assignment's target sits on another line) waits for it.  A
        # line event further on (the statement went on in the line, using
        # the plain number), a return or a raise, or a rebinding never
        # reached, specializes the number instead (``_stop_rebinding``).
        if event in ("opcode", "line"):
            if f.f_lasti == store_at:
                return local
            if event == "opcode" or f.f_lasti == after:
                if box:
                    f.f_locals[name] = box[0]
                _stop_rebinding(rebound=True)
                return None
        if event in ("line", "return", "exception"):
            _stop_rebinding()
            return None
        return local

    _PENDING.append((frame, frame.f_trace, frame.f_trace_opcodes, box))
    sys.settrace(_no_trace)
    frame.f_trace = local
    frame.f_trace_opcodes = True


def _no_trace(frame, event, arg):
    return None


def _stop_rebinding(rebound: bool = False) -> None:
    """End the rebinding in progress.  Unless it was made (``rebound``), the
    local still holds the plain number, which the trace may have used as a
    constant: the number is specialized (its buffer's value guarded), so a
    compiled call never runs with another value baked in."""
    if _PENDING:
        frame, f_trace, opcodes, box = _PENDING.pop()
        if box and not rebound and box[0].reader is not None:
            box[0].reader.specialize(box[0], "kept in a local that could not be rebound")
        box.clear()
        frame.f_trace, frame.f_trace_opcodes = f_trace, opcodes
        sys.settrace(None)


