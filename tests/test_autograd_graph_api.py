"""``torch.autograd.graph``'s API on tracec, each behaviour compared with
torch run on the same program (``lib`` is ``torch`` or ``tracec``): the
saved-tensor hooks (pack / unpack calls, their order and arguments, nesting,
``disable_saved_tensors_hooks``, ``save_on_cpu``, custom Functions), the
hooks on ``grad_fn`` nodes, ``register_multi_grad_hook``, gradient edges,
and their refusal inside ``tracec.compile``."""
import numpy as np
import torch

import tracec


def _run(prog):
    """``prog(lib, log)`` on torch and on tracec: the two logs."""
    logs = []
    for lib in (torch, tracec):
        log = []
        lib.manual_seed(0)
        prog(lib, log)
        logs.append([_plain(e) for e in log])
    return logs


def _plain(e):
    if isinstance(e, tuple):
        return tuple(_plain(x) for x in e)
    if hasattr(e, "detach"):
        return np.round(e.detach().numpy().astype(np.float64), 4).tolist()
    return e


def _same(prog):
    want, got = _run(prog)
    assert got == want


def _names(lib, **tensors):
    def nm(t):
        for n, v in tensors.items():
            if t is v:
                return n
        return tuple(t.shape)
    return nm


def test_pack_and_unpack_order_arguments_and_grad_mode():
    def prog(lib, log):
        a = lib.randn(2, 3, requires_grad=True)
        b = lib.randn(3, 4, requires_grad=True)
        c = lib.randn(2, 3)
        nm = _names(lib, a=a, b=b, c=c)

        def pack(t):
            log.append(("pack", nm(t), t.requires_grad, lib.is_grad_enabled(),
                        t.grad_fn.name() if t.grad_fn is not None else None))
            return ("box", t)

        def unpack(p):
            log.append(("unpack", nm(p[1]), lib.is_grad_enabled()))
            return p[1]
        with lib.autograd.graph.saved_tensors_hooks(pack, unpack):
            y = a * c                  # saves c only
            z = y.exp()                # saves its result
            w = z @ b                  # saves b, then z
            s = w.sin().sum()
            q = (a * 0.5).exp().pow(a)     # result; a, the base, result
        s.backward(retain_graph=True)
        s.backward()
        log.append(a.grad)
        try:
            s.backward()
        except RuntimeError as e:
            log.append(str(e))
        q.sum().backward()
        log.append(a.grad)
    _same(prog)


def test_nesting_disable_and_errors():
    def prog(lib, log):
        g = lib.autograd.graph
        a = lib.randn(3, requires_grad=True)

        def hooks(tag):
            return (lambda t: (log.append(("pack", tag)), t)[1],
                    lambda t: (log.append(("unpack", tag)), t)[1])
        with g.saved_tensors_hooks(*hooks("outer")):
            with g.saved_tensors_hooks(*hooks("inner")):
                q = a.sin()
            r = a.cos()
        (q.sum() + r.sum()).backward()
        with g.disable_saved_tensors_hooks("no hooks here"):
            try:
                with g.saved_tensors_hooks(*hooks("x")):
                    log.append("entered")
            except RuntimeError as e:
                log.append(("disabled", str(e)))
            try:
                with g.save_on_cpu():
                    log.append("entered")
            except RuntimeError as e:
                log.append(("disabled", str(e)))
        with g.saved_tensors_hooks(*hooks("pre")):
            try:
                with g.disable_saved_tensors_hooks("msg2"):
                    log.append("entered")
            except RuntimeError as e:
                log.append(("disable with hooks", str(e)))
        with g.saved_tensors_hooks(*hooks("after")):
            log.append("hooks again")
        with g.saved_tensors_hooks(lambda t: t, lambda p: 3):
            q = a.sin()
        try:
            q.sum().backward()
        except TypeError as e:
            log.append(("unpack", str(e)))
        c = lib.ones(3)
        with g.saved_tensors_hooks(lambda t: t if t.requires_grad else t.add_(1), lambda p: p):
            try:
                a * c
            except RuntimeError as e:
                log.append(("pack in place", str(e)))
    _same(prog)


