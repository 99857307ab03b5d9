"""A backward for a compiled forward: ``tracec.compile(model)`` and then
``loss.backward()`` outside it.

The compiled call returns values without a tape.  When its results that
require grad are used in a backward, the gradient comes from a second
compiled function, built from the same trace: the recorded forward, then a
``tracec.backward`` of that result seeded with the incoming cotangent (of
several results, ``(logits, loss)`` of a nanoGPT model: of the scalar
``sum_i sum(result_i * cotangent_i)``, whose gradient with respect to each
result is its cotangent), returning the gradients of the call's
differentiable inputs (tensor arguments and parameters that require grad).
One node of the eager graph stands for the call; with several results each
hands its gradient to that node's slot (as a multi-output
``autograd.Function``), results without one get zeros.  The autodiff pass expands it
like a training step's backward; the forward is recomputed there (nothing
is saved between the two calls but references to the inputs).

**Joint calls.**  Recomputing the forward costs about a third of a
training step.  When one result is a float scalar (a loss) and a backward
seeded only at that loss followed an earlier call (``loss.backward()`` after
``model(x, y)``, nanoGPT's compiled model), later calls run a *joint*
function instead of the forward: the traced forward, its state writes
included, and the gradients of the loss with a seed of 1, computed once.
The backward then scales them by the loss's cotangent (gradients are linear
in it: ``(loss / 4).backward()``).  A backward seeded otherwise (another
result's cotangent) runs the recomputing backward as before, and joint
calls stop; so do they after two calls whose results no backward read.

**Saved residuals.**  Other calls (results with any cotangent: logits whose
loss is computed outside, an RNN's outputs) run a *partitioned* pair: the
forward and the backward built together (``_partition``), split where
values start to depend on the cotangents.
The forward part returns, besides the results, the values the backward part
reads (the residuals eager autograd would save: activations, dropout
masks); the backward part takes them with the cotangents, so nothing is
recomputed.  A size-generic forward's pair is size-generic (past its
versions, the recomputing backward).  Calls run the plain forward again
after two calls whose residuals a later backward did not read, or nine
calls with no backward.

Invariants (what makes the gradients equal eager ones):
  * the backward reads the inputs as they were at the forward call: tensors
    the forward wrote in place (the RNG state behind dropout, batch-norm
    running statistics) are read from copies taken before the forward; any
    other input (argument, parameter) modified in place since then raises,
    naming it, as eager autograd does for a saved tensor;
  * the backward writes nothing but its gradients: the forward's state
    writes are not repeated (they are dead code in the backward function);
  * gradients reach the inputs through the eager engine (a node whose edges
    are the inputs' own), so accumulation into ``.grad``, hooks and
    non-leaf arguments behave as for any other op.
"""
from __future__ import annotations

import time

import numpy as np
from xdsl.dialects import func
from xdsl.ir import BlockArgument

from tracec import dtypes as dt
from tracec import graph, ir, ops, size_generic
from tracec.autograd import _FunctionOutput
from tracec.passes.autodiff import IRValue, building
from tracec.passes.pipeline import AUTODIFF, OPTIMIZE, run_passes
from tracec.ops import PRIMITIVES
from tracec.pytree import resolve
from tracec.tensor import Tensor

__all__ = ["BackwardPlan", "attach", "save_inputs"]


def ret_type(entry, k: int):
    """The type of the traced function's ``k``-th returned value."""
    fn = next(op for op in entry.stages["trace"].walk() if isinstance(op, func.FuncOp))
    return fn.body.block.last_op.operands[k].type


