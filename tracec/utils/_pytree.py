"""``torch.utils._pytree``: nested containers as (leaves, spec), as
PyTorch's Python pytree utilities give them (programs and libraries import
``tree_map``, ``tree_flatten`` and ``tree_unflatten`` from here).

Nodes: tuple, list, dict (keys in insertion order), OrderedDict,
defaultdict, deque, namedtuples, and what ``register_pytree_node`` adds;
everything else, ``None`` included, is a leaf.  Written by hand after
PyTorch's (not a dependency of tracec); ``tracec.pytree`` is the compiler's
own argument flattening, which also keys on scalars and identities."""
from __future__ import annotations

import dataclasses
from collections import OrderedDict, defaultdict, deque, namedtuple
from typing import Any, Callable, Iterable, NamedTuple

__all__ = ["TreeSpec", "LeafSpec", "register_pytree_node", "tree_is_leaf", "tree_flatten",
           "tree_unflatten", "tree_iter", "tree_leaves", "tree_structure", "tree_map",
           "tree_map_", "tree_map_only", "tree_map_only_", "tree_all", "tree_any",
           "tree_all_only", "tree_any_only", "is_namedtuple", "is_namedtuple_class",
           "is_namedtuple_instance", "SequenceKey", "MappingKey", "GetAttrKey", "keystr",
           "key_get"]

PyTree = Any
Context = Any


class NodeDef(NamedTuple):
    """How a node type flattens: ``flatten_fn(node) -> (children, context)``,
    ``unflatten_fn(children, context) -> node`` (PyTorch's record)."""
    type: Any
    flatten_fn: Callable
    unflatten_fn: Callable
    flatten_with_keys_fn: Any = None


#: node type -> its NodeDef
SUPPORTED_NODES: dict = {}


def register_pytree_node(cls, flatten_fn: Callable, unflatten_fn: Callable, *,
                         serialized_type_name=None, to_dumpable_context=None,
                         from_dumpable_context=None, flatten_with_keys_fn=None) -> None:
    """Make ``cls`` a node: ``flatten_fn(x) -> (children, context)`` and
    ``unflatten_fn(children, context) -> x``."""
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)


def is_namedtuple_class(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and \
        isinstance(getattr(cls, "_fields", None), tuple) and \
        all(type(f) is str for f in cls._fields)


def is_namedtuple_instance(obj) -> bool:
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj) -> bool:
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def _node_type(tree):
    t = type(tree)
    return namedtuple if is_namedtuple_class(t) else t


_get_node_type = _node_type     # PyTorch's name, which libraries import


def _dict_flatten(d):
    """PyTorch's flatten function of dict nodes (libraries reuse it for their
    dict-like outputs: diffusers' and transformers' ModelOutput)."""
    return list(d.values()), list(d.keys())


def _dict_unflatten(values, context):
    return dict(zip(context, values))


def _list_flatten(d):
    return list(d), None


def _list_unflatten(values, context):
    return list(values)


def _tuple_flatten(d):
    return list(d), None


def _tuple_unflatten(values, context):
    return tuple(values)


register_pytree_node(tuple, lambda t: (list(t), None), lambda v, c: tuple(v))
register_pytree_node(list, lambda t: (list(t), None), lambda v, c: list(v))
register_pytree_node(dict, lambda d: (list(d.values()), list(d.keys())),
                     lambda v, c: dict(zip(c, v)))
register_pytree_node(OrderedDict, lambda d: (list(d.values()), list(d.keys())),
                     lambda v, c: OrderedDict(zip(c, v)))
register_pytree_node(defaultdict,
                     lambda d: (list(d.values()), [d.default_factory, list(d.keys())]),
                     lambda v, c: defaultdict(c[0], zip(c[1], v)))
register_pytree_node(deque, lambda d: (list(d), d.maxlen), lambda v, c: deque(v, maxlen=c))
register_pytree_node(namedtuple, lambda t: (list(t), type(t)), lambda v, c: c(*v))


def tree_is_leaf(tree, is_leaf: Callable | None = None) -> bool:
    if is_leaf is not None and is_leaf(tree):
        return True
    return _node_type(tree) not in SUPPORTED_NODES


class TreeSpec:
    """A node's type, its context (dict keys, a namedtuple's class) and its
    children's specs; ``num_leaves`` and ``num_nodes`` count the tree."""

    def __init__(self, type, context, children_specs):
        self.type, self.context, self._children = type, context, list(children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in self._children)
        self.num_leaves = sum(c.num_leaves for c in self._children)
        self.num_children = len(self._children)

    @property
    def children_specs(self):
        return self._children

    def children(self):
        return list(self._children)

    def child(self, index: int):
        return self._children[index]

    def is_leaf(self) -> bool:
        return False

    def __eq__(self, other):
        return isinstance(other, TreeSpec) and not other.is_leaf() and \
            (self.type, self.context, self._children) == \
            (other.type, other.context, other._children)

    def __hash__(self):
        return hash((self.type, repr(self.context), self.num_nodes))

    def __repr__(self, indent: int = 0) -> str:
        text = ""
        if self.num_children:
            indent += 2
            text = self._children[0].__repr__(indent) + ("," if self.num_children > 1 else "")
            text += ",".join("\n" + " " * indent + c.__repr__(indent)
                             for c in self._children[1:])
        name = getattr(self.type, "__name__", str(self.type))
        return f"TreeSpec({name}, {self.context}, [{text}])"

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} "
                             f"but the spec refers to a pytree that holds {self.num_leaves} "
                             f"items ({self}).")
        it = iter(leaves)
        return self._build(it)

    def _build(self, it):
        children = [c._build(it) for c in self._children]
        return SUPPORTED_NODES[self.type].unflatten_fn(children, self.context)


