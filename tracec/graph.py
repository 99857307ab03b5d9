"""Define-by-run autograd: backward nodes, grad mode and the engine.

Invariants:
  * A node is created for a primitive application iff grad mode is on and
    some differentiable operand requires grad; it keeps only the operands
    its primitive's VJP reads (``Primitive.save``), each with the version
    it had when saved, and the avals of the others.
  * ``backward`` runs nodes in reverse topological order; a node runs once,
    after every consumer has contributed its cotangent.
  * A saved tensor modified in place since it was saved makes the node
    raise (version counter); a freed node (``retain_graph=False``) raises
    naming ``retain_graph=True``.
  * Under ``saved_tensors_hooks`` (this thread's, ``graph_hooks.saved_hooks``) a node keeps
    what the innermost pack hook returned instead (``SavedPacked``: packed
    in PyTorch's order, no version check, unpacked at each read with the
    original's place in the graph).
  * A leaf whose gradient is complete accumulates before any other ready
    node runs (PyTorch's AccumulateGrad priority); node and tensor hooks run
    in PyTorch's order: tensor hooks, retain_grad, prehooks, the node, its
    post hooks.
This module knows tensors only through their attributes (``_node``,
``requires_grad``, ``grad``, ``_vbox``); the Tensor class sits above it.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import re
import threading
import weakref
import numpy as np

from tracec.ops import elementwise
from tracec.graph_hooks import (  # the hook state, below the engine (graph_hooks)
    DEFERRED_PACKS, GRAPH_TASKS, NODE_POST_HOOKS, NODE_PRE_HOOKS, SAVED_HOOKS, UNRECORDABLE,
    _PACK_INPLACE, GraphTask, NodeHooks, deferred_packs, refuse_in_trace, run_post_hooks,
    run_pre_hooks, saved_hooks)
from tracec.ops.core import _VALUE_TYPES, Aval, is_value
from tracec.node_views import public_edges

#: ``tensor.SYM_SHAPES`` (see there): while a symbolic trace is recorded, the
#: tape keeps an unsaved operand's shape with its symbolic sizes, so a VJP
#: reducing a cotangent to it (``sum_to``) compares sizes symbolically
#: rather than guarding them equal to the traced numbers.
SYM_SHAPES: list = []

aval_of = Aval.of


class _GradState(threading.local):
    # A class-level default: a thread that never set the mode reads True
    # without ``getattr(..., default)`` raising and catching AttributeError
    # inside (that alone cost ~0.5 µs per eager op).
    grad = True


_state = _GradState()


def is_grad_enabled() -> bool:
    return _state.grad


def _set_grad(mode: bool) -> None:
    _state.grad = bool(mode)


class set_grad_enabled(contextlib.ContextDecorator):
    """PyTorch's ``set_grad_enabled(mode)``: sets grad mode at once when
    called; as a context manager it restores the previous mode on exit; as a
    decorator the function runs under ``mode``."""

    def __init__(self, mode: bool) -> None:
        self.prev = _state.grad
        self.mode = bool(mode)
        _state.grad = self.mode

    def __call__(self, fn):
        _state.grad = self.prev      # decorating does not change the mode
        return super().__call__(fn)

    def _recreate_cm(self):
        return set_grad_enabled(self.mode)   # each decorated call sets and restores

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> bool:
        _state.grad = self.prev
        return False

    def clone(self):
        return set_grad_enabled(self.mode)


class _GradMode(contextlib.ContextDecorator):
    mode = True

    def __new__(cls, fn=None):
        # ``@no_grad`` (no parentheses) decorates ``fn`` directly, as in PyTorch.
        self = super().__new__(cls)
        return self if fn is None else self(fn)

    def __enter__(self):
        self.prev = is_grad_enabled()
        _set_grad(self.mode)
        return self

    def __exit__(self, *exc):
        _set_grad(self.prev)
        return False

    def __call__(self, fn=None):
        # Usable both as ``@no_grad`` and ``@no_grad()``.
        if fn is None:
            return self
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*a, **k):
            prev = is_grad_enabled()
            _set_grad(mode)
            try:
                return fn(*a, **k)
            finally:
                _set_grad(prev)
        return wrapper


class no_grad(_GradMode):
    mode = False


class enable_grad(_GradMode):
    mode = True


# PyTorch's grad_fn names for the primitives (composites rename their node).
BACKWARD_NAMES = {
    "add": "AddBackward0", "sub": "SubBackward0", "mul": "MulBackward0",
    "div": "DivBackward0", "pow": "PowBackward1", "neg": "NegBackward0",
    "exp": "ExpBackward0", "log": "LogBackward0", "expm1": "Expm1Backward0",
    "log1p": "Log1PBackward0", "sqrt": "SqrtBackward0",
    "rsqrt": "RsqrtBackward0", "sin": "SinBackward0", "cos": "CosBackward0",
    "tanh": "TanhBackward0", "logistic": "SigmoidBackward0", "abs": "AbsBackward0",
    "erf": "ErfBackward0", "sign": "SignBackward0", "maximum": "MaximumBackward0",
    "fmod": "FmodBackward0",
    "minimum": "MinimumBackward0", "where": "WhereBackward0", "cast": "ToCopyBackward0",
    "reduce_sum": "SumBackward1", "reduce_max": "AmaxBackward0",
    "reduce_min": "AminBackward0", "matmul": "MmBackward0", "reshape": "ViewBackward0",
    "transpose": "PermuteBackward0", "broadcast_to": "ExpandBackward0",
    "slice": "SliceBackward0", "pad": "ConstantPadNdBackward0",
    "concatenate": "CatBackward0", "take": "IndexBackward0",
    "index_add": "IndexAddBackward0", "gather": "GatherBackward0",
    "scatter_add": "ScatterAddBackward0", "scatter_max": "ScatterReduceBackward0",
    "scatter_min": "ScatterReduceBackward0", "scatter_mul": "ScatterReduceBackward0",
}

#: PyTorch's nodes that save no tensors (only sizes, dims, flags), whose
#: graph a second backward without retain_graph may go through again; tracec
#: builds them from primitives that keep constant operands (flip's and
#: upsampling's gather indices, tril's mask), which are kept past a backward
SAVES_NO_TENSORS = frozenset((
    "FlipBackward0", "TrilBackward0", "TriuBackward0", "CumsumBackward0", "DiagEmbedBackward0",
    "RollBackward0", "Rot90Backward0", "RepeatBackward0", "UpsampleNearest1DBackward0",
    "UpsampleNearest2DBackward0", "UpsampleNearest3DBackward0",
    "_UpsampleNearestExact1DBackward0", "_UpsampleNearestExact2DBackward0",
    "_UpsampleNearestExact3DBackward0"))

_FREED_MSG = (
    "Trying to backward through the graph a second time (or directly access saved "
    "tensors after they have already been freed). Saved intermediate values of the "
    "graph are freed when you call .backward() or autograd.grad(). Specify "
    "retain_graph=True if you need to backward through the graph a second time or "
    "if you need to access saved tensors after calling backward.")


def anomaly_enabled() -> bool:
    """Whether anomaly detection is on (``config`` installs the reader of its
    flag here: it imports this module, so this module cannot import it)."""
    return False


def modified_error(t, version, node=None) -> RuntimeError:
    """PyTorch's error (``SavedVariable::unpack``) for a tensor saved for
    backward at ``version`` and modified in place since: its legacy type and
    sizes, the node producing it (``node``, a saved output's own node, or
    else the tensor's grad_fn now; none for a leaf) named as PyTorch names
    it there (``Exp`` for ExpBackward0), the versions, and the anomaly hint."""
    node = node if node is not None else getattr(t, "grad_fn", None)
    which = ""
    if node is not None:
        # (PyTorch's words: ReluBackward0 is Relu, PowBackward1 Pow1, a
        # Function's MyFnBackward MyFn)
        name = re.sub(r"Backward(?:0$|(?=\d+$)|$)", "", node.name())
        if name == "CopySlices":
            name = "torch::autograd::CopySlices"
        which = f", which is output {t.output_nr} of {name},"
    hint = ("the backtrace further above shows the operation that failed to compute its "
            "gradient. The variable in question was changed in there or anywhere later. Good "
            "luck!" if anomaly_enabled() else
            "enable anomaly detection to find the operation that failed to compute its "
            "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")
    return RuntimeError(
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [{t.type()} {list(t.shape)}]{which} is at version "
        f"{t._vbox[0]}; expected version {version} instead. Hint: {hint}")


class Node(NodeHooks):
    """The backward of one primitive application (``grad_fn``)."""

    __slots__ = ("prim", "params", "saved", "avals", "edges", "_name",
                 "pre_hooks", "freed", "__weakref__")
    # (what ``named`` / ``next_functions`` / ``output_nr`` probe a node for:
    # found here, not through ``__getattr__``, which costs microseconds)
    public_node = None
    index = 0

    def __init__(self, prim, params, inputs, out, next_functions):
        self.prim = prim
        self.params = params
        save = prim.save
        if callable(save):  # the wanted cotangents are those with an edge
            save = save(inputs, tuple([e is not None for e in next_functions]))
        # Operands reach the VJP as: saved values themselves (with their
        # version, checked on use), Python scalars themselves, other values
        # as avals (``avals[i]`` is None for a saved operand).
        saved = {}
        avals = []
        i = 0
        for a in inputs:
            value = _VALUE_TYPES.get(a.__class__)  # is_value(a), inlined
            if value is None:
                value = is_value(a)
            if not value:
                avals.append(a)
            elif i in save:
                avals.append(None)
                saved[i] = (a, a._vbox[0])
            else:
                avals.append(aval_of(tuple(a.shape) if SYM_SHAPES else a._data.shape,
                                     a.dtype))
            i += 1
        save_out = prim.save_out
        if save_out and (save_out is True or save_out(inputs)):
            saved["out"] = (out, out._vbox[0])
        self.avals = tuple(avals)
        self.saved = saved
        self.edges = next_functions
        self._name = None
        self.pre_hooks = None
        self.freed = False
        if SAVED_HOOKS and saved:
            hooks = saved_hooks()
            if hooks is not None:
                if "out" in saved:
                    out._node = self   # (the pack hook sees the output's grad_fn, as PyTorch's)
                pending = deferred_packs() if DEFERRED_PACKS else None
                if pending is not None:
                    pending.append(functools.partial(self._pack, hooks))
                else:
                    self.saved = pack_saved(saved, hooks)

    def _pack(self, hooks) -> None:
        self.saved = pack_saved(self.saved, hooks)

    @property
    def next_functions(self):
        """PyTorch's view of the graph: ``((node_or_None, output_nr), ...)``."""
        return tuple((named(e), getattr(e, "index", 0)) for e in public_edges(self))

    def name(self) -> str:
        return self._name or BACKWARD_NAMES.get(self.prim.name, self.prim.name + "Backward0")

    def __repr__(self):
        # (PyTorch's repr shows the class, CopySlices, whose name() is qualified)
        return f"<{self.name().rpartition('::')[2]} object at {id(self):#x}>"

    def _saved_tensor(self, name: str, raw: bool):
        """``_saved_<name>`` / ``_raw_saved_<name>`` (the properties made
        below): the tensor this node saved under PyTorch's ``name``."""
        key = self._tensor_names().get(name)
        if key is None:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute "
                                 f"'{'_raw_saved_' if raw else '_saved_'}{name}'")
        if self.saved is None:
            raise RuntimeError(_FREED_MSG)
        return SavedTensor(self, key) if raw else self._unpack_public(key)

    def __dir__(self):
        names = {f"{p}{n}" for n in self._tensor_names() for p in ("_saved_", "_raw_saved_")}
        return sorted({a for a in super().__dir__()
                       if not a.startswith(("_saved_", "_raw_saved_"))} | names)

    def _tensor_names(self) -> dict:
        """PyTorch's names of the tensors this node saved -> their keys in
        ``saved``: its operands as ``self``, ``other`` (``mat2`` of a
        matmul; ``condition`` first for ``where``), its output ``result``."""
        if not self.saved and not self.freed:
            return {}
        names = _OPERAND_NAMES.get(self.prim.name, ("self", "other"))
        keys = {}
        for i, a in enumerate(self.avals):
            if a is None or (self.saved is not None and i in self.saved):
                keys[names[i] if i < len(names) else f"input{i}"] = i
        save_out = self.prim.save_out
        if save_out and (save_out is True or save_out(self.avals)):
            keys["result"] = "out"
        return keys

    def _unpack_public(self, key):
        """``_saved_<name>``: the tensor as backward reads it; a saved
        output as a new tensor with the output's graph, as in PyTorch."""
        t = self._unpack(key)
        if key == "out" and self.saved[key][0].__class__ is not SavedPacked:
            a = t.detach()
            a.requires_grad, a._node = t.requires_grad, t._node
            return a
        return t

    def _unpack(self, key):
        t, version = self.saved[key]
        if t.__class__ is SavedPacked:
            return t.unpack()
        if version is not None and t._vbox[0] != version:
            raise modified_error(t, version, self if key == "out" else None)
        return t

    def apply(self, g):
        if self.freed and self.saved is None:
            raise RuntimeError(_FREED_MSG)
        if self.saved.__class__ is _PackedSaved:   # unpacked in the order they were packed
            got = {k: self._unpack(k) for k in self.saved}
            primals = [got[i] if i in got else a for i, a in enumerate(self.avals)]
            return self.prim.vjp(g, *primals, out=got.get("out"), **self.params)
        primals = [self._unpack(i) if i in self.saved else a
                   for i, a in enumerate(self.avals)]
        out = self._unpack("out") if "out" in self.saved else None
        return self.prim.vjp(g, *primals, out=out, **self.params)

    def release(self):
        saved = self.saved
        if saved.__class__ is not KeptSaved and (saved or self._saves_number()) \
                and self.name() not in SAVES_NO_TENSORS:
            self.saved = None
        self.freed = True

    def _saves_number(self) -> bool:
        """PyTorch's MulBackward0 / DivBackward0 save a Python number
        operand (wrapped as a 0-d tensor, ``other``) where tracec's node
        holds the number itself: a second backward raises there too."""
        return self._name is None and self.prim.name in _NUMBER_SAVING and \
            any(a.__class__ in _NUMBERS for a in self.avals)


