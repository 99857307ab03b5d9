"""Whole training steps (forward + backward + optimizer step) of three
public PyTorch programs, written once against ``torch`` and run with
``torch`` = tracec or PyTorch: tracec compiled (``tracec.compile`` of the
whole step, cpu backend, after warm-up), tracec with ``tracec.compile(model)``
only (the rest of the step eager, as most programs use ``torch.compile``),
PyTorch eager, and ``torch.compile`` of the same step function (when it works
here; otherwise the reason).

- ``lstm``: examples/word_language_model at its defaults (LSTM, embedding and
  hidden 200, 2 layers, bptt 35, batch 20, vocab 10000 random tokens, dropout
  0.2, NLLLoss over log_softmax, clip_grad_norm_ 0.25, SGD by hand with lr 20
  as the example does, the hidden state carried from step to step and
  repackaged);
- ``gpt``: a nanoGPT-style 4-layer GPT (embedding 128, 4 heads, context 64,
  batch 16, vocab 65, dropout 0.1, causal mask as a ``tril`` buffer with
  ``masked_fill``, GELU MLP, tied embedding, AdamW lr 1e-3);
- ``mnist``: examples/mnist's CNN (two 3x3 convs, max_pool2d, dropout 0.25
  and 0.5, fc 9216-128-10, log_softmax + nll_loss, Adadelta lr 1.0), batch 64.

As in ``cpu_mlp_step.py``: every measurement runs in a fresh child process,
the tracec and PyTorch children alternate for ``--rounds`` rounds and the
medians are compared; one core is affinity to one CPU plus
``TRACEC_NUM_THREADS=OMP_NUM_THREADS=...=1``.  Ratios > 1: tracec is faster
(the project's goal is >= 1.5x PyTorch eager on each).  torch.compile is
compiled once per child (``--tc-rounds`` children per configuration, default
1, each limited to ``--tc-timeout`` s).  Last, tracec's cold compile per
model (a fresh process and an empty cache, so each compile that misses is
what ``TRACEC_NO_CACHE=1`` gives, while a second trace with the same IR
loads the first's code, as for a user): the backend and passes time of the
compiles, and the calls' wall time until the steady state.

    python benchmarks/models.py [--models lstm,gpt,mnist] [--cores all|1|both]
        [--rounds 3] [--time 1.0] [--no-torch-compile] [--no-cold] [--cpu-time]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

# Child processes write and reuse bytecode, as on a user's machine: with
# PYTHONDONTWRITEBYTECODE set, each one compiled tracec from source (~0.5 s).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ("lstm", "gpt", "mnist")


def build(torch, name: str, seed: int = 0):
    """(train_step, call) for model `name` written against the module `torch`
    (tracec or PyTorch): `call(step)` runs `step` (train_step, compiled or not)
    on the model's fixed batch and returns the loss."""
    nn = torch.nn
    F = torch.nn.functional
    torch.manual_seed(seed)
    if name == "lstm":
        class RNNModel(nn.Module):
            def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.5):
                super().__init__()
                self.ntoken = ntoken
                self.drop = nn.Dropout(dropout)
                self.encoder = nn.Embedding(ntoken, ninp)
                self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
                self.decoder = nn.Linear(nhid, ntoken)
                self.nhid, self.nlayers = nhid, nlayers
                initrange = 0.1
                nn.init.uniform_(self.encoder.weight, -initrange, initrange)
                nn.init.zeros_(self.decoder.bias)
                nn.init.uniform_(self.decoder.weight, -initrange, initrange)
            def forward(self, input, hidden):
                emb = self.drop(self.encoder(input))
                output, hidden = self.rnn(emb, hidden)
                output = self.drop(output)
                decoded = self.decoder(output)
                decoded = decoded.view(-1, self.ntoken)
                return F.log_softmax(decoded, dim=1), hidden
            def init_hidden(self, bsz):
                weight = next(self.parameters())
                return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                        weight.new_zeros(self.nlayers, bsz, self.nhid))
        ntokens, bptt, bsz = 10000, 35, 20
        model = RNNModel(ntokens, 200, 200, 2, 0.2)
        model.train()
        criterion = nn.NLLLoss()
        lr, clip = 20.0, 0.25
        data = torch.randint(0, ntokens, (bptt, bsz))
        targets = torch.randint(0, ntokens, (bptt * bsz,))
        state = {"hidden": model.init_hidden(bsz)}
        def repackage_hidden(h):
            if isinstance(h, torch.Tensor):
                return h.detach()
            return tuple(repackage_hidden(v) for v in h)
        def train_step(data, targets, hidden):
            model.zero_grad()
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            return loss, hidden
        def call(step):
            loss, state["hidden"] = step(data, targets, state["hidden"])
            return loss
        return train_step, call
    if name == "gpt":
        n_layer, n_head, n_embd, block_size, vocab, batch, dropout = 4, 4, 128, 64, 65, 16, 0.1
        class CausalSelfAttention(nn.Module):
            def __init__(self):
                super().__init__()
                self.c_attn = nn.Linear(n_embd, 3 * n_embd)
                self.c_proj = nn.Linear(n_embd, n_embd)
                self.attn_dropout = nn.Dropout(dropout)
                self.resid_dropout = nn.Dropout(dropout)
                self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                                     .view(1, 1, block_size, block_size))
            def forward(self, x):
                B, T, C = x.size()
                q, k, v = self.c_attn(x).split(n_embd, dim=2)
                k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
                q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
                v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
                att = F.softmax(att, dim=-1)
                att = self.attn_dropout(att)
                y = att @ v
                y = y.transpose(1, 2).contiguous().view(B, T, C)
                return self.resid_dropout(self.c_proj(y))
        class MLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.c_fc = nn.Linear(n_embd, 4 * n_embd)
                self.gelu = nn.GELU()
                self.c_proj = nn.Linear(4 * n_embd, n_embd)
                self.dropout = nn.Dropout(dropout)
            def forward(self, x):
                return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln_1 = nn.LayerNorm(n_embd)
                self.attn = CausalSelfAttention()
                self.ln_2 = nn.LayerNorm(n_embd)
                self.mlp = MLP()
            def forward(self, x):
                x = x + self.attn(self.ln_1(x))
                x = x + self.mlp(self.ln_2(x))
                return x
        class GPT(nn.Module):
            def __init__(self):
                super().__init__()
                self.transformer = nn.ModuleDict(dict(
                    wte=nn.Embedding(vocab, n_embd),
                    wpe=nn.Embedding(block_size, n_embd),
                    drop=nn.Dropout(dropout),
                    h=nn.ModuleList([Block() for _ in range(n_layer)]),
                    ln_f=nn.LayerNorm(n_embd)))
                self.lm_head = nn.Linear(n_embd, vocab, bias=False)
                self.transformer.wte.weight = self.lm_head.weight
            def forward(self, idx, targets):
                b, t = idx.size()
                pos = torch.arange(0, t, dtype=torch.long)
                x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
                for block in self.transformer.h:
                    x = block(x)
                x = self.transformer.ln_f(x)
                logits = self.lm_head(x)
                return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        model = GPT()
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randint(0, vocab, (batch, block_size))
        y = torch.randint(0, vocab, (batch, block_size))
        def train_step(x, y):
            loss = model(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            return loss
        return train_step, lambda step: step(x, y)
    if name == "mnist":
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = nn.Conv2d(1, 32, 3, 1)
                self.conv2 = nn.Conv2d(32, 64, 3, 1)
                self.dropout1 = nn.Dropout(0.25)
                self.dropout2 = nn.Dropout(0.5)
                self.fc1 = nn.Linear(9216, 128)
                self.fc2 = nn.Linear(128, 10)
            def forward(self, x):
                x = self.conv1(x)
                x = F.relu(x)
                x = self.conv2(x)
                x = F.relu(x)
                x = F.max_pool2d(x, 2)
                x = self.dropout1(x)
                x = torch.flatten(x, 1)
                x = self.fc1(x)
                x = F.relu(x)
                x = self.dropout2(x)
                x = self.fc2(x)
                return F.log_softmax(x, dim=1)
        model = Net()
        model.train()
        optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
        data = torch.randn(64, 1, 28, 28)
        target = torch.randint(0, 10, (64,))
        def train_step(data, target):
            optimizer.zero_grad()
            output = model(data)
            loss = F.nll_loss(output, target)
            loss.backward()
            optimizer.step()
            return loss
        return train_step, lambda step: step(data, target)


def _timeit(fn, min_time, clock=time.perf_counter):
    for _ in range(3):
        fn()
    best = []
    for _ in range(3):
        n, t0 = 0, clock()
        while True:
            fn()
            n += 1
            el = clock() - t0
            if el >= min_time / 3 and n >= 3:
                break
        best.append(el / n * 1e3)
    return min(best)


def _run_child(cfg: dict) -> dict:
    """In the child: one measurement of cfg, as a dict."""
    if cfg["one_core"]:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    # CPU time (all the process's threads) instead of wall time: steadier on
    # a shared, loaded machine, but it counts threads' spinning, so it is
    # meant for one core
    clock = time.process_time if cfg.get("cpu_time") else time.perf_counter
    out = {}
    if cfg["what"] == "tracec-model":
        # torch.compile's most common use: model = compile(model), the rest
        # of the step (loss, backward, optimizer) eager
        import tracec
        fn, call = build(tracec, cfg["model"])
        cell = fn.__closure__[fn.__code__.co_freevars.index("model")]
        cell.cell_contents = tracec.compile(cell.cell_contents)
        for _ in range(6):
            call(fn)
        out["step_ms"] = _timeit(lambda: call(fn).item(), cfg["time"], clock)
        return out
    if cfg["what"] in ("tracec", "cold"):
        import tracec
        fn, call = build(tracec, cfg["model"])
        step = tracec.compile(fn, backend="cpu")
        if cfg["what"] == "cold":
            # Until the steady state: a call that neither traced nor compiled.
            entries, walls = {}, []
            t_start = time.perf_counter()
            while True:
                traces, last = step.cache_info().traces, step._last
                exe = last.executable if last is not None else None
                t0 = time.perf_counter()
                call(step).item()
                walls.append(time.perf_counter() - t0)
                entries[id(step._last)] = step._last
                if step.cache_info().traces == traces and step._last is last and \
                        exe is not None:
                    break
            steady = walls[-1]
            # With an empty cache a compile is a miss; a later trace whose IR
            # is the same loads the first's code ("hit").
            misses = [e for e in entries.values() if e.timings.get("cache") == "miss"]
            out["traces"] = len(entries)
            out["misses"] = len(misses)
            out["backend_s"] = sum(e.timings["backend_s"] for e in misses)
            out["passes_s"] = sum(e.timings.get("passes_s", 0.0) for e in misses)
            out["trace_s"] = sum(e.timings.get("trace_s", 0.0) for e in entries.values())
            out["ops"] = max(e.timings.get("ops", 0) for e in entries.values())
            out["to_steady_s"] = time.perf_counter() - t_start - steady
            out["calls"] = len(walls)
        else:
            for _ in range(6):  # traces and compiles (or loads from the cache)
                call(step)
            out["traces"] = step.cache_info().traces
            out["step_ms"] = _timeit(lambda: call(step).item(), cfg["time"], clock)
            if step.cache_info().traces != out["traces"]:
                out["retraced"] = step.cache_info().reasons
    else:
        import torch
        if cfg["one_core"]:
            torch.set_num_threads(1)
        fn, call = build(torch, cfg["model"])
        if cfg["what"] == "torch.compile":
            t0 = time.perf_counter()
            step = torch.compile(fn)
            try:
                for _ in range(3):
                    call(step).item()
            except Exception as e:  # noqa: BLE001  (reported, not hidden)
                out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
                return out
            out["compile_s"] = time.perf_counter() - t0
            fn = step
        out["step_ms"] = _timeit(lambda: call(fn).item(), cfg["time"], clock)
    return out


def _child(cfg: dict, one_core: bool, timeout: float = 600) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    if one_core:
        env.update(TRACEC_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   MKL_NUM_THREADS="1")
    if cfg["what"] == "cold":
        # A new, empty cache: nothing compiled before (what TRACEC_NO_CACHE=1
        # gives too), but a later trace with the same IR loads the first's
        # code, as it would for a user.
        env["TRACEC_CACHE_DIR"] = tempfile.mkdtemp(prefix="tracec-cold-")
    try:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                            json.dumps(dict(cfg, one_core=one_core))],
                           capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"took over {timeout:.0f} s (compile + timing), stopped"}
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": "child failed: " + (r.stderr.strip().splitlines() or ["?"])[-1][:300]}


