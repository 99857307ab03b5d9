"""``tracec.backends.opt_einsum``: PyTorch's switch for ordering the
contractions of ``einsum`` with the opt_einsum package. tracec's
``einsum`` orders them itself (``tracec.contraction``); the package's
presence is reported as PyTorch reports it, and the flags are kept.
Imports nothing of tracec's (backends layer)."""
import importlib.util

enabled = True
strategy = "auto"


def is_available() -> bool:
    return importlib.util.find_spec("opt_einsum") is not None


def get_opt_einsum():
    """The opt_einsum module if it is installed, else None."""
    if not is_available():
        return None
    import opt_einsum
    return opt_einsum
