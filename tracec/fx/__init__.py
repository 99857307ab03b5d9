"""``tracec.fx``: PyTorch's FX toolkit for module-level program capture and
transformation (``torch.fx``), as FX passes written for PyTorch use it.

- ``symbolic_trace(module)`` runs ``forward`` on ``Proxy`` objects and
  records a ``Graph`` of ``Node`` s (``placeholder`` / ``get_attr`` /
  ``call_module`` / ``call_function`` / ``call_method`` / ``output``), with
  PyTorch's node names (``layer1_0_conv1``, ``add_1``), leaf modules (those
  of ``torch.nn`` except ``Sequential``, called, not traced through) and
  ``get_attr`` nodes for parameters read in traced code.
- ``GraphModule(root, graph)`` copies the submodules / attributes the graph
  names from ``root`` (parents that are not wholly needed become plain
  ``Module`` s, as PyTorch's ``_copy_attr`` makes them) and runs Python code
  generated from the graph (``.code``, PyTorch's format: ``name = expr;
  dead = None`` lines); ``recompile()`` regenerates it after the graph is
  edited (``erase_node``, ``replace_all_uses_with``, ``inserting_after``).
- ``Interpreter(gm).run(*args)`` executes a graph node by node through the
  overridable ``run_node`` / ``call_module`` / ... methods; ``Transformer``
  runs it on proxies to build a rewritten graph; ``passes.shape_prop``'s
  ``ShapeProp`` records each node's ``tensor_meta``.
- PyTorch's submodule names (``torch.fx.node``, ``.graph``,
  ``.graph_module``, ``.interpreter``, ``.proxy``, ``._symbolic_trace``)
  re-export what they hold from here.

How calls are captured: PyTorch's proxies see ``torch.*`` functions through
``__torch_function__``; tracec's functions do not dispatch on argument
types, so while a trace runs the public functions of ``torch`` (tracec),
``torch.nn.functional`` and ``math`` are replaced by wrappers that record a
``call_function`` node when an argument holds a ``Proxy`` and call the
function otherwise (a ``_Recorder``, equal to the function it stands for);
``Module.__call__`` / ``__getattr__`` are wrapped the same way (PyTorch's
tracer patches those too); ``Transformer.transform`` patches the functions
only.  Invariant: every patch is
undone when the trace ends, raising or not.  A public function bound before
tracing (``from torch import flatten``) is seen where a traced ``forward``'s
module holds it as a global (those globals are patched alike, as PyTorch
patches its autowrap functions there); bound elsewhere (a local name, a
helper module no traced forward belongs to) it fails on the ``Proxy``,
where PyTorch would record it.  ``torch._assert`` hands a Proxy condition
to ``Proxy.__torch_function__`` wherever it is bound, as in PyTorch.
``fx.wrap`` and a tracer's ``autowrap_functions`` name leaf functions.
"""
from __future__ import annotations

import bisect
import builtins
import contextlib
import copy
import dis
import inspect
import keyword
import math
import operator
import re
import sys
import types
import typing
import warnings
from typing import Any, Callable, Dict, Optional

from tracec.nn._aten_nn import FUNCTIONAL_NAMES
from tracec.nn.modules.container import Sequential
from tracec.nn.modules.module import Module
from tracec.nn.parameter import Parameter
from tracec.tensor import Tensor
from tracec.torch_function_switch import unwrapped

__all__ = ["wrap", "symbolic_trace", "Tracer", "Graph", "GraphModule", "Node", "Proxy",
           "Interpreter", "Transformer", "map_arg", "TraceError"]


#: (globals of the module that called ``wrap``, name): the leaf functions
#: every trace patches there, as PyTorch's ``_wrapped_fns_to_patch``
_WRAPPED: list = []
_UNSET = object()   # (a name a trace added to a module's globals: removed after)


def wrap(fn_or_name):
    """Marks a module-level function as a leaf for the symbolic tracer
    (PyTorch's ``torch.fx.wrap``, called at module scope): while a trace
    runs, the name in the calling module records a ``call_function`` of it
    when called with a Proxy, instead of being traced through."""
    if not (callable(fn_or_name) or isinstance(fn_or_name, str)):
        raise AssertionError("Unsupported type for global function! Must be either a callable "
                             "or string name")
    name = fn_or_name if isinstance(fn_or_name, str) else fn_or_name.__name__
    frame = inspect.currentframe().f_back
    if frame.f_code.co_name != "<module>":
        raise NotImplementedError("wrap must be called at the top level of a module")
    _WRAPPED.append((frame.f_globals, name))
    return fn_or_name


class TraceError(ValueError):
    pass


def map_arg(a, fn: Callable):
    """``a`` with every ``Node`` in it (nested in tuples, lists, dicts and
    slices) replaced by ``fn(node)``."""
    if isinstance(a, Node):
        return fn(a)
    if isinstance(a, tuple):
        items = [map_arg(x, fn) for x in a]
        return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
    if isinstance(a, list):
        return [map_arg(x, fn) for x in a]
    if isinstance(a, dict):
        return {k: map_arg(v, fn) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(map_arg(a.start, fn), map_arg(a.stop, fn), map_arg(a.step, fn))
    return a


def _type_repr(obj) -> str:
    if obj is Tensor:
        return "torch.Tensor"
    if isinstance(obj, type):
        if obj.__module__ == "builtins":
            return obj.__qualname__
        return f"{obj.__module__}.{obj.__qualname__}"
    if obj is ...:
        return "..."
    if isinstance(obj, types.FunctionType):
        return obj.__name__
    return repr(obj)


# --- qualified names of the functions a trace records ----------------------------------

#: id(function) -> (the function, the name PyTorch prints for it:
#: ``torch.flatten``, ``torch.nn.functional.relu``), filled by the patches a
#: trace installs (the function kept, so its id stays its own).
_PUBLIC_NAMES: Dict[int, tuple] = {}


def _qualified_name(fn) -> str:
    inner = unwrapped(fn)       # (a __torch_function__ wrapper: its implementation's name)
    entry = _PUBLIC_NAMES.get(id(inner))
    if entry is not None and entry[0] is inner:
        return entry[1]
    module = getattr(fn, "__module__", None) or ""
    if module == "_operator":
        module = "operator"
    qual = getattr(fn, "__qualname__", getattr(fn, "__name__", repr(fn)))
    return f"{module}.{qual}" if module else qual


def _pretty_target(target) -> str:
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None)
    name = getattr(target, "__name__", None)
    if name is not None and module == "builtins":
        return f"builtins.{name}"
    if name is not None and module == "_operator":
        return f"operator.{name}"
    return _qualified_name(target)


