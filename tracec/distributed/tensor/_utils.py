"""``torch.distributed.tensor._utils``: shard arithmetic over a mesh."""
from __future__ import annotations

from tracec.distributed.tensor.placement_types import Shard, _StridedShard


def compute_local_shape_and_global_offset(global_shape, mesh, placements, skip_offset=False):
    """(local shape, global offset) of this rank's shard of a tensor of
    ``global_shape`` placed on ``mesh`` (PyTorch's DeviceMesh interface:
    ``_is_current_rank_part_of_mesh()``, ``shape``, ``_sym_get_coordinate(dim)``)
    by ``placements``: each ``Shard`` splits what the mesh dimensions before
    it left, ``torch.chunk``'s way (an empty shard's offset is the dimension's
    size); ``Replicate`` and ``Partial`` keep it.  A rank outside the mesh
    holds ``((0,), ())``."""
    if not mesh._is_current_rank_part_of_mesh():
        return ((0,), ())
    shape, offset = list(global_shape), [0] * len(global_shape)
    for mesh_dim, p in enumerate(placements):
        if isinstance(p, _StridedShard):
            raise NotImplementedError("compute_local_shape_and_global_offset: _StridedShard "
                                      "placements are not supported by tracec")
        if isinstance(p, Shard):
            size, off = Shard.local_shard_size_and_offset(shape[p.dim], mesh.shape[mesh_dim],
                                                          mesh._sym_get_coordinate(mesh_dim))
            shape[p.dim] = size
            offset[p.dim] = global_shape[p.dim] if size == 0 else offset[p.dim] + off
    return tuple(shape), (() if skip_offset else tuple(offset))
