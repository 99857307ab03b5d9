# huggingface/transformers, models/longformer/modeling_longformer.py
# (LongformerSelfAttention's local sliding-window attention: _chunk through
# as_strided with sizes from torch.div(..., rounding_mode="trunc"),
# _pad_and_transpose_last_two_dims, _pad_and_diagonalize, _mask_invalid_locations
# with full_like(...).where(...) written into slices, _sliding_chunks_query_key_matmul
# with einsum on a tuple of operands and new_zeros over a tensor-valued size, the
# float mask turned into a diagonal of -10000s, _sliding_chunks_matmul_attn_probs_value
# with F.pad(value=-1) and as_strided over the padded values), plus a sliding window
# written with Tensor.unfold as in lucidrains' local-attention, both checked against
# dense banded attention.  Changes for a CPU test: no global attention, no config
# object (its fields are constructor arguments), a tiny configuration (hidden 16,
# 2 heads, one-sided window 2, sequence 8), dropout 0 and weights
# from numpy.  Then a small classifier around it (one attention layer, output
# projection, LayerNorm; SGD with momentum): its training step under torch.compile
# against the same step run eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class LongformerSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, attention_window, layer_id=0):
        super().__init__()
        if hidden_size % num_attention_heads != 0:
            raise ValueError(
                f"The hidden size ({hidden_size}) is not a multiple of the number of attention "
                f"heads ({num_attention_heads})"
            )
        self.num_heads = num_attention_heads
        self.head_dim = int(hidden_size / num_attention_heads)
        self.embed_dim = hidden_size

        self.query = nn.Linear(hidden_size, self.embed_dim)
        self.key = nn.Linear(hidden_size, self.embed_dim)
        self.value = nn.Linear(hidden_size, self.embed_dim)

        self.dropout = 0.0
        self.layer_id = layer_id
        attention_window = attention_window[self.layer_id]
        assert (
            attention_window % 2 == 0
        ), f"`attention_window` for layer {self.layer_id} has to be an even value. Given {attention_window}"
        assert (
            attention_window > 0
        ), f"`attention_window` for layer {self.layer_id} has to be positive. Given {attention_window}"

        self.one_sided_attn_window_size = attention_window // 2

    def forward(self, hidden_states, attention_mask=None):
        hidden_states = hidden_states.transpose(0, 1)

        # project hidden states
        query_vectors = self.query(hidden_states)
        key_vectors = self.key(hidden_states)
        value_vectors = self.value(hidden_states)

        seq_len, batch_size, embed_dim = hidden_states.size()
        assert (
            embed_dim == self.embed_dim
        ), f"hidden_states should have embed_dim = {self.embed_dim}, but has {embed_dim}"

        # normalize query
        query_vectors /= math.sqrt(self.head_dim)

        query_vectors = query_vectors.view(seq_len, batch_size, self.num_heads, self.head_dim).transpose(0, 1)
        key_vectors = key_vectors.view(seq_len, batch_size, self.num_heads, self.head_dim).transpose(0, 1)

        attn_scores = self._sliding_chunks_query_key_matmul(
            query_vectors, key_vectors, self.one_sided_attn_window_size
        )

        # values to pad for attention probs
        remove_from_windowed_attention_mask = (attention_mask != 0)[:, :, None, None]

        # cast to fp32/fp16 then replace 1's with -inf
        float_mask = remove_from_windowed_attention_mask.type_as(query_vectors).masked_fill(
            remove_from_windowed_attention_mask, torch.finfo(query_vectors.dtype).min
        )
        # diagonal mask with zeros everywhere and -inf inplace of padding
        diagonal_mask = self._sliding_chunks_query_key_matmul(
            float_mask.new_ones(size=float_mask.size()), float_mask, self.one_sided_attn_window_size
        )

        # pad local attention probs
        attn_scores += diagonal_mask

        assert list(attn_scores.size()) == [
            batch_size,
            seq_len,
            self.num_heads,
            self.one_sided_attn_window_size * 2 + 1,
        ], (
            f"local_attn_probs should be of size ({batch_size}, {seq_len}, {self.num_heads},"
            f" {self.one_sided_attn_window_size * 2 + 1}), but is of size {attn_scores.size()}"
        )

        attn_probs = nn.functional.softmax(
            attn_scores, dim=-1, dtype=torch.float32
        )  # use fp32 for numerical stability

        # softmax sometimes inserts NaN if all positions are masked, replace them with 0
        is_index_masked = attention_mask < 0
        attn_probs = torch.masked_fill(attn_probs, is_index_masked[:, :, None, None], 0.0)
        attn_probs = attn_probs.type_as(attn_scores)

        # free memory
        del attn_scores

        # apply dropout
        attn_probs = nn.functional.dropout(attn_probs, p=self.dropout, training=self.training)

        value_vectors = value_vectors.view(seq_len, batch_size, self.num_heads, self.head_dim).transpose(0, 1)

        attn_output = self._sliding_chunks_matmul_attn_probs_value(
            attn_probs, value_vectors, self.one_sided_attn_window_size
        )

        assert attn_output.size() == (batch_size, seq_len, self.num_heads, self.head_dim), "Unexpected size"
        attn_output = attn_output.transpose(0, 1).reshape(seq_len, batch_size, embed_dim).contiguous()

        outputs = (attn_output.transpose(0, 1),)
        outputs += (attn_probs,)
        return outputs

    @staticmethod
    def _pad_and_transpose_last_two_dims(hidden_states_padded, padding):
        """pads rows and then flips rows and columns"""
        hidden_states_padded = nn.functional.pad(
            hidden_states_padded, padding
        )  # padding value is not important because it will be overwritten
        hidden_states_padded = hidden_states_padded.view(
            *hidden_states_padded.size()[:-2], hidden_states_padded.size(-1), hidden_states_padded.size(-2)
        )
        return hidden_states_padded

    @staticmethod
    def _pad_and_diagonalize(chunked_hidden_states):
        total_num_heads, num_chunks, window_overlap, hidden_dim = chunked_hidden_states.size()
        chunked_hidden_states = nn.functional.pad(
            chunked_hidden_states, (0, window_overlap + 1)
        )  # total_num_heads x num_chunks x window_overlap x (hidden_dim+window_overlap+1). Padding value is not important because it'll be overwritten
        chunked_hidden_states = chunked_hidden_states.view(
            total_num_heads, num_chunks, -1
        )  # total_num_heads x num_chunks x window_overlap*window_overlap+window_overlap
        chunked_hidden_states = chunked_hidden_states[
            :, :, :-window_overlap
        ]  # total_num_heads x num_chunks x window_overlap*window_overlap
        chunked_hidden_states = chunked_hidden_states.view(
            total_num_heads, num_chunks, window_overlap, window_overlap + hidden_dim
        )
        chunked_hidden_states = chunked_hidden_states[:, :, :, :-1]
        return chunked_hidden_states

    @staticmethod
    def _chunk(hidden_states, window_overlap, onnx_export: bool = False):
        """convert into overlapping chunks. Chunk size = 2w, overlap size = w"""
        if not onnx_export:
            # non-overlapping chunks of size = 2w
            hidden_states = hidden_states.view(
                hidden_states.size(0),
                torch.div(hidden_states.size(1), (window_overlap * 2), rounding_mode="trunc"),
                window_overlap * 2,
                hidden_states.size(2),
            )
            # use `as_strided` to make the chunks overlap with an overlap size = window_overlap
            chunk_size = list(hidden_states.size())
            chunk_size[1] = chunk_size[1] * 2 - 1

            chunk_stride = list(hidden_states.stride())
            chunk_stride[1] = chunk_stride[1] // 2
            return hidden_states.as_strided(size=chunk_size, stride=chunk_stride)

        # When exporting to ONNX, use this separate logic
        # have to use slow implementation since as_strided, unfold and 2d-tensor indexing aren't supported (yet) in ONNX export

        # TODO replace this with
        # > return hidden_states.unfold(dimension=1, size=window_overlap * 2, step=window_overlap).transpose(2, 3)
        # once `unfold` is supported
        # the case hidden_states.size(1) == window_overlap * 2 can also simply return hidden_states.unsqueeze(1), but that's control flow

        chunk_size = [
            hidden_states.size(0),
            torch.div(hidden_states.size(1), window_overlap, rounding_mode="trunc") - 1,
            window_overlap * 2,
            hidden_states.size(2),
        ]

        overlapping_chunks = torch.empty(chunk_size, device=hidden_states.device)
        for chunk in range(chunk_size[1]):
            overlapping_chunks[:, chunk, :, :] = hidden_states[
                :, chunk * window_overlap : chunk * window_overlap + 2 * window_overlap, :
            ]
        return overlapping_chunks

    @staticmethod
    def _mask_invalid_locations(input_tensor, affected_seq_len) -> torch.Tensor:
        beginning_mask_2d = input_tensor.new_ones(affected_seq_len, affected_seq_len + 1).tril().flip(dims=[0])
        beginning_mask = beginning_mask_2d[None, :, None, :]
        ending_mask = beginning_mask.flip(dims=(1, 3))
        beginning_input = input_tensor[:, :affected_seq_len, :, : affected_seq_len + 1]
        beginning_mask = beginning_mask.expand(beginning_input.size())
        input_tensor[:, :affected_seq_len, :, : affected_seq_len + 1] = torch.full_like(
            beginning_input, -float("inf")
        ).where(beginning_mask.bool(), beginning_input)
        ending_input = input_tensor[:, -affected_seq_len:, :, -(affected_seq_len + 1) :]
        ending_mask = ending_mask.expand(ending_input.size())
        input_tensor[:, -affected_seq_len:, :, -(affected_seq_len + 1) :] = torch.full_like(
            ending_input, -float("inf")
        ).where(ending_mask.bool(), ending_input)

    def _sliding_chunks_query_key_matmul(self, query: torch.Tensor, key: torch.Tensor, window_overlap: int):
        """
        Matrix multiplication of query and key tensors using with a sliding window attention pattern. This
        implementation splits the input into overlapping chunks of size 2w (e.g. 512 for pretrained Longformer) with an
        overlap of size window_overlap
        """
        batch_size, seq_len, num_heads, head_dim = query.size()
        assert (
            seq_len % (window_overlap * 2) == 0
        ), f"Sequence length should be multiple of {window_overlap * 2}. Given {seq_len}"
        assert query.size() == key.size()

        chunks_count = torch.div(seq_len, window_overlap, rounding_mode="trunc") - 1

        # group batch_size and num_heads dimensions into one, then chunk seq_len into chunks of size window_overlap * 2
        query = query.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)
        key = key.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)

        query = self._chunk(query, window_overlap, getattr(self, "onnx_export", False))
        key = self._chunk(key, window_overlap, getattr(self, "onnx_export", False))

        # matrix multiplication
        # bcxd: batch_size * num_heads x chunks x 2window_overlap x head_dim
        # bcyd: batch_size * num_heads x chunks x 2window_overlap x head_dim
        # bcxy: batch_size * num_heads x chunks x 2window_overlap x 2window_overlap
        diagonal_chunked_attention_scores = torch.einsum("bcxd,bcyd->bcxy", (query, key))  # multiply

        # convert diagonals into columns
        diagonal_chunked_attention_scores = self._pad_and_transpose_last_two_dims(
            diagonal_chunked_attention_scores, padding=(0, 0, 0, 1)
        )

        # allocate space for the overall attention matrix where the chunks are combined. The last dimension
        # has (window_overlap * 2 + 1) columns. The first (window_overlap) columns are the window_overlap lower triangles (attention from a word to
        # window_overlap previous words). The following column is attention score from each word to itself, then
        # followed by window_overlap columns for the upper triangle.

        diagonal_attention_scores = diagonal_chunked_attention_scores.new_zeros(
            (batch_size * num_heads, chunks_count + 1, window_overlap, window_overlap * 2 + 1)
        )

        # copy parts from diagonal_chunked_attention_scores into the combined matrix of attentions
        # - copying the main diagonal and the upper triangle
        diagonal_attention_scores[:, :-1, :, window_overlap:] = diagonal_chunked_attention_scores[
            :, :, :window_overlap, : window_overlap + 1
        ]
        diagonal_attention_scores[:, -1, :, window_overlap:] = diagonal_chunked_attention_scores[
            :, -1, window_overlap:, : window_overlap + 1
        ]
        # - copying the lower triangle
        diagonal_attention_scores[:, 1:, :, :window_overlap] = diagonal_chunked_attention_scores[
            :, :, -(window_overlap + 1) : -1, window_overlap + 1 :
        ]

        diagonal_attention_scores[:, 0, 1:window_overlap, 1:window_overlap] = diagonal_chunked_attention_scores[
            :, 0, : window_overlap - 1, 1 - window_overlap :
        ]

        # separate batch_size and num_heads dimensions again
        diagonal_attention_scores = diagonal_attention_scores.view(
            batch_size, num_heads, seq_len, 2 * window_overlap + 1
        ).transpose(2, 1)

        self._mask_invalid_locations(diagonal_attention_scores, window_overlap)
        return diagonal_attention_scores

    def _sliding_chunks_matmul_attn_probs_value(
        self, attn_probs: torch.Tensor, value: torch.Tensor, window_overlap: int
    ):
        """
        Same as _sliding_chunks_query_key_matmul but for attn_probs and value tensors. Returned tensor will be of the
        same shape as `attn_probs`
        """
        batch_size, seq_len, num_heads, head_dim = value.size()

        assert seq_len % (window_overlap * 2) == 0
        assert attn_probs.size()[:3] == value.size()[:3]
        assert attn_probs.size(3) == 2 * window_overlap + 1
        chunks_count = torch.div(seq_len, window_overlap, rounding_mode="trunc") - 1
        # group batch_size and num_heads dimensions into one, then chunk seq_len into chunks of size 2 window overlap

        chunked_attn_probs = attn_probs.transpose(1, 2).reshape(
            batch_size * num_heads,
            torch.div(seq_len, window_overlap, rounding_mode="trunc"),
            window_overlap,
            2 * window_overlap + 1,
        )

        # group batch_size and num_heads dimensions into one
        value = value.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)

        # pad seq_len with w at the beginning of the sequence and another window overlap at the end
        padded_value = nn.functional.pad(value, (0, 0, window_overlap, window_overlap), value=-1)

        # chunk padded_value into chunks of size 3 window overlap and an overlap of size window overlap
        chunked_value_size = (batch_size * num_heads, chunks_count + 1, 3 * window_overlap, head_dim)
        chunked_value_stride = padded_value.stride()
        chunked_value_stride = (
            chunked_value_stride[0],
            window_overlap * chunked_value_stride[1],
            chunked_value_stride[1],
            chunked_value_stride[2],
        )
        chunked_value = padded_value.as_strided(size=chunked_value_size, stride=chunked_value_stride)

        chunked_attn_probs = self._pad_and_diagonalize(chunked_attn_probs)

        context = torch.einsum("bcwd,bcdh->bcwh", (chunked_attn_probs, chunked_value))
        return context.view(batch_size, num_heads, seq_len, head_dim).transpose(1, 2)


