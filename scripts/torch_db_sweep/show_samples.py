import sys, os
import warnings; warnings.filterwarnings("ignore")
import torch, numpy as np
from torch.testing._internal.common_methods_invocations import op_db
name = sys.argv[1]; idx = int(sys.argv[2]) if len(sys.argv) > 2 else None
dt = getattr(torch, sys.argv[3]) if len(sys.argv) > 3 else torch.float32
for op in op_db:
    key = op.name + ("." + op.variant_test_name if op.variant_test_name else "")
    if key == name:
        ss = list(op.sample_inputs("cpu", dt))
        for i, s in enumerate(ss[:12]):
            if idx is None or i == idx:
                print(i, "input", s.input if not isinstance(s.input, torch.Tensor) else (s.input.shape, s.input.stride(), s.input.dtype), "args", [a.shape if isinstance(a, torch.Tensor) else a for a in s.args], "kw", {k: (v.shape if isinstance(v, torch.Tensor) else v) for k, v in s.kwargs.items()})
