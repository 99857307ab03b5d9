"""``torch.jit`` for scripts that use it in passing: ``@torch.jit.script``
on a helper, ``torch.jit.trace(model, x)`` before inference, the
``ignore``/``unused``/``export`` decorators, ``is_scripting()`` checks.

tracec has no TorchScript: ``script`` and ``trace`` return what they were
given, which runs as the Python it is (TorchScript promises the same
numbers as that Python, so results are unchanged; ``tracec.compile`` is the
way to compile it).  ``save`` writes that module pickled whole, as
``torch.save(module, f)`` does (PyTorch's zip format under ``tracec run``),
and ``load`` reads it back, so "export to TorchScript, load for inference"
runs; the file is not a TorchScript archive: PyTorch's ``torch.load(f,
weights_only=False)`` reads it, ``torch.jit.load`` and libtorch do not, and
``load`` refuses a real TorchScript archive, saying so.  Neither is ever a
silently different result.
"""
from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import typing
import warnings

from tracec.nn.modules.module import Module
from tracec.futures import Future

__all__ = ["Attribute", "Error", "Final", "Future", "ScriptFunction", "ScriptModule", "annotate",
           "enable_onednn_fusion", "export", "fork", "freeze", "ignore", "interface",
           "is_scripting", "is_tracing", "isinstance", "load", "optimize_for_inference",
           "optimized_execution", "save", "script", "script_if_tracing", "script_method",
           "set_fusion_strategy", "trace", "trace_module", "unused", "wait"]

Final = typing.Final
Error = RuntimeError


class TracerWarning(Warning):
    """``torch.jit.TracerWarning`` (torch.jit._trace's): the warning the
    TorchScript tracer gives for code a trace cannot follow.  tracec's
    ``trace`` never warns; libraries import the class to filter it."""

    @staticmethod
    def ignore_lib_warnings():
        """torch's filters: TracerWarnings from torch's modules outside the JIT ignored."""
        warnings.filterwarnings("ignore", category=TracerWarning, module="torch.(?!jit)")
        warnings.filterwarnings("ignore", "torch::jit::fuser::cuda")


TracerWarning.ignore_lib_warnings()     # as importing torch.jit does
_builtin_isinstance = isinstance


def script(obj=None, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """The function or module itself (runs as Python)."""
    return obj


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None,
          check_tolerance=1e-5, strict=True, _force_outplace=False,
          _module_class=None, _compilation_unit=None, example_kwarg_inputs=None,
          _store_inputs=True):
    """The function or module itself: it already computes what a trace of it
    would (and, unlike a trace, follows its control flow for other inputs)."""
    return func


def trace_module(mod, inputs, *args, **kwargs):
    return mod


def _identity_decorator(fn=None, **kwargs):
    if fn is None:
        return lambda f: f
    return fn


ignore = unused = export = interface = script_method = _identity_decorator


def _script_if_tracing(fn):
    """``torch.jit._script_if_tracing`` (torchvision's ``encode_boxes``
    carries it): scripts ``fn`` only while ``torch.jit.trace`` runs, which
    never happens here, so the wrapper calls ``fn``; it keeps torch's
    markers (``functools.wraps``, ``__original_fn``)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    wrapper.__original_fn = fn
    wrapper.__script_if_tracing_wrapper = True
    return wrapper


def script_if_tracing(fn):
    return _script_if_tracing(fn)


def _check_overload_body(func):
    """TorchScript's check on an overload declaration: its body is ``pass``
    or ``...`` (the implementation is the undecorated definition after it)."""
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):
        warnings.warn(f"Unable to retrieve source for @torch.jit._overload function: {func}.",
                      stacklevel=3)
        return
    body = ast.parse(source).body[0].body
    ok = len(body) == 1 and (isinstance(body[0], ast.Pass) or (
        isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
        and body[0].value.value is Ellipsis))
    if not ok:
        raise RuntimeError(
            "Only `pass` statement or `...` can be the body of overload declaration:\n"
            + "\n".join(source.split("\n")[:3]) + " <- Expecting `pass` or `...` here!\n")


def _overload(func):
    """An overload declaration (``@torch.jit._overload``) for TorchScript: checked
    and returned; Python calls the implementation defined after it."""
    _check_overload_body(func)
    return func


_overload_method = _overload


def is_scripting() -> bool:
    return False


def is_tracing() -> bool:
    return False


def annotate(the_type, the_value):
    return the_value


def Attribute(value, type=None):  # noqa: N802 - PyTorch's name
    return value


def isinstance(obj, target_type) -> bool:  # noqa: A001 - PyTorch's name
    return _builtin_isinstance(obj, target_type)


def fork(func, *args, **kwargs) -> Future:
    """A completed ``torch.futures.Future`` of ``func(*args, **kwargs)``,
    run at once (PyTorch runs a fork of Python code inline too, and an
    exception raises from ``fork`` itself)."""
    out = Future()
    out.set_result(func(*args, **kwargs))
    return out


def wait(future: Future):
    return future.wait()


def freeze(mod, preserved_attrs=None, optimize_numerics: bool = True):
    return mod


def optimize_for_inference(mod, other_methods=None):
    return mod


class optimized_execution:  # noqa: N801 - PyTorch's name
    def __init__(self, should_optimize):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def set_fusion_strategy(strategy):
    return []


def enable_onednn_fusion(enabled: bool) -> None:
    """Accepted; tracec fuses in its own compiler."""


def save(m, f, _extra_files=None):
    """``m`` (what ``script`` / ``trace`` returned: the module or function
    itself) pickled whole to ``f`` (see the module doc).  Raises
    ``NotImplementedError`` for ``_extra_files``, which only a TorchScript
    archive holds."""
    if _extra_files:
        raise NotImplementedError(
            "torch.jit.save(_extra_files=...): tracec has no TorchScript archive to put extra "
            "files in; save them beside the model")
    from tracec.serialization import save as _save
    _save(m, f)


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    """The module ``save`` wrote to ``f`` (its classes must be importable,
    as for ``torch.load(f, weights_only=False)``).  A TorchScript archive
    PyTorch wrote raises ``CheckpointError`` saying so: tracec does not run
    TorchScript code."""
    from tracec.serialization import load as _load
    obj = _load(f, map_location=map_location, weights_only=False)
    if not callable(obj):
        raise RuntimeError(f"torch.jit.load: {f!r} holds a {type(obj).__name__}, not a module "
                           "saved with torch.jit.save")
    if _extra_files:
        raise NotImplementedError("torch.jit.load(_extra_files=...): tracec's saved modules "
                                  "hold no extra files")
    return obj


class _ScriptModuleMeta(type):
    def __instancecheck__(cls, obj):
        return False


class ScriptModule(Module):
    """The legacy TorchScript base class (``class RWKV_RNN(torch.jit.ScriptModule)``
    with ``@torch.jit.script_method`` methods, as RWKV's code writes it): an
    ``nn.Module`` whose script methods run as the Python they are.  Only
    instances of such subclasses are ScriptModules: ``script(m)`` returns
    ``m`` itself, which is not one."""


class ScriptFunction(metaclass=_ScriptModuleMeta):
    """No object is a ScriptFunction under tracec."""
