# yuqinie98/PatchTST (PatchTST_supervised) the way its layers/ write it:
# RevIN (affine and subtract_last variants, norm / denorm), the
# series_decomp moving average, patching with ReplicationPad1d and
# Tensor.unfold, the channel-independent TSTiEncoder (W_P projection,
# learned positional encoding, residual attention scores passed between
# layers, BatchNorm1d over the transposed sequence through Transpose
# modules), the flatten head (shared and individual), and the 'sincos'
# positional encoding; trained as exp_main.py does (MSELoss, Adam, OneCycleLR
# stepped per batch). Changes for a CPU test: small sizes, weights and data
# from numpy, a few steps; then one training step under torch.compile
# against the same step eagerly.
import copy
import math
from typing import Optional

import numpy as np
import torch
from torch import nn
from torch import Tensor
import torch.nn.functional as F
from torch.optim import lr_scheduler


class RevIN(nn.Module):
    def __init__(self, num_features: int, eps=1e-5, affine=True, subtract_last=False):
        """
        :param num_features: the number of features or channels
        :param eps: a value added for numerical stability
        :param affine: if True, RevIN has learnable affine parameters
        """
        super(RevIN, self).__init__()
        self.num_features = num_features
        self.eps = eps
        self.affine = affine
        self.subtract_last = subtract_last
        if self.affine:
            self._init_params()

    def forward(self, x, mode: str):
        if mode == 'norm':
            self._get_statistics(x)
            x = self._normalize(x)
        elif mode == 'denorm':
            x = self._denormalize(x)
        else:
            raise NotImplementedError
        return x

    def _init_params(self):
        # initialize RevIN params: (C,)
        self.affine_weight = nn.Parameter(torch.ones(self.num_features))
        self.affine_bias = nn.Parameter(torch.zeros(self.num_features))

    def _get_statistics(self, x):
        dim2reduce = tuple(range(1, x.ndim - 1))
        if self.subtract_last:
            self.last = x[:, -1, :].unsqueeze(1)
        else:
            self.mean = torch.mean(x, dim=dim2reduce, keepdim=True).detach()
        self.stdev = torch.sqrt(torch.var(x, dim=dim2reduce, keepdim=True, unbiased=False) + self.eps).detach()

    def _normalize(self, x):
        if self.subtract_last:
            x = x - self.last
        else:
            x = x - self.mean
        x = x / self.stdev
        if self.affine:
            x = x * self.affine_weight
            x = x + self.affine_bias
        return x

    def _denormalize(self, x):
        if self.affine:
            x = x - self.affine_bias
            x = x / (self.affine_weight + self.eps * self.eps)
        x = x * self.stdev
        if self.subtract_last:
            x = x + self.last
        else:
            x = x + self.mean
        return x


class Transpose(nn.Module):
    def __init__(self, *dims, contiguous=False):
        super().__init__()
        self.dims, self.contiguous = dims, contiguous

    def forward(self, x):
        if self.contiguous:
            return x.transpose(*self.dims).contiguous()
        else:
            return x.transpose(*self.dims)


def get_activation_fn(activation):
    if callable(activation):
        return activation()
    elif activation.lower() == "relu":
        return nn.ReLU()
    elif activation.lower() == "gelu":
        return nn.GELU()
    raise ValueError(f'{activation} is not available. You can use "relu", "gelu", or a callable')


