"""``torchvision.ops.stochastic_depth`` (Huang et al., "Deep Networks with
Stochastic Depth"): in training, zero whole rows (``mode="row"``: each
sample's residual branch) or the whole batch (``"batch"``) with
probability ``p`` and scale the survivors by ``1 / (1 - p)``; identity in
eval or at ``p == 0``."""
from __future__ import annotations

from tracec import fx, nn
from tracec.creation import empty


def stochastic_depth(input, p: float, mode: str, training: bool = True):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"drop probability has to be between 0 and 1, but got {p}")
    if mode not in ("batch", "row"):
        raise ValueError(f"mode has to be either 'batch' or 'row', but got {mode}")
    if not training or p == 0.0:
        return input
    survival_rate = 1.0 - p
    size = [input.shape[0]] + [1] * (input.ndim - 1) if mode == "row" else [1] * input.ndim
    noise = empty(size, dtype=input.dtype, device=input.device).bernoulli_(survival_rate)
    if survival_rate > 0.0:
        noise = noise.div_(survival_rate)
    return input * noise


# a leaf of symbolic traces (its noise draw depends on the input's shape), as
# torchvision marks it
fx.wrap("stochastic_depth")


class StochasticDepth(nn.Module):
    def __init__(self, p: float, mode: str):
        super().__init__()
        self.p, self.mode = p, mode

    def forward(self, input):
        return stochastic_depth(input, self.p, self.mode, self.training)

    def __repr__(self):
        return f"{self.__class__.__name__}(p={self.p}, mode={self.mode})"
