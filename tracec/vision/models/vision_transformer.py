"""Vision Transformer (Dosovitskiy et al.) B/16, B/32, L/16, L/32, H/14 as
torchvision builds it: the same module names (``encoder.layers.encoder_layer_0
.self_attention`` ...), initialization and forward (class token, learned
position embedding, pre-norm encoder blocks on ``nn.MultiheadAttention``).
Inputs must be ``image_size`` square (224 unless given)."""
from __future__ import annotations

import math
from collections import OrderedDict
from functools import partial
from typing import Callable, NamedTuple

from tracec import nn
from tracec.creation import empty, zeros
from tracec.nn import functional as F
from tracec.shape_ops import cat
from tracec.vision.models._weights import (load_into, make_weights, overwrite_named_param,
                                           resolve)
from tracec.vision.ops.misc import MLP, Conv2dNormActivation

_U = "https://download.pytorch.org/models/"


class ConvStemConfig(NamedTuple):
    out_channels: int
    kernel_size: int
    stride: int
    norm_layer: Callable = nn.BatchNorm2d
    activation_layer: Callable = nn.ReLU


class MLPBlock(MLP):
    """Transformer MLP block."""

    _version = 2

    def __init__(self, in_dim, mlp_dim, dropout):
        super().__init__(in_dim, [mlp_dim, in_dim], activation_layer=nn.GELU, inplace=None,
                         dropout=dropout)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.normal_(m.bias, std=1e-6)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        version = local_metadata.get("version", None)
        if version is None or version < 2:
            # version 1 named the two Linear layers linear_1 / linear_2
            for i in range(2):
                for kind in ["weight", "bias"]:
                    old_key = f"{prefix}linear_{i + 1}.{kind}"
                    if old_key in state_dict:
                        state_dict[f"{prefix}{3 * i}.{kind}"] = state_dict.pop(old_key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)


def _check_3d(input):
    if input.dim() != 3:
        raise AssertionError(f"Expected (batch_size, seq_length, hidden_dim) got {input.shape}")


class EncoderBlock(nn.Module):
    """Transformer encoder block."""

    def __init__(self, num_heads, hidden_dim, mlp_dim, dropout, attention_dropout,
                 norm_layer=partial(nn.LayerNorm, eps=1e-6)):
        super().__init__()
        self.num_heads = num_heads
        self.ln_1 = norm_layer(hidden_dim)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads,
                                                    dropout=attention_dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = norm_layer(hidden_dim)
        self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

    def forward(self, input):
        _check_3d(input)
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x) + input
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    """Transformer Model Encoder for sequence to sequence translation."""

    def __init__(self, seq_length, num_layers, num_heads, hidden_dim, mlp_dim, dropout,
                 attention_dropout, norm_layer=partial(nn.LayerNorm, eps=1e-6)):
        super().__init__()
        # (BERT's position-embedding init)
        self.pos_embedding = nn.Parameter(empty(1, seq_length, hidden_dim).normal_(std=0.02))
        self.dropout = nn.Dropout(dropout)
        layers = OrderedDict()
        for i in range(num_layers):
            layers[f"encoder_layer_{i}"] = EncoderBlock(num_heads, hidden_dim, mlp_dim, dropout,
                                                        attention_dropout, norm_layer)
        self.layers = nn.Sequential(layers)
        self.ln = norm_layer(hidden_dim)

    def forward(self, input):
        _check_3d(input)
        input = input + self.pos_embedding
        return self.ln(self.layers(self.dropout(input)))