#: primitives whose PyTorch node saves a Python-number operand (``x * 2.0``,
#: ``x / 3``: wrapped numbers are tensors to ``mul.Tensor`` / ``div.Tensor``)
_NUMBER_SAVING = frozenset(("mul", "div"))
_NUMBERS = frozenset((int, float, complex, bool))


class KeptSaved(dict):
    """A node's ``saved`` that a backward without retain_graph keeps: the
    constants (gather indices, masks, interpolation weights) a composite
    built for an op whose PyTorch node saves no tensors (``keep_saved``)."""
    __slots__ = ()


class HeldSaved(dict):
    """A node's ``saved`` that counts as holding tensors even where tracec's
    primitive needs none (``saves_operands``): a backward without
    retain_graph frees it, as PyTorch's node, which saves its input."""
    __slots__ = ()

    def __bool__(self):
        return True


def keep_saved(t, inputs) -> None:
    """``t`` is the result of a composite (``inputs`` its tensor operands)
    whose PyTorch node saves no tensors (``Tensor.unfold``, ``F.unfold``,
    linear interpolation): the nodes from ``t`` back to ``inputs`` keep what
    they saved past a backward, so a second backward works, as PyTorch's."""
    node = getattr(t, "_node", None)
    if node is None:
        return
    stop = {id(x._node) for x in inputs if getattr(x, "_node", None) is not None}
    todo, seen = [node], set()
    while todo:
        n = todo.pop()
        if id(n) in seen or id(n) in stop or not isinstance(n, Node):
            continue
        seen.add(id(n))
        if n.saved.__class__ is dict:
            n.saved = KeptSaved(n.saved)
        todo.extend(e for e in n.edges if e is not None)


