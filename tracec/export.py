"""``torch.export``: ``export(mod, args)`` captures a module's forward as one
tracec program, ``ExportedProgram``, whose ``.module()`` runs it.

The capture is a ``tracec.compile`` recording (``tracing.record``) of
``functional_call(mod, state, args, kwargs)``: the module's parameters and
buffers are inputs of the recorded IR, not constants, so the program runs
with whatever values its ``state_dict`` holds (``ep.module()``'s parameters
are the exported module's tensors, as PyTorch's are).  Dimensions given a
``Dim`` in ``dynamic_shapes`` are symbols of the IR; a call binds them from
its arguments' sizes, checks the ``Dim``'s range and the size decisions the
trace made, and runs native code specialized for those sizes (cached per
size).  ``.graph_module`` / ``.graph`` / ``print(ep)`` show tracec's IR (an
MLIR module, not an FX graph).

``save`` / ``load`` write and read the program through ``tracec.save``
(tensors, numbers and strings: the IR's text and JSON descriptions), so a
loaded program needs neither the module's Python code nor pickle.

Invariants: an exported program computes what the module's forward
computed for the example inputs' structure, dtypes and static sizes, and
refuses (``AssertionError: Guard failed: ...``, as PyTorch) a call outside
them; outputs are values (no autograd graph: ``.module()`` is for
inference, as a deployed program is); the program never reads the module.
"""
from __future__ import annotations

import builtins
import inspect
import json
import math

import numpy as np

from tracec import graph, ir
from tracec.creation import from_numpy
from tracec.func import functional_call
from tracec.ir.printing import parse_module
from tracec.ir.specialize import specialize
from tracec.nn import Module, Parameter
from tracec.passes.pipeline import AUTODIFF, OPTIMIZE, run_passes
from tracec.serialization import load as _load, save as _save
from tracec.pytree import path_name, resolve
from tracec.sym_shapes import SymbolTable
from tracec.library import _opaque
from tracec.tensor import Tensor, concrete
from tracec.tracing import TraceError, record

__all__ = ["Dim", "ExportedProgram", "dims", "export", "load", "save", "ShapesCollection"]

_FORMAT = "tracec.export/1"


class ExportConstraintError(RuntimeError):
    """A ``Dim`` the forward does not serve (PyTorch raises its ``UserError``
    with the same first words: ``Constraints violated (name)!``)."""


class Dim:
    """``torch.export.Dim(name, min=None, max=None)``: a symbolic size.
    ``Dim.AUTO`` / ``Dim.DYNAMIC`` make a dimension symbolic under a name
    tracec picks; ``Dim.STATIC`` keeps it fixed."""

    def __init__(self, name: str, *, min=None, max=None):  # noqa: A002
        lo = 0 if min is None else min
        hi = math.inf if max is None else max
        if lo > hi:
            raise ValueError(f"Cannot create Dim with inconsistent min={min}, max={max}")
        self.__name__, self.min, self.max = name, lo, hi

    def __repr__(self) -> str:
        parts = [repr(self.__name__)]
        if self.min != 2:
            parts.append(f"min={self.min}")
        if self.max != math.inf:
            parts.append(f"max={self.max}")
        return f"Dim({', '.join(parts)})"


class _DimHint:
    def __init__(self, kind: str):
        self.kind = kind

    def __repr__(self) -> str:
        return f"DimHint({self.kind})"


Dim.AUTO, Dim.DYNAMIC, Dim.STATIC = _DimHint("AUTO"), _DimHint("DYNAMIC"), _DimHint("STATIC")


def dims(*names: str, min=None, max=None):  # noqa: A002
    """``torch.export.dims("a", "b")``: one ``Dim`` per name."""
    return tuple(Dim(n, min=min, max=max) for n in names)


class ShapesCollection(dict):
    """``torch.export.ShapesCollection``: ``{tensor: {dim: Dim}}`` (keyed by
    the tensor object), turned into ``dynamic_shapes`` for ``export``."""

    def __setitem__(self, t, spec):
        super().__setitem__(id(t), (t, spec))

    def dynamic_shapes(self, m, args, kwargs=None):
        by_id = {k: spec for k, (t, spec) in self.items()}
        return tuple(by_id.get(id(a)) for a in args)


