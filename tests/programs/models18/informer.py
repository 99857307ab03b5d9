# zhouhaoyi/Informer2020 the way its models/ write it: ProbSparse self
# attention (keys sampled with torch.randint and gathered by advanced
# indexing, the sparsity measure M and its topk, the selected queries
# scattered by torch.arange index tensors into a mean / cumsum context,
# ProbMask), FullAttention with TriangularCausalMask, the token embedding's
# circular-padded Conv1d with kaiming init, the fixed sinusoidal positional
# and temporal embeddings, the distilling ConvLayer (BatchNorm1d, ELU,
# MaxPool1d) and the encoder / decoder, trained as exp_informer.py does
# (decoder input of label_len known steps and zeros, MSELoss, Adam, the
# adjust_learning_rate halving). Changes for a CPU test: small sizes,
# weights and data from numpy (at these lengths c*ln(L) >= L, so every query
# is selected and the output does not depend on the sampled keys; a longer
# sequence shows the sparse selection on [rng] lines), a few steps; then one
# training step under torch.compile against the same step eagerly.
import copy
import math
from math import sqrt

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class TriangularCausalMask():
    def __init__(self, B, L, device="cpu"):
        mask_shape = [B, 1, L, L]
        with torch.no_grad():
            self._mask = torch.triu(torch.ones(mask_shape, dtype=torch.bool), diagonal=1).to(device)

    @property
    def mask(self):
        return self._mask


class ProbMask():
    def __init__(self, B, H, L, index, scores, device="cpu"):
        _mask = torch.ones(L, scores.shape[-1], dtype=torch.bool).to(device).triu(1)
        _mask_ex = _mask[None, None, :].expand(B, H, L, scores.shape[-1])
        indicator = _mask_ex[torch.arange(B)[:, None, None],
                             torch.arange(H)[None, :, None],
                             index, :].to(device)
        self._mask = indicator.view(scores.shape).to(device)

    @property
    def mask(self):
        return self._mask


class FullAttention(nn.Module):
    def __init__(self, mask_flag=True, factor=5, scale=None, attention_dropout=0.1, output_attention=False):
        super(FullAttention, self).__init__()
        self.scale = scale
        self.mask_flag = mask_flag
        self.output_attention = output_attention
        self.dropout = nn.Dropout(attention_dropout)

    def forward(self, queries, keys, values, attn_mask):
        B, L, H, E = queries.shape
        _, S, _, D = values.shape
        scale = self.scale or 1. / sqrt(E)

        scores = torch.einsum("blhe,bshe->bhls", queries, keys)
        if self.mask_flag:
            if attn_mask is None:
                attn_mask = TriangularCausalMask(B, L, device=queries.device)
            scores.masked_fill_(attn_mask.mask, -np.inf)

        A = self.dropout(torch.softmax(scale * scores, dim=-1))
        V = torch.einsum("bhls,bshd->blhd", A, values)

        if self.output_attention:
            return (V.contiguous(), A)
        else:
            return (V.contiguous(), None)


