"""Embedding / EmbeddingBag ``scale_grad_by_freq`` and ``sparse`` against
PyTorch: the same forward, gradients equal (tracec's gradient of a
``sparse=True`` embedding is dense, API.md; its values equal PyTorch's
sparse gradient, and it reports itself as a COO tensor), eagerly and compiled."""
import numpy as np
import pytest

import tracec

torch = pytest.importorskip("torch")


def _pair(cls, *args, **kwargs):
    torch.manual_seed(0)
    ref = getattr(torch.nn, cls)(*args, **kwargs)
    ours = getattr(tracec.nn, cls)(*args, **kwargs)
    ours.weight.data = tracec.tensor(ref.weight.detach().numpy())
    return ref, ours


def _grad(t):
    g = t.weight.grad
    return (g.to_dense() if g.is_sparse else g).numpy()


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("freq", [False, True])
@pytest.mark.parametrize("padding_idx", [None, 1])
def test_embedding(sparse, freq, padding_idx):
    ref, ours = _pair("Embedding", 6, 3, padding_idx=padding_idx, scale_grad_by_freq=freq,
                      sparse=sparse)
    idx = np.array([[0, 2, 0, 1], [1, 0, 2, 5]])
    w = np.random.default_rng(0).standard_normal((2, 4, 3)).astype(np.float32)
    if sparse and freq:     # refused by PyTorch (at backward) and by tracec
        with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported") as e:
            ref(torch.tensor(idx)).sum().backward()
        with pytest.raises(RuntimeError, match=str(e.value)):
            ours(tracec.tensor(idx)).sum().backward()
        return
    (ref(torch.tensor(idx)) * torch.tensor(w)).sum().backward()
    out = ours(tracec.tensor(idx))
    (out * tracec.tensor(w)).sum().backward()
    np.testing.assert_array_equal(out.detach().numpy(), ref(torch.tensor(idx)).detach().numpy())
    np.testing.assert_allclose(_grad(ours), _grad(ref), rtol=1e-6, atol=1e-7)
    assert repr(ours) == repr(ref)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_sparse(mode):
    ref, ours = _pair("EmbeddingBag", 6, 3, mode=mode, sparse=True)
    idx, offsets = np.array([0, 2, 0, 1, 2, 2, 5]), np.array([0, 3, 5])
    w = np.random.default_rng(1).standard_normal((3, 3)).astype(np.float32)
    (ref(torch.tensor(idx), torch.tensor(offsets)) * torch.tensor(w)).sum().backward()
    (ours(tracec.tensor(idx), tracec.tensor(offsets)) * tracec.tensor(w)).sum().backward()
    np.testing.assert_allclose(_grad(ours), _grad(ref), rtol=1e-6, atol=1e-7)


def test_embedding_bag_scale_grad_by_freq_as_documented():
    """Each row's gradient divided by its index's frequency in the input, as
    PyTorch documents it and its nn.Embedding computes it.  (PyTorch 2.13's
    own EmbeddingBag does not: for input [0, 0, 1] in one bag it gives row 0
    gradient 1.0 and row 1 0.5; tracec follows the documented rule.)"""
    torch.manual_seed(0)
    ref = torch.nn.Embedding(6, 3, scale_grad_by_freq=True)
    ours = tracec.nn.EmbeddingBag(6, 3, mode="sum", scale_grad_by_freq=True)
    ours.weight.data = tracec.tensor(ref.weight.detach().numpy())
    idx, offsets = [0, 2, 0, 1, 2, 2, 5], [0, 3, 5]
    w = np.random.default_rng(1).standard_normal((3, 3)).astype(np.float32)
    rows = ref(torch.tensor(idx))
    bags = torch.stack([rows[0:3].sum(0), rows[3:5].sum(0), rows[5:].sum(0)])
    (bags * torch.tensor(w)).sum().backward()
    out = ours(tracec.tensor(idx), tracec.tensor(offsets))
    np.testing.assert_allclose(out.detach().numpy(), bags.detach().numpy(), rtol=1e-6)
    (out * tracec.tensor(w)).sum().backward()
    np.testing.assert_allclose(_grad(ours), _grad(ref), rtol=1e-6, atol=1e-7)


def test_compiled_step_equals_eager():
    def make():
        tracec.manual_seed(0)
        emb = tracec.nn.Embedding(7, 4, scale_grad_by_freq=True)
        return emb, tracec.optim.SGD(emb.parameters(), lr=0.5)

    idx = tracec.tensor([[0, 3, 3, 6], [3, 0, 1, 1]])
    results = []
    for compiled in (False, True):
        emb, opt = make()

        def step(i):
            opt.zero_grad()
            loss = (emb(i) ** 2).sum()
            loss.backward()
            opt.step()
            return loss
        fn = tracec.compile(step) if compiled else step
        losses = [fn(idx).item() for _ in range(3)]
        results.append((losses, emb.weight.detach().numpy().copy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls,args", [("Embedding", ()), ("EmbeddingBag", (("mode", "sum"),))])
def test_sparse_grad_is_a_coo_tensor(cls, args):
    # a recommender's check of nn.Embedding(sparse=True)'s gradient before SparseAdam
    out = []
    for lib in (torch, tracec):
        mod = getattr(lib.nn, cls)(7, 3, sparse=True, **dict(args))
        idx = lib.tensor([[4, 1, 4], [0, 1, 2]])
        mod(idx).sum().backward()
        g = mod.weight.grad
        c = g.coalesce()
        out.append((g.is_sparse, str(g.layout).replace("tracec.", "torch."), type(g).__name__,
                    g.is_coalesced(), g.sparse_dim(), c.indices().tolist(),
                    c.values().tolist(), g.to_dense().tolist(), g.to_dense().is_sparse))
    assert out[0] == out[1]


@pytest.mark.parametrize("opt", ["Adam", "AdamW", "RMSprop", "Adadelta", "ASGD", "Rprop",
                                 "Adamax", "NAdam", "RAdam"])
def test_dense_optimizers_refuse_a_sparse_gradient(opt):
    msgs = []
    for lib in (torch, tracec):
        emb = lib.nn.Embedding(5, 2, sparse=True)
        o = getattr(lib.optim, opt)(emb.parameters())
        emb(lib.tensor([1, 3])).sum().backward()
        with pytest.raises(RuntimeError) as e:
            o.step()
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]