def _format_arg(arg) -> str:
    if isinstance(arg, list):
        return "[" + ", ".join(_format_arg(a) for a in arg) + "]"
    if isinstance(arg, tuple):
        return "(" + ", ".join(_format_arg(a) for a in arg) + ("," if len(arg) == 1 else "") + ")"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k}: {_format_arg(v)}" for k, v in arg.items()) + "}"
    if isinstance(arg, Node):
        return "%" + str(arg)
    return str(arg)


# --- Node and Graph --------------------------------------------------------------------

class Node:
    """One operation of a ``Graph``: ``op`` (its kind), ``target`` (what it
    calls: a qualified module / attribute name, a function, or a method
    name), ``args`` / ``kwargs`` (other nodes and constants), ``users``
    (the nodes that read it, in insertion order).  Invariant: ``users`` and
    the nodes in ``args`` / ``kwargs`` stay each other's mirror."""

    def __init__(self, graph, name: str, op: str, target, args, kwargs, type=None):
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.type = type
        self.meta: dict = {}
        self.users: Dict[Node, None] = {}
        self._input_nodes: Dict[Node, None] = {}
        self._args, self._kwargs = (), {}
        self._prev = self._next = self
        self._erased = False
        self._update_args_kwargs(args, kwargs)

    @property
    def args(self) -> tuple:
        return self._args

    @args.setter
    def args(self, a) -> None:
        self._update_args_kwargs(a, self._kwargs)

    @property
    def kwargs(self) -> dict:
        return self._kwargs

    @kwargs.setter
    def kwargs(self, k) -> None:
        self._update_args_kwargs(self._args, k)

    @property
    def all_input_nodes(self) -> list:
        return list(self._input_nodes)

    @property
    def next(self) -> "Node":
        return self._next

    @property
    def prev(self) -> "Node":
        return self._prev

    def _update_args_kwargs(self, args, kwargs) -> None:
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._args, self._kwargs = tuple(map_arg(tuple(args), lambda n: n)), dict(kwargs)
        self._input_nodes = {}
        map_arg(self._args, lambda n: self._input_nodes.setdefault(n))
        map_arg(self._kwargs, lambda n: self._input_nodes.setdefault(n))
        for n in self._input_nodes:
            n.users.setdefault(self)

    def replace_all_uses_with(self, replace_with: "Node", delete_user_cb=lambda user: True, *,
                              propagate_meta: bool = False) -> list:
        """Make every user of this node read ``replace_with`` instead; returns
        the users changed."""
        if propagate_meta:
            for k, v in self.meta.items():
                replace_with.meta.setdefault(k, v)
        changed = []
        for user in list(self.users):
            if not delete_user_cb(user):
                continue
            changed.append(user)
            swap = lambda n: replace_with if n is self else n  # noqa: E731
            user._update_args_kwargs(map_arg(user._args, swap), map_arg(user._kwargs, swap))
        return changed

    def replace_input_with(self, old_input: "Node", new_input: "Node") -> None:
        swap = lambda n: new_input if n is old_input else n  # noqa: E731
        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    def prepend(self, x: "Node") -> None:
        """Move ``x`` just before this node."""
        if x is self:
            return
        x._remove_from_list()
        p = self._prev
        p._next, x._prev, x._next, self._prev = x, p, self, x

    def append(self, x: "Node") -> None:
        """Move ``x`` just after this node."""
        self._next.prepend(x)

    def _remove_from_list(self) -> None:
        # (the node keeps its own _next: iterating graph.nodes may erase the
        # current node and go on)
        p, n = self._prev, self._next
        p._next, n._prev = n, p

    def format_node(self) -> Optional[str]:
        typename = f"{_type_repr(self.type)} " if self.type is not None else ""
        if self.op == "placeholder":
            default = f"(default={self.args[0]})" if self.args else ""
            return (f"%{self.name} : {typename}[num_users={len(self.users)}] = "
                    f"placeholder[target={self.target}]{default}")
        if self.op == "get_attr":
            return (f"%{self.name} : {typename}[num_users={len(self.users)}] = "
                    f"get_attr[target={_pretty_target(self.target)}]")
        if self.op == "output":
            return f"return {self.args[0]}"
        return (f"%{self.name} : {typename}[num_users={len(self.users)}] = "
                f"{self.op}[target={_pretty_target(self.target)}](args = "
                f"{_format_arg(self.args)}, kwargs = {_format_arg(self.kwargs)})")

    def __repr__(self) -> str:
        return self.name


class _NodeList:
    def __init__(self, graph, direction: str = "_next"):
        self.graph, self.direction = graph, direction

    def __len__(self) -> int:
        return self.graph._len

    def __iter__(self):
        root, d = self.graph._root, self.direction
        cur = getattr(root, d)
        while cur is not root:
            if not cur._erased:
                yield cur
            cur = getattr(cur, d)

    def __reversed__(self):
        return _NodeList(self.graph, "_prev" if self.direction == "_next" else "_next")


_ILLEGAL = re.compile(r"[^0-9a-zA-Z_]+")
_SUFFIX = re.compile(r"(.*)_(\d+)$")
_CUSTOM_BUILTINS = {"inf", "nan", "NoneType", "torch", "device", "fx_pytree", "pytree"}


def _snake_case(s: str) -> str:
    return re.sub(r"(?<=[a-z])([A-Z])", r"_\1", s).lower()


class _Namespace:
    """Unique Python identifiers for a graph's nodes, as PyTorch makes them:
    illegal characters to ``_``, then ``base``, ``base_1``, ``base_2``..."""

    def __init__(self):
        self._used: set = set()
        self._base_count: Dict[str, int] = {}

    def create_name(self, candidate: str) -> str:
        candidate = _ILLEGAL.sub("_", candidate) or "_unnamed"
        if candidate[0].isdigit():
            candidate = f"_{candidate}"
        m = _SUFFIX.match(candidate)
        base, num = (candidate, None) if m is None else (m.group(1), int(m.group(2)))
        candidate = base if num is None else f"{base}_{num}"
        if not num:
            num = self._base_count.get(base, 0)
        while candidate in self._used or keyword.iskeyword(candidate) or \
                candidate in builtins.__dict__ or candidate in _CUSTOM_BUILTINS:
            num += 1
            candidate = f"{base}_{num}"
        self._used.add(candidate)
        self._base_count[base] = num
        return candidate


_MAGIC = {"eq": "{} == {}", "ne": "{} != {}", "lt": "{} < {}", "gt": "{} > {}", "le": "{} <= {}",
          "ge": "{} >= {}", "pos": "+{}", "neg": "-{}", "invert": "~{}"}
