"""Eager elementwise composites run as one native kernel each way.

An activation such as exact GELU is a composite of primitives (``mul``,
``erf``, ``add``): eagerly, each primitive is a NumPy pass over the whole
tensor, and ``erf`` alone is a dozen.  On a transformer's 64 x 128 x 512
MLP activation that made tracec's eager GELU 17x PyTorch's fused kernel,
hardswish 36x and sigmoid 10x (``benchmarks/eager_ops.py``).  The compiler
already fuses such chains into one vectorized, threaded loop, so here the
eager path asks it for two kernels per composite, made once per machine
(the disk cache keeps them) and once per process (a trace at a small size
and a cache load): the composite's value, ``f(x)``, and its VJP,
``(x, g) -> g * f'(x)`` as the primitives' VJPs compose it.

The kernels come from ``PROVIDERS``: the compile layer
(``tracec.eager_kernels``) registers its maker there at import, as the
tracer registers itself in ``tensor.RECORDERS``, since this layer may not
import the compiler.

Invariants:

* ``unary`` returns None, and the caller runs its NumPy path, unless the
  composite would run eagerly with nothing watching (``eager_direct``: no
  recorder, no observer), on a C-contiguous float32/float64 array of at
  least ``MIN_NUMEL`` elements, with a provider registered and
  ``TRACEC_EAGER_KERNELS`` not ``0``, after the composite's NumPy path has
  seen ``WARMUP_NUMEL`` elements (per key and dtype), and the provider
  built both kernels.
* The kernels compute the composite's primitives, fused: values equal the
  NumPy path's within float rounding (the compiler's ``erf``/``exp`` are
  not NumPy's to the bit), as compiled code equals eager everywhere.
* The result's autograd node has the composite's PyTorch name
  (``node_name``) and saves ``x`` with its version, as PyTorch's node does;
  a double backward (``create_graph``) differentiates the primitives.
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from tracec import dtypes as dt
from tracec import graph
from tracec.tensor import Tensor, eager_direct

__all__ = ["PROVIDERS", "MIN_NUMEL", "unary", "nary", "fused", "NativeSet"]

#: The kernel maker, registered by the compile layer: ``maker(key,
#: composite, dtype, ranks, examples) -> (forward, vjp)`` or None where it
#: cannot build them; ``forward(*xs) -> y`` and ``vjp(*xs, g) -> (gx, ...)`` take
#: and return NumPy arrays of ``dtype``, ``xs[i]`` of rank ``ranks[i]``
#: and ``g`` of ``y``'s shape.
PROVIDERS: list = []

#: Below this many elements NumPy's passes may cost less than a kernel
#: call's fixed ~10 µs.  Measured on one thread, float32: relu of 4096
#: elements 11 µs as a kernel, 8 µs in NumPy; of 16384, 12 against 20 µs
#: (GELU: 29 against 122 µs; silu 18 against 41 µs).
MIN_NUMEL = 1 << 14
#: A composite's first calls, until they have seen this many elements, run
#: the NumPy path: making the kernels costs a process ~0.3 s the first time
#: (the compiler's import, a trace, a cache load; the first process on a
#: machine also compiles them), which a script calling an activation a few
#: times would not win back; a training loop passes this in a step or two.
#: Counted in elements, not time, so a program switches at the same call
#: on every run.
WARMUP_NUMEL = 1 << 22

_FLOATS = (dt.float32, dt.float64)
_FUNCTIONS: dict = {}     # node_name -> its autograd Function class
_SEEN: dict = {}          # (key, dtype name) -> elements its NumPy path has seen


def _enabled() -> bool:
    return bool(PROVIDERS) and os.environ.get("TRACEC_EAGER_KERNELS", "1") != "0"


def unary(x, key: tuple, composite, node_name: str):
    """``composite(x)`` through the native kernels, or None (the caller's
    NumPy path then runs; see the module's invariants).  ``key`` names the
    composite with its parameters (``("leaky_relu", 0.01)``): one pair of
    kernels per key and dtype.  The kernels see ``x`` flattened."""
    if not isinstance(x, Tensor) or x.dtype not in _FLOATS:
        return None
    a = x._data
    if type(a) is not np.ndarray or a.size < MIN_NUMEL:
        return None       # (nary's first answer, found sooner: small tensors' hot path)
    return nary((x,), ((-1,),), key, composite, node_name)


def nary(xs: tuple, shapes: tuple, key: tuple, composite, node_name: str,
         out_shape: tuple | None = None, examples: tuple | None = None):
    """``composite(*xs)`` through the native kernels, or None, as ``unary``
    for several tensors of one float dtype (``layer_norm``'s input, weight
    and bias): the kernels see ``xs[i]`` reshaped to ``shapes[i]`` (its
    leading dimensions folded: ``(-1, n)``), and ``composite`` must give
    the same values on the tensors' own shapes (a double backward applies
    it to them).  The size threshold applies to ``xs[0]``; the result has
    its shape, or ``out_shape``.  ``examples``: the shapes the kernels are
    traced at (default: small ones of the ranks of ``shapes``), for a
    composite that needs particular trailing sizes (a pooling window)."""
    x = xs[0]
    d = x.dtype
    if d not in _FLOATS:
        return None
    a = x._data
    if type(a) is not np.ndarray or a.size < MIN_NUMEL or not _enabled():
        return None
    for t in xs:
        if not isinstance(t, Tensor) or t.dtype is not d or type(t._data) is not np.ndarray \
                or not t._data.flags.c_contiguous or not eager_direct(t):
            return None
    if not all(type(p) in (str, int, float, bool) for p in key):
        return None          # (a tensor as a parameter)
    # The parameters by type and repr: 0.0 and -0.0 (or 1 and True) are
    # equal keys to a dict, not the same math.
    key = tuple(p if type(p) is str else f"{type(p).__name__}:{p!r}" for p in key)
    seen = (key, d.name)
    n = _SEEN.get(seen, 0)
    if n < WARMUP_NUMEL:
        _SEEN[seen] = n + a.size
        return None
    kernels = PROVIDERS[0](key, composite, d, tuple(len(s) for s in shapes), examples)
    if kernels is None:
        return None
    out = tuple(a.shape if out_shape is None else out_shape)
    return _function(node_name).apply((kernels, composite, shapes, out), *xs)


def _function(node_name: str):
    fn = _FUNCTIONS.get(node_name)
    if fn is None:
        fn = _FUNCTIONS[node_name] = _make_function(node_name)
    return fn


def _make_function(node_name: str):
    # (autograd imports modules that import this layer's ops: a class made
    # on first use keeps the import order of ``functions``' own Functions.)
    from tracec.autograd import Function, grad as _grad

    def forward(ctx, spec, *xs):
        kernels, _, shapes, out = spec
        y = kernels[0](*[t._data.reshape(s) for t, s in zip(xs, shapes)]).reshape(out)
        ctx.save_for_backward(*xs)
        ctx.spec = spec
        return Tensor._make(y, xs[0].dtype)

    def backward(ctx, g):
        xs = ctx.saved_tensors
        kernels, composite, shapes, out = ctx.spec
        if graph.is_grad_enabled():
            with graph.enable_grad():
                y = composite(*xs)
            return (None, *_grad(y, xs, g, create_graph=True, allow_unused=True))
        a = xs[0]._data
        # flat: the kernel reshapes it to its output's shape (see eager_kernels)
        gd = np.ascontiguousarray(g._data, dtype=a.dtype).reshape(-1)
        grads = kernels[1](*[t._data.reshape(s) for t, s in zip(xs, shapes)], gd)
        return (None, *(Tensor._make(r.reshape(t._data.shape), t.dtype)
                        for r, t in zip(grads, xs)))

    # (node_name in the class body: the grad_fn class is named from it)
    return type(node_name.removesuffix("Backward0"), (Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(backward),
                 "node_name": node_name, "__module__": __name__})


def fused(key: tuple, composite, node_name: str):
    """``x -> composite(x)``, through the native kernels where ``unary``
    takes it."""
    def f(x):
        y = unary(x, key, composite, node_name)
        return y if y is not None else composite(x)
    return f


class NativeSet:
    """A set of hand-written native kernels an eager op takes (the depthwise
    convolution's, batch norm's backward): ``makers`` holds the compile
    layer's maker (registered at import, as ``PROVIDERS``: this layer may
    not import it), ``get(size)`` answers the kernels, or None (the caller
    runs its NumPy path): with no maker, with ``TRACEC_EAGER_KERNELS=0``,
    until the op's NumPy path has seen ``warmup`` elements (the first make
    compiles them, ~1 s once per machine: a script with a few small calls
    never pays it; counted in elements, so a program switches at the same
    call on every run), and where the maker failed (reported once as a
    warning, never as a wrong result)."""

    def __init__(self, what: str, warmup: int):
        self.what, self.warmup, self.makers = what, warmup, []
        self.seen, self.kernels, self.tried = 0, None, False

    def get(self, size: int):
        if not self.makers or os.environ.get("TRACEC_EAGER_KERNELS", "1") == "0":
            return None
        if self.seen < self.warmup:
            self.seen += size
            return None
        if not self.tried:
            self.tried = True
            try:
                self.kernels = self.makers[0]()
            except Exception as e:  # noqa: BLE001  (the NumPy path stays correct)
                warnings.warn(f"tracec: no native {self.what} kernels ({e}); the NumPy path "
                              "runs instead", RuntimeWarning, stacklevel=3)
        return self.kernels
