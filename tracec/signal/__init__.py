"""``tracec.signal``: PyTorch's ``torch.signal`` namespace (window functions)."""
from tracec.signal import windows  # noqa: F401
