"""Gaps the public programs of ``tests/programs/models45`` found, each
against torch: tracec had no ``torch.nested`` (the "Getting Started with
Nested Tensors" tutorial).  Nested tensors are now ``tracec.nested``'s
``NestedTensor``: construction and its checks, printing, sizes, padding,
PyTorch's packed-buffer dropout (which draws even for p == 0), and the
dense functions (matmul, bmm, softmax, linear, dropout, scaled dot-product
attention) applied entry by entry with gradients reaching the entries."""
import re
import warnings

import numpy as np
import pytest
import torch

import tracec


def _entries(lib, shapes, seed=0, requires_grad=False):
    rng = np.random.default_rng(seed)
    return [lib.tensor(rng.normal(size=s).astype(np.float32), requires_grad=requires_grad)
            for s in shapes]


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


def _both(fn):
    return [_quiet(lambda: fn(lib)) for lib in (torch, tracec)]


def test_nested_tensor_prints_as_torch():
    def make(lib):
        nt = lib.nested.nested_tensor([lib.arange(12).reshape(2, 6),
                                       lib.arange(18).reshape(3, 6)], dtype=lib.float)
        w = lib.nested.as_nested_tensor(_entries(lib, [(2, 3), (1, 3)], requires_grad=True))
        leaf = lib.nested.nested_tensor(_entries(lib, [(1, 2)]), requires_grad=True)
        return [repr(nt), repr(nt.reshape(2, -1, 2, 3)), repr(w), repr(leaf)]
    want, got = _both(make)
    assert got == want


def test_jagged_layout_size_offsets_and_repr():
    def make(lib):
        q = lib.nested.nested_tensor(_entries(lib, [(2, 4), (3, 4)]), layout=lib.jagged)
        return [str(q.layout), q.dim(), q.size(0), q.size(2), q.offsets().tolist(),
                # (the ragged size's j-number counts the process's jagged tensors)
                re.sub(r"j\d+", "j#", repr(q)),
                re.sub(r"j\d+", "j#", str(q.shape)).replace("tracec.", "torch."),
                q.is_contiguous()]
    want, got = _both(make)
    assert got == want


def test_nested_dropout_draws_one_packed_mask_like_torch():
    # PyTorch's nested dropout draws Bernoulli over the packed entries,
    # also for p == 0; dense dropout at p == 0 draws nothing
    def make(lib, p):
        lib.manual_seed(3)
        nt = lib.nested.nested_tensor([lib.ones(2, 3), lib.ones(4, 3)])
        out = lib.nn.functional.dropout(nt, p)
        return [u.tolist() for u in out.unbind()], lib.randn(3).tolist()
    for p in (0.0, 0.5, 1.0):
        want, got = _both(lambda lib: make(lib, p))
        assert got[0] == want[0]
        np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def test_to_padded_tensor_values_output_size_and_gradient():
    def make(lib):
        es = _entries(lib, [(2, 3), (4, 1)], requires_grad=True)
        nt = lib.nested.as_nested_tensor(es)
        p = lib.nested.to_padded_tensor(nt, -1.5, (2, 5, 4))
        (p * lib.arange(40.).reshape(2, 5, 4)).sum().backward()
        return p.detach().numpy(), [e.grad.numpy() for e in es]
    want, got = _both(make)
    np.testing.assert_array_equal(got[0], want[0])
    for g, w in zip(got[1], want[1]):
        np.testing.assert_array_equal(g, w)


def test_nested_refusals_use_torch_words():
    def msgs(lib):
        x = lib.nested.nested_tensor(_entries(lib, [(2, 3), (4, 3)]))
        out = []
        for f in (lambda: lib.nested.nested_tensor(_entries(lib, [(2, 3), (3,)])),
                  lambda: x.size(1), lambda: x.view(-1), lambda: x.reshape(-1, 2, 3),
                  lambda: x.transpose(0, 1), lambda: x.size(),
                  lambda: x + lib.nested.nested_tensor(_entries(lib, [(2, 3)])),
                  lambda: x + lib.ones(3),
                  lambda: lib.nested.nested_tensor(_entries(lib, [(2, 4), (3, 5)]),
                                                   layout=lib.jagged)):
            with pytest.raises(RuntimeError) as e:
                f()
            out.append(str(e.value))
        return out
    want, got = _both(msgs)
    assert got == want