class LeafSpec(TreeSpec):
    def __init__(self):
        self.type, self.context, self._children = None, None, []
        self.num_nodes = self.num_leaves = 1
        self.num_children = 0

    def is_leaf(self) -> bool:
        return True

    def __eq__(self, other):
        return isinstance(other, LeafSpec)

    def __hash__(self):
        return 0

    def __repr__(self, indent: int = 0) -> str:
        return "*"

    def _build(self, it):
        return next(it)


def _flatten(tree, is_leaf, leaves) -> TreeSpec:
    if tree_is_leaf(tree, is_leaf):
        leaves.append(tree)
        return LeafSpec()
    t = _node_type(tree)
    children, context = SUPPORTED_NODES[t].flatten_fn(tree)
    return TreeSpec(t, context, [_flatten(c, is_leaf, leaves) for c in children])


def tree_flatten(tree, is_leaf: Callable | None = None) -> tuple[list, TreeSpec]:
    """The leaves, left to right, and the spec ``tree_unflatten`` rebuilds from."""
    leaves: list = []
    return leaves, _flatten(tree, is_leaf, leaves)


def tree_unflatten(leaves: Iterable[Any], treespec: TreeSpec) -> Any:
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): Expected `treespec` to be "
                        f"instance of TreeSpec but got item of type {type(treespec)}.")
    return treespec.unflatten(leaves)


def tree_iter(tree, is_leaf: Callable | None = None):
    return iter(tree_flatten(tree, is_leaf)[0])


def tree_leaves(tree, is_leaf: Callable | None = None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf: Callable | None = None) -> TreeSpec:
    return tree_flatten(tree, is_leaf)[1]


def _flatten_like(spec: TreeSpec, tree, is_leaf) -> list:
    """``tree``'s leaves at ``spec``'s leaf positions (its subtrees there)."""
    if spec.is_leaf():
        return [tree]
    if _node_type(tree) != spec.type:
        raise ValueError(f"Node type mismatch; expected {spec.type}, but got {type(tree)}.")
    children, context = SUPPORTED_NODES[spec.type].flatten_fn(tree)
    if len(children) != spec.num_children or (spec.type in (dict, OrderedDict) and
                                              set(context) != set(spec.context)):
        raise ValueError(f"Node arity or keys mismatch; expected {spec.context}, "
                         f"but got {context}.")
    if spec.type in (dict, OrderedDict) and context != spec.context:
        children = [tree[k] for k in spec.context]
    return [x for s, c in zip(spec.children_specs, children) for x in _flatten_like(s, c, is_leaf)]


def tree_map(func: Callable, tree, *rests, is_leaf: Callable | None = None):
    """``func`` applied to each leaf (with the leaves at the same places of
    ``rests``), in a tree of the same structure."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_like(spec, r, is_leaf) for r in rests]
    return spec.unflatten(func(*xs) for xs in zip(leaves, *others))


def tree_map_(func: Callable, tree, *rests, is_leaf: Callable | None = None):
    """``func`` on each leaf for its effect; returns ``tree``."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_like(spec, r, is_leaf) for r in rests]
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def _only(type_or_types, func):
    def f(x):
        return func(x) if isinstance(x, type_or_types) else x
    return f


def tree_map_only(type_or_types, func: Callable, tree, is_leaf: Callable | None = None):
    return tree_map(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types, func: Callable, tree, is_leaf: Callable | None = None):
    return tree_map_(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_all(pred: Callable, tree, is_leaf: Callable | None = None) -> bool:
    return all(map(pred, tree_iter(tree, is_leaf)))


def tree_any(pred: Callable, tree, is_leaf: Callable | None = None) -> bool:
    return any(map(pred, tree_iter(tree, is_leaf)))


def tree_all_only(type_or_types, pred: Callable, tree, is_leaf: Callable | None = None) -> bool:
    return all(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


def tree_any_only(type_or_types, pred: Callable, tree, is_leaf: Callable | None = None) -> bool:
    return any(pred(x) for x in tree_iter(tree, is_leaf) if isinstance(x, type_or_types))


# Key paths: where a leaf sits in its tree, one entry per level (what
# ``flatten_with_keys_fn`` hands back next to each child).
@dataclasses.dataclass(frozen=True, slots=True)
class SequenceKey:
    """A list's / tuple's element ``idx``; ``str`` is ``[idx]``."""
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def get(self, sequence):
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True, slots=True)
class MappingKey:
    """A mapping's value at ``key``; ``str`` is ``[key!r]``."""
    key: Any

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def get(self, mapping):
        return mapping[self.key]


@dataclasses.dataclass(frozen=True, slots=True)
class GetAttrKey:
    """An object's attribute ``name``; ``str`` is ``.name``."""
    name: str

    def __str__(self) -> str:
        return f".{self.name}"

    def get(self, obj):
        return getattr(obj, self.name)


def keystr(kp) -> str:
    """A key path printed (``[0]['a'].b``)."""
    return "".join(str(k) for k in kp)


def key_get(obj, kp):
    """The value at key path ``kp`` in ``obj``."""
    for k in kp:
        obj = k.get(obj)
    return obj


# PyTorch's flatten-with-keys functions of the built-in nodes (libraries
# pass them as ``flatten_with_keys_fn`` for their own dict-like nodes).
def _tuple_flatten_with_keys(d):
    return [(SequenceKey(i), v) for i, v in enumerate(d)], None


def _list_flatten_with_keys(d):
    return [(SequenceKey(i), v) for i, v in enumerate(d)], None


def _dict_flatten_with_keys(d):
    keys = list(d.keys())
    return [(MappingKey(k), d[k]) for k in keys], keys
