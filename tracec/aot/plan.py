"""Which pointer parameter of a built library is which: the trace's inputs
and outputs mapped to named C buffers, each with its Python name, its kind
(parameter, buffer, optimizer state...), its shape, dtype and access.

Invariant: every trace input is one buffer (``in_index``) and every
non-empty trace output is written to one buffer (``out_indices``); a state
tensor read and written is one buffer, updated in place.
"""
from __future__ import annotations

import re

import numpy as np

from tracec import dtypes as dt
from tracec.pytree import path_name
from tracec.symbolic import parse
from tracec.tensor import Tensor

_CTYPE = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t",
          "int16": "int16_t", "int8": "int8_t", "uint8": "uint8_t", "uint16": "uint16_t",
          "uint32": "uint32_t", "uint64": "uint64_t",
          "bool": "bool", "float16": "uint16_t", "bfloat16": "float"}  # bfloat16 is stored as float32

#: Kinds of buffers, as the header's ``TRACEC_ROLE_*`` constants number them.
ROLES = ("input", "output", "parameter", "buffer", "optimizer_state", "hyperparameter",
         "rng_state", "state", "gradient")
#: Kinds whose buffers ``NAME_init_state`` writes (the step's state).
STATE_KINDS = ("parameter", "buffer", "optimizer_state", "hyperparameter", "rng_state",
               "state", "gradient")


def _ident(name: str) -> str:
    s = re.sub(r"\W+", "_", name).strip("_") or "arg"
    return ("_" + s) if s[0].isdigit() else s


def storage_itemsize(d) -> int:
    """Bytes per element in memory (bfloat16 is held as float32)."""
    return np.dtype(d.np).itemsize


def scope_objects(fn) -> dict:
    """What ``fn`` reaches by name: its globals and its closure's cells."""
    scopes = dict(getattr(fn, "__globals__", {}))
    for cell, var in zip(getattr(fn, "__closure__", None) or (),
                         getattr(getattr(fn, "__code__", None), "co_freevars", ())):
        try:
            scopes[var] = cell.cell_contents
        except ValueError:
            pass
    return scopes


def describe_state(fn) -> dict:
    """``id(tensor) -> (Python name, kind)`` for tensors the function reaches
    through globals and closures: module parameters and buffers, optimizer
    state and hyperparameter holders, generators' states, global tensors."""
    from tracec import nn, optim
    from tracec.creation import Generator, default_generator
    out = {id(default_generator.state): ("rng_state", "rng_state")}
    scopes = scope_objects(fn)
    params = {}
    for var, obj in scopes.items():
        if isinstance(obj, nn.Module):
            for n, p in obj.named_parameters():
                out.setdefault(id(p), (f"{var}.{n}", "parameter"))
                params[id(p)] = f"{var}.{n}"
            for n, b in obj.named_buffers():
                out.setdefault(id(b), (f"{var}.{n}", "buffer"))
        elif isinstance(obj, Tensor):
            out.setdefault(id(obj), (var, "state"))
        elif isinstance(obj, Generator):
            out.setdefault(id(obj.state), (f"{var}.state", "rng_state"))
    for var, obj in scopes.items():
        if isinstance(obj, optim.Optimizer):
            for gi, holder in enumerate(obj.__dict__.get("_lr_holders", ())):
                out.setdefault(id(holder), (f"{var}.lr.group{gi}", "hyperparameter"))
            for key, holders in obj.__dict__.get("_hyper_holders", {}).items():
                for gi, holder in enumerate(holders):    # a cycled momentum / beta1
                    out.setdefault(id(holder), (f"{var}.{key}.group{gi}", "hyperparameter"))
            for gi, g in enumerate(obj.param_groups):
                for pi, p in enumerate(g["params"]):
                    pname = params.get(id(p), f"group{gi}.param{pi}")
                    for k, v in obj.state.get(p, {}).items():
                        if isinstance(v, Tensor):
                            out.setdefault(id(v), (f"{var}.{k}.{pname}", "optimizer_state"))
    return out


def state_names(fn) -> dict:
    """``id(tensor) -> Python name`` (``describe_state`` without kinds)."""
    return {k: name for k, (name, _) in describe_state(fn).items()}