class moving_avg(nn.Module):
    """
    Moving average block to highlight the trend of time series
    """
    def __init__(self, kernel_size, stride):
        super(moving_avg, self).__init__()
        self.kernel_size = kernel_size
        self.avg = nn.AvgPool1d(kernel_size=kernel_size, stride=stride, padding=0)

    def forward(self, x):
        # padding on the both ends of time series
        front = x[:, 0:1, :].repeat(1, (self.kernel_size - 1) // 2, 1)
        end = x[:, -1:, :].repeat(1, (self.kernel_size - 1) // 2, 1)
        x = torch.cat([front, x, end], dim=1)
        x = self.avg(x.permute(0, 2, 1))
        x = x.permute(0, 2, 1)
        return x


class series_decomp(nn.Module):
    """
    Series decomposition block
    """
    def __init__(self, kernel_size):
        super(series_decomp, self).__init__()
        self.moving_avg = moving_avg(kernel_size, stride=1)

    def forward(self, x):
        moving_mean = self.moving_avg(x)
        res = x - moving_mean
        return res, moving_mean


def PositionalEncoding(q_len, d_model, normalize=True):
    pe = torch.zeros(q_len, d_model)
    position = torch.arange(0, q_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    if normalize:
        pe = pe - pe.mean()
        pe = pe / (pe.std() * 10)
    return pe


SinCosPosEncoding = PositionalEncoding


def positional_encoding(pe, learn_pe, q_len, d_model):
    # Positional encoding
    if pe is None:
        W_pos = torch.empty((q_len, d_model))  # pe = None and learn_pe = False can be used to measure impact of pe
        nn.init.uniform_(W_pos, -0.02, 0.02)
        learn_pe = False
    elif pe == 'zero':
        W_pos = torch.empty((q_len, 1))
        nn.init.uniform_(W_pos, -0.02, 0.02)
    elif pe == 'zeros':
        W_pos = torch.empty((q_len, d_model))
        nn.init.uniform_(W_pos, -0.02, 0.02)
    elif pe == 'normal' or pe == 'gauss':
        W_pos = torch.zeros((q_len, 1))
        torch.nn.init.normal_(W_pos, mean=0.0, std=0.1)
    elif pe == 'uniform':
        W_pos = torch.zeros((q_len, 1))
        nn.init.uniform_(W_pos, a=0.0, b=0.1)
    elif pe == 'sincos':
        W_pos = PositionalEncoding(q_len, d_model, normalize=True)
    else:
        raise ValueError(f"{pe} is not a valid pe (positional encoder. Available types: 'gauss'=='normal', \
        'zeros', 'zero', uniform', 'lin1d', 'exp1d', 'lin2d', 'exp2d', 'sincos', None.)")
    return nn.Parameter(W_pos, requires_grad=learn_pe)


class _ScaledDotProductAttention(nn.Module):
    r"""Scaled Dot-Product Attention module (Attention is all you need by Vaswani et al., 2017) with optional residual attention from previous layer
    (Realformer: Transformer likes residual attention by He et al, 2020) and locality self sttention (Vision Transformer for Small-Size Datasets
    by Lee et al, 2021)"""

    def __init__(self, d_model, n_heads, attn_dropout=0., res_attention=False, lsa=False):
        super().__init__()
        self.attn_dropout = nn.Dropout(attn_dropout)
        self.res_attention = res_attention
        head_dim = d_model // n_heads
        self.scale = nn.Parameter(torch.tensor(head_dim ** -0.5), requires_grad=lsa)
        self.lsa = lsa

    def forward(self, q: Tensor, k: Tensor, v: Tensor, prev: Optional[Tensor] = None,
                key_padding_mask: Optional[Tensor] = None, attn_mask: Optional[Tensor] = None):
        # Scaled MatMul (q, k) - similarity scores for all pairs of positions in an input sequence
        attn_scores = torch.matmul(q, k) * self.scale      # attn_scores : [bs x n_heads x max_q_len x q_len]

        # Add pre-softmax attention scores from the previous layer (optional)
        if prev is not None:
            attn_scores = attn_scores + prev

        # Attention mask (optional)
        if attn_mask is not None:                                     # attn_mask with shape [q_len x seq_len] - only used when q_len == seq_len
            if attn_mask.dtype == torch.bool:
                attn_scores.masked_fill_(attn_mask, -np.inf)
            else:
                attn_scores += attn_mask

        # Key padding mask (optional)
        if key_padding_mask is not None:                              # mask with shape [bs x q_len] (only when max_w_len == q_len)
            attn_scores.masked_fill_(key_padding_mask.unsqueeze(1).unsqueeze(2), -np.inf)

        # normalize the attention weights
        attn_weights = F.softmax(attn_scores, dim=-1)                 # attn_weights   : [bs x n_heads x max_q_len x q_len]
        attn_weights = self.attn_dropout(attn_weights)

        # compute the new values given the attention weights
        output = torch.matmul(attn_weights, v)                        # output: [bs x n_heads x max_q_len x d_v]

        if self.res_attention:
            return output, attn_weights, attn_scores
        else:
            return output, attn_weights


class _MultiheadAttention(nn.Module):
    def __init__(self, d_model, n_heads, d_k=None, d_v=None, res_attention=False, attn_dropout=0., proj_dropout=0.,
                 qkv_bias=True, lsa=False):
        """Multi Head Attention Layer
        Input shape:
            Q:       [batch_size (bs) x max_q_len x d_model]
            K, V:    [batch_size (bs) x q_len x d_model]
            mask:    [q_len x q_len]
        """
        super().__init__()
        d_k = d_model // n_heads if d_k is None else d_k
        d_v = d_model // n_heads if d_v is None else d_v

        self.n_heads, self.d_k, self.d_v = n_heads, d_k, d_v

        self.W_Q = nn.Linear(d_model, d_k * n_heads, bias=qkv_bias)
        self.W_K = nn.Linear(d_model, d_k * n_heads, bias=qkv_bias)
        self.W_V = nn.Linear(d_model, d_v * n_heads, bias=qkv_bias)

        # Scaled Dot-Product Attention (multiple heads)
        self.res_attention = res_attention
        self.sdp_attn = _ScaledDotProductAttention(d_model, n_heads, attn_dropout=attn_dropout,
                                                   res_attention=self.res_attention, lsa=lsa)

        # Poject output
        self.to_out = nn.Sequential(nn.Linear(n_heads * d_v, d_model), nn.Dropout(proj_dropout))

    def forward(self, Q: Tensor, K: Optional[Tensor] = None, V: Optional[Tensor] = None, prev: Optional[Tensor] = None,
                key_padding_mask: Optional[Tensor] = None, attn_mask: Optional[Tensor] = None):

        bs = Q.size(0)
        if K is None:
            K = Q
        if V is None:
            V = Q

        # Linear (+ split in multiple heads)
        q_s = self.W_Q(Q).view(bs, -1, self.n_heads, self.d_k).transpose(1, 2)       # q_s    : [bs x n_heads x max_q_len x d_k]
        k_s = self.W_K(K).view(bs, -1, self.n_heads, self.d_k).permute(0, 2, 3, 1)     # k_s    : [bs x n_heads x d_k x q_len] - transpose(1,2) + transpose(2,3)
        v_s = self.W_V(V).view(bs, -1, self.n_heads, self.d_v).transpose(1, 2)       # v_s    : [bs x n_heads x q_len x d_v]

        # Apply Scaled Dot-Product Attention (multiple heads)
        if self.res_attention:
            output, attn_weights, attn_scores = self.sdp_attn(q_s, k_s, v_s, prev=prev,
                                                              key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        else:
            output, attn_weights = self.sdp_attn(q_s, k_s, v_s, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        # output: [bs x n_heads x q_len x d_v], attn: [bs x n_heads x q_len x q_len], scores: [bs x n_heads x max_q_len x q_len]

        # back to the original inputs dimensions
        output = output.transpose(1, 2).contiguous().view(bs, -1, self.n_heads * self.d_v)  # output: [bs x q_len x n_heads * d_v]
        output = self.to_out(output)

        if self.res_attention:
            return output, attn_weights, attn_scores
        else:
            return output, attn_weights


class TSTEncoderLayer(nn.Module):
    def __init__(self, q_len, d_model, n_heads, d_k=None, d_v=None, d_ff=256, store_attn=False,
                 norm='BatchNorm', attn_dropout=0, dropout=0., bias=True, activation="gelu", res_attention=False,
                 pre_norm=False):
        super().__init__()
        assert not d_model % n_heads, f"d_model ({d_model}) must be divisible by n_heads ({n_heads})"
        d_k = d_model // n_heads if d_k is None else d_k
        d_v = d_model // n_heads if d_v is None else d_v

        # Multi-Head attention
        self.res_attention = res_attention
        self.self_attn = _MultiheadAttention(d_model, n_heads, d_k, d_v, attn_dropout=attn_dropout,
                                             proj_dropout=dropout, res_attention=res_attention)

        # Add & Norm
        self.dropout_attn = nn.Dropout(dropout)
        if "batch" in norm.lower():
            self.norm_attn = nn.Sequential(Transpose(1, 2), nn.BatchNorm1d(d_model), Transpose(1, 2))
        else:
            self.norm_attn = nn.LayerNorm(d_model)

        # Position-wise Feed-Forward
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff, bias=bias),
                                get_activation_fn(activation),
                                nn.Dropout(dropout),
                                nn.Linear(d_ff, d_model, bias=bias))

        # Add & Norm
        self.dropout_ffn = nn.Dropout(dropout)
        if "batch" in norm.lower():
            self.norm_ffn = nn.Sequential(Transpose(1, 2), nn.BatchNorm1d(d_model), Transpose(1, 2))
        else:
            self.norm_ffn = nn.LayerNorm(d_model)

        self.pre_norm = pre_norm
        self.store_attn = store_attn

    def forward(self, src: Tensor, prev: Optional[Tensor] = None, key_padding_mask: Optional[Tensor] = None,
                attn_mask: Optional[Tensor] = None) -> Tensor:

        # Multi-Head attention sublayer
        if self.pre_norm:
            src = self.norm_attn(src)
        ## Multi-Head attention
        if self.res_attention:
            src2, attn, scores = self.self_attn(src, src, src, prev, key_padding_mask=key_padding_mask,
                                                attn_mask=attn_mask)
        else:
            src2, attn = self.self_attn(src, src, src, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        if self.store_attn:
            self.attn = attn
        ## Add & Norm
        src = src + self.dropout_attn(src2)  # Add: residual connection with residual dropout
        if not self.pre_norm:
            src = self.norm_attn(src)

        # Feed-forward sublayer
        if self.pre_norm:
            src = self.norm_ffn(src)
        ## Position-wise Feed-Forward
        src2 = self.ff(src)
        ## Add & Norm
        src = src + self.dropout_ffn(src2)  # Add: residual connection with residual dropout
        if not self.pre_norm:
            src = self.norm_ffn(src)

        if self.res_attention:
            return src, scores
        else:
            return src


class TSTEncoder(nn.Module):
    def __init__(self, q_len, d_model, n_heads, d_k=None, d_v=None, d_ff=None,
                 norm='BatchNorm', attn_dropout=0., dropout=0., activation='gelu',
                 res_attention=False, n_layers=1, pre_norm=False, store_attn=False):
        super().__init__()

        self.layers = nn.ModuleList([TSTEncoderLayer(q_len, d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, d_ff=d_ff,
                                                     norm=norm, attn_dropout=attn_dropout, dropout=dropout,
                                                     activation=activation, res_attention=res_attention,
                                                     pre_norm=pre_norm, store_attn=store_attn) for i in range(n_layers)])
        self.res_attention = res_attention

    def forward(self, src: Tensor, key_padding_mask: Optional[Tensor] = None, attn_mask: Optional[Tensor] = None):
        output = src
        scores = None
        if self.res_attention:
            for mod in self.layers:
                output, scores = mod(output, prev=scores, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
            return output
        else:
            for mod in self.layers:
                output = mod(output, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
            return output


class TSTiEncoder(nn.Module):  # i means channel-independent
    def __init__(self, c_in, patch_num, patch_len, max_seq_len=1024,
                 n_layers=3, d_model=128, n_heads=16, d_k=None, d_v=None,
                 d_ff=256, norm='BatchNorm', attn_dropout=0., dropout=0., act="gelu", store_attn=False,
                 key_padding_mask='auto', padding_var=None, attn_mask=None, res_attention=True, pre_norm=False,
                 pe='zeros', learn_pe=True, verbose=False, **kwargs):

        super().__init__()

        self.patch_num = patch_num
        self.patch_len = patch_len

        # Input encoding
        q_len = patch_num
        self.W_P = nn.Linear(patch_len, d_model)        # Eq 1: projection of feature vectors onto a d-dim vector space
        self.seq_len = q_len

        # Positional encoding
        self.W_pos = positional_encoding(pe, learn_pe, q_len, d_model)

        # Residual dropout
        self.dropout = nn.Dropout(dropout)

        # Encoder
        self.encoder = TSTEncoder(q_len, d_model, n_heads, d_k=d_k, d_v=d_v, d_ff=d_ff, norm=norm,
                                  attn_dropout=attn_dropout, dropout=dropout, pre_norm=pre_norm, activation=act,
                                  res_attention=res_attention, n_layers=n_layers, store_attn=store_attn)

    def forward(self, x) -> Tensor:                                              # x: [bs x nvars x patch_len x patch_num]

        n_vars = x.shape[1]
        # Input encoding
        x = x.permute(0, 1, 3, 2)                                                   # x: [bs x nvars x patch_num x patch_len]
        x = self.W_P(x)                                                          # x: [bs x nvars x patch_num x d_model]

        u = torch.reshape(x, (x.shape[0] * x.shape[1], x.shape[2], x.shape[3]))      # u: [bs * nvars x patch_num x d_model]
        u = self.dropout(u + self.W_pos)                                         # u: [bs * nvars x patch_num x d_model]

        # Encoder
        z = self.encoder(u)                                                      # z: [bs * nvars x patch_num x d_model]
        z = torch.reshape(z, (-1, n_vars, z.shape[-2], z.shape[-1]))                # z: [bs x nvars x patch_num x d_model]
        z = z.permute(0, 1, 3, 2)                                                   # z: [bs x nvars x d_model x patch_num]

        return z


class Flatten_Head(nn.Module):
    def __init__(self, individual, n_vars, nf, target_window, head_dropout=0):
        super().__init__()

        self.individual = individual
        self.n_vars = n_vars

        if self.individual:
            self.linears = nn.ModuleList()
            self.dropouts = nn.ModuleList()
            self.flattens = nn.ModuleList()
            for i in range(self.n_vars):
                self.flattens.append(nn.Flatten(start_dim=-2))
                self.linears.append(nn.Linear(nf, target_window))
                self.dropouts.append(nn.Dropout(head_dropout))
        else:
            self.flatten = nn.Flatten(start_dim=-2)
            self.linear = nn.Linear(nf, target_window)
            self.dropout = nn.Dropout(head_dropout)

    def forward(self, x):                                 # x: [bs x nvars x d_model x patch_num]
        if self.individual:
            x_out = []
            for i in range(self.n_vars):
                z = self.flattens[i](x[:, i, :, :])          # z: [bs x d_model * patch_num]
                z = self.linears[i](z)                    # z: [bs x target_window]
                z = self.dropouts[i](z)
                x_out.append(z)
            x = torch.stack(x_out, dim=1)                 # x: [bs x nvars x target_window]
        else:
            x = self.flatten(x)
            x = self.linear(x)
            x = self.dropout(x)
        return x


class PatchTST_backbone(nn.Module):
    def __init__(self, c_in: int, context_window: int, target_window: int, patch_len: int, stride: int,
                 max_seq_len: Optional[int] = 1024, n_layers: int = 3, d_model=128, n_heads=16,
                 d_k: Optional[int] = None, d_v: Optional[int] = None, d_ff: int = 256, norm: str = 'BatchNorm',
                 attn_dropout: float = 0., dropout: float = 0., act: str = "gelu", key_padding_mask: bool = 'auto',
                 padding_var: Optional[int] = None, attn_mask: Optional[Tensor] = None, res_attention: bool = True,
                 pre_norm: bool = False, store_attn: bool = False, pe: str = 'zeros', learn_pe: bool = True,
                 fc_dropout: float = 0., head_dropout=0, padding_patch=None, pretrain_head: bool = False,
                 head_type='flatten', individual=False, revin=True, affine=True, subtract_last=False,
                 verbose: bool = False, **kwargs):

        super().__init__()

        # RevIn
        self.revin = revin
        if self.revin:
            self.revin_layer = RevIN(c_in, affine=affine, subtract_last=subtract_last)

        # Patching
        self.patch_len = patch_len
        self.stride = stride
        self.padding_patch = padding_patch
        patch_num = int((context_window - patch_len) / stride + 1)
        if padding_patch == 'end':  # can be modified to general case
            self.padding_patch_layer = nn.ReplicationPad1d((0, stride))
            patch_num += 1

        # Backbone
        self.backbone = TSTiEncoder(c_in, patch_num=patch_num, patch_len=patch_len, max_seq_len=max_seq_len,
                                    n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, d_ff=d_ff,
                                    attn_dropout=attn_dropout, dropout=dropout, act=act,
                                    key_padding_mask=key_padding_mask, padding_var=padding_var,
                                    attn_mask=attn_mask, res_attention=res_attention, pre_norm=pre_norm,
                                    store_attn=store_attn, pe=pe, learn_pe=learn_pe, verbose=verbose, **kwargs)

        # Head
        self.head_nf = d_model * patch_num
        self.n_vars = c_in
        self.pretrain_head = pretrain_head
        self.head_type = head_type
        self.individual = individual

        if self.pretrain_head:
            self.head = self.create_pretrain_head(self.head_nf, c_in, fc_dropout)  # custom head passed as a partial func with all its kwargs
        elif head_type == 'flatten':
            self.head = Flatten_Head(self.individual, self.n_vars, self.head_nf, target_window,
                                     head_dropout=head_dropout)

    def forward(self, z):                                                                   # z: [bs x nvars x seq_len]
        # norm
        if self.revin:
            z = z.permute(0, 2, 1)
            z = self.revin_layer(z, 'norm')
            z = z.permute(0, 2, 1)

        # do patching
        if self.padding_patch == 'end':
            z = self.padding_patch_layer(z)
        z = z.unfold(dimension=-1, size=self.patch_len, step=self.stride)                   # z: [bs x nvars x patch_num x patch_len]
        z = z.permute(0, 1, 3, 2)                                                              # z: [bs x nvars x patch_len x patch_num]

        # model
        z = self.backbone(z)                                                                # z: [bs x nvars x d_model x patch_num]
        z = self.head(z)                                                                    # z: [bs x nvars x target_window]

        # denorm
        if self.revin:
            z = z.permute(0, 2, 1)
            z = self.revin_layer(z, 'denorm')
            z = z.permute(0, 2, 1)
        return z

    def create_pretrain_head(self, head_nf, vars, dropout):
        return nn.Sequential(nn.Dropout(dropout), nn.Conv1d(head_nf, vars, 1))


class Model(nn.Module):
    def __init__(self, configs, max_seq_len: Optional[int] = 1024, d_k: Optional[int] = None, d_v: Optional[int] = None,
                 norm: str = 'BatchNorm', attn_dropout: float = 0., act: str = "gelu",
                 key_padding_mask: bool = 'auto', padding_var: Optional[int] = None,
                 attn_mask: Optional[Tensor] = None, res_attention: bool = True, pre_norm: bool = False,
                 store_attn: bool = False, pe: str = 'zeros', learn_pe: bool = True, pretrain_head: bool = False,
                 head_type='flatten', verbose: bool = False, **kwargs):

        super().__init__()

        # load parameters
        c_in = configs.enc_in
        context_window = configs.seq_len
        target_window = configs.pred_len

        n_layers = configs.e_layers
        n_heads = configs.n_heads
        d_model = configs.d_model
        d_ff = configs.d_ff
        dropout = configs.dropout
        fc_dropout = configs.fc_dropout
        head_dropout = configs.head_dropout

        individual = configs.individual

        patch_len = configs.patch_len
        stride = configs.stride
        padding_patch = configs.padding_patch

        revin = configs.revin
        affine = configs.affine
        subtract_last = configs.subtract_last

        decomposition = configs.decomposition
        kernel_size = configs.kernel_size

        # model
        self.decomposition = decomposition
        if self.decomposition:
            self.decomp_module = series_decomp(kernel_size)
            self.model_trend = PatchTST_backbone(c_in=c_in, context_window=context_window, target_window=target_window,
                                                 patch_len=patch_len, stride=stride, max_seq_len=max_seq_len,
                                                 n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v,
                                                 d_ff=d_ff, norm=norm, attn_dropout=attn_dropout, dropout=dropout,
                                                 act=act, key_padding_mask=key_padding_mask, padding_var=padding_var,
                                                 attn_mask=attn_mask, res_attention=res_attention, pre_norm=pre_norm,
                                                 store_attn=store_attn, pe=pe, learn_pe=learn_pe,
                                                 fc_dropout=fc_dropout, head_dropout=head_dropout,
                                                 padding_patch=padding_patch, pretrain_head=pretrain_head,
                                                 head_type=head_type, individual=individual, revin=revin,
                                                 affine=affine, subtract_last=subtract_last, verbose=verbose, **kwargs)
            self.model_res = PatchTST_backbone(c_in=c_in, context_window=context_window, target_window=target_window,
                                               patch_len=patch_len, stride=stride, max_seq_len=max_seq_len,
                                               n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v,
                                               d_ff=d_ff, norm=norm, attn_dropout=attn_dropout, dropout=dropout,
                                               act=act, key_padding_mask=key_padding_mask, padding_var=padding_var,
                                               attn_mask=attn_mask, res_attention=res_attention, pre_norm=pre_norm,
                                               store_attn=store_attn, pe=pe, learn_pe=learn_pe,
                                               fc_dropout=fc_dropout, head_dropout=head_dropout,
                                               padding_patch=padding_patch, pretrain_head=pretrain_head,
                                               head_type=head_type, individual=individual, revin=revin,
                                               affine=affine, subtract_last=subtract_last, verbose=verbose, **kwargs)
        else:
            self.model = PatchTST_backbone(c_in=c_in, context_window=context_window, target_window=target_window,
                                           patch_len=patch_len, stride=stride, max_seq_len=max_seq_len,
                                           n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v,
                                           d_ff=d_ff, norm=norm, attn_dropout=attn_dropout, dropout=dropout,
                                           act=act, key_padding_mask=key_padding_mask, padding_var=padding_var,
                                           attn_mask=attn_mask, res_attention=res_attention, pre_norm=pre_norm,
                                           store_attn=store_attn, pe=pe, learn_pe=learn_pe,
                                           fc_dropout=fc_dropout, head_dropout=head_dropout,
                                           padding_patch=padding_patch, pretrain_head=pretrain_head,
                                           head_type=head_type, individual=individual, revin=revin,
                                           affine=affine, subtract_last=subtract_last, verbose=verbose, **kwargs)

    def forward(self, x):           # x: [Batch, Input length, Channel]
        if self.decomposition:
            res_init, trend_init = self.decomp_module(x)
            res_init, trend_init = res_init.permute(0, 2, 1), trend_init.permute(0, 2, 1)  # x: [Batch, Channel, Input length]
            res = self.model_res(res_init)
            trend = self.model_trend(trend_init)
            x = res + trend
            x = x.permute(0, 2, 1)    # x: [Batch, Input length, Channel]
        else:
            x = x.permute(0, 2, 1)    # x: [Batch, Channel, Input length]
            x = self.model(x)
            x = x.permute(0, 2, 1)    # x: [Batch, Input length, Channel]
        return x


class Configs:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy_weights(model, r, std=0.2):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.requires_grad and 'affine' not in name:
                p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)

# RevIN: norm then denorm is the identity (both variants)
x = torch.from_numpy(r.normal(2.0, 3.0, size=(4, 24, 3)).astype(np.float32))
for sub in (False, True):
    rev = RevIN(3, affine=True, subtract_last=sub)
    with torch.no_grad():
        rev.affine_weight.mul_(1.5)
        rev.affine_bias.add_(0.25)
    xn = rev(x, 'norm')
    back = rev(xn, 'denorm')
    print("revin subtract_last", sub, fmt(xn[0, :, 0], 3), fmt(rev.stdev, 3), torch.allclose(back, x, atol=1e-4),
          [n for n, _ in rev.named_parameters()])
try:
    rev(x, 'other')
except NotImplementedError as e:
    print("NotImplementedError", repr(e))
res, trend = series_decomp(5)(x)
print("decomp", tuple(res.shape), fmt(trend[0, :3, 0], 3), torch.allclose(res + trend, x))
z = x.permute(0, 2, 1)
zp = nn.ReplicationPad1d((0, 4))(z)
patches = zp.unfold(dimension=-1, size=8, step=4)
print("patches", tuple(zp.shape), tuple(patches.shape), patches.stride(), torch.equal(patches[1, 2, 3], zp[1, 2, 12:20]))
pe = PositionalEncoding(6, 8)
print("sincos", fmt(pe[2], 4), f"{pe.mean().item():.4f}", f"{pe.std().item():.4f}")
print("pe kinds", [tuple(positional_encoding(k, True, 6, 8).shape) for k in ('zero', 'zeros', 'normal', 'uniform', 'sincos')],
      positional_encoding(None, True, 6, 8).requires_grad)

configs = Configs(enc_in=3, seq_len=24, pred_len=8, e_layers=2, n_heads=2, d_model=16, d_ff=32, dropout=0.0,
                  fc_dropout=0.0, head_dropout=0.0, individual=False, patch_len=8, stride=4, padding_patch='end',
                  revin=1, affine=1, subtract_last=0, decomposition=0, kernel_size=5)
model = Model(configs)
load_numpy_weights(model, r)
print("patch_num", model.model.backbone.patch_num, "head_nf", model.model.head_nf,
      sum(p.numel() for p in model.parameters() if p.requires_grad))
print("modules", [type(m).__name__ for m in model.model.backbone.encoder.layers[0].norm_attn])

# decomposition + individual heads + subtract_last, one forward / backward
configs2 = Configs(**{**configs.__dict__, 'decomposition': 1, 'individual': True, 'subtract_last': 1,
                      'padding_patch': None})
model2 = Model(configs2, pe='sincos', learn_pe=False, res_attention=False, norm='LayerNorm')
load_numpy_weights(model2, r)
out2 = model2(x)
out2.pow(2).mean().backward()
print("decomp model", tuple(out2.shape), fmt(out2[0, :, 1], 4),
      f"{model2.model_res.head.linears[1].weight.grad.norm().item():.4f}",
      model2.model_trend.backbone.W_pos.requires_grad)

# the attention's masks and the pretraining head
mha = _MultiheadAttention(16, 2, res_attention=True)
load_numpy_weights(mha, r)
src = torch.from_numpy(r.normal(size=(3, 6, 16)).astype(np.float32))
causal = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
pad = torch.zeros(3, 6, dtype=torch.bool)
pad[1, 4:] = True
o, w, sc = mha(src, attn_mask=causal, key_padding_mask=pad)
print("masked attention", tuple(o.shape), fmt(o[1, 5], 4), torch.isinf(sc).sum().item(),
      torch.equal(w[1, :, :, 4:], torch.zeros(2, 6, 2)), fmt(w[0, 1, 2], 3))
add_mask = torch.zeros(6, 6).masked_fill(causal, -1e9)
o2, _, _ = mha(src, attn_mask=add_mask)
print("additive mask", torch.allclose(o2[0], mha(src, attn_mask=causal)[0][0], atol=1e-5))
pre = PatchTST_backbone(c_in=3, context_window=24, target_window=8, patch_len=8, stride=4, n_layers=1,
                        d_model=16, n_heads=2, d_ff=32, pretrain_head=True, revin=False)
load_numpy_weights(pre, r)
print("pretrain head", type(pre.head[1]).__name__, tuple(pre.backbone(x.permute(0, 2, 1).unfold(-1, 8, 4).permute(0, 1, 3, 2)).shape))

# training as exp_main.py does
T = 160
t_idx = np.arange(T)
series = np.stack([np.sin(t_idx / 6.0) * 2 + 1, np.cos(t_idx / 9.0), np.sin(t_idx / 4.0) * 0.5 + t_idx / 80], 1)
series = (series + 0.1 * r.normal(size=series.shape)).astype(np.float32)
starts = list(range(0, T - configs.seq_len - configs.pred_len, 6))
train_steps = (len(starts) + 7) // 8


def get_batch(idx):
    xs = np.stack([series[s:s + configs.seq_len] for s in idx])
    ys = np.stack([series[s + configs.seq_len:s + configs.seq_len + configs.pred_len] for s in idx])
    return torch.from_numpy(xs), torch.from_numpy(ys)


model_optim = torch.optim.Adam(model.parameters(), lr=2e-3)
criterion = nn.MSELoss()
train_epochs = 2
scheduler = lr_scheduler.OneCycleLR(optimizer=model_optim, steps_per_epoch=train_steps, pct_start=0.3,
                                    epochs=train_epochs, max_lr=2e-3)
for epoch in range(train_epochs):
    train_loss = []
    model.train()
    for i in range(0, len(starts), 8):
        batch_x, batch_y = get_batch(starts[i:i + 8])
        model_optim.zero_grad()
        outputs = model(batch_x)
        f_dim = 0
        outputs = outputs[:, -configs.pred_len:, f_dim:]
        batch_y = batch_y[:, -configs.pred_len:, f_dim:]
        loss = criterion(outputs, batch_y)
        train_loss.append(loss.item())
        loss.backward()
        model_optim.step()
        scheduler.step()
    print("Epoch: {0}, Steps: {1} | Train Loss: {2:.7f}".format(epoch + 1, train_steps, np.average(train_loss)))
    print('Updating learning rate to {:.6e}'.format(scheduler.get_last_lr()[0]))
# The biases that reach a BatchNorm only through a per-channel constant (the
# attention's value and output-projection biases, the feed-forward's last
# bias) have an exact gradient of zero: Adam steps them on rounding noise,
# so they, the running means that follow them, and eval-mode outputs are not
# reproducible from run to run. What the data determines is printed: the
# losses, the running variances, RevIN's affine parameters.
noise = ('W_V.bias', 'to_out.0.bias', 'ff.3.bias', 'running_mean')
norm1 = model.model.backbone.encoder.layers[1].norm_ffn[1]
print("running var", fmt(norm1.running_var, 4), norm1.num_batches_tracked.item())
print("revin params", fmt(model.model.revin_layer.affine_weight, 3), fmt(model.model.revin_layer.affine_bias, 3))


# one training step under torch.compile against the same step eagerly
def train_step(bx, by):
    model_optim.zero_grad(set_to_none=True)
    loss = criterion(model(bx), by)
    loss.backward()
    model_optim.step()
    return loss


bx, by = get_batch(starts[2:6])
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(model_optim.state_dict())
eager = [train_step(bx, by).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
model_optim.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(bx, by).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4,
                         atol=4e-3 if k.endswith(noise) else 1e-5) for k in after))