def saves_result(y):
    """``y``'s node stands for a PyTorch node that saves its result
    (``ReluBackward0``, ``SoftmaxBackward0``, ``LogSoftmaxBackward0``) where
    tracec's saves other values (a mask, the input): it keeps ``y`` with its
    version as well, so an in-place change to ``y`` before the backward
    (``nn.Dropout(inplace=True)`` after ``nn.ReLU()``) raises, as PyTorch's,
    instead of going through.  Returns ``y``."""
    node = getattr(y, "_node", None)
    if node.__class__ is Node and node.saved.__class__ is dict and "out" not in node.saved:
        node.saved["out"] = (y, y._vbox[0])
    return y


def saves_operands(*outs) -> None:
    """The nodes of ``outs`` stand for a PyTorch node that saves its input
    (``AvgPool2DBackward0``, ``AdaptiveAvgPool2DBackward0``) where tracec's
    primitives need none: a second backward without retain_graph raises
    there, as PyTorch's."""
    for t in outs:
        node = getattr(t, "_node", None)
        if isinstance(node, Node) and node.saved.__class__ is dict:
            node.saved = HeldSaved(node.saved)


# --- saved-tensor hooks ------------------------------------------------------------

class _PackedSaved(dict):
    """A node's ``saved`` once its tensors were packed (by ``pack_saved``):
    the order of its keys is the order they were packed and are unpacked."""

    __slots__ = ()