def test_nested_attention_block_matches_torch_with_gradients():
    # the tutorial's projection / unflatten / transpose / SDPA / flatten on
    # jagged inputs, and matmul / bmm / softmax on strided ones
    def run(lib):
        F = lib.nn.functional
        lib.manual_seed(0)
        proj = lib.nn.Linear(8, 8)
        es = _entries(lib, [(3, 8), (5, 8)], seed=1, requires_grad=True)
        q = lib.nested.as_nested_tensor(es, layout=lib.jagged)
        h = proj(q).unflatten(-1, [2, 4]).transpose(1, 2)
        o = F.scaled_dot_product_attention(h, h, h).transpose(1, 2).flatten(-2)
        a = lib.nested.nested_tensor(_entries(lib, [(2, 3), (4, 3)], seed=2))
        b = lib.nested.nested_tensor(_entries(lib, [(3, 5), (3, 2)], seed=3))
        s = F.softmax(lib.bmm(a, b), -1)
        m = lib.matmul(a, b)
        loss = sum((u ** 2).sum() for u in o.unbind())
        loss.backward()
        return ([u.detach().numpy() for u in o.unbind()] + [u.numpy() for u in s.unbind()]
                + [u.numpy() for u in m.unbind()] + [e.grad.numpy() for e in es]
                + [proj.weight.grad.numpy()])
    want, got = _both(run)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_narrow_jagged_entries():
    def make(lib):
        base = lib.arange(20.).reshape(4, 5)
        nt = lib.nested.narrow(base, 1, lib.tensor([0, 1, 2, 0]), lib.tensor([2, 3, 1, 5]),
                               layout=lib.jagged)
        return [u.tolist() for u in nt.unbind()], nt.is_contiguous(), nt.dim()
    want, got = _both(make)
    assert got == want


# --- torch.masked (the MaskedTensor tutorials) -------------------------------------------

def _mt(lib, data, mask, **kw):
    return _quiet(lambda: lib.masked.masked_tensor(lib.tensor(data), lib.tensor(mask), **kw))


def test_masked_tensor_prints_as_torch():
    def make(lib):
        x = lib.arange(24).reshape(2, 3, 4)
        mt = _quiet(lambda: lib.masked.masked_tensor(x.float(), x % 2 == 0))
        ints = _mt(lib, [[0, 0, 3], [4, 0, 5]], [[False, False, True], [False, False, True]])
        return [repr(mt[0]), repr(mt[:, :, 2:4]), repr(ints), repr(ints.to_sparse_coo()),
                repr(_mt(lib, 2.5, True)), repr(_mt(lib, 2.5, False)),
                repr(_mt(lib, [1.0, 2.0], [True, True]))]
    want, got = _both(make)
    assert got == want


def test_masked_where_gradients_mask_the_branch_not_taken():
    def run(lib):
        x = lib.tensor([-10., -5, 0, 5, 10, 50, 100])
        mask = x < 0
        mx = _quiet(lambda: lib.masked.masked_tensor(x, mask, requires_grad=True))
        my = _quiet(lambda: lib.masked.masked_tensor(lib.ones_like(x), ~mask, requires_grad=True))
        _quiet(lambda: lib.where(mask, lib.exp(mx), my).sum().backward())
        a = _mt(lib, 0.7, True, requires_grad=True)
        g = _quiet(lambda: lib.autograd.grad(lib.where(lib.tensor(False), a / 0, lib.ones(())),
                                             a))
        return repr(mx.grad), repr(my.grad), repr(g)
    want, got = _both(run)
    assert got == want


def test_masked_gradient_of_a_dense_operand_is_a_masked_sum():
    # the masked-out nan takes no part (a dense VJP would sum it in)
    def run(lib):
        b = lib.tensor(1.5, requires_grad=True)
        x = lib.tensor([1., 2., float("nan")])
        mt = _quiet(lambda: lib.masked.masked_tensor(x, ~lib.isnan(x)))
        c = mt * b
        g, = _quiet(lambda: lib.autograd.grad(lib.sum(c), b, retain_graph=True))
        w = _mt(lib, [[1., 2., 3.], [4., 5., 6.]], [[True, False, True], [False, True, True]],
                requires_grad=True)
        loss = (w * w).sum()
        _quiet(lambda: loss.backward())
        return repr(g), repr(lib.mean(c)), repr(w.grad), repr(loss)
    want, got = _both(run)
    assert got == want


