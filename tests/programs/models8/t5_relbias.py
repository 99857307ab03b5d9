# huggingface/transformers, models/t5/modeling_t5.py (T5LayerNorm with its float32
# variance, T5DenseActDense, T5LayerFF, T5Attention with _relative_position_bucket
# (torch.log of the relative positions, torch.where, torch.min with full_like,
# bidirectional and causal), compute_bias, the position bias shared by the later
# layers and the extended attention mask added to it, T5LayerSelfAttention,
# T5LayerCrossAttention, T5Block and a T5Stack's forward with the causal decoder
# mask, get_extended_attention_mask's finfo.min, _shift_right, and the
# conditional generation loss with ignore_index=-100 and tied embeddings scaled
# by d_model ** -0.5).  Changes for a CPU test: no config / PreTrainedModel (the
# config fields are constructor arguments), no caching / head masks / gradient
# checkpointing, a tiny configuration (d_model 16, d_kv 8, 2 heads, d_ff 32, 2
# encoder layers and 1 decoder layer, 8 buckets, max_distance 16), dropout 0 and weights
# from numpy.  Then an encoder training step under torch.compile against the same step
# run eagerly.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import CrossEntropyLoss


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        """
        Construct a layernorm module in the T5 style. No bias and no subtraction of mean.
        """
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        # T5 uses a layer_norm which only scales and doesn't shift, which is also known as Root Mean
        # Square Layer Normalization https://huggingface.co/papers/1910.07467 thus varience is calculated
        # w/o mean and there is no bias. Additionally we want to make sure that the accumulation for
        # half-precision inputs is done in fp32

        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)

        # convert into half-precision if necessary
        if self.weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(self.weight.dtype)

        return self.weight * hidden_states


class T5DenseActDense(nn.Module):
    def __init__(self, d_model, d_ff, dropout_rate):
        super().__init__()
        self.wi = nn.Linear(d_model, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout_rate)
        self.act = nn.ReLU()

    def forward(self, hidden_states):
        hidden_states = self.wi(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.dropout(hidden_states)
        if (
            isinstance(self.wo.weight, torch.Tensor)
            and hidden_states.dtype != self.wo.weight.dtype
            and self.wo.weight.dtype != torch.int8
        ):
            hidden_states = hidden_states.to(self.wo.weight.dtype)
        hidden_states = self.wo(hidden_states)
        return hidden_states


class T5LayerFF(nn.Module):
    def __init__(self, d_model, d_ff, dropout_rate, layer_norm_epsilon):
        super().__init__()
        self.DenseReluDense = T5DenseActDense(d_model, d_ff, dropout_rate)
        self.layer_norm = T5LayerNorm(d_model, eps=layer_norm_epsilon)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, hidden_states):
        forwarded_states = self.layer_norm(hidden_states)
        forwarded_states = self.DenseReluDense(forwarded_states)
        hidden_states = hidden_states + self.dropout(forwarded_states)
        return hidden_states


