"""Write tracec/data/torch_names.json: for every public class and function
of tracec that PyTorch (or torchvision) has under the same public name, the
name a pickle of PyTorch's object carries (``module``, ``qualname``: what
``torch.save(model, f)`` writes for it), keyed by tracec's own
``module:qualname``.  ``tracec.torch_names`` reads it both ways: to write
whole objects in PyTorch's format (``torch.save(model)`` under
``tracec run`` gives a file PyTorch loads) and to resolve the names in a
PyTorch pickle to tracec's objects (``torch.load(f, weights_only=False)``).

Run with the torch (and torchvision) the tests pin:

    python scripts/torch_names.py
"""
import importlib
import inspect
import json
import os
import pickle
import pickletools
import sys
import types

# torchvision's compiled ops are not needed to read its names
for _m in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
    sys.modules.setdefault(_m, types.ModuleType(_m))

import torch  # noqa: E402
import torchvision  # noqa: E402,F401

import tracec  # noqa: E402,F401
from tracec import torch_names  # noqa: E402

#: (tracec namespace, PyTorch namespace), most specific first: an object
#: several namespaces export takes the first one's name
SPACES = [
    ("tracec.nn.functional", "torch.nn.functional"),
    ("tracec.nn.init", "torch.nn.init"),
    ("tracec.nn.utils.rnn", "torch.nn.utils.rnn"),
    ("tracec.nn.utils.parametrize", "torch.nn.utils.parametrize"),
    ("tracec.nn.utils.parametrizations", "torch.nn.utils.parametrizations"),
    ("tracec.nn.utils", "torch.nn.utils"),
    ("tracec.nn.parameter", "torch.nn.parameter"),
    ("tracec.nn", "torch.nn"),
    ("tracec.optim.lr_scheduler", "torch.optim.lr_scheduler"),
    ("tracec.optim.swa_utils", "torch.optim.swa_utils"),
    ("tracec.optim", "torch.optim"),
    ("tracec.distributions.constraints", "torch.distributions.constraints"),
    ("tracec.distributions.transforms", "torch.distributions.transforms"),
    ("tracec.distributions", "torch.distributions"),
    ("tracec.utils.data", "torch.utils.data"),
    ("tracec.autograd", "torch.autograd"),
    ("tracec.amp", "torch.amp"),
    ("tracec.vision.models", "torchvision.models"),
    ("tracec.vision.transforms.functional", "torchvision.transforms.functional"),
    ("tracec.vision.transforms", "torchvision.transforms"),
    ("tracec.vision.ops", "torchvision.ops"),
    ("tracec.vision.datasets", "torchvision.datasets"),
    ("tracec.ao.quantization", "torch.ao.quantization"),
    ("tracec.ao.nn.intrinsic", "torch.ao.nn.intrinsic"),
    ("tracec.ao.nn.quantized.dynamic", "torch.ao.nn.quantized.dynamic"),
    ("tracec.ao.nn.quantized", "torch.ao.nn.quantized"),
    ("tracec", "torch"),
]


def pickled_name(obj):
    """How a protocol-2 pickle of ``obj`` names it: ``[module, qualname]``
    (one GLOBAL), or ``[module, qualname, attribute]`` for PyTorch's
    builtins pickled as ``getattr(module.qualname, attribute)``."""
    try:
        data = pickle.dumps(obj, protocol=2)
    except Exception:
        return None
    ops = [(op.name, arg) for op, arg, _ in pickletools.genops(data)]
    globals_ = [arg.split(" ") for name, arg in ops if name == "GLOBAL"]
    if not globals_:
        return None
    if globals_[0] == ["__builtin__", "getattr"]:
        attrs = [arg for name, arg in ops if "UNICODE" in name or "STRING" in name]
        if len(globals_) != 2 or len(attrs) != 1:
            return None
        return [*globals_[1], attrs[0]]
    return globals_[0]


#: packages whose files mirror PyTorch's / torchvision's file by file
PACKAGES = [("tracec.nn.modules", "torch.nn.modules"), ("tracec.optim", "torch.optim"),
            ("tracec.distributions", "torch.distributions"),
            ("tracec.utils.data", "torch.utils.data"),
            ("tracec.vision.models", "torchvision.models"),
            ("tracec.vision.ops", "torchvision.ops")]


def spaces() -> list:
    """``SPACES``, then each file of ``PACKAGES`` beside PyTorch's of the
    same name: classes PyTorch keeps out of its public namespaces
    (``NonDynamicallyQuantizableLinear``, torchvision's ``BasicBlock``)."""
    import pkgutil
    files = []
    for tc_name, t_name in PACKAGES:
        package = importlib.import_module(tc_name)
        files += [(f"{tc_name}.{m.name}", f"{t_name}.{m.name}")
                  for m in pkgutil.iter_modules(package.__path__)]
    return SPACES + files


def names() -> dict:
    out: dict = {}
    for tc_name, t_name in spaces():
        try:
            tc_ns, t_ns = importlib.import_module(tc_name), importlib.import_module(t_name)
        except ImportError:
            continue
        for name in sorted(dir(tc_ns)):
            if name.startswith("__"):
                continue
            obj = getattr(tc_ns, name, None)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            key = torch_names.key(obj)
            if key is None or not key.startswith("tracec") or key in out or \
                    not hasattr(t_ns, name):
                continue
            got = pickled_name(getattr(t_ns, name))
            if got is not None:
                out[key] = list(got)
    return dict(sorted(out.items()))


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(__file__), "..", "tracec", "data", "torch_names.json")
    with open(path, "w") as f:
        json.dump(names(), f, indent=0, sort_keys=True)
        f.write("\n")