# --- structure of arguments and results (JSON-able) ------------------------------

def _encode(x, tensors: list):
    """``x`` with its tensors replaced by indices into ``tensors``."""
    if isinstance(x, Tensor):
        tensors.append(x)
        return {"t": len(tensors) - 1}
    if isinstance(x, (list, tuple)):
        return {"list" if isinstance(x, list) else "tuple": [_encode(v, tensors) for v in x]}
    if isinstance(x, dict):
        return {"dict": [[k, _encode(v, tensors)] for k, v in x.items()]}
    if x is None or isinstance(x, (bool, int, float, str)):
        return {"v": x}
    raise TypeError(f"torch.export: cannot export a {type(x).__name__} in the inputs or "
                    "outputs (tensors, numbers, strings, None, and lists, tuples and dicts "
                    "of them)")


def _decode(s, tensors: list):
    if "t" in s:
        return tensors[s["t"]]
    if "list" in s:
        return [_decode(v, tensors) for v in s["list"]]
    if "tuple" in s:
        return tuple(_decode(v, tensors) for v in s["tuple"])
    if "dict" in s:
        return {k: _decode(v, tensors) for k, v in s["dict"]}
    return s["v"]


# --- export ------------------------------------------------------------------------

def _dynamic_dims(mod, args, kwargs, dynamic_shapes) -> tuple[dict, dict, dict]:
    """(``{arg path: {dim: symbol name}}`` for ``SymbolTable``, its reasons,
    ``{symbol: (min, max)}``) from ``dynamic_shapes``."""
    if dynamic_shapes is None:
        return {}, {}, {}
    names = list(inspect.signature(mod.forward).parameters)
    if isinstance(dynamic_shapes, dict):
        per_arg = [(i + 1, dynamic_shapes.get(names[i]) if i < len(names) else None)
                   for i in range(len(args))]
        per_arg += [(k, dynamic_shapes.get(k)) for k in kwargs]
    else:
        per_arg = [(i + 1, s) for i, s in enumerate(dynamic_shapes)]
    dynamic, why, ranges = {}, {}, {}
    auto = 0
    leaves = []

    def walk(path, spec, arg):
        # ``spec`` mirrors ``arg``: at a tensor, ``{dim: Dim}`` (or a list of
        # them by dim); in a dict, list or tuple, one spec per element
        if spec is None:
            return
        if isinstance(arg, Tensor):
            if isinstance(spec, (list, tuple)):
                spec = {d: s for d, s in enumerate(spec) if s is not None}
            leaves.append((path, spec))
            return
        if not isinstance(arg, (dict, list, tuple)):
            return
        items = arg.items() if isinstance(arg, dict) else enumerate(arg)
        for k, v in items:
            step = ("k", k) if isinstance(arg, dict) else ("i", k)
            sub = spec.get(k) if isinstance(spec, dict) else (spec[k] if k < len(spec) else None)
            walk((path if isinstance(path, tuple) else (path,)) + (step,), sub, v)
    for path, spec in per_arg:
        walk(path, spec, args[path - 1] if isinstance(path, int) else kwargs[path])
    for path, spec in leaves:
        for d, dim in spec.items():
            if isinstance(dim, _DimHint):
                if dim.kind == "STATIC":
                    continue
                auto += 1
                dim = Dim(f"s{auto}", min=2)
            if not isinstance(dim, Dim):
                raise ValueError(f"torch.export: dynamic_shapes entries must be Dim objects, "
                                 f"got {dim!r}")
            dynamic.setdefault(path, {})[d] = dim.__name__
            why[(path, d)] = f"torch.export {dim!r}"
            ranges[dim.__name__] = (dim.min, dim.max)
    return dynamic, why, ranges


