"""``torch._subclasses.fake_tensor``: ``is_fake``, which libraries ask
before reading a tensor's data (kornia's distance transform).  tracec's
tracer records ops on real values, so no tensor here is ever a FakeTensor:
``is_fake`` is False for every value (tracec's "meta" tensors are PyTorch's
meta device, which PyTorch's ``is_fake`` also answers False for)."""

__all__ = ["is_fake"]


def is_fake(x) -> bool:
    return False
