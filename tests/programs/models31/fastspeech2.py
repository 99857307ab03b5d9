# FastSpeech2 the way ming024/FastSpeech2 writes it (transformer/Modules.py,
# SubLayers.py, Layers.py, Models.py; model/modules.py, fastspeech2.py,
# loss.py, optimizer.py; utils/tools.py; train.py): get_mask_from_lengths
# (torch.arange(0, max_len).unsqueeze(0).expand(batch_size, -1) >= lengths,
# max_len a numpy int64 from the collate's max(src_lens)),
# ScaledDotProductAttention with temperature np.power(d_k, 0.5) and
# masked_fill(mask, -np.inf), MultiHeadAttention's permute(2, 0, 1, 3) heads
# and mask.repeat(n_head, 1, 1), the position-wise FFN of Conv1d layers with
# kernel_size=(9, 1) indexed per layer and transposes, FFT blocks zeroing
# padded positions with masked_fill(mask.unsqueeze(-1), 0), the sinusoid
# table (numpy) as nn.Parameter(requires_grad=False), the speaker embedding
# expanded over max_src_len, the VarianceAdaptor (VariancePredictor's
# OrderedDict Sequential of Conv / ReLU / LayerNorm / Dropout, its output
# masked_fill(mask, 0.0); pitch and energy torch.bucketize into
# nn.Embedding over bins from torch.exp(torch.linspace(np.log(min),
# np.log(max), n_bins - 1)) and torch.linspace, as requires_grad=False
# Parameters, min / max read from a stats.json; predicted durations
# torch.clamp(torch.round(torch.exp(log_d) - 1) * d_control, min=0) at
# inference), the LengthRegulator (vec.expand(max(int(expand_size), 0), -1)
# from predicted[i].item(), torch.cat, the pad helper's F.pad(batch, (0, 0,
# 0, max_len - batch.size(0)), "constant", 0.0), torch.LongTensor(mel_len)),
# the PostNet (ConvNorm Conv1d + BatchNorm1d stack, tanh, F.dropout(...,
# self.training)), FastSpeech2Loss (masks inverted with ~, log-duration
# targets torch.log(duration_targets.float() + 1), requires_grad = False
# assignments, masked_select, nn.MSELoss / nn.L1Loss), ScheduledOptim (Adam
# betas=(0.9, 0.98), eps=1e-9 over every parameter, frozen ones included; the
# Noam scale np.min([np.power(step, -0.5), np.power(warm_up, -1.5) * step])
# with anneal steps written into param_group["lr"]), the train loop's
# grad_acc_step division and nn.utils.clip_grad_norm_, and the collate's
# pad_1D / pad_2D numpy helpers with length-sorted batches, checkpoints saved
# every save_step and read back by get_model (torch.load, load_state_dict,
# model.eval() and its `model.requires_grad_ = False`, which shadows the
# method; a resume from a later step, whose numpy lr torch.load refuses). Changes for a
# CPU test: a tiny config (hidden 16, one layer each, 10 mel channels, 8
# bins), dropout 0 (the PostNet's hard-coded 0.5 is a constructor argument
# here, exercised once under [rng]), synthetic phoneme / duration / mel data
# from numpy, the model in nn.DataParallel, a few steps; then one training
# step under torch.compile against the same step eagerly.
import copy
import json
import os
import pickle
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
PAD = 0
symbols = ["_", "-", "!", "a", "b", "d", "e", "i", "k", "o", "s", "t"]

preprocess_config = {
    "path": {"preprocessed_path": "."},
    "preprocessing": {"mel": {"n_mel_channels": 10},
                      "pitch": {"feature": "phoneme_level", "normalization": True},
                      "energy": {"feature": "phoneme_level", "normalization": True}},
}
model_config = {
    "transformer": {"encoder_layer": 1, "encoder_head": 2, "encoder_hidden": 16, "decoder_layer": 1,
                    "decoder_head": 2, "decoder_hidden": 16, "conv_filter_size": 32,
                    "conv_kernel_size": [9, 1], "encoder_dropout": 0.0, "decoder_dropout": 0.0},
    "variance_predictor": {"filter_size": 16, "kernel_size": 3, "dropout": 0.0},
    "variance_embedding": {"pitch_quantization": "linear", "energy_quantization": "log", "n_bins": 8},
    "multi_speaker": True,
    "max_seq_len": 40,
    "postnet": {"dropout": 0.0},
}
train_config = {
    "optimizer": {"batch_size": 3, "betas": [0.9, 0.98], "eps": 0.000000001, "weight_decay": 0.0,
                  "grad_clip_thresh": 1.0, "grad_acc_step": 2, "warm_up_step": 4,
                  "anneal_steps": [3, 5], "anneal_rate": 0.3},
    "step": {"total_step": 6, "log_step": 1, "save_step": 3},
    "path": {"ckpt_path": "./output/ckpt/LJSpeech"},
}


class Args:
    restore_step = 0


# ---------------------------------------------------------------- utils/tools.py
def get_mask_from_lengths(lengths, max_len=None):
    batch_size = lengths.shape[0]
    if max_len is None:
        max_len = torch.max(lengths).item()

    ids = torch.arange(0, max_len).unsqueeze(0).expand(batch_size, -1).to(device)
    mask = ids >= lengths.unsqueeze(1).expand(-1, max_len)

    return mask


def pad_1D(inputs, PAD=0):
    def pad_data(x, length, PAD):
        x_padded = np.pad(x, (0, length - x.shape[0]), mode="constant", constant_values=PAD)
        return x_padded

    max_len = max((len(x) for x in inputs))
    padded = np.stack([pad_data(x, max_len, PAD) for x in inputs])

    return padded


def pad_2D(inputs, maxlen=None):
    def pad(x, max_len):
        PAD = 0
        if np.shape(x)[0] > max_len:
            raise ValueError("not max_len")

        s = np.shape(x)[1]
        x_padded = np.pad(x, (0, max_len - np.shape(x)[0]), mode="constant", constant_values=PAD)
        return x_padded[:, :s]

    if maxlen:
        output = np.stack([pad(x, maxlen) for x in inputs])
    else:
        max_len = max(np.shape(x)[0] for x in inputs)
        output = np.stack([pad(x, max_len) for x in inputs])

    return output