def test_masked_tensor_reductions_and_semantics_match_torch():
    def run(lib):
        nan = float("nan")
        x = lib.tensor([[1., nan, 3.], [nan, nan, 6.], [nan, nan, nan]])
        mt = _quiet(lambda: lib.masked.masked_tensor(x, ~lib.isnan(x)))
        out = [repr(r) for r in (mt.sum(), mt.mean(), mt.amax(), mt.argmax(), mt.sum(1),
                                 mt.sum(dim=0, keepdim=True), mt.mean(1), mt.amin(0),
                                 mt.argmax(1), mt.softmax(1), mt.prod(1), lib.exp(mt),
                                 mt * 2 - 1, mt / 0)]
        other = _mt(lib, [[1., 2., 3.]] * 3, [[True, True, False]] * 3)
        with pytest.raises(ValueError) as e:
            mt + other
        out.append(str(e.value))
        out.append(mt.to_tensor(0).tolist())
        return out
    want, got = _both(run)
    assert got == want


@pytest.mark.parametrize("name,args,kw", [
    ("sum", (1,), {}), ("sum", (0,), {"keepdim": True}), ("sum", ((0, 1),), {}),
    ("mean", (1,), {}), ("amax", (1,), {}), ("amin", (0,), {}), ("argmax", (1,), {}),
    ("argmin", (0,), {}), ("prod", (1,), {}), ("softmax", (1,), {}), ("log_softmax", (0,), {}),
    ("softmin", (1,), {}), ("norm", (2.0, 1), {}), ("norm", (float("-inf"), 1), {}),
    ("norm", (1.0, None), {}), ("var", (1,), {"unbiased": False}), ("var", (1,), {}),
    ("std", (0,), {"correction": 0}), ("mean", (None,), {})])
def test_masked_functional_ops_match_torch(name, args, kw):
    x = np.random.default_rng(4).normal(size=(4, 5)).astype(np.float32)
    m = np.random.default_rng(5).random((4, 5)) > 0.5
    m[2] = False        # a fully masked-out row
    m[3] = [True, False, False, False, False]

    def run(lib, mask):
        fn = getattr(lib.masked, name)
        kwargs = dict(kw)
        if mask:
            kwargs["mask"] = lib.tensor(m)
        return fn(lib.tensor(x), *args, **kwargs).numpy()
    for mask in (True, False):
        want, got = [run(lib, mask) for lib in (torch, tracec)]
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_sparse_mask_keeps_the_mask_pattern():
    def run(lib):
        d = lib.arange(6.).reshape(2, 3)
        out = []
        for mask in (lib.tensor([[1., 0, 2], [0, 0, 3]]).to_sparse(),
                     lib.sparse_coo_tensor([[1, 0, 1], [2, 0, 2]], [1., 2., 3.], (2, 3))):
            r = d.sparse_mask(mask)
            out.append((r._indices().tolist(), r._values().tolist(), r.is_coalesced(),
                        r.to_dense().tolist()))
        return out
    want, got = _both(run)
    assert got == want


# --- torch.utils.flop_counter ------------------------------------------------------------

def _counts(fc):
    return {mod: {str(op): n for op, n in ops.items()} for mod, ops in fc.get_flop_counts().items()}


_FLOP_CASES = {
    "linear2d_bias": lambda lib, x, w3: lib.nn.functional.linear(x[0], w3[0], w3[1][0]),
    "linear3d_bias": lambda lib, x, w3: lib.nn.functional.linear(x, w3[0], w3[1][0]),
    "linear3d_nobias": lambda lib, x, w3: lib.nn.functional.linear(x, w3[0]),
    "linear3d_noncontig": lambda lib, x, w3: lib.nn.functional.linear(
        x.transpose(0, 1), w3[0], w3[1][0]),
    "matmul_3d_2d_const": lambda lib, x, w3: lib.matmul(x.transpose(0, 1), w3[0].detach().t()),
    "matmul_2d_3d": lambda lib, x, w3: lib.matmul(w3[0], x.transpose(1, 2)),
    "matmul_4d": lambda lib, x, w3: x.view(2, 1, 3, 4) @ x.view(2, 1, 3, 4).transpose(-2, -1),
    "matmul_1d_2d": lambda lib, x, w3: x[0, 0] @ w3[0].t(),
    "bmm": lambda lib, x, w3: lib.bmm(x, x.transpose(1, 2)),
    "addmm": lambda lib, x, w3: lib.addmm(w3[1][0], x[0], w3[0].t()),
    "baddbmm": lambda lib, x, w3: lib.baddbmm(x[:, :, :1], x, x.transpose(1, 2)),
    "sdpa_flash": lambda lib, x, w3: lib.nn.functional.scaled_dot_product_attention(
        x.view(2, 1, 3, 4), x.view(2, 1, 3, 4), x.view(2, 1, 3, 4), is_causal=True),
    "sdpa_math_3d": lambda lib, x, w3: lib.nn.functional.scaled_dot_product_attention(
        x, x, x[:, :, :2]),
}


