"""Module full backward hooks (``register_full_backward_hook``,
``register_full_backward_pre_hook``), done as PyTorch's ``BackwardHook``
does them: identity autograd Functions around the module's tensor inputs
and outputs catch the gradients flowing through.  (The deprecated
``register_backward_hook`` is ``legacy_backward_hooks``'s.)

Invariants: as PyTorch's ``BackwardHook``, the grad-requiring tensor
inputs pass through one identity Function and the grad-requiring tensor
outputs through another, so each side's gradients arrive together, once
per backward.  ``pre_hook(module, grad_output)`` runs when the outputs'
gradients are known, and a tuple it returns replaces them before they flow
on; ``hook(module, grad_input, grad_output)`` runs when the gradients with
respect to the inputs are known, and a tuple it returns replaces
``grad_input`` (a ``None`` in it: that input gets no gradient).
``grad_input`` / ``grad_output`` have one entry per positional argument /
output, ``None`` where it is not a tensor that requires grad; with no input
that requires grad the hook runs at the outputs' stage with all ``None``;
when the outputs are not tensors or a tuple/list of them (a dict) no hook
runs, as in PyTorch.
"""
from __future__ import annotations

import warnings
from tracec import graph
from tracec.autograd import Function
from tracec.functions import user_stacklevel
from tracec.creation import zeros_like
from tracec.mutation import WatchedHookDict
from tracec.tensor import Tensor


_NO_INPUT_GRAD = (
    "Full backward hook is firing when gradients are computed with respect to module outputs "
    "since no inputs require gradients. See https://docs.pytorch.org/docs/main/generated/"
    "torch.nn.Module.html#torch.nn.Module.register_full_backward_hook for more details.")


#: backward hooks every module runs before its own (PyTorch's
#: ``register_module_full_backward_hook`` / ``_pre_hook``); watched: a
#: change retraces compiled calls (``Module.mode_and_tensors``)
global_backward_hooks: dict = WatchedHookDict()
global_backward_pre_hooks: dict = WatchedHookDict()
#: [PyTorch's ``_global_is_full_backward_hook``]: False once
#: ``register_module_backward_hook`` (deprecated) put its hooks in
#: ``global_backward_hooks`` (tracec.nn.modules.legacy_backward_hooks runs them)
GLOBAL_KIND: list = [None]


class _State:
    def __init__(self, module, n_in, wrapped_in, constant_in):
        self.module = module
        self.n_in = n_in
        self.wrapped_in = wrapped_in      # positions of the wrapped inputs
        self.constant_in = constant_in    # {position: tensor} of the others
        self.constant_out = {}
        self.grad_out = None              # set by the outputs' stage, cleared by the inputs'
        self.wrapped_out = ()
        self.n_out = 0

    def run_pre(self, grads):
        """The outputs' gradients after the pre-hooks (as a list per output)."""
        self.grad_out = _zeros_at(self.n_out, self.constant_out)
        for i, g in zip(self.wrapped_out, grads):
            self.grad_out[i] = g
        for hook in [*global_backward_pre_hooks.values(),
                     *self.module.__dict__.get("_backward_pre_hooks", {}).values()]:
            res = hook(self.module, tuple(self.grad_out))
            if res is not None:
                res = res if isinstance(res, tuple) else (res,)
                if len(res) != self.n_out:
                    raise RuntimeError("Backward pre hook returned an invalid number of "
                                       f"grad_output, got {len(res)}, but expected {self.n_out}")
                self.grad_out = list(res)
        return [self.grad_out[i] for i in self.wrapped_out]

    def run_full(self, grads):
        if self.grad_out is None:
            # the gradient reached the inputs without passing the outputs
            # (an output PyTorch does not wrap, a dict): no hook, as PyTorch
            return list(grads)
        grad_in = _zeros_at(self.n_in, self.constant_in)
        for i, g in zip(self.wrapped_in, grads):
            grad_in[i] = g
        grad_in = tuple(grad_in)
        d = self.module.__dict__
        own = d.get("_backward_hooks", {}) if d.get("_is_full_backward_hook") is not False else {}
        glob = global_backward_hooks if GLOBAL_KIND[0] is not False else {}
        for hook in [*glob.values(), *own.values()]:
            res = hook(self.module, grad_in, tuple(self.grad_out))
            if res is not None:
                res = res if isinstance(res, tuple) else (res,)
                if len(res) != len(grad_in):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input, "
                                       f"got {len(res)}, but expected {len(grad_in)}")
                grad_in = res
        self.grad_out = None
        return [grad_in[i] for i in self.wrapped_in]


def _zeros_at(n: int, constants: dict) -> list:
    """``n`` entries, zeros like the tensors that need no gradient (PyTorch
    passes its identity Function's non-differentiable outputs' gradients
    materialized), None elsewhere."""
    out = [None] * n
    for i, t in constants.items():
        out[i] = zeros_like(t)
    return out


class _OutputHook(Function):
    @staticmethod
    def forward(ctx, state, *xs):
        ctx.state = state
        return tuple(x.detach() for x in xs)

    @staticmethod
    def backward(ctx, *grads):
        st = ctx.state
        grads = st.run_pre(grads)
        if not st.wrapped_in:
            warnings.warn(_NO_INPUT_GRAD, stacklevel=user_stacklevel())   # as PyTorch warns
            st.run_full(())
        return (None, *grads)


class _InputHook(Function):
    @staticmethod
    def forward(ctx, state, *xs):
        ctx.state = state
        return tuple(x.detach() for x in xs)

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.state.run_full(grads))


def _apply(fn, state, tensors) -> tuple:
    out = fn.apply(state, *tensors)
    return out if isinstance(out, tuple) else (out,)


def has_backward_hooks(module) -> bool:
    d = module.__dict__
    return bool((d.get("_backward_hooks") and d.get("_is_full_backward_hook") is not False)
                or d.get("_backward_pre_hooks")
                or (global_backward_hooks and GLOBAL_KIND[0] is not False)
                or global_backward_pre_hooks)


def wrap_inputs(module, args):
    """``args`` with its grad-requiring tensors behind one identity
    Function; the shared state for ``wrap_outputs``."""
    wrapped = [i for i, a in enumerate(args)
               if isinstance(a, Tensor) and a.requires_grad] if graph.is_grad_enabled() else []
    constant = {i: a for i, a in enumerate(args)
                if wrapped and isinstance(a, Tensor) and not a.requires_grad}
    state = _State(module, len(args), wrapped, constant)
    if not wrapped:
        return args, state
    args = list(args)
    for i, t in zip(wrapped, _apply(_InputHook, state, [args[i] for i in wrapped])):
        args[i] = t
    return tuple(args), state


def wrap_outputs(state, out):
    """``out`` (a tensor or a tuple/list of them) with its grad-requiring
    tensors behind one identity Function."""
    single = isinstance(out, Tensor)
    outs = [out] if single else list(out) if isinstance(out, (tuple, list)) else None
    if outs is None:
        warnings.warn("For backward hooks to be called, module output should be a Tensor or a "
                      f"tuple of Tensors but received {type(out)}", stacklevel=user_stacklevel())
        return out
    if not graph.is_grad_enabled():
        return out
    state.n_out = len(outs)
    state.wrapped_out = [i for i, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
    if not state.wrapped_out:
        return out
    state.constant_out = {i: o for i, o in enumerate(outs)
                          if isinstance(o, Tensor) and not o.requires_grad}
    for i, t in zip(state.wrapped_out,
                    _apply(_OutputHook, state, [outs[i] for i in state.wrapped_out])):
        outs[i] = t
    if single:
        return outs[0]
    return type(out)(outs)
