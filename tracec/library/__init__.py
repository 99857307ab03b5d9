"""``torch.library``: user-defined operators.

``custom_op("ns::name", mutates_args=...)`` turns a Python function (its
body may compute in NumPy) into an operator, reached as the decorated
function and as ``torch.ops.ns.name`` (``tracec.ops.namespaces``), with
``register_fake`` (the shape function ``opcheck`` checks), ``register_kernel``
(a per-device body) and ``register_autograd(backward, setup_context=)``.
``Library(ns, "DEF" | "FRAGMENT" | "IMPL")`` with ``define`` / ``impl``,
and the module-level ``define`` / ``impl`` / ``register_fake`` /
``register_autograd`` / ``opcheck`` / ``infer_schema``, cover the older
string-schema API.

Invariants:
- A ``custom_op`` is opaque to autograd, as in PyTorch: its body runs with
  gradient recording off; its outputs' gradient is the registered
  ``backward``'s (an op without one gives outputs that require grad and a
  backward that raises, PyTorch's message).  A ``Library.impl`` kernel is
  called as it is (autograd records what it does), as PyTorch calls a
  Python kernel.
- Under ``tracec.compile`` a custom op's body and backward are recorded like
  any other code when they compute with tensor ops.  A body that reads
  tensor data in Python (``x.numpy()``, ``tolist()``) cannot be recorded,
  and compiled native code cannot call back into Python: the tracer
  (``OPAQUE_CALLS``) then runs that call signature eagerly and says why
  (``cache_info().eager_reasons``), never freezing the data into the trace.
"""
from __future__ import annotations

import contextlib
import inspect
import typing

from tracec import graph
from tracec.autograd import Function
from tracec.library import opcheck as _checks
from tracec.library.schema import Schema, infer_schema
from tracec.ops.namespaces import NAMESPACES, namespace
from tracec.tensor import OPAQUE_CALLS, Tensor

__all__ = ["Library", "custom_op", "define", "impl", "infer_schema", "opcheck",
           "register_autograd", "register_fake", "register_kernel", "CustomOpDef"]


# --- operators -------------------------------------------------------------------

#: "ns::name" -> Operator
OPERATORS: dict = {}

_NO_AUTOGRAD = ("Trying to backward through {} but no autograd formula was registered. "
                "Please use register_autograd to add one.")


@contextlib.contextmanager
def _opaque(what: str):
    """While a call is traced: tensor data read in here (in ``what``, an op's
    qualified name or a phrase) makes the call run eagerly, with the reason,
    instead of failing the trace."""
    if not OPAQUE_CALLS:
        yield
        return
    with OPAQUE_CALLS[-1](what if " " in what else f"the custom op {what}"):
        yield