def _med(rs, k):
    vals = [r[k] for r in rs if k in r]
    return statistics.median(vals) if vals else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--cores", choices=["all", "1", "both"], default="both",
                    help="run the steps on all cores, on one, or both (default)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--time", type=float, default=1.0, help="seconds per timing")
    ap.add_argument("--tc-rounds", type=int, default=1)
    ap.add_argument("--tc-timeout", type=float, default=240)
    ap.add_argument("--no-torch-compile", action="store_true")
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--cpu-time", action="store_true",
                    help="time the steps in CPU time (process_time) instead of wall time: "
                         "steadier on a loaded machine, meant with --cores 1")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(_run_child(json.loads(args.child))), flush=True)
        return
    models = args.models.split(",")
    modes = {"all": [False], "1": [True], "both": [False, True]}[args.cores]
    print(f"{'cores':<6}{'model':<7}{'tracec':>9}{'c(model)':>9}{'torch':>9}{'t.compile':>10}"
          f"{'torch/tracec':>14}{'torch/c(model)':>16}{'t.compile/tracec':>18}   (ms per "
          f"step{' of CPU time' if args.cpu_time else ''}, medians of {args.rounds} "
          f"rounds; c(model): tracec.compile(model), the rest of the step eager)", flush=True)
    notes = []
    for one_core in modes:
        for model in models:
            cfg = {"model": model, "time": args.time, "cpu_time": args.cpu_time}
            ours, theirs, tc, cmod = [], [], [], []
            for _ in range(args.rounds):
                ours.append(_child(dict(cfg, what="tracec"), one_core))
                cmod.append(_child(dict(cfg, what="tracec-model"), one_core))
                theirs.append(_child(dict(cfg, what="torch"), one_core))
            if not args.no_torch_compile:
                for _ in range(args.tc_rounds):
                    tc.append(_child(dict(cfg, what="torch.compile"), one_core,
                                     timeout=args.tc_timeout))
            cores = "1" if one_core else "all"
            for who, rs in (("tracec", ours), ("torch", theirs), ("torch.compile", tc),
                            ("tracec compile(model)", cmod)):
                for r in rs:
                    if "error" in r:
                        notes.append(f"{cores} core(s), {model}, {who}: {r['error']}")
                    if "retraced" in r:
                        notes.append(f"{cores} core(s), {model}, {who} retraced while timed: "
                                     f"{r['retraced']}")
            a, b, c = _med(ours, "step_ms"), _med(theirs, "step_ms"), _med(tc, "step_ms")
            m = _med(cmod, "step_ms")
            tcs = _med(tc, "compile_s")
            if tc and not math.isnan(tcs):
                notes.append(f"{cores} core(s), {model}: torch.compile's first 3 calls "
                             f"(compiling) took {tcs:.1f} s")
            print(f"{cores:<6}{model:<7}{a:>9.2f}{m:>9.2f}{b:>9.2f}{c:>10.2f}{b / a:>13.2f}x"
                  f"{b / m:>15.2f}x{c / a:>17.2f}x", flush=True)
    for n in notes:
        print("  " + n)
    if args.no_cold:
        return
    print("tracec cold compile (fresh process and empty cache, all cores):")
    for model in models:
        r = _child({"model": model, "what": "cold", "time": 0}, False)
        if "error" in r:
            print(f"  {model}: {r['error']}")
            continue
        print(f"  {model:<6} {r['misses']} compile(s) of {r['ops']} ops: backend "
              f"{r['backend_s']:.2f} s + passes {r['passes_s']:.2f} s; {r['traces']} traces "
              f"(eager runs while recording: {r['trace_s']:.2f} s); {r['to_steady_s']:.2f} s "
              f"of calls before the steady state ({r['calls'] - 1} calls)", flush=True)

if __name__ == "__main__":
    main()