class ProbAttention(nn.Module):
    def __init__(self, mask_flag=True, factor=5, scale=None, attention_dropout=0.1, output_attention=False):
        super(ProbAttention, self).__init__()
        self.factor = factor
        self.scale = scale
        self.mask_flag = mask_flag
        self.output_attention = output_attention
        self.dropout = nn.Dropout(attention_dropout)

    def _prob_QK(self, Q, K, sample_k, n_top):  # n_top: c*ln(L_q)
        # Q [B, H, L, D]
        B, H, L_K, E = K.shape
        _, _, L_Q, _ = Q.shape

        # calculate the sampled Q_K
        K_expand = K.unsqueeze(-3).expand(B, H, L_Q, L_K, E)
        index_sample = torch.randint(L_K, (L_Q, sample_k))  # real U = U_part(factor*ln(L_k))*L_q
        K_sample = K_expand[:, :, torch.arange(L_Q).unsqueeze(1), index_sample, :]
        Q_K_sample = torch.matmul(Q.unsqueeze(-2), K_sample.transpose(-2, -1)).squeeze(-2)

        # find the Top_k query with sparisty measurement
        M = Q_K_sample.max(-1)[0] - torch.div(Q_K_sample.sum(-1), L_K)
        M_top = M.topk(n_top, sorted=False)[1]

        # use the reduced Q to calculate Q_K
        Q_reduce = Q[torch.arange(B)[:, None, None],
                     torch.arange(H)[None, :, None],
                     M_top, :]  # factor*ln(L_q)
        Q_K = torch.matmul(Q_reduce, K.transpose(-2, -1))  # factor*ln(L_q)*L_k

        return Q_K, M_top

    def _get_initial_context(self, V, L_Q):
        B, H, L_V, D = V.shape
        if not self.mask_flag:
            # V_sum = V.sum(dim=-2)
            V_sum = V.mean(dim=-2)
            contex = V_sum.unsqueeze(-2).expand(B, H, L_Q, V_sum.shape[-1]).clone()
        else:  # use mask
            assert(L_Q == L_V)  # requires that L_Q == L_V, i.e. for self-attention only
            contex = V.cumsum(dim=-2)
        return contex

    def _update_context(self, context_in, V, scores, index, L_Q, attn_mask):
        B, H, L_V, D = V.shape

        if self.mask_flag:
            attn_mask = ProbMask(B, H, L_Q, index, scores, device=V.device)
            scores.masked_fill_(attn_mask.mask, -np.inf)

        attn = torch.softmax(scores, dim=-1)  # nn.Softmax(dim=-1)(scores)

        context_in[torch.arange(B)[:, None, None],
                   torch.arange(H)[None, :, None],
                   index, :] = torch.matmul(attn, V).type_as(context_in)
        if self.output_attention:
            attns = (torch.ones([B, H, L_V, L_V]) / L_V).type_as(attn).to(attn.device)
            attns[torch.arange(B)[:, None, None], torch.arange(H)[None, :, None], index, :] = attn
            return (context_in, attns)
        else:
            return (context_in, None)

    def forward(self, queries, keys, values, attn_mask):
        B, L_Q, H, D = queries.shape
        _, L_K, _, _ = keys.shape

        queries = queries.transpose(2, 1)
        keys = keys.transpose(2, 1)
        values = values.transpose(2, 1)

        U_part = self.factor * np.ceil(np.log(L_K)).astype('int').item()  # c*ln(L_k)
        u = self.factor * np.ceil(np.log(L_Q)).astype('int').item()  # c*ln(L_q)

        U_part = U_part if U_part < L_K else L_K
        u = u if u < L_Q else L_Q

        scores_top, index = self._prob_QK(queries, keys, sample_k=U_part, n_top=u)

        # add scale factor
        scale = self.scale or 1. / sqrt(D)
        if scale is not None:
            scores_top = scores_top * scale
        # get the context
        context = self._get_initial_context(values, L_Q)
        # update the context with selected top_k queries
        context, attn = self._update_context(context, values, scores_top, index, L_Q, attn_mask)

        return context.transpose(2, 1).contiguous(), attn


class AttentionLayer(nn.Module):
    def __init__(self, attention, d_model, n_heads, d_keys=None, d_values=None, mix=False):
        super(AttentionLayer, self).__init__()

        d_keys = d_keys or (d_model // n_heads)
        d_values = d_values or (d_model // n_heads)

        self.inner_attention = attention
        self.query_projection = nn.Linear(d_model, d_keys * n_heads)
        self.key_projection = nn.Linear(d_model, d_keys * n_heads)
        self.value_projection = nn.Linear(d_model, d_values * n_heads)
        self.out_projection = nn.Linear(d_values * n_heads, d_model)
        self.n_heads = n_heads
        self.mix = mix

    def forward(self, queries, keys, values, attn_mask):
        B, L, _ = queries.shape
        _, S, _ = keys.shape
        H = self.n_heads

        queries = self.query_projection(queries).view(B, L, H, -1)
        keys = self.key_projection(keys).view(B, S, H, -1)
        values = self.value_projection(values).view(B, S, H, -1)

        out, attn = self.inner_attention(queries, keys, values, attn_mask)
        if self.mix:
            out = out.transpose(2, 1).contiguous()
        out = out.view(B, L, -1)

        return self.out_projection(out), attn


class PositionalEmbedding(nn.Module):
    def __init__(self, d_model, max_len=5000):
        super(PositionalEmbedding, self).__init__()
        # Compute the positional encodings once in log space.
        pe = torch.zeros(max_len, d_model).float()
        pe.require_grad = False

        position = torch.arange(0, max_len).float().unsqueeze(1)
        div_term = (torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model)).exp()

        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)

        pe = pe.unsqueeze(0)
        self.register_buffer('pe', pe)

    def forward(self, x):
        return self.pe[:, :x.size(1)]


