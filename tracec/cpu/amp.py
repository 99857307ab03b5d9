"""``torch.cpu.amp``: ``autocast`` (bfloat16 by default) and ``GradScaler``
for the CPU, PyTorch's older spelling of ``torch.amp``."""
from tracec import dtypes as dt
from tracec.amp import _legacy_amp

_mod = _legacy_amp("tracec.cpu._amp_impl", "cpu", dt.bfloat16)
autocast, GradScaler = _mod.autocast, _mod.GradScaler
__all__ = ["autocast", "GradScaler"]
