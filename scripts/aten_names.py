"""Write tracec/data/aten_ops.json: every ATen operator PyTorch registers
(``torch.ops.aten.<name>``) with its overload names and each overload's
argument names, from the schemas of the torch the tests pin.
``tracec.aten_ops`` serves ``torch.ops.aten`` from this table.

    python scripts/aten_names.py
"""
import json
import os

import torch


def names() -> dict:
    out: dict = {}
    for s in torch._C._jit_get_all_schemas():
        if not s.name.startswith("aten::"):
            continue
        out.setdefault(s.name[len("aten::"):], {})[s.overload_name or "default"] = \
            [a.name for a in s.arguments if not a.kwarg_only]
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(__file__), "..", "tracec", "data", "aten_ops.json")
    with open(path, "w") as f:
        json.dump(names(), f, separators=(",", ":"), sort_keys=True)
        f.write("\n")
