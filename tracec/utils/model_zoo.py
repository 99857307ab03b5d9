"""``torch.utils.model_zoo``: the old name of ``torch.hub``'s download of a
state dict (``load_url``), as PyTorch keeps it."""
from tracec.hub import load_state_dict_from_url as load_url  # noqa: F401

__all__ = ["load_url"]
