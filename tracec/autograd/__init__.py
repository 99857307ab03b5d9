"""``tracec.autograd``: backward, grad, gradcheck and custom Functions
(submodules: ``variable``, ``function``, ``grad_mode``, ``anomaly_mode``,
and ``functional``, which ``tracec.autograd_functional`` provides).

Invariant: ``backward`` accumulates into ``.grad`` of the leaves it reaches
(in place after the first time, so references held by optimizers see it);
``grad`` returns gradients and never touches ``.grad``.
"""
from __future__ import annotations
from collections.abc import Mapping

import functools
import weakref

import numpy as np

from tracec.meta_array import meta_like

from tracec import dtypes as dt
from tracec import graph as _engine
from tracec.graph import enable_grad, no_grad, set_grad_enabled, is_grad_enabled  # noqa: F401
from tracec.graph_hooks import checkpoint_valid as _is_checkpoint_valid  # noqa: F401
from tracec.tensor import GRAD_HOOKS, RECORDERS, Tensor
from tracec.wrapper_dispatch import dispatching_operand
from tracec.autograd.function_transforms import check_under_transforms, is_user_function
from tracec.methods_compat import POST_ACCUMULATE_HOOKS, run_post_accumulate_hooks

__all__ = ["backward", "grad", "gradcheck", "gradgradcheck", "Function", "no_grad",
           "enable_grad", "set_grad_enabled", "is_grad_enabled", "Variable"]

# Callables ``(tensors, grads, inputs, create_graph)`` told of each eager
# backward before it runs; each may return a callable run after it (the
# tracer records the call as one IR op, and still lets it run).
BACKWARD_LISTENERS: list = []
#: > 0 while a tracer records an eager backward op by op (tracing.py)
RECORDING_BACKWARD = [0]
GRAD_CALL = "autograd.grad"  # the ``inputs`` a listener sees for autograd.grad()


def _seed(t: Tensor, g, create_graph, i: int = 0):
    """The gradient seeding output ``t`` (number ``i``): ``g`` checked as
    PyTorch's ``_make_grads`` does (same shape; complex only with complex)
    and cast to ``t``'s dtype as its engine does (WGAN's ``backward(mone)``
    with any real dtype), or ones for a one-element ``t``."""
    if g is None:
        if t.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        if t.dtype.is_complex:
            raise RuntimeError("grad can be implicitly created only for real scalar outputs "
                               f"but got {t.dtype}")
        ones = np.ones(t.shape, t.dtype.np)
        return Tensor._make(ones if not t.is_meta else meta_like(ones), t.dtype)
    if not isinstance(g, Tensor):
        g = Tensor._from_data(g, dtype=t.dtype)
    if tuple(g.shape) != tuple(t.shape):
        raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                           f"torch.Size({list(g.shape)}) and output[{i}] has a shape of "
                           f"torch.Size({list(t.shape)}).")
    if g.dtype is not t.dtype:
        if g.dtype.is_complex != t.dtype.is_complex:
            raise RuntimeError(f"For complex Tensors, both grad_output and output are required "
                               f"to have the same dtype. Mismatch in dtype: grad_output[{i}] has "
                               f"a dtype of {g.dtype} and output[{i}] has a dtype of {t.dtype}.")
        g = g.to(t.dtype)
    return g if create_graph else g.detach()


def _grad_copy(g: np.ndarray, param) -> np.ndarray:
    """A copy of the gradient ``g`` laid out as the C-contiguous ``param``
    (PyTorch's AccumulateGrad layout contract): ``x @ w.T``'s weight
    gradient comes transposed, and an optimizer's passes over a transposed
    operand cost ~6x a contiguous one's (the MNIST CNN's fc1)."""
    if isinstance(param, np.ndarray) and param.flags.c_contiguous:
        if (g.ndim == 2 and g.flags.f_contiguous and not g.flags.c_contiguous
                and g.shape[1] >= 8 * g.shape[0] and g.size >= 1 << 16):
            return _transposed_copy(g)
        return np.array(g, copy=True, order="C")
    if isinstance(param, np.ndarray) and _dense(param):
        # a permuted dense parameter (channels-last conv weight): the
        # gradient takes its strides, as PyTorch's
        out = np.empty_like(param, order="K")
        out[...] = g
        return out
    return np.array(g, copy=True)


def _dense(a: np.ndarray) -> bool:
    """``a``'s elements fill its memory without gaps or overlap, in some
    order of its dimensions (PyTorch's non-overlapping-and-dense)."""
    expected = a.itemsize
    for size, stride in sorted(((n, abs(s)) for n, s in zip(a.shape, a.strides) if n != 1),
                               key=lambda p: p[1]):
        if stride != expected:
            return False
        expected *= size
    return True


def _transposed_copy(g: np.ndarray, block: int = 64) -> np.ndarray:
    """``g`` (2-D, column-major, with rows much longer than its columns: the
    [out, in] weight gradient of ``x @ w.T`` for a wide input) as a C copy,
    in 64 x 64 tiles: NumPy's one pass reads each long row at a stride of
    one column, so each cache line is fetched once per row (MNIST's fc1
    [128, 9216]: 8 ms; tiled 1.2 ms)."""
    out = np.empty(g.shape, g.dtype)
    rows, cols = g.shape
    for i in range(0, rows, block):
        for j in range(0, cols, block):
            out[i:i + block, j:j + block] = g[i:i + block, j:j + block]
    return out


