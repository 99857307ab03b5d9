"""Gaps the models34 programs (tests/programs/models34) and the corners of
the APIs they use found in tracec, each checked against torch 2.13."""
import pytest

import tracec

pt = pytest.importorskip("torch")


def _grad_layouts(L, case):
    """The strides of ``autograd.grad``'s results for ``case``."""
    w = L.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)      # [2, 3]
    a = L.tensor([[1.0, -1.0, 2.0, 0.5]] * 3, requires_grad=True)          # [3, 4]
    x = L.tensor([[0.5, -1.0, 2.0]] * 4)                                   # [4, 3]
    x3 = L.tensor([[[0.5, -1.0, 2.0]] * 4] * 2)                            # [2, 4, 3]
    xr = x.clone().requires_grad_()
    if case == "linear":
        outs, wrt = L.nn.functional.linear(x, w), [w]
    elif case == "linear-3d":
        outs, wrt = L.nn.functional.linear(x3, w), [w]
    elif case == "matmul-t-both":
        outs, wrt = xr @ w.t(), [w, xr]
    elif case == "mat1-t":
        outs, wrt = a.t() @ L.ones(3, 2), [a]
    elif case == "mat2-t":
        outs, wrt = L.ones(2, 4) @ a.t(), [a]
    elif case == "vec-mat-t":
        outs, wrt = L.ones(3) @ w.t(), [w]
    elif case == "addmm":
        outs, wrt = L.addmm(L.zeros(4, 2), xr, w.t()), [w, xr]
    elif case == "linear-bf16":
        wh = w.detach().to(L.bfloat16).requires_grad_()
        outs, wrt = L.nn.functional.linear(x.to(L.bfloat16), wh, L.ones(2, dtype=L.bfloat16)).float(), [wh]
    elif case == "create-graph":
        inner = L.autograd.grad(L.nn.functional.linear(xr, w).pow(2).sum(), [w], create_graph=True)[0]
        outs, wrt = inner, [w, xr]
    elif case == "batched":
        a3 = L.ones(2, 3, 4, requires_grad=True)
        outs, wrt = a3.transpose(1, 2) @ L.ones(3, 2), [a3]
    grads = L.autograd.grad((outs * outs).sum(), wrt)
    return [(tuple(g.stride()), g.is_contiguous(), [round(v, 3) for v in g.float().flatten().tolist()])
            for g in grads]


@pytest.mark.parametrize("case", ["linear", "linear-3d", "matmul-t-both", "mat1-t", "mat2-t",
                                  "vec-mat-t", "addmm", "linear-bf16", "create-graph", "batched"])
def test_mm_gradient_of_a_transposed_operand_keeps_its_layout(case):
    # DARTS's Architect flattens autograd.grad(loss, model.parameters()) by
    # torch.cat([g.view(-1) ...]): PyTorch's mm backward makes a column-
    # major operand's gradient column-major, so a Linear weight's gradient
    # (through weight.t()) comes back contiguous and .view(-1) works
    assert _grad_layouts(tracec, case) == _grad_layouts(pt, case)


def test_darts_concat_of_linear_weight_grads_views():
    def run(L):
        lin = L.nn.Linear(3, 2)
        with L.no_grad():
            lin.weight.copy_(L.tensor([[0.1, 0.2, 0.3], [-0.4, 0.5, -0.6]]))
            lin.bias.zero_()
        loss = lin(L.tensor([[1.0, 2.0, 3.0]])).pow(2).sum()
        return L.cat([g.view(-1) for g in L.autograd.grad(loss, lin.parameters())]).tolist()
    assert run(tracec) == pytest.approx(run(pt))


@pytest.mark.parametrize("case", [
    # a slice of SSD's vgg ModuleList called as a layer: PyTorch's containers
    # have no forward of their own, so Module's refusal names them
    lambda L: L.nn.ModuleList([L.nn.ReLU()])(L.ones(2)),
    lambda L: L.nn.ModuleList([L.nn.ReLU(), L.nn.ReLU()])[:1](L.ones(2)),
    lambda L: L.nn.ModuleDict({"a": L.nn.ReLU()})(L.ones(2)),
    lambda L: L.nn.ParameterList([L.nn.Parameter(L.ones(1))])(L.ones(2)),
    lambda L: L.nn.ParameterDict({"a": L.nn.Parameter(L.ones(1))})(),
    lambda L: L.nn.ParameterDict()(1),
    lambda L: L.nn.ParameterList()(),
], ids=["module-list", "module-list-slice", "module-dict", "parameter-list", "parameter-dict",
        "parameter-dict-input", "parameter-list-empty"])
def test_containers_refuse_a_call_like_torch(case):
    def outcome(L):
        try:
            case(L)
        except Exception as e:      # noqa: BLE001 - the type is what is compared
            return type(e).__name__, str(e)
        return "ok", None
    assert outcome(tracec) == outcome(pt)


@pytest.mark.parametrize("name", ["cat", "concat", "concatenate", "stack", "hstack", "vstack",
                                  "dstack", "column_stack", "row_stack"])
def test_joining_refuses_a_single_tensor_like_torch(name):
    # ssd.pytorch's center_size calls torch.cat(t1, t2, 1); a single
    # tensor where a sequence is asked is refused by PyTorch's argument
    # parser (tracec iterated its rows and joined them)
    def outcome(L):
        try:
            r = getattr(L, name)(L.ones(2, 3))
        except Exception as e:      # noqa: BLE001 - the type is what is compared
            return type(e).__name__, str(e)
        return "ok", tuple(r.shape)
    assert outcome(tracec) == outcome(pt)


@pytest.mark.parametrize("name", ["cat", "concat", "concatenate", "stack", "hstack", "vstack",
                                  "dstack", "column_stack", "row_stack"])