class BackwardPlan:
    """How one compiled forward (an ``Entry``) gets its backward."""

    #: Size-generic versions of one backward at most (``run``).
    max_versions = size_generic.MAX_GENERIC

    def __init__(self, entry, out_indices: tuple, compile_fn, verify: bool = False):
        """``out_indices``: the results that require grad.  ``compile_fn(module,
        optimize)``: the executable for ``module`` after ``optimize()`` has
        run the passes on it (the compiler's disk cache, keyed by the module
        before them)."""
        trace = entry.trace
        self.entry = entry
        self.out_indices = tuple(out_indices)
        self.compile_fn = compile_fn
        self.verify = verify
        # Differentiable inputs: float tensors that require grad (arguments are
        # keyed by requires_grad, state by the entry's requires_grad guards).
        self.diff = []
        for j, spec in enumerate(trace.inputs):
            if spec.kind == "state" and spec.source.requires_grad and \
                    spec.dtype.is_floating_point:
                self.diff.append(j)
        self._arg_diff = [j for j, spec in enumerate(trace.inputs) if spec.kind == "arg"
                          and spec.dtype.is_floating_point]
        # Inputs the forward writes in place: the backward reads their old value.
        written = {id(s.target) for s in trace.outputs if s.kind == "write"}
        self.copied = [j for j, spec in enumerate(trace.inputs)
                       if spec.kind == "state" and id(spec.source) in written]
        self._exe: dict = {}
        #: Joint calls (module docstring): the index in ``out_indices`` of
        #: the one float scalar result, or None (never joint); whether a
        #: backward seeded at it alone was seen; whether joint calls are off;
        #: calls in a row whose joint gradients no backward read.
        scalars = [i for i, k in enumerate(self.out_indices)
                   if not ir.shape_of(ret_type(entry, k)) and
                   ir.dtype_of(ret_type(entry, k)).is_floating_point]
        self.joint_at = scalars[0] if len(scalars) == 1 else None
        self.joint_seen = False
        self.joint_off = False
        self.joint_unread = 0
        self.last_joint = None      # the _Saved of the last joint call
        self._joint: dict = {}
        #: Partitioned calls (module docstring): whether they are off, and
        #: {wrt: (forward, backward maker, residual count[, module])}.
        self.split_off = False
        self.split_unread = 0
        self.split_calls = 0        # partitioned calls since the last backward
        self.backwards = 0          # backwards run (CompiledCall.backward)
        self.last_split = None
        self._split: dict = {}
        #: ``generic(module, optimize, env)``: the size-generic executable of
        #: a symbolic backward module for the sizes ``env`` (set by
        #: ``size_generic.maker`` when the forward is size-generic); None:
        #: the trace is static.
        self.generic = None
        self._static: dict = {}
        self._sources = {}
        fn = next(op for op in entry.stages["trace"].walk() if isinstance(op, func.FuncOp))
        ret = fn.body.block.last_op
        self.out_dtypes = [ir.dtype_of(ret.operands[k].type) for k in self.out_indices]
        # Which inputs each result depends on: an input that no result given a
        # gradient depends on gets None, as in eager autograd (not zeros).
        deps = {a: frozenset((j,)) for j, a in enumerate(fn.body.block.args)}
        for op in fn.body.block.ops:
            seen = frozenset().union(*(deps.get(o, frozenset()) for o in op.operands))
            for r in op.results:
                deps[r] = seen
        self.reach = [deps.get(ret.operands[k], frozenset()) for k in self.out_indices]
        from tracec.symbolic import size_sources
        self._sources, _ = size_sources([ir.shape_of(a.type) for a in fn.body.block.args])

    def differentiable(self, args, kwargs) -> list[int]:
        """Input indices to differentiate for this call (arguments count when
        they require grad)."""
        out = list(self.diff)
        for j in self._arg_diff:
            src = self.entry.trace.inputs[j].source
            a = resolve(src, args, kwargs)
            if a.requires_grad:
                out.append(j)
        return sorted(out)

    def executable(self, wrt: tuple):
        """The compiled backward for these differentiable inputs (built once
        per set; a call's arguments either require grad or do not)."""
        exe = self._exe.get(wrt)
        if exe is None:
            t0 = time.perf_counter()
            module, optimize = self._module(wrt)
            exe = self._exe[wrt] = self.compile_fn(module, optimize)
            self.entry.timings["backward_compile_s"] = time.perf_counter() - t0
        return exe

    def run(self, wrt: tuple, arrays: list) -> list:
        """The gradients for the inputs ``wrt`` from the saved ``arrays`` and
        the cotangents.  A symbolic forward (``make_generic``) gets a
        size-generic backward: a version compiled under the sizes of the
        call that needs it, serving every later call whose sizes pass its
        guards (``max_versions`` at most), then static
        code for each further size."""
        if self.generic is None:
            return self.executable(wrt)(arrays)
        versions = self._exe.setdefault(wrt, [])
        env = self._sizes(arrays)
        for exe in versions:
            if exe.failed_guard(env) is None:
                return exe(arrays)
        if len(versions) < self.max_versions:
            t0 = time.perf_counter()
            module, optimize = self._module(wrt)
            exe = self.generic(module, optimize, env)
            self.entry.timings["backward_compile_s"] = time.perf_counter() - t0
            if exe.failed_guard(env) is None:
                versions.append(exe)
                return exe(arrays)
        key = (wrt, tuple(sorted(env.items())))
        exe = self._static.get(key)
        if exe is None:
            module, _ = self._module(wrt)
            module = ir.specialize(module, env)

            def optimize():
                run_passes(AUTODIFF, module, verify=self.verify)
                run_passes(OPTIMIZE, module, verify=self.verify)
                return module
            exe = self._static[key] = self.compile_fn(module, optimize)
        return exe(arrays)

    def joint(self, args, kwargs, arrays):
        """``(executable, wrt)`` of a joint call for this call (its input
        ``arrays``), or None (module docstring).  A size-generic forward's
        is size-generic too, ``max_versions`` versions at most."""
        if self.joint_at is None or not self.joint_seen or self.joint_off:
            return None
        last, self.last_joint = self.last_joint, None
        if last is not None:
            # (the last joint call's gradients: read by a backward by now?)
            self.joint_unread = 0 if last.joint_read else self.joint_unread + 1
            if self.joint_unread >= 2:      # joint calls no backward reads: off
                self.joint_off = True
                return None
        wrt = tuple(self.differentiable(args, kwargs))
        if not wrt:
            return None
        if self.generic is not None:
            env = self._sizes(arrays)
            versions = self._joint.setdefault(wrt, [])
            for exe in versions:
                if exe.failed_guard(env) is None:
                    return exe, wrt
            if len(versions) >= self.max_versions:
                return None
            t0 = time.perf_counter()
            exe = self.generic(*self._joint_module(wrt), env)
            self.entry.timings["joint_compile_s"] = time.perf_counter() - t0
            if exe.failed_guard(env) is not None:
                return None
            versions.append(exe)
            return exe, wrt
        exe = self._joint.get(wrt)
        if exe is None:
            t0 = time.perf_counter()
            exe = self._joint[wrt] = self.compile_fn(*self._joint_module(wrt))
            self.entry.timings["joint_compile_s"] = time.perf_counter() - t0
        return exe, wrt

    def split(self, args, kwargs, arrays):
        """``(forward executable, wrt, backward maker, residual count)`` of a
        partitioned call for this call (its input ``arrays``), or None
        (module docstring).  ``backward maker(arrays)``: the backward's
        executable, or None (then the recomputing backward serves).  A
        size-generic forward's pair is size-generic, ``max_versions``
        versions of each at most."""
        if self.split_off:
            return None
        last, self.last_split = self.last_split, None
        if last is not None and self.backwards != last.backwards:
            # a backward ran since the last call: did it read its residuals?
            # (a triplet loss calls the model three times, then one backward)
            self.split_unread = 0 if last.joint_read else self.split_unread + 1
        self.split_calls += 1
        if self.split_unread >= 2 or self.split_calls > 8:
            # residuals no backward reads (evaluation with grad mode on): off
            self.split_off = True
            return None
        wrt = tuple(self.differentiable(args, kwargs))
        if not wrt:
            return None
        got = self._split.get(wrt)
        if got is None:
            t0 = time.perf_counter()
            try:
                fwd, bwd, n_res = self._partition(wrt)
                if self.generic is None:
                    holder = {}

                    def backward_exe(arrays):
                        if "exe" not in holder:
                            holder["exe"] = self._guarded(lambda: self.compile_fn(*bwd))
                        return holder["exe"]
                    got = (self.compile_fn(*fwd), backward_exe, n_res)
                else:
                    got = ([], self._generic_backward(wrt), n_res, fwd)
            except Exception as e:  # noqa: BLE001  (the plain forward serves; said in timings)
                # A trace the split does not handle (_NoSplit says why), or a
                # partitioned module the backend refuses: the plain forward
                # and the recomputing backward, as before.
                self.split_off = True
                self.entry.timings["split"] = f"not split: {type(e).__name__}: {e}"
                return None
            self._split[wrt] = got
            self.entry.timings["split_compile_s"] = time.perf_counter() - t0
        if self.generic is None:
            return got[0], wrt, got[1], got[2]
        env = self._sizes(arrays)
        versions = got[0]
        for exe in versions:
            if exe.failed_guard(env) is None:
                return exe, wrt, got[1], got[2]
        if len(versions) >= self.max_versions:
            return None
        exe = self._guarded(lambda: self.generic(
            *(got[3] if not versions else self._partition(wrt)[0]), env))
        if exe is None or exe.failed_guard(env) is not None:
            return None
        versions.append(exe)
        return exe, wrt, got[1], got[2]

    def _generic_backward(self, wrt):
        """The backward maker of a size-generic partitioned pair."""
        versions = []

        def backward_exe(arrays):
            env = self._sizes(arrays)
            for exe in versions:
                if exe.failed_guard(env) is None:
                    return exe
            if len(versions) >= self.max_versions:
                return None
            exe = self._guarded(lambda: self.generic(*self._partition(wrt)[1], env))
            if exe is None or exe.failed_guard(env) is not None:
                return None
            versions.append(exe)
            return exe
        return backward_exe

    def _guarded(self, build):
        """``build()``, or None (then the plain forward, or the recomputing
        backward, serves; said in timings) if the backend refuses it."""
        try:
            return build()
        except Exception as e:  # noqa: BLE001  (reported in timings, never wrong)
            self.split_off = True
            self.entry.timings["split"] = f"not split: {type(e).__name__}: {e}"
            return None

    def _partition(self, wrt: tuple):
        """``((forward module, optimize), (backward module, optimize),
        residual count)``: the forward and its backward (seeded with
        cotangent arguments, as ``_module``) built as one function and
        expanded, then split: ops that depend on no cotangent stay in the
        forward, which returns the traced results and then the residuals
        (its values that the other ops read); the backward takes the
        traced inputs, the cotangents and the residuals, and returns the
        gradients."""
        module, _ = self._module(wrt, keep_returns=True)
        run_passes(AUTODIFF, module, verify=self.verify)
        fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
        block = fn.body.block
        n_in = len(self.entry.trace.inputs)
        n_cot = len(self.out_indices)
        cots = set(block.args[n_in:n_in + n_cot])
        ops = list(block.ops)
        ret = ops[-1]
        n_main = len(ret.operands) - len(wrt)
        late: set = set()
        for op in ops[:-1]:
            if op.regions:
                raise _NoSplit(f"{op.name} holds regions")
            if any(v in cots or v in late for v in op.operands):
                late.update(op.results)
        if any(v in late for v in ret.operands[:n_main]):
            raise _NoSplit("a result depends on the cotangents")
        index = {op: i for i, op in enumerate(ops)}
        residuals = []      # (op index, result index)
        seen: set = set()
        work = [v for op in ops if op is not ret and any(r in late for r in op.results)
                for v in op.operands] + list(ret.operands[n_main:])
        while work:
            v = work.pop()
            if v in late or v in seen or isinstance(v, BlockArgument):
                continue
            seen.add(v)
            o = v.owner
            if not o.operands:
                continue          # a constant: the backward keeps its own
            if _recomputed(o):
                # cheap (elementwise, a broadcast, a reshape): made again in
                # the backward from what it reads, rather than stored (a
                # log-softmax's intermediates, a scalar broadcast to a
                # [tokens, vocab] shape, would cost a full-size write each)
                work.extend(o.operands)
                continue
            residuals.append((index[o], v.index))
        residuals.sort()

        def parts(m):
            f = next(op for op in m.walk() if isinstance(op, func.FuncOp))
            return f, f.body.block, list(f.body.block.ops)

        # the forward: the traced results, then the residuals
        fmod = module.clone()
        f, b, fops = parts(fmod)
        vals = list(fops[-1].operands[:n_main]) + [fops[i].results[r] for i, r in residuals]
        b.erase_op(fops[-1])
        for i in range(len(fops) - 2, -1, -1):
            if any(r in late for r in ops[i].results):
                b.erase_op(fops[i])
        for a in list(b.args[n_in:n_in + n_cot])[::-1]:
            b.erase_arg(a)
        ir.set_returns(f, vals)
        # the backward: the residuals as arguments, the forward's other ops gone
        bmod = module.clone()
        f, b, bops = parts(bmod)
        grads = list(bops[-1].operands[n_main:])
        for i, r in residuals:
            v = bops[i].results[r]
            arg = b.insert_arg(v.type, len(b.args))
            v.replace_all_uses_with(arg)
            if v in grads:
                grads[grads.index(v)] = arg
        b.erase_op(bops[-1])
        ir.set_returns(f, grads)
        for i in range(len(bops) - 2, -1, -1):
            if not any(r in late for r in ops[i].results) and \
                    not any(r.uses for r in bops[i].results):
                b.erase_op(bops[i])

        def optimizer(m):
            def optimize():
                run_passes(OPTIMIZE, m, verify=self.verify)
                return m
            return optimize
        return (fmod, optimizer(fmod)), (bmod, optimizer(bmod)), len(residuals)

    def _joint_module(self, wrt: tuple):
        """The traced forward (its returns, writes included, unchanged) with
        the gradients of its scalar result (seed 1) for ``wrt`` appended to
        its returns."""
        module = self.entry.stages["trace"].clone()
        fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
        block = fn.body.block
        ret = block.last_op
        vals = list(ret.operands)
        loss = vals[self.out_indices[self.joint_at]]
        bop = ir.BackwardOp(loss, [block.args[j] for j in wrt], None, loc=ret.location)
        block.insert_op_before(bop, ret)
        block.erase_op(ret)
        ir.set_returns(fn, vals + list(bop.grads))

        def optimize():
            run_passes(AUTODIFF, module, verify=self.verify)
            run_passes(OPTIMIZE, module, verify=self.verify)
            return module
        return module, optimize

    def _sizes(self, arrays) -> dict:
        """``{symbol: value}`` of a call, read from its saved input arrays."""
        return {name: np.shape(arrays[i])[d] for name, (i, d) in self._sources.items()}

    def _module(self, wrt: tuple, keep_returns: bool = False):
        """``(module, optimize)``: the backward for the inputs ``wrt`` built
        from the traced forward, and the passes that finish it
        (``keep_returns``: the traced returns first, then the gradients)."""
        module = self.entry.stages["trace"].clone()
        fn = next(op for op in module.walk() if isinstance(op, func.FuncOp))
        block = fn.body.block
        ret = block.last_op
        outs = [ret.operands[k] for k in self.out_indices]
        cots = [block.insert_arg(o.type, len(block.args)) for o in outs]
        if len(outs) == 1:
            loss, seed = outs[0], cots[0]
        else:       # one scalar whose gradient wrt each result is its cotangent
            with building(ret) as b:
                b.loc = ret.location
                total = None
                # results of mixed float dtypes (autocast's bf16 logits and
                # its f32 loss): the terms are summed in their widest
                widest = self.out_dtypes[0]
                for d in self.out_dtypes[1:]:
                    widest = dt.promote_types(widest, d)
                for o, c in zip(outs, cots):
                    prod = ops.mul(IRValue(o), IRValue(c))
                    term = ops.reduce_sum(prod, range(len(ir.shape_of(o.type))))
                    if ir.dtype_of(o.type) != widest:
                        term = ops.cast(term, widest)
                    total = term if total is None else ops.add(total, term)
            loss, seed = total.ssa, None
        bop = ir.BackwardOp(loss, [block.args[j] for j in wrt], seed, loc=ret.location)
        block.insert_op_before(bop, ret)
        kept = list(ret.operands) if keep_returns else []
        block.erase_op(ret)
        ir.set_returns(fn, kept + list(bop.grads))

        def optimize():
            run_passes(AUTODIFF, module, verify=self.verify)
            run_passes(OPTIMIZE, module, verify=self.verify)
            return module
        return module, optimize


