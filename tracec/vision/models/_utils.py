"""``torchvision.models._utils.IntermediateLayerGetter``: a model's direct
children run in order up to the last one named in ``return_layers``, whose
outputs are returned under the new names (an ordered dict).  Children
after the last returned one are dropped; nested modules are not reached
(only what ``named_children`` gives)."""
from __future__ import annotations

from collections import OrderedDict

from tracec import nn


class IntermediateLayerGetter(nn.ModuleDict):
    _version = 2

    def __init__(self, model, return_layers) -> None:
        if not set(return_layers).issubset([name for name, _ in model.named_children()]):
            raise ValueError("return_layers are not present in model")
        orig_return_layers = return_layers
        remaining = {str(k): str(v) for k, v in return_layers.items()}
        layers = OrderedDict()
        for name, module in model.named_children():
            layers[name] = module
            remaining.pop(name, None)
            if not remaining:
                break
        super().__init__(layers)
        self.return_layers = orig_return_layers

    def forward(self, x):
        out = OrderedDict()
        for name, module in self.items():
            x = module(x)
            if name in self.return_layers:
                out[self.return_layers[name]] = x
        return out