class T5Attention(nn.Module):
    def __init__(self, d_model, d_kv, num_heads, dropout_rate, relative_attention_num_buckets,
                 relative_attention_max_distance, is_decoder=False,
                 has_relative_attention_bias=False):
        super().__init__()
        self.is_decoder = is_decoder
        self.has_relative_attention_bias = has_relative_attention_bias
        self.relative_attention_num_buckets = relative_attention_num_buckets
        self.relative_attention_max_distance = relative_attention_max_distance
        self.d_model = d_model
        self.key_value_proj_dim = d_kv
        self.n_heads = num_heads
        self.dropout = dropout_rate
        self.inner_dim = self.n_heads * self.key_value_proj_dim

        # Mesh TensorFlow initialization to avoid scaling before softmax
        self.q = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, self.d_model, bias=False)

        if self.has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(self.relative_attention_num_buckets, self.n_heads)

    @staticmethod
    def _relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
        """
        Adapted from Mesh Tensorflow:
        https://github.com/tensorflow/mesh/blob/0cb87fe07da627bf0b7e60475d59f95ed6b5be3d/mesh_tensorflow/transformer/transformer_layers.py#L593

        Translate relative position to a bucket number for relative attention. The relative position is defined as
        memory_position - query_position, i.e. the distance in tokens from the attending position to the attended-to
        position. If bidirectional=False, then positive relative positions are invalid. We use smaller buckets for
        small absolute relative_position and larger buckets for larger absolute relative_positions. All relative
        positions >=max_distance map to the same bucket. All relative positions <=-max_distance map to the same bucket.
        This should allow for more graceful generalization to longer sequences than the model has been trained on
        """
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        # now relative_position is in the range [0, inf)

        # half of the buckets are for exact increments in positions
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact

        # The other half of the buckets are for logarithmically bigger bins in positions up to max_distance
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).to(torch.long)
        relative_position_if_large = torch.min(
            relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
        )

        relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
        return relative_buckets

    def compute_bias(self, query_length, key_length, device=None, cache_position=None):
        """Compute binned relative position bias"""
        if device is None:
            device = self.relative_attention_bias.weight.device
        if cache_position is None:
            context_position = torch.arange(query_length, dtype=torch.long, device=device)[:, None]
        else:
            context_position = cache_position[:, None].to(device)
        memory_position = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
        relative_position = memory_position - context_position  # shape (query_length, key_length)
        relative_position_bucket = self._relative_position_bucket(
            relative_position,  # shape (query_length, key_length)
            bidirectional=(not self.is_decoder),
            num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance,
        )
        values = self.relative_attention_bias(relative_position_bucket)  # shape (query_length, key_length, num_heads)
        values = values.permute([2, 0, 1]).unsqueeze(0)  # shape (1, num_heads, query_length, key_length)
        return values

    def forward(self, hidden_states, mask=None, key_value_states=None, position_bias=None,
                output_attentions=False):
        """
        Self-attention (if key_value_states is None) or attention over source sentence (provided by key_value_states).
        """
        # Input is (batch_size, seq_length, dim)
        # Mask is (batch_size, 1, 1, key_length) (non-causal encoder) or (batch_size, 1, seq_length, key_length) (causal decoder)
        batch_size, seq_length = hidden_states.shape[:2]

        # if key_value_states are provided this layer is used as a cross-attention layer for the decoder
        is_cross_attention = key_value_states is not None

        query_states = self.q(hidden_states)
        query_states = query_states.view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)

        current_states = key_value_states if is_cross_attention else hidden_states
        key_states = self.k(current_states)
        value_states = self.v(current_states)
        key_states = key_states.view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)
        value_states = value_states.view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)

        # compute scores, equivalent of torch.einsum("bnqd,bnkd->bnqk", query_states, key_states), compatible with onnx op>9
        scores = torch.matmul(query_states, key_states.transpose(3, 2))

        if position_bias is None:
            key_length = key_states.shape[-2]
            # cache position is 0-indexed so we add 1 to get the real length of queries (aka with past)
            real_seq_length = seq_length
            if not self.has_relative_attention_bias:
                position_bias = torch.zeros(
                    (1, self.n_heads, seq_length, key_length), device=scores.device, dtype=scores.dtype
                )
            else:
                position_bias = self.compute_bias(real_seq_length, key_length, device=scores.device)
                position_bias = position_bias[:, :, -seq_length:, :]

            if mask is not None:
                causal_mask = mask[:, :, :, : key_states.shape[-2]]
                position_bias = position_bias + causal_mask

        position_bias_masked = position_bias
        scores += position_bias_masked

        # (batch_size, n_heads, seq_length, key_length)
        attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        attn_weights = nn.functional.dropout(attn_weights, p=self.dropout, training=self.training)

        attn_output = torch.matmul(attn_weights, value_states)

        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.view(batch_size, -1, self.inner_dim)
        attn_output = self.o(attn_output)

        outputs = (attn_output, position_bias)

        if output_attentions:
            outputs = outputs + (attn_weights,)
        return outputs


class T5LayerSelfAttention(nn.Module):
    def __init__(self, cfg, has_relative_attention_bias=False, is_decoder=False):
        super().__init__()
        self.SelfAttention = T5Attention(cfg["d_model"], cfg["d_kv"], cfg["num_heads"], cfg["dropout_rate"],
                                         cfg["num_buckets"], cfg["max_distance"], is_decoder=is_decoder,
                                         has_relative_attention_bias=has_relative_attention_bias)
        self.layer_norm = T5LayerNorm(cfg["d_model"], eps=cfg["layer_norm_epsilon"])
        self.dropout = nn.Dropout(cfg["dropout_rate"])

    def forward(self, hidden_states, attention_mask=None, position_bias=None, output_attentions=False):
        normed_hidden_states = self.layer_norm(hidden_states)
        attention_output = self.SelfAttention(
            normed_hidden_states,
            mask=attention_mask,
            position_bias=position_bias,
            output_attentions=output_attentions,
        )
        hidden_states = hidden_states + self.dropout(attention_output[0])
        outputs = (hidden_states,) + attention_output[1:]  # add attentions if we output them
        return outputs


