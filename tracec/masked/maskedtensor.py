"""``MaskedTensor``: data and a same-shaped bool mask, PyTorch's
``torch.masked.MaskedTensor`` (strided, or sparse COO data and mask: ops
compute on the dense values and a sparse MaskedTensor's results keep its
mask's indices, as PyTorch's computed on the values do).

Masked-out elements take no part in what is shown or reduced: elementwise
ops keep the mask (two masked operands must have equal masks), reductions
see only masked-in elements and mask a result that had none, and printing
shows ``--`` for them.

Gradients are MaskedTensors too, as in PyTorch.  A result that requires
grad records, per differentiable operand, the dense tensor its data was
computed from and a rule mapping the result's gradient (data, mask) to
that operand's; ``backward`` walks these records in reverse topological
order, taking each op's data VJP from tracec's dense autograd (one
definition per primitive) and the masks from the rules: elementwise ops
pass the mask through, ``where`` masks the branch not taken, reductions
give the input's mask, and a broadcast dense operand's gradient is a
*masked* sum over the broadcast dimensions, so values hidden under the
mask (an ``exp(100)``'s ``inf``, a ``nan``) never leak into shown ones.
"""
from __future__ import annotations

import warnings

from tracec import dtypes as dt
from tracec import functions as TF
from tracec import graph
from tracec import tensor_meta
from tracec.autograd import grad as dense_grad
from tracec.creation import ones_like, tensor, zeros, zeros_like
from tracec.masked import _ops
from tracec.shape_extra import broadcast_shapes
from tracec.tensor import Tensor

__all__ = ["MaskedTensor", "masked_tensor", "as_masked_tensor", "is_masked_tensor"]

_PROTOTYPE = ("The PyTorch API of MaskedTensors is in prototype stage and will change in the "
              "near future. Please open a Github issue for features requests and see our "
              "documentation on the torch.masked module for further information about the "
              "project.")
_MASKS_MATCH = "Input masks must match. If you need support for this, please open an issue on Github."
_SUPPORTED = (dt.float16, dt.float32, dt.float64, dt.bool_, dt.int8, dt.int16, dt.int32, dt.int64)
#: the float unary functions a MaskedTensor passes through (data op, mask kept)
_UNARY = {"exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "abs", "neg", "relu",
          "log1p", "expm1", "exp2", "log2", "log10", "tan", "asin", "acos", "atan", "sinh",
          "cosh", "erf", "reciprocal", "square"}
_REDUCTIONS = ("sum", "mean", "amin", "amax", "argmin", "argmax", "prod")


def is_masked_tensor(obj) -> bool:
    return isinstance(obj, MaskedTensor)


class _Record:
    """How a result's gradient reaches its differentiable operands:
    ``(operand, dense tensor the data came from, rule)`` triples, a rule
    mapping (grad data wrt that tensor, result's grad mask) to the
    operand's (grad data, grad mask)."""

    def __init__(self, parents):
        self.parents = parents


