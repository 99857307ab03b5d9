"""``torch.__future__``: switches for behaviour PyTorch will change, read
by ``nn.Module._apply`` (``module.to`` / ``.double()`` / ``._apply(fn)``):
with overwrite on, a converted parameter is a new Parameter object (not the
old one with new ``.data``); with swap on, the old object's contents are
swapped with the converted tensor's (``torch.utils.swap_tensors``), so it
stays the same object.  Both are off by default, as in PyTorch."""

_overwrite_module_params_on_conversion: bool = False
_swap_module_params_on_conversion: bool = False


def set_overwrite_module_params_on_conversion(value: bool) -> None:
    global _overwrite_module_params_on_conversion
    _overwrite_module_params_on_conversion = value


def get_overwrite_module_params_on_conversion() -> bool:
    return _overwrite_module_params_on_conversion


def set_swap_module_params_on_conversion(value: bool) -> None:
    global _swap_module_params_on_conversion
    _swap_module_params_on_conversion = value


def get_swap_module_params_on_conversion() -> bool:
    return _swap_module_params_on_conversion