class T5LayerCrossAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.EncDecAttention = T5Attention(cfg["d_model"], cfg["d_kv"], cfg["num_heads"], cfg["dropout_rate"],
                                           cfg["num_buckets"], cfg["max_distance"], is_decoder=True,
                                           has_relative_attention_bias=False)
        self.layer_norm = T5LayerNorm(cfg["d_model"], eps=cfg["layer_norm_epsilon"])
        self.dropout = nn.Dropout(cfg["dropout_rate"])

    def forward(self, hidden_states, key_value_states, attention_mask=None, position_bias=None,
                output_attentions=False):
        normed_hidden_states = self.layer_norm(hidden_states)
        attention_output = self.EncDecAttention(
            normed_hidden_states,
            mask=attention_mask,
            key_value_states=key_value_states,
            position_bias=position_bias,
            output_attentions=output_attentions,
        )
        layer_output = hidden_states + self.dropout(attention_output[0])
        outputs = (layer_output,) + attention_output[1:]  # add attentions if we output them
        return outputs


class T5Block(nn.Module):
    def __init__(self, cfg, has_relative_attention_bias=False, is_decoder=False):
        super().__init__()
        self.is_decoder = is_decoder
        self.layer = nn.ModuleList()
        self.layer.append(T5LayerSelfAttention(cfg, has_relative_attention_bias=has_relative_attention_bias,
                                               is_decoder=is_decoder))
        if self.is_decoder:
            self.layer.append(T5LayerCrossAttention(cfg))

        self.layer.append(T5LayerFF(cfg["d_model"], cfg["d_ff"], cfg["dropout_rate"], cfg["layer_norm_epsilon"]))

    def forward(self, hidden_states, attention_mask=None, position_bias=None, encoder_hidden_states=None,
                encoder_attention_mask=None, encoder_decoder_position_bias=None, output_attentions=False):
        self_attention_outputs = self.layer[0](
            hidden_states,
            attention_mask=attention_mask,
            position_bias=position_bias,
            output_attentions=output_attentions,
        )
        hidden_states = self_attention_outputs[0]
        attention_outputs = self_attention_outputs[1:]  # Keep self-attention outputs and relative position weights

        # clamp inf values to enable fp16 training
        if hidden_states.dtype == torch.float16:
            clamp_value = torch.where(
                torch.isinf(hidden_states).any(),
                torch.finfo(hidden_states.dtype).max - 1000,
                torch.finfo(hidden_states.dtype).max,
            )
            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)

        do_cross_attention = self.is_decoder and encoder_hidden_states is not None
        if do_cross_attention:
            cross_attention_outputs = self.layer[1](
                hidden_states,
                key_value_states=encoder_hidden_states,
                attention_mask=encoder_attention_mask,
                position_bias=encoder_decoder_position_bias,
                output_attentions=output_attentions,
            )
            hidden_states = cross_attention_outputs[0]
            # Keep cross-attention outputs and relative position weights
            attention_outputs = attention_outputs + cross_attention_outputs[1:]

        # Apply Feed Forward layer
        hidden_states = self.layer[-1](hidden_states)

        outputs = (hidden_states,)
        return outputs + attention_outputs


def get_extended_attention_mask(attention_mask, input_shape, is_decoder, dtype=torch.float32):
    # (modeling_utils.ModuleUtilsMixin)
    if attention_mask.dim() == 3:
        extended_attention_mask = attention_mask[:, None, :, :]
    elif attention_mask.dim() == 2:
        if is_decoder:
            batch_size, seq_length = input_shape
            seq_ids = torch.arange(seq_length, device=attention_mask.device)
            causal_mask = seq_ids[None, None, :].repeat(batch_size, seq_length, 1) <= seq_ids[None, :, None]
            causal_mask = causal_mask.to(attention_mask.dtype)
            extended_attention_mask = causal_mask[:, None, :, :] * attention_mask[:, None, None, :]
        else:
            extended_attention_mask = attention_mask[:, None, None, :]
    else:
        raise ValueError(
            f"Wrong shape for input_ids (shape {input_shape}) or attention_mask (shape {attention_mask.shape})"
        )
    extended_attention_mask = extended_attention_mask.to(dtype=dtype)  # fp16 compatibility
    extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min
    return extended_attention_mask


