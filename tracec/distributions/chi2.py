"""``Chi2(df)``: ``Gamma(df / 2, 1 / 2)``."""
from __future__ import annotations

import numbers

from tracec.distributions import constraints
from tracec.distributions.gamma import Gamma
from tracec.distributions.utils import broadcast_all

__all__ = ["Chi2"]


class Chi2(Gamma):
    """PyTorch's ``torch.distributions.Chi2``, parameterized by ``df``."""
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = broadcast_all(df) if not isinstance(df, numbers.Number) else (df,)
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2