_REFLECTABLE = {"add": "{} + {}", "sub": "{} - {}", "mul": "{} * {}", "floordiv": "{} // {}",
                "truediv": "{} / {}", "mod": "{} % {}", "pow": "{} ** {}", "lshift": "{} << {}",
                "rshift": "{} >> {}", "and_": "{} & {}", "or_": "{} | {}", "xor": "{} ^ {}",
                "getitem": "{}[{}]", "matmul": "{} @ {}"}
_MAGIC.update(_REFLECTABLE)


def _format_target(base: str, target: str) -> str:
    r = base
    for elem in target.split("."):
        r = f"{r}.{elem}" if elem.isidentifier() else f'getattr({r}, "{elem}")'
    return r


class Graph:
    """A doubly linked list of ``Node`` s in execution order; ``nodes``
    iterates it (erasing the current node while iterating is allowed)."""

    def __init__(self, owning_module=None):
        self._root = Node(self, "", "root", "", (), {})
        self._len = 0
        self._namespace = _Namespace()
        self._insert = self._root.prepend
        self.owning_module = owning_module

    @property
    def nodes(self) -> _NodeList:
        return _NodeList(self)

    def __getstate__(self) -> dict:
        # (the owning module is set again by the GraphModule built on load;
        # the insertion point is the end of the graph)
        state = dict(self.__dict__)
        state["owning_module"] = None
        del state["_insert"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._insert = self._root.prepend

    def _target_to_str(self, target) -> str:
        if isinstance(target, str):
            if target.startswith("__") and target.endswith("__"):
                target = target[2:-2]
            return _snake_case(target)
        return _snake_case(_qualified_name(target).rsplit(".", 1)[-1])

    def create_node(self, op: str, target, args=None, kwargs=None, name: Optional[str] = None,
                    type_expr=None) -> Node:
        if op not in ("call_function", "call_method", "get_attr", "call_module", "placeholder",
                      "output"):
            raise AssertionError(f"unknown node op {op!r}")
        candidate = name if name is not None else self._target_to_str(target)
        n = Node(self, self._namespace.create_name(candidate), op, target, args or (),
                 kwargs or {}, type_expr)
        self._insert(n)
        self._len += 1
        return n

    def placeholder(self, name: str, type_expr=None, default_value=inspect.Signature.empty) -> Node:
        args = () if default_value is inspect.Signature.empty else (default_value,)
        return self.create_node("placeholder", name, args=args, type_expr=type_expr)

    def get_attr(self, qualified_name: str, type_expr=None) -> Node:
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name: str, args=None, kwargs=None, type_expr=None) -> Node:
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name: str, args=None, kwargs=None, type_expr=None) -> Node:
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function, args=None, kwargs=None, type_expr=None) -> Node:
        return self.create_node("call_function", the_function, args, kwargs, type_expr=type_expr)

    def output(self, result, type_expr=None) -> Node:
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    @contextlib.contextmanager
    def _inserting(self, insert):
        saved, self._insert = self._insert, insert
        try:
            yield
        finally:
            self._insert = saved

    def inserting_before(self, n: Optional[Node] = None):
        """New nodes go just before ``n`` (the end of the graph if None)."""
        return self._inserting((n or self._root).prepend)

    def inserting_after(self, n: Optional[Node] = None):
        """New nodes go just after ``n`` (the start of the graph if None),
        each after the one inserted before it."""
        last = [n or self._root]

        def insert(x):
            last[0].append(x)
            last[0] = x
        return self._inserting(insert)

    def node_copy(self, node: Node, arg_transform: Callable = lambda x: x) -> Node:
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        n = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        n.meta = dict(node.meta)
        return n

    def erase_node(self, to_erase: Node) -> None:
        if len(to_erase.users) > 0:
            raise RuntimeError(f"Tried to erase Node {to_erase} but it still had "
                               f"{len(to_erase.users)} users in the graph: {to_erase.users}!")
        if to_erase.graph is not self:
            raise RuntimeError(f"Attempting to remove {to_erase} from wrong graph!")
        if to_erase._erased:
            warnings.warn(f"erase_node({to_erase}) on an already erased node")
            return
        to_erase._remove_from_list()
        to_erase._erased = True
        self._len -= 1
        # drop its inputs' users entries
        to_erase._update_args_kwargs(map_arg(to_erase._args, lambda n: None),
                                     map_arg(to_erase._kwargs, lambda n: None))

    def eliminate_dead_code(self) -> bool:
        changed = False
        for node in reversed(self.nodes):
            if node.op not in ("placeholder", "output") and len(node.users) == 0:
                self.erase_node(node)
                changed = True
        return changed

    def lint(self) -> None:
        """Checks the graph's invariants: each node belongs to it, reads only
        nodes defined before it, has a unique name; with an owning module,
        ``call_module`` / ``get_attr`` targets exist."""
        seen_names, seen = set(), set()
        for node in self.nodes:
            if node.graph is not self:
                raise RuntimeError(f"Node '{node}' does not belong to this Graph!")
            if node.op not in ("placeholder", "get_attr", "call_module", "call_method",
                               "call_function", "output"):
                raise RuntimeError(f"Node {node} had unknown opcode {node.op}!")
            for arg in node._input_nodes:
                if arg.graph is not self:
                    raise RuntimeError(f"Arg {arg} of Node '{node}' does not belong to this "
                                       "Graph!")
                if arg not in seen:
                    raise RuntimeError(f"Argument '{arg}' of Node '{node}' was used before it "
                                       "has been defined! Please check that Nodes in the graph "
                                       "are topologically ordered\n" + str(self))
            if node.name in seen_names:
                raise RuntimeError(f"Node redefined name {node.name}!")
            seen_names.add(node.name)
            seen.add(node)
        if self.owning_module is not None:
            for node in self.nodes:
                if node.op in ("get_attr", "call_module"):
                    obj = self.owning_module
                    for i, atom in enumerate(node.target.split(".")):
                        if not hasattr(obj, atom):
                            where = ".".join(node.target.split(".")[:i])
                            raise RuntimeError(f"Node {node} target {node.target} references "
                                               f"nonexistent attribute {atom} of {where}")
                        obj = getattr(obj, atom)
                    if node.op == "call_module" and not isinstance(obj, Module):
                        raise RuntimeError(f"Node {node} target {node.target} {atom} of "
                                           f"{where if i else 'root'} does not reference an "
                                           "nn.Module")

    def python_code(self, root_module: str = "self") -> "_PythonCode":
        """The graph as the source of a ``forward(self, ...)`` function, in
        PyTorch's format, and the globals it needs."""
        glbls: Dict[str, Any] = {"torch": sys.modules.get("tracec"),
                                 "tracec": sys.modules.get("tracec"), "inf": math.inf,
                                 "nan": math.nan, "NoneType": type(None)}

        wraps: list = []

        def add_global(obj) -> str:
            if obj is Tensor:
                return "torch.Tensor"
            name = _qualified_name(obj)
            if name.startswith("math.") and name.count(".") == 1:
                # PyTorch's tracer autowraps math's functions: the code names
                # them math_<fn>, after a wrap("math_<fn>") statement
                gname = "math_" + name[5:]
                glbls[gname] = obj
                if gname not in wraps:
                    wraps.append(gname)
                return gname
            top, *path = name.split(".")
            root = {"operator": operator, "math": math, "builtins": builtins}.get(
                top, glbls["torch"] if top == "torch" else None)
            found = root
            for atom in path:
                found = getattr(found, atom, None)
            # the name resolves to it (or to the same implementation, behind
            # a __torch_function__ wrapper)
            if root is not None and (found is obj or unwrapped(found) is unwrapped(obj)):
                glbls.setdefault(top, root)
                return name
            # (a prefix no node name has: a global must not be shadowed by a local)
            base = "_fx_" + _ILLEGAL.sub("_", getattr(obj, "__name__", "fn"))
            k, cand = 0, base
            while cand in glbls and glbls[cand] is not obj:
                k += 1
                cand = f"{base}_{k}"
            glbls[cand] = obj
            return cand

        def type_str(t) -> str:
            if isinstance(t, type) and t.__module__ == "builtins" and t is not type(None):
                return t.__qualname__           # (int, str: as PyTorch writes them)
            if isinstance(t, type) and t is not type(None):
                return add_global(t)
            origin, args = typing.get_origin(t), typing.get_args(t)
            if origin is not None and args:
                # a typing generic, as PyTorch writes it (typing_Union[torch.Tensor,NoneType]),
                # its typing name a global of the code
                name = "Union" if origin is typing.Union else getattr(t, "_name", None)
                if name and hasattr(typing, name):
                    glbls["typing_" + name] = getattr(typing, name)
                    base = "typing_" + name
                else:
                    base = add_global(origin)
                return f"{base}[{','.join(type_str(a) for a in args)}]"
            return _type_repr(t)

        last_use: Dict[Node, Node] = {}
        to_free: Dict[Node, list] = {}
        for node in reversed(self.nodes):
            def register(n, user=node):
                if n not in last_use:
                    last_use[n] = user
                    to_free.setdefault(user, []).append(n)
            map_arg(node.args, register)
            map_arg(node.kwargs, register)

        free_vars, body = [], []
        ret_ann = ""

        def fmt_args(args, kwargs) -> str:
            parts = [repr(a) for a in args] + [f"{k} = {v!r}" for k, v in kwargs.items()]
            return ", ".join(parts)

        for node in self.nodes:
            ann = f" : {type_str(node.type)}" if node.type is not None else ""
            if node.op == "placeholder":
                default = f" = {node.args[0]!r}" if node.args else ""
                free_vars.append(f"{node.target}{ann}{default}")
                if node.target != node.name:
                    body.append(f"{node.name} = {node.target}\n")
                continue
            if node.op == "output":
                if node.type is not None:
                    ret_ann = f" -> {type_str(node.type)}"
                body.append(f"return {node.args[0]!r}\n")
                continue
            if node.op == "call_method":
                line = (f"{node.name}{ann} = {node.args[0]!r}.{node.target}"
                        f"({fmt_args(node.args[1:], node.kwargs)})")
            elif node.op == "call_module":
                line = (f"{node.name}{ann} = {_format_target(root_module, node.target)}"
                        f"({fmt_args(node.args, node.kwargs)})")
            elif node.op == "get_attr":
                line = f"{node.name}{ann} = {_format_target(root_module, node.target)}"
            else:
                fn = node.target
                name = getattr(fn, "__name__", None)
                if getattr(fn, "__module__", None) == "_operator" and name in _MAGIC \
                        and not node.kwargs:
                    line = f"{node.name}{ann} = " + _MAGIC[name].format(*(repr(a) for a in
                                                                           node.args))
                elif fn is builtins.getattr and len(node.args) == 2 and \
                        isinstance(node.args[1], str) and node.args[1].isidentifier():
                    line = f"{node.name}{ann} = {node.args[0]!r}.{node.args[1]}"
                else:
                    line = (f"{node.name}{ann} = {add_global(fn)}"
                            f"({fmt_args(node.args, node.kwargs)})")
            dead = list(to_free.get(node, []))
            if not node.users:
                dead.append(node)
            if dead:
                line += ";  " + " = ".join([repr(n) for n in dead] + ["None"])
            body.append(line + "\n")
        code = "".join("    " + ln for ln in body)
        signature = ", ".join([root_module] + free_vars)
        wrap_stmts = "\n".join(f'torch.fx._symbolic_trace.wrap("{w}")' for w in wraps)
        src = f"\n{wrap_stmts}\n\ndef forward({signature}){ret_ann}:\n{code}    "
        return _PythonCode(src, glbls)

    def __str__(self) -> str:
        s = "graph():"
        for node in self.nodes:
            s += "\n    " + node.format_node()
        return s


