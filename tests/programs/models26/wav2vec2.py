# facebookresearch/fairseq's wav2vec 2.0 ported standalone the way its
# models/wav2vec/wav2vec2.py, modules/gumbel_vector_quantizer.py,
# modules/fp32_group_norm.py, modules/same_pad.py, data/data_utils.py and
# criterions/wav2vec_criterion.py write it: ConvFeatureExtractionModel's
# blocks (Conv1d without bias under kaiming_normal_, Dropout, Fp32GroupNorm
# (dim, dim) on the first layer only in "default" mode, the TransposeLast /
# Fp32LayerNorm sandwich in "layer_norm" mode, GELU) on x.unsqueeze(1);
# Fp32GroupNorm / Fp32LayerNorm casting input and affine params to float and
# the output back with type_as; features_pen = features.float().pow(2).mean();
# compute_mask_indices in numpy (probabilistic rounding with np.random.rand,
# np.random.choice, np.unique, the same number of masks per row) and
# index_put's x[mask_indices] = self.mask_emb; the padding mask from
# _get_feat_extract_output_lengths (torch.floor((len - k) / stride + 1),
# .to(torch.long)), padding_mask[(torch.arange(B), output_lengths - 1)] = 1
# and (1 - padding_mask.flip([-1]).cumsum(-1).flip([-1])).bool(), zeroed
# frames by index_put(x, padding_mask, 0); y = unmasked_features[
# mask_indices].view(...); the TransformerEncoder's grouped positional
# Conv1d(..., padding=conv_pos // 2, groups=16) with normal_ / constant_
# init under nn.utils.weight_norm(..., name="weight", dim=2), SamePad and
# GELU, post-norm TransformerSentenceEncoderLayers on T x B x C (here with
# nn.MultiheadAttention), init_bert_params through self.apply, layerdrop by
# np.random.random(); GradMultiply (an autograd.Function whose forward
# returns x.new(x)) scaling the features' gradient by feature_grad_mult;
# the GumbelVectorQuantizer (vars =
# nn.Parameter(torch.FloatTensor(1, G * V, var_dim)) with uniform_,
# weight_proj with normal_ / zeros_, x.max(-1) under no_grad,
# x.new_zeros(*x.shape).scatter_(-1, k.view(-1, 1), 1.0), code / prob
# perplexity as torch.exp(-torch.sum(p * torch.log(p + 1e-7), dim=-1)).sum(),
# F.gumbel_softmax(x.float(), tau=self.curr_temp, hard=True).type_as(x),
# hard_x in eval, x.unsqueeze(-1) * vars summed over the codewords,
# produce_targets, set_num_updates' temperature annealing, the codebook
# through itertools.product indices and index_select); buffered_arange's
# torch.LongTensor() / resize_ / torch.arange(max, out=...); sample_negatives'
# torch.randint index arithmetic (neg_idxs[neg_idxs >= tszs] += 1, the
# per-batch offset, cross-sample negatives concatenated) and the codebook
# negatives from sample_from_codebook through project_q; compute_preds' (y == negatives).all(-1),
# torch.cosine_similarity(x.float(), targets.float(), dim=-1).type_as(x) /
# logit_temp and logits[1:] = index_put(logits[1:], neg_is_pos, -inf);
# get_logits / get_targets and the criterion's F.cross_entropy(...,
# reduction="sum") plus the diversity and feature penalties scaled by the
# sample size; Adam with the quantizer's temperature annealed per update.
# Changes for a CPU test: tiny sizes (3 conv layers of 16 channels,
# embed 32, 2 layers of 4 heads, conv_pos 8, 2 groups of 8 codewords, 4
# negatives, 400-sample waveforms from numpy), dropout 0, weights from
# numpy after the original init, fairseq's own MultiheadAttention as
# nn.MultiheadAttention, a few steps; the first forward uses the original
# draws (torch.randint, F.gumbel_softmax: [rng] lines); the compared
# training takes the same draws from numpy by swapping torch.randint and
# F.gumbel_softmax for numpy-fed versions of the same formulas; then one
# training step under torch.compile against the same step eagerly.
import copy
import math
from contextlib import contextmanager
from itertools import product
from typing import List, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def fmt(x, n=4, p=4):
    return [f"{v:.{p}f}" for v in x.reshape(-1)[:n].tolist()]


# ---- fairseq/modules
class Fp32GroupNorm(nn.GroupNorm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)

    def forward(self, input):
        output = F.group_norm(
            input.float(),
            self.num_groups,
            self.weight.float() if self.weight is not None else None,
            self.bias.float() if self.bias is not None else None,
            self.eps,
        )
        return output.type_as(input)


class Fp32LayerNorm(nn.LayerNorm):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)

    def forward(self, input):
        output = F.layer_norm(
            input.float(),
            self.normalized_shape,
            self.weight.float() if self.weight is not None else None,
            self.bias.float() if self.bias is not None else None,
            self.eps,
        )
        return output.type_as(input)


class TransposeLast(nn.Module):
    def __init__(self, deconstruct_idx=None):
        super().__init__()
        self.deconstruct_idx = deconstruct_idx

    def forward(self, x):
        if self.deconstruct_idx is not None:
            x = x[self.deconstruct_idx]
        return x.transpose(-2, -1)


class SamePad(nn.Module):
    def __init__(self, kernel_size, causal=False):
        super().__init__()
        if causal:
            self.remove = kernel_size - 1
        else:
            self.remove = 1 if kernel_size % 2 == 0 else 0

    def forward(self, x):
        if self.remove > 0:
            x = x[:, :, : -self.remove]
        return x


