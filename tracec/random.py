"""``torch.random`` (seeding, ``fork_rng``) and the sampling functions
``torch.normal``, ``torch.poisson`` and ``torch.binomial``.

Invariants: every draw comes from tracec's generators (``creation``: the
``generator=`` given or the default one), so ``manual_seed`` makes a run
repeat.  ``normal`` is built from recorded ops (a compiled function draws
afresh at every call).  ``poisson`` and ``binomial`` have no recorded form
(their samplers loop a data-dependent number of times): they draw with
NumPy from a seed taken from the generator's stream, eagerly; inside a
compiled function they raise tracec's data-dependence error at the user's
line instead of replaying the first call's numbers.  As in PyTorch, the
samples carry no gradient to their parameters (``normal``'s gradient is
zero, not absent).
"""
from __future__ import annotations

import contextlib

import numpy as np

from tracec import creation, graph, torch_rng
from tracec import dtypes as dt
from tracec.creation import (default_generator, get_rng_state, initial_seed,  # noqa: F401
                             manual_seed, seed, set_rng_state)
from tracec.tensor import Tensor, concrete

__all__ = ["normal", "poisson", "binomial", "_sample_dirichlet", "host_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "fork_rng", "default_generator"]


def _check_std(std):
    bad = (std < 0) if not isinstance(std, Tensor) else bool((std < 0).any())
    if bad:
        shown = std if not isinstance(std, Tensor) else "tensor"
        raise RuntimeError(f"normal expects std >= 0.0, but found std {shown}")


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False, out=None):
    """PyTorch's four overloads: ``normal(mean_t, std_t)``, ``normal(mean_t,
    std=1.)``, ``normal(mean, std_t)`` (the tensors' broadcast shape and
    dtype) and ``normal(mean, std, size)``."""
    tensors = [a for a in (mean, std) if isinstance(a, Tensor)]
    if not tensors:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments: with "
                            "numbers for mean and std, a size is required")
        if not std >= 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        if (generator or default_generator).eager_mt() is not None and not \
                creation.is_meta(device):
            # PyTorch's: empty(size).normal_(mean, std), mean and std inside
            # its kernel (one rounding), eagerly its stream
            result = creation.empty(size, dtype=dtype, device=device).normal_(
                mean, std, generator=generator)
        else:
            z = creation.randn(size, generator=generator, dtype=dtype, device=device)
            result = z * std + mean
        result = result.requires_grad_(True) if requires_grad else result
    else:
        if size is not None:
            raise TypeError("normal() with a tensor mean or std takes no size")
        if not isinstance(std, Tensor):
            _check_std(std)
        shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
        kind = tensors[0].dtype if len(tensors) == 1 else dt.promote_types(
            mean.dtype, std.dtype)
        z = creation.randn(tuple(shape), generator=generator, dtype=kind)
        with graph.no_grad():
            drawn = z * std + mean
        if graph.is_grad_enabled() and any(t.requires_grad for t in tensors):
            # PyTorch's NormalBackward: a zero gradient to mean and std.
            for t in tensors:
                drawn = drawn + t * 0
        result = drawn
    if out is not None:
        return out.copy_(result)
    return result


def host_generator(generator=None, why: str = "sampling on the host") -> np.random.Generator:
    """A NumPy generator seeded by one draw from tracec's ``generator`` (the
    default one): samplers that need rejection loops (Poisson, binomial,
    gamma) run on the host with it when eager draws do not follow
    PyTorch's stream (``torch_rng.counter_draws``; otherwise they run
    PyTorch's own samplers, ``torch_rng``), so ``tracec.manual_seed``
    still fixes them.  Eager only: it reads the draw's value (``why`` says
    what needed it, in the error a compiled function gets)."""
    g = generator or default_generator
    u = np.asarray(concrete(g.uniform((2,), dt.float64), why))
    seed = int(u[0] * 2.0 ** 53) ^ (int(u[1] * 2.0 ** 53) << 11)
    return np.random.default_rng(seed)


def poisson(input, generator=None):  # noqa: A002
    """Counts drawn with rates ``input`` (float tensor, rates >= 0)."""
    rates = concrete(input, "torch.poisson (its sampler loops a data-dependent number of "
                            "times)")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"poisson_cpu\" not implemented for '{str(input.dtype)[6:]}'")
    if np.any(rates < 0) or np.any(np.isnan(rates)):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    mt = (generator or default_generator).eager_mt()
    if mt is not None:          # PyTorch's sampler on its stream
        draws = torch_rng.poisson(mt, np.asarray(rates)).reshape(np.shape(rates))
    else:
        draws = host_generator(generator, "torch.poisson").poisson(rates.astype(np.float64))
    return Tensor._make(np.asarray(draws).astype(input.dtype.np), input.dtype)


def _sample_dirichlet(input, generator=None):  # noqa: A002
    """Dirichlet draws with concentrations along the last dimension
    (``torch._sample_dirichlet``, which torchvision's AugMix calls)."""
    alpha = concrete(input, "torch._sample_dirichlet")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"dirichlet\" not implemented for '{str(input.dtype)[6:]}'")
    mt = (generator or default_generator).eager_mt()
    if mt is not None:          # PyTorch's: gamma draws in double, normalized
        g = torch_rng.standard_gamma(mt, np.asarray(alpha), False).reshape(np.shape(alpha))
        g = np.maximum(g, np.finfo(np.float64).tiny)
    else:
        g = host_generator(generator, "torch._sample_dirichlet").standard_gamma(
            alpha.astype(np.float64))
    total = g.sum(-1, keepdims=True)
    return Tensor._make(np.asarray(g / total).astype(input.dtype.np), input.dtype)


def binomial(count, prob, generator=None):
    """Successes in ``count`` trials of probability ``prob`` (float tensors)."""
    n = concrete(count, "torch.binomial")
    p = concrete(prob, "torch.binomial")
    if not count.dtype.is_floating_point:
        raise RuntimeError(f"\"binomial_cpu\" not implemented for '{str(count.dtype)[6:]}'")
    if np.any((p < 0) | (p > 1)):
        raise RuntimeError("binomial: probabilities must be in [0, 1]")
    n_b, p_b = np.broadcast_arrays(n.astype(np.float64), p.astype(np.float64))
    mt = (generator or default_generator).eager_mt()
    if mt is not None:          # PyTorch's sampler on its stream
        draws = torch_rng.binomial(mt, n_b, p_b, count.dtype is dt.float32).reshape(n_b.shape)
    else:
        draws = host_generator(generator, "torch.binomial").binomial(n_b.astype(np.int64), p_b)
    return Tensor._make(np.asarray(draws).astype(count.dtype.np), count.dtype)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):
    """Run the block with the RNG state restored afterwards (the default
    generator's; tracec has no device generators to fork: naming a CUDA
    device fails as PyTorch's CPU build does, reading its state)."""
    if not enabled:
        yield
        return
    if devices and device_type == "cuda":
        from tracec import cuda
        for d in devices:
            cuda.get_rng_state(d)
    saved = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(saved)