class _PythonCode:
    def __init__(self, src: str, globals: dict):
        self.src, self.globals = src, globals


# --- GraphModule -----------------------------------------------------------------------

def _copy_attr(from_module: Module, to_module: Module, target: str) -> None:
    """Install ``from_module``'s attribute at the dotted ``target`` on
    ``to_module``, making missing parents plain ``Module`` s (a parent
    already copied whole is left as it is)."""
    *prefix, field = target.split(".")
    for item in prefix:
        f = getattr(from_module, item)
        t = getattr(to_module, item, None)
        if f is t:
            return
        if t is None:
            t = Module()
            setattr(to_module, item, t)
        from_module, to_module = f, t
    orig = getattr(from_module, field)
    if isinstance(orig, Tensor) and not isinstance(orig, Parameter):
        to_module.register_buffer(field, orig)
    else:
        setattr(to_module, field, orig)


class GraphModule(Module):
    """A ``Module`` whose ``forward`` is Python code generated from
    ``graph``; it holds the submodules, parameters and buffers the graph's
    ``call_module`` / ``get_attr`` nodes name, copied from ``root``.  Each
    instance has its own class (named ``class_name``, the traced module's
    class name), so that ``forward`` can be replaced by ``recompile()``."""

    def __new__(cls, *args, **kwargs):
        # a fresh class per instance, under the first class that is not one
        base = next(t for t in cls.__mro__ if "_graph_module_impl" not in t.__dict__)

        class GraphModuleImpl(base):
            _graph_module_impl = True
        return super().__new__(GraphModuleImpl)

    def __init__(self, root, graph: Graph, class_name: str = "GraphModule"):
        super().__init__()
        type(self).__name__ = type(self).__qualname__ = class_name
        if isinstance(root, Module):
            self.training = root.training
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    _copy_attr(root, self, node.target)
        elif isinstance(root, dict):
            for node in graph.nodes:
                if node.op in ("get_attr", "call_module"):
                    if node.target not in root:
                        raise RuntimeError(f"Node {node} referenced target {node.target} but "
                                           "that target was not provided in ``root``!")
                    *prefix, field = node.target.split(".")
                    owner = self
                    for item in prefix:
                        nxt = getattr(owner, item, None)
                        if nxt is None:
                            nxt = Module()
                            setattr(owner, item, nxt)
                        owner = nxt
                    setattr(owner, field, root[node.target])
        else:
            raise RuntimeError("Unsupported type " + str(root) + " passed for root!")
        self.graph = graph

    @property
    def graph(self) -> Graph:
        return self.__dict__["_graph"]

    @graph.setter
    def graph(self, g: Graph) -> None:
        self.__dict__["_graph"] = g
        g.owning_module = self
        self.recompile()

    @property
    def code(self) -> str:
        return self.__dict__["_code"]

    def recompile(self) -> _PythonCode:
        """Regenerate ``forward`` from the graph (after editing it)."""
        python_code = self._graph.python_code(root_module="self")
        self.__dict__["_code"] = python_code.src
        glbls = dict(python_code.globals)
        exec(compile(python_code.src, f"<eval_with_key>.{id(self)}", "exec", dont_inherit=True),
             glbls)
        type(self).forward = glbls["forward"]
        return python_code

    def __reduce__(self):
        # (its class is made per instance and cannot be pickled by name: the
        # state and the graph are, and a fresh GraphModule is built on load,
        # named "GraphModule" as PyTorch's reloaded ones are)
        state = {k: v for k, v in self.__dict__.items() if k not in ("_graph", "_code")}
        return (_rebuild_graph_module, (state, self._graph))

    def __deepcopy__(self, memo):
        # PyTorch's: a GraphModule over a deep copy of this one's state and
        # graph, named (like its class, which the copy shares) "GraphModule"
        res = type(self).__new__(type(self))
        memo[id(self)] = res
        fake = Module()
        fake.__dict__.update(copy.deepcopy(self.__dict__, memo))
        GraphModule.__init__(res, fake, fake.__dict__["_graph"])
        return res

    def __str__(self) -> str:
        return (Module.__repr__(self) + "\n" + self._code + "\n# To see more debug info, "
                "please use `graph_module.print_readable()`")


