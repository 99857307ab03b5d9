"""Gaps the models28 programs (tests/programs/models28) found in tracec,
each checked against torch 2.13."""
import pytest

import tracec

pt = pytest.importorskip("torch")


def _graph_names(lib):
    x = lib.ones(2, 3, requires_grad=True)
    w = lib.ones(3, 4, requires_grad=True)
    y = (x.view(3, 2).t() @ w.exp()).relu()
    z = (y * 2).sum()
    names = [type(y.grad_fn).__name__, type(z.grad_fn).__name__]
    # torchviz's walk: every node's class name through next_functions
    seen, todo = [], [z.grad_fn]
    while todo:
        fn = todo.pop()
        seen.append(type(fn).__name__)
        todo.extend(f for f, _ in reversed(fn.next_functions) if f is not None)
    return names, seen, type(z.grad_fn).__module__


def test_grad_fn_class_is_named_as_torchs_node():
    # type(logits.grad_fn).__name__ was "Node" for every built-in backward
    # (its repr and name() were right); torchviz names graph nodes by it
    assert _graph_names(tracec) == _graph_names(pt)
    x = tracec.ones(2, requires_grad=True)
    y = x * 3
    assert isinstance(y.grad_fn, tracec.autograd.graph.Node)
    y.sum().backward()          # a retyped node still runs its backward
    assert x.grad.tolist() == [3.0, 3.0]