def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict: bool = False,
           preserve_module_call_signature=(), **_options) -> "ExportedProgram":
    """Capture ``mod(*args, **kwargs)`` (see the module docstring)."""
    if not isinstance(mod, Module):
        raise ValueError(f"Expected `mod` to be an instance of `torch.nn.Module`, got "
                         f"{type(mod)}.")
    if not isinstance(args, tuple):
        raise ValueError(f"Expected `args` to be a tuple, got {type(args)}")
    kwargs = dict(kwargs or {})
    state = dict(mod.named_parameters(remove_duplicate=False))
    state.update(mod.named_buffers(remove_duplicate=False))
    dynamic, why, ranges = _dynamic_dims(mod, args, kwargs, dynamic_shapes)

    before = {k: v.detach().clone() for k, v in mod.named_buffers(remove_duplicate=False)}

    def forward(state_, *a, **k):
        return functional_call(mod, state_, a, k)
    forward.__name__ = type(mod).__name__
    with graph.no_grad():
        result, trace = record(forward, (state,) + args, kwargs, forward.__name__,
                               symbols=SymbolTable(dynamic, why) if dynamic else None)
    if isinstance(trace, str):
        # the forward ran eagerly (a custom op computing in NumPy): nothing to export
        raise TraceError(f"torch.export: {type(mod).__name__}.forward cannot be captured: "
                         f"{trace}")
    inputs = []
    for spec in trace.inputs:
        if spec.kind == "arg" and isinstance(spec.source, tuple) and spec.source[0] == 0:
            inputs.append(["state", spec.source[1][1]])
        elif spec.kind == "arg":
            inputs.append(["arg", spec.source if isinstance(spec.source, (int, str)) else
                           list(spec.source)])
        else:
            raise TraceError(f"torch.export: the forward reads the tensor {spec.name} that is "
                             "neither an argument nor a parameter or buffer of the module; "
                             "register it as a buffer")
        inputs[-1].append([n if isinstance(n, int) else str(n) for n in spec.shape])
    bad = [o.name for o in trace.outputs if o.kind != "return"]
    if bad:
        with graph.no_grad():      # the recording ran the forward: undo its writes
            for name, t in before.items():
                state[name].copy_(t)
        raise TraceError(f"torch.export: the forward writes {', '.join(bad)} (a buffer "
                         "updated in training mode); export the module in eval() mode")
    outs: list = []
    out_struct = _encode(result, outs)
    guards = []
    if trace.symbolic is not None:
        guards = [[lhs, op, rhs, res] for kind, lhs, op, rhs, res, _ in trace.symbolic.guards
                  if kind == "compare"]
        # symbols the trace merged or specialized keep the range of the Dim
        # they came from
    used = {n for _, _, shape in inputs for n in shape if isinstance(n, str)}
    lost = sorted(set(ranges) - used)
    if lost:
        # the trace found these sizes equal to a number or to another Dim
        raise ExportConstraintError(
            f"Constraints violated ({', '.join(lost)})! The forward does not serve every "
            f"value of {', '.join(lost)} in its range: the trace made it a constant or equal "
            "to another dimension (a view to a fixed size, a broadcast with a fixed size). "
            "Use one Dim for dimensions that must be equal, or no Dim for a fixed size.")
    arg_names = list(inspect.signature(mod.forward).parameters)
    persistent = set(mod.state_dict())
    return ExportedProgram({
        "format": _FORMAT, "ir": ir.print_module(trace.module), "inputs": inputs,
        "outputs": out_struct, "guards": guards, "arg_names": arg_names,
        "ranges": {k: [v[0], None if v[1] == math.inf else v[1]] for k, v in ranges.items()
                   if k in used},
        "training": mod.training, "name": type(mod).__name__,
        "persistent": [k for k in state if k in persistent],
        "n_args": len(args), "kwargs": sorted(kwargs)}, state)


# --- the program ---------------------------------------------------------------------

class _IRText(str):
    """``ep.graph``: the IR's text (prints as it; ``print_readable()``)."""

    def print_readable(self, print_output: bool = True):
        if print_output:
            print(self)
        return str(self)


class _GraphModule:
    """``ep.graph_module``: tracec's IR of the program (``.graph``, ``.code``)."""

    def __init__(self, text: str):
        self.graph = _IRText(text)
        self.code = self.graph

    def print_readable(self, print_output: bool = True):
        return self.graph.print_readable(print_output)

    def __str__(self) -> str:
        return str(self.graph)