def _mark_sparse_grad(grad: Tensor) -> None:
    """An embedding's ``sparse=True`` gradient: a COO tensor (uncoalesced,
    as PyTorch's) over the rows that received a gradient (PyTorch lists one
    index per lookup; here each row once)."""
    from tracec.contraction import mark_sparse
    a = grad._data
    rows = np.nonzero(a.reshape(a.shape[0], -1).any(1))[0].astype(np.int64)
    mark_sparse(grad, Tensor._make(rows.reshape(1, -1), dt.int64),
                Tensor._make(np.ascontiguousarray(a[rows]), grad.dtype), len(rows) <= 1)


#: Gradients of ``sparse=True`` weights known to be dense (a dense gradient
#: was added): id -> weakref.  Only these are refused by SparseAdam and
#: turn later sparse additions dense; a gradient a compiled step assigned is
#: not marked either way and is taken as sparse (as PyTorch's would be).
DENSE_GRADS: dict = {}


def known_dense(grad) -> bool:
    """``grad`` (a ``sparse=True`` weight's gradient) was made dense."""
    e = DENSE_GRADS.get(id(grad))
    return e is not None and e() is grad


def _unmark_sparse(grad: Tensor) -> None:
    """``grad`` is a dense tensor from now on (a dense gradient was added to it)."""
    from tracec.contraction import SPARSE
    SPARSE.pop(id(grad), None)
    key = id(grad)
    DENSE_GRADS[key] = weakref.ref(grad, lambda r, k=key: DENSE_GRADS.pop(k, None))


def _accumulate(create_graph):
    # A tracer recording this backward op by op (a custom Function in a
    # compiled step): new tensors through recorded ops, not NumPy in place.
    functional = create_graph or RECORDING_BACKWARD[0] > 0

    def acc(leaf: Tensor, g: Tensor, sparse: bool = False):
        if "_no_grad_leaf" in leaf.__dict__:
            return      # (a view made under no_grad: PyTorch keeps no gradient for it)
        # ``sparse``: g is what PyTorch's engine would hand over as a sparse
        # tensor (only sparse=True lookups contributed); its AccumulateGrad
        # keeps the gradient sparse only while every addition is sparse
        if not functional and not create_graph and not GRAD_HOOKS and leaf._node is None:
            return _acc_plain(leaf, g, sparse)
        was_sparse = leaf.grad is not None and not known_dense(leaf.grad)
        fresh = leaf.grad is None
        if g.dtype is not leaf.dtype:
            g = g.to(leaf.dtype)
        if tuple(g.shape) != tuple(leaf.shape):
            g = g.expand(*leaf.shape)
        if functional and not create_graph:
            with _engine.no_grad():
                # (a sparse gradient second: PyTorch has no sparse + dense)
                leaf.grad = g + 0 if leaf.grad is None else \
                    g + leaf.grad if leaf.grad.is_sparse else leaf.grad + g
        elif leaf.grad is None:
            leaf.grad = g if create_graph or g.is_meta else \
                Tensor._make(_grad_copy(g._data, leaf._data), g.dtype)
        elif create_graph:
            leaf.grad = g + leaf.grad if leaf.grad.is_sparse else leaf.grad + g
        else:
            with _engine.no_grad():
                leaf.grad._data += g._data
                leaf.grad._vbox[0] += 1
        if getattr(leaf, "_tracec_sparse_grad", False) and not functional \
                and not create_graph and not leaf.grad.is_meta:
            if sparse and (fresh or was_sparse):
                _mark_sparse_grad(leaf.grad)
            else:
                _unmark_sparse(leaf.grad)
        if POST_ACCUMULATE_HOOKS:
            run_post_accumulate_hooks(leaf)
    return acc


def _acc_plain(leaf: Tensor, g: Tensor, sparse: bool) -> None:
    """``acc``'s work in the common case, that of a plain backward: no
    graph of the gradient (``create_graph``) or recording of this backward,
    and nothing observing ``.grad`` (``GRAD_HOOKS``), whose reads on a leaf
    (``_node`` None: no non-leaf warning) are then reads of ``_grad``.  The
    same steps as ``acc``'s general path, without the property calls and
    the grad-mode switch around a NumPy in-place add."""
    grad = leaf._grad
    sparse_leaf = getattr(leaf, "_tracec_sparse_grad", False)
    was_sparse = sparse_leaf and grad is not None and not known_dense(grad)
    if g.dtype is not leaf.dtype:
        g = g.to(leaf.dtype)
    if tuple(g.shape) != tuple(leaf.shape):
        g = g.expand(*leaf.shape)
    if grad is None:
        leaf.grad = g if g.is_meta else Tensor._make(_grad_copy(g._data, leaf._data), g.dtype)
    else:
        grad._data += g._data
        grad._vbox[0] += 1
    if sparse_leaf and not leaf._grad.is_meta:
        if sparse and (grad is None or was_sparse):
            _mark_sparse_grad(leaf._grad)
        else:
            _unmark_sparse(leaf._grad)
    if POST_ACCUMULATE_HOOKS:
        run_post_accumulate_hooks(leaf)