class MaskedTensor:
    """``data`` where ``mask`` is True; masked out elsewhere."""

    is_masked = True
    is_nested = False

    def __init__(self, data, mask, requires_grad: bool = False):
        if isinstance(data, MaskedTensor) or not isinstance(data, Tensor):
            raise TypeError("data must be a Tensor")
        if isinstance(mask, MaskedTensor) or not isinstance(mask, Tensor):
            raise TypeError("mask must be a Tensor")
        if data.layout is not mask.layout:
            raise TypeError("data and mask must have the same layout.")
        if mask.dtype is not dt.bool_:
            raise TypeError("mask must have dtype bool.")
        if data.dtype not in _SUPPORTED:
            raise TypeError(f"{data.dtype} is not supported in MaskedTensor.")
        if data.dim() != mask.dim():
            raise ValueError("data.dim() must equal mask.dim()")
        if tuple(data.shape) != tuple(mask.shape):
            raise ValueError("data.size() must equal mask.size()")
        self._masked_data = data
        self._masked_mask = mask
        self._record = None
        self._requires_grad = bool(requires_grad)
        self.grad = None

    @classmethod
    def _result(cls, data, mask, parents=()):
        """An op's result; ``parents`` as in ``_Record`` (kept only when
        some operand requires grad)."""
        if mask.is_sparse and not data.is_sparse:
            # a sparse MaskedTensor's results are sparse with its mask's
            # indices (PyTorch computes on the values)
            data = data.sparse_mask(mask)
        out = cls(data, mask)
        kept, seen = [], set()
        for p in parents:
            # (x * x: one operand, one VJP, counted once)
            if p[1].requires_grad and (id(p[0]), id(p[1])) not in seen:
                seen.add((id(p[0]), id(p[1])))
                kept.append(p)
        parents = kept
        if parents and graph.is_grad_enabled():
            out._record = _Record(parents)
            out._requires_grad = True
        return out

    # --- metadata -------------------------------------------------------------------------

    @property
    def shape(self):
        return self._masked_data.shape

    def size(self, dim=None):
        return self._masked_data.size() if dim is None else self._masked_data.size(dim)

    def dim(self) -> int:
        return self._masked_data.dim()

    @property
    def ndim(self) -> int:
        return self._masked_data.dim()

    def numel(self) -> int:
        return self._masked_data.numel()

    @property
    def dtype(self):
        return self._masked_data.dtype

    @property
    def device(self):
        return self._masked_data.device

    @property
    def layout(self):
        return self._masked_data.layout

    @property
    def is_sparse(self) -> bool:
        return self.layout is tensor_meta.sparse_coo

    def is_sparse_coo(self) -> bool:
        return self.layout is tensor_meta.sparse_coo

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @property
    def is_leaf(self) -> bool:
        return self._record is None

    def _dense_data(self) -> Tensor:
        """The data as a dense tensor (what the ops compute on; a sparse
        MaskedTensor's results go back to its mask's indices)."""
        return self._masked_data.to_dense() if self.is_sparse else self._masked_data

    def get_data(self) -> Tensor:
        return self._masked_data

    def get_mask(self) -> Tensor:
        return self._masked_mask

    def to_tensor(self, value) -> Tensor:
        return self.get_data().masked_fill(~self.get_mask(), value)

    def detach(self):
        return MaskedTensor(self._masked_data.detach(), self._masked_mask)

    def clone(self):
        return MaskedTensor._result(self._masked_data.clone(), self._masked_mask.clone(),
                                    [(self, self._masked_data, _same)])

    def to_dense(self):
        if not self.is_sparse:
            return self
        return MaskedTensor(self._masked_data.to_dense(), self._masked_mask.to_dense())

    def to_sparse_coo(self):
        """Data and mask as sparse COO tensors holding the masked-in
        elements (PyTorch's ``data.sparse_mask(mask.to_sparse_coo())``)."""
        if self.is_sparse:
            return self
        sparse_mask = self._masked_mask.to_sparse_coo().coalesce()
        return MaskedTensor(self._masked_data.sparse_mask(sparse_mask), sparse_mask)

    to_sparse = to_sparse_coo

    # --- printing -------------------------------------------------------------------------

    def __repr__(self):
        fmt = "{0:8.4f}"
        data, mask = self._masked_data, self._masked_mask
        if self.is_sparse:
            data, mask = data.to_dense(), mask.to_dense()
        if data.dim() == 0:
            v = data.item()
            text = fmt.format(v) if isinstance(v, float) else str(v)
            if not mask.item():
                text = "--"
            return f"MaskedTensor({text}, {mask.item()})"
        s = _masked_str(data.tolist(), mask.tolist(), fmt)
        s = "\n".join("  " + ln for ln in s.split("\n"))
        return "MaskedTensor(\n" + s + "\n)"

    __str__ = __repr__

    # --- ops ------------------------------------------------------------------------------

    def __getitem__(self, idx):
        shape = tuple(self.shape)

        def rule(g, gm):
            full = zeros(shape, dtype=dt.bool_)
            full[idx] = gm
            return g, full
        return MaskedTensor._result(self._masked_data[idx], self._masked_mask[idx],
                                    [(self, self._masked_data, rule)])

    def _unary(self, fn):
        data = self._dense_data()
        return MaskedTensor._result(fn(data), self._masked_mask, [(self, data, _same)])

    def _binary(self, other, fn, reflected=False):
        if isinstance(other, MaskedTensor) and not _masks_equal(self, other):
            raise ValueError(_MASKS_MATCH)
        od = other._dense_data() if isinstance(other, MaskedTensor) else other
        sd = self._dense_data()
        a, b = (od, sd) if reflected else (sd, od)
        shape = broadcast_shapes(*(tuple(t.shape) for t in (a, b) if isinstance(t, Tensor)))
        # operands expanded to the result's shape first: their VJPs are then
        # elementwise, and a broadcast operand's gradient is reduced below
        # under the mask (PyTorch's masked sum_to_size)
        ea, eb = (_expand(t, shape) for t in (a, b))
        data = fn(ea, eb)
        mask = self._masked_mask.expand(shape) if tuple(self.shape) != shape else self._masked_mask
        parents = []
        for orig, used in ((a, ea), (b, eb)):
            if not isinstance(orig, Tensor):
                continue
            owner = self if orig is sd else (
                other if isinstance(other, MaskedTensor) else orig)
            parents.append((owner, used, _masked_sum_to(tuple(orig.shape))))
        return MaskedTensor._result(data, mask, parents)

    def __add__(self, o): return self._binary(o, TF.add)
    def __radd__(self, o): return self._binary(o, TF.add, True)
    def __sub__(self, o): return self._binary(o, TF.sub)
    def __rsub__(self, o): return self._binary(o, TF.sub, True)
    def __mul__(self, o): return self._binary(o, TF.mul)
    def __rmul__(self, o): return self._binary(o, TF.mul, True)
    def __truediv__(self, o): return self._binary(o, TF.div)
    def __rtruediv__(self, o): return self._binary(o, TF.div, True)
    def __pow__(self, o): return self._binary(o, TF.pow)
    def __neg__(self): return self._unary(TF.neg)

    def add(self, o): return self + o
    def sub(self, o): return self - o
    def mul(self, o): return self * o
    def div(self, o): return self / o
    def pow(self, o): return self ** o

    def __lt__(self, other):
        od = other._masked_data if isinstance(other, MaskedTensor) else other
        return MaskedTensor(self._masked_data < od, self._masked_mask)

    def exp(self): return self._unary(TF.exp)
    def log(self): return self._unary(TF.log)
    def sqrt(self): return self._unary(TF.sqrt)
    def sin(self): return self._unary(TF.sin)
    def cos(self): return self._unary(TF.cos)
    def tanh(self): return self._unary(TF.tanh)
    def sigmoid(self): return self._unary(TF.sigmoid)
    def abs(self): return self._unary(TF.abs)
    def relu(self): return self._unary(TF.relu)

    def _reduce(self, op, dim=None, keepdim=False, dtype=None):
        """PyTorch's MaskedTensor reduction: ``torch.masked.<op>`` of the
        data under the mask, masked where no element was masked in."""
        data, mask = self._dense_data(), self._masked_mask.to_dense()
        fn = getattr(_ops, op)
        kw = {} if op in ("amax", "amin") and dtype is None else {"dtype": dtype}
        if dim is None:
            out = fn(data, mask=mask, **kw)
            out_mask = mask.any()
        else:
            out = fn(data, dim, keepdim=keepdim, mask=mask, **kw)
            out_mask = mask
            for d in sorted(_ops._canonical_dim(dim, mask.ndim), reverse=True):
                out_mask = out_mask.any(dim=d, keepdim=keepdim)
        dims = _ops._canonical_dim(dim, data.ndim)
        return MaskedTensor._result(out, out_mask,
                                    [(self, data, _reduced(mask, dims, keepdim))])

    def sum(self, dim=None, keepdim=False, dtype=None): return self._reduce("sum", dim, keepdim, dtype)
    def mean(self, dim=None, keepdim=False, dtype=None): return self._reduce("mean", dim, keepdim, dtype)
    def amax(self, dim=None, keepdim=False): return self._reduce("amax", dim, keepdim)
    def amin(self, dim=None, keepdim=False): return self._reduce("amin", dim, keepdim)
    def argmax(self, dim=None, keepdim=False): return self._reduce("argmax", dim, keepdim)
    def argmin(self, dim=None, keepdim=False): return self._reduce("argmin", dim, keepdim)
    def prod(self, dim=None, keepdim=False, dtype=None): return self._reduce("prod", dim, keepdim, dtype)

    def _normalize(self, op, dim):
        mask, dense = self._masked_mask, self._dense_data()
        data = getattr(_ops, op)(dense, dim, mask=mask.to_dense())
        return MaskedTensor._result(data, mask, [(self, dense, _within(mask.to_dense()))])

    def softmax(self, dim): return self._normalize("softmax", dim)
    def log_softmax(self, dim): return self._normalize("log_softmax", dim)

    def __tracec_dispatch__(self, fn, args, kwargs):
        name = fn.__name__
        if name in _UNARY:
            return args[0]._unary(fn)
        if name == "where":
            return _where(*args)
        if name in ("sum", "mean"):
            x, dim, keepdim = args
            return x._reduce(name, dim, keepdim, kwargs.get("dtype"))
        if name in ("softmax", "log_softmax"):
            return args[0]._normalize(name, args[1])
        if name == "grad":
            return _grad(*args, **kwargs)
        raise TypeError(f"{name} is not implemented in __torch_dispatch__ for MaskedTensor.\n"
                        "If you would like this operator to be supported, please file an issue "
                        "for a feature request at https://github.com/pytorch/maskedtensor/issues "
                        "with a minimal reproducible code snippet.")

    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        """Accumulate MaskedTensor gradients into the ``.grad`` of the
        masked leaves that require grad."""
        if not self._requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a "
                               "grad_fn")
        grads = _backprop([self], [gradient])
        for t, (g, gm) in grads.values():
            if isinstance(t, MaskedTensor) and t.is_leaf:
                if t.grad is None:
                    t.grad = MaskedTensor(g, gm)
                else:
                    t.grad = MaskedTensor(t.grad._masked_data + g, t.grad._masked_mask | gm)
            elif not isinstance(t, MaskedTensor) and t.is_leaf:
                raise NotImplementedError(
                    "MaskedTensor.backward(): the gradient of a dense tensor used in a masked "
                    "op is a MaskedTensor; take it with torch.autograd.grad")