# ---- a sliding window through Tensor.unfold (lucidrains/local-attention's look_around, simplified) ----
def unfold_window_attention(q, k, v, w, mask):
    # q, k, v: (batch, seq, heads, dim); each position attends to [i - w, i + w]
    b, n, h, d = q.shape
    kp = F.pad(k, (0, 0, 0, 0, w, w))                     # pad the sequence axis
    vp = F.pad(v, (0, 0, 0, 0, w, w))
    mp = F.pad(mask, (w, w), value=1)
    kw = kp.unfold(1, 2 * w + 1, 1)                       # (b, n, h, d, 2w+1)
    vw = vp.unfold(1, 2 * w + 1, 1)
    mw = mp.unfold(1, 2 * w + 1, 1)                       # (b, n, 2w+1)
    scores = torch.einsum("bnhd,bnhdw->bnhw", q / math.sqrt(d), kw)
    scores = scores.masked_fill(mw[:, :, None, :] != 0, float("-inf"))
    probs = scores.softmax(dim=-1)
    return torch.einsum("bnhw,bnhdw->bnhd", probs, vw), probs


def dense_banded_attention(q, k, v, w, mask):
    b, n, h, d = q.shape
    scores = torch.einsum("bihd,bjhd->bhij", q / math.sqrt(d), k)
    i = torch.arange(n)
    band = (i[:, None] - i[None, :]).abs() > w
    scores = scores.masked_fill(band | (mask[:, None, None, :] != 0), float("-inf"))
    return torch.einsum("bhij,bjhd->bihd", scores.softmax(-1), v)