@pytest.mark.parametrize("case", list(_FLOP_CASES))
def test_flop_counter_counts_torchs_aten_ops(case):
    def run(lib):
        from importlib import import_module
        FlopCounterMode = import_module(lib.__name__ + ".utils.flop_counter").FlopCounterMode
        rng = np.random.default_rng(6)
        x = lib.tensor(rng.normal(size=(2, 3, 4)).astype(np.float32), requires_grad=True)
        w = lib.tensor(rng.normal(size=(5, 4)).astype(np.float32), requires_grad=True)
        b = lib.tensor(rng.normal(size=(1, 5)).astype(np.float32), requires_grad=True)
        with FlopCounterMode(display=False) as fc:
            out = _FLOP_CASES[case](lib, x, (w, b))
            out.sum().backward()
        return _counts(fc)
    want, got = _both(run)
    assert got == want


@pytest.mark.parametrize("transposed", [False, True])
def test_flop_counter_convolution_and_table_match_torch(transposed):
    def run(lib):
        from importlib import import_module
        FlopCounterMode = import_module(lib.__name__ + ".utils.flop_counter").FlopCounterMode
        lib.manual_seed(0)
        conv = (lib.nn.ConvTranspose2d(3, 4, 3, stride=2) if transposed
                else lib.nn.Conv2d(3, 4, 3, padding=1))
        net = lib.nn.Sequential(conv, lib.nn.ReLU())
        x = lib.randn(2, 3, 5, 5)
        with FlopCounterMode(display=False) as fc:
            net(x).sum().backward()
        # an op outside any module: Global is then not subsumed by a module
        with FlopCounterMode(display=False) as fc2:
            net(x)
            lib.mm(lib.ones(4, 8), lib.ones(8, 2))
        return _counts(fc), fc.get_table(), fc2.get_table(), fc2.get_table(depth=0)
    want, got = _both(run)
    assert got == want


def test_global_module_forward_hooks_run_before_the_modules_own():
    def run(lib):
        seen = []
        lin = lib.nn.Linear(2, 2)
        lin.register_forward_pre_hook(lambda m, a: seen.append("own pre"))
        lin.register_forward_hook(lambda m, a, o: seen.append("own post"))
        mod = lib.nn.modules.module
        h1 = mod.register_module_forward_pre_hook(lambda m, a: seen.append(f"pre {type(m).__name__}"))
        h2 = mod.register_module_forward_hook(lambda m, a, o: seen.append(f"post {type(m).__name__}"))
        lib.nn.Sequential(lin)(lib.ones(1, 2))
        h1.remove()
        h2.remove()
        lin(lib.ones(1, 2))
        return seen
    want, got = _both(run)
    assert got == want


_RNN_CASES = {
    "rnn": (lambda lib: lib.nn.RNN(8, 6), lambda m, x: m(x)[0]),
    "rnn_relu_bf_2l": (lambda lib: lib.nn.RNN(8, 6, num_layers=2, nonlinearity="relu",
                                               batch_first=True), lambda m, x: m(x)[0]),
    "rnn_nobias": (lambda lib: lib.nn.RNN(8, 6, bias=False), lambda m, x: m(x)[0]),
    "gru_bi_h_n": (lambda lib: lib.nn.GRU(8, 6, bidirectional=True), lambda m, x: m(x)[1]),
    "lstm_onednn": (lambda lib: lib.nn.LSTM(8, 6, num_layers=2, bidirectional=True),
                    lambda m, x: m(x)[0]),
    "lstm_proj": (lambda lib: lib.nn.LSTM(8, 6, proj_size=3), lambda m, x: m(x)[0]),
    "lstm_packed": (lambda lib: lib.nn.LSTM(8, 6), lambda m, x: m(
        _packed(x))[0].data),
    "lstmcell": (lambda lib: lib.nn.LSTMCell(8, 6), lambda m, x: m(x[0])[0]),
    "grucell_1d": (lambda lib: lib.nn.GRUCell(8, 6), lambda m, x: m(x[0, 0])),
    "rnncell": (lambda lib: lib.nn.RNNCell(8, 6, bias=False), lambda m, x: m(x[0])),
}


