"""``torch.ao.quantization.observer``: the observers (``qat``)."""
from tracec.ao.quantization.qat import (MinMaxObserver, MovingAverageMinMaxObserver,
                                        MovingAveragePerChannelMinMaxObserver, ObserverBase,
                                        PerChannelMinMaxObserver, UniformQuantizationObserverBase)

__all__ = ["MinMaxObserver", "MovingAverageMinMaxObserver", "MovingAveragePerChannelMinMaxObserver", "ObserverBase", "PerChannelMinMaxObserver", "UniformQuantizationObserverBase"]
