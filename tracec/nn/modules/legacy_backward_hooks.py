"""``Module.register_backward_hook`` (PyTorch's deprecated, "non-full"
backward hook), done as PyTorch does it: after the forward, a node hook on
the ``grad_fn`` of the module's (first) output tensor, which sees that
node's ``grad_inputs`` / ``grad_outputs``.

Invariants: the hook sees the tuple PyTorch's node would give, in its
order and shapes, ``None`` where PyTorch's node has no gradient for an
input; a tuple it returns replaces those gradients as in PyTorch.  tracec's
node is not always PyTorch's node (``F.linear`` is a matmul and an add;
``Conv2d``'s node carries an extra edge): ``tracec.node_views`` maps the
engine's gradients to PyTorch's tuple and back (as for every
``grad_fn.register_hook``); for a node built from several steps whose PyTorch tuple cannot be
formed (``softmax``, ``layer_norm``, ``avg_pool2d``, a convolution
while tracing) the module's forward runs as one node named as PyTorch's
(``_ONE_NODE``), or registering raises, rather than run the hook on
different values.
"""
from __future__ import annotations

import warnings
import weakref

from tracec import graph
from tracec.autograd import Function, grad
from tracec.nn.modules.backward_hooks import GLOBAL_KIND, global_backward_hooks
from tracec.node_views import torch_view
from tracec.tensor import RECORDERS, Tensor

_CANNOT = ("tracec cannot reproduce the grad_input PyTorch's deprecated non-full backward hook "
           "(Module.register_backward_hook) gives on a {name} node here: tracec computes this "
           "op in several autograd steps. Use register_full_backward_hook instead.")


#: [n]: how many modules with deprecated backward hooks are running their
#: forward: the ``_ONE_NODE`` modules they call run as one node too (their
#: node may be the hooked module's last: a Sequential ending in Softmax)
ACTIVE = [0]
_NN_MODULES = ("torch.nn.modules", "tracec.nn.modules")   # (tracec's, as torch or as itself)
#: PyTorch's modules whose forward is one autograd node there and several
#: in tracec: class name -> (PyTorch's node, the parameters
#: that are its inputs after the module's input)
_ONE_NODE = {
    **{f"BatchNorm{d}d": ("NativeBatchNormBackward0", ("weight", "bias")) for d in (1, 2, 3)},
    "LayerNorm": ("NativeLayerNormBackward0", ("weight", "bias")),
    "GroupNorm": ("NativeGroupNormBackward0", ("weight", "bias"), 3),
    # (PyTorch's prelu takes the weight viewed along the input's channel dim)
    "PReLU": ("PreluKernelBackward0", ("weight",), 1,
              lambda w, x: w.reshape((1, -1) + (1,) * (x.ndim - 2)) if x.ndim >= 2 else w),
    "Softmax": ("SoftmaxBackward0", ()),
    "AvgPool2d": ("AvgPool2DBackward0", ()),
    "AvgPool3d": ("AvgPool3DBackward0", ()),
    "AdaptiveMaxPool2d": ("AdaptiveMaxPool2DBackward0", ()),
    "AdaptiveAvgPool2d": (lambda m, x: "MeanBackward1" if m.output_size in (1, (1, 1))
                          else "AdaptiveAvgPool2DBackward0", ()),
    "LeakyReLU": ("LeakyReluBackward0", ()), "ELU": ("EluBackward0", ()),
    "SELU": ("EluBackward0", ()), "CELU": ("CeluBackward0", ()),
    "SiLU": ("SiluBackward0", ()), "Mish": ("MishBackward0", ()),
    "Softplus": ("SoftplusBackward0", ()), "Hardtanh": ("HardtanhBackward0", ()),
    "ReLU6": ("HardtanhBackward0", ()), "Hardswish": ("HardswishBackward0", ()),
    "Hardsigmoid": ("HardsigmoidBackward0", ()),
    "Upsample": (lambda m, x: _UPSAMPLE.get(m.mode, "").format(x.ndim - 2) or None, ()),
    # (eagerly tracec's convolution is one node, PyTorch's; traced, it is
    # im2col primitives, whose last node cannot give PyTorch's tuple)
    **{f"Conv{kind}{d}d": (lambda m, x: "ConvolutionBackward0" if RECORDERS
                           and m.padding_mode == "zeros" else None, ("weight", "bias"))
       for kind in ("", "Transpose") for d in (1, 2, 3)},
}
_UPSAMPLE = {"nearest": "UpsampleNearest{}DBackward0", "linear": "UpsampleLinear1DBackward0",
             "bilinear": "UpsampleBilinear2DBackward0", "bicubic": "UpsampleBicubic2DBackward0",
             "trilinear": "UpsampleTrilinear3DBackward0",
             "nearest-exact": "_UpsampleNearestExact{}DBackward0"}