def test_hooks_skip_the_version_check_and_custom_functions_pack_after_forward():
    def prog(lib, log):
        g = lib.autograd.graph
        x = lib.randn(3, requires_grad=True)
        with g.saved_tensors_hooks(lambda t: t, lambda p: p):
            y = x * 1
            z = y.sin()
        with lib.no_grad():
            y.mul_(2)
        z.sum().backward()            # no "modified by an inplace operation"
        log.append(x.grad)

        class F(lib.autograd.Function):
            @staticmethod
            def forward(ctx, u, v):
                log.append("forward")
                ctx.save_for_backward(u, v)
                log.append("saved")
                return u * v

            @staticmethod
            def backward(ctx, go):
                u, v = ctx.saved_tensors
                u, v = ctx.saved_tensors
                return go * v, go * u
        c = lib.randn(3)
        with g.saved_tensors_hooks(lambda t: (log.append(("pack", t.shape[0])), t)[1],
                                   lambda t: (log.append("unpack"), t)[1]):
            o = F.apply(x, c)
            log.append("applied")
        o.sum().backward()
        log.append(x.grad)
    _same(prog)


def test_save_on_cpu_and_double_backward_through_unpacked_tensors():
    def prog(lib, log):
        x = lib.randn(3, requires_grad=True)
        w = lib.randn(3, requires_grad=True)
        with lib.autograd.graph.save_on_cpu():
            y = (x.pow(3) * w).sin()
            gx, = lib.autograd.grad(y.sum(), x, create_graph=True)
        gx.sum().backward()
        log.extend([gx, x.grad, w.grad])
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda p: p):
            y = (x * w).exp()
            gx, = lib.autograd.grad(y.sum(), x, create_graph=True)
        gx.sum().backward()
        log.extend([gx, x.grad, w.grad])
    _same(prog)


def _r(t):
    return None if t is None else round(float(t.sum()), 4)


def test_node_hooks_order_replacement_removal_and_metadata():
    def prog(lib, log):
        a = lib.randn(3, requires_grad=True)
        b = lib.randn(3, requires_grad=True)
        y = a * b
        s = y.exp().sum()
        node = y.grad_fn
        log.append((node.name(), type(node).__name__, isinstance(node, lib.autograd.graph.Node)))
        log.append([(type(n).__name__, n.name(), i) for n, i in node.next_functions])
        log.append(dict(node.metadata))
        node.metadata["k"] = 1
        log.append(dict(y.grad_fn.metadata))
        h1 = node.register_prehook(lambda go: (log.append(("pre", len(go), _r(go[0]))),
                                               (go[0] * 2,))[1])
        y.register_hook(lambda g: log.append(("tensor hook", _r(g))))     # (runs first)
        h2 = node.register_hook(lambda gi, go: log.append(("post", [_r(g) for g in gi],
                                                           [_r(g) for g in go])))
        log.append((type(h1).__name__, type(h2).__name__))
        handles = (a.register_hook(lambda g: g), y.register_hook(lambda g: g),
                   a.register_post_accumulate_grad_hook(lambda t: None))
        log.append([isinstance(h, lib.utils.hooks.RemovableHandle) for h in handles])
        for h in handles:
            h.remove()
        s.backward(retain_graph=True)
        log.append(a.grad)
        h1.remove(), h2.remove(), h1.remove()
        a.grad = None
        s.backward(retain_graph=True)
        log.append(a.grad)
        h3 = node.register_hook(lambda gi, go: (gi[0] * 0, gi[1]))
        a.grad = b.grad = None
        s.backward(retain_graph=True)
        log.extend([a.grad, b.grad])
        h3.remove()
        for h in (node.register_hook(lambda gi, go: (gi[0],)),
                  node.register_prehook(lambda go: (go[0], go[0]))):
            try:
                s.backward(retain_graph=True)
            except RuntimeError as e:
                log.append(str(e))
            h.remove()
        acc = node.next_functions[0][0]
        log.append((acc.name(), acc.variable is a, acc.next_functions, acc.metadata))
        acc.register_hook(lambda gi, go: log.append(("acc post", gi, _r(go[0]))))
        acc.register_prehook(lambda go: log.append(("acc pre", _r(go[0]))))
        a.register_post_accumulate_grad_hook(lambda t: log.append(("post acc", _r(t.grad))))
        s.backward(retain_graph=True)
    _same(prog)