def _inputs_list(inputs, fn: str) -> list:
    """``inputs`` of ``backward()`` / ``grad()`` as a list, as PyTorch reads
    it: one tensor, a dict's values (no other Mapping), or any iterable;
    never empty."""
    if isinstance(inputs, Tensor) or _is_edge(inputs):
        out = [inputs]
    elif type(inputs) is dict:
        out = list(inputs.values())
    elif isinstance(inputs, Mapping):
        raise TypeError(f"`inputs` argument to `{fn}()` must be a dict, not "
                        f"{type(inputs).__name__}. Other Mapping types are not supported.")
    else:
        out = list(inputs)
    if not out:
        raise RuntimeError(f"`inputs` argument to `{fn}()` cannot be empty.")
    return out


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    if grad_variables is not None:     # PyTorch's deprecated name of grad_tensors
        grad_tensors = grad_variables if grad_tensors is None else grad_tensors
    if inputs is not None:
        inputs = _inputs_list(inputs, "backward")
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    tensors = list(tensors)
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, Tensor):
        grad_tensors = [grad_tensors]
    if retain_graph is None:
        retain_graph = create_graph
    for i, t in enumerate(tensors):
        if not t.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have "
                               "a grad_fn")
    grads = [_seed(t, g, create_graph, i)
             for i, (t, g) in enumerate(zip(tensors, grad_tensors))]
    afters = [listener(tensors, grads, inputs, create_graph)
              for listener in list(BACKWARD_LISTENERS)]
    capture = None
    if inputs is not None:
        capture = {id(x.node if _is_edge(x) else _engine.edge_of(x)): i
                   for i, x in enumerate(inputs)}
    # with ``inputs``, only they accumulate (PyTorch): every other leaf the
    # propagation reaches is left alone
    captured = _engine.run_backward(tensors, grads, retain_graph=retain_graph,
                                  create_graph=create_graph,
                                  accumulate=_accumulate(create_graph) if inputs is None
                                  else (lambda leaf, g, sparse=False: None), capture=capture)
    if inputs is not None:
        acc = _accumulate(create_graph)
        for x, g in zip(inputs, captured):
            if g is not None and not _is_edge(x):    # (a sparse=True weight's: sparse)
                acc(x, g, getattr(x, "_tracec_sparse_grad", False))
    # Last registered, first run (like nested context managers): the
    # tracer, which listens only while it records, maps the new gradients to
    # IR values before an older listener (DDP's reduction) reads them.
    for after in reversed(afters):
        if after is not None:
            after()


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False,
         materialize_grads=False):
    if not only_inputs:
        import warnings
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to "
                      "True). To accumulate gradient for other parts of the graph, please use "
                      "torch.autograd.backward.", FutureWarning, stacklevel=2)
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    if is_grads_batched:
        return _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph,
                             allow_unused, materialize_grads)
    w = dispatching_operand(*(outputs if isinstance(outputs, (list, tuple)) else (outputs,)))
    if w is not None:     # a MaskedTensor's gradients are MaskedTensors (tracec.masked)
        return w.__tracec_dispatch__(grad, (outputs, inputs),
                                     {"grad_outputs": grad_outputs, "retain_graph": retain_graph,
                                      "create_graph": create_graph, "allow_unused": allow_unused})
    keys = list(inputs.keys()) if type(inputs) is dict else None   # a dict in, a dict out
    outputs = [outputs] if isinstance(outputs, Tensor) or _is_edge(outputs) else list(outputs)
    inputs = _inputs_list(inputs, "grad")
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    if retain_graph is None:
        retain_graph = create_graph
    # torch checks the outputs (naming the first that has no graph) before
    # the inputs: under no_grad it is the outputs' error that is raised
    for i, o in enumerate(outputs):
        if not _is_edge(o) and not o.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not have "
                               "a grad_fn")
    for x in inputs:
        if not _is_edge(x) and not x.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    grads = [(g if create_graph else g.detach()) if _is_edge(o) else _seed(o, g, create_graph, i)
             for i, (o, g) in enumerate(zip(outputs, grad_outputs))]
    afters = [listener(outputs, grads, GRAD_CALL, create_graph)
              for listener in list(BACKWARD_LISTENERS)]
    # One capture slot per distinct edge: an input listed twice (grad(out,
    # (x, x))) gets the same gradient at both places, as in PyTorch.
    capture, slot_of = {}, []
    for x in inputs:
        # (a GradientEdge: the gradient flowing into its node)
        node = x.node if _is_edge(x) else _engine.edge_of(x)
        slot_of.append(capture.setdefault(id(node), len(capture)))
    try:
        by_slot = _engine.run_backward(outputs, grads, retain_graph=retain_graph,
                                     create_graph=create_graph,
                                     accumulate=lambda leaf, g, sparse=False: None, capture=capture,
                                     grad_call=True)
    finally:
        for after in reversed(afters):
            if after is not None:
                after()
    captured = [by_slot[j] for j in slot_of]
    out = []
    for i, (x, g) in enumerate(zip(inputs, captured)):
        if _is_edge(x):
            if getattr(g, "slots", None) is not None:    # a multi-output Function's node
                g = g.slots.get(x.output_nr)
            if g is None and not allow_unused and not materialize_grads:
                raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have "
                                   "been used in the graph. Set allow_unused=True if this is "
                                   "the desired behavior.")
            out.append(g)
            continue
        if g is None:
            if materialize_grads:
                g = Tensor._make(np.zeros(x.shape, x.dtype.np), x.dtype)
            elif not allow_unused:
                raise RuntimeError(f"The differentiated Tensor at index {i} appears to not have "
                                   "been used in the graph. Set allow_unused=True if this is "
                                   "the desired behavior.")
        elif tuple(g.shape) != tuple(x.shape):
            g = g.expand(*x.shape)
        out.append(g)
    return dict(zip(keys, out)) if keys is not None else tuple(out)


