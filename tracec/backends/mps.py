"""``tracec.backends.mps``: Apple's Metal backend, which tracec does not
have; PyTorch scripts ask ``torch.backends.mps.is_available()`` to choose
a device.  Imports nothing, so it sits in the backends layer harmlessly."""


def is_available() -> bool:
    return False


def is_built() -> bool:
    return False