def _packed(x):
    lib = torch if isinstance(x, torch.Tensor) else tracec
    return lib.nn.utils.rnn.pack_padded_sequence(x, [3, 2, 2, 1, 1], enforce_sorted=True)


@pytest.mark.parametrize("case", list(_RNN_CASES))
def test_flop_counter_counts_recurrent_layers_as_torchs_cpu_kernels(case):
    # oneDNN's LSTM layer has no formula (nothing counted); the others run
    # a linear over the sequence and one per step
    make, run = _RNN_CASES[case]

    def count(lib, train):
        from importlib import import_module
        FlopCounterMode = import_module(lib.__name__ + ".utils.flop_counter").FlopCounterMode
        lib.manual_seed(0)
        m = make(lib)
        x = lib.randn(3, 5, 8)
        with FlopCounterMode(display=False) as fc:
            out = run(m, x)
            if train:
                out.sum().backward()
        return _counts(fc)
    for train in (False, True):
        want, got = _both(lambda lib: count(lib, train))
        assert got == want


def _entries_of(r):
    if getattr(r, "is_nested", False):
        return [u.detach().numpy() for u in r.unbind()]
    if isinstance(r, (tuple, list)):
        return [_entries_of(x) for x in r]
    return r.detach().numpy() if hasattr(r, "detach") else r


@pytest.mark.parametrize("case", ["add_dense", "mul_2d", "relu", "gelu", "silu", "layer_norm",
                                  "block", "values", "from_jagged", "from_jagged_lengths",
                                  "sum_last", "mean_keepdim", "sum_ragged", "mean_ragged",
                                  "chunk", "len_numel"])
def test_jagged_transformer_ops_match_torch(case):
    # what a transformer block does to jagged activations: dense bias
    # broadcasts, activations, layer norm, residual adds, reductions
    def run(lib):
        F = lib.nn.functional
        lib.manual_seed(0)
        q = lib.nested.nested_tensor([lib.randn(2, 4), lib.randn(3, 4)], layout=lib.jagged)
        ln, lin = lib.nn.LayerNorm(4), lib.nn.Linear(4, 4)
        values = lib.arange(10.).reshape(5, 2)
        cases = {
            "add_dense": lambda: q + lib.ones(4),
            "mul_2d": lambda: q * lib.arange(4.).reshape(1, 4),
            "relu": lambda: F.relu(q), "gelu": lambda: F.gelu(q), "silu": lambda: F.silu(q),
            "layer_norm": lambda: F.layer_norm(q, (4,)),
            "block": lambda: q + lin(F.gelu(ln(q))),
            "values": lambda: q.values(),
            "from_jagged": lambda: lib.nested.nested_tensor_from_jagged(
                values, lib.tensor([0, 2, 5])),
            "from_jagged_lengths": lambda: lib.nested.nested_tensor_from_jagged(
                values, lib.tensor([0, 2, 5]), lengths=lib.tensor([1, 2])),
            "sum_last": lambda: q.sum(-1), "mean_keepdim": lambda: q.mean(-1, keepdim=True),
            "sum_ragged": lambda: q.sum(1), "mean_ragged": lambda: q.mean(1),
            "chunk": lambda: q.chunk(2, -1), "len_numel": lambda: (len(q), q.numel()),
        }
        return _entries_of(cases[case]())
    want, got = _both(run)
    assert _shapes(got) == _shapes(want)
    np.testing.assert_allclose(_flat(got), _flat(want), rtol=1e-5, atol=1e-6)


def _shapes(x):
    if isinstance(x, (list, tuple)):
        return [_shapes(v) for v in x]
    return np.shape(x)