def _masked_str(data, mask, fmt) -> str:
    """PyTorch's ``_masked_tensor_str`` over nested lists."""
    if not isinstance(data[0] if data else 0, list):
        items = [fmt.format(d) if isinstance(d, float) else str(d) for d in data]
        width = max(8 if not m else len(e) for e, m in zip(items, mask))
        return "[" + ", ".join("--".rjust(width) if not m else e
                               for e, m in zip(items, mask)) + "]"
    subs = [_masked_str(d, m, fmt) for d, m in zip(data, mask)]
    subs = ["\n".join("  " + ln for ln in s.split("\n")) for s in subs]
    return "[\n" + ",\n".join(subs) + "\n]"


def _masks_equal(a: MaskedTensor, b: MaskedTensor) -> bool:
    ma, mb = a._masked_mask, b._masked_mask
    if ma.is_sparse or mb.is_sparse:
        ma, mb = ma.to_dense(), mb.to_dense()
    return ma.dim() == mb.dim() and bool(TF.eq(ma, mb).all().item())


def _expand(t, shape):
    if isinstance(t, Tensor) and tuple(t.shape) != tuple(shape):
        return t.expand(shape)
    return t


def _same(g, gm):
    return g, gm


def _masked_sum_to(shape):
    """The gradient of an operand broadcast to the result: summed over the
    broadcast dimensions where the result's gradient is masked in."""
    def rule(g, gm):
        if tuple(g.shape) == tuple(shape):
            return g, gm
        lead = g.dim() - len(shape)
        dims = tuple(range(lead)) + tuple(
            lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1)
        data = TF.sum(TF.where(gm, g, zeros_like(g)), dims, keepdim=True)
        mask = gm
        for d in sorted(dims, reverse=True):
            mask = mask.any(dim=d, keepdim=True)
        return data.reshape(shape), mask.reshape(shape)
    return rule


