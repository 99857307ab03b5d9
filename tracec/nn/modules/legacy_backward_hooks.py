"""``Module.register_backward_hook`` (PyTorch's deprecated, "non-full"
backward hook), done as PyTorch does it: after the forward, a node hook on
the ``grad_fn`` of the module's (first) output tensor, which sees that
node's ``grad_inputs`` / ``grad_outputs``.

Invariants: the hook sees the tuple PyTorch's node would give, in its
order and shapes, ``None`` where PyTorch's node has no gradient for an
input; a tuple it returns replaces those gradients as in PyTorch.  tracec's
node is not always PyTorch's node (``F.linear`` is a matmul and an add;
``Conv2d``'s node carries an extra edge): ``_torch_view`` maps the engine's
gradients to PyTorch's tuple and back for the nodes whose PyTorch form is
known; for a node built from several steps whose PyTorch tuple cannot be
formed (``softmax``, ``layer_norm``, ``avg_pool2d``) registering raises,
rather than run the hook on different values.
"""
from __future__ import annotations

import warnings

from tracec import graph
from tracec.tensor import Tensor

_CANNOT = ("tracec cannot reproduce the grad_input PyTorch's deprecated non-full backward hook "
           "(Module.register_backward_hook) gives on a {name} node here: tracec computes this "
           "op in several autograd steps. Use register_full_backward_hook instead.")

#: PyTorch node names -> the engine edges (by position) PyTorch's node has,
#: in its order, for tracec's primitive nodes that carry extra edges
_LAYOUT = {("ReluBackward0", 3): (2,), ("ConvolutionBackward0", 4): (0, 1, 2),
           ("NativeBatchNormBackward0", 4): (0, 1, 2), ("EmbeddingBackward0", 2): (0,),
           ("MaxPool2DWithIndicesBackward0", 3): (0,), ("MaxPool1DWithIndicesBackward0", 3): (0,)}

#: PyTorch nodes of one tensor input that tracec builds from several steps
#: (their node then has more edges than PyTorch's)
_ONE_INPUT = {"SoftmaxBackward0", "LogSoftmaxBackward0", "AvgPool2DBackward0",
              "AvgPool1DBackward0", "NativeLayerNormBackward0", "GeluBackward0",
              "TanhBackward0", "SigmoidBackward0"}

_MATMUL_VIEWS = ("ViewBackward0", "UnsafeViewBackward0", "SqueezeBackward4")


class _Layout:
    """PyTorch's tuple = the engine's gradients at ``idx`` (None where the
    edge is None); a returned tuple is put back at those positions."""

    def __init__(self, node, idx):
        self.node, self.idx = node, idx

    def to_torch(self, grads_in, g_out):
        edges = self.node.edges
        return tuple(None if edges[i] is None else grads_in[i] for i in self.idx)

    def from_torch(self, grads_in, g_out, res):
        out = list(grads_in)
        for i, r in zip(self.idx, res):
            out[i] = r
        return tuple(out)


class _FoldedMatmul:
    """``F.linear`` / ``matmul`` of an input of other than 2 dims: PyTorch's
    node is the view of the 2-D addmm / mm result, whose one grad_input is
    the output's gradient folded to ``(-1, out_features)``."""

    def __init__(self, node):
        self.node = node

    def to_torch(self, grads_in, g_out):
        g = g_out[0]
        return (None if g is None else g.reshape(-1, g.shape[-1]),)

    def from_torch(self, grads_in, g_out, res):
        r = res[0]
        if r is None:
            return tuple(None for _ in grads_in)
        return tuple(self.node.apply(r.reshape(g_out[0].shape)))


class _Addmm:
    """``F.linear`` of a 2-D input with a bias: tracec's node is the bias
    add after a matmul node; PyTorch's AddmmBackward0 gives (bias, input,
    weight.t()) gradients.  The matmul's gradients are computed here; a
    returned tuple replaces the add's bias gradient and, through a one-shot
    hook, what the matmul node sends on."""

    def __init__(self, node):
        self.node, self.mm = node, node.edges[0]

    def _mm_grads(self, grads_in):
        if grads_in[0] is None:
            return (None, None)
        return tuple(self.mm.apply(grads_in[0]))

    def to_torch(self, grads_in, g_out):
        gx, gw = self._mm_grads(grads_in)
        e = self.mm.edges
        return (None if self.node.edges[1] is None else grads_in[1],
                None if e[0] is None else gx, None if e[1] is None else gw)

    def from_torch(self, grads_in, g_out, res):
        new = tuple(res[1:])
        handle = None

        def replace(gi, go):
            handle.remove()
            return new
        handle = self.mm.register_hook(replace)
        return (grads_in[0], res[0])


