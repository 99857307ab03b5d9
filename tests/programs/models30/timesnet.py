# TimesNet long-term forecasting the way thuml/Time-Series-Library writes it:
# models/TimesNet.py (FFT_for_Period: torch.fft.rfft(x, dim=1), the builtin
# abs of the complex spectrum, abs(xf).mean(0).mean(-1), frequency_list[0] =
# 0, torch.topk, top_list.detach().cpu().numpy() and the numpy periods
# x.shape[1] // top_list used as shapes; TimesBlock: zero padding to a
# multiple of the period by torch.zeros + torch.cat, reshape(B, length //
# period, period, N).permute(0, 3, 1, 2).contiguous(), the Inception convs,
# F.softmax(period_weight, dim=1).unsqueeze(1).unsqueeze(1).repeat(1, T, N,
# 1), torch.sum(res * period_weight, -1), the residual; Model.forecast: the
# Non-stationary Transformer normalization with means.detach() and
# torch.sqrt(torch.var(x_enc, dim=1, keepdim=True, unbiased=False) + 1e-5),
# predict_linear over the time axis, the shared LayerNorm, the
# de-normalization by stdev[:, 0, :].unsqueeze(1).repeat(...)),
# layers/Conv_Blocks.py (Inception_Block_V1: Conv2d kernels 1, 3, 5, ...
# averaged by torch.stack(res_list, dim=-1).mean(-1), kaiming_normal_
# fan_out init), layers/Embed.py (TokenEmbedding's circular-padded Conv1d
# with kaiming_normal_(mode='fan_in', nonlinearity='leaky_relu'), the
# sinusoidal PositionalEmbedding buffer with its `pe.require_grad = False`
# typo, FixedEmbedding / TemporalEmbedding, TimeFeatureEmbedding,
# DataEmbedding), utils/tools.py (adjust_learning_rate 'type1' writing
# param_group['lr'], EarlyStopping saving checkpoint.pth with torch.save)
# and exp/exp_long_term_forecasting.py (the decoder input of zeros_like +
# cat, f_dim, nn.MSELoss, Adam, vali's np.average over a list of 0-d
# tensors, the best checkpoint loaded back with torch.load). Changes for a
# CPU test: a synthetic three-channel series of two periods with hourly time
# features computed in numpy (no pandas), StandardScaler in numpy, small
# sizes (seq_len 24, pred_len 12, d_model 8, 3 inception kernels), dropout 0
# (the RNG streams differ), unshuffled loaders, a few epochs; then one
# training step under torch.compile against the same step eagerly (the
# numpy periods break the graph in torch.compile, as here: the step runs
# eagerly).
import argparse
import copy
import math
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, Dataset


# ---------------------------------------------------------------- layers/Conv_Blocks.py
class Inception_Block_V1(nn.Module):
    def __init__(self, in_channels, out_channels, num_kernels=6, init_weight=True):
        super(Inception_Block_V1, self).__init__()
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.num_kernels = num_kernels
        kernels = []
        for i in range(self.num_kernels):
            kernels.append(nn.Conv2d(in_channels, out_channels, kernel_size=2 * i + 1, padding=i))
        self.kernels = nn.ModuleList(kernels)
        if init_weight:
            self._initialize_weights()

    def _initialize_weights(self):
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)

    def forward(self, x):
        res_list = []
        for i in range(self.num_kernels):
            res_list.append(self.kernels[i](x))
        res = torch.stack(res_list, dim=-1).mean(-1)
        return res


# ---------------------------------------------------------------- layers/Embed.py
class PositionalEmbedding(nn.Module):
    def __init__(self, d_model, max_len=5000):
        super(PositionalEmbedding, self).__init__()
        # Compute the positional encodings once in log space.
        pe = torch.zeros(max_len, d_model).float()
        pe.require_grad = False

        position = torch.arange(0, max_len).float().unsqueeze(1)
        div_term = (torch.arange(0, d_model, 2).float()
                    * -(math.log(10000.0) / d_model)).exp()

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
                                   kernel_size=3, padding=padding, padding_mode='circular', bias=False)
        for m in self.modules():
            if isinstance(m, nn.Conv1d):
                nn.init.kaiming_normal_(
                    m.weight, mode='fan_in', nonlinearity='leaky_relu')

    def forward(self, x):
        x = self.tokenConv(x.permute(0, 2, 1)).transpose(1, 2)
        return x


