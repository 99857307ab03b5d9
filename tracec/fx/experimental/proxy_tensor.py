"""``torch.fx.experimental.proxy_tensor``: ``get_proxy_mode``, which
libraries ask to learn whether ``make_fx`` is tracing them (kornia's
distance transform).  tracec has no ``make_fx`` (its tracer is
``tracec.compile``'s, which runs on real values), so no proxy mode is ever
active: ``get_proxy_mode()`` is None, as PyTorch's outside ``make_fx``."""

__all__ = ["get_proxy_mode"]


def get_proxy_mode():
    return None