def _is_edge(x) -> bool:
    """Whether an input of ``grad`` is a ``GradientEdge`` (a named tuple
    ``(node, output_nr, ownership_token)``) rather than a tensor."""
    return type(x) is not Tensor and isinstance(x, tuple) and hasattr(x, "output_nr")


def _grad_batched(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    """``grad(..., is_grads_batched=True)``: the first dimension of each
    grad_output is a batch of vectors; each input's result stacks the
    vector-Jacobian products of the rows. PyTorch vmaps one backward over
    the rows; here one backward runs per row (the graph retained until the
    last): the same products, computed one at a time."""
    from tracec.shape_ops import stack
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    gos = [grad_outputs] if isinstance(grad_outputs, Tensor) else list(grad_outputs or [None] * len(outs))
    for i, (o, g) in enumerate(zip(outs, gos)):
        if g is None:
            if o.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            continue
        if tuple(g.shape[1:]) != tuple(o.shape):
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each "
                "grad_output as the batch dimension. The sizes of the remaining dimensions are "
                "expected to match the shape of corresponding output, but a mismatch was "
                f"detected: grad_output[{i}] has a shape of {g.shape[1:]!r} and "
                f"output[{i}] has a shape of {o.shape!r}. If you only want some tensors "
                "in `grad_output` to be considered batched, consider using vmap.")
    n = next(g.shape[0] for g in gos if g is not None)
    keys = list(inputs.keys()) if type(inputs) is dict else None
    xs = list(inputs.values()) if keys is not None else inputs
    if retain_graph is None:
        retain_graph = create_graph
    rows = [grad(outs, xs, [g if g is None else g[b] for g in gos],
                 retain_graph=retain_graph if b == n - 1 else True, create_graph=create_graph,
                 allow_unused=allow_unused, materialize_grads=materialize_grads)
            for b in range(n)]
    out = [None if col[0] is None else stack(list(col)) for col in zip(*rows)]
    return dict(zip(keys, out)) if keys is not None else tuple(out)


# --- custom functions -----------------------------------------------------------

class FunctionCtx:
    """``ctx`` of a custom Function: ``save_for_backward``, ``saved_tensors``,
    ``needs_input_grad``, and any attribute the user sets."""

    def __init__(self):
        self._saved = ()
        self._versions = ()
        self.saved_tensors_freed = False
        self.needs_input_grad = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self._saved = tensors
        self._versions = tuple(t._vbox[0] if isinstance(t, Tensor) else None for t in tensors)

    def save_for_forward(self, *tensors):
        """Tensors the Function's ``jvp`` reads as ``ctx.saved_tensors``."""
        self._saved_forward = tensors

    def mark_non_differentiable(self, *tensors):
        self._non_diff = tensors

    def mark_dirty(self, *tensors):
        """The inputs forward modified in place; they must be among its
        outputs, and their history continues from the Function's node
        (``Function.apply``)."""
        self._dirty = tensors

    def set_materialize_grads(self, value: bool):
        self.materialize_grads = value

    @property
    def saved_tensors(self):
        if getattr(self, "_in_jvp", False):
            return getattr(self, "_saved_forward", ())
        if self.saved_tensors_freed:
            raise RuntimeError(_engine._FREED_MSG)
        if self._versions is None:     # packed by saved_tensors_hooks: unpacked at each read
            return tuple(t.unpack() if t.__class__ is _engine.SavedPacked else t
                         for t in self._saved)
        for t, v in zip(self._saved, self._versions):
            if isinstance(t, Tensor) and t._vbox[0] != v:
                out_node = getattr(self, "_out_node", None)
                node = out_node[0]() if out_node is not None and id(t) in out_node[1] else None
                raise _engine.modified_error(t, v, node)
        return self._saved


def _pack_ctx(ctx, hooks) -> None:
    """``ctx``'s saved tensors packed by ``hooks``."""
    ctx._saved = tuple(_engine.SavedPacked(t, hooks) if isinstance(t, Tensor) else t
                       for t in ctx._saved)
    ctx._versions = None


class _OutputGrads:
    """The gradients a multi-output custom Function's node receives: one
    slot per output (those that received none stay absent); the engine
    adds two of these where PyTorch adds per-output buffers."""

    __slots__ = ("slots",)

    def __init__(self, slots):
        self.slots = slots

    def __add__(self, other):
        slots = dict(self.slots)
        for i, g in other.slots.items():
            slots[i] = g if i not in slots else slots[i] + g
        return _OutputGrads(slots)


