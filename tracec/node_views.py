"""PyTorch's view of one tracec autograd node: the ``grad_inputs`` tuple a
hook on it sees (``grad_fn.register_hook``, the deprecated
``Module.register_backward_hook``) and the edges ``next_functions`` lists.

tracec's node is not always PyTorch's: a primitive may carry operands
PyTorch's node lacks (relu is a ``where`` whose mask and zero come first,
convolution has a fourth edge), and ``F.linear`` is a matmul node and a
bias add renamed ``AddmmBackward0``.  ``torch_view(node)`` gives an object
with ``to_torch(grads_in, grad_outputs)`` (PyTorch's tuple, in its order
and shapes, ``None`` where PyTorch's node has no gradient),
``from_torch(grads_in, grad_outputs, res)`` (the engine's gradients after
a hook returned ``res`` in PyTorch's form) and ``next_edges()``; or
``None`` for a node that is the last step of an op tracec builds from
several (softmax, layer_norm, eval-mode batch_norm, avg_pool2d, mse_loss,
leaky_relu), whose PyTorch tuple cannot be formed from it.

Invariant: a view never changes the gradients that flow when no hook
returns a replacement.  Duck-typed over ``tracec.graph``'s node classes
(which import this module).
"""
from __future__ import annotations

#: (PyTorch name, tracec edge count) -> the tracec edges PyTorch's node has,
#: in its order, for primitive nodes carrying extra operands (a custom
#: Function class may say it as ``torch_inputs``)
_LAYOUT = {("ReluBackward0", 3): (2,), ("ConvolutionBackward0", 4): (0, 1, 2),
           ("NativeBatchNormBackward0", 4): (0, 1, 2), ("EmbeddingBackward0", 2): (0,),
           ("LogSoftmaxBackward0", 2): (0,), ("MaxPool1DWithIndicesBackward0", 3): (0,),
           ("MaxPool2DWithIndicesBackward0", 3): (0,),
           ("MaxPool3DWithIndicesBackward0", 3): (0,)}

#: renamed one-primitive nodes whose operands are PyTorch's node's inputs:
#: (PyTorch name, tracec primitive)
_EXACT_RENAMED = {("MmBackward0", "matmul"), ("SumBackward0", "reduce_sum"),
                  *((n, "reshape") for n in ("ViewBackward0", "UnsafeViewBackward0",
                                             "SqueezeBackward0", "SqueezeBackward1",
                                             "SqueezeBackward2", "SqueezeBackward4",
                                             "UnsqueezeBackward0",
                                             "ReshapeAliasBackward0")),
                  *((n, "transpose") for n in ("TBackward0", "TransposeBackward0",
                                               "PermuteBackward0")),
                  ("ExpandBackward0", "broadcast_in_dim")}

_FOLDED = ("ViewBackward0", "UnsafeViewBackward0", "SqueezeBackward4")


def _prim(node):
    return getattr(getattr(node, "prim", None), "name", None)


def _operand_ndim(node, i: int):
    a = node.avals[i]
    if a is None:
        a = node.saved[i][0] if node.saved else None
    shape = getattr(a, "shape", None)
    return None if shape is None else len(shape)


class Layout:
    """PyTorch's tuple = the engine's gradients at ``idx`` (None where the
    edge is None: a built-in node computes no gradient PyTorch does not
    need; a custom Function's node, ``returned``, passes what its backward
    returned); a returned tuple is put back at those positions."""

    def __init__(self, node, idx, returned=False):
        self.node, self.idx, self.returned = node, tuple(idx), returned
        self.identity = self.idx == tuple(range(len(node.edges))) and \
            (returned or None not in node.edges)

    def to_torch(self, grads_in, g_out):
        if self.returned:
            return tuple(grads_in[i] for i in self.idx)
        edges = self.node.edges
        return tuple(None if edges[i] is None else grads_in[i] for i in self.idx)

    def from_torch(self, grads_in, g_out, res):
        out = list(grads_in)
        for i, r in zip(self.idx, res):
            out[i] = r
        return tuple(out)

    def next_edges(self):
        return [self.node.edges[i] for i in self.idx]


