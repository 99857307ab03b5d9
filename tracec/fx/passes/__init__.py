"""``torch.fx.passes``: ``shape_prop``."""
from tracec.fx.passes import shape_prop  # noqa: F401