class SavedPacked:
    """A tensor saved for backward under ``saved_tensors_hooks``: what its
    pack hook returned, the unpack hook to call, and the tensor's place in
    the graph.  As in PyTorch (``SavedVariable``), the version check is
    skipped (the hooks own the value) and a tensor that required grad is
    unpacked as a new tensor with the original's ``grad_fn`` (a leaf's:
    accumulating into the leaf), so a double backward flows on."""

    __slots__ = ("packed", "hooks", "requires_grad", "node", "leaf")

    def __init__(self, t, hooks):
        if UNRECORDABLE:
            refuse_in_trace("a tensor saved for backward under "
                            "torch.autograd.graph.saved_tensors_hooks")
        self.hooks = hooks
        version = t._vbox[0]
        with no_grad():
            self.packed = hooks.pack(t)
        if t._vbox[0] != version:
            raise RuntimeError(_PACK_INPLACE)
        self.requires_grad = t.requires_grad
        self.node = t._node
        self.leaf = edge_of(t) if t.requires_grad and t._node is None else None

    def unpack(self):
        data = self.hooks.unpack(self.packed)
        if not hasattr(data, "_version"):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got "
                            f"result of type {type(data).__name__}")
        if not self.requires_grad:
            return data
        t = data.detach()
        t.requires_grad = True
        if self.node is not None:
            t._node = self.node
        else:
            t._accum = self.leaf
        return t


#: PyTorch's names of the operands a primitive's node saves (default: self, other)
_OPERAND_NAMES = {"matmul": ("self", "mat2"), "where": ("condition", "self", "other")}


class _HookPair:
    """The hooks ``SavedTensor.register_hooks`` gives one saved tensor."""

    __slots__ = ("pack", "unpack")

    def __init__(self, pack, unpack):
        self.pack, self.unpack = pack, unpack


