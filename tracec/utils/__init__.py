"""``tracec.utils``: PyTorch's ``torch.utils`` namespace (data loading,
checkpointing).  As after ``import torch``, ``tracec.utils.checkpoint`` is
there without importing it; ``model_zoo`` and ``tensorboard`` need their
own import, as in PyTorch."""
from tracec.utils import checkpoint, data  # noqa: F401
from tracec.utils import _pytree  # noqa: F401  (torch.utils._pytree.tree_map after import torch)
from tracec.utils import deterministic  # noqa: F401  (torch.utils.deterministic after import torch)
from tracec.utils.swap import swap_tensors  # noqa: F401  (torch.utils.swap_tensors)
