"""The autograd engine's hook state, below the engine (``tracec.graph``,
which re-exports these names): the hooks on nodes (``grad_fn.register_hook``
/ ``register_prehook``, ``metadata``) kept in tables beside the nodes, the
saved-tensor hooks in effect (``torch.autograd.graph.saved_tensors_hooks``
pushes onto ``SAVED_HOOKS``), the backward runs in progress
(``GRAPH_TASKS``: the graph task id and the nodes a run will execute, which
``register_multi_grad_hook`` reads), and the tracer's refusal of hooks it
cannot compile (``UNRECORDABLE``).

Invariant: every table and stack is empty unless a user installed a hook or
a backward runs, so the engine's hot paths pay one truth test each.
"""
from __future__ import annotations

import contextlib
import warnings
import weakref
from threading import get_ident

from tracec.node_views import ViewedHook, torch_view
from tracec.removable_handle import RemovableHandle


#: While ``tracec.compile`` records a call: one callable ``(what)`` that
#: refuses an autograd feature whose effect the compiled code would not
#: repeat (a saved-tensor pack hook, a hook on a ``grad_fn``): it raises
#: ``TraceError`` naming the user's line, or (``fallback="eager"``) lets the
#: call finish eagerly, where the feature works.
UNRECORDABLE: list = []


def refuse_in_trace(what: str) -> None:
    """Tell the recording tracer, if one is, that ``what`` happened."""
    for refuse in UNRECORDABLE:
        refuse(what)


#: The ``saved_tensors_hooks`` contexts in effect, innermost last, as
#: ``(thread id, hooks)``: ``hooks`` has ``pack(tensor)`` and
#: ``unpack(packed)``.  As PyTorch's, the stack is per thread (``saved_hooks``
#: reads this thread's innermost); nodes created while the list is empty
#: save tensors as they are, paying one truth test.
SAVED_HOOKS: list = []
#: ``(thread id, message)`` of the ``disable_saved_tensors_hooks`` contexts
#: in effect, innermost last: while a thread is in one, installing hooks
#: there raises its message.
SAVED_HOOKS_DISABLED: list = []

_PACK_INPLACE = ("A saved tensor pack hook is modifying its input in place. Tensors provided as "
                 "input to pack hook cannot be modified by in-place operations as this can lead "
                 "to unexpected side-effects. Please open an issue if you need to perform "
                 "in-place operations on the input to a pack hook.")


def _innermost(stack: list):
    tid = get_ident()
    for t, value in reversed(stack):
        if t == tid:
            return value
    return None


def saved_hooks():
    """This thread's innermost saved-tensor hooks, or None: also None while
    ``tracec.compile`` records, for hooks that give back the saved value
    itself (``save_on_cpu``, ``value_preserving``): packing there only
    moves memory, which the compiled step manages itself, so the step is
    recorded without them (other hooks are refused: ``UNRECORDABLE``)."""
    hooks = _innermost(SAVED_HOOKS) if SAVED_HOOKS else None
    if hooks is not None and UNRECORDABLE and getattr(hooks, "value_preserving", False):
        return None
    return hooks


def disabled_message():
    """The message of this thread's innermost ``disable_saved_tensors_hooks``,
    or None."""
    return _innermost(SAVED_HOOKS_DISABLED) if SAVED_HOOKS_DISABLED else None


#: ``(thread id, list)`` while ``packs_deferred`` runs: the packings to do
#: at its end.
DEFERRED_PACKS: list = []


def deferred_packs():
    """This thread's list of packings to do later (``packs_deferred``), or None."""
    return _innermost(DEFERRED_PACKS) if DEFERRED_PACKS else None


@contextlib.contextmanager
def packs_deferred():
    """Inside, the tensors nodes save are packed by the saved-tensor hooks
    only when the block ends: for a composite op that PyTorch runs as one
    native op, whose node saves (and so packs) after the op's side effects
    (batch_norm's running statistics).  A checkpoint's recomputation, which
    stops at the last pack, then still makes them, as PyTorch's does."""
    if saved_hooks() is None:
        yield
        return
    pending: list = []
    entry = (get_ident(), pending)
    DEFERRED_PACKS.append(entry)
    try:
        yield
    finally:
        DEFERRED_PACKS.remove(entry)
    for pack in pending:
        pack()


