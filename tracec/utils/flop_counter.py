"""``torch.utils.flop_counter``: ``FlopCounterMode`` counts the FLOPs of
the eager ops run inside it, by PyTorch's ATen op names and formulas
(``aten.mm``, ``aten.addmm``, ``aten.bmm``, ``aten.baddbmm``,
``aten.convolution`` and ``aten.convolution_backward``; 2 FLOPs per
multiply-add, biases not counted), per module and in ``"Global"``.

tracec's composites report the ATen op PyTorch dispatches to for the same
call (``tracec.aten_report``: ``F.linear`` on a contiguous 3-D input is one
``addmm``, attention on PyTorch's CPU flash kernel counts nothing, its math
kernel two ``bmm``).  A counted op's backward is counted when its output's
gradient is computed, as PyTorch's backward ops: an ``mm`` / ``bmm`` per
operand that requires grad, one ``convolution_backward`` for a
convolution's input and weight gradients; both are attributed to the
modules the forward op ran in.

Module attribution follows PyTorch's ``ModuleTracker``, its corner
included: a module that returns its input tensor (an ``Identity``, a
``Dropout`` with p=0) stays entered for the rest of that backward.

Invariants: ``get_total_flops()`` is the sum of ``get_flop_counts()["Global"]``;
a module's name is its class name for the outermost module called and
``parent.child`` below it (PyTorch's ``ModuleTracker``); counts are taken
only while the mode is entered.
"""
from __future__ import annotations

import math
from collections import defaultdict

from tracec import aten_report
from tracec.nn.modules import module as _module
from tracec.tensor import Tensor
from tracec.utils._pytree import tree_flatten

__all__ = ["FlopCounterMode", "register_flop_formula", "get_suffix_str",
           "convert_num_with_suffix", "convert_to_percent_str", "mm_flop", "addmm_flop",
           "bmm_flop", "baddbmm_flop", "conv_flop_count", "conv_backward_flop"]


class _AtenOp:
    """A key of the flop counts: prints as PyTorch's op packet (``aten.mm``)."""

    _ALL: dict = {}

    def __new__(cls, name: str):
        op = cls._ALL.get(name)
        if op is None:
            op = super().__new__(cls)
            op._name = name
            cls._ALL[name] = op
        return op

    def __repr__(self):
        return f"aten.{self._name}"

    __str__ = __repr__


def mm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    """Count flops for matmul."""
    m, k = a_shape
    k2, n = b_shape
    if k != k2:
        raise AssertionError(f"matmul: inner dimensions must match (k == k2), got {k} and {k2}")
    return m * n * 2 * k


def addmm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return mm_flop(a_shape, b_shape)


def bmm_flop(a_shape, b_shape, out_shape=None, **kwargs) -> int:
    """Count flops for the bmm operation."""
    b, m, k = a_shape
    b2, k2, n = b_shape
    if b != b2:
        raise AssertionError(f"bmm: batch dimensions must match (b == b2), got {b} and {b2}")
    if k != k2:
        raise AssertionError(f"bmm: inner dimensions must match (k == k2), got {k} and {k2}")
    return b * m * n * 2 * k


def baddbmm_flop(a_shape, b_shape, out_shape=None, **kwargs) -> int:
    return bmm_flop(a_shape, b_shape)


def conv_flop_count(x_shape, w_shape, out_shape, transposed: bool = False) -> int:
    """Count flops for convolution: 2 per multiply of every output (input,
    when transposed) point with the filter, times batch and channels."""
    batch_size = x_shape[0]
    conv_shape = (x_shape if transposed else out_shape)[2:]
    c_out, c_in, *filter_size = w_shape
    return math.prod(conv_shape) * math.prod(filter_size) * batch_size * c_out * c_in * 2


def conv_backward_flop(grad_out_shape, x_shape, w_shape, transposed, output_mask) -> int:
    """PyTorch's ``convolution_backward`` count: the input gradient (a
    transposed convolution of the output gradient) and the weight gradient
    (a convolution of the input with the output gradient), as requested."""
    def t(shape):
        return [shape[1], shape[0]] + list(shape[2:])
    flop_count = 0
    if output_mask[0]:
        flop_count += conv_flop_count(grad_out_shape, w_shape, x_shape, not transposed)
    if output_mask[1]:
        if transposed:
            flop_count += conv_flop_count(t(grad_out_shape), t(x_shape), t(w_shape), False)
        else:
            flop_count += conv_flop_count(t(x_shape), t(grad_out_shape), t(w_shape), False)
    return flop_count