class FixedEmbedding(nn.Module):
    def __init__(self, c_in, d_model):
        super(FixedEmbedding, self).__init__()

        w = torch.zeros(c_in, d_model).float()
        w.require_grad = False

        position = torch.arange(0, c_in).float().unsqueeze(1)
        div_term = (torch.arange(0, d_model, 2).float()
                    * -(math.log(10000.0) / d_model)).exp()

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
        minute_x = self.minute_embed(x[:, :, 4]) if hasattr(
            self, 'minute_embed') else 0.
        hour_x = self.hour_embed(x[:, :, 3])
        weekday_x = self.weekday_embed(x[:, :, 2])
        day_x = self.day_embed(x[:, :, 1])
        month_x = self.month_embed(x[:, :, 0])

        return hour_x + weekday_x + day_x + month_x + minute_x


class TimeFeatureEmbedding(nn.Module):
    def __init__(self, d_model, embed_type='timeF', freq='h'):
        super(TimeFeatureEmbedding, self).__init__()

        freq_map = {'h': 4, 't': 5, 's': 6,
                    'm': 1, 'a': 1, 'w': 2, 'd': 3, 'b': 3}
        d_inp = freq_map[freq]
        self.embed = nn.Linear(d_inp, d_model, bias=False)

    def forward(self, x):
        return self.embed(x)


class DataEmbedding(nn.Module):
    def __init__(self, c_in, d_model, embed_type='fixed', freq='h', dropout=0.1):
        super(DataEmbedding, self).__init__()

        self.value_embedding = TokenEmbedding(c_in=c_in, d_model=d_model)
        self.position_embedding = PositionalEmbedding(d_model=d_model)
        self.temporal_embedding = TemporalEmbedding(d_model=d_model, embed_type=embed_type,
                                                    freq=freq) if embed_type != 'timeF' else TimeFeatureEmbedding(
            d_model=d_model, embed_type=embed_type, freq=freq)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x, x_mark):
        if x_mark is None:
            x = self.value_embedding(x) + self.position_embedding(x)
        else:
            x = self.value_embedding(
                x) + self.temporal_embedding(x_mark) + self.position_embedding(x)
        return self.dropout(x)


# ---------------------------------------------------------------- models/TimesNet.py
def FFT_for_Period(x, k=2):
    # [B, T, C]
    xf = torch.fft.rfft(x, dim=1)
    # find period by amplitudes
    frequency_list = abs(xf).mean(0).mean(-1)
    frequency_list[0] = 0
    _, top_list = torch.topk(frequency_list, k)
    top_list = top_list.detach().cpu().numpy()
    period = x.shape[1] // top_list
    return period, abs(xf).mean(-1)[:, top_list]


