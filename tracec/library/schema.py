"""``torch.library``'s schemas: ``infer_schema`` (a schema string from a
type-annotated function, as PyTorch writes it) and ``Schema`` (a parsed
``name(Type arg=default, *, ...) -> Ret``, what calls are bound by).

Invariant: ``infer_schema`` gives PyTorch's text for the types PyTorch
accepts, and PyTorch's ``ValueError`` for the rest.
"""
from __future__ import annotations

import inspect
import re
import types
import typing

from tracec import dtypes as dt
from tracec.device import device as _device
from tracec.tensor import Tensor

__all__ = ["Schema", "infer_schema"]


def _type_name(ann, where: str, error) -> str:
    """PyTorch's schema type for the annotation ``ann``."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
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


def _resolve(ann, fn):
    """A string annotation (a module with ``from __future__ import
    annotations``: ``'torch.Tensor | None'``) evaluated as PyTorch does,
    with ``torch`` and ``typing``'s names at hand, then the function's
    globals; anything else as given."""
    if not isinstance(ann, str):
        return ann
    import tracec
    scope = {**vars(typing), "torch": tracec, "Tensor": Tensor, "typing": typing}
    scope.update(getattr(fn, "__globals__", {}))
    scope["torch"] = tracec     # (under install_as_torch the global is tracec already)
    try:
        return eval(ann, scope)  # noqa: S307 - an annotation of the user's own function
    except Exception:  # noqa: BLE001 - reported as the unsupported type it is
        return ann


def infer_schema(prototype_function, /, *, mutates_args, op_name=None) -> str:
    """The schema string of a type-annotated function, as PyTorch infers
    it: ``(Tensor(a0!) x, float s=1.0) -> Tensor``."""
    sig = inspect.signature(prototype_function)
    sig = sig.replace(
        parameters=[p.replace(annotation=_resolve(p.annotation, prototype_function))
                    for p in sig.parameters.values()],
        return_annotation=_resolve(sig.return_annotation, prototype_function))

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
            if p.default is not None and \
                    not isinstance(p.default, (int, float, bool, str, dt.DType)):
                error(f"Parameter {name} has an unsupported default value type "
                      f"{type(p.default)}. Please file an issue on GitHub so we can "
                      "prioritize this.")
            params.append(f"{t} {name}={_default_text(p.default)}")
    ret = sig.return_annotation
    if ret is inspect.Parameter.empty:
        error("No return type annotation was provided. Please add one.")
    if ret is None or ret is type(None):
        out = "()"
    elif typing.get_origin(ret) is tuple and \
            not (len(typing.get_args(ret)) == 2 and typing.get_args(ret)[1] is Ellipsis):
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
