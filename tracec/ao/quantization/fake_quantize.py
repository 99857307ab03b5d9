"""``torch.ao.quantization.fake_quantize``: ``FakeQuantize`` and its
default configurations (``qat``)."""
from tracec.ao.quantization.qat import (FakeQuantize, FakeQuantizeBase,
                                        default_fake_quant, default_per_channel_weight_fake_quant,
                                        default_weight_fake_quant, disable_fake_quant,
                                        disable_observer, enable_fake_quant, enable_observer)

__all__ = ["FakeQuantize", "FakeQuantizeBase", "default_fake_quant", "default_per_channel_weight_fake_quant", "default_weight_fake_quant", "disable_fake_quant", "disable_observer", "enable_fake_quant", "enable_observer"]