def _rebuild_graph_module(state: dict, graph: Graph) -> GraphModule:
    """Unpickling a ``GraphModule``: its saved state and graph."""
    fake = Module()
    fake.__dict__.update(state)
    return GraphModule(fake, graph)


# --- symbolic tracing ------------------------------------------------------------------

def _has_proxy(a) -> bool:
    if isinstance(a, Proxy):
        return True
    if isinstance(a, (tuple, list)):
        return any(_has_proxy(x) for x in a)
    if isinstance(a, dict):
        return any(_has_proxy(x) for x in a.values())
    if isinstance(a, slice):
        return _has_proxy(a.start) or _has_proxy(a.stop) or _has_proxy(a.step)
    return False


def _proxies(a):
    """The Proxies in ``a`` (nested tuples, lists and dicts), in order."""
    if isinstance(a, Proxy):
        yield a
    elif isinstance(a, (tuple, list)):
        for x in a:
            yield from _proxies(x)
    elif isinstance(a, dict):
        for x in a.values():
            yield from _proxies(x)


class Proxy:
    """A value being traced: operations on it add nodes to its tracer's graph."""

    def __init__(self, node: Node, tracer: "Tracer" = None):
        self.node = node
        self.tracer = tracer

    def __repr__(self) -> str:
        return f"Proxy({self.node.name})"

    def __getattr__(self, k: str) -> "Attribute":
        if k.startswith("__") and k.endswith("__"):
            raise AttributeError(k)
        return Attribute(self, k)

    def __call__(self, *args, **kwargs) -> "Proxy":
        return self.tracer.create_proxy("call_method", "__call__", (self,) + args, kwargs)

    def __iter__(self):
        # `a, b = proxy` (B, T, C = x.size()): PyTorch reads the calling
        # bytecode and, at an UNPACK_SEQUENCE of n, yields proxy[0..n-1]
        frame = inspect.currentframe().f_back
        insts = list(dis.get_instructions(frame.f_code))
        i = bisect.bisect_left([ins.offset for ins in insts], frame.f_lasti)
        if i < len(insts) and insts[i].opname == "UNPACK_SEQUENCE":
            return (self[k] for k in range(insts[i].argval))
        raise TraceError("Proxy object cannot be iterated. This can be attempted when the Proxy "
                         "is used in a loop or as a *args or **kwargs function argument. See "
                         "the torch.fx docs on pytorch.org for a more detailed explanation of "
                         "what types of control flow can be traced, and check out the Proxy "
                         "docstring for help troubleshooting Proxy iteration errors")

    def __bool__(self):
        raise TraceError("symbolically traced variables cannot be used as inputs to control "
                         "flow")

    def __len__(self):
        raise RuntimeError("'len' is not supported in symbolic tracing by default. If you want "
                           "this call to be recorded, please call torch.fx.wrap('len') at "
                           "module scope")

    def keys(self):
        return self.tracer.create_proxy("call_method", "keys", (self,), {})

    @classmethod
    def __torch_function__(cls, orig_method, types, args=(), kwargs=None):
        """A ``torch`` function reached with a Proxy through a name bound
        before the trace (``from torch import _assert``, as timm's layers
        do), which the patched namespaces cannot see: recorded as a
        ``call_function`` of it, as PyTorch's Proxy does."""
        kwargs = kwargs or {}
        tracer = next(a.tracer for a in _proxies((args, kwargs)))
        if isinstance(orig_method, _Recorder):   # (a module global, patched while tracing)
            orig_method = orig_method.fn
        return tracer.create_proxy("call_function", unwrapped(orig_method), args, kwargs)