def pad(input_ele, mel_max_length=None):
    if mel_max_length:
        max_len = mel_max_length
    else:
        max_len = max([input_ele[i].size(0) for i in range(len(input_ele))])

    out_list = list()
    for i, batch in enumerate(input_ele):
        if len(batch.shape) == 1:
            one_batch_padded = F.pad(batch, (0, max_len - batch.size(0)), "constant", 0.0)
        elif len(batch.shape) == 2:
            one_batch_padded = F.pad(batch, (0, 0, 0, max_len - batch.size(0)), "constant", 0.0)
        out_list.append(one_batch_padded)
    out_padded = torch.stack(out_list)
    return out_padded


def to_device(data, device):
    if len(data) == 12:
        (ids, raw_texts, speakers, texts, src_lens, max_src_len, mels, mel_lens, max_mel_len,
         pitches, energies, durations) = data

        speakers = torch.from_numpy(speakers).long().to(device)
        texts = torch.from_numpy(texts).long().to(device)
        src_lens = torch.from_numpy(src_lens).to(device)
        mels = torch.from_numpy(mels).float().to(device)
        mel_lens = torch.from_numpy(mel_lens).to(device)
        pitches = torch.from_numpy(pitches).float().to(device)
        energies = torch.from_numpy(energies).to(device)
        durations = torch.from_numpy(durations).long().to(device)

        return (ids, raw_texts, speakers, texts, src_lens, max_src_len, mels, mel_lens, max_mel_len,
                pitches, energies, durations)

    if len(data) == 6:
        (ids, raw_texts, speakers, texts, src_lens, max_src_len) = data

        speakers = torch.from_numpy(speakers).long().to(device)
        texts = torch.from_numpy(texts).long().to(device)
        src_lens = torch.from_numpy(src_lens).to(device)

        return (ids, raw_texts, speakers, texts, src_lens, max_src_len)


def get_param_num(model):
    num_param = sum(param.numel() for param in model.parameters())
    return num_param


# ---------------------------------------------------------------- transformer/Modules.py
class ScaledDotProductAttention(nn.Module):
    """ Scaled Dot-Product Attention """

    def __init__(self, temperature):
        super().__init__()
        self.temperature = temperature
        self.softmax = nn.Softmax(dim=2)

    def forward(self, q, k, v, mask=None):

        attn = torch.bmm(q, k.transpose(1, 2))
        attn = attn / self.temperature

        if mask is not None:
            attn = attn.masked_fill(mask, -np.inf)

        attn = self.softmax(attn)
        output = torch.bmm(attn, v)

        return output, attn


# ---------------------------------------------------------------- transformer/SubLayers.py
class MultiHeadAttention(nn.Module):
    """ Multi-Head Attention module """

    def __init__(self, n_head, d_model, d_k, d_v, dropout=0.1):
        super().__init__()

        self.n_head = n_head
        self.d_k = d_k
        self.d_v = d_v

        self.w_qs = nn.Linear(d_model, n_head * d_k)
        self.w_ks = nn.Linear(d_model, n_head * d_k)
        self.w_vs = nn.Linear(d_model, n_head * d_v)

        self.attention = ScaledDotProductAttention(temperature=np.power(d_k, 0.5))
        self.layer_norm = nn.LayerNorm(d_model)

        self.fc = nn.Linear(n_head * d_v, d_model)

        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v, mask=None):

        d_k, d_v, n_head = self.d_k, self.d_v, self.n_head

        sz_b, len_q, _ = q.size()
        sz_b, len_k, _ = k.size()
        sz_b, len_v, _ = v.size()

        residual = q

        q = self.w_qs(q).view(sz_b, len_q, n_head, d_k)
        k = self.w_ks(k).view(sz_b, len_k, n_head, d_k)
        v = self.w_vs(v).view(sz_b, len_v, n_head, d_v)
        q = q.permute(2, 0, 1, 3).contiguous().view(-1, len_q, d_k)  # (n*b) x lq x dk
        k = k.permute(2, 0, 1, 3).contiguous().view(-1, len_k, d_k)  # (n*b) x lk x dk
        v = v.permute(2, 0, 1, 3).contiguous().view(-1, len_v, d_v)  # (n*b) x lv x dv

        mask = mask.repeat(n_head, 1, 1)  # (n*b) x .. x ..
        output, attn = self.attention(q, k, v, mask=mask)

        output = output.view(n_head, sz_b, len_q, d_v)
        output = (
            output.permute(1, 2, 0, 3).contiguous().view(sz_b, len_q, -1)
        )  # b x lq x (n*dv)

        output = self.dropout(self.fc(output))
        output = self.layer_norm(output + residual)

        return output, attn


class PositionwiseFeedForward(nn.Module):
    """ A two-feed-forward-layer module """

    def __init__(self, d_in, d_hid, kernel_size, dropout=0.1):
        super().__init__()

        # Use Conv1D
        # position-wise
        self.w_1 = nn.Conv1d(
            d_in,
            d_hid,
            kernel_size=kernel_size[0],
            padding=(kernel_size[0] - 1) // 2,
        )
        # position-wise
        self.w_2 = nn.Conv1d(
            d_hid,
            d_in,
            kernel_size=kernel_size[1],
            padding=(kernel_size[1] - 1) // 2,
        )

        self.layer_norm = nn.LayerNorm(d_in)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        residual = x
        output = x.transpose(1, 2)
        output = self.w_2(F.relu(self.w_1(output)))
        output = output.transpose(1, 2)
        output = self.dropout(output)
        output = self.layer_norm(output + residual)

        return output


# ---------------------------------------------------------------- transformer/Layers.py
class FFTBlock(torch.nn.Module):
    """FFT Block"""

    def __init__(self, d_model, n_head, d_k, d_v, d_inner, kernel_size, dropout=0.1):
        super(FFTBlock, self).__init__()
        self.slf_attn = MultiHeadAttention(n_head, d_model, d_k, d_v, dropout=dropout)
        self.pos_ffn = PositionwiseFeedForward(
            d_model, d_inner, kernel_size, dropout=dropout
        )

    def forward(self, enc_input, mask=None, slf_attn_mask=None):
        enc_output, enc_slf_attn = self.slf_attn(
            enc_input, enc_input, enc_input, mask=slf_attn_mask
        )
        enc_output = enc_output.masked_fill(mask.unsqueeze(-1), 0)

        enc_output = self.pos_ffn(enc_output)
        enc_output = enc_output.masked_fill(mask.unsqueeze(-1), 0)

        return enc_output, enc_slf_attn


