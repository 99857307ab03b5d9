"""Module backward hooks (``register_full_backward_hook``,
``register_full_backward_pre_hook``, ``register_backward_hook``), done as
PyTorch's ``BackwardHook`` does them: identity autograd Functions around the
module's tensor inputs and outputs catch the gradients flowing through.

Invariants: ``pre_hook(module, grad_output)`` runs once per backward when
the outputs' gradients are known, and a tuple it returns replaces them
before they flow on; ``hook(module, grad_input, grad_output)`` runs once,
when the gradients with respect to the tensor positional inputs are known
(``None`` for inputs that need none; at the outputs' stage with all
``None`` when no input requires grad), and a tuple it returns replaces
``grad_input``.  A module with several outputs: the pre-hook sees them
when the last one arrives (earlier ones have flowed on already); likewise
a replaced ``grad_input`` reaches the inputs whose gradient arrives last.
"""
from __future__ import annotations

import warnings

from tracec import graph
from tracec.autograd import Function
from tracec.functions import user_stacklevel
from tracec.tensor import RECORDERS, Tensor


_NO_INPUT_GRAD = (
    "Full backward hook is firing when gradients are computed with respect to module outputs "
    "since no inputs require gradients. See https://docs.pytorch.org/docs/main/generated/"
    "torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for more details.")


class _State:
    def __init__(self, module, n_in, needs_in, n_out):
        self.module = module
        self.n_in = n_in
        self.needs_in = needs_in          # which tensor inputs are wrapped
        self.grad_in = [None] * n_in
        self.got_in = 0
        self.grad_out = [None] * n_out
        self.pending_out = 0              # outputs whose gradient has not arrived
        self.n_out_wrapped = 0
        self.pre_done = False

    def reset(self):
        """Ready for another backward through the same graph (retain_graph)."""
        self.got_in = 0
        self.pending_out = self.n_out_wrapped
        self.pre_done = False

    def run_pre(self):
        if self.pre_done:
            return
        self.pre_done = True
        for hook in list(self.module.__dict__.get("_backward_pre_hooks", {}).values()):
            res = hook(self.module, tuple(self.grad_out))
            if res is not None:
                self.grad_out = list(res if isinstance(res, tuple) else (res,))

    def run_full(self):
        self.run_pre()
        grad_in = tuple(self.grad_in)
        for hook in list(self.module.__dict__.get("_backward_hooks", {}).values()):
            res = hook(self.module, grad_in, tuple(self.grad_out))
            if res is not None:
                res = res if isinstance(res, tuple) else (res,)
                if len(res) != len(grad_in):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input, "
                                       f"got {len(res)}, but expected {len(grad_in)}")
                grad_in = res
        return grad_in


class _OutputHook(Function):
    @staticmethod
    def forward(ctx, x, state, index):
        ctx.state, ctx.index = state, index
        return x.detach()

    @staticmethod
    def backward(ctx, g):
        st = ctx.state
        st.grad_out[ctx.index] = g
        st.pending_out -= 1
        if st.pending_out == 0:
            st.run_pre()
            if not any(st.needs_in):
                warnings.warn(_NO_INPUT_GRAD, stacklevel=user_stacklevel())   # as PyTorch warns
                st.run_full()
                g_out = st.grad_out[ctx.index]
                st.reset()
                return g_out, None, None
        return st.grad_out[ctx.index], None, None


class _InputHook(Function):
    @staticmethod
    def forward(ctx, x, state, index):
        ctx.state, ctx.index = state, index
        return x.detach()

    @staticmethod
    def backward(ctx, g):
        st = ctx.state
        st.grad_in[ctx.index] = g
        st.got_in += 1
        if st.got_in == sum(st.needs_in):
            st.grad_in = list(st.run_full())
            st.reset()
        # Inputs whose gradient arrived earlier have flowed on already: a
        # replaced grad_input reaches only the input that completed the set
        # (every input, for the usual one-input module).
        return st.grad_in[ctx.index], None, None


def has_backward_hooks(module) -> bool:
    d = module.__dict__
    return bool(d.get("_backward_hooks") or d.get("_backward_pre_hooks"))


def wrap_inputs(module, args):
    """``args`` with each grad-requiring tensor behind an identity Function;
    the shared state for ``wrap_outputs``."""
    tensors = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    needs = [graph.is_grad_enabled() and args[i].requires_grad for i in tensors]
    state = _State(module, len(tensors), needs, 0)
    args = list(args)
    for k, i in enumerate(tensors):
        if needs[k]:
            args[i] = _InputHook.apply(args[i], state, k)
    return tuple(args), state


def wrap_outputs(state, out):
    """``out`` (a tensor or a tuple/list of them) with each grad-requiring
    tensor behind an identity Function."""
    single = isinstance(out, Tensor)
    outs = [out] if single else list(out) if isinstance(out, (tuple, list)) else None
    if outs is None or not graph.is_grad_enabled():
        return out
    state.grad_out = [None] * len(outs)
    for i, o in enumerate(outs):
        if isinstance(o, Tensor) and o.requires_grad:
            state.pending_out += 1
            state.n_out_wrapped += 1
            outs[i] = _OutputHook.apply(o, state, i)
    if single:
        return outs[0]
    return type(out)(outs)
