"""``LogisticNormal(loc, scale)``: a ``Normal`` pushed onto the simplex by
the stick-breaking transform."""
from __future__ import annotations

from tracec.distributions import constraints
from tracec.distributions.normal import Normal
from tracec.distributions.transformed_distribution import TransformedDistribution
from tracec.distributions.transforms import StickBreakingTransform

__all__ = ["LogisticNormal"]


class LogisticNormal(TransformedDistribution):
    """PyTorch's ``torch.distributions.LogisticNormal``, parameterized by ``loc``, ``scale``."""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base_dist = Normal(loc, scale, validate_args=validate_args)
        if not base_dist.batch_shape:
            base_dist = base_dist.expand([1])
        super().__init__(base_dist, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.base_dist.scale
