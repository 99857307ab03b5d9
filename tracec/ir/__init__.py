"""tracec/ir: the tracec dialect on xDSL (types, ops, verifier, text form).

This layer imports only xDSL, NumPy and ``tracec.dtypes``; everything above
it (primitives, tracer, passes, backends) builds on these names.
"""
from tracec.ir.attrs import (  # noqa: F401
    PARAM_KINDS, decode_param, encode_param, file_loc, format_loc, loc_tuple, to_location,
)
from tracec.ir.dialect import TRACEC  # noqa: F401
from tracec.ir.function import new_function, new_module, set_returns  # noqa: F401
from tracec.ir.ops import (  # noqa: F401
    OP_BY_PRIMITIVE, SPECS, PrimitiveOp, PrimSpec, get_type_rule, make_op, op_params,
    primitive_name, set_type_rule,
)
from tracec.ir.names import (  # noqa: F401
    arg_name, result_names, set_arg_name, set_result_names, value_name,
)
from tracec.ir.printing import context, parse_module, print_module, print_op  # noqa: F401
from tracec.ir.structural import (  # noqa: F401
    BackwardOp, ConstantOp, CustomVJPOp, KernelOp, YieldOp, constant, constant_array, dense_attr,
)
from tracec.ir.types import (  # noqa: F401
    ELEMENT_TYPES, dtype_of, dtype_of_element, element_type, format_type, is_symbolic_type,
    is_tensor_type, shape_of, tensor_type,
)
from tracec.ir.specialize import specialize, static_type, substitute_symbols  # noqa: F401,E402,E501
