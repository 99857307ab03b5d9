"""``NestedTensor``: a batch of dense tensors of different sizes, as
PyTorch's nested tensors (``torch.nested``) behave on the CPU.

A nested tensor of ``N`` entries is held as the ``N`` dense tensors
themselves (``_components``); every op applies the dense op to each entry
(PyTorch's nested kernels compute the same numbers on a packed buffer), so
autograd flows through the entries' own graphs and gradients reach their
leaves unchanged.

Invariants:
  * all entries have the same number of dimensions, dtype and device;
    nested dimension ``d >= 1`` is entry dimension ``d - 1``, and nested
    dimension 0 (the batch) is never reshaped, transposed or reduced
    (PyTorch's refusals, with its words);
  * ``layout`` is ``tracec.strided`` (any entry size may vary) or
    ``tracec.jagged`` (one ragged dimension, ``_ragged``, the rest equal);
  * a nested tensor is immutable: ops return new nested tensors, and
    ``unbind()`` returns the entries.
"""
from __future__ import annotations

import itertools

from tracec import tensor_meta
from tracec.creation import tensor
from tracec.functions import matmul, softmax
from tracec.nn._conv import pad
from tracec.shape_ops import cat, stack
from tracec.ops.core import normalize_axis
from tracec.tensor import Size, Tensor

__all__ = ["NestedTensor"]

#: the ``j`` numbers of jagged sizes: one per distinct ragged structure, as
#: PyTorch numbers the symbolic sizes of new offsets
_RAGGED_IDS = itertools.count(1)


def _backward_name(op: str) -> str:
    """PyTorch's autograd node name for a nested result of ``op``."""
    return "".join(p.capitalize() for p in op.split("_")) + "Backward0"


class _NestedNode:
    """The ``grad_fn`` of a nested result: its name, as PyTorch shows it."""

    def __init__(self, name: str):
        self._name = name

    def name(self) -> str:
        return self._name

    def __repr__(self):
        return f"<{self._name} object at {hex(id(self))}>"