class TokenEmbedding(nn.Module):
    def __init__(self, c_in, d_model):
        super(TokenEmbedding, self).__init__()
        padding = 1 if torch.__version__ >= '1.5.0' else 2
        self.tokenConv = nn.Conv1d(in_channels=c_in, out_channels=d_model,
                                   kernel_size=3, padding=padding, padding_mode='circular')
        for m in self.modules():
            if isinstance(m, nn.Conv1d):
                nn.init.kaiming_normal_(m.weight, mode='fan_in', nonlinearity='leaky_relu')

    def forward(self, x):
        x = self.tokenConv(x.permute(0, 2, 1)).transpose(1, 2)
        return x


class FixedEmbedding(nn.Module):
    def __init__(self, c_in, d_model):
        super(FixedEmbedding, self).__init__()

        w = torch.zeros(c_in, d_model).float()
        w.require_grad = False

        position = torch.arange(0, c_in).float().unsqueeze(1)
        div_term = (torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model)).exp()

        w[:, 0::2] = torch.sin(position * div_term)
        w[:, 1::2] = torch.cos(position * div_term)

        self.emb = nn.Embedding(c_in, d_model)
        self.emb.weight = nn.Parameter(w, requires_grad=False)

    def forward(self, x):
        return self.emb(x).detach()


class TemporalEmbedding(nn.Module):
    def __init__(self, d_model, embed_type='fixed', freq='h'):
        super(TemporalEmbedding, self).__init__()

        minute_size = 4
        hour_size = 24
        weekday_size = 7
        day_size = 32
        month_size = 13

        Embed = FixedEmbedding if embed_type == 'fixed' else nn.Embedding
        if freq == 't':
            self.minute_embed = Embed(minute_size, d_model)
        self.hour_embed = Embed(hour_size, d_model)
        self.weekday_embed = Embed(weekday_size, d_model)
        self.day_embed = Embed(day_size, d_model)
        self.month_embed = Embed(month_size, d_model)

    def forward(self, x):
        x = x.long()

        minute_x = self.minute_embed(x[:, :, 4]) if hasattr(self, 'minute_embed') else 0.
        hour_x = self.hour_embed(x[:, :, 3])
        weekday_x = self.weekday_embed(x[:, :, 2])
        day_x = self.day_embed(x[:, :, 1])
        month_x = self.month_embed(x[:, :, 0])

        return hour_x + weekday_x + day_x + month_x + minute_x


class DataEmbedding(nn.Module):
    def __init__(self, c_in, d_model, embed_type='fixed', freq='h', dropout=0.1):
        super(DataEmbedding, self).__init__()

        self.value_embedding = TokenEmbedding(c_in=c_in, d_model=d_model)
        self.position_embedding = PositionalEmbedding(d_model=d_model)
        self.temporal_embedding = TemporalEmbedding(d_model=d_model, embed_type=embed_type, freq=freq)

        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x, x_mark):
        x = self.value_embedding(x) + self.position_embedding(x) + self.temporal_embedding(x_mark)

        return self.dropout(x)