class ExportedProgram:
    """What ``export`` returns (see the module docstring)."""

    def __init__(self, meta: dict, state: dict, backend: str | None = None):
        self._meta = meta
        self._state = state
        self._backend = backend
        self._exes: dict = {}
        self.graph_module = _GraphModule(meta["ir"])
        self.graph = self.graph_module.graph
        self.range_constraints = {k: (lo, math.inf if hi is None else hi)
                                  for k, (lo, hi) in meta["ranges"].items()}

    @property
    def state_dict(self) -> dict:
        """The parameters and persistent buffers (the module's own tensors)."""
        return {k: self._state[k] for k in self._meta["persistent"]}

    @property
    def constants(self) -> dict:
        """Non-persistent buffers."""
        keep = set(self._meta["persistent"])
        return {k: v for k, v in self._state.items() if k not in keep}

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Unable to call ExportedProgram directly. You should use "
                           "`exported_program.module()` instead.")

    def __str__(self) -> str:
        body = "\n".join("    " + line for line in self._meta["ir"].splitlines())
        ranges = "\n".join(f"    {k}: VR[{lo}, {'int_oo' if hi == math.inf else hi}]"
                           for k, (lo, hi) in self.range_constraints.items())
        return f"ExportedProgram:\n{body}\nRange constraints: {{{ranges.strip()}}}\n"

    def module(self) -> Module:
        """An ``nn.Module`` running the program on its own parameters and
        buffers (``ep.state_dict``'s tensors)."""
        return _ExportedModule(self)

    def run_decompositions(self, decomp_table=None, decompose_custom_triton_ops=False):
        """The program itself: tracec's IR is made of primitives already."""
        return ExportedProgram(self._meta, dict(self._state), self._backend)

    # --- running -------------------------------------------------------------------

    def _check(self, args, kwargs) -> dict:
        """The symbols' sizes at this call, after PyTorch's checks."""
        names = self._meta["arg_names"]
        if len(args) != self._meta["n_args"] or sorted(kwargs) != self._meta["kwargs"]:
            raise TypeError(f"Trying to flatten user inputs with exported input tree spec: "
                            f"expected {self._meta['n_args']} positional and keyword "
                            f"arguments {self._meta['kwargs']}, got {len(args)} and "
                            f"{sorted(kwargs)}")
        env: dict = {}
        for kind, where, shape in self._meta["inputs"]:
            if kind != "arg":
                continue
            t = _resolve(where, args, kwargs)
            label = _label(where, names)
            if not isinstance(t, Tensor):
                raise AssertionError(f"Guard failed: {label} is not a tensor")
            if t.ndim != len(shape):
                raise AssertionError(f"Guard failed: {label}.dim() == {len(shape)}")
            for d, n in enumerate(shape):
                size = t.shape[d]
                if isinstance(n, int):
                    if size != n:
                        raise AssertionError(f"Guard failed: {label}.size()[{d}] == {n}")
                    continue
                lo, hi = self.range_constraints.get(n, (2, math.inf))
                if size < builtins.max(lo, 2):
                    raise AssertionError(f"Guard failed: {label}.size()[{d}] >= "
                                         f"{builtins.max(lo, 2)}")
                if size > hi:
                    raise AssertionError(f"Guard failed: {label}.size()[{d}] <= {hi}")
                if env.setdefault(n, size) != size:
                    raise AssertionError(f"Guard failed: {label}.size()[{d}] == {env[n]}")
        from tracec.symbolic import failed_size_guard, parse
        bad = failed_size_guard(sorted(env), [[parse(a), op, parse(b), r]
                                              for a, op, b, r in self._meta["guards"]], env)
        if bad is not None:
            raise AssertionError(f"Guard failed: {bad}")
        return env

    def _executable(self, env: dict):
        key = tuple(sorted(env.items()))
        exe = self._exes.get(key)
        if exe is None:
            from tracec.compiler import BACKENDS, default_backend
            module = parse_module(self._meta["ir"])
            if env:
                module = specialize(module, env)
            run_passes(AUTODIFF, module)
            run_passes(OPTIMIZE, module)
            exe = self._exes[key] = BACKENDS[self._backend or default_backend()] \
                .compile_module(module)
        return exe

    def _run(self, state: dict, args, kwargs):
        env = self._check(args, kwargs)
        arrays = []
        # Inside a traced call (tracec.compile of ep.module()) the program's
        # run is opaque: reading its inputs makes that call run eagerly,
        # never a trace with this call's outputs frozen in.
        with _opaque(f"the exported program of {self._meta.get('name', 'a module')}"):
            for kind, where, _ in self._meta["inputs"]:
                t = state[where] if kind == "state" else _resolve(where, args, kwargs)
                arrays.append(concrete(t.detach().contiguous(), "numpy()"))
        outs = self._executable(env)(arrays)
        return _decode(self._meta["outputs"], [from_numpy(np.asarray(o)) for o in outs])