def _torch_view(node):
    name = node.name()
    n = len(node.edges)
    idx = _LAYOUT.get((name, n))
    if idx is not None:
        return _Layout(node, idx)
    prim = getattr(getattr(node, "prim", None), "name", None)
    if name == "AddmmBackward0" and n == 2 and isinstance(node.edges[0], graph.Node) \
            and getattr(node.edges[0].prim, "name", None) == "matmul":
        return _Addmm(node)
    if name in _MATMUL_VIEWS and n == 2 and prim in ("add", "matmul"):
        return _FoldedMatmul(node)
    if name in _ONE_INPUT and n != 1:
        raise RuntimeError(_CANNOT.format(name=name))
    return _Layout(node, range(n))


class _WrappedHook:
    """The node hook: ``hook(module, grad_input, grad_output)`` on the
    PyTorch view of the node's gradients."""

    def __init__(self, hook, module, view):
        self.hook, self.module, self.view = hook, module, view
        self.__name__ = getattr(hook, "__name__", type(hook).__name__)

    def __call__(self, grads_in, g_out):
        gi = self.view.to_torch(grads_in, g_out)
        res = self.hook(self.module, gi, tuple(g_out))
        if res is None:
            return None
        res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
        if len(res) != len(gi):
            raise RuntimeError(f"hook '{self.__name__}' has returned an incorrect number of "
                               f"values (got {len(res)}, but expected {len(gi)})")
        return self.view.from_torch(grads_in, g_out, res)


def register(module, hooks, args, result) -> None:
    """After ``module``'s forward: ``hooks`` on its output's ``grad_fn``,
    and PyTorch's deprecation warning."""
    var = result
    while not isinstance(var, Tensor):
        if isinstance(var, dict):
            var = next(v for v in var.values() if isinstance(v, Tensor))
        else:
            var = var[0]
    node = var.grad_fn
    if node is None:
        return
    view = _torch_view(node)
    for hook in hooks:
        node.register_hook(_WrappedHook(hook, module, view))
    _maybe_warn(args, result, node)


def _maybe_warn(inputs, result, grad_fn) -> None:
    """PyTorch's ``_maybe_warn_non_full_backward_hook``, its words."""
    def warn(msg):
        warnings.warn(msg, FutureWarning, stacklevel=4)
    if not isinstance(result, Tensor):
        if not (isinstance(result, tuple) and all(isinstance(r, Tensor) for r in result)):
            return warn("Using non-full backward hooks on a Module that does not return a single "
                        "Tensor or a tuple of Tensors is deprecated and will be removed in future "
                        "versions. This hook will be missing some of the grad_output. Please use "
                        "register_full_backward_hook to get the documented behavior.")
    else:
        result = (result,)
    if not isinstance(inputs, Tensor):
        if not (isinstance(inputs, tuple) and all(isinstance(i, Tensor) for i in inputs)):
            return warn("Using non-full backward hooks on a Module that does not take as input a "
                        "single Tensor or a tuple of Tensors is deprecated and will be removed in "
                        "future versions. This hook will be missing some of the grad_input. Please "
                        "use register_full_backward_hook to get the documented behavior.")
    else:
        inputs = (inputs,)
    out_grad_fn = {r.grad_fn for r in result if r.grad_fn is not None}
    if len(out_grad_fn) == 0 or (len(out_grad_fn) == 1 and grad_fn not in out_grad_fn):
        warn("Using a non-full backward hook when outputs are nested in python data structure is "
             "deprecated and will be removed in future versions. This hook will be missing some "
             "grad_output.")
    elif len(out_grad_fn) > 1:
        warn("Using a non-full backward hook when outputs are generated by different autograd "
             "Nodes is deprecated and will be removed in future versions. This hook will be "
             "missing some grad_output. Please use register_full_backward_hook to get the "
             "documented behavior.")
    else:
        inputs_grad_fn = {i.grad_fn for i in inputs if i.grad_fn is not None}
        next_functions = {n[0] for n in grad_fn.next_functions}
        if inputs_grad_fn != next_functions:
            warn("Using a non-full backward hook when the forward contains multiple autograd "
                 "Nodes is deprecated and will be removed in future versions. This hook will be "
                 "missing some grad_input. Please use register_full_backward_hook to get the "
                 "documented behavior.")