def _flat(x):
    if isinstance(x, (list, tuple)):
        return np.concatenate([_flat(v) for v in x]) if x else np.zeros(0)
    return np.asarray(x, dtype=np.float64).reshape(-1)


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,jk->bik", [(2, 3, 4), (4, 5)]),
    ("bhid,bhjd->bhij", [(2, 2, 3, 4), (2, 2, 5, 4)]), ("ij,ij->", [(3, 4), (3, 4)]),
    ("bi,bj->bij", [(2, 3), (2, 4)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]), ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("iij,jk->ik", [(3, 3, 4), (4, 2)]), ("ij,jk", [(3, 4), (4, 5)])])
def test_flop_counter_counts_einsum_as_torchs_pairwise_bmm(equation, shapes):
    def run(lib):
        from importlib import import_module
        FlopCounterMode = import_module(lib.__name__ + ".utils.flop_counter").FlopCounterMode
        lib.manual_seed(0)
        ops = [lib.randn(*s, requires_grad=i == 0) for i, s in enumerate(shapes)]
        with FlopCounterMode(display=False) as fc:
            lib.einsum(equation, *ops).sum().backward()
        return _counts(fc)
    want, got = _both(run)
    assert got == want


_MISC_FLOP_CASES = {
    "mm": lambda lib, a, b: lib.mm(a, b),
    "addbmm_uncounted": lambda lib, a, b: lib.addbmm(lib.zeros(3, 5), a.expand(2, 3, 4), b.expand(2, 4, 5)),
    "bilinear_uncounted": lambda lib, a, b: lib.nn.functional.bilinear(a, a, lib.ones(2, 4, 4)),
    "linear_1d_bias": lambda lib, a, b: lib.nn.functional.linear(a[0], b.t(), lib.ones(5)),
    "mha_masked_baddbmm": lambda lib, a, b: lib.nn.MultiheadAttention(4, 2, batch_first=True)(
        a[None], a[None], a[None], attn_mask=lib.ones(3, 3).bool().triu(1))[0],
    "multi_dot_3": lambda lib, a, b: lib.linalg.multi_dot([a, b, lib.ones(5, 2)]),
    "multi_dot_5_vectors": lambda lib, a, b: lib.linalg.multi_dot(
        [a[0], b, lib.ones(5, 7), lib.ones(7, 2), lib.ones(2)]),
    "tensordot": lambda lib, a, b: lib.tensordot(a.expand(2, 3, 4), b, dims=([2], [0])),
}


@pytest.mark.parametrize("case", list(_MISC_FLOP_CASES))
def test_flop_counter_misc_ops_and_multi_dot_order_match_torch(case):
    def run(lib):
        from importlib import import_module
        FlopCounterMode = import_module(lib.__name__ + ".utils.flop_counter").FlopCounterMode
        lib.manual_seed(0)
        a = lib.randn(3, 4, requires_grad=True)
        b = lib.randn(4, 5)
        with FlopCounterMode(display=False) as fc:
            out = _MISC_FLOP_CASES[case](lib, a, b)
            out.sum().backward()
        return _counts(fc), out.detach().numpy(), a.grad.numpy()
    want, got = _both(run)
    assert got[0] == want[0]
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_flop_counter_counts_compiled_calls_as_their_eager_ops():
    # a compiled call inside the mode runs eagerly, so its ops are counted
    # (as torch counts a compiled call)
    from tracec.utils.flop_counter import FlopCounterMode
    tracec.manual_seed(0)
    model = tracec.nn.Sequential(tracec.nn.Linear(4, 8), tracec.nn.ReLU(), tracec.nn.Linear(8, 2))
    compiled = tracec.compile(model)
    x = tracec.randn(3, 4)
    compiled(x)                      # traced and compiled outside the mode
    counts = []
    for fn in (model, compiled):
        with FlopCounterMode(display=False) as fc:
            out = fn(x)
            out.sum().backward()
        counts.append(_counts(fc)["Global"])
    assert counts[0] == counts[1]
    assert counts[0] == {"aten.addmm": 2 * 3 * 4 * 8 + 2 * 3 * 8 * 2,
                                   "aten.mm": 2 * 3 * 8 * 2 * 2 + 2 * 3 * 4 * 8}