def _reduced(in_mask, dims, keepdim):
    """A reduction's gradient mask: the input's, where the result's
    gradient is masked in."""
    def rule(g, gm):
        if not keepdim:
            for d in dims:
                gm = gm.unsqueeze(d)
        return g, in_mask & gm.expand(tuple(in_mask.shape))
    return rule


def _within(mask):
    def rule(g, gm):
        return g, mask & gm
    return rule


def _where(cond, x, y):
    """PyTorch's masked ``where``: data and mask each chosen by ``cond``
    (a plain tensor counts as all masked in); the gradient of the branch
    not taken is masked out."""
    def parts(t):
        if isinstance(t, MaskedTensor):
            return t._dense_data(), t._masked_mask.to_dense()
        t = t if isinstance(t, Tensor) else tensor(t)
        return t, ones_like(t, dtype=dt.bool_)
    (xd, xm), (yd, ym) = parts(x), parts(y)
    data = TF.where(cond, xd, yd)
    mask = TF.where(cond, xm, ym)

    def branch(taken):
        def rule(g, gm):
            return g, TF.where(taken, gm, zeros_like(gm))
        return rule
    return MaskedTensor._result(data, mask, [(x, xd, branch(cond)), (y, yd, branch(~cond))])


def _backprop(outputs, grad_outputs) -> dict:
    """Gradients (data, mask) of everything ``outputs`` were computed from:
    ``{id(t): (t, (data, mask))}`` for masked results, masked leaves and
    dense operands."""
    order, seen = [], set()

    def visit(t):
        if id(t) in seen:
            return
        seen.add(id(t))
        if isinstance(t, MaskedTensor) and t._record is not None:
            for p, _, _ in t._record.parents:
                visit(p)
        order.append(t)
    for o in outputs:
        visit(o)
    grads = {}
    for o, g in zip(outputs, grad_outputs):
        if g is None:
            g = MaskedTensor(ones_like(o._masked_data), o._masked_mask)
        _accumulate(grads, o, g._masked_data, g._masked_mask)
    for t in reversed(order):
        if not isinstance(t, MaskedTensor) or t._record is None or id(t) not in grads:
            continue
        g, gm = grads[id(t)][1]
        parents = t._record.parents
        vjps = dense_grad(t._masked_data, [used for _, used, _ in parents], grad_outputs=g,
                          retain_graph=True, allow_unused=True)
        for (p, used, rule), vg in zip(parents, vjps):
            if vg is None:
                vg = zeros_like(used)
            pg, pm = rule(vg, gm)
            _accumulate(grads, p, pg, pm)
    return grads


