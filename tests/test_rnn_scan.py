"""nn.RNN / LSTM / GRU through the ``rnn_scan`` primitive (tracec/ops/recurrent.py,
tracec/backends/cpu/recurrent.py): outputs, final states and every gradient
equal PyTorch's, eagerly and compiled on interp and cpu; a compiled LSTM
language-model step serves every sequence length with one trace and one
native compile."""
import numpy as np
import pytest
import torch

import tracec
import tracec.nn as nn
import tracec.nn.functional as F

MODELS = [("LSTM", {}), ("GRU", {}), ("RNN", {"nonlinearity": "tanh"}),
          ("RNN", {"nonlinearity": "relu"})]
CONFIGS = [dict(num_layers=1, bidirectional=False, batch_first=False, bias=True),
           dict(num_layers=2, bidirectional=True, batch_first=True, bias=True),
           dict(num_layers=2, bidirectional=True, batch_first=False, bias=False)]
E, H, N, T = 3, 5, 2, 4


def _tol(dtype):
    return dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=2e-4, atol=2e-5)


def _pair(cls, kw, cfg, dtype):
    torch.manual_seed(0)
    ref = getattr(torch.nn, cls)(E, H, **kw, **cfg).to(getattr(torch, dtype))
    mine = getattr(nn, cls)(E, H, **kw, **cfg, dtype=getattr(tracec, dtype))
    mine.load_state_dict({k: tracec.tensor(v.detach().numpy())
                          for k, v in ref.state_dict().items()})
    return ref, mine


def _data(cls, cfg, dtype):
    rng = np.random.default_rng(1)
    d = 2 if cfg["bidirectional"] else 1
    L = cfg["num_layers"] * d
    shape = (N, T, E) if cfg["batch_first"] else (T, N, E)
    x = rng.standard_normal(shape).astype(dtype)
    states = [rng.standard_normal((L, N, H)).astype(dtype)
              for _ in range(2 if cls == "LSTM" else 1)]
    out_w = rng.standard_normal(shape[:2] + (d * H,)).astype(dtype)
    state_w = [rng.standard_normal((L, N, H)).astype(dtype) for _ in states]
    return x, states, out_w, state_w


def _step(lib, model, cls, out_w, state_w):
    """Forward, a loss weighting every output and final state, backward."""
    def step(x, *states):
        for p in model.parameters():
            p.grad = None
        out, hidden = model(x, tuple(states) if cls == "LSTM" else states[0])
        finals = hidden if cls == "LSTM" else (hidden,)
        loss = (out * lib.tensor(out_w)).sum()
        for s, w in zip(finals, state_w):
            loss = loss + (s * lib.tensor(w)).sum()
        loss.backward()
        return (out, *finals)
    return step


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
@pytest.mark.parametrize("model", range(len(MODELS)))
@pytest.mark.parametrize("backend", ["eager", "interp", "cpu"])
def test_equals_torch(backend, model, cfg, dtype):
    cls, kw = MODELS[model]
    cfg = CONFIGS[cfg]
    ref, mine = _pair(cls, kw, cfg, dtype)
    x, states, out_w, state_w = _data(cls, cfg, dtype)

    tx = torch.tensor(x, requires_grad=True)
    ts = [torch.tensor(s, requires_grad=True) for s in states]
    want = _step(torch, ref, cls, out_w, state_w)(tx, *ts)

    step = _step(tracec, mine, cls, out_w, state_w)
    if backend != "eager":
        step = tracec.compile(step, backend=backend)
    for _ in range(3):      # the later calls run the compiled code
        mx = tracec.tensor(x, requires_grad=True)
        ms = [tracec.tensor(s, requires_grad=True) for s in states]
        got = step(mx, *ms)
    if backend == "cpu":    # native code, built now or loaded from the disk cache
        info = step.cache_info()
        assert info.compiles + info.loads == 1

    tol = _tol(dtype)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), **tol)
    for g, w in zip([mx, *ms], [tx, *ts]):
        np.testing.assert_allclose(g.grad.numpy(), w.grad.numpy(), **tol)
    names = [n for n, _ in ref.named_parameters()]
    assert names == [n for n, _ in mine.named_parameters()]
    for (n, p), (_, q) in zip(mine.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), err_msg=n, **tol)


def test_uses_one_scan_per_direction():
    """The recurrence is one rnn_scan op per layer and direction (and one
    rnn_scan_grad in the backward), not an unrolled loop over steps."""
    m = nn.LSTM(E, H, num_layers=2, bidirectional=True)

    @tracec.compile(backend="interp")
    def f(x):
        out, _ = m(x)
        out.sum().backward()
        return out
    f(tracec.randn(6, N, E))
    text = f.ir("optimized")
    assert text.count("tracec.rnn_scan ") == 4 and text.count("tracec.rnn_scan_grad ") == 4
    # 4 input projections, 4 W_ih and 2 layer-input gradients, and 4 W_hh
    # gradients (each one GEMM over all steps): none per step
    assert text.count("tracec.matmul ") == 14