@pytest.mark.parametrize("input_grad", [False, True])
def test_flop_counter_module_attribution_keeps_torchs_identity_module_quirk(input_grad):
    # PyTorch's ModuleTracker leaves a module that returns its input (an
    # Identity, a Dropout with p=0) "in backward" for the rest of that
    # backward: its row then holds every later backward op
    def run(lib):
        from importlib import import_module
        FlopCounterMode = import_module(lib.__name__ + ".utils.flop_counter").FlopCounterMode
        nn = lib.nn
        lib.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.0), nn.Linear(8, 8), nn.Identity(),
                          nn.Linear(8, 2))
        enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        x = lib.randn(3, 4).requires_grad_(input_grad)
        out = []
        with FlopCounterMode(display=False) as fc:
            m(x).sum().backward()
        out.append(_counts(fc))
        with FlopCounterMode(display=False) as fc:      # two steps: reset in between
            m(x).sum().backward()
            m(x).sum().backward()
        out.append(_counts(fc))
        with FlopCounterMode(display=False) as fc:
            enc(lib.randn(3, 5, 8)).sum().backward()
        out.append(_counts(fc))
        return out
    want, got = _both(run)
    assert got == want


def test_sparse_masked_tensor_ops_keep_the_mask_indices_as_torch():
    # the MaskedTensor sparsity / Adagrad tutorials: results of a sparse
    # COO MaskedTensor are sparse with its mask's indices; masked_tensor
    # restricts sparse data to the mask's pattern
    def run(lib):
        mtc = lib.masked.masked_tensor
        i = [[0, 1, 1], [2, 0, 2]]
        grad = lib.sparse_coo_tensor(i, [3., 4., 5.], [2, 4])
        mask = (grad.to_dense() != 0).to_sparse()
        mg = _quiet(lambda: mtc(grad, mask))
        state = lib.full((2, 4), 0.5) + mg.pow(2).get_data()
        std = _quiet(lambda: mtc(state.to_sparse(), mask))
        std = std.sqrt().add(1e-10)
        upd = mg / std
        s1 = lib.sparse_coo_tensor(i, [3, 4, 5], (2, 3))
        s2 = lib.sparse_coo_tensor(i, [20, 30, 40], (2, 3))
        m = lib.sparse_coo_tensor(i, lib.tensor([True, False, True]), (2, 3))
        mt1, mt2 = _quiet(lambda: mtc(s1, m)), _quiet(lambda: mtc(s2, m))
        return [repr(x) for x in (mg, mg.pow(2).get_data(), std.get_data(), std,
                                  upd.get_data(), mt2 / mt1, mt1 * mt2, (mt1 * mt2).get_data(),
                                  mt1.sum(), mt1.amin(), mt1.to_dense())]
    want, got = _both(run)
    assert got == want


def test_nested_tensors_pass_through_tracec_compile():
    # a compiled call reads a nested tensor's entries as its tensors and
    # returns nested results; a new batch of other lengths reuses the
    # (then symbolic) trace; the training step matches eager
    import copy
    F = tracec.nn.functional
    tracec.manual_seed(0)
    lin = tracec.nn.Linear(8, 8)
    lin2 = copy.deepcopy(lin)

    def step(m, opt, x):
        opt.zero_grad()
        q = m(x).unflatten(-1, [2, 4]).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, q, q).transpose(1, 2).flatten(-2)
        loss = sum(u.pow(2).sum() for u in out.unbind())
        loss.backward()
        opt.step()
        return loss.detach(), out.detach()
    opt, opt2 = tracec.optim.SGD(lin.parameters(), lr=0.1), tracec.optim.SGD(lin2.parameters(), lr=0.1)
    compiled = tracec.compile(step)
    for lens in ([3, 5], [2, 4], [4, 6]):
        x = tracec.nested.nested_tensor([tracec.randn(n, 8) for n in lens], layout=tracec.jagged)
        (la, oa), (lb, ob) = compiled(lin, opt, x), step(lin2, opt2, x)
        assert oa.is_nested and oa.layout is tracec.jagged
        np.testing.assert_allclose(la.numpy(), lb.numpy(), rtol=1e-5)
        for a, b in zip(oa.unbind(), ob.unbind()):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
        for p, q in zip(lin.parameters(), lin2.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
    info = compiled.cache_info()
    assert info.eager_signatures == 0 and info.traces == 2, info