def _install_magic():
    for name in _MAGIC:
        op = getattr(operator, name)
        dunder = name.rstrip("_")

        def impl(*args, _op=op):
            tracer = next(a.tracer for a in args if isinstance(a, Proxy))
            return tracer.create_proxy("call_function", _op, args, {})
        setattr(Proxy, f"__{dunder}__", impl)
    for name in _REFLECTABLE:
        op = getattr(operator, name)
        dunder = name.rstrip("_")

        def rimpl(self, rhs, _op=op):
            return self.tracer.create_proxy("call_function", _op, (rhs, self), {})
        setattr(Proxy, f"__r{dunder}__", rimpl)


_install_magic()
Proxy.__hash__ = object.__hash__


class Attribute(Proxy):
    """``proxy.attr``: a ``call_method`` node when called, else (on first
    use as a value) a ``getattr`` node."""

    def __init__(self, root: Proxy, attr: str):
        self.root, self.attr, self.tracer = root, attr, root.tracer
        self._node = None

    @property
    def node(self) -> Node:
        if self._node is None:
            self._node = self.tracer.create_proxy("call_function", builtins.getattr,
                                                  (self.root, self.attr), {}).node
        return self._node

    def __call__(self, *args, **kwargs) -> Proxy:
        return self.tracer.create_proxy("call_method", self.attr, (self.root,) + args, kwargs)


def _function_namespaces():
    """(module, PyTorch's name for it) whose public functions a trace records."""
    out = []
    # (torch first: a function tracec exposes under both names, flatten or
    # conv2d, is torch.X in PyTorch, where F.conv2d is torch.conv2d)
    for modname, public in (("tracec", "torch"), ("tracec.nn.functional", "torch.nn.functional")):
        mod = sys.modules.get(modname)
        if mod is not None:
            out.append((mod, public))
    out.append((math, "math"))
    return out


#: private functions of ``torch`` that traced code calls on Proxies, recorded
#: under their public name (``torch._assert``: timm's layers check shapes with
#: it precisely so that they stay symbolically traceable)
_RECORDED_PRIVATE = {"_assert"}


#: (torch.nn.functional's names for ATen functions, printed torch._C._nn.X:
#: tracec.nn._aten_nn.FUNCTIONAL_NAMES)
#: torch.nn.functional names PyTorch implements as ``input.X()`` (recorded
#: as a ``call_method``)
_METHOD_FUNCTIONALS = {"sigmoid", "tanh"}