def test_joining_still_takes_lists_and_tuples(name):
    def run(L):
        a, b = L.ones(2, 3), L.zeros(2, 3)
        return [tuple(getattr(L, name)(seq).shape) for seq in ([a, b], (a, b), [a])]
    assert run(tracec) == run(pt)


def _sparse_adagrad(L, **kw):
    emb = L.nn.Embedding(6, 3, padding_idx=0, sparse=True)
    with L.no_grad():
        emb.weight.copy_(L.arange(18.).view(6, 3) / 10)
    opt = L.optim.Adagrad(emb.parameters(), lr=0.1, **kw)
    try:
        for ids in ([0, 2, 2, 5], [1, 2]):
            opt.zero_grad()
            emb(L.tensor(ids)).pow(2).sum().backward()
            opt.step()
    except RuntimeError as e:
        return "RuntimeError", str(e), opt.state[emb.weight]["step"].item()
    return ([round(v, 5) for v in emb.weight.flatten().tolist()],
            [round(v, 4) for v in opt.state[emb.weight]["sum"].flatten().tolist()],
            opt.state[emb.weight]["step"].item(), emb.weight.grad.is_sparse)


@pytest.mark.parametrize("kw", [{}, {"lr_decay": 0.5}, {"initial_accumulator_value": 0.3},
                                {"maximize": True}, {"weight_decay": 1e-4}],
                         ids=["plain", "lr-decay", "initial", "maximize", "weight-decay"])
def test_adagrad_sparse_gradients_like_torch(kw):
    # treelstm.pytorch's --sparse Embedding stepped by Adagrad: PyTorch's
    # sparse branch updates the looked-up rows only (tracec divided a
    # sparse gradient by a dense tensor and failed) and refuses weight
    # decay (tracec made the gradient dense)
    assert _sparse_adagrad(tracec, **kw) == _sparse_adagrad(pt, **kw)


@pytest.mark.parametrize("case", [
    # DARTS writes Variable(1e-3 * torch.randn(k, n), requires_grad=True);
    # PyTorch's Variable is a C constructor with five parameters (the last,
    # name, set on the tensor) parsed by its argument parser
    lambda L, V: V(L.ones(2), True, False, None, "x").name,
    lambda L, V: V(L.ones(2), name="alphas").name,
    lambda L, V: V(L.ones(2), True, False, None, "x", 1),
    lambda L, V: V(L.ones(2), foo=1),
    lambda L, V: V(L.ones(2), data=L.ones(2)),
    lambda L, V: V(L.ones(2), requires_grad="yes"),
    lambda L, V: V(L.ones(2), requires_grad=1).requires_grad,
    lambda L, V: V(L.ones(2), _grad_fn=None).is_leaf,
], ids=["name-positional", "name", "six", "unknown-keyword", "twice", "str-flag", "int-flag", "grad-fn"])
def test_variable_arguments_like_torch(case):
    def outcome(L):
        try:
            return "ok", case(L, L.autograd.Variable)
        except Exception as e:      # noqa: BLE001 - the type is what is compared
            return type(e).__name__, str(e)
    assert outcome(tracec) == outcome(pt)


@pytest.mark.parametrize("case", [
    # PyTorch has no add(sparse, dense): SGD's grad.add(param,
    # alpha=weight_decay) over an Embedding(sparse=True)'s gradient raises
    # (tracec made the sum dense); dense + sparse stays allowed
    lambda L, s, d: s.add(d),
    lambda L, s, d: s + d,
    lambda L, s, d: L.add(s, d, alpha=0.5),
    lambda L, s, d: s - d,
    lambda L, s, d: s.sub(d),
    lambda L, s, d: s + 1,
    lambda L, s, d: 1 + s,
    lambda L, s, d: (1 + d).tolist(),
    lambda L, s, d: s.clone().add_(d),
    lambda L, s, d: (d + s).tolist(),
    lambda L, s, d: (d - s).tolist(),
    lambda L, s, d: d.clone().add_(s, alpha=2).tolist(),
    lambda L, s, d: (s + s).to_dense().tolist(),
], ids=["add", "plus", "torch-add", "minus", "sub", "number", "number-first", "number-dense", "add_", "dense-first", "dense-minus",
        "dense-add_", "sparse-sparse"])
def test_sparse_plus_dense_like_torch(case):
    def outcome(L):
        s = L.sparse_coo_tensor([[0, 2]], [1.0, 2.0], (3,))
        try:
            return "ok", case(L, s, L.ones(3))
        except RuntimeError as e:
            return "RuntimeError", str(e)
    assert outcome(tracec) == outcome(pt)


@pytest.mark.parametrize("dense_term", [False, True])
def test_sgd_weight_decay_over_a_sparse_gradient_like_torch(dense_term):
    def run(L, wd):
        emb = L.nn.Embedding(6, 3, sparse=True)
        with L.no_grad():
            emb.weight.copy_(L.arange(18.).view(6, 3) / 10)
        opt = L.optim.SGD(emb.parameters(), lr=0.1, momentum=0.9, weight_decay=wd)
        try:
            for ids in ([0, 2, 2, 5], [1, 2]):
                opt.zero_grad()
                emb(L.tensor(ids)).pow(2).sum().backward()
                if dense_term:      # a dense term makes the sparse grad dense
                    (emb.weight ** 2).sum().mul(0.01).backward()
                opt.step()
        except RuntimeError as e:
            return str(e)
        return [round(v, 5) for v in emb.weight.flatten().tolist()]
    assert run(tracec, 0.1) == run(pt, 0.1)
    assert run(tracec, 0.0) == run(pt, 0.0)
