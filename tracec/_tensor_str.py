"""``torch._tensor_str``: the print options and the element text of a
tensor, as libraries that format tensors themselves import them (PyG's
``read_off`` / ``write_off``)."""
from tracec import tensor_str as _ts
from tracec.tensor_str import PRINT_OPTS, get_printoptions, printoptions, set_printoptions  # noqa: F401

__all__ = ["PRINT_OPTS", "get_printoptions", "printoptions", "set_printoptions"]


def _tensor_str(self, indent: int) -> str:
    """PyTorch's ``_tensor_str(self, indent)``: the bracketed elements of
    the tensor ``self`` (no ``tensor(`` prefix nor suffixes), continued lines
    indented by ``indent``."""
    from tracec import dtypes as dt
    a = self.detach().resolve_conj()
    if a.dtype in (dt.bfloat16, dt.float16):
        a = a.float()      # PyTorch formats half types through float too
    return _ts.body_text(a.numpy(), self.dtype.is_floating_point, indent)
