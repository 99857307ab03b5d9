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
import re
import typing

from tracec import dtypes as dt
from tracec import graph
from tracec.autograd import Function
from tracec.device import device as _device
from tracec.ops.namespaces import NAMESPACES, namespace
from tracec.tensor import OPAQUE_CALLS, Tensor
from tracec.utils._pytree import tree_leaves

__all__ = ["Library", "custom_op", "define", "impl", "infer_schema", "opcheck",
           "register_autograd", "register_fake", "register_kernel", "CustomOpDef"]


# --- schemas ---------------------------------------------------------------------

def _type_name(ann, where: str, error) -> str:
    """PyTorch's schema type for the annotation ``ann``."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Union and len(args) == 2 and type(None) in args:
        inner = args[0] if args[1] is type(None) else args[1]
        return _type_name(inner, where, error) + "?"
    if origin in (list, tuple, typing.Sequence) or \
            (origin is not None and getattr(origin, "__name__", "") == "Sequence"):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            error(f"{where} has unsupported type {ann}.")
        return _type_name(args[0], where, error) + "[]"
    table = {Tensor: "Tensor", int: "SymInt", float: "float", bool: "bool", str: "str",
             dt.DType: "ScalarType", _device: "Device"}
    if ann in table:
        return table[ann]
    error(f"{where} has unsupported type {ann}.")


def _default_text(v) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, dt.DType):
        return str(v).rpartition(".")[2]
    return repr(v)


def infer_schema(prototype_function, /, *, mutates_args, op_name=None) -> str:
    """The schema string of a type-annotated function, as PyTorch infers
    it: ``(Tensor(a0!) x, float s=1.0) -> Tensor``."""
    sig = inspect.signature(prototype_function)

    def error(what):
        raise ValueError(f"infer_schema(func): {what} Got func with signature {sig})")
    params, kw_only_seen, n_mut = [], False, 0
    names = list(sig.parameters)
    if mutates_args != "unknown":
        missing = set(mutates_args) - set(names)
        if missing:
            error(f"{missing} in mutates_args were not found in the custom op's signature. "
                  "mutates_args should contain the names of all args that the custom op "
                  "mutates, or just the string 'unknown' if you don't know.")
    for name, p in sig.parameters.items():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            error("We do not support positional-only args, varargs, or varkwargs.")
        if p.kind == p.KEYWORD_ONLY and not kw_only_seen:
            params.append("*")
            kw_only_seen = True
        if p.annotation is inspect.Parameter.empty:
            error(f"Parameter {name} must have a type annotation.")
        t = _type_name(p.annotation, f"Parameter {name}", error)
        if t.startswith("Tensor") and (mutates_args == "unknown" or name in mutates_args):
            t = t.replace("Tensor", f"Tensor(a{n_mut}!)", 1)
            n_mut += 1
        if p.default is inspect.Parameter.empty:
            params.append(f"{t} {name}")
        else:
            if p.default is not None and not isinstance(p.default, (int, float, bool, str,
                                                                      dt.DType)):
                error(f"Parameter {name} has an unsupported default value type "
                      f"{type(p.default)}. Please file an issue on GitHub so we can "
                      "prioritize this.")
            params.append(f"{t} {name}={_default_text(p.default)}")
    ret = sig.return_annotation
    if ret is inspect.Parameter.empty:
        error("No return type annotation was provided. Please add one.")
    if ret is None or ret is type(None):
        out = "()"
    elif typing.get_origin(ret) is tuple and not (len(typing.get_args(ret)) == 2 and
                                                 typing.get_args(ret)[1] is Ellipsis):
        out = "(" + ", ".join(_type_name(a, "Return", error)
                              for a in typing.get_args(ret)) + ")"
    else:
        out = _type_name(ret, "Return", error)
    return f"({', '.join(params)}) -> {out}"


def _split_top(s: str) -> list:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _parse_default(text: str):
    text = text.strip()
    if text in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[text]
    if text.startswith(("'", '"')):
        return text[1:-1]
    if text.startswith("["):
        return [_parse_default(t) for t in _split_top(text[1:-1])]
    try:
        return int(text)
    except ValueError:
        return float(text)


class Schema:
    """A parsed ``name(Type arg, ..., *, Type kw=default) -> Ret`` schema:
    argument names, kinds and defaults (what calls are bound by) and the
    names of the arguments it writes (``Tensor(a!)``)."""

    def __init__(self, text: str, name: str | None = None):
        m = re.fullmatch(r"\s*([\w.:]*)\s*\((.*)\)\s*->\s*(.+?)\s*", text, re.S)
        if m is None:
            raise RuntimeError(f"Could not parse schema: {text}")
        self.name = name or m.group(1)
        self.args_text, self.returns = m.group(2), m.group(3)
        params, kw_only = [], False
        self.mutated = []
        for a in _split_top(m.group(2)):
            if a == "*":
                kw_only = True
                continue
            decl, _, default = a.partition("=")
            typ, _, pname = decl.strip().rpartition(" ")
            if "!" in typ:
                self.mutated.append(pname)
            kind = inspect.Parameter.KEYWORD_ONLY if kw_only else \
                inspect.Parameter.POSITIONAL_OR_KEYWORD
            params.append(inspect.Parameter(
                pname, kind, default=_parse_default(default) if default else
                inspect.Parameter.empty))
        self.signature = inspect.Signature(params)

    def __str__(self) -> str:
        return f"{self.name}({self.args_text}) -> {self.returns}"

    def bind(self, args, kwargs) -> inspect.BoundArguments:
        try:
            b = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise RuntimeError(f"{self.name}() {e}. Declaration: {self}") from None
        b.apply_defaults()
        return b


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
        with _opaque(f"the backward of the custom op {op.qualname}"):
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



# --- opcheck ---------------------------------------------------------------------

_OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor",
                  "test_aot_dispatch_dynamic")


def _clone_args(args, kwargs):
    def c(a):
        if isinstance(a, Tensor):
            return a.detach().clone().requires_grad_(a.requires_grad)
        if isinstance(a, (list, tuple)):
            return type(a)(c(x) for x in a)
        return a
    return tuple(c(a) for a in args), {k: c(v) for k, v in kwargs.items()}


def _tensors(x) -> list:
    return [t for t in tree_leaves(x) if isinstance(t, Tensor)]


def _close(a, b, atol, rtol) -> bool:
    import numpy as np
    x, y = a.detach().numpy(), b.detach().numpy()
    return x.shape == y.shape and np.allclose(x, y, atol=atol or 1e-5, rtol=rtol or 1.3e-6,
                                              equal_nan=True)


def opcheck(op, args, kwargs=None, *, test_utils=_OPCHECK_TESTS, raise_exception=True,
            atol=None, rtol=None) -> dict:
    """``torch.library.opcheck``: the same four test names and result
    dictionary as PyTorch, each a reduced check:

    - ``test_schema``: inputs the schema does not mark as mutated keep
      their values, and no output is an input;
    - ``test_autograd_registration``: when an input requires grad, the op
      has an autograd formula (``register_autograd``) or is a kernel that
      autograd records through;
    - ``test_faketensor``: the fake implementation, called on copies of
      the real inputs (tracec has no FakeTensor), gives outputs of the
      kernel's shapes and dtypes;
    - ``test_aot_dispatch_dynamic``: ``tracec.compile`` (its reference
      interpreter) of a call gives the eager outputs and, with an autograd
      formula, the eager gradients.
    """
    kwargs = kwargs or {}
    o = _operator(op)
    results = {}
    for name in ([test_utils] if isinstance(test_utils, str) else test_utils):
        if name not in _OPCHECK_TESTS:
            raise ValueError(f"test_utils={name} is not a valid test; choose from "
                             f"{_OPCHECK_TESTS}")
        try:
            globals()["_" + name](o, args, kwargs, atol, rtol)
            results[name] = "SUCCESS"
        except Exception as e:
            if raise_exception:
                raise OpCheckError(f"opcheck(op, ...): {name} failed with {e} (scroll up for "
                                   "stack trace)") from e
            results[name] = e
    return results


class OpCheckError(Exception):
    pass


def _test_schema(o, args, kwargs, atol, rtol):
    a, k = _clone_args(args, kwargs)
    b = o.schema.bind(a, k)
    before = {n: [t.detach().clone() for t in _tensors(v)] for n, v in b.arguments.items()}
    with graph.no_grad():
        out = o(*a, **k)
    for n, v in b.arguments.items():
        if n in o.schema.mutated:
            continue
        for t0, t1 in zip(before[n], _tensors(v)):
            if not _close(t0, t1, 0, 0):
                raise RuntimeError(f"{o.qualname}: argument {n} is not defined as mutable but "
                                   "was mutated")
    ins = {id(t) for t in _tensors(list(b.arguments.values()))}
    if any(id(t) in ins for t in _tensors(out)):
        raise RuntimeError(f"{o.qualname}: an output is also an input")


def _test_autograd_registration(o, args, kwargs, atol, rtol):
    if any(t.requires_grad for t in _tensors(list(args) + list(kwargs.values()))) and \
            o.opaque_autograd and o.backward is None:
        raise AssertionError(
            f"{o.qualname}: an input requires grad but no autograd formula was registered. "
            "Please use register_autograd to add one.")


def _test_faketensor(o, args, kwargs, atol, rtol):
    if o.fake is None:
        raise RuntimeError(f"There was no fake impl registered for {o.qualname}. This is "
                           "necessary for torch.compile/export/fx tracing to work. Please use "
                           "`register_fake` to add an fake impl.")
    a, k = _clone_args(args, kwargs)
    with graph.no_grad():
        real = _tensors(o(*a, **k))
        a, k = _clone_args(args, kwargs)
        fake = _tensors(o.fake(*a, **k))
    if len(real) != len(fake) or any(tuple(r.shape) != tuple(f.shape) or r.dtype != f.dtype
                                     for r, f in zip(real, fake)):
        raise RuntimeError(f"{o.qualname}: the fake implementation gives "
                           f"{[(f.dtype, list(f.shape)) for f in fake]}, the kernel "
                           f"{[(r.dtype, list(r.shape)) for r in real]}")


def _test_aot_dispatch_dynamic(o, args, kwargs, atol, rtol):
    import warnings
    from tracec.compiler import compile as compile_

    def run(compiled):
        a, k = _clone_args(args, kwargs)
        leaves = [t for t in _tensors(list(a) + list(k.values())) if t.requires_grad]

        def call(*a_, **k_):
            out = o(*a_, **k_)
            outs = [t for t in _tensors(out) if t.requires_grad]
            if outs and leaves and o.backward is not None:
                sum(t.sum() for t in outs).backward()
            return out
        f = compile_(call, backend="interp") if compiled else call
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = f(*a, **k)
        return _tensors(out), [t.grad for t in leaves]
    (eo, eg), (co, cg) = run(False), run(True)
    for x, y in list(zip(eo, co)) + [(g, h) for g, h in zip(eg, cg) if g is not None]:
        if y is None or not _close(x, y, atol, rtol):
            raise AssertionError(f"{o.qualname}: compiled and eager results differ")