class FoldedMatmul:
    """``F.linear`` / ``matmul`` of an input of other than 2 dims by a 2-D
    weight: PyTorch's node is the view of the 2-D addmm / mm result, whose
    one grad_input is the output's gradient folded to ``(-1, out)``.  (Its
    ``next_functions`` stay tracec's: the addmm node between does not
    exist here.)"""

    identity = False

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

    def next_edges(self):
        return list(self.node.edges)


class Addmm:
    """``F.linear`` of a 2-D input with a bias: tracec's node is the bias
    add after a matmul node; PyTorch's AddmmBackward0 gives (bias, input,
    weight.t()) gradients.  The matmul's are computed here; a returned
    tuple replaces the add's bias gradient and, through a one-shot hook,
    what the matmul node sends on."""

    identity = False

    def __init__(self, node):
        self.node, self.mm = node, node.edges[0]

    def to_torch(self, grads_in, g_out):
        gx, gw = (None, None) if grads_in[0] is None else tuple(self.mm.apply(grads_in[0]))
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

    def next_edges(self):
        return [self.node.edges[1], *self.mm.edges]


def torch_view(node):
    """PyTorch's view of ``node`` (see the module docstring), or None."""
    edges = getattr(node, "edges", None)
    if edges is None:
        return Layout(node, ())
    name, n = node.name(), len(edges)
    fn_cls = getattr(node, "fn_cls", None)
    idx = getattr(fn_cls, "torch_inputs", None)
    if idx is None:
        idx = _LAYOUT.get((name, n))
    if idx is None and getattr(node, "in_meta", None) is not None:
        # a custom Function's node: PyTorch gives it edges for its tensor
        # arguments only, and its hooks what backward returned for them
        return Layout(node, [i for i, m in enumerate(node.in_meta) if m is not None], True)
    if idx is not None:
        return Layout(node, idx)
    if getattr(node, "_name", None) is None:     # a primitive under its own name
        return Layout(node, range(n))
    prim = _prim(node)
    if (name, prim) in _EXACT_RENAMED:
        return Layout(node, range(n))
    if name == "AddmmBackward0" and prim == "add" and n == 2 and _prim(edges[0]) == "matmul" \
            and edges[0].name() == "MmBackward0":
        return Addmm(node)
    if name in _FOLDED and n == 2 and (
            (prim == "matmul" and _operand_ndim(node, 1) == 2)
            or (prim == "add" and name == "ViewBackward0")):
        return FoldedMatmul(node)
    return None


class TorchName(str):
    """The ``_name`` of the last node of an op tracec composes from
    primitives (``tracec.nn._grad_fn_names``), carrying ``edges``: those of
    the op's tensor inputs, PyTorch's node's inputs, which
    ``next_functions`` lists (a str: the engine reads it as the name)."""

    edges: tuple = ()


def public_edges(node):
    """The edges ``next_functions`` lists: PyTorch's node's inputs where
    tracec's node is known to differ, its own edges otherwise."""
    name = getattr(node, "_name", None)
    if name.__class__ is TorchName:
        return name.edges
    view = torch_view(node)
    return node.edges if view is None or getattr(view, "identity", False) else view.next_edges()


class ViewedHook:
    """``fn(grad_inputs, grad_outputs)`` on PyTorch's view of a node's
    gradients: what ``grad_fn.register_hook`` registers."""

    def __init__(self, fn, view):
        self.fn, self.view = fn, view
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, grads_in, g_out):
        gi = self.view.to_torch(grads_in, g_out)
        res = self.fn(gi, g_out)
        if res is None:
            return None
        res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
        if len(res) != len(gi):
            raise RuntimeError(f"hook '{self.__name__}' has returned an incorrect number of "
                               f"values (got {len(res)}, but expected {len(gi)})")
        return self.view.from_torch(grads_in, g_out, res)
