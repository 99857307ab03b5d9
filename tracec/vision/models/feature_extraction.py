"""``torchvision.models.feature_extraction``: a model's intermediate outputs
by node name, through ``tracec.fx`` (timm's ``features_only=True,
feature_cls='fx'`` builds on it).

- ``get_graph_node_names(model)``: the qualified names of the nodes of the
  model's traced graph, in train and in eval mode.  A node's name is its
  module's qualified name (``layer1.0.conv1``) for a leaf module's call,
  else that name, a dot and the node's own name (``layer1.0.add``), with
  ``_<n>`` counting repeats within the module, as torchvision names them.
- ``create_feature_extractor(model, return_nodes)``: a ``GraphModule``
  returning ``{output name: value}`` for the requested nodes, traced in
  both modes (it runs the train-mode graph while training, the eval-mode
  one otherwise).  A requested name that is a module's prefix selects the
  last node inside it (``"layer2"`` is layer2's output).

``tracer_kwargs``' ``leaf_modules`` are kept whole and its
``autowrap_functions`` recorded as calls (``tracec.fx.Tracer``).

Invariant: the extractor computes the same values the model computes for
those nodes: it is the model's own graph, cut after the last requested node
(dead code eliminated).
"""
from __future__ import annotations

import inspect
import math
import re
import warnings
from collections import OrderedDict

from tracec import fx
from tracec.fx import _copy_attr

__all__ = ["create_feature_extractor", "get_graph_node_names"]


class LeafModuleAwareTracer(fx.Tracer):
    """An ``fx.Tracer`` that also keeps ``leaf_modules`` (module types)
    as single ``call_module`` nodes."""

    def __init__(self, *args, **kwargs):
        self.leaf_modules = {}
        if "leaf_modules" in kwargs:
            self.leaf_modules = set(kwargs.pop("leaf_modules"))
        super().__init__(*args, **kwargs)

    def is_leaf_module(self, m, module_qualname: str) -> bool:
        if isinstance(m, tuple(self.leaf_modules)):
            return True
        return super().is_leaf_module(m, module_qualname)


class NodePathTracer(LeafModuleAwareTracer):
    """Records, for each node it creates, its qualified name
    (``node_to_qualname``, in creation order)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.current_module_qualname = ""
        self.node_to_qualname = OrderedDict()

    def call_module(self, m, forward, args, kwargs):
        old_qualname = self.current_module_qualname
        try:
            module_qualname = self.path_of_module(m)
            self.current_module_qualname = module_qualname
            if not self.is_leaf_module(m, module_qualname):
                return forward(*args, **kwargs)
            return self.create_proxy("call_module", module_qualname, args, kwargs)
        finally:
            self.current_module_qualname = old_qualname

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, *_):
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr)
        self.node_to_qualname[proxy.node] = self._get_node_qualname(
            self.current_module_qualname, proxy.node)
        return proxy

    def _get_node_qualname(self, module_qualname: str, node) -> str:
        node_qualname = module_qualname
        if node.op != "call_module":
            # a function or method called inside the module: its node name
            # under the module's, without FX's global repeat counter
            if node_qualname:
                node_qualname += "."
            node_qualname += str(node)
        if re.match(r".+_[0-9]+$", node_qualname) is not None:
            node_qualname = node_qualname.rsplit("_", 1)[0]
        # count repeats within the module: the n-th gets _n
        for existing in reversed(self.node_to_qualname.values()):
            if re.match(rf"{re.escape(node_qualname)}(_[0-9]+)?$", existing) is not None:
                postfix = existing.replace(node_qualname, "")
                node_qualname += f"_{int(postfix[1:]) + 1 if postfix else 1}"
                break
        return node_qualname


def _is_subseq(x, y) -> bool:
    """Whether ``y`` contains ``x``'s items in order."""
    it = iter(y)
    return all(any(a == b for b in it) for a in x)


def _warn_if_nodes_differ(train_nodes, eval_nodes) -> None:
    if _is_subseq(train_nodes, eval_nodes):
        msg = ("NOTE: The nodes obtained by tracing the model in eval mode are a superset of "
               "those obtained in train mode. When choosing nodes for feature extraction, you "
               "may need to specify output nodes for train and eval mode separately.")
    elif _is_subseq(eval_nodes, train_nodes):
        msg = ("NOTE: The nodes obtained by tracing the model in train mode are a superset of "
               "those obtained in eval mode. When choosing nodes for feature extraction, you "
               "may need to specify output nodes for train and eval mode separately.")
    else:
        msg = ("The nodes obtained by tracing the model in train mode are different to those "
               "obtained in eval mode. When choosing nodes for feature extraction, you may need "
               "to specify output nodes for train and eval mode separately.")
    warnings.warn(msg)


def _leaf_modules_for_ops() -> list:
    """The module classes of ``torchvision.ops`` (Conv2dNormActivation,
    SqueezeExcitation, ...): leaves by default, as in torchvision."""
    from tracec.nn import Module
    from tracec.vision import ops
    return [m for _, m in inspect.getmembers(ops) if inspect.isclass(m) and issubclass(m, Module)]