class ConvNorm(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=1, stride=1, padding=None, dilation=1,
                 bias=True, w_init_gain="linear"):
        super(ConvNorm, self).__init__()

        if padding is None:
            assert kernel_size % 2 == 1
            padding = int(dilation * (kernel_size - 1) / 2)

        self.conv = torch.nn.Conv1d(
            in_channels,
            out_channels,
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            bias=bias,
        )

    def forward(self, signal):
        conv_signal = self.conv(signal)

        return conv_signal


class PostNet(nn.Module):
    """
    PostNet: Five 1-d convolution with 512 channels and kernel size 5
    """

    def __init__(self, n_mel_channels=80, postnet_embedding_dim=512, postnet_kernel_size=5,
                 postnet_n_convolutions=5, dropout=0.5):
        super(PostNet, self).__init__()
        self.dropout = dropout
        self.convolutions = nn.ModuleList()

        self.convolutions.append(
            nn.Sequential(
                ConvNorm(
                    n_mel_channels,
                    postnet_embedding_dim,
                    kernel_size=postnet_kernel_size,
                    stride=1,
                    padding=int((postnet_kernel_size - 1) / 2),
                    dilation=1,
                    w_init_gain="tanh",
                ),
                nn.BatchNorm1d(postnet_embedding_dim),
            )
        )

        for i in range(1, postnet_n_convolutions - 1):
            self.convolutions.append(
                nn.Sequential(
                    ConvNorm(
                        postnet_embedding_dim,
                        postnet_embedding_dim,
                        kernel_size=postnet_kernel_size,
                        stride=1,
                        padding=int((postnet_kernel_size - 1) / 2),
                        dilation=1,
                        w_init_gain="tanh",
                    ),
                    nn.BatchNorm1d(postnet_embedding_dim),
                )
            )

        self.convolutions.append(
            nn.Sequential(
                ConvNorm(
                    postnet_embedding_dim,
                    n_mel_channels,
                    kernel_size=postnet_kernel_size,
                    stride=1,
                    padding=int((postnet_kernel_size - 1) / 2),
                    dilation=1,
                    w_init_gain="linear",
                ),
                nn.BatchNorm1d(n_mel_channels),
            )
        )

    def forward(self, x):
        x = x.contiguous().transpose(1, 2)

        for i in range(len(self.convolutions) - 1):
            x = F.dropout(torch.tanh(self.convolutions[i](x)), self.dropout, self.training)
        x = F.dropout(self.convolutions[-1](x), self.dropout, self.training)

        x = x.contiguous().transpose(1, 2)
        return x


