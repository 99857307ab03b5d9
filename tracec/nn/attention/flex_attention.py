"""``torch.nn.attention.flex_attention``: attention with a user's score
modification (``score_mod(score, b, h, q_idx, kv_idx)``) and mask
(``mask_mod(b, h, q_idx, kv_idx)``, made into a ``BlockMask`` by
``create_block_mask``), as PyTorch computes it without its fused kernel
(``torch/_higher_order_ops/flex_attention.py``'s ``math_attention``).

PyTorch applies the mods with ``vmap`` over every (b, h, q, kv); here they
are called once with index tensors shaped to broadcast (``[B,1,1,1]``,
``[1,H,1,1]``, ``[1,1,L,1]``, ``[1,1,1,S]``), which computes the same thing
for the elementwise and indexing expressions mods are made of (vmap refuses
Python control flow on the indices too).  Scores are computed in float32
(float64 for float64 inputs), masked with -inf, and rows with nothing left
give zeros (PyTorch's ``_safe_softmax``); the log-sum-exp is in natural log.
Under ``tracec.compile`` all of it is ordinary traced tensor code, so a
compiled call fuses what it can; a ``BlockMask``'s block sparsity is an
optimization of the fused kernel that does not change results, so the mask
is applied element by element everywhere.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import math
import operator
import warnings
from typing import Callable, NamedTuple

import numpy as np

from tracec import creation, dtypes as dt
from tracec import functions as F
from tracec import shape_ops as S
from tracec.tensor import Tensor

__all__ = ["BlockMask", "flex_attention", "create_block_mask", "create_mask", "and_masks",
           "or_masks", "noop_mask", "AuxRequest", "AuxOutput", "FlexKernelOptions"]

_score_mod_signature = Callable
_mask_mod_signature = Callable
_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30
#: PyTorch's switch for its compile-less debugging path (results are the same here).
_FLEX_ATTENTION_DISABLE_COMPILE_DEBUG = False
FlexKernelOptions = dict
_WARNED: set = set()


class AuxRequest(NamedTuple):
    """Which auxiliary outputs ``flex_attention(..., return_aux=)`` returns."""
    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    lse: Tensor | None = None
    max_scores: Tensor | None = None


def noop_mask(b, h, q_idx, kv_idx):
    """A mask_mod that keeps everything."""
    return creation.ones((), dtype=dt.bool_)


def _identity(score, b, h, q_idx, kv_idx):
    return score


def _combined(mask_mods, start: bool, op, name: str):
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def combined(b, h, q_idx, kv_idx):
        result = (creation.ones if start else creation.zeros)((), dtype=dt.bool_)
        for mask in mask_mods:
            result = op(result, mask(b, h, q_idx, kv_idx))
        return result
    combined.__name__ = combined.__qualname__ = name
    return combined


def or_masks(*mask_mods):
    """A mask_mod keeping what any of ``mask_mods`` keeps."""
    return _combined(mask_mods, False, F.logical_or, "or_mask")


def and_masks(*mask_mods):
    """A mask_mod keeping what all of ``mask_mods`` keep."""
    return _combined(mask_mods, True, F.logical_and, "and_mask")


def _is_score_mod(fn) -> bool:
    """PyTorch's rule: a mod of 5 positional parameters (without defaults)
    modifies scores, of 4 masks them."""
    params = [p for p in inspect.signature(fn).parameters.values()
              if p.default is inspect.Parameter.empty
              and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) == 5:
        return True
    if len(params) == 4:
        return False
    raise AssertionError(f"a mod takes 5 (score_mod) or 4 (mask_mod) arguments, "
                         f"{getattr(fn, '__name__', fn)} takes {len(params)}")


def _indices(B, H, L, S_, device=None):
    """(b, h, q_idx, kv_idx) shaped to broadcast over [B, H, L, S]."""
    b = creation.arange(B, device=device).reshape(B, 1, 1, 1)
    h = creation.arange(H, device=device).reshape(1, H, 1, 1)
    q = creation.arange(L, device=device).reshape(1, 1, L, 1)
    kv = creation.arange(S_, device=device).reshape(1, 1, 1, S_)
    return b, h, q, kv


def create_mask(mod_fn, B, H, Q_LEN: int, KV_LEN: int, device=None) -> Tensor:
    """The dense bool mask ``[B, H, Q_LEN, KV_LEN]`` a mask_mod (or where a
    score_mod leaves scores finite) defines; ``B``/``H`` None are 1."""
    B = 1 if B is None else B
    H = 1 if H is None else H
    b, h, q, kv = _indices(B, H, Q_LEN, KV_LEN, device)
    if _is_score_mod(mod_fn):
        out = mod_fn(creation.zeros((B, H, Q_LEN, KV_LEN), device=device), b, h, q, kv)
        return S.broadcast_to(F.logical_not(out.isneginf()), (B, H, Q_LEN, KV_LEN)).clone()
    m = mod_fn(b, h, q, kv)
    if not isinstance(m, Tensor):
        m = creation.tensor(m)
    return S.broadcast_to(m.to(dt.bool_), (B, H, Q_LEN, KV_LEN)).clone()


def _dense_to_ordered(dense: np.ndarray):
    """(number of blocks per row, block indices kept first) as PyTorch orders
    them (a stable descending argsort)."""
    d = dense.astype(np.int32)
    num = d.sum(-1).astype(np.int32)
    idx = np.argsort(-d, axis=-1, kind="stable").astype(np.int32)
    return creation.from_numpy(np.ascontiguousarray(num)), \
        creation.from_numpy(np.ascontiguousarray(idx))


class BlockMask:
    """Which (query block, key block) pairs attention visits, and the
    mask_mod that masks within them: what ``create_block_mask`` returns
    (PyTorch's attributes: ``kv_num_blocks``, ``kv_indices``, the ``full_``
    ones for blocks the mask keeps whole, their transposes ``q_*``,
    ``BLOCK_SIZE``, ``seq_lengths``, ``mask_mod``)."""

    def __init__(self, seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks,
                 full_kv_indices, q_num_blocks, q_indices, full_q_num_blocks, full_q_indices,
                 BLOCK_SIZE, mask_mod):
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.q_num_blocks, self.q_indices = q_num_blocks, q_indices
        self.full_q_num_blocks, self.full_q_indices = full_q_num_blocks, full_q_indices
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.mask_mod = mask_mod if mask_mod is not None else noop_mask

    @classmethod
    def _from_dense_blocks(cls, partial: np.ndarray, full: np.ndarray | None, mask_mod,
                           seq_lengths, block_size):
        kv_num, kv_idx = _dense_to_ordered(partial)
        q_num, q_idx = _dense_to_ordered(np.swapaxes(partial, -1, -2))
        fkv_num = fkv_idx = fq_num = fq_idx = None
        if full is not None:
            fkv_num, fkv_idx = _dense_to_ordered(full)
            fq_num, fq_idx = _dense_to_ordered(np.swapaxes(full, -1, -2))
        return cls(seq_lengths, kv_num, kv_idx, fkv_num, fkv_idx, q_num, q_idx, fq_num, fq_idx,
                   block_size, mask_mod)

    @property
    def shape(self) -> tuple:
        *batch, _, _ = self.kv_indices.shape
        return tuple(batch) + self.seq_lengths

    def numel(self) -> int:
        """Elements of the mask, sparsity not counted."""
        return functools.reduce(operator.mul, self.shape, 1)

    def sparsity(self) -> float:
        """The percentage of blocks not computed (PyTorch's formula)."""
        computed = int(self.kv_num_blocks.sum().item())
        if self.full_kv_num_blocks is not None:
            computed += int(self.full_kv_num_blocks.sum().item())
        size = computed * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1]
        return 100 * (1 - size / self.numel())

    def _dense_blocks(self) -> np.ndarray:
        def dense(num, idx):
            # as PyTorch's _ordered_to_dense: entries past a row's count are
            # written to one extra column, dropped after
            num, idx = num.numpy(), idx.numpy()
            cols = idx.shape[-1]
            keep = np.arange(cols) < num[..., None]
            out = np.zeros(idx.shape[:-1] + (cols + 1,), np.int32)
            np.put_along_axis(out, np.where(keep, idx, cols), 1, axis=-1)
            return out[..., :cols]
        d = dense(self.kv_num_blocks, self.kv_indices)
        if self.full_kv_num_blocks is not None:
            d = d | dense(self.full_kv_num_blocks, self.full_kv_indices)
        return d

    def to_dense(self) -> Tensor:
        """The block-level mask (int32, 1 where a block is visited)."""
        return creation.from_numpy(self._dense_blocks())

    def to_string(self, grid_size=(20, 20), limit: int = 4) -> str:
        dense = self._dense_blocks()
        *batch_dims, rows, cols = dense.shape
        if isinstance(grid_size, int) and grid_size != -1:
            max_rows = max_cols = grid_size
        elif grid_size == -1:
            max_rows, max_cols = rows, cols
        else:
            max_rows, max_cols = grid_size
        row_step = max(1, -(-rows // max_rows))
        col_step = max(1, -(-cols // max_cols))
        out = []
        for k, bi in enumerate(itertools.product(*[range(i) for i in batch_dims])):
            if k == limit:
                out += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                        "You can also index (BlockMask[batch, head]) to choose a specific "
                        "batch or head"]
                break
            m = dense[bi]
            vis = f"{bi}\n"
            for r in range(0, rows, row_step):
                for c in range(0, cols, col_step):
                    p = m[r:r + row_step, c:c + col_step].astype(np.float32).mean()
                    vis += ("█" if p == 1 else " " if p == 0 else "░") * 2
                vis += "\n"
            out.append(vis)
        return "\n".join(out)

    def __str__(self) -> str:
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n"
                f"{self.to_string().strip()}\n)")

    def __repr__(self) -> str:
        def shp(x):
            return x.shape if x is not None else None
        name = getattr(self.mask_mod, "__name__", self.mask_mod)
        return (f"BlockMask(\n    kv_num_blocks={self.kv_num_blocks.shape},\n"
                f"    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shp(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shp(self.full_kv_indices)},\n"
                f"    q_num_blocks={shp(self.q_num_blocks)},\n    q_indices={shp(self.q_indices)},\n"
                f"    full_q_num_blocks={shp(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shp(self.full_q_indices)},\n"
                f"    BLOCK_SIZE={self.BLOCK_SIZE},\n    shape={self.shape},\n"
                f"    sparsity={self.sparsity():.2f}%,\n    mask_mod={name}\n)")

    def to(self, device) -> "BlockMask":
        return self

    def as_tuple(self, flatten: bool = True) -> tuple:
        return (*self.seq_lengths, self.kv_num_blocks, self.kv_indices,
                self.full_kv_num_blocks, self.full_kv_indices, self.q_num_blocks,
                self.q_indices, self.full_q_num_blocks, self.full_q_indices,
                *self.BLOCK_SIZE, self.mask_mod)


def create_block_mask(mask_mod, B, H, Q_LEN: int, KV_LEN: int, device=None,
                      BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, _compile=False,
                      separate_full_blocks: bool = True, compute_dq_write_order: bool = False,
                      dq_kv_order: bool = True) -> BlockMask:
    """A ``BlockMask`` from ``mask_mod`` over ``[B, H, Q_LEN, KV_LEN]``
    (``B``/``H`` None: 1, broadcast), blocks of ``BLOCK_SIZE`` (an int, or
    (query, key) sizes); blocks the mask keeps whole are listed apart
    (``separate_full_blocks``)."""
    if _is_score_mod(mask_mod):
        raise AssertionError("create_block_mask takes a mask_mod (b, h, q_idx, kv_idx), "
                             "not a score_mod")
    if not isinstance(dq_kv_order, bool):
        raise ValueError("dq_kv_order must be a bool when using create_block_mask")
    qb, kb = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else tuple(BLOCK_SIZE)
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device).numpy()
    Bm, Hm = mask.shape[:2]
    pad_q, pad_k = -Q_LEN % qb, -KV_LEN % kb
    mask = np.pad(mask, ((0, 0), (0, 0), (0, pad_q), (0, pad_k)))
    blocks = mask.reshape(Bm, Hm, mask.shape[2] // qb, qb, mask.shape[3] // kb, kb) \
        .transpose(0, 1, 2, 4, 3, 5).sum((-2, -1))
    if separate_full_blocks:
        full = (blocks == qb * kb).astype(np.int8)
        partial = ((blocks > 0) & (blocks < qb * kb)).astype(np.int8)
    else:
        full, partial = None, (blocks > 0).astype(np.int8)
    return BlockMask._from_dense_blocks(partial, full, mask_mod, (Q_LEN, KV_LEN), (qb, kb))


def flex_attention(query: Tensor, key: Tensor, value: Tensor, score_mod=None, block_mask=None,
                   scale: float | None = None, enable_gqa: bool = False, return_lse: bool = False,
                   kernel_options=None, *, return_aux: AuxRequest | None = None):
    """softmax(score_mod(q @ k^T * scale) masked by ``block_mask``) @ v for
    ``query [B, Hq, L, E]``, ``key [B, Hkv, S, E]``, ``value [B, Hkv, S,
    Ev]`` (see the module docstring); with ``return_lse`` (deprecated) or
    ``return_aux`` also the log-sum-exp ``[B, Hq, L]`` (and max scores)."""
    if query.ndim != 4 or key.ndim != 4 or value.ndim != 4:
        raise NotImplementedError("NYI: query, key, and value must be 4D tensors")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"Expect query and key/value to have the same embedding dimension "
                         f"but got E={query.shape[-1]} and E={key.shape[-1]}.")
    Hq, Hkv = query.shape[1], key.shape[1]
    if not enable_gqa and Hq != Hkv:
        raise ValueError(f"Expect query and key/value to have the same number of heads but got "
                         f"Hq={Hq} and Hkv={Hkv}. Try setting enable_gqa=True for GQA.")
    if enable_gqa and Hq % Hkv != 0:
        raise ValueError(f"Expect number of query heads to be a multiple of kv heads for GQA "
                         f"but got Hq={Hq} and Hkv={Hkv}.")
    if query.shape[0] != key.shape[0] and block_mask is None:
        raise ValueError(f"Expect query and key/value to have the same batch size, or non-none "
                         f"block_mask, but got block_mask=None, Bq={query.shape[0]}, and "
                         f"Bkv={key.shape[0]}.")
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is "
                         "deprecated, please use return_aux=AuxRequest(lse=True) instead.")
    if return_lse and "lse" not in _WARNED:
        _WARNED.add("lse")
        warnings.warn("return_lse is deprecated and will be removed in v2.10. Please use "
                      "return_aux=AuxRequest(lse=True) instead.", FutureWarning, stacklevel=2)
    L, S_ = query.shape[-2], key.shape[-2]
    if block_mask is not None:
        bl, bs = block_mask.shape[-2], block_mask.shape[-1]
        if L > bl or S_ > bs:
            raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} "
                             f"but got q_len={L} and kv_len={S_}. As the block mask was created "
                             "for a smaller length than you're using it for, you likely need to "
                             "create a new block mask.")
        if (L, S_) != (bl, bs):
            raise ValueError(f"block_mask was created for block_mask.shape={block_mask.shape} "
                             f"but got q_len={L} and kv_len={S_}. As the block mask was created "
                             "for a larger length than you're using it for, you can either 1. "
                             "create a new block mask with the correct length, or 2. 'adjust' "
                             "the existing block mask to the correct length by calling "
                             "block_mask._adjust(q_len, kv_len). This essentially 'crops' the "
                             "block mask to the upper left corner, which does not work for all "
                             "mask_mods!")
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    if enable_gqa and Hq != Hkv:
        key = key.repeat_interleave(Hq // Hkv, dim=1)
        value = value.repeat_interleave(Hq // Hkv, dim=1)
    work = dt.float64 if query.dtype is dt.float64 else dt.float32
    scores = F.matmul(query, S.transpose(key, -2, -1)).to(work)
    B = max(query.shape[0], key.shape[0])
    b, h, q, kv = _indices(B, Hq, L, S_, query.device)
    scores = F.mul(scores, scale).to(work)
    post = (score_mod or _identity)(scores, b, h, q, kv)
    if block_mask is not None:
        keep = block_mask.mask_mod(b, h, q, kv)
        if not isinstance(keep, Tensor):
            keep = creation.tensor(bool(keep))
        post = F.where(keep, post, creation.full((), -math.inf, dtype=work))
    post = S.broadcast_to(post, (B, Hq, L, S_))
    # PyTorch's _safe_softmax: a row with every score -inf gives zeros (and
    # a log-sum-exp of -inf), computed so no NaN appears on the way.
    empty = post.isneginf().all(dim=-1, keepdim=True)
    safe = F.where(empty, creation.zeros((), dtype=work), post)
    probs = F.where(empty, creation.zeros((), dtype=work), F.softmax(safe, dim=-1))
    out = F.matmul(probs.to(query.dtype), value)
    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    want_max = return_aux is not None and return_aux.max_scores
    lse = mx = None
    if want_lse:
        lse = F.where(S.squeeze(empty, -1), creation.full((), -math.inf, dtype=work),
                      F.logsumexp(safe, dim=-1))
    if want_max:
        mx = F.amax(post, dim=-1)
    if return_aux is not None:
        return out, AuxOutput(lse=lse, max_scores=mx)
    if return_lse:
        return out, lse
    return out