_FORMULAS = {"mm": mm_flop, "addmm": addmm_flop, "bmm": bmm_flop, "baddbmm": baddbmm_flop}
#: ATen ops with no flop formula whose backward runs counted ops (addbmm's
#: gradients are bmm's)
_UNCOUNTED = {"addbmm"}


def register_flop_formula(targets, get_raw=False):
    raise NotImplementedError("tracec.utils.flop_counter: custom flop formulas need ATen "
                              "op overloads, which tracec does not have")


suffixes = ["", "K", "M", "B", "T"]


def get_suffix_str(number) -> str:
    index = max(0, min(len(suffixes) - 1, (len(str(number)) - 2) // 3))
    return suffixes[index]


def convert_num_with_suffix(number, suffix) -> str:
    index = suffixes.index(suffix)
    return f"{number / 1000 ** index:.3f}" + suffixes[index]


def convert_to_percent_str(num, denom) -> str:
    if denom == 0:
        return "0%"
    return f"{num / denom:.2%}"


def _table(rows, header, colalign) -> str:
    """The table PyTorch prints through tabulate (0.10, the pinned one: its
    "simple" format; it strips the cells' leading spaces although PyTorch
    asks it to keep them): columns two spaces apart, each as wide as its
    widest cell and at least its header plus two, a dashed rule under the
    header."""
    rows = [[c.strip() for c in r] for r in rows]
    widths = [max([len(header[i]) + 2] + [len(r[i]) for r in rows]) for i in range(len(header))]

    def line(cells):
        return "  ".join(c.ljust(w) if a == "left" else c.rjust(w)
                         for c, w, a in zip(cells, widths, colalign))
    return "\n".join([line(header), "  ".join("-" * w for w in widths)]
                     + [line(r) for r in rows])


def _tensors(x) -> list:
    """The tensors in a module's arguments or output (PyTorch's tracker
    flattens them as a pytree)."""
    return [t for t in tree_flatten(x)[0] if isinstance(t, Tensor)]


def _hook_first(t: Tensor, fn) -> None:
    """Register ``fn`` on ``t``'s gradient ahead of its other hooks (as the
    first hook PyTorch's tracker put on that tensor)."""
    t.register_hook(fn)
    hooks = t._node.pre_hooks if t._node is not None else t._hooks
    hooks.insert(0, hooks.pop())


class FlopCounterMode:
    """Counts the FLOPs of the eager ops run inside ``with``; prints the
    table on exit when ``display``."""

    def __init__(self, mods=None, depth: int = 2, display: bool = True,
                 custom_mapping=None) -> None:
        import warnings
        self.flop_counts: dict = defaultdict(lambda: defaultdict(int))
        self.depth = depth
        self.display = display
        if custom_mapping:
            raise NotImplementedError("tracec.utils.flop_counter: custom_mapping needs ATen op "
                                      "overloads, which tracec does not have")
        if mods is not None:
            warnings.warn("mods argument is not needed anymore, you can stop passing it",
                          stacklevel=2)
        self._active = False
        self._stack: list = []          # names of the modules being called
        self._known: dict = {}          # module -> its name
        self._seen: set = set()
        self._handles: list = []
        self._leaked: set = set()       # modules stuck "in backward" (see _post)

    # --- counting ---------------------------------------------------------------------

    def get_total_flops(self) -> int:
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self) -> dict:
        """The flop counts: ``{module name: {aten op: flops}}``."""
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def _name(self, mod) -> str:
        if mod not in self._known:
            self._known[mod] = type(mod).__name__
        name = self._known[mod]
        if mod not in self._seen:
            for child_name, child in mod.named_children():
                self._known[child] = f"{name}.{child_name}"
                self._name(child)
            self._seen.add(mod)
        return name

    def _pre(self, mod, args):
        self._leaked.clear()        # (a backward has ended before a forward)
        self._stack.append(self._name(mod))

    def _post(self, mod, args, out):
        name = self._name(mod)
        if name in self._stack:
            # (the last entry of this name: a module may call itself)
            del self._stack[len(self._stack) - 1 - self._stack[::-1].index(name)]
        # PyTorch's ModuleTracker enters a module's backward when its
        # outputs' gradients are ready and leaves it when its inputs' are,
        # by hooks registered in that order on those tensors.  A module
        # that returns one of its inputs (an Identity, a Dropout with p=0)
        # hooks the same tensor twice, the exit first: it stays entered for
        # the rest of that backward, and every op whose backward runs from
        # then on is counted under it too.
        ins = {id(t) for t in _tensors(args) if t.requires_grad}
        for t in _tensors(out):
            if id(t) in ins:
                _hook_first(t, lambda grad, name=name: self._leaked.add(name))
                break

    def _add(self, parents, op: str, flops: int) -> None:
        key = _AtenOp(op)
        for par in parents:
            self.flop_counts[par][key] += flops

    def _on_call(self, calls, out) -> None:
        if not self._active:
            return
        parents = set(self._stack) | {"Global"}
        backward = []
        for call in calls:
            if call.name not in _UNCOUNTED:
                self._add(parents, call.name, self._forward_flops(call))
            backward += self._backward_flops(call)
        outs = [t for t in (out if isinstance(out, (tuple, list)) else (out,))
                if getattr(t, "requires_grad", False)]
        if backward and outs:
            # counted once, when the first of the op's outputs gets its
            # gradient (a recurrent layer's loss may use h_n or the outputs);
            # PyTorch's backward runs each op's backward in reverse order
            backward.reverse()
            fired = [False]

            def hook(grad, parents=parents, backward=backward):
                if self._active and not fired[0]:
                    fired[0] = True
                    for op, flops in backward:
                        self._add(parents | self._leaked, op, flops)
            for t in outs:
                t.register_hook(hook)

    @staticmethod
    def _forward_flops(call) -> int:
        if call.name == "convolution":
            x, w, o, transposed = call.shapes
            return conv_flop_count(x, w, o, transposed)
        return _FORMULAS[call.name](*call.shapes)

    @staticmethod
    def _backward_flops(call) -> list:
        """PyTorch's backward ops for ``call``: (op, flops) pairs."""
        if call.name == "convolution":
            x, w, o, transposed = call.shapes
            if not any(call.needs_grad):
                return []
            return [("convolution_backward",
                     conv_backward_flop(o, x, w, transposed, call.needs_grad))]
        (a, b), (ra, rb) = call.shapes, call.needs_grad
        if call.name in ("mm", "addmm"):
            m, k = a
            n = b[1]
            return [("mm", m * n * 2 * k)] * (int(ra) + int(rb))
        batch, m, k = a
        n = b[2]
        return [("bmm", batch * m * n * 2 * k)] * (int(ra) + int(rb))

    # --- the context ----------------------------------------------------------------------

    def __enter__(self):
        self.flop_counts.clear()
        self._stack.clear()
        self._leaked.clear()
        self._handles = [_module.register_module_forward_pre_hook(self._pre),
                         _module.register_module_forward_hook(self._post)]
        aten_report.LISTENERS.append(self._on_call)
        self._active = True
        return self

    def __exit__(self, *args):
        self._active = False
        aten_report.LISTENERS.remove(self._on_call)
        for h in self._handles:
            h.remove()
        self._handles = []
        if self.display:
            print(self.get_table(self.depth))
        return False

    # --- the table ------------------------------------------------------------------------

    def get_table(self, depth=None) -> str:
        if depth is None:
            depth = self.depth
        if depth is None:
            depth = 999999
        header = ["Module", "FLOP", "% Total"]
        global_flops = self.get_total_flops()
        global_suffix = get_suffix_str(global_flops)
        subsumed = False

        def process_mod(mod_name, depth):
            nonlocal subsumed
            total = sum(self.flop_counts[mod_name].values())
            subsumed |= total >= global_flops
            padding = " " * depth
            rows = [[padding + mod_name, convert_num_with_suffix(total, global_suffix),
                     convert_to_percent_str(total, global_flops)]]
            for k, v in self.flop_counts[mod_name].items():
                rows.append([padding + " - " + str(k), convert_num_with_suffix(v, global_suffix),
                             convert_to_percent_str(v, global_flops)])
            return rows

        values = []
        for mod in sorted(self.flop_counts.keys()):
            if mod == "Global":
                continue
            mod_depth = mod.count(".") + 1
            if mod_depth > depth:
                continue
            values.extend(process_mod(mod, mod_depth - 1))
        if "Global" in self.flop_counts and not subsumed:
            for value in values:
                value[0] = " " + value[0]
            values = process_mod("Global", 0) + values
        if len(values) == 0:
            values = [["Global", "0", "0%"]]
        return _table(values, header, ("left", "right", "right"))