def test_multi_grad_hook_and_gradient_edges():
    def prog(lib, log):
        g = lib.autograd.graph
        a, b, c = (lib.randn(3, requires_grad=True) for _ in range(3))
        h = g.register_multi_grad_hook((a, b, c), lambda gs: log.append([_r(x) for x in gs]))
        (a * b).sum().backward()
        (a * 2).sum().backward()
        (a * b * c).sum().backward(inputs=(a,))
        h.remove()
        (a * b).sum().backward()
        log.append(type(h).__name__)
        h = g.register_multi_grad_hook((a, b, c), lambda x: log.append(("any", _r(x))), mode="any")
        (a * b + c).sum().backward()
        h.remove()
        try:
            g.register_multi_grad_hook((a, b), print, mode="bad")
        except ValueError as e:
            log.append(str(e))
        y = a * b
        s = y.exp().sum()
        e = g.get_gradient_edge(y)
        log.append((type(e).__name__, e.node is y.grad_fn, e.output_nr, isinstance(e, tuple)))
        ea = g.get_gradient_edge(a)
        log.append((ea.node.name(), ea.output_nr))
        log.append(lib.autograd.grad(s, e, retain_graph=True))
        log.append(lib.autograd.grad(s, (e, ea, b), retain_graph=True))
        try:
            g.get_gradient_edge(lib.randn(2))
        except RuntimeError as err:
            log.append(str(err))
        z = y.exp()
        s = z.sum()
        s.backward(inputs=[g.get_gradient_edge(y)], retain_graph=True)    # (accumulates nothing)
        log.append(a.grad)
        log.append(lib.autograd.grad(g.get_gradient_edge(z), a, grad_outputs=lib.ones(3),
                                     retain_graph=True))
        log.append(lib.autograd.grad([g.get_gradient_edge(z)], [g.get_gradient_edge(y)],
                                     grad_outputs=[lib.ones(3)], retain_graph=True))
        w = lib.randn(3, requires_grad=True)
        log.append(lib.autograd.grad(s, [g.get_gradient_edge(w)], allow_unused=True,
                                     retain_graph=True))
        try:
            lib.autograd.grad(s, [g.get_gradient_edge(w)], retain_graph=True)
        except RuntimeError as err:
            log.append(str(err))
        log.append(lib._C._current_graph_task_id())
    _same(prog)


def test_allow_mutation_on_saved_tensors():
    def prog(lib, log):
        g = lib.autograd.graph
        with g.allow_mutation_on_saved_tensors() as ctx:
            a = lib.ones(2, 3, requires_grad=True)
            b = a.clone()
            out = (b ** 2).sum()
            b.sin_()
            out.backward()
            log.extend([a.grad, type(ctx).__name__])
            c = lib.randn(3, requires_grad=True)
            d = c * 1
            e = (d * d).sum()
            with lib.no_grad():
                d.mul_(3)
            e.backward()
            log.extend([c.grad, d])
            try:
                with g.allow_mutation_on_saved_tensors():
                    pass
            except RuntimeError as err:
                log.append(str(err))
        with g.allow_mutation_on_saved_tensors():
            out = (lib.ones(2, requires_grad=True).exp() * 2).sum()
        try:
            out.backward()
        except AssertionError as err:
            log.append(str(err))
    _same(prog)