class ConvLayer(nn.Module):
    def __init__(self, c_in):
        super(ConvLayer, self).__init__()
        padding = 1 if torch.__version__ >= '1.5.0' else 2
        self.downConv = nn.Conv1d(in_channels=c_in, out_channels=c_in, kernel_size=3,
                                  padding=padding, padding_mode='circular')
        self.norm = nn.BatchNorm1d(c_in)
        self.activation = nn.ELU()
        self.maxPool = nn.MaxPool1d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        x = self.downConv(x.permute(0, 2, 1))
        x = self.norm(x)
        x = self.activation(x)
        x = self.maxPool(x)
        x = x.transpose(1, 2)
        return x


class EncoderLayer(nn.Module):
    def __init__(self, attention, d_model, d_ff=None, dropout=0.1, activation="relu"):
        super(EncoderLayer, self).__init__()
        d_ff = d_ff or 4 * d_model
        self.attention = attention
        self.conv1 = nn.Conv1d(in_channels=d_model, out_channels=d_ff, kernel_size=1)
        self.conv2 = nn.Conv1d(in_channels=d_ff, out_channels=d_model, kernel_size=1)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = F.relu if activation == "relu" else F.gelu

    def forward(self, x, attn_mask=None):
        new_x, attn = self.attention(x, x, x, attn_mask=attn_mask)
        x = x + self.dropout(new_x)

        y = x = self.norm1(x)
        y = self.dropout(self.activation(self.conv1(y.transpose(-1, 1))))
        y = self.dropout(self.conv2(y).transpose(-1, 1))

        return self.norm2(x + y), attn


class Encoder(nn.Module):
    def __init__(self, attn_layers, conv_layers=None, norm_layer=None):
        super(Encoder, self).__init__()
        self.attn_layers = nn.ModuleList(attn_layers)
        self.conv_layers = nn.ModuleList(conv_layers) if conv_layers is not None else None
        self.norm = norm_layer

    def forward(self, x, attn_mask=None):
        # x [B, L, D]
        attns = []
        if self.conv_layers is not None:
            for attn_layer, conv_layer in zip(self.attn_layers, self.conv_layers):
                x, attn = attn_layer(x, attn_mask=attn_mask)
                x = conv_layer(x)
                attns.append(attn)
            x, attn = self.attn_layers[-1](x, attn_mask=attn_mask)
            attns.append(attn)
        else:
            for attn_layer in self.attn_layers:
                x, attn = attn_layer(x, attn_mask=attn_mask)
                attns.append(attn)

        if self.norm is not None:
            x = self.norm(x)

        return x, attns


class DecoderLayer(nn.Module):
    def __init__(self, self_attention, cross_attention, d_model, d_ff=None,
                 dropout=0.1, activation="relu"):
        super(DecoderLayer, self).__init__()
        d_ff = d_ff or 4 * d_model
        self.self_attention = self_attention
        self.cross_attention = cross_attention
        self.conv1 = nn.Conv1d(in_channels=d_model, out_channels=d_ff, kernel_size=1)
        self.conv2 = nn.Conv1d(in_channels=d_ff, out_channels=d_model, kernel_size=1)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = F.relu if activation == "relu" else F.gelu

    def forward(self, x, cross, x_mask=None, cross_mask=None):
        x = x + self.dropout(self.self_attention(x, x, x, attn_mask=x_mask)[0])
        x = self.norm1(x)

        x = x + self.dropout(self.cross_attention(x, cross, cross, attn_mask=cross_mask)[0])

        y = x = self.norm2(x)
        y = self.dropout(self.activation(self.conv1(y.transpose(-1, 1))))
        y = self.dropout(self.conv2(y).transpose(-1, 1))

        return self.norm3(x + y)


class Decoder(nn.Module):
    def __init__(self, layers, norm_layer=None):
        super(Decoder, self).__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = norm_layer

    def forward(self, x, cross, x_mask=None, cross_mask=None):
        for layer in self.layers:
            x = layer(x, cross, x_mask=x_mask, cross_mask=cross_mask)

        if self.norm is not None:
            x = self.norm(x)

        return x


