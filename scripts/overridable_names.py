"""Write tracec/data/overridable.json: the names of the functions, Tensor
methods and Tensor properties that PyTorch's ``__torch_function__``
protocol covers (``torch.overrides.get_overridable_functions()``), by
namespace.  ``tracec.subclass_dispatch`` wraps exactly these when a Tensor
subclass appears.  Run with the torch the tests pin:

    python scripts/overridable_names.py
"""
import inspect
import json
import os

import torch
from torch.overrides import get_overridable_functions

NAMESPACES = {torch: "torch", torch.Tensor: "torch.Tensor", torch.nn.functional: "torch.nn.functional",
              torch.linalg: "torch.linalg", torch.fft: "torch.fft", torch.special: "torch.special"}


def names() -> dict:
    out = {v: set() for v in NAMESPACES.values()}
    props = set()
    for ns, fns in get_overridable_functions().items():
        key = NAMESPACES.get(ns)
        if ns is torch.functional:      # atleast_1d, einsum...: torch's own names
            key = "torch"
        if key is None:
            # a Tensor property, keyed by its descriptor (Tensor.T's getset
            # descriptor, or a Python property such as is_cuda's)
            name = getattr(ns, "__name__", None) or getattr(getattr(ns, "fget", None), "__name__", None)
            if name and any(f.__name__ == "__get__" for f in fns):
                props.add(name)
            continue
        # the name each function has in its namespace (torch.linalg.vector_norm's
        # own __name__ is "linalg_vector_norm")
        public = {}
        for n in dir(ns):
            try:
                public.setdefault(id(getattr(ns, n)), n)
            except Exception:   # noqa: BLE001 - an attribute that raises on access
                pass
        for f in fns:
            name = public.get(id(f), getattr(f, "__name__", None))
            if name == "__get__":      # a property's getter: Tensor.T.__get__
                owner = getattr(f, "__self__", None)
                props.add(getattr(owner, "__name__", None))
                continue
            if name and key == "torch.Tensor" and not callable(getattr(ns, name, None)):
                props.add(name)      # a getset descriptor (shape, T, real)
            elif name:
                out[key].add(name)
    out = {k: sorted(v) for k, v in out.items()}
    # nn.functional's functions bound from C++ (linear, conv2d): their
    # kwargs reach __torch_function__ as None when empty; the Python ones
    # pass their parameters by keyword
    out["torch.nn.functional builtins"] = sorted(
        n for n in out["torch.nn.functional"]
        if not inspect.isfunction(getattr(torch.nn.functional, n, None)))
    out["torch.Tensor properties"] = sorted(p for p in props if p)
    # torch.nn.init's functions that hand their calls to the protocol
    # (has_torch_function_variadic), every argument by keyword
    out["torch.nn.init"] = sorted(
        n for n, f in vars(torch.nn.init).items()
        if inspect.isfunction(f) and not n.startswith("_") and f.__module__ == "torch.nn.init"
        and "has_torch_function" in inspect.getsource(f))
    return out


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(__file__), "..", "tracec", "data", "overridable.json")
    with open(path, "w") as f:
        json.dump(names(), f, indent=0, sort_keys=True)
        f.write("\n")
