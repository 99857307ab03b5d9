"""``torch.fx.experimental``: see ``proxy_tensor``."""