class Buffer:
    """One pointer parameter of the generated C function."""

    def __init__(self, name, shape, dtype, role, kind="input", source=None):
        self.name, self.shape, self.dtype, self.role = name, tuple(shape), dtype, role
        self.kind = kind            # one of ROLES
        self.source = source or name
        self.in_index = None        # the trace input it feeds
        self.out_indices = []       # the trace outputs written into it
        self.obj = None             # the tensor it stands for (state and gradients)

    @property
    def ctype(self):
        return _CTYPE[self.dtype.name]

    @property
    def is_state(self) -> bool:
        """Read by the step and not an argument of the function: ``init_state``
        sets it (and a write-only state buffer, the caller's copy of it)."""
        return self.kind in STATE_KINDS and (self.kind != "gradient" or self.in_index is not None)

    @property
    def itemsize(self) -> int:
        return storage_itemsize(self.dtype)

    @property
    def nbytes(self) -> int:
        n = self.itemsize
        for s in self.shape:
            n *= s
        return n

    def decl(self):
        const = "const " if self.role == "input" else ""
        return f"{const}{self.ctype} *{self.name}"

    def doc(self):
        shape = "[" + ", ".join(map(str, self.shape)) + "]"
        what = f"; {self.kind.replace('_', ' ')} {self.source}" \
            if self.kind not in ("input", "output") else ""
        return f"{self.name}: {self.dtype.name}{shape}, {self.role}{what}"


def plan_buffers(entry, fn, arg_names, signature=None) -> list[Buffer]:
    """Map the trace's inputs and outputs to the C function's parameters
    (``signature``: the executable's, default ``entry.executable``'s;
    output sizes that depend on named sizes are ``Sym``)."""
    if signature is None:
        signature = entry.executable.signature
    names = describe_state(fn)
    trace = entry.trace
    bufs, by_obj = [], {}
    used = {"tc_in", "tc_out", "tc_ws", "tc_rc", "tc_k", "tc_ncpu", "errors", "argv"}

    def unique(n):
        n = _ident(n)
        base, k = n, 1
        while n in used:
            k += 1
            n = f"{base}_{k}"
        used.add(n)
        return n

    for i, spec in enumerate(trace.inputs):
        if spec.kind == "arg":
            src = path_name(spec.source, arg_names)
            b = Buffer(unique(src), spec.shape, spec.dtype, "input", "input", src)
            by_obj.setdefault(("arg", spec.source), b)
        elif spec.kind == "state":
            name, kind = names.get(id(spec.source), (f"state{i}", "state"))
            role = ("learning rate, read at each call (set it to follow a schedule)"
                    if ".lr.group" in name else "state (read)")
            b = Buffer(unique(name), spec.shape, spec.dtype, role, kind, name)
            b.obj = spec.source
            by_obj[("t", id(spec.source))] = b
        else:
            pname = names.get(id(spec.source), (f"param{i}",))[0]
            b = Buffer(unique(f"{pname}.grad"), spec.shape, spec.dtype, "gradient (read)",
                       "gradient", f"{pname}.grad")
            by_obj[("g", id(spec.source))] = b
        b.in_index = i
        bufs.append(b)
    out_i = 0
    n_ret = 0
    for spec in trace.outputs:
        if spec.kind in ("grad_none", "attr_const"):     # (no array: nothing to pass)
            continue
        shape, dtype = signature["outputs"][out_i]
        shape = tuple(parse(d) if isinstance(d, str) else d for d in shape)
        dtype = dt.to_dtype(dtype)
        if spec.kind == "return":
            name = f"out{n_ret}" if n_ret else "out"
            b = Buffer(unique(name), shape, dtype, "output", "output", name)
            n_ret += 1
            bufs.append(b)
        elif spec.kind == "write":
            b = by_obj.get(("arg", spec.arg) if spec.arg is not None else ("t", id(spec.target)))
            if b is None:
                name, kind = names.get(id(spec.target), (f"state_out{out_i}", "state"))
                b = Buffer(unique(name), shape, dtype, "state (written)", kind, name)
                b.obj = spec.target
                by_obj[("t", id(spec.target))] = b
                bufs.append(b)
            else:
                b.role = ("input, written in place" if spec.arg is not None
                          else "state (read and written in place)")
        else:
            key = ("g", id(spec.target))
            b = by_obj.get(key)
            if b is None:
                pname = names.get(id(spec.target), (f"param{out_i}",))[0]
                b = Buffer(unique(f"{pname}.grad"), shape, dtype, "gradient (written)",
                           "gradient", f"{pname}.grad")
                by_obj[key] = b
                bufs.append(b)
            else:
                b.role = "gradient (accumulated in place)"
        b.out_indices.append(out_i)
        out_i += 1
    return bufs