def test_checkpoint_without_reentrant_recomputes_as_torch():
    """Recomputation once per backward, stopped after the last saved tensor
    (the ``after`` marks are not repeated), the forward's RNG restored,
    ``context_fn``, nesting, ``checkpoint_sequential``, the determinism
    check's error, a user's hooks seeing only the checkpoint's inputs, and
    BatchNorm's running statistics updated by the recomputation."""
    import contextlib

    def prog(lib, log):
        cp = lib.utils.checkpoint
        nn = lib.nn
        lin = nn.Linear(4, 4)

        def f(x):
            log.append(("start", lib.is_grad_enabled()))
            y = nn.functional.dropout(lin(x).relu(), 0.5, training=True)
            z = y.sin()
            log.append("after")
            return z * 2
        x = lib.randn(2, 4, requires_grad=True)
        out = cp.checkpoint(f, x, use_reentrant=False)
        log.append(out.grad_fn.name())
        out.sum().backward()
        log.append(x.grad)

        @contextlib.contextmanager
        def tag(name):
            log.append(("enter", name))
            yield
            log.append(("exit", name))
        out = cp.checkpoint(f, x, use_reentrant=False, context_fn=lambda: (tag("fwd"), tag("rec")))
        out.sum().backward()
        s = cp.checkpoint(f, x, use_reentrant=False).sum()
        s.backward(retain_graph=True)
        s.backward()
        try:
            cp.checkpoint(f, x, use_reentrant=True, context_fn=lambda: (tag("a"), tag("b")))
        except ValueError as e:
            log.append(str(e))
        with lib.autograd.graph.saved_tensors_hooks(lambda t: (log.append("pack"), t)[1],
                                                    lambda t: (log.append("unpack"), t)[1]):
            out = cp.checkpoint(f, x, use_reentrant=False)
        out.sum().backward()
        n = [0]

        def g(x):
            n[0] += 1
            return (x[: 2 if n[0] == 1 else 1] * 2).sin()
        try:
            cp.checkpoint(g, x, use_reentrant=False).sum().backward()
        except cp.CheckpointError as e:
            log.append(str(e).replace("tracec.", "torch.").split("\n")[:4])

        def inner(x):
            log.append("inner")
            return x.sin() * 2

        def outer(x):
            log.append("outer")
            return cp.checkpoint(inner, x.cos(), use_reentrant=False).exp()
        x.grad = None
        cp.checkpoint(outer, x, use_reentrant=False).sum().backward()
        log.append(x.grad)
        seq = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 4), nn.Tanh())
        out = cp.checkpoint_sequential(seq, 2, x, use_reentrant=False)
        log.append(out.grad_fn.name())
        (out ** 2).sum().backward()
        log.extend([seq[1].num_batches_tracked, seq[1].running_mean, seq[0].weight.grad])
    _same(prog)


def test_checkpoint_reentrant_as_torch():
    import warnings

    def prog(lib, log):
        cp = lib.utils.checkpoint
        lin = lib.nn.Linear(4, 4)
        lin.weight.register_hook(lambda g: log.append(("w hook", _r(g))))

        def f(x):
            log.append(("f", lib.is_grad_enabled()))
            return lib.nn.functional.dropout(lin(x), 0.3, training=True).tanh()
        x = lib.randn(2, 4, requires_grad=True)
        out = cp.checkpoint(f, x, use_reentrant=True)
        log.append((out.grad_fn.name(), out.requires_grad))
        (out * x).sum().backward()
        log.extend([x.grad, lin.weight.grad])
        try:
            lib.autograd.grad(cp.checkpoint(f, x, use_reentrant=True).sum(), x)
        except RuntimeError as e:
            log.append(str(e))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            log.append(cp.checkpoint(f, lib.randn(2, 4), use_reentrant=True).requires_grad)
            with lib.no_grad():
                log.append(cp.checkpoint(f, x, use_reentrant=True).requires_grad)
            log.append([str(i.message) for i in w])
    _same(prog)


def test_saved_tensors_on_grad_fn():
    def prog(lib, log):
        a, b = lib.randn(3, requires_grad=True), lib.randn(3, requires_grad=True)
        y, w = a * b, lib.where(a > 0, a, b)
        z = y.exp()
        for n in (y.grad_fn, z.grad_fn, w.grad_fn, a.sin().grad_fn):
            log.append(sorted(x for x in dir(n) if x.startswith(("_saved_", "_raw_saved_"))))
        log.append((y.grad_fn._saved_self is a, y.grad_fn._saved_other is b,
                    z.grad_fn._saved_result is z, z.grad_fn._saved_result))
        r = y.grad_fn._raw_saved_self
        r.register_hooks(lambda t: (log.append(("pack", t.shape[0])), t)[1],
                         lambda t: (log.append("unpack"), t)[1])
        try:
            r.register_hooks(lambda t: t, lambda t: t)
        except RuntimeError as e:
            log.append(str(e))
        log.append(y.grad_fn._saved_self is a)
        z.sum().backward()
        try:
            z.grad_fn._saved_result
        except RuntimeError as e:
            log.append(str(e))
    _same(prog)


