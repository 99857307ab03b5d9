"""``torch.autograd.anomaly_mode``: ``detect_anomaly`` and
``set_detect_anomaly`` (defined with tracec's other global flags)."""
from __future__ import annotations

from tracec.config import detect_anomaly, set_detect_anomaly  # noqa: F401

__all__ = ["detect_anomaly", "set_detect_anomaly"]
