"""Swin Transformer V1 (t/s/b) and V2 (t/s/b) as torchvision builds them:
the same module names, initialization and forward, with shifted-window
attention (cyclic shift, the -100 attention mask between regions that were
not adjacent, torchvision's relative position bias table and index; V2's
cosine attention with a logit scale and the log-spaced continuous position
bias MLP)."""
from __future__ import annotations

import math
from functools import partial

from tracec import dtypes, fx, nn
from tracec.creation import arange, ones, zeros
from tracec.nn import functional as F
from tracec.rearrange import roll
from tracec.shape_extra import meshgrid
from tracec.shape_ops import cat, flatten, stack
from tracec.vision.models._weights import load_into, make_weights, resolve
from tracec.vision.ops.misc import MLP, Permute
from tracec.vision.ops.stochastic_depth import StochasticDepth

_U = "https://download.pytorch.org/models/"


def _patch_merging_pad(x):
    H, W, _ = x.shape[-3:]
    x = F.pad(x, (0, 0, 0, W % 2, 0, H % 2))
    x0 = x[..., 0::2, 0::2, :]
    x1 = x[..., 1::2, 0::2, :]
    x2 = x[..., 0::2, 1::2, :]
    x3 = x[..., 1::2, 1::2, :]
    return cat([x0, x1, x2, x3], -1)        # ... H/2 W/2 4*C


# (leaves of symbolic traces: they read shapes, as torchvision marks them)
fx.wrap("_patch_merging_pad")


def _get_relative_position_bias(relative_position_bias_table, relative_position_index,
                                window_size):
    N = window_size[0] * window_size[1]
    relative_position_bias = relative_position_bias_table[relative_position_index]
    relative_position_bias = relative_position_bias.view(N, N, -1)
    return relative_position_bias.permute(2, 0, 1).contiguous().unsqueeze(0)


fx.wrap("_get_relative_position_bias")


