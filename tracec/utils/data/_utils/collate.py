"""``torch.utils.data._utils.collate``: ``tracec.utils.data.collate``'s
names (the same objects: an entry added to ``default_collate_fn_map`` here
is seen by ``default_collate``)."""
from tracec.utils.data.collate import (  # noqa: F401
    collate, collate_float_fn, collate_int_fn, collate_numpy_array_fn, collate_numpy_scalar_fn,
    collate_str_fn, collate_tensor_fn, default_collate, default_collate_err_msg_format,
    default_collate_fn_map, default_convert, np_str_obj_array_pattern)

__all__ = ["collate", "collate_float_fn", "collate_int_fn", "collate_numpy_array_fn",
           "collate_numpy_scalar_fn", "collate_str_fn", "collate_tensor_fn", "default_collate",
           "default_collate_err_msg_format", "default_collate_fn_map", "default_convert",
           "np_str_obj_array_pattern"]