def test_projection_and_packed_keep_the_step_loop():
    """proj_size > 0 and packed sequences still run the per-step loop, and
    equal torch's."""
    torch.manual_seed(0)
    ref = torch.nn.LSTM(E, H, proj_size=2).double()
    mine = nn.LSTM(E, H, proj_size=2, dtype=tracec.float64)
    mine.load_state_dict({k: tracec.tensor(v.detach().numpy())
                          for k, v in ref.state_dict().items()})
    x = np.random.default_rng(3).standard_normal((T, N, E))
    out, (h, c) = mine(tracec.tensor(x))
    tout, (th, tc) = ref(torch.tensor(x))
    for a, b in ((out, tout), (h, th), (c, tc)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10)


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_empty_sequence_is_refused_as_torch(cls):
    for lib in (torch, tracec):
        with pytest.raises(RuntimeError, match="Expected sequence length to be larger than 0"):
            getattr(lib.nn, cls)(E, H)(lib.zeros(0, N, E))


class _LM(nn.Module):
    def __init__(self, vocab=17, width=8, layers=2):
        super().__init__()
        self.encoder = nn.Embedding(vocab, width)
        self.rnn = nn.LSTM(width, width, layers)
        self.decoder = nn.Linear(width, vocab)

    def forward(self, idx, hidden):
        out, hidden = self.rnn(self.encoder(idx), hidden)
        return self.decoder(out), hidden


def _lm_step():
    tracec.manual_seed(0)
    model = _LM()
    opt = tracec.optim.SGD(model.parameters(), lr=0.5)

    def step(idx, tgt, h, c):
        opt.zero_grad()
        logits, (h, c) = model(idx, (h, c))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
        loss.backward()
        opt.step()
        return loss, h.detach(), c.detach()
    return model, step


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_lm_step_every_length_one_trace_one_compile(backend, tmp_path, monkeypatch):
    """A compiled LSTM language-model step at T = 5, 7, 9, 7 (T symbolic):
    one trace, one compile, each step equal to eager."""
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path / "cache"))
    me, eager = _lm_step()
    mc, step = _lm_step()
    comp = tracec.compile(step, backend=backend)
    rng = np.random.default_rng(5)
    he, ce, hc, cc = (tracec.zeros(2, 3, 8) for _ in range(4))
    for t in (5, 7, 9, 7):
        idx = rng.integers(0, 17, (t, 3))
        tgt = rng.integers(0, 17, (t, 3))
        le, he, ce = eager(tracec.tensor(idx), tracec.tensor(tgt), he, ce)
        lc, hc, cc = comp(tracec.mark_dynamic(tracec.tensor(idx), 0, name="T"),
                          tracec.mark_dynamic(tracec.tensor(tgt), 0, name="T"), hc, cc)
        np.testing.assert_allclose(lc.item(), le.item(), rtol=1e-5)
        np.testing.assert_allclose(hc.numpy(), he.numpy(), rtol=1e-4, atol=1e-5)
    for a, b in zip(me.parameters(), mc.parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-4, atol=1e-5)
    info = comp.cache_info()
    assert info.traces == 1 and info.compiles == 1, info
    assert "rnn_scan" in comp.ir("optimized")


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_symbolic_length_and_batch_one_compile(cls, tmp_path, monkeypatch):
    """T and N both symbolic (mark_dynamic: run-time values of the scan's
    loops and GEMMs); every (T, N) equals eager, one trace, one compile."""
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path / "cache"))
    tracec.manual_seed(0)
    m = getattr(nn, cls)(E, H, num_layers=2, bidirectional=True)

    def step(x):
        for p in m.parameters():
            p.grad = None
        out, _ = m(x)
        (out * out).sum().backward()
        return out, m.weight_hh_l1_reverse.grad
    comp = tracec.compile(step)
    rng = np.random.default_rng(4)
    for t, n in ((5, 4), (7, 6), (2, 2), (9, 4)):
        x = rng.standard_normal((t, n, E)).astype(np.float32)
        xs = tracec.mark_dynamic(tracec.mark_dynamic(tracec.tensor(x), 0, name="T"), 1, name="N")
        got = [g.detach().numpy().copy() for g in comp(xs)]
        want = [w.detach().numpy() for w in step(tracec.tensor(x))]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    info = comp.cache_info()
    assert info.traces == 1 and info.compiles == 1, info


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_wide_layer_symbolic_batch_equals_torch(cls, tmp_path, monkeypatch):
    """Hidden size 40: the steps' products take the unpacked short-GEMM
    kernel for a batch of at most 32 rows and the packed GEMM above, chosen
    per call for a symbolic batch; every batch equals torch (float64)."""
    monkeypatch.setenv("TRACEC_CACHE_DIR", str(tmp_path / "cache"))
    torch.manual_seed(0)
    ref = getattr(torch.nn, cls)(6, 40, bidirectional=True).double()
    mine = getattr(nn, cls)(6, 40, bidirectional=True, dtype=tracec.float64)
    mine.load_state_dict({k: tracec.tensor(v.detach().numpy())
                          for k, v in ref.state_dict().items()})

    def step(lib, model):
        def f(x):
            for p in model.parameters():
                p.grad = None
            out, _ = model(x)
            (out * out).sum().backward()
            return out, model.weight_hh_l0.grad, model.weight_hh_l0_reverse.grad
        return f
    comp = tracec.compile(step(tracec, mine))
    rng = np.random.default_rng(6)
    for t, n in ((4, 3), (5, 40), (3, 32), (4, 33)):
        x = rng.standard_normal((t, n, 6))
        want = step(torch, ref)(torch.tensor(x))
        xs = tracec.mark_dynamic(tracec.mark_dynamic(tracec.tensor(x), 0, name="T"), 1, name="N")
        got = comp(xs)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-9,
                                       atol=1e-11)
    info = comp.cache_info()
    assert info.traces == 1 and info.compiles == 1, info


