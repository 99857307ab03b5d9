"""PyTorch's ``grad_fn`` names for the functionals tracec composes from
primitives.

A loss that tracec writes as ``mean(square(x - t))`` would otherwise print
``grad_fn=<MeanBackward0>`` where PyTorch prints ``<MseLossBackward0>``;
programs print their losses, so the name is part of the output.  ``install``
wraps each listed function so that its result's last node carries PyTorch's
name, under the same conditions PyTorch's dispatcher picks it (e.g.
``NllLoss2DBackward0`` for spatial targets, nothing for weighted MSE, whose
PyTorch result comes from a plain division).  Only names change: values,
gradients and traces are the wrapped function's.
"""
from __future__ import annotations

import functools

from tracec.graph import edge_of
from tracec.node_views import TorchName
from tracec.tensor import Tensor

__all__ = ["install"]


def _nll_name(input, *args, **kwargs):
    reduction = kwargs.get("reduction", "mean")
    if kwargs.get("label_smoothing", 0.0) > 0 or kwargs.get("reduce") is not None \
            or kwargs.get("size_average") is not None:
        return None
    target = args[0] if args else kwargs.get("target")
    if isinstance(target, Tensor) and target.dtype.is_floating_point:
        return None                                  # class probabilities: plain arithmetic
    if input.ndim <= 2:
        return "NllLossBackward0"
    if input.ndim == 4 or reduction != "none":
        return "NllLoss2DBackward0"
    return None


def _unless_weighted(name):
    return lambda *a, **k: None if k.get("weight") is not None else name


def _batched(name, spatial):
    return lambda input, *a, **k: name if input.ndim == spatial + 2 else None


def _act(name):
    # an in-place call returns its input, whose node is the in-place op's
    return lambda *a, **k: None if k.get("inplace") or (len(a) > 1 and a[-1] is True) \
        else name


def _always(name):
    return lambda *a, **k: name


def _adaptive(name):
    # (an all-ones output is PyTorch's mean(): MeanBackward1, tracec's too)
    def namer(input, output_size, *a, **k):
        size = output_size if isinstance(output_size, (tuple, list)) else (output_size,)
        return None if all(o == 1 for o in size) else name
    return namer


_NAMES = {
    "mse_loss": _unless_weighted("MseLossBackward0"),
    "smooth_l1_loss": lambda *a, **k: "SmoothL1LossBackward0",
    "huber_loss": _unless_weighted("HuberLossBackward0"),
    "binary_cross_entropy": lambda *a, **k: "BinaryCrossEntropyBackward0",
    "binary_cross_entropy_with_logits":
        lambda *a, **k: "BinaryCrossEntropyWithLogitsBackward0",
    "nll_loss": _nll_name,
    "cross_entropy": _nll_name,
    "conv1d": _batched("ConvolutionBackward0", 1),
    "conv2d": _batched("ConvolutionBackward0", 2),
    "conv3d": _batched("ConvolutionBackward0", 3),
    "conv_transpose1d": _batched("ConvolutionBackward0", 1),
    "conv_transpose2d": _batched("ConvolutionBackward0", 2),
    "conv_transpose3d": _batched("ConvolutionBackward0", 3),
    "max_pool2d": lambda *a, **k: "MaxPool2DWithIndicesBackward0",
    "avg_pool2d": lambda *a, **k: "AvgPool2DBackward0",
    "layer_norm": lambda *a, **k: "NativeLayerNormBackward0",
    "embedding": lambda *a, **k: "EmbeddingBackward0",
    "batch_norm": _always("NativeBatchNormBackward0"),
    "group_norm": _always("NativeGroupNormBackward0"),
    "soft_margin_loss": _always("SoftMarginLossBackward0"),
    "multi_margin_loss": _unless_weighted("MultiMarginLossBackward0"),
    "elu": _act("EluBackward0"), "selu": _act("EluBackward0"), "celu": _act("CeluBackward0"),
    "leaky_relu": _act("LeakyReluBackward0"), "softplus": _always("SoftplusBackward0"),
    "hardtanh": _act("HardtanhBackward0"), "relu6": _act("HardtanhBackward0"),
    "hardswish": _act("HardswishBackward0"), "hardsigmoid": _act("HardsigmoidBackward0"),
    "mish": _act("MishBackward0"), "logsigmoid": _always("LogSigmoidBackward0"),
    "glu": _always("GluBackward0"), "threshold": _act("ThresholdBackward0"),
    "unfold": _always("Im2ColBackward0"), "fold": _always("Col2ImBackward0"),
    "avg_pool3d": _always("AvgPool3DBackward0"),
    "adaptive_avg_pool2d": _adaptive("AdaptiveAvgPool2DBackward0"),
    "adaptive_avg_pool3d": _adaptive("AdaptiveAvgPool3DBackward0"),
}


#: PyTorch's node's inputs for the functionals composed here: (position,
#: keyword) of each argument; ``next_functions`` lists their edges
_X = ((0, "input"),)
_NORM = {"layer_norm": _X + ((2, "weight"), (3, "bias")),
         "batch_norm": _X + ((3, "weight"), (4, "bias")),
         "group_norm": _X + ((2, "weight"), (3, "bias"))}
_INPUTS = {**_NORM, "softmax": _X, "log_softmax": _X, "avg_pool2d": _X,
           "unfold": _X, "fold": _X, "avg_pool3d": _X, "adaptive_avg_pool2d": _X,
           "adaptive_avg_pool3d": _X,
           "binary_cross_entropy": _X + ((1, "target"),),
           "binary_cross_entropy_with_logits": _X + ((1, "target"),),
           "mse_loss": _X + ((1, "target"),), "nll_loss": _X, "smooth_l1_loss": _X + ((1, "target"),),
           "huber_loss": _X + ((1, "target"),),
           **{n: _X for n in ("elu", "selu", "celu", "leaky_relu", "softplus", "hardtanh",
                              "relu6", "hardswish", "hardsigmoid", "mish", "logsigmoid")}}


def _edges(spec, args, kwargs) -> tuple:
    out = []
    for i, k in spec:
        a = args[i] if i < len(args) else kwargs.get(k)
        out.append(edge_of(a) if isinstance(a, Tensor) else None)
    return tuple(out)


def _rename(fn, namer, spec):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        first = out[0] if isinstance(out, tuple) else out
        if isinstance(first, Tensor) and first._node is not None:
            node = first._node
            name = namer(*args, **kwargs) if namer is not None else None
            if name is not None and hasattr(type(node), "_name"):
                old = node._name
                node._name = name     # (a Function's node names itself)
                if old.__class__ is TorchName:   # (the edges the function gave: cross_entropy's)
                    node._name = TorchName(name)
                    node._name.edges = old.edges
            if spec is not None and getattr(node, "_name", None) is not None \
                    and kwargs.get("dtype") is None:
                # the last step of the composed op: PyTorch's node's inputs
                name = node._name = TorchName(node._name)
                name.edges = _edges(spec, args, kwargs)
        return out
    wrapper.__grad_fn_named__ = True
    return wrapper


def install(namespace: dict) -> None:
    """Wrap the functions of ``namespace`` (``tracec.nn.functional``) listed above."""
    for name in {**_NAMES, **_INPUTS}:
        fn = namespace.get(name)
        if fn is not None and not getattr(fn, "__grad_fn_named__", False):
            namespace[name] = _rename(fn, _NAMES.get(name), _INPUTS.get(name))