def _resolve(where, args, kwargs):
    """The argument at ``where``: a recorded path (``tracec.pytree``; JSON
    made its tuples lists) into ``(state,) + args``, so positions are one
    more than in ``args``."""
    if isinstance(where, list):
        where = (where[0],) + tuple(tuple(step) for step in where[1:])
    try:
        return resolve(where, (None,) + tuple(args), kwargs)
    except (IndexError, KeyError, AttributeError, TypeError):
        raise TypeError(f"torch.export: the call's arguments have no input at "
                        f"{path_name(where)} (the exported inputs' structure)") from None


def _label(where, names) -> str:
    """PyTorch's name of an input in guard messages: ``x``, ``batch['a']``."""
    if isinstance(where, list):
        where = (where[0],) + tuple(tuple(step) for step in where[1:])
    shifted = (where - 1 if isinstance(where, int) else
               (where[0] - 1,) + where[1:] if isinstance(where, tuple) and
               isinstance(where[0], int) else where)
    return path_name(shifted, names)


class _ExportedModule(Module):
    """``ep.module()``: parameters and buffers under the exported names
    (``0.weight`` becomes the attribute path ``0`` / ``weight``)."""

    def __init__(self, ep: ExportedProgram):
        super().__init__()
        self._ep = ep
        keep = set(ep._meta["persistent"])
        for name, t in ep._state.items():
            owner, _, leaf = name.rpartition(".")
            mod = self
            for part in owner.split(".") if owner else ():
                if part not in mod._modules:
                    mod.add_module(part, Module())
                mod = mod._modules[part]
            if isinstance(t, Parameter):
                mod.register_parameter(leaf, t)
            else:
                mod.register_buffer(leaf, t, persistent=name in keep)
        self.train(ep._meta["training"])

    def forward(self, *args, **kwargs):
        state = dict(self.named_parameters(remove_duplicate=False))
        state.update(self.named_buffers(remove_duplicate=False))
        return self._ep._run(state, args, kwargs)


# --- save / load ----------------------------------------------------------------------

def save(ep: ExportedProgram, f, *, extra_files=None, opset_version=None,
         pickle_protocol: int = 2) -> None:
    """Write ``ep`` with ``tracec.save``: the IR's text, JSON descriptions
    and the state tensors (no code, no pickle)."""
    if not isinstance(ep, ExportedProgram):
        raise TypeError(f"The 'ep' parameter must be an instance of 'ExportedProgram', got "
                        f"'{type(ep).__name__}' instead.")
    state = {k: v.detach() for k, v in ep._state.items()}
    _save({"format": _FORMAT, "meta": json.dumps(ep._meta), "state": state,
           "parameters": [k for k, v in ep._state.items() if isinstance(v, Parameter)],
           "extra_files": dict(extra_files or {})}, f)


def load(f, *, extra_files=None, expected_opset_version=None) -> ExportedProgram:
    """Read what ``save`` wrote."""
    obj = _load(f)
    if not isinstance(obj, dict) or obj.get("format") != _FORMAT:
        raise RuntimeError("torch.export.load: not an exported program written by "
                           "tracec.export.save")
    params = set(obj["parameters"])
    state = {k: Parameter(v) if k in params else v for k, v in obj["state"].items()}
    if extra_files is not None:
        extra_files.update(obj.get("extra_files", {}))
    return ExportedProgram(json.loads(obj["meta"]), state)