class Informer(nn.Module):
    def __init__(self, enc_in, dec_in, c_out, seq_len, label_len, out_len,
                 factor=5, d_model=512, n_heads=8, e_layers=3, d_layers=2, d_ff=512,
                 dropout=0.0, attn='prob', embed='fixed', freq='h', activation='gelu',
                 output_attention=False, distil=True, mix=True,
                 device=torch.device('cuda:0')):
        super(Informer, self).__init__()
        self.pred_len = out_len
        self.attn = attn
        self.output_attention = output_attention

        # Encoding
        self.enc_embedding = DataEmbedding(enc_in, d_model, embed, freq, dropout)
        self.dec_embedding = DataEmbedding(dec_in, d_model, embed, freq, dropout)
        # Attention
        Attn = ProbAttention if attn == 'prob' else FullAttention
        # Encoder
        self.encoder = Encoder(
            [
                EncoderLayer(
                    AttentionLayer(Attn(False, factor, attention_dropout=dropout, output_attention=output_attention),
                                   d_model, n_heads, mix=False),
                    d_model,
                    d_ff,
                    dropout=dropout,
                    activation=activation
                ) for l in range(e_layers)
            ],
            [
                ConvLayer(
                    d_model
                ) for l in range(e_layers - 1)
            ] if distil else None,
            norm_layer=torch.nn.LayerNorm(d_model)
        )
        # Decoder
        self.decoder = Decoder(
            [
                DecoderLayer(
                    AttentionLayer(Attn(True, factor, attention_dropout=dropout, output_attention=False),
                                   d_model, n_heads, mix=mix),
                    AttentionLayer(FullAttention(False, factor, attention_dropout=dropout, output_attention=False),
                                   d_model, n_heads, mix=False),
                    d_model,
                    d_ff,
                    dropout=dropout,
                    activation=activation,
                )
                for l in range(d_layers)
            ],
            norm_layer=torch.nn.LayerNorm(d_model)
        )
        self.projection = nn.Linear(d_model, c_out, bias=True)

    def forward(self, x_enc, x_mark_enc, x_dec, x_mark_dec,
                enc_self_mask=None, dec_self_mask=None, dec_enc_mask=None):
        enc_out = self.enc_embedding(x_enc, x_mark_enc)
        enc_out, attns = self.encoder(enc_out, attn_mask=enc_self_mask)

        dec_out = self.dec_embedding(x_dec, x_mark_dec)
        dec_out = self.decoder(dec_out, enc_out, x_mask=dec_self_mask, cross_mask=dec_enc_mask)
        dec_out = self.projection(dec_out)

        if self.output_attention:
            return dec_out[:, -self.pred_len:, :], attns
        else:
            return dec_out[:, -self.pred_len:, :]  # [B, L, D]