def _tracer_kwargs(tracer_kwargs):
    """``tracer_kwargs`` with torchvision's defaults merged in."""
    kwargs = dict(tracer_kwargs or {})
    kwargs["autowrap_modules"] = tuple(set(kwargs.get("autowrap_modules", ())) | {math})
    kwargs["leaf_modules"] = list(set(kwargs.get("leaf_modules", [])) |
                                  set(_leaf_modules_for_ops()))
    return kwargs


def get_graph_node_names(model, tracer_kwargs=None, suppress_diff_warning: bool = False,
                         concrete_args=None):
    """(train-mode node names, eval-mode node names) of ``model``'s graph."""
    kwargs = _tracer_kwargs(tracer_kwargs)
    is_training = model.training
    try:
        names = []
        for mode in (True, False):
            model.train(mode)
            tracer = NodePathTracer(**kwargs)
            tracer.trace(model, concrete_args=concrete_args)
            names.append(list(tracer.node_to_qualname.values()))
    finally:
        model.train(is_training)
    train_nodes, eval_nodes = names
    if train_nodes != eval_nodes and not suppress_diff_warning:
        _warn_if_nodes_differ(train_nodes, eval_nodes)
    return train_nodes, eval_nodes


class DualGraphModule(fx.GraphModule):
    """A ``GraphModule`` holding a train-mode and an eval-mode graph, and
    running the one of its current mode (``train()`` / ``eval()`` switch)."""

    def __init__(self, root, train_graph, eval_graph, class_name: str = "GraphModule"):
        super().__init__(root, train_graph, class_name)
        for node in eval_graph.nodes:
            if node.op in ("get_attr", "call_module"):
                _copy_attr(root, self, node.target)
        self.train_graph = train_graph
        self.eval_graph = eval_graph
        self.graph = train_graph if root.training else eval_graph
        self.training = root.training

    def train(self, mode: bool = True):
        if mode != self.training:
            self.graph = self.train_graph if mode else self.eval_graph
        return super().train(mode)


def _as_dict(nodes):
    if nodes is None:
        return None
    if isinstance(nodes, (list, tuple)):
        return OrderedDict((str(n), str(n)) for n in nodes)
    return OrderedDict((str(k), str(v)) for k, v in nodes.items())


def create_feature_extractor(model, return_nodes=None, train_return_nodes=None,
                             eval_return_nodes=None, tracer_kwargs=None,
                             suppress_diff_warning: bool = False, concrete_args=None):
    """A ``GraphModule`` returning the requested nodes' values by name."""
    kwargs = _tracer_kwargs(tracer_kwargs)
    if return_nodes is None and train_return_nodes is None and eval_return_nodes is None:
        raise ValueError("Either `return_nodes` or `train_return_nodes` and `eval_return_nodes` "
                         "together, should be specified")
    if (train_return_nodes is None) != (eval_return_nodes is None):
        raise ValueError("If any of `train_return_nodes` and `eval_return_nodes` are specified, "
                         "then both should be specified")
    if return_nodes is not None and train_return_nodes is not None:
        raise ValueError("If `train_return_nodes` and `eval_return_nodes` are specified, then "
                         "both should be specified")   # (torchvision's words for this case)
    if return_nodes is not None:
        train_return_nodes = eval_return_nodes = return_nodes
    wanted = {"train": _as_dict(train_return_nodes), "eval": _as_dict(eval_return_nodes)}
    is_training = model.training

    graphs = {}
    name = type(model).__name__
    try:
        for mode in ("train", "eval"):
            model.train(mode == "train")
            tracer = NodePathTracer(**kwargs)
            graph = tracer.trace(model, concrete_args=concrete_args)
            graph_module = fx.GraphModule(tracer.root, graph, name)
            available = list(tracer.node_to_qualname.values())
            for query in wanted[mode]:
                if not any(n == query or n.startswith(query + ".") for n in available):
                    raise ValueError(
                        f"node: '{query}' is not present in model. Hint: use "
                        "`get_graph_node_names` to make sure the `return_nodes` you specified "
                        "are present. It may even be that you need to specify "
                        "`train_return_nodes` and `eval_return_nodes` separately.")
            g = graph_module.graph
            for n in [n for n in reversed(list(g.nodes)) if n.op == "output"]:
                g.erase_node(n)
            nodes = list(g.nodes)
            pending = OrderedDict(wanted[mode])
            outputs = OrderedDict()
            # the last node under each requested name (its module's output)
            for n in reversed(nodes):
                qualname = tracer.node_to_qualname.get(n)
                if qualname is None:
                    continue
                for query in pending:
                    depth = query.count(".")
                    if ".".join(qualname.split(".")[:depth + 1]) == query:
                        outputs[pending.pop(query)] = n
                        break
            outputs = OrderedDict(reversed(list(outputs.items())))
            with g.inserting_after(nodes[-1]):
                g.output(outputs)
            g.eliminate_dead_code()
            graph_module.recompile()
            graphs[mode] = graph_module.graph
    finally:
        model.train(is_training)
    extractor = DualGraphModule(model, graphs["train"], graphs["eval"], class_name=name)
    extractor.train(is_training)
    return extractor