#: PyTorch's modules whose last node has an input tracec's graph lacks
#: (an inner reshape or negation): their deprecated hooks are refused
_NO_VIEW = {"InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "AvgPool1d", "MaxPool1d",
            "Softmin"}
_ONE_NODE_FUNCTIONS: dict = {}
#: the last nodes of the ``_NO_VIEW`` modules run while ``ACTIVE``
_UNLIKE_TORCH: weakref.WeakSet = weakref.WeakSet()


class _OneNode(Function):
    """The module's forward as one autograd node whose inputs are PyTorch's
    node's (the module's input, then its parameters): the forward's own
    graph is kept inside and differentiated by ``backward``."""

    @staticmethod
    def forward(ctx, module, spec, x, *inputs):
        # (``inputs``: PyTorch's node's, the module's parameters as it takes
        # them; ``spec``: their names, and PyTorch's node's output count:
        # group_norm's has mean and rstd too)
        names, n_out = spec
        xl = x.detach().requires_grad_(x.requires_grad)
        with graph.enable_grad():
            out = module.forward(xl)
        ctx.inner = (out, (xl, *[getattr(module, p) for p in names]), (x, *inputs))
        return out.detach() if n_out == 1 else (out.detach(),) + (None,) * (n_out - 1)

    @staticmethod
    def backward(ctx, g, *rest):
        out, leaves, inputs = ctx.inner
        want = [t for t in leaves if isinstance(t, Tensor) and t.requires_grad]
        # (the inner graph kept for a second backward, as the outer graph;
        # differentiable under create_graph, which runs this with grad on.
        # A backward of that second-order graph frees inner nodes this reads
        # again: it raises PyTorch's freed-graph error)
        got = iter(grad(out, want, g, allow_unused=True, retain_graph=True,
                        create_graph=graph.is_grad_enabled()) if want else ())
        res = []
        for t, given in zip(leaves, inputs):
            gt = next(got) if isinstance(t, Tensor) and t.requires_grad else None
            res.append(gt.reshape(given.shape) if gt is not None else None)
        return (None, None, *res)


def forward(module, args, kwargs):
    """``module.forward(*args, **kwargs)``; for the modules of ``_ONE_NODE``
    (called on one tensor), its result from one node named as PyTorch's,
    which the deprecated hook is put on."""
    cls = type(module)
    ours = cls.__module__.rpartition(".")[0] in _NN_MODULES
    spec = _ONE_NODE.get(cls.__name__) if ours else None
    if spec is None or not graph.is_grad_enabled() or kwargs or len(args) != 1 \
            or not isinstance(args[0], Tensor):
        out = module.forward(*args, **kwargs)
        if ours and cls.__name__ in _NO_VIEW and isinstance(out, Tensor) \
                and out.grad_fn is not None:
            _UNLIKE_TORCH.add(out.grad_fn)
        return out
    name, params = spec[:2]
    n_out, view = spec[2] if len(spec) > 2 else 1, spec[3] if len(spec) > 3 else None
    if callable(name):
        name = name(module, args[0])
        if name is None:
            return module.forward(*args, **kwargs)
    fn = _ONE_NODE_FUNCTIONS.get(name)
    if fn is None:
        fn = _ONE_NODE_FUNCTIONS[name] = type(name, (_OneNode,), {
            "node_name": name, "torch_inputs": tuple(range(2, 3 + len(params)))})
    inputs = [getattr(module, p) for p in params]
    if view is not None:
        inputs = [view(t, args[0]) for t in inputs]
    out = fn.apply(module, (params, n_out), args[0], *inputs)
    return out[0] if n_out > 1 else out


class _ModuleHook:
    """``hook(module, grad_input, grad_output)`` as a node hook (PyTorch's
    ``_WrappedHook``)."""

    def __init__(self, hook, module):
        self.hook, self.module = hook, module
        self.__name__ = getattr(hook, "__name__", type(hook).__name__)

    def __call__(self, grad_input, grad_output):
        return self.hook(self.module, grad_input, tuple(grad_output))


def hooks_of(module) -> list:
    """``module``'s deprecated backward hooks: the global ones
    (``register_module_backward_hook``), then its own, as PyTorch's
    ``_get_backward_hooks``."""
    own = module.__dict__.get("_backward_hooks")
    out = list(global_backward_hooks.values()) if GLOBAL_KIND[0] is False else []
    if own and module.__dict__.get("_is_full_backward_hook") is False:
        out += own.values()
    return out


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
    if torch_view(node) is None or node in _UNLIKE_TORCH:
        raise RuntimeError(_CANNOT.format(name=node.name()))
    for hook in hooks:
        node.register_hook(_ModuleHook(hook, module))
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