class TimesBlock(nn.Module):
    def __init__(self, configs):
        super(TimesBlock, self).__init__()
        self.seq_len = configs.seq_len
        self.pred_len = configs.pred_len
        self.k = configs.top_k
        # parameter-efficient design
        self.conv = nn.Sequential(
            Inception_Block_V1(configs.d_model, configs.d_ff,
                               num_kernels=configs.num_kernels),
            nn.GELU(),
            Inception_Block_V1(configs.d_ff, configs.d_model,
                               num_kernels=configs.num_kernels)
        )

    def forward(self, x):
        B, T, N = x.size()
        period_list, period_weight = FFT_for_Period(x, self.k)

        res = []
        for i in range(self.k):
            period = period_list[i]
            # padding
            if (self.seq_len + self.pred_len) % period != 0:
                length = (
                                 ((self.seq_len + self.pred_len) // period) + 1) * period
                padding = torch.zeros([x.shape[0], (length - (self.seq_len + self.pred_len)), x.shape[2]]).to(x.device)
                out = torch.cat([x, padding], dim=1)
            else:
                length = (self.seq_len + self.pred_len)
                out = x
            # reshape
            out = out.reshape(B, length // period, period,
                              N).permute(0, 3, 1, 2).contiguous()
            # 2D conv: from 1d Variation to 2d Variation
            out = self.conv(out)
            # reshape back
            out = out.permute(0, 2, 3, 1).reshape(B, -1, N)
            res.append(out[:, :(self.seq_len + self.pred_len), :])
        res = torch.stack(res, dim=-1)
        # adaptive aggregation
        period_weight = F.softmax(period_weight, dim=1)
        period_weight = period_weight.unsqueeze(
            1).unsqueeze(1).repeat(1, T, N, 1)
        res = torch.sum(res * period_weight, -1)
        # residual connection
        res = res + x
        return res


class Model(nn.Module):
    """
    Paper link: https://openreview.net/pdf?id=ju_Uqw384Oq
    """

    def __init__(self, configs):
        super(Model, self).__init__()
        self.configs = configs
        self.task_name = configs.task_name
        self.seq_len = configs.seq_len
        self.label_len = configs.label_len
        self.pred_len = configs.pred_len
        self.model = nn.ModuleList([TimesBlock(configs)
                                    for _ in range(configs.e_layers)])
        self.enc_embedding = DataEmbedding(configs.enc_in, configs.d_model, configs.embed, configs.freq,
                                           configs.dropout)
        self.layer = configs.e_layers
        self.layer_norm = nn.LayerNorm(configs.d_model)
        if self.task_name == 'long_term_forecast' or self.task_name == 'short_term_forecast':
            self.predict_linear = nn.Linear(
                self.seq_len, self.pred_len + self.seq_len)
            self.projection = nn.Linear(
                configs.d_model, configs.c_out, bias=True)

    def forecast(self, x_enc, x_mark_enc, x_dec, x_mark_dec):
        # Normalization from Non-stationary Transformer
        means = x_enc.mean(1, keepdim=True).detach()
        x_enc = x_enc.sub(means)
        stdev = torch.sqrt(
            torch.var(x_enc, dim=1, keepdim=True, unbiased=False) + 1e-5)
        x_enc = x_enc.div(stdev)

        # embedding
        enc_out = self.enc_embedding(x_enc, x_mark_enc)  # [B,T,C]
        enc_out = self.predict_linear(enc_out.permute(0, 2, 1)).permute(
            0, 2, 1)  # align temporal dimension
        # TimesNet
        for i in range(self.layer):
            enc_out = self.layer_norm(self.model[i](enc_out))
        # porject back
        dec_out = self.projection(enc_out)

        # De-Normalization from Non-stationary Transformer
        dec_out = dec_out.mul(
                  (stdev[:, 0, :].unsqueeze(1).repeat(
                      1, self.pred_len + self.seq_len, 1)))
        dec_out = dec_out.add(
                  (means[:, 0, :].unsqueeze(1).repeat(
                      1, self.pred_len + self.seq_len, 1)))
        return dec_out

    def forward(self, x_enc, x_mark_enc, x_dec, x_mark_dec, mask=None):
        if self.task_name == 'long_term_forecast' or self.task_name == 'short_term_forecast':
            dec_out = self.forecast(x_enc, x_mark_enc, x_dec, x_mark_dec)
            return dec_out[:, -self.pred_len:, :]  # [B, L, D]
        return None


# ---------------------------------------------------------------- utils/tools.py
def adjust_learning_rate(optimizer, epoch, args):
    # lr = args.learning_rate * (0.2 ** (epoch // 2))
    if args.lradj == 'type1':
        lr_adjust = {epoch: args.learning_rate * (0.5 ** ((epoch - 1) // 1))}
    elif args.lradj == 'type2':
        lr_adjust = {
            2: 5e-5, 4: 1e-5, 6: 5e-6, 8: 1e-6,
            10: 5e-7, 15: 1e-7, 20: 5e-8
        }
    elif args.lradj == "cosine":
        lr_adjust = {epoch: args.learning_rate / 2 * (1 + math.cos(epoch / args.train_epochs * math.pi))}
    if epoch in lr_adjust.keys():
        lr = lr_adjust[epoch]
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        print('Updating learning rate to {}'.format(lr))


class EarlyStopping:
    def __init__(self, patience=7, verbose=False, delta=0):
        self.patience = patience
        self.verbose = verbose
        self.counter = 0
        self.best_score = None
        self.early_stop = False
        self.val_loss_min = np.inf
        self.delta = delta

    def __call__(self, val_loss, model, path):
        score = -val_loss
        if self.best_score is None:
            self.best_score = score
            self.save_checkpoint(val_loss, model, path)
        elif score < self.best_score + self.delta:
            self.counter += 1
            print(f'EarlyStopping counter: {self.counter} out of {self.patience}')
            if self.counter >= self.patience:
                self.early_stop = True
        else:
            self.best_score = score
            self.save_checkpoint(val_loss, model, path)
            self.counter = 0

    def save_checkpoint(self, val_loss, model, path):
        if self.verbose:
            print(f'Validation loss decreased ({self.val_loss_min:.6f} --> {val_loss:.6f}).  Saving model ...')
        torch.save(model.state_dict(), path + '/' + 'checkpoint.pth')
        self.val_loss_min = val_loss


class StandardScaler():
    def __init__(self):
        self.mean = None
        self.std = None

    def fit(self, data):
        self.mean = data.mean(0)
        self.std = data.std(0)

    def transform(self, data):
        return (data - self.mean) / self.std


# ---------------------------------------------------------------- data_provider (numpy, no pandas)
def time_features_hourly(hours):
    """utils/timefeatures.py's HourOfDay, DayOfWeek, DayOfMonth, DayOfYear for
    hourly stamps counted from 2016-07-01 00:00 (a Friday), in [-0.5, 0.5]."""
    hour = hours % 24
    day = hours // 24
    dayofweek = (day + 4) % 7
    dayofmonth = day % 31 + 1
    dayofyear = day + 183
    return np.stack([hour / 23.0 - 0.5, dayofweek / 6.0 - 0.5, (dayofmonth - 1) / 30.0 - 0.5,
                     (dayofyear - 1) / 365.0 - 0.5], 1).astype(np.float32)


class Dataset_Custom(Dataset):
    def __init__(self, data, stamps, flag, size):
        self.seq_len, self.label_len, self.pred_len = size
        type_map = {'train': 0, 'val': 1, 'test': 2}
        self.set_type = type_map[flag]
        num_train = int(len(data) * 0.7)
        num_test = int(len(data) * 0.2)
        num_vali = len(data) - num_train - num_test
        border1s = [0, num_train - self.seq_len, len(data) - num_test - self.seq_len]
        border2s = [num_train, num_train + num_vali, len(data)]
        border1 = border1s[self.set_type]
        border2 = border2s[self.set_type]
        self.scaler = StandardScaler()
        self.scaler.fit(data[border1s[0]:border2s[0]])
        data = self.scaler.transform(data)
        self.data_x = data[border1:border2]
        self.data_y = data[border1:border2]
        self.data_stamp = stamps[border1:border2]

    def __getitem__(self, index):
        s_begin = index
        s_end = s_begin + self.seq_len
        r_begin = s_end - self.label_len
        r_end = r_begin + self.label_len + self.pred_len

        seq_x = self.data_x[s_begin:s_end]
        seq_y = self.data_y[r_begin:r_end]
        seq_x_mark = self.data_stamp[s_begin:s_end]
        seq_y_mark = self.data_stamp[r_begin:r_end]

        return seq_x, seq_y, seq_x_mark, seq_y_mark

    def __len__(self):
        return len(self.data_x) - self.seq_len - self.pred_len + 1


# ---------------------------------------------------------------- exp/exp_long_term_forecasting.py
class Exp_Long_Term_Forecast:
    def __init__(self, args, data):
        self.args = args
        self.device = torch.device('cpu')
        self.data = data
        self.model = Model(args).float()

    def _get_data(self, flag):
        data_set = Dataset_Custom(*self.data, flag, [self.args.seq_len, self.args.label_len, self.args.pred_len])
        data_loader = DataLoader(data_set, batch_size=self.args.batch_size, shuffle=False,
                                 num_workers=0, drop_last=flag == 'train')
        return data_set, data_loader

    def _select_optimizer(self):
        model_optim = optim.Adam(self.model.parameters(), lr=self.args.learning_rate)
        return model_optim

    def _select_criterion(self):
        criterion = nn.MSELoss()
        return criterion

    def _predict(self, batch_x, batch_y, batch_x_mark, batch_y_mark):
        # decoder input
        dec_inp = torch.zeros_like(batch_y[:, -self.args.pred_len:, :]).float()
        dec_inp = torch.cat([batch_y[:, :self.args.label_len, :], dec_inp], dim=1).float().to(self.device)
        return self.model(batch_x, batch_x_mark, dec_inp, batch_y_mark)

    def vali(self, vali_data, vali_loader, criterion):
        total_loss = []
        self.model.eval()
        with torch.no_grad():
            for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(vali_loader):
                batch_x = batch_x.float().to(self.device)
                batch_y = batch_y.float()

                batch_x_mark = batch_x_mark.float().to(self.device)
                batch_y_mark = batch_y_mark.float().to(self.device)

                outputs = self._predict(batch_x, batch_y, batch_x_mark, batch_y_mark)
                f_dim = -1 if self.args.features == 'MS' else 0
                outputs = outputs[:, -self.args.pred_len:, f_dim:]
                batch_y = batch_y[:, -self.args.pred_len:, f_dim:].to(self.device)

                pred = outputs.detach().cpu()
                true = batch_y.detach().cpu()

                loss = criterion(pred, true)

                total_loss.append(loss)
        total_loss = np.average(total_loss)
        self.model.train()
        return total_loss

    def train(self, setting):
        train_data, train_loader = self._get_data(flag='train')
        vali_data, vali_loader = self._get_data(flag='val')
        test_data, test_loader = self._get_data(flag='test')

        path = os.path.join(self.args.checkpoints, setting)
        if not os.path.exists(path):
            os.makedirs(path)

        train_steps = len(train_loader)
        early_stopping = EarlyStopping(patience=self.args.patience, verbose=True)

        model_optim = self._select_optimizer()
        criterion = self._select_criterion()

        for epoch in range(self.args.train_epochs):
            iter_count = 0
            train_loss = []

            self.model.train()
            for i, (batch_x, batch_y, batch_x_mark, batch_y_mark) in enumerate(train_loader):
                iter_count += 1
                model_optim.zero_grad()
                batch_x = batch_x.float().to(self.device)

                batch_y = batch_y.float().to(self.device)
                batch_x_mark = batch_x_mark.float().to(self.device)
                batch_y_mark = batch_y_mark.float().to(self.device)

                outputs = self._predict(batch_x, batch_y, batch_x_mark, batch_y_mark)

                f_dim = -1 if self.args.features == 'MS' else 0
                outputs = outputs[:, -self.args.pred_len:, f_dim:]
                batch_y = batch_y[:, -self.args.pred_len:, f_dim:].to(self.device)
                loss = criterion(outputs, batch_y)
                train_loss.append(loss.item())

                if (i + 1) % 2 == 0:
                    print("\titers: {0}, epoch: {1} | loss: {2:.7f}".format(i + 1, epoch + 1, loss.item()))

                loss.backward()
                model_optim.step()

            train_loss = np.average(train_loss)
            vali_loss = self.vali(vali_data, vali_loader, criterion)
            test_loss = self.vali(test_data, test_loader, criterion)

            print("Epoch: {0}, Steps: {1} | Train Loss: {2:.7f} Vali Loss: {3:.7f} Test Loss: {4:.7f}".format(
                epoch + 1, train_steps, train_loss, vali_loss, test_loss))
            early_stopping(vali_loss, self.model, path)
            if early_stopping.early_stop:
                print("Early stopping")
                break

            adjust_learning_rate(model_optim, epoch + 1, self.args)

        best_model_path = path + '/' + 'checkpoint.pth'
        self.model.load_state_dict(torch.load(best_model_path))

        return self.model, model_optim


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed, std=0.1):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            if p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.from_numpy(r.normal(0, 1.0 / np.sqrt(fan_in), tuple(p.shape)).astype(np.float32)))
            elif 'norm' in name and name.endswith('weight'):
                p.copy_(torch.from_numpy(1 + r.normal(0, std, tuple(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


# the building blocks on their own
rng = np.random.default_rng(0)
t = np.arange(36, dtype=np.float32)
x = torch.from_numpy(np.stack([np.sin(2 * np.pi * t / 12) + 0.3 * np.cos(2 * np.pi * t / 6),
                               0.5 * np.sin(2 * np.pi * t / 9), np.cos(2 * np.pi * t / 12)], 1)[None].repeat(2, 0))
x = x + torch.from_numpy(rng.normal(0, 0.05, x.shape).astype(np.float32))
period, weight = FFT_for_Period(x, 2)
print("FFT_for_Period", type(period).__name__, period.dtype, period.tolist(), tuple(weight.shape), fmt(weight, 4))
xf = torch.fft.rfft(x, dim=1)
print("rfft", xf.dtype, tuple(xf.shape), fmt(abs(xf).mean(0).mean(-1), 6))
pe = PositionalEmbedding(6)
print("PositionalEmbedding", tuple(pe.pe.shape), pe.pe.requires_grad, fmt(pe.pe[0, 3], 6),
      [n for n, _ in pe.named_buffers()], tuple(pe(x).shape))
fe = FixedEmbedding(24, 6)
print("FixedEmbedding", fe.emb.weight.requires_grad, fmt(fe(torch.tensor([[5, 23]])), 6))
te = TemporalEmbedding(6, 'fixed', 'h')
marks = torch.tensor([[[7, 14, 3, 9], [12, 31, 6, 23]]]).float()
print("TemporalEmbedding", fmt(te(marks)[0, 1], 6), [n for n, p in te.named_parameters()][:2])
torch.manual_seed(0)
tok = TokenEmbedding(3, 8)
print("kaiming leaky_relu fan_in std", f"{tok.tokenConv.weight.std().item():.2f}")
with torch.no_grad():
    tok.tokenConv.weight.copy_(torch.from_numpy(rng.normal(0, 0.5, (8, 3, 3)).astype(np.float32)))
emb = tok(x)
print("TokenEmbedding circular", tuple(emb.shape), fmt(emb[0, 0], 4), fmt(emb[1, -1], 4))
inc = Inception_Block_V1(8, 4, num_kernels=3)
print("Inception kernels", [tuple(k.weight.shape) for k in inc.kernels], [k.padding for k in inc.kernels],
      "zero biases", all(k.bias.abs().sum().item() == 0 for k in inc.kernels))
load_numpy(inc, 1)
print("Inception", tuple(inc(emb.permute(0, 2, 1)[..., None]).shape),
      fmt(inc(emb.reshape(2, 3, 12, 8).permute(0, 3, 1, 2)), 4))

# the data: two periods (24 and 8 steps) over three channels, hourly stamps
n = 240
hours = np.arange(n)
series = np.stack([10 + 3 * np.sin(2 * np.pi * hours / 24) + np.sin(2 * np.pi * hours / 8),
                   5 + 2 * np.cos(2 * np.pi * hours / 24) + 0.2 * hours / n,
                   np.sin(2 * np.pi * hours / 8 + 1.0) * (1 + 0.5 * np.sin(2 * np.pi * hours / 24))], 1)
series = (series + rng.normal(0, 0.1, series.shape)).astype(np.float32)
stamps = time_features_hourly(hours)

args = argparse.Namespace(
    task_name='long_term_forecast', seq_len=24, label_len=12, pred_len=12, enc_in=3, dec_in=3, c_out=3,
    d_model=8, d_ff=8, num_kernels=3, top_k=2, e_layers=2, embed='timeF', freq='h', dropout=0.0,
    features='M', batch_size=16, learning_rate=0.01, train_epochs=4, patience=2, lradj='type1',
    checkpoints=tempfile.mkdtemp())
setting = '{}_{}_sl{}_pl{}_dm{}'.format(args.task_name, 'TimesNet', args.seq_len, args.pred_len, args.d_model)
exp = Exp_Long_Term_Forecast(args, (series, stamps))
load_numpy(exp.model, 2)
print("params", sum(p.numel() for p in exp.model.parameters()), "buffers", [n for n, _ in exp.model.named_buffers()])
train_set, _ = exp._get_data('train')
vali_set, _ = exp._get_data('val')
print("datasets", len(train_set), len(vali_set), [tuple(np.shape(a)) for a in train_set[0]],
      fmt(torch.from_numpy(train_set[3][0]), 3))
model, model_optim = exp.train(setting)
print("lr after", model_optim.param_groups[0]['lr'], "checkpoint", os.path.exists(
    os.path.join(args.checkpoints, setting, 'checkpoint.pth')))
# EarlyStopping's patience on a validation curve that stops improving
stopper = EarlyStopping(patience=2, verbose=True)
for epoch, vloss in enumerate([0.5, 0.4, 0.45, 0.4, 0.39, 0.41, 0.42]):
    stopper(vloss, model, args.checkpoints)
    if stopper.early_stop:
        print("Early stopping at epoch", epoch, "best", -stopper.best_score, "min", stopper.val_loss_min)
        break
test_set, test_loader = exp._get_data('test')
criterion = exp._select_criterion()
print("test loss of the best checkpoint", f"{exp.vali(test_set, test_loader, criterion):.6f}")
bx, by, bxm, bym = [torch.from_numpy(np.stack(a)) for a in zip(*[test_set[i] for i in range(4)])]
pred = exp._predict(bx, by, bxm, bym)
print("forecast", tuple(pred.shape), fmt(pred[0, :, 0], 6))


# one training step under torch.compile against the same step eagerly
def train_step(batch_x, batch_y, batch_x_mark, batch_y_mark):
    model_optim.zero_grad()
    outputs = exp._predict(batch_x, batch_y, batch_x_mark, batch_y_mark)
    loss = criterion(outputs[:, -args.pred_len:, 0:], batch_y[:, -args.pred_len:, 0:])
    loss.backward()
    model_optim.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(model_optim.state_dict())
batch = [torch.from_numpy(np.stack(a)) for a in zip(*[train_set[i] for i in range(8)])]
eager = [train_step(*batch).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
model_optim.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(*batch).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