class Operator:
    """One operator: its schema, kernels (by dispatch key or device type),
    fake (``Meta``) kernel and autograd formula."""

    def __init__(self, qualname: str, schema: Schema):
        self.qualname = qualname
        self.namespace, _, self.name = qualname.partition("::")
        self.schema = schema
        self.kernels: dict = {}
        self.fake = None
        self.backward = None
        self.setup_context = None
        self.opaque_autograd = False   # custom_op: the body is not differentiated
        # (made now: a compiled call's guards see the op's state, which must
        # not change by being called)
        self._function = type(f"GeneratedBackwardFor_{self.namespace}_{self.name}_default",
                              (_OpFunction,), {"__module__": "tracec.library"})
        self.packet = OpOverloadPacket(self)
        namespace(self.namespace)._ops[self.name] = self.packet

    def kernel_for(self, args) -> typing.Callable:
        dev = next((a.device.type for a in args if isinstance(a, Tensor)), "cpu")
        for key in (dev, dev.upper(), "default", "CompositeExplicitAutograd",
                    "CompositeImplicitAutograd", "Autograd"):
            if key in self.kernels:
                return self.kernels[key]
        raise NotImplementedError(
            f"{self.qualname}: no kernel registered for device '{dev}' (registered: "
            f"{sorted(self.kernels)})")

    def __call__(self, *args, **kwargs):
        b = self.schema.bind(args, kwargs)
        pos = [v for k, v in b.arguments.items()
               if self.schema.signature.parameters[k].kind != inspect.Parameter.KEYWORD_ONLY]
        kw = {k: v for k, v in b.arguments.items()
              if self.schema.signature.parameters[k].kind == inspect.Parameter.KEYWORD_ONLY}
        kernel = self.kernel_for(pos + list(kw.values()))
        if not self.opaque_autograd:
            with _opaque(self.qualname):
                return kernel(*pos, **kw)
        needs = graph.is_grad_enabled() and any(
            isinstance(a, Tensor) and a.requires_grad for a in pos)
        if not needs:
            with graph.no_grad(), _opaque(self.qualname):
                out = kernel(*pos, **kw)
            self._check_aliasing(pos, kw, out)
            return out
        return self.autograd_function().apply(self, kernel, kw, *pos)

    def _check_aliasing(self, pos, kw, out) -> None:
        ins = {id(a) for a in list(pos) + list(kw.values()) if isinstance(a, Tensor)}
        outs = out if isinstance(out, (tuple, list)) else (out,)
        if any(isinstance(o, Tensor) and id(o) in ins for o in outs):
            raise RuntimeError(
                f"{self.name} (with implementation in {self.kernel_for(pos).__module__!r}): "
                "The output of this custom operator (1) must not also be an input to this "
                "custom operator and (2) may not alias any inputs to this custom operator or "
                "other returns. The most common way to trigger this error is if we have "
                "y = custom_op(x) and y and x are the same Tensor. Please instead return a "
                "clone of the offending output tensor(s) (e.g. return x.clone()) or refactor "
                "the custom operator to not return y.")

    def autograd_function(self):
        """The ``autograd.Function`` that runs this op's kernel and gives
        its outputs the registered backward (PyTorch names its node
        ``GeneratedBackwardFor_<ns>_<name>_defaultBackward``)."""
        return self._function


@contextlib.contextmanager
def _op_needs_input_grad(ctx, extra: tuple):
    """``ctx.needs_input_grad`` as the user's setup_context / backward see
    it: one flag per op input (``ctx.needs_input_grad[0]`` is the first
    input's), then ``extra``; not the Function's own leading ``op, kernel,
    kw`` arguments, which the engine's flags cover and get back after."""
    full = ctx.needs_input_grad
    ctx.needs_input_grad = tuple(full[3:]) + extra
    try:
        yield
    finally:
        ctx.needs_input_grad = full


class _OpFunction(Function):
    """Base of each op's autograd Function (``Operator.autograd_function``)."""

    #: A compiled backward records the user's backward op by op (as a user
    #: Function's); one that reads tensor data runs the call eagerly.
    recordable = True

    @staticmethod
    def forward(ctx, op, kernel, kw, *pos):
        with _opaque(op.qualname):
            out = kernel(*pos, **kw)
        op._check_aliasing(pos, kw, out)
        ctx.op, ctx.n_inputs = op, len(pos)
        if op.setup_context is not None:
            # PyTorch's setup_context sees one flag per op input and a last
            # False (its keyword-only metadata argument)
            with _op_needs_input_grad(ctx, (False,)):
                if kw and "keyword_only_inputs" in inspect.signature(op.setup_context).parameters:
                    op.setup_context(ctx, tuple(pos), out, keyword_only_inputs=kw)
                else:
                    op.setup_context(ctx, tuple(pos), out)
        return out

    @staticmethod
    def backward(ctx, *grads):
        op = ctx.op
        if op.backward is None:
            raise RuntimeError(_NO_AUTOGRAD.format(f"{op.namespace}.{op.name}.default"))
        with _opaque(f"the backward of the custom op {op.qualname}"), \
                _op_needs_input_grad(ctx, ()):
            g = op.backward(ctx, *grads)
        g = g if isinstance(g, tuple) else (g,)
        if len(g) != ctx.n_inputs:
            raise RuntimeError(f"{op.qualname}: the backward returned {len(g)} gradients; it "
                               f"must return one per input ({ctx.n_inputs})")
        return (None, None, None) + g