class _FunctionOutput:
    """The ``grad_fn`` edge of output ``index`` of a multi-output custom
    Function: hands its gradient to the Function's node in its own slot
    (PyTorch's ``output_nr``); it prints as that node, which its
    ``register_hook`` / ``register_prehook`` reach (``named``); the hooks of
    the output tensor run here, on that output's gradient."""

    __slots__ = ("node", "index", "edges", "pre_hooks", "__weakref__")

    def __init__(self, node, index):
        self.node = node
        self.index = index
        self.edges = (node,)
        # (the hooks of this output's tensor: they see its gradient alone)
        self.pre_hooks = None

    @property
    def public_node(self):
        """What ``grad_fn`` and ``next_functions`` show: the Function's node."""
        return self.node

    @property
    def next_functions(self):
        return self.node.next_functions

    def name(self) -> str:
        return self.node.name()

    def __repr__(self):
        return repr(self.node)

    def apply(self, g):
        return (_OutputGrads({self.index: g}),)

    def release(self):
        pass


class Function:
    """A custom differentiable function (PyTorch's ``autograd.Function``):
    ``forward(ctx, *args)``, or ``forward(*args)`` with ``setup_context(ctx,
    inputs, output)``; ``backward(ctx, *grad_outputs)`` gets one gradient per
    output (zeros for outputs that received none, or None after
    ``ctx.set_materialize_grads(False)``); outputs marked with
    ``ctx.mark_non_differentiable`` (and integer outputs) do not require
    grad."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _engine.function_node_type(cls)   # its grad_fn class, cls._backward_cls, as PyTorch makes it

    def __init__(self, *args, **kwargs):
        # (legacy code instantiates its Functions: PyTorch warns, then refuses the call)
        if is_user_function(type(self)):
            import warnings
            warnings.warn(f"{self.__class__} should not be instantiated. Methods on autograd "
                          "functions are all static, so you should invoke them on the class "
                          "itself. Instantiating an autograd function will raise an error in a "
                          "future version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is "
                           "deprecated. Please use new-style autograd function with static "
                           "forward method. (Example: "
                           "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward "
                                  "mode AD.")

    #: ask for a generated vmap rule (tracec's vmap runs per sample: the
    #: flag, or a ``vmap`` staticmethod, is what torch.vmap requires)
    generate_vmap_rule = False

    @staticmethod
    def vmap(info, in_dims, *args):
        raise NotImplementedError("To use autograd.Function with vmap, you must either override "
                                  "the vmap staticmethod or set generate_vmap_rule=True.")

    @classmethod
    def apply(cls, *args, **kwargs):
        check_under_transforms(cls, Function)
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        separate = cls.setup_context is not Function.setup_context
        # The inputs' edges as they are before the forward runs (as PyTorch
        # collects them): a forward that shifts its input in place
        # (tabnet's sparsemax: ``input -= max_val``) must not change where
        # the gradient flows.
        nexts = tuple(_engine.edge_of(a) if isinstance(a, Tensor) else None for a in args)
        # The same for a trace: the gradient recorded beside the forward goes
        # to the inputs' values before it (copies made here), not to the
        # values an in-place forward leaves in them.
        before = _values_before(args, ctx) if RECORDERS and _engine.is_grad_enabled() else None
        with _engine.no_grad():
            out = cls.forward(*args, **kwargs) if separate else cls.forward(ctx, *args, **kwargs)
        if separate:
            cls.setup_context(ctx, args, out)
        if getattr(ctx, "_dirty", ()):
            _check_dirty(ctx._dirty, out)
        if is_user_function(cls):
            out = _fresh_outputs(cls, ctx, args, out)
            # (what the node checks the backward's gradients against)
            ctx._arg_kinds = tuple(isinstance(a, Tensor) for a in args)
        if _engine.is_grad_enabled() and any(ctx.needs_input_grad):
            node = _engine.function_node_type(cls)(cls, ctx, nexts, len(args))
            hooks = _engine.saved_hooks() if _engine.SAVED_HOOKS and ctx._saved else None
            if hooks is not None:
                # (PyTorch packs what forward saved once it has returned)
                pending = _engine.deferred_packs()
                if pending is not None:
                    pending.append(functools.partial(_pack_ctx, ctx, hooks))
                else:
                    _pack_ctx(ctx, hooks)
            node.in_meta = tuple((a.dtype, tuple(a.shape)) if isinstance(a, Tensor) else None
                                 for a in args)
            outs = out if isinstance(out, tuple) else (out,)
            non_diff = {id(t) for t in getattr(ctx, "_non_diff", ())}
            if isinstance(out, tuple):
                node.outputs = tuple(o if isinstance(o, Tensor) else None for o in outs)
            for i, o in enumerate(outs):
                if not isinstance(o, Tensor):
                    continue
                if id(o) in non_diff or not (o.dtype.is_floating_point or o.dtype.category == 3):
                    o.requires_grad = False
                    o._node = None
                    continue
                o.requires_grad = True
                o._node = _FunctionOutput(node, i) if isinstance(out, tuple) else node
            if ctx._saved:
                # (a saved output changed in place is named as this node's
                # output in the error, as PyTorch's; weakly: ctx is the node's)
                ctx._out_node = (weakref.ref(node), {id(o) for o in outs})
            if RECORDERS and isinstance(out, Tensor) and out.requires_grad:
                _record_vjp(cls, ctx, args, out, before)
            has_jvp = cls.jvp is not Function.jvp
            if has_jvp or is_user_function(cls):
                # (only where an input carries a tangent: PyTorch calls jvp
                # then only, and a jvp may consume ctx state, `del ctx.result`)
                from tracec.autograd import forward_ad
                if forward_ad.has_tangent([a for a in args if isinstance(a, Tensor)]):
                    if not has_jvp:
                        cls.jvp(ctx)     # (PyTorch's NotImplementedError)
                    ctx._jvp_transpose = _jvp_transpose(cls, ctx, args, outs)
        return out

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")


def _fresh_outputs(cls, ctx, args, out):
    """What a custom Function's forward returned, as PyTorch hands it on: an
    input returned as it is (not marked dirty) becomes a new view of that
    input, so that the Function's node is the view's and the input keeps its
    own; every output that is a view remembers where it came from, for the
    refusal of an in-place write to it (``Tensor._check_inplace``)."""
    ins = {id(a) for a in args if isinstance(a, Tensor)}
    dirty = {id(d) for d in getattr(ctx, "_dirty", ())}
    non_diff = getattr(ctx, "_non_diff", None)
    outs = out if isinstance(out, tuple) else (out,)
    fresh = []
    for i, o in enumerate(outs):
        if isinstance(o, Tensor) and id(o) not in dirty:
            if id(o) in ins:
                was = o
                with _engine.no_grad():
                    o = o.view_as(o)
                if non_diff is not None and any(t is was for t in non_diff):
                    non_diff.append(o)
            if o._base is not None:
                o.__dict__["_custom_function_view"] = (i, cls.__name__)
        fresh.append(o)
    return tuple(fresh) if isinstance(out, tuple) else fresh[0]


def _jvp_transpose(cls, ctx, args, outs):
    """The transpose of ``cls.jvp`` at this application, for forward_ad's
    reverse-mode tangents: ``jvp`` runs once (it may ``del`` what it reads
    from ctx, as PyTorch's tutorial's does) on zero tangents that require
    grad, recording the linear map ``v -> jvp(v)``; the transpose of a
    cotangent list is that map's vector-Jacobian product, itself
    differentiable in the cotangents (forward_ad differentiates it again)."""
    vs = [a.detach().new_zeros(tuple(a.shape)).requires_grad_(True)
          if isinstance(a, Tensor) and (a.dtype.is_floating_point or a.dtype.category == 3)
          else None for a in args]
    ctx._in_jvp = True
    try:
        with _engine.enable_grad():
            jv = cls.jvp(ctx, *vs)
    finally:
        ctx._in_jvp = False
    jv = jv if isinstance(jv, tuple) else (jv,)
    if len(jv) != len(outs):
        raise RuntimeError(f"Function jvp returned an incorrect number of forward gradients "
                           f"(expected {len(outs)}, got {len(jv)})")
    ins = [v for v in vs if v is not None]

    def transpose(cotangents):
        pairs = [(j, c) for j, c in zip(jv, cotangents)
                 if isinstance(j, Tensor) and j.requires_grad and c is not None]
        if not pairs or not ins:
            return (None,) * len(args)
        gs = iter(grad([j for j, _ in pairs], ins, [c for _, c in pairs], retain_graph=True,
                       create_graph=True, allow_unused=True))
        return tuple(None if v is None else next(gs) for v in vs)
    return transpose


def _check_dirty(dirty, out) -> None:
    """``ctx.mark_dirty``'s checks and version bump, as PyTorch's: each
    dirty tensor is returned (``apply`` then gives it the node), is not a
    leaf requiring grad, and counts one more in-place write."""
    returned = {id(o) for o in (out if isinstance(out, tuple) else (out,))}
    if any(id(d) not in returned for d in dirty):
        raise RuntimeError("Some elements marked as dirty during the forward method were not "
                           "returned as output. The inputs that are modified inplace must all be "
                           "outputs of the Function.")
    for d in dirty:
        if d.requires_grad and d._node is None:
            raise RuntimeError("a leaf Variable that requires grad has been used in an in-place "
                               "operation.")
        if d._base is not None and _engine.is_grad_enabled() and \
                (d.requires_grad or d._base.requires_grad):
            # (PyTorch rebases the view's base through CopySlices)
            raise NotImplementedError("ctx.mark_dirty on a view of a tensor that requires grad "
                                      "is not supported by tracec")
        d._vbox[0] += 1


class _NotRecorded(Exception):
    """The user's backward, run while recording its forward, started a
    backward of its own (recompute-style backwards): not recorded."""


def _refuse_inner_backward(*_):
    raise _NotRecorded


def _values_before(args, ctx) -> list | None:
    """``(version, copy)`` of each input that needs a gradient, taken
    before a traced ``Function.forward`` runs (None for the others), or None
    if none needs one.  ``_record_vjp`` uses a copy (a recorded, differentiable
    ``clone``) in place of an input that the forward changed in place."""
    if not any(ctx.needs_input_grad):
        return None
    return [(a._version, a.clone()) if isinstance(a, Tensor) and ctx.needs_input_grad[i]
            else None for i, a in enumerate(args)]


def _record_vjp(cls, ctx, args, out, before=None) -> None:
    """While a compiled function is traced: run the user's backward once on
    a seed of ones and record it beside the forward, so that the trace's
    gradient of ``out`` (``tracec.custom_vjp``, expanded by the autodiff
    pass) is the user's backward, and a backward outside the compiled call
    can be compiled too.  The eager graph is untouched (``out`` keeps the
    Function's node).  Not recorded (the tracer then runs such calls
    eagerly, as before): tracec's own Functions, a result that is one of
    the inputs or marked dirty, a backward that fails or starts a backward
    of its own, gradients of another shape or dtype than their input."""
    mod = cls.__module__
    if (getattr(cls, "traced", None) or (mod.split(".")[0] == "tracec" and mod != "tracec.library")
            or any(out is a for a in args) or getattr(ctx, "_dirty", None)):
        return
    from tracec import ops
    xs = [i for i, a in enumerate(args) if isinstance(a, Tensor) and ctx.needs_input_grad[i]]
    with _engine.no_grad():
        seed = ops.full(tuple(out.shape), 1.0, out.dtype, like=out)
        BACKWARD_LISTENERS.insert(0, _refuse_inner_backward)
        try:
            grads = cls.backward(ctx, seed)
        except Exception:  # noqa: BLE001 - the eager backward will raise it where it belongs
            return
        finally:
            BACKWARD_LISTENERS.remove(_refuse_inner_backward)
    grads = grads if isinstance(grads, tuple) else (grads,)
    if before is not None:
        # (an input the forward shifted in place, tabnet's sparsemax's
        # ``input -= max_val``: its gradient is the value's before the shift)
        args = [b[1] if b is not None and b[0] != a._version else a
                for a, b in zip(args, before)]
    pairs = [(args[i], grads[i]) for i in xs if i < len(grads) and isinstance(grads[i], Tensor)]
    if not pairs or any(tuple(g.shape) != tuple(x.shape) or g.dtype is not x.dtype
                        for x, g in pairs):
        return
    for r in RECORDERS:
        r(None, (out, [x for x, _ in pairs], [g for _, g in pairs], seed),
          {"custom_vjp": cls.__name__}, out)
    ctx._recorded_vjp = True


# --- gradient checking ------------------------------------------------------------

def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False,
              masked=None) -> bool:
    """Compare analytic gradients with central finite differences (in the
    inputs' dtype: use float64).  Raises ``GradcheckError`` on a mismatch
    naming the input and the largest difference.  ``fast_mode`` runs the
    full check (stronger than PyTorch's fast one); ``check_forward_ad``
    checks forward mode (``forward_ad``) likewise; the batched checks are not
    available and say so."""
    for flag, name in ((check_batched_grad, "check_batched_grad"),
                       (check_batched_forward_grad, "check_batched_forward_grad")):
        if flag:
            raise NotImplementedError(f"gradcheck({name}=True): tracec checks reverse-mode "
                                      f"gradients only")
    fn = func
    inputs = _as_tuple(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    for i in diff:
        if inputs[i].dtype is not dt.float64:
            import warnings
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          "point or complex. This check will likely fail if all the inputs are "
                          "not of double precision floating point or complex. ", stacklevel=2)
    if check_forward_ad and not _check_forward_ad(fn, inputs, diff, eps, atol, rtol,
                                                  raise_exception):
        return False
    if not check_backward_ad:
        return True
    outs = _as_tuple(fn(*inputs))
    if not any(isinstance(o, Tensor) and o.requires_grad for o in outs):
        # no differentiable output: the numerical Jacobian must be zero
        # (PyTorch's _check_no_differentiable_outputs; SinhBad's first
        # derivative under gradgradcheck)
        for oi, out in enumerate(outs):
            if isinstance(out, Tensor) and out.dtype.is_floating_point:
                for i in diff:
                    if np.any(_numeric_jacobian(fn, inputs, oi, i, eps, out.numel()) != 0):
                        if raise_exception:
                            raise GradcheckError("Numerical gradient for function expected to "
                                                 "be zero")
                        return False
        return True
    for oi, out in enumerate(outs):
        if not isinstance(out, Tensor) or not out.requires_grad:
            continue
        n_out = out.numel()
        for i in diff:
            x = inputs[i]
            analytic = np.zeros((x.numel(), n_out))
            for j in range(n_out):
                go = np.zeros(n_out, out.dtype.np)
                go[j] = 1
                g = grad(out, x, Tensor._make(go.reshape(out.shape), out.dtype),
                         retain_graph=True, allow_unused=True)[0]
                if g is not None:
                    analytic[:, j] = g._data.reshape(-1)
            numeric = _numeric_jacobian(fn, inputs, oi, i, eps, n_out)
            if not np.allclose(analytic, numeric, atol=atol, rtol=rtol):
                err = np.abs(analytic - numeric).max()
                if raise_exception:
                    raise GradcheckError(
                        f"Jacobian mismatch for output {oi} with respect to input {i},\n"
                        f"numerical:{numeric}\nanalytical:{analytic}\n"
                        f"(max abs difference {err:.3g})")
                return False
    return True


def _numeric_jacobian(fn, inputs, oi, i, eps, n_out):
    """Central differences of output ``oi`` in input ``i``: one row per
    element of the input (float64)."""
    x = inputs[i]
    numeric = np.zeros((x.numel(), n_out))
    flat = x._data.reshape(-1)
    for k in range(x.numel()):
        orig = flat[k]
        # Grad mode stays as the caller set it: gradgradcheck's fn
        # itself differentiates.
        try:
            flat[k] = orig + eps
            hi = _as_tuple(fn(*inputs))[oi]._data.reshape(-1).astype(np.float64)
            flat[k] = orig - eps
            lo = _as_tuple(fn(*inputs))[oi]._data.reshape(-1).astype(np.float64)
        finally:
            flat[k] = orig
        numeric[k] = (hi - lo) / (2 * eps)
    return numeric


def _check_forward_ad(fn, inputs, diff, eps, atol, rtol, raise_exception) -> bool:
    """gradcheck's ``check_forward_ad``: each column of the Jacobian from
    forward mode (``forward_ad`` duals, one unit tangent per input element)
    against central differences, with PyTorch's message on a mismatch."""
    from tracec.autograd import forward_ad
    outs = _as_tuple(fn(*inputs))
    for i in diff:
        x = inputs[i]
        cols = []
        for k in range(x.numel()):
            t = np.zeros(x.numel(), x.dtype.np)
            t[k] = 1
            with forward_ad.dual_level():
                args = list(inputs)
                args[i] = forward_ad.make_dual(x, Tensor._make(t.reshape(x.shape), x.dtype))
                res = _as_tuple(fn(*args))
                cols.append([None if not isinstance(o, Tensor) else
                             forward_ad.unpack_dual(o).tangent for o in res])
        for oi, out in enumerate(outs):
            if not isinstance(out, Tensor) or not out.dtype.is_floating_point:
                continue
            analytic = np.zeros((x.numel(), out.numel()))
            for k, col in enumerate(cols):
                if col[oi] is not None:
                    analytic[k] = col[oi]._data.reshape(-1)
            numeric = _numeric_jacobian(fn, inputs, oi, i, eps, out.numel())
            if not np.allclose(analytic, numeric, atol=atol, rtol=rtol):
                if raise_exception:
                    raise GradcheckError(
                        f"Jacobian computed with forward mode mismatch for output {oi} with "
                        f"respect to input {i},\nnumerical:{numeric}\nanalytical:{analytic}\n")
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False) -> bool:
    """PyTorch's gradgradcheck: gradcheck of ``grad(outputs, inputs,
    grad_outputs, create_graph=True)`` in the inputs and the grad_outputs,
    which by default are drawn as PyTorch draws them
    (``testing.make_tensor(low=-1, high=1)`` per differentiable output, from
    the global generator, so that later draws follow PyTorch's)."""
    from tracec.testing import make_tensor
    tupled_inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outputs = [o for o in _as_tuple(func(*tupled_inputs))
                   if isinstance(o, Tensor) and o.requires_grad]
        tupled_grad_outputs = tuple(
            make_tensor(tuple(x.shape), dtype=x.dtype if x.dtype.is_floating_point
                        else dt.float64, device=x.device, low=-1, high=1,
                        requires_grad=True, noncontiguous=gen_non_contig_grad_outputs)
            for x in outputs)
    else:
        tupled_grad_outputs = _as_tuple(grad_outputs)
    num_outputs = len(tupled_grad_outputs)
    diff_inputs = {i for i, x in enumerate(tupled_inputs)
                   if isinstance(x, Tensor) and x.requires_grad}
    diff_grad_outputs = {i for i, x in enumerate(tupled_grad_outputs) if x.requires_grad}

    def new_func(*args):
        input_args = tuple(x.requires_grad_() if i in diff_inputs else x
                           for i, x in enumerate(args[:len(args) - num_outputs]))
        outputs = [o for o in _as_tuple(func(*input_args))
                   if isinstance(o, Tensor) and o.requires_grad]
        gos = tuple(x.requires_grad_() if i in diff_grad_outputs else x
                    for i, x in enumerate(args[len(args) - num_outputs:]))
        grad_inputs = grad(outputs, [x for i, x in enumerate(input_args) if i in diff_inputs],
                           gos, create_graph=True, allow_unused=True)
        return tuple(g for g in grad_inputs if g is not None)

    return gradcheck(new_func, tupled_inputs + tupled_grad_outputs, eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     fast_mode=fast_mode, check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev, masked=masked)


class GradcheckError(RuntimeError):
    pass


from tracec.autograd.variable import Variable  # noqa: E402,F401  (after Function: no cycle)
from tracec.autograd import function  # noqa: E402,F401
from tracec.autograd import profiler  # noqa: E402,F401
from tracec.autograd import forward_ad  # noqa: E402,F401
from tracec.autograd import graph  # noqa: E402,F401  (torch.autograd.graph)
import importlib as _importlib  # noqa: E402

# The module torch.autograd.gradcheck; importing it binds its name on this
# package, which must stay the function, as in PyTorch.
gradcheck = _importlib.import_module("tracec.autograd.gradcheck").gradcheck