def _accumulate(grads, t, g, gm):
    if id(t) in grads:
        _, (g0, m0) = grads[id(t)]
        g, gm = g0 + g, m0 | gm
    grads[id(t)] = (t, (g, gm))


def _grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
          allow_unused=None):
    """``torch.autograd.grad`` of MaskedTensor outputs: MaskedTensor
    gradients, for masked and dense inputs alike."""
    if create_graph:
        raise NotImplementedError("MaskedTensor gradients with create_graph=True")
    single = isinstance(outputs, MaskedTensor)
    outputs = [outputs] if single else list(outputs)
    inputs = [inputs] if isinstance(inputs, (Tensor, MaskedTensor)) else list(inputs)
    if grad_outputs is None or isinstance(grad_outputs, MaskedTensor):
        grad_outputs = [grad_outputs] * len(outputs)
    for i, o in enumerate(outputs):
        if not o.requires_grad:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               "have a grad_fn")
    grads = _backprop(outputs, grad_outputs)
    out = []
    for x in inputs:
        if id(x) not in grads:
            if not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the "
                                   "desired behavior.")
            out.append(None)
            continue
        g, gm = grads[id(x)][1]
        out.append(MaskedTensor(g.detach(), gm))
    return tuple(out)


def masked_tensor(data, mask, requires_grad: bool = False) -> MaskedTensor:
    """A MaskedTensor leaf holding copies of ``data`` and ``mask``."""
    warnings.warn(_PROTOTYPE, UserWarning, stacklevel=2)
    if isinstance(data, Tensor) and data.requires_grad:
        warnings.warn("It is not recommended to create a MaskedTensor with a tensor that "
                      "requires_grad. To avoid this, you can use data.detach().clone()",
                      UserWarning, stacklevel=2)
    if isinstance(data, Tensor) and isinstance(mask, Tensor):
        if data.is_sparse != mask.is_sparse:
            raise TypeError("data and mask must have the same layout.")
        if mask.is_sparse:
            data, mask = data.coalesce(), mask.coalesce()
            if data._nnz() != mask._nnz():
                # (PyTorch's _sparse_coo_where: the data at the mask's indices)
                data = data.to_dense().sparse_mask(mask)
        data = data.detach().clone().requires_grad_(requires_grad)
        mask = mask.clone()
    return MaskedTensor(data, mask, requires_grad)


def as_masked_tensor(data, mask) -> MaskedTensor:
    """A MaskedTensor of ``data`` itself (differentiable: gradients reach
    ``data``'s graph)."""
    warnings.warn(_PROTOTYPE, UserWarning, stacklevel=2)
    if not isinstance(data, Tensor):
        raise TypeError("data must be a Tensor")
    return MaskedTensor._result(data, mask, [(data, data, _same)])