class OpOverload:
    """``torch.ops.ns.name.default``."""

    def __init__(self, op: Operator):
        self._op = op

    def __call__(self, *args, **kwargs):
        return self._op(*args, **kwargs)

    @property
    def _schema(self):
        return f"{self._op.qualname}{str(self._op.schema)[len(self._op.schema.name):]}"

    def __str__(self) -> str:
        return f"{self._op.namespace}.{self._op.name}.default"

    def __repr__(self) -> str:
        return f"<OpOverload(op='{self._op.namespace}.{self._op.name}', overload='default')>"


class OpOverloadPacket:
    """``torch.ops.ns.name``: the operator, callable, with ``.default``."""

    def __init__(self, op: Operator):
        self._op = op
        self.default = OpOverload(op)

    def __call__(self, *args, **kwargs):
        return self._op(*args, **kwargs)

    def overloads(self) -> list:
        return ["default"]

    def __str__(self) -> str:
        return f"{self._op.namespace}.{self._op.name}"

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='{self._op.namespace}.{self._op.name}')>"


def _operator(qualname) -> Operator:
    if isinstance(qualname, CustomOpDef):
        return qualname._op
    if isinstance(qualname, (OpOverload, OpOverloadPacket)):
        return qualname._op
    op = OPERATORS.get(qualname)
    if op is None:
        raise ValueError(f"Operator {qualname} does not exist (define it first with "
                         "torch.library.custom_op or Library.define)")
    return op


def _device_types(device_types) -> list:
    if device_types is None:
        return ["default"]
    if isinstance(device_types, str):
        return [device_types]
    return [getattr(d, "type", d) for d in device_types]