def test_retain_grad_after_tensor_hooks_node_classes_and_multi_output_edges():
    """retain_grad keeps the gradient after every tensor hook (whatever the
    order they were added in: a wrong .grad before); the hooks of a
    multi-output Function's outputs see their own output's gradient (they
    crashed on the node's gradient bundle before); every grad_fn is a
    torch.autograd.graph.Node, and a multi-output Function's second output
    has output_nr 1 (autograd.grad at its edge gave the first output's
    gradient before)."""
    def prog(lib, log):
        Node = lib.autograd.graph.Node
        x = lib.randn(3, requires_grad=True)
        for first in ("retain", "hook"):
            y = x * 2
            for step in ((first, "hook") if first == "retain" else (first, "retain")):
                y.retain_grad() if step == "retain" else y.register_hook(lambda g: g * 10)
            y.sum().backward()
            log.append(y.grad)

        class G(lib.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                return a * 2, a * 3

            @staticmethod
            def backward(ctx, g1, g2):
                return g1 * 2 + g2 * 3
        p, q = G.apply(x)
        p.register_hook(lambda g: log.append(("p", _r(g))))        # (each its own output's)
        q.register_hook(lambda g: (log.append(("q", _r(g))), g * 10)[1])
        q.retain_grad()
        (p.sum() + q.sum() * 2).backward()
        log.extend([x.grad, q.grad])
        p, q = G.apply(x)
        acc = (x * 1).grad_fn.next_functions[0][0]
        log.append((isinstance(acc, Node), isinstance(p.grad_fn, Node),
                    isinstance(lib.randn(2), Node), p.output_nr, q.output_nr))
        p.grad_fn.register_prehook(lambda go: log.append([_r(g) for g in go]))
        p.grad_fn.register_hook(lambda gi, go: log.append((len(gi), len(go))))
        e = lib.autograd.graph.get_gradient_edge(q)
        log.append(lib.autograd.grad(p.sum() + q.sum() * 2, e, retain_graph=True))
        h = lib.autograd.graph.register_multi_grad_hook((x, q), lambda gs: log.append(len(gs)))
        try:
            lib.autograd.grad(q.sum(), x)
        except RuntimeError as err:
            log.append(str(err))
        h.remove()
    _same(prog)


def test_compiled_functions_refuse_or_honour_the_hooks():
    """Inside a traced call, a pack under saved_tensors_hooks and a hook
    registered on a grad_fn are refused at the user's line (compiled code
    would not call them), or with fallback="eager" the call runs eagerly;
    a compiled function called under hooks runs eagerly, every pack seen."""
    import re
    w = tracec.randn(3, requires_grad=True)
    g = tracec.autograd.graph

    def packs(fn, *args):
        n = [0]
        with g.saved_tensors_hooks(lambda t: (n.__setitem__(0, n[0] + 1), t)[1], lambda t: t):
            out = fn(*args)
        return out, n[0]

    @tracec.compile
    def inner_hooks(x):
        return packs(lambda: (x * w).sin().sum())[0]     # the line refused

    @tracec.compile
    def node_hook(x):
        y = x * w
        y.grad_fn.register_hook(lambda gi, go: None)
        return y.sum()
    for fn, what in ((inner_hooks, "saved_tensors_hooks"), (node_hook, "register_hook")):
        try:
            fn(tracec.randn(3))
            raise AssertionError("not refused")
        except tracec.TraceError as e:
            assert re.match(r".*test_autograd_graph_api.py:\d+: .*" + what, str(e)), str(e)
    lenient = tracec.compile(lambda x: packs(lambda: (x * w).sin().sum()), fallback="eager")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert lenient(tracec.randn(3))[1] == 2

    @tracec.compile
    def f(x):
        return (x * w).sin().sum()
    x = tracec.randn(3)
    f(x).backward()
    loss, n = packs(f, x)
    assert n == 2
    w.grad = None
    loss.backward()
    want = (x * tracec.cos(x * w)).detach()
    np.testing.assert_allclose(w.grad.numpy(), want.numpy(), rtol=1e-5)


def test_saved_tensor_hooks_are_per_thread():
    import threading

    def prog(lib, log):
        g = lib.autograd.graph
        x = lib.randn(3, requires_grad=True)

        def work():
            x.sin()                     # (the main thread's hooks do not pack here)
            with g.saved_tensors_hooks(lambda t: (log.append("pack thread"), t)[1], lambda t: t):
                x.cos()
        with g.saved_tensors_hooks(lambda t: (log.append("pack main"), t)[1], lambda t: t):
            t = threading.Thread(target=work)
            t.start(), t.join()
            x.exp()
        with g.disable_saved_tensors_hooks("off"):
            t = threading.Thread(target=work)
            t.start(), t.join()
    _same(prog)