class NestedTensor:
    """A batch of ``N`` dense tensors that may differ in size."""

    is_nested = True
    is_sparse = False

    def __init__(self, components, layout, *, ragged: int = 1, ragged_id=None,
                 contiguous: bool = True, op=None):
        self._components = tuple(components)
        self._layout = layout
        self._ragged = ragged
        self._ragged_id = ragged_id
        self._contiguous = contiguous
        self._op = op if self.requires_grad else None

    def _derived(self, components, op, ragged=None):
        """A result of ``op`` with the same batch and ragged structure."""
        return NestedTensor(components, self._layout,
                            ragged=self._ragged if ragged is None else ragged,
                            ragged_id=self._ragged_id, op=op)

    # --- metadata ---------------------------------------------------------------------

    @property
    def layout(self):
        return self._layout

    @property
    def dtype(self):
        return self._components[0].dtype

    @property
    def device(self):
        return self._components[0].device

    @property
    def requires_grad(self) -> bool:
        return any(c.requires_grad for c in self._components)

    @property
    def grad_fn(self):
        return None if self._op is None else _NestedNode(_backward_name(self._op))

    @property
    def is_leaf(self) -> bool:
        return self._op is None

    @property
    def ndim(self) -> int:
        return self._components[0].ndim + 1

    def dim(self) -> int:
        return self.ndim

    def _entry_dim(self, dim: int, what: str) -> int:
        """Entry dimension of nested dimension ``dim`` (never the batch)."""
        d = normalize_axis(dim, self.ndim)
        if d == 0:
            raise RuntimeError(f"{what}: dimension 0 of a nested tensor (its batch) is "
                               "not supported")
        return d - 1

    def size(self, dim=None):
        if dim is None:
            if self._layout is tensor_meta.strided:
                raise RuntimeError("Internal error: NestedTensorImpl doesn't support sizes. "
                                   "Please file an issue.")
            return self.shape
        d = normalize_axis(dim, self.ndim)
        if d == 0:
            return len(self._components)
        sizes = {c.shape[d - 1] for c in self._components}
        if len(sizes) != 1:
            raise RuntimeError(f"Given dimension {d} is irregular and does not have a size.")
        return sizes.pop()

    @property
    def shape(self):
        if self._layout is tensor_meta.strided:
            raise RuntimeError("Internal error: NestedTensorImpl doesn't support sizes. "
                               "Please file an issue.")
        return Size(self._size_text())

    def _size_text(self) -> tuple:
        """The jagged size with its ragged dimension as PyTorch's ``jN``."""
        out = [len(self._components)]
        for d in range(1, self.ndim):
            out.append(_Ragged(self._ragged_id) if d == self._ragged
                       else self._components[0].shape[d - 1])
        return tuple(out)

    def is_contiguous(self, memory_format=None) -> bool:
        return self._contiguous

    def offsets(self) -> Tensor:
        """``[0, l0, l0 + l1, ...]``: where each entry starts along the
        ragged dimension of the packed values (jagged layout only)."""
        if self._layout is not tensor_meta.jagged:
            raise RuntimeError("offsets() is only supported for the jagged layout")
        ends = list(itertools.accumulate(c.shape[self._ragged - 1] for c in self._components))
        return tensor([0] + ends)

    def unbind(self, dim: int = 0):
        if normalize_axis(dim, self.ndim) != 0:
            raise RuntimeError("unbind(): only supported for NestedTensor on dim=0")
        return self._components

    def __getitem__(self, i):
        if isinstance(i, int):
            return self._components[i]
        raise RuntimeError("nested tensors can only be indexed by an integer along the batch")

    def requires_grad_(self, requires_grad: bool = True):
        for c in self._components:
            c.requires_grad_(requires_grad)
        return self

    def detach(self):
        return NestedTensor([c.detach() for c in self._components], self._layout,
                            ragged=self._ragged, ragged_id=self._ragged_id)

    def to(self, *args, **kwargs):
        return self._derived([c.to(*args, **kwargs) for c in self._components], "to_copy")

    # --- tracec.compile: its entries are the tensors a compiled call reads / returns ---

    def __tracec_flatten__(self):
        """(entries, the hashable rest): a compiled call's arguments and
        results hold a nested tensor's entries as tensors (the ragged
        size's j-number is not part of it: a new batch reuses the trace)."""
        return self._components, (self._layout, self._ragged, self._contiguous, self._op)

    @classmethod
    def __tracec_unflatten__(cls, aux, entries):
        layout, ragged, contiguous, op = aux
        rid = new_ragged_id() if layout is tensor_meta.jagged else None
        return cls(entries, layout, ragged=ragged, ragged_id=rid, contiguous=contiguous, op=op)

    # --- printing ---------------------------------------------------------------------

    def __repr__(self):
        suffix = ""
        if self._op is not None:
            suffix = f", grad_fn=<{_backward_name(self._op)}>"
        elif self.requires_grad:
            suffix = ", requires_grad=True"
        if self._layout is tensor_meta.jagged:
            size = ", ".join(str(s) for s in self._size_text())
            return (f"NestedTensor(size=({size}), offsets={self.offsets()!r}, "
                    f"contiguous={self._contiguous}{suffix})")
        # PyTorch shows each entry as a detached tensor that requires grad
        # iff the nested tensor does, indented by two spaces
        parts = []
        for c in self._components:
            shown = c.detach().requires_grad_(True) if c.requires_grad else c.detach()
            parts.append("\n".join("  " + ln for ln in repr(shown).split("\n")))
        return "nested_tensor([\n" + ",\n".join(parts) + "\n]" + suffix + ")"

    __str__ = __repr__

    # --- ops ----------------------------------------------------------------------------

    def __tracec_dispatch__(self, fn, args, kwargs):
        """``fn(*args, **kwargs)`` applied entry by entry: each nested
        argument gives its ``i``-th entry, the rest are passed as they are;
        a ``dim`` argument names a nested dimension."""
        name = fn.__name__
        nested = [a for a in args if isinstance(a, NestedTensor)]
        n = len(self._components)
        if any(len(a._components) != n for a in nested):
            raise RuntimeError(f"{name}: nested tensors must have the same number of "
                               "entries")
        args, kwargs = list(args), dict(kwargs)
        if name in _DIM_ARG:
            pos = _DIM_ARG[name]
            if "dim" in kwargs:
                kwargs["dim"] = self._entry_dim(kwargs["dim"], name)
            elif len(args) > pos and args[pos] is not None:
                args[pos] = self._entry_dim(args[pos], name)
        if name == "dropout":
            return _packed_dropout(self, *args[1:], **kwargs)
        fn = _ENTRYWISE.get(name, fn)
        outs = [fn(*[a._components[i] if isinstance(a, NestedTensor) else a for a in args],
                   **kwargs) for i in range(n)]
        return self._derived(outs, name)

    def _map(self, op: str, fn):
        return self._derived([fn(c) for c in self._components], op)

    def _binary(self, other, op: str, fn, reflected=False):
        if isinstance(other, NestedTensor):
            if len(other._components) != len(self._components):
                raise RuntimeError(f"{op} does not support broadcasting when given a "
                                   "NestedTensor")
            pairs = zip(self._components, other._components)
        elif isinstance(other, Tensor) and other.ndim > 0 and not (
                self._layout is tensor_meta.jagged and other.ndim < self.ndim):
            # (a jagged tensor broadcasts a dense one over its entries'
            # trailing dimensions; strided ones refuse any)
            raise RuntimeError("Expected both self and other to be nested, but got a nested "
                               "self and non-nested other")
        else:
            pairs = ((c, other) for c in self._components)
        return self._derived([fn(b, a) if reflected else fn(a, b) for a, b in pairs], op)

    def __add__(self, o): return self._binary(o, "add", lambda a, b: a + b)
    def __radd__(self, o): return self._binary(o, "add", lambda a, b: a + b, True)
    def __sub__(self, o): return self._binary(o, "sub", lambda a, b: a - b)
    def __rsub__(self, o): return self._binary(o, "sub", lambda a, b: a - b, True)
    def __mul__(self, o): return self._binary(o, "mul", lambda a, b: a * b)
    def __rmul__(self, o): return self._binary(o, "mul", lambda a, b: a * b, True)
    def __truediv__(self, o): return self._binary(o, "div", lambda a, b: a / b)
    def __rtruediv__(self, o): return self._binary(o, "div", lambda a, b: a / b, True)
    def __neg__(self): return self._map("neg", lambda c: -c)

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def add(self, o): return self + o
    def sub(self, o): return self - o
    def mul(self, o): return self * o
    def div(self, o): return self / o

    def pow(self, e): return self._map("pow", lambda c: c.pow(e))
    def relu(self): return self._map("relu", lambda c: c.relu())
    def sin(self): return self._map("sin", lambda c: c.sin())
    def cos(self): return self._map("cos", lambda c: c.cos())
    def exp(self): return self._map("exp", lambda c: c.exp())
    def tanh(self): return self._map("tanh", lambda c: c.tanh())
    def sigmoid(self): return self._map("sigmoid", lambda c: c.sigmoid())
    def abs(self): return self._map("abs", lambda c: c.abs())

    def __len__(self) -> int:
        return len(self._components)

    def numel(self) -> int:
        return sum(c.numel() for c in self._components)

    def values(self) -> Tensor:
        """The entries packed end to end along the ragged dimension (jagged
        layout, ragged dimension 1)."""
        if self._layout is not tensor_meta.jagged or self._ragged != 1:
            raise RuntimeError("values(): only supported for the jagged layout with the "
                               "ragged dimension at 1")
        return cat(self._components, 0)

    def _reduce(self, op: str, fn, dim, keepdim: bool):
        """A reduction over nested dimension(s) ``dim``: of the ragged one
        (jagged) a dense ``[N, ...]`` result, else a nested one."""
        if dim is None:
            raise RuntimeError(f"{op}(): reducing a nested tensor over all its dimensions is "
                               "not supported")
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        entry = tuple(self._entry_dim(d, op) for d in dims)
        outs = [fn(c, entry, keepdim) for c in self._components]
        if self._layout is tensor_meta.jagged and self._ragged - 1 in entry:
            return stack(outs)
        return self._derived(outs, op)

    def sum(self, dim=None, keepdim: bool = False, dtype=None):
        return self._reduce("sum", lambda c, d, k: c.sum(d, keepdim=k, dtype=dtype), dim, keepdim)

    def mean(self, dim=None, keepdim: bool = False, dtype=None):
        return self._reduce("mean", lambda c, d, k: c.mean(d, keepdim=k, dtype=dtype), dim,
                            keepdim)

    def chunk(self, chunks: int, dim: int = 0):
        d = self._entry_dim(dim, "chunk")
        parts = [c.chunk(chunks, d) for c in self._components]
        return tuple(self._derived([p[i] for p in parts], "chunk") for i in range(len(parts[0])))

    def softmax(self, dim, dtype=None):
        return softmax(self, dim, dtype=dtype)

    def _batch_preserving(self, op: str, shape) -> tuple:
        """``shape`` (a reshape's target) without its batch entry, which must
        keep the batch size."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if not shape or shape[0] != len(self._components):
            raise RuntimeError(f"{op}: For now nested {op} cannot change or infer the "
                               "implicit batch dimension")
        return tuple(shape[1:])

    def reshape(self, *shape):
        rest = self._batch_preserving("reshape", shape)
        return self._map("reshape", lambda c: c.reshape(rest))

    def view(self, *shape):
        rest = self._batch_preserving("view", shape)
        return self._map("view", lambda c: c.view(rest))

    def transpose(self, dim0: int, dim1: int):
        d0, d1 = normalize_axis(dim0, self.ndim), normalize_axis(dim1, self.ndim)
        if d0 == 0 or d1 == 0:
            raise RuntimeError("Nested tensor dimension 0 cannot be transposed")
        ragged = {d0: d1, d1: d0}.get(self._ragged, self._ragged)
        return self._derived([c.transpose(d0 - 1, d1 - 1) for c in self._components],
                             "transpose", ragged)

    def unflatten(self, dim: int, sizes):
        d = self._entry_dim(dim, "unflatten")
        return self._map("unflatten", lambda c: c.unflatten(d, sizes))

    def flatten(self, start_dim: int = 0, end_dim: int = -1):
        s, e = self._entry_dim(start_dim, "flatten"), self._entry_dim(end_dim, "flatten")
        return self._map("flatten", lambda c: c.flatten(s, e))

    def to_padded_tensor(self, padding: float, output_size=None) -> Tensor:
        """A dense ``[N, max sizes...]`` tensor: each entry at the start of
        its slot, the rest ``padding``; ``output_size`` may only grow it."""
        sizes = [max(c.shape[d] for c in self._components) for d in range(self.ndim - 1)]
        if output_size is not None:
            output_size = tuple(output_size)
            if len(output_size) != self.ndim:
                raise RuntimeError("Length of output_size does not match NestedTensor dims. "
                                   "Broadcasting is not supported.")
            if any(o < s for o, s in zip(output_size[1:], sizes)):
                raise RuntimeError("Value in output_size is less than NestedTensor padded "
                                   "size. Truncation is not supported.")
            sizes = list(output_size[1:])
        padded = []
        for c in self._components:
            amounts = []
            for d in reversed(range(c.ndim)):
                amounts += [0, sizes[d] - c.shape[d]]
            padded.append(pad(c, amounts, value=float(padding)))
        return stack(padded)


class _Ragged:
    """A ragged size, shown as PyTorch shows its symbolic size (``j1``)."""

    def __init__(self, ident):
        self._id = ident

    def __repr__(self):
        return f"j{self._id}"

    __str__ = __repr__


def _entry_bmm(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError("batch1 must be a 3D tensor")
    return matmul(a, b)


def _packed_dropout(nt: NestedTensor, p: float = 0.5, training: bool = True,
                    inplace: bool = False) -> NestedTensor:
    """PyTorch's nested dropout: one Bernoulli(1 - p) mask over the entries
    packed end to end (so it draws even for p == 0, unlike dense dropout),
    scaled by 1 / (1 - p) (0 when p == 1)."""
    if not training:
        return nt
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    sizes = [c.numel() for c in nt._components]
    packed = cat([c.reshape(-1) for c in nt._components])
    mask = packed.detach().new_empty(packed.shape).bernoulli_(1.0 - p)
    scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
    out = (packed * mask * scale).split(sizes)
    return nt._derived([o.reshape(c.shape) for o, c in zip(out, nt._components)], "dropout")


#: ops whose entry-wise form differs from the op itself (bmm of nested
#: [N, *, *] batches is one mm per entry)
_ENTRYWISE = {"bmm": _entry_bmm}
#: position of the ``dim`` argument of the ops that take one
_DIM_ARG = {"softmax": 1, "log_softmax": 1}


def new_ragged_id() -> int:
    """A fresh ``j`` number for a new ragged structure."""
    return next(_RAGGED_IDS)
