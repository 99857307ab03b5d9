"""``tracec.backends.cudnn``: the flags PyTorch scripts set
(``torch.backends.cudnn.benchmark = True``, ``deterministic = True``).
tracec does not use cuDNN, so the flags are accepted and have no effect."""

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True


def is_available() -> bool:
    return False


def version():
    return None
