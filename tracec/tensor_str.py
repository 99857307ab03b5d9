"""``repr(tensor)`` exactly as PyTorch prints it, and the print options
(``set_printoptions``, ``get_printoptions``, ``printoptions``).

Programs print tensors all the time, and users compare the text with what
PyTorch printed; NumPy's ``array2string`` differs in spacing, line breaks,
scientific-notation choice and summarization.  NumPy has no formatter with
PyTorch's rules, so this is a hand-written port of their algorithm (the
formatter picks one width and notation for the whole tensor from its
nonzero finite values; rows wrap at ``linewidth``; tensors over
``threshold`` elements show ``edgeitems`` at each end; suffixes such as
``dtype=`` and ``grad_fn=`` wrap when the line would exceed ``linewidth``).
Invariant: reads only ``tensor._data`` (never autograd or the tracer).
"""
from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np

__all__ = ["PRINT_OPTS", "get_printoptions", "printoptions", "set_printoptions", "tensor_repr"]


@dataclasses.dataclass
class _PrinterOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


PRINT_OPTS = _PrinterOptions()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None) -> None:
    """PyTorch's ``torch.set_printoptions`` (profiles default/short/full)."""
    if profile is not None:
        presets = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80),
                   "full": (4, math.inf, 3, 80)}
        if profile not in presets:
            raise ValueError(f"set_printoptions(): unknown profile {profile!r} "
                             "(expected 'default', 'short' or 'full')")
        (PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems,
         PRINT_OPTS.linewidth) = presets[profile]
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions() -> dict:
    return dataclasses.asdict(PRINT_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs):
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    def __init__(self, a: np.ndarray, floating: bool):
        self.floating = floating
        self.int_mode, self.sci_mode, self.max_width = True, False, 1
        p = PRINT_OPTS.precision
        flat = a.reshape(-1)
        if not floating:
            for v in flat.tolist():
                self.max_width = max(self.max_width, len(f"{v}"))
            return
        vals = flat[np.isfinite(flat) & (flat != 0)]
        if vals.size == 0:
            return
        absv = np.abs(vals).astype(np.float64)
        lo, hi = absv.min(), absv.max()
        self.int_mode = bool(np.all(vals == np.ceil(vals)))
        self.sci_mode = (hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
                         if PRINT_OPTS.sci_mode is None else PRINT_OPTS.sci_mode)
        items = vals.tolist()
        if self.sci_mode:
            w = max(len(f"{v:.{p}e}") for v in items)
        elif self.int_mode:
            w = max(len(f"{v:.0f}") for v in items) + 1
        else:
            w = max(len(f"{v:.{p}f}") for v in items)
        self.max_width = max(self.max_width, w)

    def format(self, v) -> str:
        p = PRINT_OPTS.precision
        if self.floating:
            if self.sci_mode:
                s = f"{v:{self.max_width}.{p}e}"
            elif self.int_mode:
                s = f"{v:.0f}"
                if not (math.isinf(v) or math.isnan(v)):
                    s += "."
            else:
                s = f"{v:.{p}f}"
        else:
            s = f"{v}"
        return (self.max_width - len(s)) * " " + s


class _ComplexFormatter:
    """PyTorch's complex printing: one formatter for the real parts, one for
    the imaginary parts; an element is ``real`` then the signed ``imag`` and
    ``j`` (its width counts both, plus the ``j``)."""

    def __init__(self, a: np.ndarray):
        self.re, self.im = _Formatter(a.real, True), _Formatter(a.imag, True)
        self.max_width = self.re.max_width + self.im.max_width + 1

    def format(self, v) -> str:
        re = self.re.format(v.real)
        im = (self.im.format(v.imag) + "j").lstrip()
        return re + im if im[0] in "+-" else re + "+" + im


def _vector_str(a, indent, summarize, fmt) -> str:
    per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / (fmt.max_width + 2)))
    e = PRINT_OPTS.edgeitems
    if summarize and not e:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * e:
        data = ([fmt.format(v) for v in a[:e].tolist()] + [" ..."]
                + [fmt.format(v) for v in a[-e:].tolist()])
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(a, indent, summarize, fmt) -> str:
    if a.ndim == 0:
        return fmt.format(a[()] if np.iscomplexobj(a) else a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    e = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * e:
        rows = ([_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."]
                + [_tensor_str(a[i], indent + 1, summarize, fmt)
                   for i in range(a.shape[0] - e, a.shape[0])])
    else:
        rows = [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _summarized(a):
    """The elements a summarized print shows (the formatter sees only those)."""
    e = PRINT_OPTS.edgeitems
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        return np.concatenate((a[:e], a[-e:])) if a.shape[0] > 2 * e else a
    if not e:
        return np.empty((0,) * a.ndim, a.dtype)
    idx = (list(range(e)) + list(range(a.shape[0] - e, a.shape[0]))
           if a.shape[0] > 2 * e else range(a.shape[0]))
    return np.stack([_summarized(a[i]) for i in idx])


def _add_suffixes(text, suffixes, indent, force_newline=False) -> str:
    out = [text]
    last = len(text) - text.rfind("\n") + 1
    for s in suffixes:
        if force_newline or last + len(s) + 2 > PRINT_OPTS.linewidth:
            out.append(",\n" + " " * indent + s)
            last = indent + len(s)
            force_newline = False
        else:
            out.append(", " + s)
            last += len(s) + 2
    out.append(")")
    return "".join(out)


def body_text(a: np.ndarray, floating: bool, indent: int) -> str:
    """PyTorch's ``_tensor_str``: the bracketed elements of ``a`` (``[]`` when
    empty), continued lines indented by ``indent``."""
    if a.size == 0:
        return "[]"
    summarize = a.size > PRINT_OPTS.threshold
    shown = _summarized(a) if summarize else a
    fmt = _ComplexFormatter(shown) if np.iscomplexobj(a) else _Formatter(shown, floating)
    return _tensor_str(a, indent, summarize, fmt)


def tensor_repr(a: np.ndarray, floating: bool, suffixes: list, dtype_text: str,
                has_default_dtype: bool, is_default_dtype: bool, prefix: str = "tensor(") -> str:
    """PyTorch's text for a dense tensor holding ``a``.  ``dtype_text``
    (``torch.int32``) is shown unless ``has_default_dtype`` (the default
    float dtype, int64 or bool) -- for an empty tensor, unless
    ``is_default_dtype``; ``suffixes`` (``grad_fn=<...>``) follow it."""
    indent = len(prefix)
    pre = []
    if a.size == 0:
        if a.ndim != 1:
            pre.append("size=" + str(tuple(a.shape)))
        if not is_default_dtype:
            pre.append("dtype=" + dtype_text)
        body = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            pre.append("size=" + str(tuple(a.shape)))
        if not has_default_dtype:
            pre.append("dtype=" + dtype_text)
        summarize = a.size > PRINT_OPTS.threshold
        shown = _summarized(a) if summarize else a
        fmt = _ComplexFormatter(shown) if np.iscomplexobj(a) else _Formatter(shown, floating)
        body = _tensor_str(a, indent, summarize, fmt)
    return _add_suffixes(prefix + body, pre + list(suffixes), indent)