#: Ops the backward of a partitioned call makes again instead of reading
#: their result as a residual (besides elementwise primitives).
_CHEAP = frozenset(("broadcast_to", "reshape", "transpose", "slice", "squeeze",
                    "expand_dims", "cast", "iota", "full"))


def _recomputed(op) -> bool:
    name = ir.primitive_name(op)
    if name is None or op.regions:
        return False
    prim = PRIMITIVES.get(name)
    return name in _CHEAP or (prim is not None and prim.kind == "elementwise")


class _NoSplit(Exception):
    """A trace ``BackwardPlan._partition`` does not split (it says why)."""


class _Saved:
    """What the backward of one compiled call needs: the input arrays (with
    copies of those the forward overwrote), the differentiable inputs, and
    their versions at the forward.  Doubles as the node's ``ctx``."""

    __slots__ = ("plan", "arrays", "wrt", "tensors", "watched", "versions",
                 "_freed", "materialize_grads", "out_shapes", "joint",
                 "joint_read", "split", "backwards")

    def __init__(self, plan, arrays, wrt, tensors, watched):
        self.plan = plan
        self.arrays = arrays
        self.wrt = wrt
        self.tensors = tensors
        self.watched = watched          # every input read by reference
        self.versions = [t._vbox[0] for t in watched]
        self._freed = False
        # Results given no gradient arrive as None (the backward makes zeros
        # for them and knows which inputs got no gradient at all).
        self.materialize_grads = False
        self.joint = None          # a joint call's gradients (seed 1), if one
        self.joint_read = 0        # (also: a partitioned call's residuals read)
        self.split = None          # a partitioned call's (backward maker, residuals)
        self.backwards = plan.backwards   # the plan's backwards before this call


    @property
    def saved_tensors_freed(self) -> bool:
        return self._freed

    @saved_tensors_freed.setter
    def saved_tensors_freed(self, freed: bool) -> None:
        # Set by the engine after a backward that keeps no graph: what the
        # backward read goes (residuals are a step's activations: kept, they
        # would live on through the next step's forward), as eager autograd
        # frees its saved tensors.
        self._freed = freed
        if freed:
            self.arrays = self.joint = None
            if self.split is not None:
                self.split = (self.split[0], None)