class Layer(nn.Module):
    def __init__(self, hidden, heads, window, layer_id):
        super().__init__()
        self.attn = LongformerSelfAttention(hidden, heads, window, layer_id)
        self.out = nn.Linear(hidden, hidden)
        self.norm1 = nn.LayerNorm(hidden)

    def forward(self, x, attention_mask):
        a = self.attn(x, attention_mask=attention_mask)[0]
        return self.norm1(x + self.out(a))


class Encoder(nn.Module):
    def __init__(self, vocab, hidden, heads, window, layers, classes):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(64, hidden)
        self.layers = nn.ModuleList([Layer(hidden, heads, window, i) for i in range(layers)])
        self.cls = nn.Linear(hidden, classes)

    def forward(self, ids, attention_mask):
        # LongformerModel: 1 -> local attention (0 here), 0 -> padding (-10000 here)
        extended = (attention_mask.float() - 1) * 10000.0
        x = self.emb(ids) + self.pos(torch.arange(ids.size(1)))
        for layer in self.layers:
            x = layer(x, extended)
        return self.cls(x[:, 0])


def numpy_init(module, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            fan = p.shape[1] if p.dim() > 1 else 16
            p.copy_(torch.from_numpy((r.standard_normal(tuple(p.shape)) / np.sqrt(fan)).astype(np.float32)))
    return module


torch.manual_seed(0)
hidden, heads, w, seq, B = 16, 2, 2, 8, 2
att = numpy_init(LongformerSelfAttention(hidden, heads, [2 * w, 2 * w], 0), 0)
print("one_sided_attn_window_size", att.one_sided_attn_window_size, "head_dim", att.head_dim)
g = np.random.default_rng(1)
x = torch.from_numpy(g.standard_normal((B, seq, hidden)).astype(np.float32)).requires_grad_()
mask = torch.zeros(B, seq)
mask[1, -3:] = -10000.0                                    # padding in the second sequence
out, probs = att(x, attention_mask=mask)
print("out", tuple(out.shape), f"{out.sum().item():.5f}", "probs", tuple(probs.shape))
print("probs row", [f"{v:.4f}" for v in probs[1, 4, 0].tolist()], "row sums",
      [f"{v:.4f}" for v in probs.sum(-1)[0, :, 0].tolist()])
out.pow(2).sum().backward()
print("grad", f"{x.grad.norm().item():.5f}", f"{att.query.weight.grad.abs().sum().item():.5f}")

# the chunked result against unfold and dense banded attention
with torch.no_grad():
    qv = (att.query(x) / math.sqrt(att.head_dim)).view(B, seq, heads, -1) * math.sqrt(att.head_dim)
    kv = att.key(x).view(B, seq, heads, -1)
    vv = att.value(x).view(B, seq, heads, -1)
    pad = (mask != 0).float()
    u, up = unfold_window_attention(qv, kv, vv, w, pad)
    dense = dense_banded_attention(qv, kv, vv, w, pad)
    ref = out.detach().view(B, seq, heads, -1)
print("unfold == dense (unpadded rows)", torch.allclose(u[:, :5], dense[:, :5], atol=1e-5), "chunked == dense (unpadded rows)",
      torch.allclose(ref[:, :5], dense[:, :5], atol=1e-5), f"{(ref - dense).abs()[0].max().item():.6f}")
print("unfold probs", tuple(up.shape), [f"{v:.4f}" for v in up[1, 4, 0].tolist()])
print("_chunk", tuple(LongformerSelfAttention._chunk(torch.arange(24.).view(1, 8, 3), 2).shape),
      LongformerSelfAttention._chunk(torch.arange(24.).view(1, 8, 3), 2)[0, 1, :, 0].tolist())
print("onnx _chunk", torch.equal(LongformerSelfAttention._chunk(torch.arange(24.).view(1, 8, 3), 2, True),
                                 LongformerSelfAttention._chunk(torch.arange(24.).view(1, 8, 3), 2)))

# a small classifier trained a few steps, then its step compiled against eager
model = numpy_init(Encoder(50, hidden, heads, [2 * w], 1, 3), 2)
ids = torch.from_numpy(g.integers(1, 50, (B, seq)))
am = torch.ones(B, seq, dtype=torch.long)
am[1, -3:] = 0
labels = torch.tensor([0, 2])
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for step in range(3):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(ids, am), labels)
    loss.backward()
    optimizer.step()
    print("step", step, f"{loss.item():.6f}")


def train_step(ids, am, labels):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(ids, am), labels)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(ids, am, labels).item() for _ in range(2)]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(ids, am, labels).item() for _ in range(2)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