def adjust_learning_rate(optimizer, epoch, args_learning_rate):
    lr_adjust = {epoch: args_learning_rate * (0.5 ** ((epoch - 1) // 1))}
    if epoch in lr_adjust.keys():
        lr = lr_adjust[epoch]
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        print('Updating learning rate to {}'.format(lr))


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


r = np.random.default_rng(0)

# the sparse selection on a longer sequence: u = c*ln(L) of the L queries
B, L, H, D = 2, 40, 2, 4
q, k, v = (torch.from_numpy(r.normal(size=(B, L, H, D)).astype(np.float32)) for _ in range(3))
pa = ProbAttention(mask_flag=False, factor=1, output_attention=True)
ctx, attns = pa(q, k, v, None)
mean_rows = torch.isclose(ctx, v.mean(dim=1, keepdim=True), atol=1e-6).all(-1).sum().item()
print("prob ctx", tuple(ctx.shape), tuple(attns.shape), "rows kept at mean", mean_rows, "of", B * L * H)
print("[rng] prob ctx", fmt(ctx[0, 0], 4))
pm = ProbAttention(mask_flag=True, factor=1)
ctx_m, _ = pm(q, k, v, None)
cum_rows = torch.isclose(ctx_m, v.cumsum(dim=1), atol=1e-5).all(-1).sum().item()
print("masked rows kept at cumsum", cum_rows, "of", B * L * H)
Q_K, M_top = pa._prob_QK(q.transpose(2, 1), k.transpose(2, 1), sample_k=4, n_top=4)
print("prob_QK", tuple(Q_K.shape), tuple(M_top.shape), M_top.dtype, "[rng]", M_top[0, 0].sort()[0].tolist())
pmask = ProbMask(B, H, L, M_top, Q_K)
print("ProbMask", tuple(pmask.mask.shape), pmask.mask.dtype,
      (pmask.mask.sum(-1) == (L - 1 - M_top)).all().item())
# at full selection ProbSparse is exactly full attention
qs, ks, vs = (t[:, :12] for t in (q, k, v))
full, _ = FullAttention(False, attention_dropout=0.0)(qs, ks, vs, None)
prob, _ = ProbAttention(False, attention_dropout=0.0)(qs, ks, vs, None)
fullc, _ = FullAttention(True, attention_dropout=0.0)(qs, ks, vs, None)
probc, _ = ProbAttention(True, attention_dropout=0.0)(qs, ks, vs, None)
print("prob == full", torch.allclose(full, prob, atol=1e-5), torch.allclose(fullc, probc, atol=1e-5),
      fmt(probc[1, 5], 4))

# embeddings
torch.manual_seed(0)
tok = TokenEmbedding(3, 8)
print("tokenConv", tok.tokenConv.padding_mode, tok.tokenConv.padding, tuple(tok.tokenConv.weight.shape),
      "[rng]", f"{tok.tokenConv.weight.std().item():.3f}")
fe = FixedEmbedding(24, 8)
print("fixed", fe.emb.weight.requires_grad, fmt(fe.emb.weight[5], 8))
pe = PositionalEmbedding(8)
print("pe", tuple(pe.pe.shape), fmt(pe.pe[0, 7], 8))
cl = ConvLayer(4)
print("distil", tuple(cl(torch.from_numpy(r.normal(size=(2, 12, 4)).astype(np.float32))).shape))

# the full-attention Informer without distilling, returning the encoder's attention maps
full_model = Informer(3, 3, 3, 12, 6, 4, factor=5, d_model=8, n_heads=2, e_layers=2, d_layers=1, d_ff=16,
                      dropout=0.0, attn='full', output_attention=True, distil=False, mix=False,
                      device=torch.device('cpu'))
with torch.no_grad():
    for name, p in full_model.named_parameters():
        if p.requires_grad:
            p.copy_(torch.from_numpy(r.normal(0, 0.2, tuple(p.shape)).astype(np.float32)))
xe = torch.from_numpy(r.normal(size=(2, 12, 3)).astype(np.float32))
me = torch.from_numpy(np.stack([np.stack([np.full(12, 3), np.arange(12) % 28 + 1, np.arange(12) % 7,
                                          np.arange(12) % 24], 1)] * 2).astype(np.float32))
xd = torch.cat([xe[:, -6:], torch.zeros(2, 4, 3)], dim=1)
md = torch.cat([me[:, -6:], me[:, :4]], dim=1)
fout, fattns = full_model(xe, me, xd, md)
print("full attn", tuple(fout.shape), len(fattns), tuple(fattns[0].shape), fmt(fout[1, :, 2], 4),
      torch.allclose(fattns[1].sum(-1), torch.ones(2, 2, 12), atol=1e-5))

# the model, trained as exp_informer.py does
enc_in, seq_len, label_len, pred_len = 3, 12, 6, 4
model = Informer(enc_in, enc_in, enc_in, seq_len, label_len, pred_len, factor=5, d_model=16,
                 n_heads=2, e_layers=2, d_layers=1, d_ff=32, dropout=0.0, attn='prob',
                 embed='fixed', freq='h', activation='gelu', distil=True, mix=True,
                 device=torch.device('cpu'))
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.requires_grad:
            p.copy_(torch.from_numpy(r.normal(0, 0.2, tuple(p.shape)).astype(np.float32)))
print("params", sum(p.numel() for p in model.parameters() if p.requires_grad),
      sum(p.numel() for p in model.parameters()), len(list(model.buffers())))

T = 80
t_idx = np.arange(T)
series = np.stack([np.sin(t_idx / 5.0), np.cos(t_idx / 7.0), np.sin(t_idx / 3.0) * 0.5], 1)
series = (series + 0.1 * r.normal(size=series.shape)).astype(np.float32)
stamp = np.stack([(t_idx // 720) % 12 + 1, (t_idx // 24) % 28 + 1, (t_idx // 24) % 7, t_idx % 24], 1).astype(np.float32)
starts = list(range(0, T - seq_len - pred_len, 4))


def get_batch(idx):
    xs, ys, xm, ym = [], [], [], []
    for s in idx:
        e = s + seq_len
        xs.append(series[s:e]); xm.append(stamp[s:e])
        ys.append(series[e - label_len:e + pred_len]); ym.append(stamp[e - label_len:e + pred_len])
    return tuple(torch.from_numpy(np.stack(a)) for a in (xs, xm, ys, ym))


def process_one_batch(batch_x, batch_y, batch_x_mark, batch_y_mark):
    batch_x = batch_x.float()
    batch_y = batch_y.float()
    batch_x_mark = batch_x_mark.float()
    batch_y_mark = batch_y_mark.float()
    # decoder input
    dec_inp = torch.zeros([batch_y.shape[0], pred_len, batch_y.shape[-1]]).float()
    dec_inp = torch.cat([batch_y[:, :label_len, :], dec_inp], dim=1).float()
    outputs = model(batch_x, batch_x_mark, dec_inp, batch_y_mark)
    f_dim = 0
    batch_y = batch_y[:, -pred_len:, f_dim:]
    return outputs, batch_y


learning_rate = 3e-3
model_optim = torch.optim.Adam(model.parameters(), lr=learning_rate)
criterion = nn.MSELoss()
for epoch in range(2):
    model.train()
    train_loss = []
    for i in range(0, len(starts), 8):
        bx, bxm, by, bym = get_batch(starts[i:i + 8])
        model_optim.zero_grad()
        pred, true = process_one_batch(bx, by, bxm, bym)
        loss = criterion(pred, true)
        train_loss.append(loss.item())
        loss.backward()
        model_optim.step()
    print("Epoch: {0} | Train Loss: {1:.5f}".format(epoch + 1, np.average(train_loss)))
    adjust_learning_rate(model_optim, epoch + 1, learning_rate)
model.eval()
with torch.no_grad():
    bx, bxm, by, bym = get_batch(starts[:4])
    pred, true = process_one_batch(bx, by, bxm, bym)
print("eval", tuple(pred.shape), f"{criterion(pred, true).item():.5f}", fmt(pred[0, :, 0], 4))
print("running var", fmt(model.encoder.conv_layers[0].norm.running_var, 3),
      model.encoder.conv_layers[0].norm.num_batches_tracked.item())
model.train()


# one training step under torch.compile against the same step eagerly
def train_step(bx, by, bxm, bym):
    model_optim.zero_grad(set_to_none=True)
    pred, true = process_one_batch(bx, by, bxm, bym)
    loss = criterion(pred, true)
    loss.backward()
    model_optim.step()
    return loss


bx, bxm, by, bym = get_batch(starts[1:5])
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(model_optim.state_dict())
torch.manual_seed(1)      # the same key samples for both
eager = [train_step(bx, by, bxm, bym).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
model_optim.load_state_dict(opt_state)
cstep = torch.compile(train_step)
torch.manual_seed(1)
compiled = [cstep(bx, by, bxm, bym).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
# the distilling conv's bias, and the LayerNorm bias before it, only shift
# BatchNorm's input by a per-channel constant, and the attention's key bias
# only shifts each query's scores by a constant the softmax removes: their
# exact gradient is zero, so Adam steps them on rounding noise (up to lr a
# step), and BatchNorm's running mean follows the conv bias (0.1 of it); the
# rest is checked tightly
noise = {'encoder.attn_layers.0.norm2.bias', 'encoder.conv_layers.0.downConv.bias',
         'encoder.attn_layers.0.attention.key_projection.bias',
         'encoder.conv_layers.0.norm.running_mean'}
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4,
                         atol=2 * learning_rate if k in noise else 1e-5) for k in after))