# ---------------------------------------------------------------- transformer/Models.py
def get_sinusoid_encoding_table(n_position, d_hid, padding_idx=None):
    """ Sinusoid position encoding table """

    def cal_angle(position, hid_idx):
        return position / np.power(10000, 2 * (hid_idx // 2) / d_hid)

    def get_posi_angle_vec(position):
        return [cal_angle(position, hid_j) for hid_j in range(d_hid)]

    sinusoid_table = np.array(
        [get_posi_angle_vec(pos_i) for pos_i in range(n_position)]
    )

    sinusoid_table[:, 0::2] = np.sin(sinusoid_table[:, 0::2])  # dim 2i
    sinusoid_table[:, 1::2] = np.cos(sinusoid_table[:, 1::2])  # dim 2i+1

    if padding_idx is not None:
        # zero vector for padding dimension
        sinusoid_table[padding_idx] = 0.0

    return torch.FloatTensor(sinusoid_table)


class Encoder(nn.Module):
    """ Encoder """

    def __init__(self, config):
        super(Encoder, self).__init__()

        n_position = config["max_seq_len"] + 1
        n_src_vocab = len(symbols) + 1
        d_word_vec = config["transformer"]["encoder_hidden"]
        n_layers = config["transformer"]["encoder_layer"]
        n_head = config["transformer"]["encoder_head"]
        d_k = d_v = (
            config["transformer"]["encoder_hidden"]
            // config["transformer"]["encoder_head"]
        )
        d_model = config["transformer"]["encoder_hidden"]
        d_inner = config["transformer"]["conv_filter_size"]
        kernel_size = config["transformer"]["conv_kernel_size"]
        dropout = config["transformer"]["encoder_dropout"]

        self.max_seq_len = config["max_seq_len"]
        self.d_model = d_model

        self.src_word_emb = nn.Embedding(
            n_src_vocab, d_word_vec, padding_idx=PAD
        )
        self.position_enc = nn.Parameter(
            get_sinusoid_encoding_table(n_position, d_word_vec).unsqueeze(0),
            requires_grad=False,
        )

        self.layer_stack = nn.ModuleList(
            [
                FFTBlock(
                    d_model, n_head, d_k, d_v, d_inner, kernel_size, dropout=dropout
                )
                for _ in range(n_layers)
            ]
        )

    def forward(self, src_seq, mask, return_attns=False):

        enc_slf_attn_list = []
        batch_size, max_len = src_seq.shape[0], src_seq.shape[1]

        # -- Prepare masks
        slf_attn_mask = mask.unsqueeze(1).expand(-1, max_len, -1)

        # -- Forward
        if not self.training and src_seq.shape[1] > self.max_seq_len:
            enc_output = self.src_word_emb(src_seq) + get_sinusoid_encoding_table(
                src_seq.shape[1], self.d_model
            )[: src_seq.shape[1], :].unsqueeze(0).expand(batch_size, -1, -1).to(
                src_seq.device
            )
        else:
            enc_output = self.src_word_emb(src_seq) + self.position_enc[
                :, :max_len, :
            ].expand(batch_size, -1, -1)

        for enc_layer in self.layer_stack:
            enc_output, enc_slf_attn = enc_layer(
                enc_output, mask=mask, slf_attn_mask=slf_attn_mask
            )
            if return_attns:
                enc_slf_attn_list += [enc_slf_attn]

        return enc_output


class Decoder(nn.Module):
    """ Decoder """

    def __init__(self, config):
        super(Decoder, self).__init__()

        n_position = config["max_seq_len"] + 1
        d_word_vec = config["transformer"]["decoder_hidden"]
        n_layers = config["transformer"]["decoder_layer"]
        n_head = config["transformer"]["decoder_head"]
        d_k = d_v = (
            config["transformer"]["decoder_hidden"]
            // config["transformer"]["decoder_head"]
        )
        d_model = config["transformer"]["decoder_hidden"]
        d_inner = config["transformer"]["conv_filter_size"]
        kernel_size = config["transformer"]["conv_kernel_size"]
        dropout = config["transformer"]["decoder_dropout"]

        self.max_seq_len = config["max_seq_len"]
        self.d_model = d_model

        self.position_enc = nn.Parameter(
            get_sinusoid_encoding_table(n_position, d_word_vec).unsqueeze(0),
            requires_grad=False,
        )

        self.layer_stack = nn.ModuleList(
            [
                FFTBlock(
                    d_model, n_head, d_k, d_v, d_inner, kernel_size, dropout=dropout
                )
                for _ in range(n_layers)
            ]
        )

    def forward(self, enc_seq, mask, return_attns=False):

        dec_slf_attn_list = []
        batch_size, max_len = enc_seq.shape[0], enc_seq.shape[1]

        # -- Forward
        if not self.training and enc_seq.shape[1] > self.max_seq_len:
            # -- Prepare masks
            slf_attn_mask = mask.unsqueeze(1).expand(-1, max_len, -1)
            dec_output = enc_seq + get_sinusoid_encoding_table(
                enc_seq.shape[1], self.d_model
            )[: enc_seq.shape[1], :].unsqueeze(0).expand(batch_size, -1, -1).to(
                enc_seq.device
            )
        else:
            max_len = min(max_len, self.max_seq_len)

            # -- Prepare masks
            slf_attn_mask = mask.unsqueeze(1).expand(-1, max_len, -1)
            dec_output = enc_seq[:, :max_len, :] + self.position_enc[
                :, :max_len, :
            ].expand(batch_size, -1, -1)
            mask = mask[:, :max_len]
            slf_attn_mask = slf_attn_mask[:, :, :max_len]

        for dec_layer in self.layer_stack:
            dec_output, dec_slf_attn = dec_layer(
                dec_output, mask=mask, slf_attn_mask=slf_attn_mask
            )
            if return_attns:
                dec_slf_attn_list += [dec_slf_attn]

        return dec_output, mask


# ---------------------------------------------------------------- model/modules.py
class VarianceAdaptor(nn.Module):
    """Variance Adaptor"""

    def __init__(self, preprocess_config, model_config):
        super(VarianceAdaptor, self).__init__()
        self.duration_predictor = VariancePredictor(model_config)
        self.length_regulator = LengthRegulator()
        self.pitch_predictor = VariancePredictor(model_config)
        self.energy_predictor = VariancePredictor(model_config)

        self.pitch_feature_level = preprocess_config["preprocessing"]["pitch"]["feature"]
        self.energy_feature_level = preprocess_config["preprocessing"]["energy"]["feature"]
        assert self.pitch_feature_level in ["phoneme_level", "frame_level"]
        assert self.energy_feature_level in ["phoneme_level", "frame_level"]

        pitch_quantization = model_config["variance_embedding"]["pitch_quantization"]
        energy_quantization = model_config["variance_embedding"]["energy_quantization"]
        n_bins = model_config["variance_embedding"]["n_bins"]
        assert pitch_quantization in ["linear", "log"]
        assert energy_quantization in ["linear", "log"]
        with open(
            os.path.join(preprocess_config["path"]["preprocessed_path"], "stats.json")
        ) as f:
            stats = json.load(f)
            pitch_min, pitch_max = stats["pitch"][:2]
            energy_min, energy_max = stats["energy"][:2]

        if pitch_quantization == "log":
            self.pitch_bins = nn.Parameter(
                torch.exp(
                    torch.linspace(np.log(pitch_min), np.log(pitch_max), n_bins - 1)
                ),
                requires_grad=False,
            )
        else:
            self.pitch_bins = nn.Parameter(
                torch.linspace(pitch_min, pitch_max, n_bins - 1),
                requires_grad=False,
            )
        if energy_quantization == "log":
            self.energy_bins = nn.Parameter(
                torch.exp(
                    torch.linspace(np.log(energy_min), np.log(energy_max), n_bins - 1)
                ),
                requires_grad=False,
            )
        else:
            self.energy_bins = nn.Parameter(
                torch.linspace(energy_min, energy_max, n_bins - 1),
                requires_grad=False,
            )

        self.pitch_embedding = nn.Embedding(
            n_bins, model_config["transformer"]["encoder_hidden"]
        )
        self.energy_embedding = nn.Embedding(
            n_bins, model_config["transformer"]["encoder_hidden"]
        )

    def get_pitch_embedding(self, x, target, mask, control):
        prediction = self.pitch_predictor(x, mask)
        if target is not None:
            embedding = self.pitch_embedding(torch.bucketize(target, self.pitch_bins))
        else:
            prediction = prediction * control
            embedding = self.pitch_embedding(
                torch.bucketize(prediction, self.pitch_bins)
            )
        return prediction, embedding

    def get_energy_embedding(self, x, target, mask, control):
        prediction = self.energy_predictor(x, mask)
        if target is not None:
            embedding = self.energy_embedding(torch.bucketize(target, self.energy_bins))
        else:
            prediction = prediction * control
            embedding = self.energy_embedding(
                torch.bucketize(prediction, self.energy_bins)
            )
        return prediction, embedding

    def forward(self, x, src_mask, mel_mask=None, max_len=None, pitch_target=None,
                energy_target=None, duration_target=None, p_control=1.0, e_control=1.0,
                d_control=1.0):

        log_duration_prediction = self.duration_predictor(x, src_mask)
        if self.pitch_feature_level == "phoneme_level":
            pitch_prediction, pitch_embedding = self.get_pitch_embedding(
                x, pitch_target, src_mask, p_control
            )
            x = x + pitch_embedding
        if self.energy_feature_level == "phoneme_level":
            energy_prediction, energy_embedding = self.get_energy_embedding(
                x, energy_target, src_mask, p_control
            )
            x = x + energy_embedding

        if duration_target is not None:
            x, mel_len = self.length_regulator(x, duration_target, max_len)
            duration_rounded = duration_target
        else:
            duration_rounded = torch.clamp(
                (torch.round(torch.exp(log_duration_prediction) - 1) * d_control),
                min=0,
            )
            x, mel_len = self.length_regulator(x, duration_rounded, max_len)
            mel_mask = get_mask_from_lengths(mel_len)

        if self.pitch_feature_level == "frame_level":
            pitch_prediction, pitch_embedding = self.get_pitch_embedding(
                x, pitch_target, mel_mask, p_control
            )
            x = x + pitch_embedding
        if self.energy_feature_level == "frame_level":
            energy_prediction, energy_embedding = self.get_energy_embedding(
                x, energy_target, mel_mask, p_control
            )
            x = x + energy_embedding

        return (
            x,
            pitch_prediction,
            energy_prediction,
            log_duration_prediction,
            duration_rounded,
            mel_len,
            mel_mask,
        )


class LengthRegulator(nn.Module):
    """Length Regulator"""

    def __init__(self):
        super(LengthRegulator, self).__init__()

    def LR(self, x, duration, max_len):
        output = list()
        mel_len = list()
        for batch, expand_target in zip(x, duration):
            expanded = self.expand(batch, expand_target)
            output.append(expanded)
            mel_len.append(expanded.shape[0])

        if max_len is not None:
            output = pad(output, max_len)
        else:
            output = pad(output)

        return output, torch.LongTensor(mel_len).to(device)

    def expand(self, batch, predicted):
        out = list()

        for i, vec in enumerate(batch):
            expand_size = predicted[i].item()
            out.append(vec.expand(max(int(expand_size), 0), -1))
        out = torch.cat(out, 0)

        return out

    def forward(self, x, duration, max_len):
        output, mel_len = self.LR(x, duration, max_len)
        return output, mel_len


class VariancePredictor(nn.Module):
    """Duration, Pitch and Energy Predictor"""

    def __init__(self, model_config):
        super(VariancePredictor, self).__init__()

        self.input_size = model_config["transformer"]["encoder_hidden"]
        self.filter_size = model_config["variance_predictor"]["filter_size"]
        self.kernel = model_config["variance_predictor"]["kernel_size"]
        self.conv_output_size = model_config["variance_predictor"]["filter_size"]
        self.dropout = model_config["variance_predictor"]["dropout"]

        self.conv_layer = nn.Sequential(
            OrderedDict(
                [
                    (
                        "conv1d_1",
                        Conv(
                            self.input_size,
                            self.filter_size,
                            kernel_size=self.kernel,
                            padding=(self.kernel - 1) // 2,
                        ),
                    ),
                    ("relu_1", nn.ReLU()),
                    ("layer_norm_1", nn.LayerNorm(self.filter_size)),
                    ("dropout_1", nn.Dropout(self.dropout)),
                    (
                        "conv1d_2",
                        Conv(
                            self.filter_size,
                            self.filter_size,
                            kernel_size=self.kernel,
                            padding=1,
                        ),
                    ),
                    ("relu_2", nn.ReLU()),
                    ("layer_norm_2", nn.LayerNorm(self.filter_size)),
                    ("dropout_2", nn.Dropout(self.dropout)),
                ]
            )
        )

        self.linear_layer = nn.Linear(self.conv_output_size, 1)

    def forward(self, encoder_output, mask):
        out = self.conv_layer(encoder_output)
        out = self.linear_layer(out)
        out = out.squeeze(-1)

        if mask is not None:
            out = out.masked_fill(mask, 0.0)

        return out


class Conv(nn.Module):
    """
    Convolution Module
    """

    def __init__(self, in_channels, out_channels, kernel_size=1, stride=1, padding=0, dilation=1,
                 bias=True, w_init="linear"):
        super(Conv, self).__init__()

        self.conv = nn.Conv1d(
            in_channels,
            out_channels,
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            dilation=dilation,
            bias=bias,
        )

    def forward(self, x):
        x = x.contiguous().transpose(1, 2)
        x = self.conv(x)
        x = x.contiguous().transpose(1, 2)

        return x


# ---------------------------------------------------------------- model/fastspeech2.py
class FastSpeech2(nn.Module):
    """ FastSpeech2 """

    def __init__(self, preprocess_config, model_config):
        super(FastSpeech2, self).__init__()
        self.model_config = model_config

        self.encoder = Encoder(model_config)
        self.variance_adaptor = VarianceAdaptor(preprocess_config, model_config)
        self.decoder = Decoder(model_config)
        self.mel_linear = nn.Linear(
            model_config["transformer"]["decoder_hidden"],
            preprocess_config["preprocessing"]["mel"]["n_mel_channels"],
        )
        self.postnet = PostNet(n_mel_channels=10, postnet_embedding_dim=16,
                               dropout=model_config["postnet"]["dropout"])

        self.speaker_emb = None
        if model_config["multi_speaker"]:
            with open(
                os.path.join(
                    preprocess_config["path"]["preprocessed_path"], "speakers.json"
                ),
                "r",
            ) as f:
                n_speaker = len(json.load(f))
            self.speaker_emb = nn.Embedding(
                n_speaker,
                model_config["transformer"]["encoder_hidden"],
            )

    def forward(self, speakers, texts, src_lens, max_src_len, mels=None, mel_lens=None,
                max_mel_len=None, p_targets=None, e_targets=None, d_targets=None,
                p_control=1.0, e_control=1.0, d_control=1.0):
        src_masks = get_mask_from_lengths(src_lens, max_src_len)
        mel_masks = (
            get_mask_from_lengths(mel_lens, max_mel_len)
            if mel_lens is not None
            else None
        )

        output = self.encoder(texts, src_masks)

        if self.speaker_emb is not None:
            output = output + self.speaker_emb(speakers).unsqueeze(1).expand(
                -1, max_src_len, -1
            )

        (
            output,
            p_predictions,
            e_predictions,
            log_d_predictions,
            d_rounded,
            mel_lens,
            mel_masks,
        ) = self.variance_adaptor(
            output,
            src_masks,
            mel_masks,
            max_mel_len,
            p_targets,
            e_targets,
            d_targets,
            p_control,
            e_control,
            d_control,
        )

        output, mel_masks = self.decoder(output, mel_masks)
        output = self.mel_linear(output)

        postnet_output = self.postnet(output) + output

        return (
            output,
            postnet_output,
            p_predictions,
            e_predictions,
            log_d_predictions,
            d_rounded,
            src_masks,
            mel_masks,
            src_lens,
            mel_lens,
        )


# ---------------------------------------------------------------- model/loss.py
class FastSpeech2Loss(nn.Module):
    """ FastSpeech2 Loss """

    def __init__(self, preprocess_config, model_config):
        super(FastSpeech2Loss, self).__init__()
        self.pitch_feature_level = preprocess_config["preprocessing"]["pitch"]["feature"]
        self.energy_feature_level = preprocess_config["preprocessing"]["energy"]["feature"]
        self.mse_loss = nn.MSELoss()
        self.mae_loss = nn.L1Loss()

    def forward(self, inputs, predictions):
        (
            mel_targets,
            _,
            _,
            pitch_targets,
            energy_targets,
            duration_targets,
        ) = inputs[6:]
        (
            mel_predictions,
            postnet_mel_predictions,
            pitch_predictions,
            energy_predictions,
            log_duration_predictions,
            _,
            src_masks,
            mel_masks,
            _,
            _,
        ) = predictions
        src_masks = ~src_masks
        mel_masks = ~mel_masks
        log_duration_targets = torch.log(duration_targets.float() + 1)
        mel_targets = mel_targets[:, : mel_masks.shape[1], :]
        mel_masks = mel_masks[:, :mel_masks.shape[1]]

        log_duration_targets.requires_grad = False
        pitch_targets.requires_grad = False
        energy_targets.requires_grad = False
        mel_targets.requires_grad = False

        if self.pitch_feature_level == "phoneme_level":
            pitch_predictions = pitch_predictions.masked_select(src_masks)
            pitch_targets = pitch_targets.masked_select(src_masks)
        elif self.pitch_feature_level == "frame_level":
            pitch_predictions = pitch_predictions.masked_select(mel_masks)
            pitch_targets = pitch_targets.masked_select(mel_masks)

        if self.energy_feature_level == "phoneme_level":
            energy_predictions = energy_predictions.masked_select(src_masks)
            energy_targets = energy_targets.masked_select(src_masks)
        if self.energy_feature_level == "frame_level":
            energy_predictions = energy_predictions.masked_select(mel_masks)
            energy_targets = energy_targets.masked_select(mel_masks)

        log_duration_predictions = log_duration_predictions.masked_select(src_masks)
        log_duration_targets = log_duration_targets.masked_select(src_masks)

        mel_predictions = mel_predictions.masked_select(mel_masks.unsqueeze(-1))
        postnet_mel_predictions = postnet_mel_predictions.masked_select(
            mel_masks.unsqueeze(-1)
        )
        mel_targets = mel_targets.masked_select(mel_masks.unsqueeze(-1))

        mel_loss = self.mae_loss(mel_predictions, mel_targets)
        postnet_mel_loss = self.mae_loss(postnet_mel_predictions, mel_targets)

        pitch_loss = self.mse_loss(pitch_predictions, pitch_targets)
        energy_loss = self.mse_loss(energy_predictions, energy_targets)
        duration_loss = self.mse_loss(log_duration_predictions, log_duration_targets)

        total_loss = (
            mel_loss + postnet_mel_loss + duration_loss + pitch_loss + energy_loss
        )

        return (
            total_loss,
            mel_loss,
            postnet_mel_loss,
            pitch_loss,
            energy_loss,
            duration_loss,
        )


# ---------------------------------------------------------------- model/optimizer.py
class ScheduledOptim:
    """ A simple wrapper class for learning rate scheduling """

    def __init__(self, model, train_config, model_config, current_step):

        self._optimizer = torch.optim.Adam(
            model.parameters(),
            betas=train_config["optimizer"]["betas"],
            eps=train_config["optimizer"]["eps"],
            weight_decay=train_config["optimizer"]["weight_decay"],
        )
        self.n_warmup_steps = train_config["optimizer"]["warm_up_step"]
        self.anneal_steps = train_config["optimizer"]["anneal_steps"]
        self.anneal_rate = train_config["optimizer"]["anneal_rate"]
        self.current_step = current_step
        self.init_lr = np.power(model_config["transformer"]["encoder_hidden"], -0.5)

    def step_and_update_lr(self):
        self._update_learning_rate()
        self._optimizer.step()

    def zero_grad(self):
        # print(self.init_lr)
        self._optimizer.zero_grad()

    def load_state_dict(self, path):
        self._optimizer.load_state_dict(path)

    def _get_lr_scale(self):
        lr = np.min(
            [
                np.power(self.current_step, -0.5),
                np.power(self.n_warmup_steps, -1.5) * self.current_step,
            ]
        )
        for s in self.anneal_steps:
            if self.current_step > s:
                lr = lr * self.anneal_rate
        return lr

    def _update_learning_rate(self):
        """ Learning rate scheduling per step """
        self.current_step += 1
        lr = self.init_lr * self._get_lr_scale()

        for param_group in self._optimizer.param_groups:
            param_group["lr"] = lr


# ---------------------------------------------------------------- utils/model.py
def get_model(args, configs, device, train=False):
    (preprocess_config, model_config, train_config) = configs

    model = FastSpeech2(preprocess_config, model_config).to(device)
    if args.restore_step:
        ckpt_path = os.path.join(
            train_config["path"]["ckpt_path"],
            "{}.pth.tar".format(args.restore_step),
        )
        ckpt = torch.load(ckpt_path)
        model.load_state_dict(ckpt["model"])

    if train:
        scheduled_optim = ScheduledOptim(
            model, train_config, model_config, args.restore_step
        )
        if args.restore_step:
            scheduled_optim.load_state_dict(ckpt["optimizer"])
        model.train()
        return model, scheduled_optim

    model.eval()
    model.requires_grad_ = False
    return model


# ---------------------------------------------------------------- data
def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            if "layer_norm" in name or name.endswith(("1.weight", "1.bias")) and "convolutions" in name:
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(torch.from_numpy((base + r.normal(0, 0.1, tuple(p.shape))).astype(np.float32)))
            else:
                fan_in = int(np.prod(p.shape[1:])) if p.dim() > 1 else 4
                p.copy_(torch.from_numpy(r.normal(0, 1 / np.sqrt(fan_in), tuple(p.shape)).astype(np.float32)))


rng = np.random.default_rng(0)
n_mel = preprocess_config["preprocessing"]["mel"]["n_mel_channels"]
utterances = []
for k in range(6):
    n_ph = int(rng.integers(3, 8))
    text = rng.integers(1, len(symbols) + 1, n_ph)
    duration = rng.integers(0, 4, n_ph)
    duration[0] = max(duration[0], 1)
    mel = rng.normal(0, 1, (int(duration.sum()), n_mel)).astype(np.float32)
    pitch = rng.normal(0, 1, n_ph).astype(np.float32)
    energy = rng.normal(0.5, 0.5, n_ph).clip(0.05, None).astype(np.float32)
    utterances.append({"id": f"LJ{k:03d}", "speaker": k % 2, "text": text, "raw_text": "x" * n_ph,
                       "mel": mel, "pitch": pitch, "energy": energy, "duration": duration})
with open(os.path.join(preprocess_config["path"]["preprocessed_path"], "stats.json"), "w") as f:
    all_p = np.concatenate([u["pitch"] for u in utterances])
    all_e = np.concatenate([u["energy"] for u in utterances])
    f.write(json.dumps({"pitch": [float(all_p.min()), float(all_p.max()), 0.0, 1.0],
                        "energy": [float(all_e.min()), float(all_e.max()), 0.5, 0.5]}))
with open(os.path.join(preprocess_config["path"]["preprocessed_path"], "speakers.json"), "w") as f:
    f.write(json.dumps({"LJSpeech": 0, "VCTK_p225": 1}))


def reprocess(data, idxs):
    ids = [data[idx]["id"] for idx in idxs]
    speakers = [data[idx]["speaker"] for idx in idxs]
    texts = [data[idx]["text"] for idx in idxs]
    raw_texts = [data[idx]["raw_text"] for idx in idxs]
    mels = [data[idx]["mel"] for idx in idxs]
    pitches = [data[idx]["pitch"] for idx in idxs]
    energies = [data[idx]["energy"] for idx in idxs]
    durations = [data[idx]["duration"] for idx in idxs]

    text_lens = np.array([text.shape[0] for text in texts])
    mel_lens = np.array([mel.shape[0] for mel in mels])

    speakers = np.array(speakers)
    texts = pad_1D(texts)
    mels = pad_2D(mels)
    pitches = pad_1D(pitches)
    energies = pad_1D(energies)
    durations = pad_1D(durations)

    return (ids, raw_texts, speakers, texts, text_lens, max(text_lens), mels, mel_lens, max(mel_lens),
            pitches, energies, durations)


def collate_fn(data):
    data_size = len(data)
    len_arr = np.array([d["text"].shape[0] for d in data])
    idx_arr = np.argsort(-len_arr)
    tail = idx_arr[len(idx_arr) - (len(idx_arr) % data_size):]
    idx_arr = idx_arr[: len(idx_arr) - (len(idx_arr) % data_size)]
    idx_arr = idx_arr.reshape((-1, data_size)).tolist()
    if len(tail) > 0:
        idx_arr += [tail.tolist()]
    output = list()
    for idx in idx_arr:
        output.append(reprocess(data, idx))
    return output


loader = [collate_fn(utterances[b:b + 3]) for b in range(0, 6, 3)]
b0 = loader[0][0]
print("batch", b0[0], b0[4].tolist(), type(b0[5]).__name__, b0[5], b0[7].tolist(), b0[8], b0[3].shape, b0[6].shape)

# ---------------------------------------------------------------- pieces on their own
lengths = torch.tensor([3, 5, 1])
print("mask", get_mask_from_lengths(lengths).int().tolist(), get_mask_from_lengths(lengths, np.int64(6)).shape)
table = get_sinusoid_encoding_table(6, 4, padding_idx=0)
print("sinusoid", table.dtype, fmt(table[1]), fmt(table[0]))
attn = ScaledDotProductAttention(temperature=np.power(4, 0.5))
q = torch.from_numpy(rng.normal(0, 1, (2, 3, 4)).astype(np.float32))
m = torch.tensor([[False, False, True]]).expand(3, -1).unsqueeze(0).repeat(2, 1, 1)
o, a = attn(q, q, q, mask=m)
print("attention", type(attn.temperature).__name__, fmt(o), fmt(a[0, 1], 3))
print("bucketize", torch.bucketize(torch.tensor([[-2.0, 0.0, 0.5], [1.0, 3.0, 0.25]]),
                                    torch.linspace(-1.0, 1.0, 5)).tolist(),
      torch.bucketize(torch.tensor([0.5]), torch.tensor([0.0, 0.5, 1.0]), right=True).tolist())
lr = LengthRegulator()
x = torch.arange(12.0).view(2, 3, 2)
out, mel_len = lr(x, torch.tensor([[1, 0, 2], [3, 1, 0]]), None)
print("length regulator", tuple(out.shape), mel_len, mel_len.dtype, out[0].tolist(), out[1, :, 1].tolist())
out, mel_len = lr(x, torch.tensor([[1.4, -0.5, 2.0], [0.0, 1.0, 0.0]]), 5)
print("length regulator float / max_len", tuple(out.shape), mel_len.tolist(), out[1].tolist())
print("pad 1D", pad([torch.ones(2), torch.ones(4)]).tolist())

# ---------------------------------------------------------------- the model
torch.manual_seed(0)
args = Args()
configs = (preprocess_config, model_config, train_config)
model, optimizer = get_model(args, configs, device, train=True)
load_numpy(model, 1)
va = model.variance_adaptor
print("bins", fmt(va.pitch_bins, 7), fmt(va.energy_bins, 7), va.pitch_bins.requires_grad,
      type(model.encoder.position_enc).__name__)
model = nn.DataParallel(model)
model.train()
num_param = get_param_num(model)
print("Number of FastSpeech2 Parameters:", num_param)
Loss = FastSpeech2Loss(preprocess_config, model_config).to(device)
print("init_lr", type(optimizer.init_lr).__name__, f"{optimizer.init_lr:.4f}",
      len(optimizer._optimizer.param_groups[0]["params"]))

# one pass with the PostNet's 0.5 dropout, as the repo has it
rng_net = PostNet(n_mel_channels=10, postnet_embedding_dim=16)
rng_net.train()
print("postnet dropout", tuple(rng_net(torch.ones(2, 7, 10)).shape))

step = 1
total_step = train_config["step"]["total_step"]
log_step = train_config["step"]["log_step"]
save_step = train_config["step"]["save_step"]
os.makedirs(train_config["path"]["ckpt_path"], exist_ok=True)
grad_acc_step = train_config["optimizer"]["grad_acc_step"]
grad_clip_thresh = train_config["optimizer"]["grad_clip_thresh"]
done = False
while not done:
    for batchs in loader:
        for batch in batchs:
            batch = to_device(batch, device)

            # Forward
            output = model(*(batch[2:]))

            # Cal Loss
            losses = Loss(batch, output)
            total_loss = losses[0]

            # Backward
            total_loss = total_loss / grad_acc_step
            total_loss.backward()
            if step % grad_acc_step == 0:
                # Clipping gradients to avoid gradient explosion
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip_thresh)

                # Update weights
                optimizer.step_and_update_lr()
                optimizer.zero_grad()

            if step % log_step == 0:
                losses = [l.item() for l in losses]
                message1 = "Step {}/{}, ".format(step, total_step)
                message2 = "Total Loss: {:.4f}, Mel Loss: {:.4f}, Mel PostNet Loss: {:.4f}, Pitch Loss: {:.4f}, " \
                           "Energy Loss: {:.4f}, Duration Loss: {:.4f}".format(*losses)
                print(message1 + message2, "lr", f"{optimizer._optimizer.param_groups[0]['lr']:.5f}")

            if step % save_step == 0 or step == 1:
                torch.save(
                    {
                        "model": model.module.state_dict(),
                        "optimizer": optimizer._optimizer.state_dict(),
                    },
                    os.path.join(
                        train_config["path"]["ckpt_path"],
                        "{}.pth.tar".format(step),
                    ),
                )

            if step == total_step:
                done = True
                break
            step += 1
        if done:
            break

print("output shapes", [tuple(t.shape) if torch.is_tensor(t) else t for t in output])
print("mel_lens", output[9].tolist(), output[7].sum(1).tolist())
inner = model.module
print("params", fmt(inner.encoder.src_word_emb.weight[0]), fmt(inner.encoder.src_word_emb.weight[3]),
      fmt(inner.variance_adaptor.pitch_embedding.weight[2]), fmt(inner.postnet.convolutions[1][1].running_var))
print("frozen untouched", torch.equal(inner.encoder.position_enc[0, 1], get_sinusoid_encoding_table(41, 16)[1]),
      inner.encoder.position_enc.grad is None, len(optimizer._optimizer.state))

# synthesis (synthesize.py --restore_step 1): durations predicted, controls.
# (From the first checkpoint: later ones hold the PostNet's conv biases and
# the keys' biases, whose gradients are rounding noise, as BatchNorm and the
# softmax cancel them, which Adam's normalization turns into lr-sized steps,
# in torch as here; eval-mode BatchNorm would show them.)
# (resuming training from step 3 reads the optimizer's state_dict, whose lr
# ScheduledOptim computed with numpy: torch.load's weights_only refuses it)
args.restore_step = 3
try:
    get_model(args, configs, device, train=True)
except pickle.UnpicklingError as e:
    print("resume from step 3: UnpicklingError", "GLOBAL numpy._core.multiarray.scalar" in str(e))
args.restore_step = 1
synth_model = get_model(args, configs, device, train=False)
print("restored", synth_model.training, synth_model.requires_grad_,
      sorted(os.listdir(train_config["path"]["ckpt_path"])))
model.train()
try:
    synth_model.requires_grad_(False)
except TypeError as e:
    print("TypeError", e)
with torch.no_grad():
    ids, raw_texts, speakers, texts, src_lens, max_src_len = to_device(loader[1][0][:6], device)
    output = synth_model(speakers, texts, src_lens, max_src_len, p_control=1.2, e_control=1.0, d_control=1.5)
print("synth", output[5].tolist(), output[9].tolist(), tuple(output[1].shape), fmt(output[1][0, 0]))
if output[7] is not None and output[9].max().item() > 0:
    mel_len = output[9][0].item()
    mel_prediction = output[1][0, :mel_len].detach().transpose(0, 1)
    print("synth mel", tuple(mel_prediction.shape), output[7].shape)


# one training step under torch.compile against the same step eagerly
def train_step(batch):
    output = model(*(batch[2:]))
    losses = Loss(batch, output)
    total_loss = losses[0]
    total_loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip_thresh)
    optimizer.step_and_update_lr()
    optimizer.zero_grad()
    return total_loss


model.train()
state = copy.deepcopy(model.state_dict())
opt_state, cur = copy.deepcopy(optimizer._optimizer.state_dict()), optimizer.current_step
batch = to_device(loader[0][0], device)
eager = [train_step(batch).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
optimizer.current_step = cur
cstep = torch.compile(train_step)
compiled = [cstep(batch).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])


def noisy(k):
    # (see the synthesis above: parameters stepped by Adam on rounding noise)
    return k.endswith("w_ks.bias") or "postnet" in k and k.endswith(("0.conv.bias", "running_mean"))


print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after
          if not noisy(k)))