class PatchMerging(nn.Module):
    """[..., H, W, C] -> [..., H/2, W/2, 2C]: 2x2 neighbours concatenated,
    normalized, projected."""

    def __init__(self, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(4 * dim)

    def forward(self, x):
        return self.reduction(self.norm(_patch_merging_pad(x)))


class PatchMergingV2(nn.Module):
    """PatchMerging that normalizes after the projection (Swin V2)."""

    def __init__(self, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.dim = dim
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = norm_layer(2 * dim)

    def forward(self, x):
        return self.norm(self.reduction(_patch_merging_pad(x)))


def shifted_window_attention(input, qkv_weight, proj_weight, relative_position_bias,
                             window_size, num_heads, shift_size, attention_dropout=0.0,
                             dropout=0.0, qkv_bias=None, proj_bias=None, logit_scale=None,
                             training=True):
    """Window multi-head self-attention on ``input`` [B, H, W, C] (padded to
    whole windows), cyclically shifted by ``shift_size`` first (no shift
    along a dimension one window covers), with ``relative_position_bias``
    added to the logits.  Returns [B, H, W, C]."""
    B, H, W, C = input.shape
    pad_r = (window_size[1] - W % window_size[1]) % window_size[1]
    pad_b = (window_size[0] - H % window_size[0]) % window_size[0]
    x = F.pad(input, (0, 0, 0, pad_r, 0, pad_b))
    _, pad_H, pad_W, _ = x.shape
    shift_size = list(shift_size)
    if window_size[0] >= pad_H:
        shift_size[0] = 0
    if window_size[1] >= pad_W:
        shift_size[1] = 0
    if sum(shift_size) > 0:
        x = roll(x, shifts=(-shift_size[0], -shift_size[1]), dims=(1, 2))
    # partition windows
    num_windows = (pad_H // window_size[0]) * (pad_W // window_size[1])
    x = x.view(B, pad_H // window_size[0], window_size[0], pad_W // window_size[1],
               window_size[1], C)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(B * num_windows, window_size[0] * window_size[1], C)
    if logit_scale is not None and qkv_bias is not None:
        # (V2: no key bias)
        qkv_bias = qkv_bias.clone()
        length = qkv_bias.numel() // 3
        qkv_bias[length:2 * length].zero_()
    qkv = F.linear(x, qkv_weight, qkv_bias)
    qkv = qkv.reshape(x.size(0), x.size(1), 3, num_heads, C // num_heads).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    if logit_scale is not None:
        # cosine attention
        attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        logit_scale = logit_scale.clamp(max=math.log(100.0)).exp()
        attn = attn * logit_scale
    else:
        q = q * (C // num_heads) ** -0.5
        attn = q.matmul(k.transpose(-2, -1))
    attn = attn + relative_position_bias
    if sum(shift_size) > 0:
        # mask attention between tokens that the shift brought together
        attn_mask = x.new_zeros((pad_H, pad_W))
        h_slices = ((0, -window_size[0]), (-window_size[0], -shift_size[0]),
                    (-shift_size[0], None))
        w_slices = ((0, -window_size[1]), (-window_size[1], -shift_size[1]),
                    (-shift_size[1], None))
        count = 0
        for h in h_slices:
            for w in w_slices:
                attn_mask[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        attn_mask = attn_mask.view(pad_H // window_size[0], window_size[0],
                                   pad_W // window_size[1], window_size[1])
        attn_mask = attn_mask.permute(0, 2, 1, 3).reshape(num_windows,
                                                          window_size[0] * window_size[1])
        attn_mask = attn_mask.unsqueeze(1) - attn_mask.unsqueeze(2)
        attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(
            attn_mask == 0, float(0.0))
        attn = attn.view(x.size(0) // num_windows, num_windows, num_heads, x.size(1), x.size(1))
        attn = attn + attn_mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, num_heads, x.size(1), x.size(1))
    attn = F.softmax(attn, dim=-1)
    attn = F.dropout(attn, p=attention_dropout, training=training)
    x = attn.matmul(v).transpose(1, 2).reshape(x.size(0), x.size(1), C)
    x = F.linear(x, proj_weight, proj_bias)
    x = F.dropout(x, p=dropout, training=training)
    # reverse windows
    x = x.view(B, pad_H // window_size[0], pad_W // window_size[1], window_size[0],
               window_size[1], C)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(B, pad_H, pad_W, C)
    if sum(shift_size) > 0:
        x = roll(x, shifts=(shift_size[0], shift_size[1]), dims=(1, 2))
    return x[:, :H, :W, :].contiguous()


fx.wrap("shifted_window_attention")


class ShiftedWindowAttention(nn.Module):
    """See ``shifted_window_attention``."""

    def __init__(self, dim, window_size, shift_size, num_heads, qkv_bias=True, proj_bias=True,
                 attention_dropout=0.0, dropout=0.0):
        super().__init__()
        if len(window_size) != 2 or len(shift_size) != 2:
            raise ValueError("window_size and shift_size must be of length 2")
        self.window_size = window_size
        self.shift_size = shift_size
        self.num_heads = num_heads
        self.attention_dropout = attention_dropout
        self.dropout = dropout
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim, bias=proj_bias)
        self.define_relative_position_bias_table()
        self.define_relative_position_index()

    def define_relative_position_bias_table(self):
        # one bias per head and relative offset: (2*Wh-1) * (2*Ww-1), nH
        self.relative_position_bias_table = nn.Parameter(
            zeros((2 * self.window_size[0] - 1) * (2 * self.window_size[1] - 1),
                  self.num_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)

    def define_relative_position_index(self):
        coords_h = arange(self.window_size[0])
        coords_w = arange(self.window_size[1])
        coords = stack(meshgrid(coords_h, coords_w, indexing="ij"))     # 2, Wh, Ww
        coords_flatten = flatten(coords, 1)                             # 2, Wh*Ww
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()  # Wh*Ww, Wh*Ww, 2
        relative_coords[:, :, 0] += self.window_size[0] - 1             # shift to start from 0
        relative_coords[:, :, 1] += self.window_size[1] - 1
        relative_coords[:, :, 0] *= 2 * self.window_size[1] - 1
        relative_position_index = relative_coords.sum(-1).flatten()     # Wh*Ww*Wh*Ww
        self.register_buffer("relative_position_index", relative_position_index)

    def get_relative_position_bias(self):
        return _get_relative_position_bias(self.relative_position_bias_table,
                                           self.relative_position_index, self.window_size)

    def forward(self, x):
        return shifted_window_attention(
            x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(),
            self.window_size, self.num_heads, shift_size=self.shift_size,
            attention_dropout=self.attention_dropout, dropout=self.dropout,
            qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, training=self.training)


class ShiftedWindowAttentionV2(ShiftedWindowAttention):
    """Swin V2's: cosine attention with a learned logit scale, the position
    bias from an MLP over log-spaced relative coordinates."""

    def __init__(self, dim, window_size, shift_size, num_heads, qkv_bias=True, proj_bias=True,
                 attention_dropout=0.0, dropout=0.0):
        super().__init__(dim, window_size, shift_size, num_heads, qkv_bias=qkv_bias,
                         proj_bias=proj_bias, attention_dropout=attention_dropout,
                         dropout=dropout)
        self.logit_scale = nn.Parameter((10 * ones((num_heads, 1, 1))).log())
        # MLP for the continuous relative position bias
        self.cpb_mlp = nn.Sequential(nn.Linear(2, 512, bias=True), nn.ReLU(inplace=True),
                                     nn.Linear(512, num_heads, bias=False))
        if qkv_bias:
            length = self.qkv.bias.numel() // 3
            self.qkv.bias[length:2 * length].data.zero_()

    def define_relative_position_bias_table(self):
        relative_coords_h = arange(-(self.window_size[0] - 1), self.window_size[0],
                                   dtype=dtypes.float32)
        relative_coords_w = arange(-(self.window_size[1] - 1), self.window_size[1],
                                   dtype=dtypes.float32)
        table = stack(meshgrid([relative_coords_h, relative_coords_w], indexing="ij"))
        table = table.permute(1, 2, 0).contiguous().unsqueeze(0)    # 1, 2*Wh-1, 2*Ww-1, 2
        table[:, :, :, 0] /= self.window_size[0] - 1
        table[:, :, :, 1] /= self.window_size[1] - 1
        table *= 8                                                   # normalize to -8, 8
        table = table.sign() * (table.abs() + 1.0).log2() / 3.0
        self.register_buffer("relative_coords_table", table)

    def get_relative_position_bias(self):
        relative_position_bias = _get_relative_position_bias(
            self.cpb_mlp(self.relative_coords_table).view(-1, self.num_heads),
            self.relative_position_index, self.window_size)
        return 16 * relative_position_bias.sigmoid()

    def forward(self, x):
        return shifted_window_attention(
            x, self.qkv.weight, self.proj.weight, self.get_relative_position_bias(),
            self.window_size, self.num_heads, shift_size=self.shift_size,
            attention_dropout=self.attention_dropout, dropout=self.dropout,
            qkv_bias=self.qkv.bias, proj_bias=self.proj.bias, logit_scale=self.logit_scale,
            training=self.training)


class SwinTransformerBlock(nn.Module):
    def __init__(self, dim, num_heads, window_size, shift_size, mlp_ratio=4.0, dropout=0.0,
                 attention_dropout=0.0, stochastic_depth_prob=0.0, norm_layer=nn.LayerNorm,
                 attn_layer=ShiftedWindowAttention):
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = attn_layer(dim, window_size, shift_size, num_heads,
                               attention_dropout=attention_dropout, dropout=dropout)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.norm2 = norm_layer(dim)
        self.mlp = MLP(dim, [int(dim * mlp_ratio), dim], activation_layer=nn.GELU, inplace=None,
                       dropout=dropout)
        for m in self.mlp.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.normal_(m.bias, std=1e-6)

    def forward(self, x):
        x = x + self.stochastic_depth(self.attn(self.norm1(x)))
        return x + self.stochastic_depth(self.mlp(self.norm2(x)))


class SwinTransformerBlockV2(SwinTransformerBlock):
    """Post-normalized residual branches (Swin V2)."""

    def __init__(self, dim, num_heads, window_size, shift_size, mlp_ratio=4.0, dropout=0.0,
                 attention_dropout=0.0, stochastic_depth_prob=0.0, norm_layer=nn.LayerNorm,
                 attn_layer=ShiftedWindowAttentionV2):
        super().__init__(dim, num_heads, window_size, shift_size, mlp_ratio=mlp_ratio,
                         dropout=dropout, attention_dropout=attention_dropout,
                         stochastic_depth_prob=stochastic_depth_prob, norm_layer=norm_layer,
                         attn_layer=attn_layer)

    def forward(self, x):
        x = x + self.stochastic_depth(self.norm1(self.attn(x)))
        return x + self.stochastic_depth(self.norm2(self.mlp(x)))


class SwinTransformer(nn.Module):
    def __init__(self, patch_size, embed_dim, depths, num_heads, window_size, mlp_ratio=4.0,
                 dropout=0.0, attention_dropout=0.0, stochastic_depth_prob=0.1,
                 num_classes=1000, norm_layer=None, block=None, downsample_layer=PatchMerging):
        super().__init__()
        self.num_classes = num_classes
        block = block or SwinTransformerBlock
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-5)
        layers = [nn.Sequential(        # split the image into non-overlapping patches
            nn.Conv2d(3, embed_dim, kernel_size=(patch_size[0], patch_size[1]),
                      stride=(patch_size[0], patch_size[1])),
            Permute([0, 2, 3, 1]), norm_layer(embed_dim))]
        total_stage_blocks = sum(depths)
        stage_block_id = 0
        for i_stage in range(len(depths)):
            stage = []
            dim = embed_dim * 2 ** i_stage
            for i_layer in range(depths[i_stage]):
                sd_prob = stochastic_depth_prob * float(stage_block_id) / (total_stage_blocks - 1)
                stage.append(block(dim, num_heads[i_stage], window_size=window_size,
                                   shift_size=[0 if i_layer % 2 == 0 else w // 2
                                               for w in window_size],
                                   mlp_ratio=mlp_ratio, dropout=dropout,
                                   attention_dropout=attention_dropout,
                                   stochastic_depth_prob=sd_prob, norm_layer=norm_layer))
                stage_block_id += 1
            layers.append(nn.Sequential(*stage))
            if i_stage < len(depths) - 1:
                layers.append(downsample_layer(dim, norm_layer))
        self.features = nn.Sequential(*layers)
        num_features = embed_dim * 2 ** (len(depths) - 1)
        self.norm = norm_layer(num_features)
        self.permute = Permute([0, 3, 1, 2])      # B H W C -> B C H W
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.head = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.permute(self.norm(self.features(x)))
        return self.head(self.flatten(self.avgpool(x)))


Swin_T_Weights = make_weights("Swin_T_Weights", {"IMAGENET1K_V1": _U + "swin_t-704ceda3.pth"})
Swin_S_Weights = make_weights("Swin_S_Weights", {"IMAGENET1K_V1": _U + "swin_s-5e29d889.pth"})
Swin_B_Weights = make_weights("Swin_B_Weights", {"IMAGENET1K_V1": _U + "swin_b-68c6b09e.pth"})
Swin_V2_T_Weights = make_weights("Swin_V2_T_Weights",
                                 {"IMAGENET1K_V1": _U + "swin_v2_t-b137f0e2.pth"})
Swin_V2_S_Weights = make_weights("Swin_V2_S_Weights",
                                 {"IMAGENET1K_V1": _U + "swin_v2_s-637d8ceb.pth"})
Swin_V2_B_Weights = make_weights("Swin_V2_B_Weights",
                                 {"IMAGENET1K_V1": _U + "swin_v2_b-781e5279.pth"})


def _swin_transformer(embed_dim, depths, num_heads, window, stochastic_depth_prob,
                      weights_enum, weights, progress, v2=False, **kwargs):
    weights = resolve(weights_enum, weights, kwargs)
    if v2:
        kwargs.update(block=SwinTransformerBlockV2, downsample_layer=PatchMergingV2)
    model = SwinTransformer(patch_size=[4, 4], embed_dim=embed_dim, depths=depths,
                            num_heads=num_heads, window_size=[window, window],
                            stochastic_depth_prob=stochastic_depth_prob, **kwargs)
    return load_into(model, weights, progress)


def swin_t(*, weights=None, progress=True, **kwargs):
    return _swin_transformer(96, [2, 2, 6, 2], [3, 6, 12, 24], 7, 0.2, Swin_T_Weights,
                             weights, progress, **kwargs)


def swin_s(*, weights=None, progress=True, **kwargs):
    return _swin_transformer(96, [2, 2, 18, 2], [3, 6, 12, 24], 7, 0.3, Swin_S_Weights,
                             weights, progress, **kwargs)


def swin_b(*, weights=None, progress=True, **kwargs):
    return _swin_transformer(128, [2, 2, 18, 2], [4, 8, 16, 32], 7, 0.5, Swin_B_Weights,
                             weights, progress, **kwargs)


def swin_v2_t(*, weights=None, progress=True, **kwargs):
    return _swin_transformer(96, [2, 2, 6, 2], [3, 6, 12, 24], 8, 0.2, Swin_V2_T_Weights,
                             weights, progress, v2=True, **kwargs)


def swin_v2_s(*, weights=None, progress=True, **kwargs):
    return _swin_transformer(96, [2, 2, 18, 2], [3, 6, 12, 24], 8, 0.3, Swin_V2_S_Weights,
                             weights, progress, v2=True, **kwargs)


def swin_v2_b(*, weights=None, progress=True, **kwargs):
    return _swin_transformer(128, [2, 2, 18, 2], [4, 8, 16, 32], 8, 0.5, Swin_V2_B_Weights,
                             weights, progress, v2=True, **kwargs)