class T5Stack(nn.Module):
    def __init__(self, cfg, embed_tokens=None, is_decoder=False):
        super().__init__()
        self.embed_tokens = embed_tokens
        self.is_decoder = is_decoder
        self.block = nn.ModuleList(
            [T5Block(cfg, has_relative_attention_bias=bool(i == 0), is_decoder=is_decoder)
             for i in range(cfg["num_layers"])]
        )
        self.final_layer_norm = T5LayerNorm(cfg["d_model"], eps=cfg["layer_norm_epsilon"])
        self.dropout = nn.Dropout(cfg["dropout_rate"])

    def forward(self, input_ids=None, attention_mask=None, encoder_hidden_states=None,
                encoder_attention_mask=None, output_attentions=False):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        inputs_embeds = self.embed_tokens(input_ids)
        batch_size, seq_length = input_shape

        if attention_mask is None:
            attention_mask = torch.ones(batch_size, seq_length, device=inputs_embeds.device)
        extended_attention_mask = get_extended_attention_mask(attention_mask, input_shape, self.is_decoder)

        if self.is_decoder and encoder_hidden_states is not None:
            encoder_batch_size, encoder_sequence_length, _ = encoder_hidden_states.size()
            if encoder_attention_mask is None:
                encoder_attention_mask = torch.ones((encoder_batch_size, encoder_sequence_length),
                                                    device=inputs_embeds.device, dtype=torch.long)
            encoder_extended_attention_mask = encoder_attention_mask[:, None, None, :].to(torch.float32)
            encoder_extended_attention_mask = (1.0 - encoder_extended_attention_mask) * torch.finfo(torch.float32).min
        else:
            encoder_extended_attention_mask = None

        all_attentions = () if output_attentions else None
        position_bias = None
        encoder_decoder_position_bias = None

        hidden_states = self.dropout(inputs_embeds)

        for i, layer_module in enumerate(self.block):
            layer_outputs = layer_module(
                hidden_states,
                attention_mask=extended_attention_mask,
                position_bias=position_bias,
                encoder_hidden_states=encoder_hidden_states,
                encoder_attention_mask=encoder_extended_attention_mask,
                encoder_decoder_position_bias=encoder_decoder_position_bias,
                output_attentions=output_attentions,
            )
            hidden_states = layer_outputs[0]

            # We share the position biases between the layers - the first layer store them
            # layer_outputs = hidden-states, (self-attention position bias), (self-attention weights),
            # (cross-attention position bias), (cross-attention weights)
            position_bias = layer_outputs[1]
            if self.is_decoder and encoder_hidden_states is not None:
                encoder_decoder_position_bias = layer_outputs[3 if output_attentions else 2]
            if output_attentions:
                all_attentions = all_attentions + (layer_outputs[2],)

        hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states, all_attentions