def init_bert_params(module):
    def normal_(data):
        # with FSDP, module params will be on CUDA, so we cast them back to CPU
        # so that the RNG is consistent with and without FSDP
        data.copy_(
            data.cpu().normal_(mean=0.0, std=0.02).to(data.device)
        )

    if isinstance(module, nn.Linear):
        normal_(module.weight.data)
        if module.bias is not None:
            module.bias.data.zero_()
    if isinstance(module, nn.Embedding):
        normal_(module.weight.data)
        if module.padding_idx is not None:
            module.weight.data[module.padding_idx].zero_()


class GradMultiply(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        res = x.new(x)
        return res

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


# ---- fairseq/data/data_utils.py
def compute_mask_indices(
    shape: Tuple[int, int],
    padding_mask,
    mask_prob: float,
    mask_length: int,
    mask_type: str = "static",
    mask_other: float = 0.0,
    min_masks: int = 0,
    no_overlap: bool = False,
    min_space: int = 0,
    require_same_masks: bool = True,
) -> np.ndarray:
    bsz, all_sz = shape
    mask = np.full((bsz, all_sz), False)

    all_num_mask = int(
        # add a random number for probabilistic rounding
        mask_prob * all_sz / float(mask_length)
        + np.random.rand()
    )

    all_num_mask = max(min_masks, all_num_mask)

    mask_idcs = []
    for i in range(bsz):
        if padding_mask is not None:
            sz = all_sz - padding_mask[i].long().sum().item()
            num_mask = int(
                # add a random number for probabilistic rounding
                mask_prob * sz / float(mask_length)
                + np.random.rand()
            )
            num_mask = max(min_masks, num_mask)
        else:
            sz = all_sz
            num_mask = all_num_mask

        if mask_type == "static":
            lengths = np.full(num_mask, mask_length)
        elif mask_type == "uniform":
            lengths = np.random.randint(mask_other, mask_length * 2 + 1, size=num_mask)
        else:
            raise Exception("unknown mask selection " + mask_type)

        if sum(lengths) == 0:
            lengths[0] = min(mask_length, sz - 1)

        min_len = min(lengths)
        if sz - min_len <= num_mask:
            min_len = sz - num_mask - 1

        mask_idc = np.random.choice(sz - min_len, num_mask, replace=False)

        mask_idc = np.asarray(
            [
                mask_idc[j] + offset
                for j in range(len(mask_idc))
                for offset in range(lengths[j])
            ]
        )

        mask_idcs.append(np.unique(mask_idc[mask_idc < sz]))

    min_len = min([len(m) for m in mask_idcs])
    for i, mask_idc in enumerate(mask_idcs):
        if len(mask_idc) > min_len and require_same_masks:
            mask_idc = np.random.choice(mask_idc, min_len, replace=False)
        mask[i, mask_idc] = True

    return mask


def index_put(tensor, indices, value):
    tensor[indices] = value
    return tensor


def buffered_arange(max):
    if not hasattr(buffered_arange, "buf"):
        buffered_arange.buf = torch.LongTensor()
    if max > buffered_arange.buf.numel():
        buffered_arange.buf.resize_(max)
        torch.arange(max, out=buffered_arange.buf)
    return buffered_arange.buf[:max]


# ---- fairseq/modules/gumbel_vector_quantizer.py
class GumbelVectorQuantizer(nn.Module):
    def __init__(
        self,
        dim,
        num_vars,
        temp,
        groups,
        combine_groups,
        vq_dim,
        time_first,
        activation=nn.GELU(),
        weight_proj_depth=1,
        weight_proj_factor=1,
    ):
        """Vector quantization using gumbel softmax"""
        super().__init__()

        self.groups = groups
        self.combine_groups = combine_groups
        self.input_dim = dim
        self.num_vars = num_vars
        self.time_first = time_first

        assert (
            vq_dim % groups == 0
        ), f"dim {vq_dim} must be divisible by groups {groups} for concatenation"

        var_dim = vq_dim // groups
        num_groups = groups if not combine_groups else 1

        self.vars = nn.Parameter(torch.FloatTensor(1, num_groups * num_vars, var_dim))
        nn.init.uniform_(self.vars)

        if weight_proj_depth > 1:

            def block(input_dim, output_dim):
                return nn.Sequential(nn.Linear(input_dim, output_dim), activation)

            inner_dim = self.input_dim * weight_proj_factor
            self.weight_proj = nn.Sequential(
                *[
                    block(self.input_dim if i == 0 else inner_dim, inner_dim)
                    for i in range(weight_proj_depth - 1)
                ],
                nn.Linear(inner_dim, groups * num_vars),
            )
        else:
            self.weight_proj = nn.Linear(self.input_dim, groups * num_vars)
            nn.init.normal_(self.weight_proj.weight, mean=0, std=1)
            nn.init.zeros_(self.weight_proj.bias)

        if isinstance(temp, str):
            import ast

            temp = ast.literal_eval(temp)
        assert len(temp) == 3, f"{temp}, {len(temp)}"

        self.max_temp, self.min_temp, self.temp_decay = temp
        self.curr_temp = self.max_temp
        self.codebook_indices = None

    def set_num_updates(self, num_updates):
        self.curr_temp = max(
            self.max_temp * self.temp_decay**num_updates, self.min_temp
        )

    def get_codebook_indices(self):
        if self.codebook_indices is None:
            p = [range(self.num_vars)] * self.groups
            inds = list(product(*p))
            self.codebook_indices = torch.tensor(
                inds, dtype=torch.long, device=self.vars.device
            ).flatten()

            if not self.combine_groups:
                self.codebook_indices = self.codebook_indices.view(
                    self.num_vars**self.groups, -1
                )
                for b in range(1, self.groups):
                    self.codebook_indices[:, b] += self.num_vars * b
                self.codebook_indices = self.codebook_indices.flatten()
        return self.codebook_indices

    def codebook(self):
        indices = self.get_codebook_indices()
        return (
            self.vars.squeeze(0)
            .index_select(0, indices)
            .view(self.num_vars**self.groups, -1)
        )

    def sample_from_codebook(self, b, n):
        indices = self.get_codebook_indices()
        indices = indices.view(-1, self.groups)
        cb_size = indices.size(0)
        assert (
            n < cb_size
        ), f"sample size {n} is greater than size of codebook {cb_size}"
        sample_idx = torch.randint(low=0, high=cb_size, size=(b * n,))
        indices = indices[sample_idx]

        z = self.vars.squeeze(0).index_select(0, indices.flatten()).view(b, n, -1)
        return z

    def to_codebook_index(self, indices):
        res = indices.new_full(indices.shape[:-1], 0)
        for i in range(self.groups):
            exponent = self.groups - i - 1
            res += indices[..., i] * (self.num_vars**exponent)
        return res

    def forward_idx(self, x):
        res = self.forward(x, produce_targets=True)
        return res["x"], res["targets"]

    def forward(self, x, produce_targets=False):

        result = {"num_vars": self.num_vars * self.groups}

        if not self.time_first:
            x = x.transpose(1, 2)

        bsz, tsz, fsz = x.shape
        x = x.reshape(-1, fsz)
        x = self.weight_proj(x)
        x = x.view(bsz * tsz * self.groups, -1)

        with torch.no_grad():
            _, k = x.max(-1)
            hard_x = (
                x.new_zeros(*x.shape)
                .scatter_(-1, k.view(-1, 1), 1.0)
                .view(bsz * tsz, self.groups, -1)
            )
            hard_probs = torch.mean(hard_x.float(), dim=0)
            result["code_perplexity"] = torch.exp(
                -torch.sum(hard_probs * torch.log(hard_probs + 1e-7), dim=-1)
            ).sum()

        avg_probs = torch.softmax(
            x.view(bsz * tsz, self.groups, -1).float(), dim=-1
        ).mean(dim=0)
        result["prob_perplexity"] = torch.exp(
            -torch.sum(avg_probs * torch.log(avg_probs + 1e-7), dim=-1)
        ).sum()

        result["temp"] = self.curr_temp

        if self.training:
            x = F.gumbel_softmax(x.float(), tau=self.curr_temp, hard=True).type_as(x)
        else:
            x = hard_x

        x = x.view(bsz * tsz, -1)

        vars = self.vars
        if self.combine_groups:
            vars = vars.repeat(1, self.groups, 1)

        if produce_targets:
            result["targets"] = (
                x.view(bsz * tsz * self.groups, -1)
                .argmax(dim=-1)
                .view(bsz, tsz, self.groups)
                .detach()
            )

        x = x.unsqueeze(-1) * vars
        x = x.view(bsz * tsz, self.groups, self.num_vars, -1)
        x = x.sum(-2)
        x = x.view(bsz, tsz, -1)

        if not self.time_first:
            x = x.transpose(1, 2)  # BTC -> BCT

        result["x"] = x

        return result


# ---- fairseq/models/wav2vec/wav2vec2.py
class ConvFeatureExtractionModel(nn.Module):
    def __init__(
        self,
        conv_layers: List[Tuple[int, int, int]],
        dropout: float = 0.0,
        mode: str = "default",
        conv_bias: bool = False,
    ):
        super().__init__()

        assert mode in {"default", "layer_norm"}

        def block(
            n_in,
            n_out,
            k,
            stride,
            is_layer_norm=False,
            is_group_norm=False,
            conv_bias=False,
        ):
            def make_conv():
                conv = nn.Conv1d(n_in, n_out, k, stride=stride, bias=conv_bias)
                nn.init.kaiming_normal_(conv.weight)
                return conv

            assert (
                is_layer_norm and is_group_norm
            ) == False, "layer norm and group norm are exclusive"

            if is_layer_norm:
                return nn.Sequential(
                    make_conv(),
                    nn.Dropout(p=dropout),
                    nn.Sequential(
                        TransposeLast(),
                        Fp32LayerNorm(dim, elementwise_affine=True),
                        TransposeLast(),
                    ),
                    nn.GELU(),
                )
            elif is_group_norm:
                return nn.Sequential(
                    make_conv(),
                    nn.Dropout(p=dropout),
                    Fp32GroupNorm(dim, dim, affine=True),
                    nn.GELU(),
                )
            else:
                return nn.Sequential(make_conv(), nn.Dropout(p=dropout), nn.GELU())

        in_d = 1
        self.conv_layers = nn.ModuleList()
        for i, cl in enumerate(conv_layers):
            assert len(cl) == 3, "invalid conv definition: " + str(cl)
            (dim, k, stride) = cl

            self.conv_layers.append(
                block(
                    in_d,
                    dim,
                    k,
                    stride,
                    is_layer_norm=mode == "layer_norm",
                    is_group_norm=mode == "default" and i == 0,
                    conv_bias=conv_bias,
                )
            )
            in_d = dim

    def forward(self, x):

        # BxT -> BxCxT
        x = x.unsqueeze(1)

        for conv in self.conv_layers:
            x = conv(x)

        return x


class TransformerSentenceEncoderLayer(nn.Module):
    def __init__(self, embedding_dim=768, ffn_embedding_dim=3072, num_attention_heads=8,
                 dropout=0.1, attention_dropout=0.1, activation_dropout=0.1,
                 activation_fn="relu", layer_norm_first=False):
        super().__init__()
        # Initialize parameters
        self.embedding_dim = embedding_dim
        self.dropout = dropout
        self.activation_dropout = activation_dropout

        # Initialize blocks
        self.activation_fn = F.gelu if activation_fn == "gelu" else F.relu
        self.self_attn = nn.MultiheadAttention(
            self.embedding_dim,
            num_attention_heads,
            dropout=attention_dropout,
        )

        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(self.activation_dropout)
        self.dropout3 = nn.Dropout(dropout)

        self.layer_norm_first = layer_norm_first

        # layer norm associated with the self attention layer
        self.self_attn_layer_norm = nn.LayerNorm(self.embedding_dim)
        self.fc1 = nn.Linear(self.embedding_dim, ffn_embedding_dim)
        self.fc2 = nn.Linear(ffn_embedding_dim, self.embedding_dim)

        # layer norm associated with the position wise feed-forward NN
        self.final_layer_norm = nn.LayerNorm(self.embedding_dim)

    def forward(self, x, self_attn_mask=None, self_attn_padding_mask=None, need_weights=False):
        residual = x

        if self.layer_norm_first:
            x = self.self_attn_layer_norm(x)
            x, attn = self.self_attn(query=x, key=x, value=x,
                                     key_padding_mask=self_attn_padding_mask,
                                     attn_mask=self_attn_mask, need_weights=False)
            x = self.dropout1(x)
            x = residual + x

            residual = x
            x = self.final_layer_norm(x)
            x = self.activation_fn(self.fc1(x))
            x = self.dropout2(x)
            x = self.fc2(x)
            x = self.dropout3(x)
            x = residual + x
        else:
            x, attn = self.self_attn(query=x, key=x, value=x,
                                     key_padding_mask=self_attn_padding_mask,
                                     need_weights=need_weights)

            x = self.dropout1(x)
            x = residual + x

            x = self.self_attn_layer_norm(x)

            residual = x
            x = self.activation_fn(self.fc1(x))
            x = self.dropout2(x)
            x = self.fc2(x)
            x = self.dropout3(x)
            x = residual + x
            x = self.final_layer_norm(x)

        return x, attn


class TransformerEncoder(nn.Module):
    def __init__(self, args):
        super().__init__()

        self.dropout = args.dropout
        self.embedding_dim = args.encoder_embed_dim

        self.pos_conv = nn.Conv1d(
            self.embedding_dim,
            self.embedding_dim,
            kernel_size=args.conv_pos,
            padding=args.conv_pos // 2,
            groups=args.conv_pos_groups,
        )
        dropout = 0
        std = math.sqrt((4 * (1.0 - dropout)) / (args.conv_pos * self.embedding_dim))
        nn.init.normal_(self.pos_conv.weight, mean=0, std=std)
        nn.init.constant_(self.pos_conv.bias, 0)

        self.pos_conv = nn.utils.weight_norm(self.pos_conv, name="weight", dim=2)
        self.pos_conv = nn.Sequential(self.pos_conv, SamePad(args.conv_pos), nn.GELU())

        self.layers = nn.ModuleList(
            [
                TransformerSentenceEncoderLayer(
                    embedding_dim=self.embedding_dim,
                    ffn_embedding_dim=args.encoder_ffn_embed_dim,
                    num_attention_heads=args.encoder_attention_heads,
                    dropout=self.dropout,
                    attention_dropout=args.attention_dropout,
                    activation_dropout=args.activation_dropout,
                    activation_fn=args.activation_fn,
                    layer_norm_first=args.layer_norm_first,
                )
                for _ in range(args.encoder_layers)
            ]
        )

        self.layer_norm_first = args.layer_norm_first
        self.layer_norm = nn.LayerNorm(self.embedding_dim)
        self.layerdrop = args.encoder_layerdrop

        self.apply(init_bert_params)

    def forward(self, x, padding_mask=None, layer=None):
        x, layer_results = self.extract_features(x, padding_mask, layer)

        if self.layer_norm_first and layer is None:
            x = self.layer_norm(x)

        return x, layer_results

    def extract_features(self, x, padding_mask=None, tgt_layer=None):

        if padding_mask is not None:
            x = index_put(x, padding_mask, 0)

        x_conv = self.pos_conv(x.transpose(1, 2))
        x_conv = x_conv.transpose(1, 2)
        x = x + x_conv

        if not self.layer_norm_first:
            x = self.layer_norm(x)

        x = F.dropout(x, p=self.dropout, training=self.training)

        # B x T x C -> T x B x C
        x = x.transpose(0, 1)

        layer_results = []
        r = None
        for i, layer in enumerate(self.layers):
            dropout_probability = np.random.random()
            if not self.training or (dropout_probability > self.layerdrop):
                x, z = layer(x, self_attn_padding_mask=padding_mask, need_weights=False)
                if tgt_layer is not None:
                    layer_results.append((x, z))
            if i == tgt_layer:
                r = x
                break

        if r is not None:
            x = r

        # T x B x C -> B x T x C
        x = x.transpose(0, 1)

        return x, layer_results


class Wav2Vec2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg

        feature_enc_layers = eval(cfg.conv_feature_layers)
        self.embed = feature_enc_layers[-1][0]

        self.feature_extractor = ConvFeatureExtractionModel(
            conv_layers=feature_enc_layers,
            dropout=0.0,
            mode=cfg.extractor_mode,
            conv_bias=cfg.conv_bias,
        )

        self.post_extract_proj = (
            nn.Linear(self.embed, cfg.encoder_embed_dim)
            if self.embed != cfg.encoder_embed_dim and not cfg.quantize_input
            else None
        )

        self.mask_prob = cfg.mask_prob
        self.mask_selection = cfg.mask_selection
        self.mask_other = cfg.mask_other
        self.mask_length = cfg.mask_length
        self.no_mask_overlap = cfg.no_mask_overlap
        self.mask_min_space = cfg.mask_min_space

        self.dropout_input = nn.Dropout(cfg.dropout_input)
        self.dropout_features = nn.Dropout(cfg.dropout_features)

        self.feature_grad_mult = cfg.feature_grad_mult

        self.quantizer = None

        self.n_negatives = cfg.num_negatives
        self.cross_sample_negatives = cfg.cross_sample_negatives
        self.codebook_negatives = cfg.codebook_negatives
        self.negatives_from_everywhere = cfg.negatives_from_everywhere

        self.logit_temp = cfg.logit_temp

        final_dim = cfg.final_dim if cfg.final_dim > 0 else cfg.encoder_embed_dim

        vq_dim = cfg.latent_dim if cfg.latent_dim > 0 else final_dim
        self.quantizer = GumbelVectorQuantizer(
            dim=self.embed,
            num_vars=cfg.latent_vars,
            temp=cfg.latent_temp,
            groups=cfg.latent_groups,
            combine_groups=cfg.combine_groups,
            vq_dim=vq_dim,
            time_first=True,
            weight_proj_depth=cfg.quantizer_depth,
            weight_proj_factor=cfg.quantizer_factor,
        )
        self.project_q = nn.Linear(vq_dim, final_dim)

        self.mask_emb = nn.Parameter(
            torch.FloatTensor(cfg.encoder_embed_dim).uniform_()
        )

        self.encoder = TransformerEncoder(cfg)
        self.layer_norm = nn.LayerNorm(self.embed)

        self.target_glu = None
        self.final_proj = nn.Linear(cfg.encoder_embed_dim, final_dim)

    def _get_feat_extract_output_lengths(self, input_lengths: torch.LongTensor):
        """
        Computes the output length of the convolutional layers
        """

        def _conv_out_length(input_length, kernel_size, stride):
            return torch.floor((input_length - kernel_size) / stride + 1)

        conv_cfg_list = eval(self.cfg.conv_feature_layers)

        for i in range(len(conv_cfg_list)):
            input_lengths = _conv_out_length(
                input_lengths, conv_cfg_list[i][1], conv_cfg_list[i][2]
            )

        return input_lengths.to(torch.long)

    def set_num_updates(self, num_updates):
        """Set the number of parameters updates."""
        self.quantizer.set_num_updates(num_updates)
        self.num_updates = num_updates

    def apply_mask(self, x, padding_mask, mask_indices=None):
        B, T, C = x.shape

        if self.mask_prob > 0:
            if mask_indices is None:
                mask_indices = compute_mask_indices(
                    (B, T),
                    padding_mask,
                    self.mask_prob,
                    self.mask_length,
                    self.mask_selection,
                    self.mask_other,
                    min_masks=2,
                    no_overlap=self.no_mask_overlap,
                    min_space=self.mask_min_space,
                )
                mask_indices = torch.from_numpy(mask_indices).to(x.device)
            x = index_put(x, mask_indices, self.mask_emb)
        else:
            mask_indices = None

        return x, mask_indices

    def sample_negatives(self, y, num, padding_count=None):

        if self.n_negatives == 0 and self.cross_sample_negatives == 0:
            return y.new(0)

        bsz, tsz, fsz = y.shape
        y = y.view(-1, fsz)  # BTC => (BxT)C

        # FIXME: what happens if padding_count is specified?
        cross_high = tsz * bsz
        high = tsz - (padding_count or 0)
        with torch.no_grad():
            assert high > 1, f"{bsz,tsz,fsz}"

            if self.n_negatives > 0:
                tszs = (
                    buffered_arange(num)
                    .unsqueeze(-1)
                    .expand(-1, self.n_negatives)
                    .flatten()
                )

                neg_idxs = torch.randint(
                    low=0, high=high - 1, size=(bsz, self.n_negatives * num)
                )
                neg_idxs[neg_idxs >= tszs] += 1

            if self.cross_sample_negatives > 0:
                tszs = (
                    buffered_arange(num)
                    .unsqueeze(-1)
                    .expand(-1, self.cross_sample_negatives)
                    .flatten()
                )

                cross_neg_idxs = torch.randint(
                    low=0,
                    high=cross_high - 1,
                    size=(bsz, self.cross_sample_negatives * num),
                )
                cross_neg_idxs[cross_neg_idxs >= tszs] += 1

        if self.n_negatives > 0:
            neg_idxs = neg_idxs + (torch.arange(bsz).unsqueeze(1) * high)
        else:
            neg_idxs = cross_neg_idxs

        if self.cross_sample_negatives > 0 and self.n_negatives > 0:
            neg_idxs = torch.cat([neg_idxs, cross_neg_idxs], dim=1)

        negs = y[neg_idxs.view(-1)]
        negs = negs.view(
            bsz, num, self.n_negatives + self.cross_sample_negatives, fsz
        ).permute(
            2, 0, 1, 3
        )  # to NxBxTxC
        return negs, neg_idxs

    def compute_preds(self, x, y, negatives):

        neg_is_pos = (y == negatives).all(-1)
        y = y.unsqueeze(0)
        targets = torch.cat([y, negatives], dim=0)

        logits = torch.cosine_similarity(x.float(), targets.float(), dim=-1)
        logits = logits / self.logit_temp
        logits = logits.type_as(x)

        if neg_is_pos.any():
            if not hasattr(self, "_inftensor"):
                fillval = -float(2**30)
                self._inftensor = float("-inf")
            logits[1:] = index_put(logits[1:], neg_is_pos, self._inftensor)

        return logits

    def forward(self, source, padding_mask=None, mask=True, features_only=False,
                layer=None, mask_indices=None, padding_count=None):

        if self.feature_grad_mult > 0:
            features = self.feature_extractor(source)
            if self.feature_grad_mult != 1.0:
                features = GradMultiply.apply(features, self.feature_grad_mult)
        else:
            with torch.no_grad():
                features = self.feature_extractor(source)

        features_pen = features.float().pow(2).mean()

        features = features.transpose(1, 2)
        features = self.layer_norm(features)
        unmasked_features = features.clone()

        if padding_mask is not None and padding_mask.any():
            input_lengths = (1 - padding_mask.long()).sum(-1)
            # apply conv formula to get real output_lengths
            output_lengths = self._get_feat_extract_output_lengths(input_lengths)

            padding_mask = torch.zeros(
                features.shape[:2], dtype=features.dtype, device=features.device
            )

            # these two operations makes sure that all values
            # before the output lengths indices are attended to
            padding_mask[
                (
                    torch.arange(padding_mask.shape[0], device=padding_mask.device),
                    output_lengths - 1,
                )
            ] = 1
            padding_mask = (1 - padding_mask.flip([-1]).cumsum(-1).flip([-1])).bool()
        else:
            padding_mask = None

        if self.post_extract_proj is not None:
            features = self.post_extract_proj(features)

        features = self.dropout_input(features)
        unmasked_features = self.dropout_features(unmasked_features)

        num_vars = None
        code_ppl = None
        prob_ppl = None
        curr_temp = None

        if mask:
            x, mask_indices = self.apply_mask(features, padding_mask, mask_indices=mask_indices)
            y = unmasked_features[mask_indices].view(
                unmasked_features.size(0), -1, unmasked_features.size(-1)
            )
        else:
            x = features
            y = unmasked_features
            mask_indices = None

        x, layer_results = self.encoder(x, padding_mask=padding_mask, layer=layer)

        if features_only:
            return {"x": x, "padding_mask": padding_mask, "features": unmasked_features,
                    "layer_results": layer_results}

        q = self.quantizer(y, produce_targets=False)
        y = q["x"]
        num_vars = q["num_vars"]
        code_ppl = q["code_perplexity"]
        prob_ppl = q["prob_perplexity"]
        curr_temp = q["temp"]

        y = self.project_q(y)

        negs, _ = self.sample_negatives(
            y,
            y.size(1),
            padding_count=padding_count,
        )

        if self.codebook_negatives > 0:
            cb_negs = self.quantizer.sample_from_codebook(
                y.size(0) * y.size(1), self.codebook_negatives
            )
            cb_negs = cb_negs.view(
                self.codebook_negatives, y.size(0), y.size(1), -1
            )  # order doesnt matter
            cb_negs = self.project_q(cb_negs)
            negs = torch.cat([negs, cb_negs], dim=0)

        x = x[mask_indices].view(x.size(0), -1, x.size(-1))

        x = self.final_proj(x)
        x = self.compute_preds(x, y, negs)

        result = {
            "x": x,
            "padding_mask": padding_mask,
            "features_pen": features_pen,
        }

        if prob_ppl is not None:
            result["prob_perplexity"] = prob_ppl
            result["code_perplexity"] = code_ppl
            result["num_vars"] = num_vars
            result["temp"] = curr_temp

        return result

    def get_logits(self, net_output):
        logits = net_output["x"]
        logits = logits.transpose(0, 2)
        logits = logits.reshape(-1, logits.size(-1))
        return logits

    def get_targets(self, sample, net_output, expand_steps=True):
        x = net_output["x"]
        return x.new_zeros(x.size(1) * x.size(2), dtype=torch.long)

    def get_extra_losses(self, net_output):
        pen = []

        if "prob_perplexity" in net_output:
            pen.append(
                (net_output["num_vars"] - net_output["prob_perplexity"])
                / net_output["num_vars"]
            )

        if "features_pen" in net_output:
            pen.append(net_output["features_pen"])

        return pen


# ---- fairseq/criterions/wav2vec_criterion.py
def wav2vec_criterion(model, sample, loss_weights=(0.1, 10)):
    net_output = model(**sample["net_input"])
    logits = model.get_logits(net_output).float()
    target = model.get_targets(sample, net_output)
    loss = F.cross_entropy(logits, target, reduction="sum")
    sample_size = target.numel()
    losses = [loss.detach().clone()]
    extra_losses = model.get_extra_losses(net_output)
    for p, coef in zip(extra_losses, loss_weights):
        if coef != 0 and p is not None:
            p = coef * p.float() * sample_size
            loss += p
            losses.append(p)
    with torch.no_grad():
        max = logits.argmax(-1) == 0
        min = logits.argmin(-1) == 0
        both = max & min
        corr = max.long().sum().item() - both.long().sum().item()
        count = float(max.numel())
    return loss, sample_size, {"losses": [float(v) for v in losses], "correct": corr,
                               "count": count, "code_perplexity": float(net_output["code_perplexity"]),
                               "temp": net_output["temp"]}


# ---- the numpy-fed draws for the compared runs
class NumpyDraws:
    def __init__(self, seed):
        self.r = np.random.default_rng(seed)

    def randint(self, low=0, high=None, size=None, **kwargs):
        return torch.from_numpy(self.r.integers(low, high, size=size).astype(np.int64))

    def gumbel_softmax(self, logits, tau=1, hard=False, eps=1e-10, dim=-1):
        # torch.nn.functional.gumbel_softmax's formula with the Gumbel(0, 1)
        # noise from numpy
        g = torch.from_numpy(self.r.gumbel(size=tuple(logits.shape)).astype(np.float32)).to(logits.dtype)
        y_soft = ((logits + g) / tau).softmax(dim)
        if hard:
            index = y_soft.max(dim, keepdim=True)[1]
            y_hard = torch.zeros_like(logits, memory_format=torch.legacy_contiguous_format).scatter_(dim, index, 1.0)
            return y_hard - y_soft.detach() + y_soft
        return y_soft


@contextmanager
def numpy_draws(draws):
    saved = torch.randint, F.gumbel_softmax
    torch.randint, F.gumbel_softmax = draws.randint, draws.gumbel_softmax
    try:
        yield
    finally:
        torch.randint, F.gumbel_softmax = saved


class Cfg:
    extractor_mode = "default"
    conv_feature_layers = "[(16, 10, 5), (16, 3, 2), (16, 2, 2)]"
    conv_bias = False
    encoder_layers = 2
    encoder_embed_dim = 32
    encoder_ffn_embed_dim = 64
    encoder_attention_heads = 4
    activation_fn = "gelu"
    dropout = 0.0
    attention_dropout = 0.0
    activation_dropout = 0.0
    encoder_layerdrop = 0.0
    dropout_input = 0.0
    dropout_features = 0.0
    final_dim = 16
    layer_norm_first = False
    quantize_input = False
    latent_vars = 8
    latent_groups = 2
    latent_dim = 0
    latent_temp = (2.0, 0.5, 0.999995 ** 20000)
    quantizer_depth = 1
    quantizer_factor = 3
    combine_groups = False
    feature_grad_mult = 0.1
    mask_length = 3
    mask_prob = 0.3
    mask_selection = "static"
    mask_other = 0
    no_mask_overlap = False
    mask_min_space = 1
    num_negatives = 4
    cross_sample_negatives = 0
    codebook_negatives = 0
    negatives_from_everywhere = False
    logit_temp = 0.1
    conv_pos = 8
    conv_pos_groups = 16


def load_numpy(model, r):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                continue
            if p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.from_numpy(r.normal(0, 1.0 / np.sqrt(fan_in), tuple(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy(r.normal(0, 0.1, tuple(p.shape)).astype(np.float32)))


torch.manual_seed(0)
np.random.seed(0)
cfg = Cfg()
model = Wav2Vec2Model(cfg)
pc = model.encoder.pos_conv[0]
print("pos_conv", sorted(n for n, _ in pc.named_parameters()), tuple(pc.weight_g.shape), tuple(pc.weight_v.shape),
      torch.allclose(pc.weight_g, pc.weight_v.norm(dim=(0, 1), keepdim=True)))
print("init [rng]", f"{model.encoder.layers[0].fc1.weight.std().item():.3f}",
      f"{model.quantizer.vars.min().item():.2f}", f"{model.mask_emb.max().item():.2f}")
load_numpy(model, np.random.default_rng(1))
print("params", sum(p.numel() for p in model.parameters()), len(list(model.parameters())),
      type(model.feature_extractor.conv_layers[0][2]).__name__, model.post_extract_proj is not None)

r = np.random.default_rng(2)
t = np.arange(400) / 400.0
source = np.stack([np.sin(2 * np.pi * (20 + 7 * b) * t) * 0.5 + 0.05 * r.standard_normal(400)
                   for b in range(2)]).astype(np.float32)
source = torch.from_numpy(source)

feats = model.feature_extractor(source)
print("features", tuple(feats.shape), feats.dtype, fmt(feats[1, 3], 4))
m = compute_mask_indices((2, 19), None, cfg.mask_prob, cfg.mask_length, min_masks=2)
print("mask", m.sum(1).tolist(), m.dtype, np.nonzero(m[0])[0].tolist())

print("buffered_arange", buffered_arange(5).tolist(), buffered_arange(3).tolist(),
      buffered_arange.buf.dtype, buffered_arange(7).tolist(), buffered_arange.buf.numel())

q = model.quantizer
print("codebook", tuple(q.codebook().shape), q.get_codebook_indices()[:6].tolist(),
      q.to_codebook_index(torch.tensor([[1, 2], [7, 7]])).tolist())
q.eval()
with torch.no_grad():
    yq, tq = q.forward_idx(torch.from_numpy(r.standard_normal((2, 5, 16)).astype(np.float32)))
print("quantizer eval", tuple(yq.shape), tq[0].tolist(), fmt(yq[0, 0], 4))
q.train()

# the original draws (torch.randint, gumbel_softmax): [rng]
model.train()
out = model(source)
print("forward", tuple(out["x"].shape), out["x"].dtype, f"{out['prob_perplexity'].item():.3f}",
      bool(torch.isinf(out["x"][1:]).sum() >= 0), out["num_vars"], out["temp"])
res = q(torch.from_numpy(r.standard_normal((2, 5, 16)).astype(np.float32)), produce_targets=True)
onehot = (res["x"].view(10, 2, 8) != 0).sum(-1) if False else None
print("gumbel targets", tuple(res["targets"].shape), res["targets"].dtype,
      bool((res["targets"] < 8).all()), f"{res['code_perplexity'].item():.3f}")

# the criterion and training, with numpy draws
draws = NumpyDraws(3)
optimizer = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01)
np.random.seed(1)
for num_updates in range(3):
    model.set_num_updates(num_updates * 5000)
    with numpy_draws(draws):
        loss, sample_size, log = wav2vec_criterion(model, {"net_input": {"source": source}})
    optimizer.zero_grad()
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 25.0)
    optimizer.step()
    print(f"update {num_updates} loss {loss.item() / sample_size / math.log(2):.4f} size {sample_size}",
          [f"{v:.4f}" for v in log["losses"]], log["correct"], log["count"],
          f"cppl {log['code_perplexity']:.3f} temp {log['temp']:.4f} gnorm {gnorm.item():.3f}")
print("feature grad", fmt(model.feature_extractor.conv_layers[0][0].weight.grad, 3),
      fmt(model.encoder.pos_conv[0].weight_g.grad, 3, 5), fmt(model.mask_emb.grad, 3))

# compute_preds with a negative equal to the positive, and the -inf masking
x = torch.from_numpy(r.standard_normal((1, 3, 4)).astype(np.float32))
y = torch.from_numpy(r.standard_normal((1, 3, 4)).astype(np.float32))
negs = torch.from_numpy(r.standard_normal((2, 1, 3, 4)).astype(np.float32))
negs[1, 0, 2] = y[0, 2]
logits = model.compute_preds(x, y, negs)
print("compute_preds", tuple(logits.shape), fmt(logits[:, 0, 2], 3), model._inftensor)
lg = model.get_logits({"x": logits})
print("logits", tuple(lg.shape), fmt(lg[2], 3), model.get_targets(None, {"x": logits}).tolist(),
      f"{F.cross_entropy(lg, model.get_targets(None, {'x': logits}), reduction='sum').item():.4f}")

# the "layer_norm" extractor (TransposeLast / Fp32LayerNorm) and a
# pre-norm encoder, features at full gradient
class LayerNormCfg(Cfg):
    extractor_mode = "layer_norm"
    layer_norm_first = True
    feature_grad_mult = 1.0


model_ln = Wav2Vec2Model(LayerNormCfg())
load_numpy(model_ln, np.random.default_rng(5))
print("layer_norm mode", [type(m).__name__ for m in model_ln.feature_extractor.conv_layers[1][2]],
      type(model_ln.feature_extractor.conv_layers[0][2]).__name__)
with numpy_draws(NumpyDraws(6)):
    loss_ln, size_ln, log_ln = wav2vec_criterion(model_ln, {"net_input": {"source": source}})
loss_ln.backward()
print("layer_norm loss", f"{loss_ln.item():.4f}", size_ln, [f"{v:.4f}" for v in log_ln["losses"]],
      fmt(model_ln.feature_extractor.conv_layers[0][0].weight.grad, 3),
      fmt(model_ln.feature_extractor.conv_layers[2][2][1].weight.grad, 3))
# cross-sample and codebook negatives, one shared codebook for the groups,
# a two-layer weight projection (Linear + GELU blocks)
class NegativesCfg(Cfg):
    cross_sample_negatives = 2
    codebook_negatives = 2
    combine_groups = True
    quantizer_depth = 2
    latent_temp = "(2.0, 0.25, 0.999995)"


model_neg = Wav2Vec2Model(NegativesCfg())
load_numpy(model_neg, np.random.default_rng(8))
print("negatives model", model_neg.quantizer.vars.shape, [type(m).__name__ for m in model_neg.quantizer.weight_proj],
      model_neg.quantizer.max_temp, model_neg.quantizer.get_codebook_indices()[:6].tolist())
np.random.seed(4)
with numpy_draws(NumpyDraws(10)):
    loss_neg, size_neg, log_neg = wav2vec_criterion(model_neg, {"net_input": {"source": source}})
loss_neg.backward()
print("negatives loss", f"{loss_neg.item():.4f}", size_neg, [f"{v:.4f}" for v in log_neg["losses"]],
      fmt(model_neg.quantizer.vars.grad, 3), fmt(model_neg.quantizer.weight_proj[0][0].weight.grad, 3))
with numpy_draws(NumpyDraws(11)):
    cb = model_neg.quantizer.sample_from_codebook(3, 2)
print("codebook sample", tuple(cb.shape), fmt(cb[2, 1], 3))
try:
    model_neg.quantizer.sample_from_codebook(1, 64)
except AssertionError as e:
    print("AssertionError", e)

fe = model.feature_extractor(source)
gm = GradMultiply.apply(fe, 0.1)
print("GradMultiply", gm.grad_fn.name(), gm.data_ptr() == fe.data_ptr(), gm.shape == fe.shape)

# a padded batch: the padding mask through the conv output lengths, masked
# spans within each utterance's frames, the encoder's key_padding_mask
src_pad = source.clone()
src_pad[1, 300:] = 0
wave_pad = torch.zeros(2, 400, dtype=torch.bool)
wave_pad[1, 300:] = True
print("output lengths", model._get_feat_extract_output_lengths(torch.tensor([400, 300, 37])).tolist())
np.random.seed(3)
with numpy_draws(NumpyDraws(7)):
    out_pad = model(src_pad, padding_mask=wave_pad)
print("padded", tuple(out_pad["x"].shape), out_pad["padding_mask"].sum(-1).tolist(),
      out_pad["padding_mask"][1, 12:16].tolist(), fmt(out_pad["x"][0, 1], 3),
      f"{out_pad['prob_perplexity'].item():.4f}")

# eval features_only
model.eval()
with torch.no_grad():
    fo = model(source, mask=False, features_only=True, layer=0)
print("features_only", tuple(fo["x"].shape), len(fo["layer_results"]), fmt(fo["x"][0, 5], 4))


# one training step under torch.compile against the same step eagerly
def train_step(source, mask_indices):
    loss, sample_size, log = wav2vec_criterion(
        model, {"net_input": {"source": source, "mask_indices": mask_indices}})
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


model.train()
mask_indices = torch.from_numpy(compute_mask_indices((2, 19), None, cfg.mask_prob, cfg.mask_length, min_masks=2))
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
with numpy_draws(NumpyDraws(4)):
    eager = [train_step(source, mask_indices).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
with numpy_draws(NumpyDraws(4)):
    compiled = [cstep(source, mask_indices).item() for _ in range(2)]
print("compiled losses", [f"{v:.4f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