def _functional_call_args(fn, args, kwargs):
    """The (args, kwargs) PyTorch records for a ``torch.nn.functional``
    call: its Python functionals pass themselves to ``__torch_function__``
    with the required parameters positional and every parameter that has a
    default by keyword, defaults included (``F.relu(x)`` is recorded as
    ``relu(x, inplace=False)``, ``F.max_pool2d(x, 2)`` as ``max_pool2d(x,
    2, stride=None, ...)``)."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs
    bound.apply_defaults()
    params = list(bound.signature.parameters.values())
    if not params or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return args, kwargs
    required = [p.name for p in params if p.default is p.empty]
    if any(p.kind is p.KEYWORD_ONLY for p in params if p.name in required):
        return args, kwargs
    return (tuple(bound.arguments[k] for k in required),
            {k: v for k, v in bound.arguments.items() if k not in required})


class _Recorder:
    """What a public function is while a trace runs: called with a ``Proxy``
    among its arguments it records the call (``kind``: "" as called,
    "normalize" with PyTorch's functional arguments, "method" as a
    ``call_method``), otherwise it calls the function.  It equals (and
    hashes as) the function, so passes comparing ``node.target ==
    torch.sigmoid`` while the patches are on still match."""

    __slots__ = ("fn", "tracer", "kind", "name")

    def __init__(self, fn, tracer, kind: str, name: str):
        self.fn, self.tracer, self.kind, self.name = fn, tracer, kind, name

    def __call__(self, *args, **kwargs):
        if _has_proxy(args) or _has_proxy(kwargs):
            if self.kind == "method":
                return self.tracer.create_proxy("call_method", self.name, args, kwargs)
            if self.kind == "normalize":
                args, kwargs = _functional_call_args(self.fn, args, kwargs)
            return self.tracer.create_proxy("call_function", self.fn, args, kwargs)
        return self.fn(*args, **kwargs)

    def __eq__(self, other):
        return other is self.fn or (isinstance(other, _Recorder) and other.fn is self.fn)

    def __hash__(self):
        return hash(self.fn)

    def __getattr__(self, k):
        return getattr(self.fn, k)


class Tracer:
    """Records a module's ``forward`` (or a function) into a ``Graph``."""

    def __init__(self, autowrap_modules=(math,), autowrap_functions=()):
        # leaf functions: where a traced forward's module holds one of these
        # under a global name, calls through that name are recorded
        self._autowrap_function_ids = {id(f) for f in autowrap_functions}
        self.graph: Optional[Graph] = None
        self.root: Optional[Module] = None
        self._tensor_attrs: Dict[int, tuple] = {}

    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        """PyTorch's rule: the modules of ``torch.nn`` are leaves, except
        ``Sequential``, which is traced through."""
        mod = type(m).__module__
        return (mod.startswith("tracec.nn") or mod.startswith("torch.nn")
                or mod.startswith("torch.ao.nn")) and not isinstance(m, Sequential)

    def path_of_module(self, mod: Module) -> str:
        for name, m in self.root.named_modules():
            if m is mod:
                return name
        raise NameError("module is not installed as a submodule")

    def create_arg(self, a):
        if isinstance(a, Proxy):
            return a.node
        if isinstance(a, Tensor):
            for name, p in self.root.named_parameters():
                if a is p:
                    return self.create_node("get_attr", name, (), {})
            for name, b in self.root.named_buffers():
                if a is b:
                    return self.create_node("get_attr", name, (), {})
            # a plain tensor attribute of a module (self.const = ...), else a
            # new constant on the root, reused if read again
            qual = self._tensor_attrs.get(id(a), (None, None))[1]
            if qual is None:
                i = 0
                while hasattr(self.root, f"_tensor_constant{i}"):
                    i += 1
                qual = f"_tensor_constant{i}"
                self._tensor_attrs[id(a)] = (a, qual)
                setattr(self.root, qual, a)
            return self.create_node("get_attr", qual, (), {})
        if isinstance(a, tuple):
            items = [self.create_arg(x) for x in a]
            return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
        if isinstance(a, list):
            return [self.create_arg(x) for x in a]
        if isinstance(a, dict):
            return {k: self.create_arg(v) for k, v in a.items()}
        if isinstance(a, slice):
            return slice(self.create_arg(a.start), self.create_arg(a.stop),
                         self.create_arg(a.step))
        if a is None or a is ... or isinstance(a, (str, int, float, bool, complex, range)) or \
                type(a).__module__.startswith(("tracec", "torch")):
            return a          # (dtypes, devices, memory formats...)
        raise NotImplementedError(f"argument of type: {type(a)}")

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None) -> Node:
        return self.graph.create_node(kind, target, args, kwargs, name, type_expr)

    def proxy(self, node: Node) -> Proxy:
        return Proxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None) -> Proxy:
        node = self.create_node(kind, target, self.create_arg(args), self.create_arg(kwargs),
                                name, type_expr)
        return self.proxy(node)

    def call_module(self, m: Module, forward: Callable, args, kwargs):
        qual = self.path_of_module(m)
        if not self.is_leaf_module(m, qual):
            return forward(*args, **kwargs)
        return self.create_proxy("call_module", qual, args, kwargs)

    def getattr(self, attr: str, attr_val, parameter_proxy_cache: dict):
        if isinstance(attr_val, Parameter):
            for name, p in self.root.named_parameters():
                if attr_val is p:
                    if name not in parameter_proxy_cache:
                        parameter_proxy_cache[name] = self.create_proxy("get_attr", name, (), {})
                    return parameter_proxy_cache[name]
        return attr_val

    @contextlib.contextmanager
    def _patched(self, modules: bool = True):
        """The public functions recorded while tracing (and, with
        ``modules``, module calls and parameter reads); all restored on exit."""
        tracer = self
        orig_call, orig_getattr = Module.__call__, Module.__getattr__
        cache: dict = {}

        undo = []

        def leaf(globals_, name, fn):
            undo.append((globals_, name, fn))
            globals_[name] = _Recorder(fn, tracer, "", name)

        # id(a patched public function, and its implementation) -> its recorder
        recorders: dict = {}
        seen: set = set()

        def autowrap(globals_):
            """In a traced forward's module: the leaf functions of
            ``autowrap_functions``, and the public functions bound there
            under their own names (``from tracec.shape_ops import flatten``:
            PyTorch's functions dispatch to a Proxy wherever they are bound)."""
            if id(globals_) in seen:
                return
            seen.add(id(globals_))
            for name, value in list(globals_.items()):
                # (as PyTorch's _autowrap_check: public names only)
                if name.startswith("_") or isinstance(value, _Recorder):
                    continue
                if id(value) in tracer._autowrap_function_ids:
                    leaf(globals_, name, value)
                elif id(value) in recorders and callable(value):
                    undo.append((globals_, name, value))
                    globals_[name] = recorders[id(value)]

        def module_call(mod, *args, **kwargs):
            autowrap(getattr(type(mod).forward, "__globals__", {}))

            def forward(*a, **k):
                return orig_call(mod, *a, **k)
            return tracer.call_module(mod, forward, args, kwargs)

        def module_getattr(mod, attr):
            return tracer.getattr(attr, orig_getattr(mod, attr), cache)

        for globals_, name in _WRAPPED:
            if name in globals_ and not isinstance(globals_[name], _Recorder):
                leaf(globals_, name, globals_[name])
            elif name not in globals_ and hasattr(builtins, name):
                # a builtin (fx.wrap("len")): shadowed in that module while tracing
                leaf(globals_, name, getattr(builtins, name))
                undo[-1] = (globals_, name, _UNSET)
        # (a copy: the loop below replaces tracec's functions by wrappers)
        top = dict(vars(sys.modules["tracec"])) if "tracec" in sys.modules else {}
        for ns, public in _function_namespaces():
            for name, fn in list(vars(ns).items()):
                if (name.startswith("_") and name not in _RECORDED_PRIVATE) or not isinstance(
                        fn, (types.FunctionType, types.BuiltinFunctionType)):
                    continue
                undo.append((ns, name, fn))
                # (the trace records the implementation behind a
                # __torch_function__ wrapper: the graph is the same either way)
                fn = unwrapped(fn)
                functional = public == "torch.nn.functional" and unwrapped(top.get(name)) is not fn
                if functional and name in FUNCTIONAL_NAMES:
                    _PUBLIC_NAMES.setdefault(id(fn), (fn, f"torch._C._nn.{FUNCTIONAL_NAMES[name]}"))
                _PUBLIC_NAMES.setdefault(id(fn), (fn, f"{public}.{name}"))
                kind = ("method" if name in _METHOD_FUNCTIONALS else "normalize"
                        if name not in FUNCTIONAL_NAMES else "") if functional else ""
                rec = _Recorder(fn, tracer, kind, name)
                setattr(ns, name, rec)
                for f in (undo[-1][2], fn):
                    # (and what it wraps: out= / axis= wrappers over shape_ops.cat)
                    while f is not None and id(f) not in recorders:
                        recorders[id(f)] = rec
                        f = getattr(f, "__wrapped__", None)
        autowrap(getattr(self, "_root_globals", {}))
        if modules:
            Module.__call__, Module.__getattr__ = module_call, module_getattr
        try:
            yield
        finally:
            Module.__call__, Module.__getattr__ = orig_call, orig_getattr
            for ns, name, fn in reversed(undo):
                if isinstance(ns, dict) and fn is _UNSET:
                    del ns[name]
                elif isinstance(ns, dict):
                    ns[name] = fn
                else:
                    setattr(ns, name, fn)

    def trace(self, root, concrete_args: Optional[Dict[str, Any]] = None) -> Graph:
        """The graph of ``root.forward`` (``root`` a Module) or of the function ``root``."""
        if isinstance(root, Module):
            self.root = root
            fn = type(root).forward
            skip = 1
        else:
            self.root = Module()
            fn = root
            skip = 0
        self.graph = Graph()
        # id -> (tensor, qualified name) of the tensors held as plain module
        # attributes (the tensor kept too, so its id stays its own)
        self._tensor_attrs: Dict[int, tuple] = {}

        def collect(m, prefix):
            for k, v in vars(m).items():
                if isinstance(v, Tensor):
                    self._tensor_attrs[id(v)] = (v, ".".join(prefix + [k]))
            for k, child in m.named_children():
                collect(child, prefix + [k])
        collect(self.root, [])
        concrete_args = concrete_args or {}
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())[skip:]
        args = [root] if skip else []
        for p in params:
            if p.name in concrete_args:
                args.append(concrete_args[p.name])
                continue
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TraceError("tracec.fx: *args / **kwargs in a traced signature are not "
                                 "supported")
            ann = None if p.annotation is inspect.Parameter.empty else p.annotation
            args.append(self.create_proxy("placeholder", p.name,
                                          () if p.default is p.empty else (p.default,), {},
                                          type_expr=ann))
        self._root_globals = getattr(fn, "__globals__", {})
        with self._patched():
            result = fn(*args)
        ret = sig.return_annotation
        self.create_node("output", "output", (self.create_arg(result),), {},
                         type_expr=None if ret is inspect.Signature.empty else ret)
        return self.graph