class SavedTensor:
    """``grad_fn._raw_saved_<name>`` (PyTorch's
    ``torch._C._autograd.SavedTensor``): ``register_hooks(pack, unpack)``
    packs that one tensor at once and unpacks it when backward reads it."""

    __slots__ = ("node", "key")

    def __init__(self, node, key):
        self.node, self.key = node, key

    def register_hooks(self, pack_hook, unpack_hook) -> None:
        saved = self.node.saved
        if saved is None:
            raise RuntimeError(_FREED_MSG)
        t, version = saved[self.key]
        if t.__class__ is SavedPacked:
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already "
                               "been set. Hint: only one pair of hooks is allowed at a time.")
        saved[self.key] = (SavedPacked(t, _HookPair(pack_hook, unpack_hook)), None)


SavedTensor.__module__ = "torch._C._autograd"


def pack_saved(saved: dict, hooks) -> _PackedSaved:
    """``saved`` (a node's operands by index, its output as "out") packed by
    ``hooks`` in PyTorch's order: the operands last to first (PyTorch saves
    ``other`` before ``self``), then the output."""
    keys = sorted((k for k in saved if k != "out"), reverse=True)
    if "out" in saved:
        keys.append("out")
    return _PackedSaved((k, (SavedPacked(saved[k][0], hooks), None)) for k in keys)


for _n in ("self", "other", "mat2", "condition", "result", "input2"):
    # (properties, not __getattr__: a class with __getattr__ pays for it on
    # every attribute read, and the engine reads nodes' attributes a lot)
    setattr(Node, f"_saved_{_n}", property(lambda self, n=_n: self._saved_tensor(n, False)))
    setattr(Node, f"_raw_saved_{_n}", property(lambda self, n=_n: self._saved_tensor(n, True)))
del _n

_NODE_CLASSES: dict = {}


def named(node):
    """``node``, its class made the subclass of Node named as PyTorch's
    node class (``type(y.grad_fn).__name__ == "MulBackward0"``, which
    torchviz and printing code read). Done when a user reaches the node
    (``grad_fn``, ``next_functions``), not at construction: the hot path
    builds plain Nodes, and the name can be set after construction
    (``_name``). The subclasses add no slots, so the layout is Node's.
    A multi-output custom Function's output edge gives its Function's node
    (``public_node``), the one ``grad_fn`` of all its outputs."""
    public = getattr(node, "public_node", None)
    if public is not None:
        return public
    if isinstance(node, Node):
        short = node.name().rpartition("::")[2]
        cls = _NODE_CLASSES.get(short)
        if cls is None:
            # (PyTorch's node classes are C types: module "builtins")
            cls = _NODE_CLASSES[short] = type(short, (Node,), {"__slots__": (),
                                                               "__module__": "builtins"})
        if node.__class__ is not cls:
            node.__class__ = cls
    return node


def hold_constant(t, index: int) -> None:
    """Operand ``index`` of ``t``'s node is a constant the library built
    (affine_grid's base grid): the node holds it as it holds a Python
    scalar, not as a saved tensor, so ``release`` keeps it and a second
    backward through the node works, as through PyTorch's native op, which
    saves no tensor and rebuilds the constant."""
    node = t._node
    if isinstance(node, Node) and node.saved and index in node.saved:
        avals = list(node.avals)
        avals[index] = node.saved.pop(index)[0]
        node.avals = tuple(avals)


class FreedNode(NodeHooks):
    """The ``grad_fn`` of a compiled call's result that eager code returns
    with a graph already consumed by a ``backward()`` inside the call (an
    RNN's new hidden state): it requires grad, as eagerly, and a backward
    through it raises as eager's freed graph does."""

    __slots__ = ("_name", "pre_hooks", "__weakref__")
    edges = ()
    freed = True
    saved = None
    next_functions = ()

    def __init__(self, name: str):
        self._name = name
        self.pre_hooks = None

    def name(self) -> str:
        return self._name

    def __repr__(self):
        return f"<{self._name} object at {id(self):#x}>"

    def apply(self, g):
        raise RuntimeError(_FREED_MSG)

    def release(self):
        pass


class AccumulateGrad(NodeHooks):
    """The node of a leaf tensor: accumulates into ``.grad``."""

    __slots__ = ("variable", "__weakref__")

    edges = ()
    next_functions = ()

    def __init__(self, variable):
        self.variable = variable

    def name(self) -> str:
        return "torch::autograd::AccumulateGrad"

    def __repr__(self):
        return f"<AccumulateGrad object at {id(self):#x}>"


#: Nonzero while ``autograd.forward_ad`` computes a tangent by reverse mode:
#: a custom Function with a ``jvp`` then contributes that jvp's transpose
#: instead of calling its ``backward``.
FORWARD_AD_BACKWARD = [0]