class CompiledCall:
    """``FunctionNode``'s ``fn_cls`` for a compiled call (its ``grad_fn``
    shows as ``CompiledCallBackward``)."""

    @staticmethod
    def backward(saved: _Saved, *gs):
        if saved.saved_tensors_freed:
            raise RuntimeError(graph._FREED_MSG)
        for t, v in zip(saved.watched, saved.versions):
            if t._vbox[0] != v:
                raise graph.modified_error(t, v)
        plan = saved.plan
        reached = frozenset().union(*(r for g, r in zip(gs, plan.reach) if g is not None))
        at = plan.joint_at
        alone = at is not None and gs[at] is not None and \
            all(g is None for i, g in enumerate(gs) if i != at)
        plan.backwards += 1
        plan.split_calls = 0
        if alone:
            plan.joint_seen = True
        if saved.joint is not None and alone:
            # Gradients are linear in the loss's cotangent: scaled, once
            # handed out as they are for a seed of exactly 1.
            c = gs[at]._data
            first = not saved.joint_read
            saved.joint_read += 1
            if first and c == 1:
                grads = saved.joint
            else:
                grads = [np.multiply(a, c.astype(a.dtype)) for a in saved.joint]
            return tuple(Tensor._make(a, t.dtype) if j in reached else None
                         for a, t, j in zip(grads, saved.tensors, saved.wrt))
        if saved.joint is not None:
            plan.joint_off = True     # seeded otherwise: the recomputing backward
        cots = [g._data if g is not None else np.zeros(shape, d.np)
                for g, shape, d in zip(gs, saved.out_shapes, plan.out_dtypes)]
        exe = None
        if saved.split is not None:
            saved.joint_read += 1
            maker, residuals = saved.split
            exe = maker(saved.arrays)
        if exe is not None:
            grads = exe(saved.arrays + cots + residuals)
        else:
            grads = plan.run(saved.wrt, saved.arrays + cots)
        return tuple(Tensor._make(a, t.dtype) if j in reached else None
                     for a, t, j in zip(grads, saved.tensors, saved.wrt))