def symbolic_trace(root, concrete_args: Optional[Dict[str, Any]] = None) -> GraphModule:
    """Trace ``root`` (a Module or a function) into a ``GraphModule``."""
    tracer = Tracer()
    graph = tracer.trace(root, concrete_args)
    name = type(root).__name__ if isinstance(root, Module) else root.__name__
    return GraphModule(tracer.root, graph, name)


# --- Interpreter -----------------------------------------------------------------------

class Interpreter:
    """Runs a ``GraphModule``'s graph node by node: ``run`` calls ``run_node``
    for each node, which dispatches to the method named by the node's op
    (``placeholder``, ``get_attr``, ``call_function``, ``call_method``,
    ``call_module``, ``output``); subclasses override any of them.  Values
    are dropped from the environment after their last use."""

    def __init__(self, module: Module, garbage_collect_values: bool = True, graph=None):
        self.module = module
        self.submodules = dict(module.named_modules())
        self.graph = graph if graph is not None else module.graph
        self.env: Dict[Node, Any] = {}
        self.garbage_collect_values = garbage_collect_values
        self.user_to_last_uses: Dict[Node, list] = {}
        seen = set()
        for node in reversed(self.graph.nodes):
            def register(n, user=node):
                if n not in seen:
                    seen.add(n)
                    self.user_to_last_uses.setdefault(user, []).append(n)
            map_arg(node.args, register)
            map_arg(node.kwargs, register)

    def run(self, *args, initial_env: Optional[Dict[Node, Any]] = None, enable_io_processing=True):
        self.env = dict(initial_env) if initial_env is not None else {}
        self.args_iter = iter(args)
        for node in self.graph.nodes:
            if node in self.env:
                continue
            self.env[node] = self.run_node(node)
            if self.garbage_collect_values:
                for to_delete in self.user_to_last_uses.get(node, []):
                    del self.env[to_delete]
            if node.op == "output":
                return self.env[node]

    def run_node(self, n: Node) -> Any:
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        return getattr(self, n.op)(n.target, args, kwargs)

    def placeholder(self, target, args, kwargs):
        try:
            return next(self.args_iter)
        except StopIteration as e:
            if args:
                return args[0]
            raise RuntimeError(f"Expected positional argument for parameter {target}, but one "
                               "was not passed in!") from e

    def get_attr(self, target, args, kwargs):
        return self.fetch_attr(target)

    def call_function(self, target, args, kwargs):
        return target(*args, **kwargs)

    def call_method(self, target, args, kwargs):
        self_obj, *args_tail = args
        return getattr(self_obj, target)(*args_tail, **kwargs)

    def call_module(self, target, args, kwargs):
        return self.fetch_attr(target)(*args, **kwargs)

    def output(self, target, args, kwargs):
        return args[0]

    def fetch_attr(self, target: str):
        attr_itr = self.module
        for i, atom in enumerate(target.split(".")):
            if not hasattr(attr_itr, atom):
                raise RuntimeError(f"Node referenced nonexistent target "
                                   f"{'.'.join(target.split('.')[:i + 1])}")
            attr_itr = getattr(attr_itr, atom)
        return attr_itr

    def fetch_args_kwargs_from_env(self, n: Node):
        args = self.map_nodes_to_values(n.args, n)
        kwargs = self.map_nodes_to_values(n.kwargs, n)
        return args, kwargs

    def map_nodes_to_values(self, args, n: Node):
        def load_arg(n_arg: Node):
            if n_arg not in self.env:
                raise RuntimeError(f"Node {n} referenced nonexistent value {n_arg}! Run "
                                   "Graph.lint() to diagnose such issues")
            return self.env[n_arg]
        return map_arg(args, load_arg)


class Transformer(Interpreter):
    """Runs a graph on ``Proxy`` s to build a new one: ``transform()``
    returns a ``GraphModule`` of the new graph; overriding ``call_function``
    etc. rewrites nodes (PyTorch's ``torch.fx.Transformer``).  Every
    submodule call stays a ``call_module``."""

    def __init__(self, module: GraphModule):
        super().__init__(module)
        self.new_graph = Graph()

        class TransformerTracer(Tracer):
            def __init__(self, graph: Graph):
                super().__init__()
                self.graph = graph

            def is_leaf_module(self, _, __) -> bool:
                return True
        self.tracer = TransformerTracer(self.new_graph)
        self.tracer.root = module

    def placeholder(self, target, args, kwargs) -> Proxy:
        default = next(iter(args)) if args else inspect.Signature.empty
        return Proxy(self.new_graph.placeholder(target, default_value=default), self.tracer)

    def get_attr(self, target, args, kwargs) -> Proxy:
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_module(self, target, args, kwargs):
        submod = self.fetch_attr(target)
        return self.tracer.call_module(submod, submod.forward, args, kwargs)

    def call_function(self, target, args, kwargs):
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def transform(self) -> GraphModule:
        # (the overrides call torch functions on proxies: recorded, as
        # PyTorch's __torch_function__ records them)
        with self.tracer._patched(modules=False):
            result = super().run()
        if result is not None:
            self.new_graph.output(map_aggregate_proxies(result))
        return GraphModule(self.module, self.new_graph)


def map_aggregate_proxies(a):
    """``a`` with each ``Proxy`` in it (nested in tuples, lists, dicts)
    replaced by its node."""
    if isinstance(a, Proxy):
        return a.node
    if isinstance(a, tuple):
        items = [map_aggregate_proxies(x) for x in a]
        return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
    if isinstance(a, list):
        return [map_aggregate_proxies(x) for x in a]
    if isinstance(a, dict):
        return {k: map_aggregate_proxies(v) for k, v in a.items()}
    return a


# PyTorch's submodules (``from torch.fx.node import Node``; generated code
# calls ``torch.fx._symbolic_trace.wrap``), each naming what it holds here
from tracec.fx import (_symbolic_trace, graph, graph_module, interpreter, node,  # noqa: E402,F401
                       proxy)
from tracec.fx import passes  # noqa: E402,F401