class FunctionNode(NodeHooks):
    """The backward of a user ``autograd.Function`` application."""

    __slots__ = ("fn_cls", "ctx", "edges", "pre_hooks", "freed", "n_inputs", "outputs",
                 "in_meta", "__weakref__")

    def __init__(self, fn_cls, ctx, next_functions, n_inputs):
        self.fn_cls = fn_cls
        self.ctx = ctx
        self.edges = next_functions
        self.pre_hooks = None
        self.freed = False
        self.n_inputs = n_inputs
        self.outputs = None   # a multi-output Function's outputs (slot gradients)
        self.in_meta = None   # (dtype, shape) of each tensor input (``validate_grads``)

    @property
    def next_functions(self):
        return tuple((named(e), getattr(e, "index", 0)) for e in public_edges(self))

    @property
    def saved_tensors(self):
        """What the Function's ``ctx.saved_tensors`` reads (PyTorch's node
        attribute)."""
        return self.ctx.saved_tensors

    def name(self) -> str:
        # Built-in ops made as Functions carry PyTorch's node name (FftR2CBackward0).
        return self.fn_cls.__dict__.get("node_name") or f"{self.fn_cls.__name__}Backward"

    def __repr__(self):
        return f"<{self.name()} object at {id(self):#x}>"

    def apply(self, g):
        if self.freed:
            raise RuntimeError(_FREED_MSG)
        transpose = getattr(self.ctx, "_jvp_transpose", None)
        if transpose is not None and FORWARD_AD_BACKWARD[0]:
            # forward_ad's unpack_dual differentiates through this node: the
            # transpose of the Function's own jvp (forward_ad's docstring)
            grads = (list(g.slots.get(i) for i in range(len(self.outputs)))
                     if self.outputs is not None else [g])
            res = transpose(grads)
        elif self.outputs is not None:     # one gradient per output, in its slot
            grads = []
            for i, o in enumerate(self.outputs):
                gi = g.slots.get(i)
                if gi is None and o is not None and self.ctx.materialize_grads:
                    gi = type(o)._make(np.zeros(o._data.shape, o.dtype.np), o.dtype)
                grads.append(gi)
            res = self.fn_cls.backward(self.ctx, *grads)
        else:
            res = self.fn_cls.backward(self.ctx, g)
        if not isinstance(res, tuple):
            res = (res,)
        kinds = getattr(self.ctx, "_arg_kinds", None)
        if kinds is not None:
            res = _checked_function_grads(self, res, kinds)
        if len(res) < self.n_inputs:
            res = res + (None,) * (self.n_inputs - len(res))
        if self.in_meta is not None:
            res = validate_grads(self, res)
        return res

    def release(self):
        if self.name() in SAVES_NO_TENSORS:     # (a second backward works, as PyTorch's)
            return
        self.freed = True
        self.ctx.saved_tensors_freed = True
        # (PyTorch's node drops its SavedVariables: what a saved-tensor pack
        # hook returned is released with the graph's backward, not kept as
        # long as the node is reachable from an output)
        if hasattr(self.ctx, "_saved"):     # (a compiled call's ctx frees its own)
            self.ctx._saved = ()


def _checked_function_grads(node, res: tuple, kinds: tuple) -> tuple:
    """A user Function's backward results as PyTorch's engine accepts them:
    trailing Nones beyond the inputs dropped, then one per forward input, and
    None for each input that was not a tensor."""
    n = len(kinds)
    if len(res) > n and all(r is None for r in res[n:]):
        res = res[:n]
    if len(res) != n:
        raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                           f"(expected {n}, got {len(res)})")
    for i, (is_tensor, r) in enumerate(zip(kinds, res)):
        if not is_tensor and r is not None:
            raise RuntimeError(f"function {node.name()} returned a gradient different than None "
                               f"at position {i + 1}, but the corresponding forward input was "
                               "not a Variable")
    return res


def _expandable(shape: tuple, to: tuple) -> bool:
    """Whether ``shape`` broadcasts to ``to`` (PyTorch's ``is_expandable_to``)."""
    if len(shape) > len(to):
        return False
    return all(s == t or s == 1 for s, t in zip(reversed(shape), reversed(to)))


def validate_grads(node, grads) -> tuple:
    """The gradients a custom Function's ``backward`` returned, as PyTorch's
    engine passes them on (``validate_outputs``): one of another shape that
    the input's shape broadcasts to is summed down to it, any other shape is
    refused, and one of another dtype is cast to the input's (GPyTorch's
    RBFCovariance returns the lengthscale's gradient at the covariance's
    shape and dtype)."""
    out = list(grads)
    for i, (g, meta) in enumerate(zip(grads, node.in_meta)):
        if meta is None or g is None or not hasattr(g, "dtype"):
            continue
        dtype, shape = meta
        if tuple(g.shape) != shape:
            if not _expandable(shape, tuple(g.shape)):
                raise RuntimeError(
                    f"Function {node.name()} returned an invalid gradient at index {i} - got "
                    f"{list(g.shape)} but expected shape compatible with {list(shape)}")
            g = elementwise.sum_to(g, shape)
        if g.dtype is not dtype:
            g = elementwise.cast(g, dtype)
        out[i] = g
    return tuple(out)


