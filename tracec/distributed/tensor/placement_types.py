"""``torch.distributed.tensor.placement_types``: how a DTensor's data is
laid over each dimension of its device mesh (values, compared and hashed by
their fields, printed as PyTorch prints them).

These are plain descriptions; tracec has no DTensor to place
(``tracec.distributed.tensor``)."""
from __future__ import annotations

__all__ = ["Placement", "Shard", "Replicate", "Partial"]


class Placement:
    """The base of the placement types."""

    def is_shard(self, dim: int | None = None) -> bool:
        return False

    def is_replicate(self) -> bool:
        return False

    def is_partial(self, reduce_op: str | None = None) -> bool:
        return False


class Shard(Placement):
    """Tensor dimension ``dim`` split in contiguous chunks over a mesh
    dimension, ``torch.chunk``'s way (the last chunks may be short or
    empty)."""

    __slots__ = ("dim",)

    def __init__(self, dim: int):
        self.dim = dim

    def is_shard(self, dim: int | None = None) -> bool:
        return dim is None or dim == self.dim

    @staticmethod
    def local_shard_size_and_offset(curr_local_size: int, num_chunks: int,
                                    rank: int) -> tuple[int, int]:
        """(size, offset) of chunk ``rank`` of ``num_chunks`` over a
        dimension of ``curr_local_size``: ``torch.chunk``'s chunks, an empty
        one at the end past the data."""
        if curr_local_size % num_chunks == 0:
            full = curr_local_size // num_chunks
            return full, full * rank
        full = -(-curr_local_size // num_chunks)
        start = full * rank
        if curr_local_size < start:
            return 0, curr_local_size
        return min(curr_local_size, start + full) - start, start

    def __eq__(self, other):
        return type(other) is type(self) and other.dim == self.dim

    def __hash__(self):
        return hash((type(self), self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"

    def __str__(self):
        return f"S({self.dim})"


class _StridedShard(Placement):
    """A shard taken from each of ``split_factor`` groups along ``dim`` (FSDP
    over tensor parallelism); not a ``Shard`` (as in PyTorch 2.13)."""

    __slots__ = ("dim", "split_factor")

    def __init__(self, dim: int, split_factor: int):
        self.dim, self.split_factor = dim, split_factor

    def __eq__(self, other):
        return type(other) is type(self) and (other.dim, other.split_factor) == \
            (self.dim, self.split_factor)

    def __hash__(self):
        return hash((type(self), self.dim, self.split_factor))

    def __repr__(self):
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"

    def __str__(self):
        return f"_S({self.dim}, {self.split_factor})"


class Replicate(Placement):
    """The whole tensor on every rank of the mesh dimension."""

    def is_replicate(self) -> bool:
        return True

    def __eq__(self, other):
        return type(other) is Replicate

    def __hash__(self):
        return -1

    def __repr__(self):
        return "Replicate()"

    def __str__(self):
        return "R"


class Partial(Placement):
    """Each rank holds a partial value; the tensor is their ``reduce_op``."""

    __slots__ = ("reduce_op",)

    def __init__(self, reduce_op: str = "sum"):
        self.reduce_op = reduce_op

    def is_partial(self, reduce_op: str | None = None) -> bool:
        return reduce_op is None or reduce_op == self.reduce_op

    def __eq__(self, other):
        return type(other) is Partial and other.reduce_op == self.reduce_op

    def __hash__(self):
        return 1 + hash(self.reduce_op)

    def __repr__(self):
        return f"Partial({self.reduce_op})"

    def __str__(self):
        return f"P({self.reduce_op})"
