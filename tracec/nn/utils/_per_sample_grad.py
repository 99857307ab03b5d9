"""``torch.nn.utils._per_sample_grad.call_for_per_sample_grads``: a forward
function for a module after whose ``backward`` every trainable parameter
holds its per-sample gradients in ``grad_sample`` (batch first) and no
``grad`` (opacus' grad_sample_mode="ew" runs on it).

PyTorch gets there with ExpandedWeight tensors whose per-op rules compute
per-sample gradients from the batched forward.  Here the module runs once
per sample (a batch of one, as ``tracec.func.vmap`` does), each time with
the sample's slice of one leaf per parameter that holds ``batch_size``
copies of it; the leaf's gradient is then exactly the per-sample
gradients.  Modules that mix samples (batch norm) differ from PyTorch's,
which refuses them.
"""
from __future__ import annotations

import functools

from tracec.nn.modules.module import Module
from tracec.nn.utils.stateless import call_with
from tracec.shape_ops import cat
from tracec.tensor import Tensor

__all__ = ["call_for_per_sample_grads"]


def _leaves(tree):
    if isinstance(tree, Tensor):
        yield tree
    elif isinstance(tree, (tuple, list)):
        for t in tree:
            yield from _leaves(t)
    elif isinstance(tree, dict):
        for t in tree.values():
            yield from _leaves(t)


def _sample(tree, dim, i):
    """``tree`` with each tensor cut to sample ``i`` along ``dim`` (kept, size one)."""
    if isinstance(tree, Tensor):
        return tree.narrow(dim, i, 1)
    if isinstance(tree, (tuple, list)):
        return type(tree)(_sample(t, dim, i) for t in tree)
    if isinstance(tree, dict):
        return {k: _sample(v, dim, i) for k, v in tree.items()}
    return tree


def _join(outs, dim):
    first = outs[0]
    if isinstance(first, Tensor):
        return cat(outs, dim)
    if isinstance(first, (tuple, list)):
        return type(first)(_join([o[k] for o in outs], dim) for k in range(len(first)))
    if isinstance(first, dict):
        return {k: _join([o[k] for o in outs], dim) for k in first}
    return first


def call_for_per_sample_grads(module, *, batch_size=None, loss_reduction="sum",
                              batch_first=True):
    if loss_reduction not in ["sum", "mean"]:
        raise RuntimeError(f"Expected loss_reduction argument to be sum or mean, got "
                           f"{loss_reduction}")
    if not isinstance(module, Module):
        raise RuntimeError(f"Module passed must be nn.Module, got {type(module).__name__}")
    if not (batch_size is None or isinstance(batch_size, int)):
        raise RuntimeError(f"Batch size passed must be None or an integer, got "
                           f"{type(batch_size).__name__}")
    if batch_size is not None and batch_size < 1:
        raise RuntimeError(f"Batch size must be positive, got {batch_size}")
    for weight in module.parameters():
        if getattr(weight, "grad_sample", None) is not None:
            raise RuntimeError(
                "Current Expanded Weights accumulates the gradients, which will be incorrect "
                f"for multiple calls without clearing gradients. Please clear out the "
                f"grad_sample parameter of {weight} or post an issue to pytorch/pytorch to "
                "prioritize correct behavior")
    dim = 0 if batch_first else 1

    def compute_batch_size(args, kwargs):
        size = None
        for arg in _leaves((args, kwargs)):
            n = arg.shape[dim]
            if size is not None and size != n:
                raise RuntimeError(
                    f"When computing batch size, found at least one input with batch size "
                    f"{size} and one with batch size {n}. Please specify it explicitly using "
                    "the batch size kwarg in call_for_per_sample_grads")
            size = n
        if size is None:
            raise RuntimeError(
                "Unable to find a tensor in the passed args and kwargs. They may not be "
                "pytree-able and so ExpandedWeights cannot compute the batch size from the "
                "inputs. Please specify it explicitly")
        return size

    def per_sample_leaf(p, n):
        leaf = p.detach().unsqueeze(0).expand(n, *p.shape).clone().requires_grad_()
        scale = n if loss_reduction == "mean" else 1

        def hook(g):
            g = g * scale if scale != 1 else g
            old = getattr(p, "grad_sample", None)
            p.grad_sample = g if old is None else old + g
        leaf.register_hook(hook)
        return leaf

    @functools.wraps(module.forward)
    def wrapper(*args, **kwargs):
        n = batch_size if batch_size is not None else compute_batch_size(args, kwargs)
        leaves = {name: per_sample_leaf(p, n) for name, p in module.named_parameters()
                  if p.requires_grad}
        outs = [call_with(module, {k: v[i] for k, v in leaves.items()},
                          _sample(args, dim, i), _sample(kwargs, dim, i))
                for i in range(n)]
        return _join(outs, dim)

    return wrapper
