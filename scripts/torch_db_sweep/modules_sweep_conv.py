"""conv() of modules_sweep: torch values -> tracec values, with a torch
layer given to a container's constructor made as the tracec layer."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ops_sweep import conv, tonp, compare, resolve  # noqa
import ops_sweep as _diff
_conv0 = _diff.conv
def conv(x, grad=False):
    # a torch layer given to a container's constructor (TransformerEncoder's
    # encoder_layer): the tracec layer of the same configuration
    if isinstance(x, torch.nn.Module) and type(x).__name__ in ("TransformerEncoderLayer", "TransformerDecoderLayer"):
        act = x.activation
        act = getattr(act, "__name__", None) or type(act).__name__.lower()
        return resolve("nn." + type(x).__name__)(
            x.self_attn.embed_dim, x.self_attn.num_heads, x.linear1.out_features,
            x.dropout.p, act if act in ("relu", "gelu") else resolve("nn.functional." + act),
            layer_norm_eps=x.norm1.eps, batch_first=x.self_attn.batch_first,
            norm_first=x.norm_first, bias=x.linear1.bias is not None)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(conv(v, grad) for v in x)
    if isinstance(x, dict):
        return {k: conv(v, grad) for k, v in x.items()}
    return _conv0(x, grad)
