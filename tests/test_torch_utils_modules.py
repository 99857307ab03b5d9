"""``torch.utils._pytree``, ``torch.utils.hooks``, ``torch.types`` and
``torch.nn.common_types`` under tracec, against PyTorch 2.13."""
import collections
import pickle

import pytest

import tracec
from tracec.utils import _pytree as tp
from tracec.utils.hooks import RemovableHandle
from program_runner import tracec_cli

torch = pytest.importorskip("torch")
import torch.utils._pytree as P  # noqa: E402

Point = collections.namedtuple("Point", "x y")

TREES = [
    1, None, "s", (), [], {},
    [1, (2, 3), {"b": 4, "a": 5}, None],
    collections.OrderedDict(b=1, a=[2, 3]),
    collections.defaultdict(int, a=1, b=(2,)),
    collections.deque([1, [2]], maxlen=5),
    {"p": Point(1, (2, 3)), "q": [Point([4], 5)]},
]


@pytest.mark.parametrize("tree", TREES, ids=range(len(TREES)))
def test_flatten_unflatten_map_as_torch(tree):
    leaves, spec = tp.tree_flatten(tree)
    tleaves, tspec = P.tree_flatten(tree)
    assert leaves == tleaves
    assert repr(spec) == repr(tspec)
    assert (spec.num_leaves, spec.num_nodes, spec.num_children) == \
        (tspec.num_leaves, tspec.num_nodes, tspec.num_children)
    back = tp.tree_unflatten(leaves, spec)
    assert back == tree and type(back) is type(tree)
    f = (lambda x: x * 2 if isinstance(x, int) else x)
    assert tp.tree_map(f, tree) == P.tree_map(f, tree)
    assert tp.tree_structure(tree) == tp.tree_structure(back)


def test_map_over_several_trees_and_only_and_predicates():
    a, b = {"x": [1, 2], "y": 3}, {"y": 30, "x": [10, 20]}
    assert tp.tree_map(lambda u, v: u + v, a, b) == P.tree_map(lambda u, v: u + v, a, b)
    mixed = [1, "a", 2.5, (3, "b")]
    assert tp.tree_map_only(int, lambda x: x + 1, mixed) == \
        P.tree_map_only(int, lambda x: x + 1, mixed)
    assert tp.tree_all(lambda x: x > 0, [1, (2,)]) and not tp.tree_any(lambda x: x > 5, [1, (2,)])
    assert tp.tree_all_only(str, lambda s: s.isalpha(), mixed)
    assert tp.tree_leaves([1, [2, [3]]], is_leaf=lambda x: x == [3]) == \
        P.tree_leaves([1, [2, [3]]], is_leaf=lambda x: x == [3])
    seen = []
    assert tp.tree_map_(seen.append, (1, [2])) == (1, [2]) and seen == [1, 2]


def test_errors_as_torch():
    _, spec = tp.tree_flatten({"x": [1, 2]})
    _, tspec = P.tree_flatten({"x": [1, 2]})
    with pytest.raises(ValueError) as e:
        tp.tree_unflatten([1], spec)
    with pytest.raises(ValueError) as te:
        P.tree_unflatten([1], tspec)
    assert str(e.value) == str(te.value)
    with pytest.raises(ValueError):
        tp.tree_map(lambda u, v: u, [1, 2], [1])
    with pytest.raises(ValueError, match="already registered"):
        tp.register_pytree_node(list, None, None)


def test_register_pytree_node_and_tensors_as_leaves():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    tp.register_pytree_node(Pair, lambda p: ([p.a, p.b], None), lambda v, c: Pair(*v))
    t = tracec.ones(2)
    leaves, spec = tp.tree_flatten({"p": Pair(t, 3)})
    assert leaves[0] is t and leaves[1] == 3
    doubled = tp.tree_map(lambda x: x * 2, {"p": Pair(t, 3)})
    assert doubled["p"].b == 6 and doubled["p"].a.tolist() == [2.0, 2.0]
    assert tp.is_namedtuple(Point) and tp.is_namedtuple_instance(Point(1, 2))
    assert not tp.is_namedtuple_instance((1, 2))


def test_removable_handle_as_torch():
    hooks, extra = collections.OrderedDict(), {}
    h = RemovableHandle(hooks, extra_dict=extra)
    hooks[h.id], extra[h.id] = "hook", "extra"
    with h:
        pass
    assert not hooks and not extra
    h.remove()                         # a second remove is a no-op
    h2 = RemovableHandle(hooks)
    assert h2.id == h.id + 1
    hooks[h2.id] = "x"
    h3 = pickle.loads(pickle.dumps(h2))
    assert h3.id == h2.id and RemovableHandle.next_id > h2.id
    # modules and optimizers hand out the same class, and remove() unregisters
    m = tracec.nn.Linear(2, 2)
    calls = []
    handle = m.register_forward_hook(lambda mod, i, o: calls.append(1))
    assert isinstance(handle, RemovableHandle)
    m(tracec.ones(1, 2))
    handle.remove()
    m(tracec.ones(1, 2))
    assert calls == [1]
    opt = tracec.optim.SGD(m.parameters(), lr=0.1)
    oh = opt.register_step_post_hook(lambda *a: calls.append(2))
    opt.step()
    oh.remove()
    opt.step()
    assert isinstance(oh, RemovableHandle) and calls == [1, 2]


def test_type_alias_modules_import_under_tracec_run(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text(
        "from torch.types import _size, Number, Device, _dtype\n"
        "from torch.nn.common_types import _size_2_t, _ratio_2_t\n"
        "from torch.utils.hooks import RemovableHandle\n"
        "from torch.utils._pytree import tree_map, tree_flatten, tree_unflatten\n"
        "import torch\n"
        "def f(x: _size_2_t, n: Number) -> _size:\n"
        "    return (x, x) if isinstance(x, int) else x\n"
        "leaves, spec = tree_flatten({'a': torch.ones(2), 'b': [torch.zeros(1)]})\n"
        "print(f(3, 1.0), len(leaves), tree_unflatten(leaves, spec)['b'][0].shape)\n")
    r = tracec_cli(["run", str(prog)], timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(3, 3) 2 torch.Size([1])", r.stdout


def test_autograd_gradcheck_module_and_function():
    """``from torch.autograd.gradcheck import gradcheck, GradcheckError``
    works and ``torch.autograd.gradcheck`` stays the function, as in PyTorch."""
    import importlib
    mod = importlib.import_module("tracec.autograd.gradcheck")
    assert mod.GradcheckError is tracec.autograd.GradcheckError
    assert callable(tracec.autograd.gradcheck) and tracec.autograd.gradcheck is mod.gradcheck
    x = tracec.randn(3, dtype=tracec.float64, requires_grad=True)
    assert tracec.autograd.gradcheck(lambda t: (t * t).sum(), (x,))
