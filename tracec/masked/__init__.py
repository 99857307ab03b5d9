"""``tracec.masked``: PyTorch's ``torch.masked``: the ``MaskedTensor``
type with its constructors (``masked_tensor``, ``as_masked_tensor``) and
the functional masked reductions and normalizations (``sum``, ``mean``,
``amax``, ``softmax``, ``norm``, ... with ``mask=``)."""
from tracec.masked._ops import (amax, amin, argmax, argmin, cumprod, cumsum,  # noqa: F401,A004
                                log_softmax, logaddexp, logsumexp, mean, median, norm,
                                normalize, prod, softmax, softmin, std, sum, var)
from tracec.masked.maskedtensor import (MaskedTensor, as_masked_tensor,  # noqa: F401
                                        is_masked_tensor, masked_tensor)

__all__ = ["MaskedTensor", "masked_tensor", "as_masked_tensor", "is_masked_tensor", "sum",
           "prod", "amax", "amin", "argmax", "argmin", "mean", "norm", "var", "std", "softmax",
           "log_softmax", "softmin", "cumsum", "cumprod", "logsumexp", "logaddexp", "median",
           "normalize"]