#: node -> {handle id: fn} of the hooks ``grad_fn.register_hook(fn)`` added
#: (PyTorch's Node post hooks): ``fn(grad_inputs, grad_outputs)`` runs once
#: the node has computed the gradients of its inputs, and a tuple it returns
#: (one entry per input) replaces them.  Kept beside the nodes, so the hot
#: path pays one emptiness test.
NODE_POST_HOOKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: node -> {handle id: fn} of ``grad_fn.register_prehook(fn)``:
#: ``fn(grad_outputs)`` runs before the node, after the hooks of the tensors
#: it produced (``pre_hooks``: ``Tensor.register_hook``, ``retain_grad``),
#: and a tuple it returns replaces the gradients.
NODE_PRE_HOOKS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: node -> the dict ``grad_fn.metadata`` returns (empty until written).
NODE_METADATA: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class NodeHooks:
    """PyTorch's ``Node.register_hook`` / ``register_prehook`` /
    ``metadata`` on a ``grad_fn`` (or an ``AccumulateGrad``): a prehook
    ``fn(grad_outputs)`` sees (and may replace, by returning a tuple) the
    gradients flowing into the node, a hook ``fn(grad_inputs,
    grad_outputs)`` the gradients it sends to its inputs (GPyTorch clears
    its prediction caches from one).  Both return a ``RemovableHandle``."""

    __slots__ = ()

    def register_hook(self, fn):
        """``fn`` sees PyTorch's ``grad_inputs`` (``tracec.node_views``);
        on the last step of an op tracec builds from several, it sees that
        step's, with a warning."""
        if UNRECORDABLE:
            refuse_in_trace(f"{self.name()}.register_hook (a hook on a grad_fn)")
        view = torch_view(self)
        if view is None:
            warnings.warn(f"{self.name()}.register_hook: tracec computes this op in several "
                          "autograd steps; the hook sees the grad_inputs of its last step, "
                          "which differ from PyTorch's", stacklevel=2)
        elif not view.identity:
            fn = ViewedHook(fn, view)
        return _add_hook(NODE_POST_HOOKS, self, fn)

    def register_prehook(self, fn):
        if UNRECORDABLE:
            refuse_in_trace(f"{self.name()}.register_prehook (a hook on a grad_fn)")
        return _add_hook(NODE_PRE_HOOKS, self, fn)

    @property
    def metadata(self) -> dict:
        return NODE_METADATA.setdefault(self, {})


def _add_hook(table, node, fn):
    hooks = table.get(node)
    if hooks is None:
        hooks = table[node] = {}
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle


def _checked(fn, r, n: int) -> tuple:
    r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
    if len(r) != n:
        name = getattr(fn, "__name__", type(fn).__name__)
        raise RuntimeError(f"hook '{name}' has returned an incorrect number of values "
                           f"(got {len(r)}, but expected {n})")
    return r


def _grad_outputs(node, g) -> tuple:
    """The gradients ``g`` flowing into ``node`` as the tuple its hooks see,
    one per output (a multi-output Function's ``_OutputGrads`` by slot)."""
    slots = getattr(g, "slots", None)
    if slots is None:
        return (g,)
    return tuple(slots.get(i) for i in range(len(node.outputs)))


def slot_hook(fn, index: int):
    """A tensor hook ``fn`` of output ``index`` of a multi-output custom
    Function, as a hook of the Function's node (where PyTorch runs every
    output's hooks, in the order they were added): it sees, and may
    replace, that output's gradient alone, and is not called without one."""
    def hook(g):
        gi = g.slots.get(index)
        if gi is None:
            return None
        r = fn(gi)
        return None if r is None else type(g)({**g.slots, index: r})
    hook._retains_grad = getattr(fn, "_retains_grad", False)
    return hook


def run_pre_hooks(hooks: dict, node, g):
    """``g`` after ``node``'s prehooks (``NODE_PRE_HOOKS``)."""
    gs = _grad_outputs(node, g)
    for fn in list(hooks.values()):
        r = fn(gs)
        if r is not None:
            gs = _checked(fn, r, len(gs))
    if getattr(g, "slots", None) is None:
        return gs[0]
    return type(g)({i: x for i, x in enumerate(gs) if x is not None})


def run_post_hooks(hooks: dict, node, grads_in, g) -> tuple:
    """``grads_in`` after ``node``'s post hooks (``NODE_POST_HOOKS``)."""
    grads_in = tuple(grads_in)
    gs = _grad_outputs(node, g)
    for fn in list(hooks.values()):
        r = fn(grads_in, gs)
        if r is not None:
            grads_in = _checked(fn, r, len(grads_in))
    return grads_in


class GraphTask:
    """One run of ``run_backward``: its id (PyTorch's graph task id, which
    ``register_multi_grad_hook`` keys its state by) and the ids of the nodes
    it will execute."""

    __slots__ = ("id", "nodes", "partial", "inputs")
    _next_id = 0

    def __init__(self, nodes: set, partial: bool, inputs):
        self.id = GraphTask._next_id
        GraphTask._next_id += 1
        self.nodes = nodes
        self.partial = partial
        self.inputs = inputs     # (autograd.grad's: the ids of the nodes it captures)


#: The backward runs in progress, innermost (a backward inside a hook) last.
GRAPH_TASKS: list = []


def checkpoint_valid() -> bool:
    """``torch.autograd._is_checkpoint_valid()``: false inside a backward
    that computes only some gradients (``autograd.grad``, ``inputs=``),
    where a reentrant checkpoint's inner backward cannot run."""
    return not GRAPH_TASKS or not GRAPH_TASKS[-1].partial


def current_graph_task_id() -> int:
    """``torch._C._current_graph_task_id()``: -1 outside a backward."""
    return GRAPH_TASKS[-1].id if GRAPH_TASKS else -1


def will_engine_execute_node(node) -> bool:
    """``torch._C._will_engine_execute_node``: whether the backward in
    progress runs ``node`` (a ``grad_fn`` or an ``AccumulateGrad``)."""
    if not GRAPH_TASKS:
        raise RuntimeError("_get_should_execute_nodes should only be called during the backward "
                           "pass")
    task = GRAPH_TASKS[-1]
    if task.inputs and id(node) in task.inputs:
        raise RuntimeError("A leaf node was passed to _will_engine_execute_node but we are "
                           "currently running autograd.grad(). This is currently not supported.")
    return id(getattr(node, "public_node", None) or node) in task.nodes