AOT_USER = '''
import tracec
tracec.manual_seed(0)
lstm = tracec.nn.GRU(3, 4, num_layers=2, bidirectional=True)

def run(x):
    out, h = lstm(x)
    return out, h
'''

# Sizes the inputs from the table's named dimension T, allocates and
# initializes the state, and calls run_argv at each T of argv, printing the
# outputs.
AOT_DRIVER = r'''
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "librun.h"

static int64_t numel(const tracec_arg *a, int64_t T) {
    int64_t n = 1;
    for (int d = 0; d < a->rank; d++)
        n *= a->shape[d] >= 0 ? a->shape[d] : T;
    return n;
}

int main(int argc, char **argv) {
    void *buf[RUN_NUM_ARGS] = {0};
    for (int i = 0; i < run_num_args; i++)
        if (run_args[i].state_index >= 0)
            buf[i] = malloc(run_args[i].numel * run_args[i].itemsize);
    if (run_init_state_argv(buf)) return 3;
    for (int k = 1; k < argc; k++) {
        int64_t T = atoi(argv[k]);
        for (int i = 0; i < run_num_args; i++) {
            const tracec_arg *a = &run_args[i];
            if (a->state_index >= 0) continue;
            int64_t n = numel(a, T);
            buf[i] = realloc(buf[i], n * a->itemsize + 1);
            if (a->role == TRACEC_ROLE_INPUT)
                for (int64_t j = 0; j < n; j++)
                    ((float *)buf[i])[j] = (float)((j * 37) % 101) / 50.0f - 1.0f;
        }
        int rc = run_argv(buf, &T);
        if (rc) { printf("error %d\n", rc); continue; }
        for (int i = 0; i < run_num_args; i++) {
            const tracec_arg *a = &run_args[i];
            if (a->role != TRACEC_ROLE_OUTPUT) continue;
            printf("out %lld", (long long)T);
            for (int64_t j = 0; j < numel(a, T); j++) printf(" %.9g", ((float *)buf[i])[j]);
            printf("\n");
        }
    }
    return 0;
}
'''


def test_tracec_build_library_serves_every_length(tmp_path):
    """``tracec build --arg x=f32[T,2,3]`` of a bidirectional 2-layer GRU:
    the C library (no Python) runs at T = 4, 7 and 2 and equals eager."""
    import importlib.util
    import subprocess
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from aot_helpers import CC, compile_c, tracec_build
    if CC is None:
        pytest.skip("needs a C compiler")
    src = tmp_path / "model.py"
    src.write_text(AOT_USER)
    r = tracec_build(src, "run", tmp_path / "librun.so", "--arg", "x=f32[T,2,3]")
    assert r.returncode == 0, r.stderr
    exe = compile_c(AOT_DRIVER, tmp_path / "drive", tmp_path, lib="run")
    lengths = (4, 7, 2)     # (a named size is at least 2)
    r = subprocess.run([exe, *map(str, lengths)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 * len(lengths), r.stdout
    spec = importlib.util.spec_from_file_location("_aot_rnn_user", src)
    user = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(user)
    for k, t in enumerate(lengths):
        x = ((np.arange(t * 2 * 3) * 37 % 101) / np.float32(50) - 1).astype(np.float32)
        x = x.reshape(t, 2, 3)
        want = [w.detach().numpy().ravel() for w in user.run(tracec.tensor(x))]
        for line, w in zip(lines[2 * k:2 * k + 2], want):
            vals = line.split()
            assert vals[:2] == ["out", str(t)]
            np.testing.assert_allclose(np.array(vals[2:], np.float32), w, rtol=1e-4, atol=1e-5)