def function_node_type(fn_cls):
    """The ``grad_fn`` class of ``fn_cls``'s applications: a ``FunctionNode``
    named as PyTorch names it (``<Function>Backward``), made once per
    Function class and kept, as PyTorch keeps it, in ``_backward_cls``."""
    t = fn_cls.__dict__.get("_backward_cls")
    if t is None:
        name = fn_cls.__dict__.get("node_name") or f"{fn_cls.__name__}Backward"
        t = type(name, (FunctionNode,), {"__slots__": (), "__module__": "tracec.autograd.function"})
        fn_cls._backward_cls = t
    return t

def edge_of(t):
    """The node a tensor's gradient flows into, or None."""
    if not t.requires_grad:
        return None
    if t._node is not None:
        return t._node
    acc = t._accum
    if acc is None:
        acc = t._accum = AccumulateGrad(t)
    return acc


def reached_leaves(tensors):
    """The leaf tensors the graphs of ``tensors`` reach (each once, depth
    first), lazily: a caller can stop at the first that interests it."""
    seen: set = set()
    stack = [edge_of(t) for t in tensors]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, AccumulateGrad):
            yield n.variable
            continue
        stack.extend(n.edges)


def protect_saved(node, box, stops, recorded: bool = False) -> None:
    """Before an in-place write to the storage whose version box is ``box``:
    nodes of the subgraph above ``stops`` (ids of nodes that existed before
    the op) that saved a tensor of that storage keep a copy of its current
    value instead, so that computing ``x.mul_(y)`` from ``x`` itself does not
    trip the version check (PyTorch saves the original ``self`` likewise).
    ``recorded``: a tracer is recording, so the copy is made by a recorded
    op (a same-dtype cast): a trace that records this backward eagerly (a
    graph with a custom autograd.Function) then reads the traced value, not
    a constant of the first call's numbers."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n is None or id(n) in stops or id(n) in seen or not isinstance(n, Node):
            continue
        seen.add(id(n))
        for key, (t, version) in list((n.saved or {}).items()):
            if version is not None and t._vbox is box:
                if recorded:
                    with no_grad():
                        copy = elementwise.cast(t, t.dtype)
                else:
                    copy = type(t)._make(t._data.copy(), t.dtype)
                copy._vbox = [version]
                n.saved[key] = (copy, version)
        stack.extend(n.edges)


#: Nodes whose gradient into a leaf PyTorch makes a sparse COO tensor: the
#: row lookups of ``embedding`` / ``embedding_bag`` with ``sparse=True``
#: (``mark_sparse_grad_node``).  Any other node's contribution to a leaf is
#: dense, and PyTorch's sum of a sparse and a dense gradient is dense.
SPARSE_GRAD_NODES: "weakref.WeakSet" = weakref.WeakSet()


def mark_sparse_grad_node(t) -> None:
    """``t``'s node (a row lookup of a ``sparse=True`` weight) sends a sparse
    gradient to the weight (``run_backward``'s ``sparse`` flag)."""
    if t._node is not None:
        SPARSE_GRAD_NODES.add(t._node)


def run_backward(roots, grads, *, retain_graph: bool, create_graph: bool,
                 accumulate, capture=None, grad_call: bool = False):
    """Propagate ``grads`` from ``roots`` (tensors) to the leaves.

    ``accumulate(leaf, g, sparse)`` is called for each AccumulateGrad reached;
    ``sparse``: every contribution to ``g`` came from a node in
    ``SPARSE_GRAD_NODES`` (PyTorch's gradient would be a sparse tensor);
    ``capture`` maps nodes (or AccumulateGrads) to a slot index: their
    incoming gradient is stored into the returned list instead of flowing on
    (``autograd.grad``, which says ``grad_call``; ``backward(inputs=...)``
    captures too).
    """
    start = []
    for i, (t, g) in enumerate(zip(roots, grads)):
        # (a GradientEdge root, ``(node, output_nr, token)``: its node)
        e = t[0] if isinstance(t, tuple) and hasattr(t, "output_nr") else edge_of(t)
        if e is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               "have a grad_fn")
        start.append((e, g))
    # autograd.grad runs only the nodes on a path to a captured one, as
    # PyTorch does: the graph behind its inputs is neither run (no work, no
    # hooks) nor freed.
    needed = None if capture is None else _on_path_to(start, capture)
    # Count, for each node, how many edges from reachable nodes point at it.
    deps = {}
    seen = set()
    stack = [e for e, _ in start]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        for child in n.edges:
            if child is not None and (needed is None or id(child) in needed):
                deps[id(child)] = deps.get(id(child), 0) + 1
                stack.append(child)
    pending = {}
    dense_into = set()    # AccumulateGrads a dense gradient reached
    for e, g in start:
        pending[id(e)] = (e, g if id(e) not in pending else pending[id(e)][1] + g)
        dense_into.add(id(e))
    captured = [None] * (len(capture) if capture else 0)
    ready = [e for e, _ in start if deps.get(id(e), 0) == 0]
    leaves_ready: collections.deque = collections.deque()
    done = set()
    # The hook tables' own dicts, for a truth test per node without a call
    # of WeakKeyDictionary.__len__ / WeakSet.__contains__ (a table that is
    # not empty, dead entries aside, is still looked up as before).
    pre_table, post_table = NODE_PRE_HOOKS.data, NODE_POST_HOOKS.data
    sparse_table = SPARSE_GRAD_NODES.data
    prev_mode = is_grad_enabled()
    _set_grad(create_graph)
    GRAPH_TASKS.append(GraphTask(seen if needed is None else needed, needed is not None,
                                 capture if grad_call else None))
    try:
        while ready or leaves_ready:
            # PyTorch's ready queue runs the highest sequence number first,
            # and an AccumulateGrad has the highest of all: a leaf whose
            # gradient is complete accumulates (and runs its hooks) before
            # any other node, leaves in the order they became ready.
            node = leaves_ready.popleft() if leaves_ready else ready.pop()
            if id(node) in done:
                continue
            done.add(id(node))
            node, g = pending.pop(id(node))
            if isinstance(node, AccumulateGrad):
                hooks = node.variable._hooks
                for h in hooks or ():
                    r = h(g)
                    g = r if r is not None else g
                if capture is not None and id(node) in capture:
                    captured[capture[id(node)]] = g
                    continue
                if pre_table and node in NODE_PRE_HOOKS:
                    g = run_pre_hooks(NODE_PRE_HOOKS[node], node, g)
                accumulate(node.variable, g, id(node) not in dense_into)
                if post_table and node in NODE_POST_HOOKS:
                    run_post_hooks(NODE_POST_HOOKS[node], node, (), g)
                continue
            for h in node.pre_hooks or ():
                r = h(g)
                g = r if r is not None else g
            if capture is not None and id(node) in capture:
                captured[capture[id(node)]] = g
                if not any(c is not None and id(c) in needed for c in node.edges):
                    continue
            elif needed is not None and id(node) not in needed:
                continue
            if pre_table:
                pre = NODE_PRE_HOOKS.get(node)
                if pre:
                    g = run_pre_hooks(pre, node, g)
            grads_in = node.apply(g)
            if post_table:
                post = NODE_POST_HOOKS.get(node)
                if post:
                    grads_in = run_post_hooks(post, node, grads_in, g)
            if not retain_graph:
                node.release()
            for child, gi in zip(node.edges, grads_in):
                if child is None or (needed is not None and id(child) not in needed):
                    continue
                if gi is not None:
                    if type(child) is AccumulateGrad and not (sparse_table and
                                                              node in SPARSE_GRAD_NODES):
                        dense_into.add(id(child))
                    if id(child) in pending:
                        pending[id(child)] = (child, pending[id(child)][1] + gi)
                    else:
                        pending[id(child)] = (child, gi)
                deps[id(child)] -= 1
                if deps[id(child)] == 0:
                    if id(child) in pending:
                        (leaves_ready if type(child) is AccumulateGrad else ready).append(child)
                    else:
                        _skip(child, deps, pending, ready, done)
    finally:
        _set_grad(prev_mode)
        GRAPH_TASKS.pop()
    return captured


def _on_path_to(start, capture) -> set:
    """The ids of the nodes reachable from ``start`` (``(node, grad)``
    pairs) from which a node in ``capture`` is reachable (those included):
    the nodes ``autograd.grad`` must run.  Iterative, children before
    parents (graphs may be deeper than Python's recursion limit)."""
    needed, visited = set(), set()
    stack = [(e, False) for e, _ in start]
    while stack:
        n, children_done = stack.pop()
        if children_done:
            if id(n) in capture or any(c is not None and id(c) in needed for c in n.edges):
                needed.add(id(n))
            continue
        if id(n) in visited:
            continue
        visited.add(id(n))
        stack.append((n, True))
        stack.extend((c, False) for c in n.edges if c is not None and id(c) not in visited)
    return needed


def _skip(node, deps, pending, ready, done):
    """A node that received no gradient at all: release its children
    (iteratively: graphs may be deeper than Python's recursion limit)."""
    stack = [node]
    while stack:
        n = stack.pop()
        done.add(id(n))
        for child in n.edges:
            if child is None:
                continue
            deps[id(child)] -= 1
            if deps[id(child)] == 0:
                if id(child) in pending:
                    ready.append(child)
                else:
                    stack.append(child)