class T5ForConditionalGeneration(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.model_dim = cfg["d_model"]
        self.shared = nn.Embedding(cfg["vocab_size"], cfg["d_model"])
        self.encoder = T5Stack(dict(cfg), self.shared)
        self.decoder = T5Stack(dict(cfg, num_layers=cfg["num_decoder_layers"]), self.shared, is_decoder=True)
        self.lm_head = nn.Linear(cfg["d_model"], cfg["vocab_size"], bias=False)
        self.lm_head.weight = self.shared.weight        # tie_word_embeddings
        self.decoder_start_token_id = cfg["decoder_start_token_id"]
        self.pad_token_id = cfg["pad_token_id"]

    def _shift_right(self, input_ids):
        decoder_start_token_id = self.decoder_start_token_id
        pad_token_id = self.pad_token_id

        # shift inputs to the right
        shifted_input_ids = input_ids.new_zeros(input_ids.shape)
        shifted_input_ids[..., 1:] = input_ids[..., :-1].clone()
        shifted_input_ids[..., 0] = decoder_start_token_id

        if pad_token_id is None:
            raise ValueError("self.model.config.pad_token_id has to be defined.")
        # replace possible -100 values in labels by `pad_token_id`
        shifted_input_ids.masked_fill_(shifted_input_ids == -100, pad_token_id)

        return shifted_input_ids

    def forward(self, input_ids, attention_mask=None, labels=None):
        hidden_states, _ = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
        decoder_input_ids = self._shift_right(labels)
        sequence_output, _ = self.decoder(input_ids=decoder_input_ids, encoder_hidden_states=hidden_states,
                                          encoder_attention_mask=attention_mask)
        # Rescale output before projecting on vocab
        # See https://github.com/tensorflow/mesh/blob/fa19d69eafc9a482aff0b59ddd96b025c0cb207d/mesh_tensorflow/transformer/transformer.py#L586
        sequence_output = sequence_output * (self.model_dim**-0.5)
        lm_logits = self.lm_head(sequence_output)
        loss = None
        if labels is not None:
            loss_fct = CrossEntropyLoss(ignore_index=-100)
            loss = loss_fct(lm_logits.view(-1, lm_logits.size(-1)), labels.view(-1))
        return loss, lm_logits


# the buckets themselves, bidirectional and causal
rel = torch.arange(-20, 21)[None, :]
print("bidirectional", T5Attention._relative_position_bucket(rel, True, 8, 16).tolist())
print("causal", T5Attention._relative_position_bucket(rel, False, 8, 16).tolist())
print("default", T5Attention._relative_position_bucket(torch.tensor([[-300, -130, -20, 0, 5, 64, 200]])).tolist())

cfg = dict(vocab_size=24, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_decoder_layers=1, num_heads=2,
           num_buckets=8, max_distance=16, dropout_rate=0.0, layer_norm_epsilon=1e-6,
           decoder_start_token_id=0, pad_token_id=0)
model = T5ForConditionalGeneration(cfg)
r = np.random.default_rng(0)
with torch.no_grad():
    for name, p in model.named_parameters():
        if "layer_norm" in name:
            continue
        std = 1.0 if name == "shared.weight" else p.shape[-1] ** -0.5
        p.copy_(torch.from_numpy((std * r.standard_normal(tuple(p.shape))).astype(np.float32)))
print("params", sum(p.numel() for p in model.parameters()), "tied", model.lm_head.weight is model.shared.weight)

bias = model.encoder.block[0].layer[0].SelfAttention.compute_bias(5, 7)
print("compute_bias", tuple(bias.shape), [f"{v:.4f}" for v in bias[0, 1, 2].tolist()])
dbias = model.decoder.block[0].layer[0].SelfAttention.compute_bias(4, 4)
print("decoder bias", [f"{v:.4f}" for v in dbias[0, 0, 3].tolist()])

g = np.random.default_rng(1)
input_ids = torch.from_numpy(g.integers(2, 24, (3, 7)))
attention_mask = torch.ones(3, 7, dtype=torch.long)
attention_mask[2, 5:] = 0
input_ids[2, 5:] = 0
labels = torch.from_numpy((input_ids.numpy()[:, ::-1][:, :5] + 1) % 24)
labels[1, 4] = -100
print("shift_right", model._shift_right(labels).tolist())
ext = get_extended_attention_mask(torch.ones(2, 3), (2, 3), True)
print("causal mask", (ext[0, 0] == 0).int().tolist(), ext.min().item() == torch.finfo(torch.float32).min)

loss, logits = model(input_ids, attention_mask, labels)
print("loss", f"{loss.item():.6f}", "logits", tuple(logits.shape), f"{logits.std().item():.5f}")
hs, atts = model.encoder(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
print("attn", len(atts), tuple(atts[0].shape), [f"{v:.4f}" for v in atts[1][2, 0, 1].tolist()])
loss.backward()
print("grad bias", [f"{v:.5f}" for v in model.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight.grad[:3, 0].tolist()])

optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(3):
    optimizer.zero_grad()
    loss, _ = model(input_ids, attention_mask, labels)
    loss.backward()
    optimizer.step()
    print("step", step, f"{loss.item():.6f}")


# the compiled step: the encoder stack (as T5EncoderModel, two layers sharing the first's
# position bias) under a sequence-classification loss (the decoder's compile costs seconds)
def train_step(input_ids, attention_mask, labels):
    optimizer.zero_grad()
    hidden, _ = model.encoder(input_ids=input_ids, attention_mask=attention_mask)
    pooled = (hidden * attention_mask[..., None]).sum(1) / attention_mask.sum(1, keepdim=True)
    loss = F.cross_entropy(pooled @ model.shared.weight[:4].t(), labels[:, 0] % 4)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(input_ids, attention_mask, labels).item() for _ in range(2)]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(input_ids, attention_mask, labels).item() for _ in range(2)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