class VisionTransformer(nn.Module):
    """Vision Transformer as per https://arxiv.org/abs/2010.11929."""

    def __init__(self, image_size, patch_size, num_layers, num_heads, hidden_dim, mlp_dim,
                 dropout=0.0, attention_dropout=0.0, num_classes=1000, representation_size=None,
                 norm_layer=partial(nn.LayerNorm, eps=1e-6), conv_stem_configs=None):
        super().__init__()
        if image_size % patch_size != 0:
            raise AssertionError("Input shape indivisible by patch size!")
        self.image_size = image_size
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.mlp_dim = mlp_dim
        self.attention_dropout = attention_dropout
        self.dropout = dropout
        self.num_classes = num_classes
        self.representation_size = representation_size
        self.norm_layer = norm_layer
        if conv_stem_configs is not None:
            # As per https://arxiv.org/abs/2106.14881
            seq_proj = nn.Sequential()
            prev_channels = 3
            for i, cfg in enumerate(conv_stem_configs):
                seq_proj.add_module(f"conv_bn_relu_{i}", Conv2dNormActivation(
                    in_channels=prev_channels, out_channels=cfg.out_channels,
                    kernel_size=cfg.kernel_size, stride=cfg.stride, norm_layer=cfg.norm_layer,
                    activation_layer=cfg.activation_layer))
                prev_channels = cfg.out_channels
            seq_proj.add_module("conv_last", nn.Conv2d(in_channels=prev_channels,
                                                       out_channels=hidden_dim, kernel_size=1))
            self.conv_proj = seq_proj
        else:
            self.conv_proj = nn.Conv2d(in_channels=3, out_channels=hidden_dim,
                                       kernel_size=patch_size, stride=patch_size)
        seq_length = (image_size // patch_size) ** 2
        self.class_token = nn.Parameter(zeros(1, 1, hidden_dim))
        seq_length += 1
        self.encoder = Encoder(seq_length, num_layers, num_heads, hidden_dim, mlp_dim, dropout,
                               attention_dropout, norm_layer)
        self.seq_length = seq_length
        heads_layers = OrderedDict()
        if representation_size is None:
            heads_layers["head"] = nn.Linear(hidden_dim, num_classes)
        else:
            heads_layers["pre_logits"] = nn.Linear(hidden_dim, representation_size)
            heads_layers["act"] = nn.Tanh()
            heads_layers["head"] = nn.Linear(representation_size, num_classes)
        self.heads = nn.Sequential(heads_layers)
        if isinstance(self.conv_proj, nn.Conv2d):
            fan_in = (self.conv_proj.in_channels * self.conv_proj.kernel_size[0]
                      * self.conv_proj.kernel_size[1])
            nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
            if self.conv_proj.bias is not None:
                nn.init.zeros_(self.conv_proj.bias)
        elif isinstance(getattr(self.conv_proj, "conv_last", None), nn.Conv2d):
            last = self.conv_proj.conv_last
            nn.init.normal_(last.weight, mean=0.0, std=math.sqrt(2.0 / last.out_channels))
            if last.bias is not None:
                nn.init.zeros_(last.bias)
        if hasattr(self.heads, "pre_logits") and isinstance(self.heads.pre_logits, nn.Linear):
            fan_in = self.heads.pre_logits.in_features
            nn.init.trunc_normal_(self.heads.pre_logits.weight, std=math.sqrt(1 / fan_in))
            nn.init.zeros_(self.heads.pre_logits.bias)
        if isinstance(self.heads.head, nn.Linear):
            nn.init.zeros_(self.heads.head.weight)
            nn.init.zeros_(self.heads.head.bias)

    def _process_input(self, x):
        n, c, h, w = x.shape
        p = self.patch_size
        if h != self.image_size:
            raise AssertionError(f"Wrong image height! Expected {self.image_size} but got {h}!")
        if w != self.image_size:
            raise AssertionError(f"Wrong image width! Expected {self.image_size} but got {w}!")
        n_h, n_w = h // p, w // p
        # (n, c, h, w) -> (n, hidden_dim, n_h, n_w) -> (n, n_h * n_w, hidden_dim)
        x = self.conv_proj(x)
        return x.reshape(n, self.hidden_dim, n_h * n_w).permute(0, 2, 1)

    def forward(self, x):
        x = self._process_input(x)
        n = x.shape[0]
        batch_class_token = self.class_token.expand(n, -1, -1)
        x = self.encoder(cat([batch_class_token, x], dim=1))
        return self.heads(x[:, 0])      # the class token's output


def _weights(name, urls, sizes):
    return make_weights(name, {k: _U + v for k, v in urls.items()},
                        meta={k: {"min_size": (s, s)} for k, s in sizes.items()})


ViT_B_16_Weights = _weights("ViT_B_16_Weights", {
    "IMAGENET1K_V1": "vit_b_16-c867db91.pth",
    "IMAGENET1K_SWAG_E2E_V1": "vit_b_16_swag-9ac1b537.pth",
    "IMAGENET1K_SWAG_LINEAR_V1": "vit_b_16_lc_swag-4e70ced5.pth"},
    {"IMAGENET1K_V1": 224, "IMAGENET1K_SWAG_E2E_V1": 384, "IMAGENET1K_SWAG_LINEAR_V1": 224})
ViT_B_32_Weights = _weights("ViT_B_32_Weights", {"IMAGENET1K_V1": "vit_b_32-d86f8d99.pth"},
                            {"IMAGENET1K_V1": 224})
ViT_L_16_Weights = _weights("ViT_L_16_Weights", {
    "IMAGENET1K_V1": "vit_l_16-852ce7e3.pth",
    "IMAGENET1K_SWAG_E2E_V1": "vit_l_16_swag-4f3808c9.pth",
    "IMAGENET1K_SWAG_LINEAR_V1": "vit_l_16_lc_swag-4d563306.pth"},
    {"IMAGENET1K_V1": 224, "IMAGENET1K_SWAG_E2E_V1": 512, "IMAGENET1K_SWAG_LINEAR_V1": 224})
ViT_L_32_Weights = _weights("ViT_L_32_Weights", {"IMAGENET1K_V1": "vit_l_32-c7638314.pth"},
                            {"IMAGENET1K_V1": 224})
ViT_H_14_Weights = _weights("ViT_H_14_Weights", {
    "IMAGENET1K_SWAG_E2E_V1": "vit_h_14_swag-80465313.pth",
    "IMAGENET1K_SWAG_LINEAR_V1": "vit_h_14_lc_swag-c1eb923e.pth"},
    {"IMAGENET1K_SWAG_E2E_V1": 518, "IMAGENET1K_SWAG_LINEAR_V1": 224})


def _vision_transformer(patch_size, num_layers, num_heads, hidden_dim, mlp_dim, weights_enum,
                        weights, progress, **kwargs):
    weights = resolve(weights_enum, weights, kwargs)
    if weights is not None:
        overwrite_named_param(kwargs, "image_size", weights.meta["min_size"][0])
    image_size = kwargs.pop("image_size", 224)
    model = VisionTransformer(image_size=image_size, patch_size=patch_size,
                              num_layers=num_layers, num_heads=num_heads, hidden_dim=hidden_dim,
                              mlp_dim=mlp_dim, **kwargs)
    return load_into(model, weights, progress)


def vit_b_16(*, weights=None, progress=True, **kwargs):
    return _vision_transformer(16, 12, 12, 768, 3072, ViT_B_16_Weights, weights, progress,
                               **kwargs)


def vit_b_32(*, weights=None, progress=True, **kwargs):
    return _vision_transformer(32, 12, 12, 768, 3072, ViT_B_32_Weights, weights, progress,
                               **kwargs)


def vit_l_16(*, weights=None, progress=True, **kwargs):
    return _vision_transformer(16, 24, 16, 1024, 4096, ViT_L_16_Weights, weights, progress,
                               **kwargs)


def vit_l_32(*, weights=None, progress=True, **kwargs):
    return _vision_transformer(32, 24, 16, 1024, 4096, ViT_L_32_Weights, weights, progress,
                               **kwargs)


def vit_h_14(*, weights=None, progress=True, **kwargs):
    return _vision_transformer(14, 32, 16, 1280, 5120, ViT_H_14_Weights, weights, progress,
                               **kwargs)


def interpolate_embeddings(image_size, patch_size, model_state, interpolation_mode="bicubic",
                           reset_heads=False):
    """``model_state`` (a ViT state dict) for a model of ``image_size`` /
    ``patch_size``: the position embeddings of the patch grid resized as an
    image (``interpolation_mode``, align_corners=True), the class token's
    kept; ``reset_heads`` drops the ``heads`` entries."""
    pos_embedding = model_state["encoder.pos_embedding"]      # (1, seq_length, hidden_dim)
    n, seq_length, hidden_dim = pos_embedding.shape
    if n != 1:
        raise ValueError(f"Unexpected position embedding shape: {pos_embedding.shape}")
    new_seq_length = (image_size // patch_size) ** 2 + 1
    if new_seq_length != seq_length:
        seq_length -= 1
        new_seq_length -= 1
        pos_embedding_token = pos_embedding[:, :1, :]
        pos_embedding_img = pos_embedding[:, 1:, :].permute(0, 2, 1)
        seq_length_1d = int(math.sqrt(seq_length))
        if seq_length_1d * seq_length_1d != seq_length:
            raise ValueError("seq_length is not a perfect square! Instead got seq_length_1d * "
                             f"seq_length_1d = {seq_length_1d * seq_length_1d} and seq_length = "
                             f"{seq_length}")
        pos_embedding_img = pos_embedding_img.reshape(1, hidden_dim, seq_length_1d,
                                                      seq_length_1d)
        new_seq_length_1d = image_size // patch_size
        new_pos_embedding_img = F.interpolate(pos_embedding_img, size=new_seq_length_1d,
                                              mode=interpolation_mode, align_corners=True)
        new_pos_embedding_img = new_pos_embedding_img.reshape(1, hidden_dim, new_seq_length)
        new_pos_embedding_img = new_pos_embedding_img.permute(0, 2, 1)
        model_state["encoder.pos_embedding"] = cat([pos_embedding_token, new_pos_embedding_img],
                                                   dim=1)
        if reset_heads:
            model_state = OrderedDict((k, v) for k, v in model_state.items()
                                      if not k.startswith("heads"))
    return model_state
