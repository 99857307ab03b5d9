"""tracec's closed set of primitives (see ``core`` for the contract).

Importing this package registers every primitive in ``PRIMITIVES``.
"""
from tracec.ops.core import PRIMITIVES, Aval, Primitive, ShapeError, broadcast_shapes  # noqa: F401
from tracec.ops import (collective, creation, elementwise, indexing, linalg,  # noqa: F401
                        movement, random, recurrent, reduce, sort)
from tracec.ops.creation import full, iota, zeros  # noqa: F401
from tracec.ops.elementwise import *  # noqa: F401,F403
from tracec.ops.elementwise import sum_to  # noqa: F401
from tracec.ops.indexing import (gather, index_add, scatter_add, scatter_max,  # noqa: F401
                                 scatter_min, scatter_mul, take)
from tracec.ops.linalg import matmul  # noqa: F401
from tracec.ops.movement import broadcast_to, concatenate, pad, reshape, slice_, transpose  # noqa: F401
from tracec.ops.random import random_uniform  # noqa: F401
from tracec.ops.reduce import argmax, argmin, reduce_max, reduce_min, reduce_sum  # noqa: F401
from tracec.ops.sort import argsort  # noqa: F401
from tracec.ops.recurrent import rnn_scan, rnn_scan_grad  # noqa: F401
from tracec.ops.namespaces import NAMESPACES as _NAMESPACES  # noqa: E402


def __getattr__(name: str):
    """``torch.ops.<namespace>``: a namespace ``tracec.library`` defined."""
    ns = _NAMESPACES.get(name)
    if ns is None:
        raise AttributeError(f"module 'torch.ops' has no attribute '{name}'")
    return ns