class CustomOpDef:
    """What ``custom_op`` returns: call it like the function; register
    fake, kernel and autograd implementations on it."""

    def __init__(self, namespace_: str, name: str, schema: str, fn, mutates_args):
        self._namespace, self._name = namespace_, name
        self._qualname = f"{namespace_}::{name}"
        self._init_fn = fn
        self._op = Operator(self._qualname, Schema(schema, name=self._qualname))
        self._op.opaque_autograd = True
        self._op.kernels["default"] = fn
        OPERATORS[self._qualname] = self._op
        self._opoverload = self._op.packet.default
        self.__wrapped__ = fn
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        return self._op(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<CustomOpDef({self._qualname})>"

    def register_fake(self, fn):
        """The shape function (``opcheck`` compares it with the kernel)."""
        self._op.fake = fn
        return fn

    def register_kernel(self, device_types, fn=None):
        """A body for these device types (``"cpu"``, ``"cuda"``)."""
        def reg(f):
            for d in _device_types(device_types):
                self._op.kernels[d] = f
            return f
        return reg if fn is None else reg(fn)

    def register_autograd(self, backward, /, *, setup_context=None):
        """``backward(ctx, *grads)`` returns one gradient per input (None
        for non-tensors); ``setup_context(ctx, inputs, output)`` saves what
        it needs."""
        self._op.backward, self._op.setup_context = backward, setup_context


def custom_op(name: str, fn=None, /, *, mutates_args, device_types=None, schema=None):
    """``@custom_op("ns::name", mutates_args=())``: an operator from a
    type-annotated function (see the module docstring)."""
    def make(f):
        ns, sep, opname = name.partition("::")
        if not sep or not ns or not opname or "::" in opname:
            raise ValueError(f"Expected there to be a namespace in {name}, i.e. The operator "
                             "name should look something like ns::foo")
        text = schema if schema is not None else infer_schema(f, mutates_args=mutates_args)
        op = CustomOpDef(ns, opname, text, f, mutates_args)
        if device_types is not None:
            del op._op.kernels["default"]
            op.register_kernel(device_types, f)
        return op
    return make if fn is None else make(fn)


def register_fake(op, func=None, /, *, lib=None, _stacklevel=1):
    """``torch.library.register_fake("ns::name")``: the op's shape function."""
    def reg(f):
        _operator(op).fake = f
        return f
    return reg if func is None else reg(func)


def register_autograd(op, backward, /, *, setup_context=None, lib=None) -> None:
    o = _operator(op)
    o.backward, o.setup_context = backward, setup_context
    o.opaque_autograd = True


def register_kernel(op, device_types, func=None, /, *, lib=None):
    o = _operator(op)

    def reg(f):
        for d in _device_types(device_types):
            o.kernels[d] = f
        return f
    return reg if func is None else reg(func)


# --- the string-schema API -------------------------------------------------------

_DEF_NAMESPACES: set = set()


class Library:
    """``torch.library.Library(ns, kind)``: ``kind`` is ``"DEF"`` (one per
    namespace), ``"FRAGMENT"`` (more definitions) or ``"IMPL"``."""

    def __init__(self, ns: str, kind: str, dispatch_key: str = ""):
        if kind not in ("IMPL", "DEF", "FRAGMENT"):
            raise ValueError("Unsupported kind: ", kind)
        if kind == "DEF" and ns in _DEF_NAMESPACES:
            raise RuntimeError(
                f"Only a single TORCH_LIBRARY can be used to register the namespace {ns}; "
                "please put all of your definitions in a single TORCH_LIBRARY block.  If you "
                "were trying to specify implementations, consider using TORCH_LIBRARY_IMPL "
                "(which can be duplicated).  If you really intended to define operators for "
                "a single namespace in a distributed way, you can use TORCH_LIBRARY_FRAGMENT "
                "to explicitly indicate this.")
        if kind == "DEF":
            _DEF_NAMESPACES.add(ns)
        self.ns, self.kind, self.dispatch_key = ns, kind, dispatch_key
        self._defined: list = []

    def __repr__(self) -> str:
        return f"Library(kind={self.kind}, ns={self.ns}, dispatch_key={self.dispatch_key})>"

    def define(self, schema: str, alias_analysis: str = "", *, tags=()) -> str:
        if self.kind == "IMPL":
            raise RuntimeError("define() is not allowed on an IMPL library")
        s = Schema(schema)
        qualname = f"{self.ns}::{s.name}"
        s.name = qualname
        OPERATORS[qualname] = Operator(qualname, s)
        self._defined.append(qualname)
        return qualname.partition("::")[2]

    def impl(self, op_name, fn, dispatch_key: str = "", *, with_keyset: bool = False):
        if isinstance(op_name, str):
            qualname = op_name if "::" in op_name else f"{self.ns}::{op_name.split('.')[0]}"
        else:
            qualname = _operator(op_name).qualname
        o = _operator(qualname)
        key = dispatch_key or self.dispatch_key or "CompositeImplicitAutograd"
        if key == "Meta":
            o.fake = fn
        else:
            o.kernels[key] = fn
        return fn

    def _register_fake(self, op_name, fn, _stacklevel=1):
        return register_fake(f"{self.ns}::{op_name}", fn)

    def _destroy(self) -> None:
        for q in self._defined:
            o = OPERATORS.pop(q, None)
            if o is not None:
                NAMESPACES[o.namespace]._ops.pop(o.name, None)
        _DEF_NAMESPACES.discard(self.ns)


def define(qualname: str, schema: str, *, lib=None, tags=()) -> None:
    """``torch.library.define("ns::name", "(Tensor x) -> Tensor")``."""
    ns, _, name = qualname.partition("::")
    (lib or Library(ns, "FRAGMENT")).define(name + schema, tags=tags)


def impl(qualname, types, func=None, *, lib=None):
    """``@torch.library.impl("ns::name", "cpu")``: a kernel for these
    device types or dispatch keys."""
    keys = [types] if isinstance(types, str) else list(types)

    def reg(f):
        o = _operator(qualname)
        for k in keys:
            k = getattr(k, "type", k)
            if k == "Meta":
                o.fake = f
            else:
                o.kernels[k] = f
        return f
    return reg if func is None else reg(func)


def opcheck(op, args, kwargs=None, *, test_utils=_checks.OPCHECK_TESTS, raise_exception=True,
            atol=None, rtol=None) -> dict:
    """``torch.library.opcheck`` (``tracec.library.opcheck`` says which
    checks run)."""
    return _checks.opcheck(_operator(op), args, kwargs, test_utils=test_utils,
                           raise_exception=raise_exception, atol=atol, rtol=rtol)