def save_inputs(plan: BackwardPlan, arrays: list) -> list:
    """Before the forward runs: the input arrays the backward will read
    (copies of those the forward writes in place)."""
    saved = list(arrays)
    for j in plan.copied:
        saved[j] = arrays[j].copy()
    return saved


def attach(plan: BackwardPlan, results: list, saved_arrays: list, args, kwargs,
           joint=None, split=None) -> None:
    """Make ``results`` (the compiled call's outputs ``plan.out_indices``)
    carry a node whose backward runs the compiled backward; ``joint``:
    ``(wrt, gradient arrays)`` of a joint call; ``split``: ``(wrt, backward
    maker, residual arrays)`` of a partitioned call."""
    wrt = tuple(plan.differentiable(args, kwargs)) if joint is None else joint[0]
    if split is not None:
        wrt = split[0]
    if not wrt:
        return
    trace = plan.entry.trace
    by_input = []
    for spec in trace.inputs:
        if spec.kind == "state":
            by_input.append(spec.source)
        elif spec.kind == "arg":
            by_input.append(resolve(spec.source, args, kwargs))
        else:
            leaf = spec.source if spec.arg is None else resolve(spec.arg, args, kwargs)
            by_input.append(leaf._grad)
    tensors = [by_input[j] for j in wrt]
    copied = set(plan.copied)
    watched = [t for j, t in enumerate(by_input) if j not in copied and t is not None]
    if split is not None:
        # results the backward reads as residuals (a softmax's output):
        # saved by reference, so an in-place change to one raises there
        held = {id(a) for a in split[2]}
        watched += [r for r in results if id(r._data) in held]
    saved = _Saved(plan, saved_arrays, wrt, tensors, watched)
    saved.out_shapes = [r._data.shape for r in results]
    if joint is not None:
        saved.joint = joint[1]
        plan.last_joint = saved
    if split is not None:
        saved.split = (split[1], split[2])
        plan.last_split = saved
    node = graph.FunctionNode(CompiledCall, saved, tuple(graph.edge_of(t) for t in tensors),
                              len(tensors))
    if len(results) > 1:
        node.outputs = tuple(results)
    for i, result in enumerate(results):
        result.requires_grad = True
        result._node = node if len(results) == 1 else _FunctionOutput(node, i)
