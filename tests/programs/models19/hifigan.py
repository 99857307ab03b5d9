# jik876/hifi-gan the way its models.py, meldataset.py, utils.py and
# train.py write it: the Generator (weight-normed Conv1d / ConvTranspose1d
# upsampling, ResBlock1 and ResBlock2 with dilated convolutions and
# leaky_relu, remove_weight_norm), the MultiPeriodDiscriminator (reflect pad
# then view as 2-D periods, weight-normed Conv2d), the
# MultiScaleDiscriminator (spectral_norm in its first scale, AvgPool1d
# between scales), feature / generator / discriminator losses, the
# mel-spectrogram through torch.stft with a hann window and reflect padding,
# AdamW with ExponentialLR for both the generator and the discriminators.
# Changes for a CPU test: small channel counts and audio, librosa's slaney
# mel filterbank written in numpy, weights and data from numpy, stft with
# return_complex=True and .abs() (the current torch API), a few steps; then
# one generator step (the mel loss and the period-2 discriminator's losses,
# on a generator with a single upsampling stage) under torch.compile against
# the same step eagerly.
import copy
import itertools

import numpy as np
import torch
import torch.nn.functional as F
import torch.nn as nn
from torch.nn import Conv1d, ConvTranspose1d, AvgPool1d, Conv2d
from torch.nn.utils import weight_norm, remove_weight_norm, spectral_norm


# ---- utils.py
def init_weights(m, mean=0.0, std=0.01):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.normal_(mean, std)


def get_padding(kernel_size, dilation=1):
    return int((kernel_size*dilation - dilation)/2)


class AttrDict(dict):
    def __init__(self, *args, **kwargs):
        super(AttrDict, self).__init__(*args, **kwargs)
        self.__dict__ = self


# ---- models.py
LRELU_SLOPE = 0.1


class ResBlock1(torch.nn.Module):
    def __init__(self, h, channels, kernel_size=3, dilation=(1, 3, 5)):
        super(ResBlock1, self).__init__()
        self.h = h
        self.convs1 = nn.ModuleList([
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=dilation[0],
                               padding=get_padding(kernel_size, dilation[0]))),
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=dilation[1],
                               padding=get_padding(kernel_size, dilation[1]))),
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=dilation[2],
                               padding=get_padding(kernel_size, dilation[2])))
        ])
        self.convs1.apply(init_weights)

        self.convs2 = nn.ModuleList([
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=1,
                               padding=get_padding(kernel_size, 1))),
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=1,
                               padding=get_padding(kernel_size, 1))),
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=1,
                               padding=get_padding(kernel_size, 1)))
        ])
        self.convs2.apply(init_weights)

    def forward(self, x):
        for c1, c2 in zip(self.convs1, self.convs2):
            xt = F.leaky_relu(x, LRELU_SLOPE)
            xt = c1(xt)
            xt = F.leaky_relu(xt, LRELU_SLOPE)
            xt = c2(xt)
            x = xt + x
        return x

    def remove_weight_norm(self):
        for l in self.convs1:
            remove_weight_norm(l)
        for l in self.convs2:
            remove_weight_norm(l)


class ResBlock2(torch.nn.Module):
    def __init__(self, h, channels, kernel_size=3, dilation=(1, 3)):
        super(ResBlock2, self).__init__()
        self.h = h
        self.convs = nn.ModuleList([
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=dilation[0],
                               padding=get_padding(kernel_size, dilation[0]))),
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=dilation[1],
                               padding=get_padding(kernel_size, dilation[1])))
        ])
        self.convs.apply(init_weights)

    def forward(self, x):
        for c in self.convs:
            xt = F.leaky_relu(x, LRELU_SLOPE)
            xt = c(xt)
            x = xt + x
        return x

    def remove_weight_norm(self):
        for l in self.convs:
            remove_weight_norm(l)


class Generator(torch.nn.Module):
    def __init__(self, h):
        super(Generator, self).__init__()
        self.h = h
        self.num_kernels = len(h.resblock_kernel_sizes)
        self.num_upsamples = len(h.upsample_rates)
        self.conv_pre = weight_norm(Conv1d(h.num_mels, h.upsample_initial_channel, 7, 1, padding=3))
        resblock = ResBlock1 if h.resblock == '1' else ResBlock2

        self.ups = nn.ModuleList()
        for i, (u, k) in enumerate(zip(h.upsample_rates, h.upsample_kernel_sizes)):
            self.ups.append(weight_norm(
                ConvTranspose1d(h.upsample_initial_channel//(2**i), h.upsample_initial_channel//(2**(i+1)),
                                k, u, padding=(k-u)//2)))

        self.resblocks = nn.ModuleList()
        for i in range(len(self.ups)):
            ch = h.upsample_initial_channel//(2**(i+1))
            for j, (k, d) in enumerate(zip(h.resblock_kernel_sizes, h.resblock_dilation_sizes)):
                self.resblocks.append(resblock(h, ch, k, d))

        self.conv_post = weight_norm(Conv1d(ch, 1, 7, 1, padding=3))
        self.ups.apply(init_weights)
        self.conv_post.apply(init_weights)

    def forward(self, x):
        x = self.conv_pre(x)
        for i in range(self.num_upsamples):
            x = F.leaky_relu(x, LRELU_SLOPE)
            x = self.ups[i](x)
            xs = None
            for j in range(self.num_kernels):
                if xs is None:
                    xs = self.resblocks[i*self.num_kernels+j](x)
                else:
                    xs += self.resblocks[i*self.num_kernels+j](x)
            x = xs / self.num_kernels
        x = F.leaky_relu(x)
        x = self.conv_post(x)
        x = torch.tanh(x)

        return x

    def remove_weight_norm(self):
        print('Removing weight norm...')
        for l in self.ups:
            remove_weight_norm(l)
        for l in self.resblocks:
            l.remove_weight_norm()
        remove_weight_norm(self.conv_pre)
        remove_weight_norm(self.conv_post)


class DiscriminatorP(torch.nn.Module):
    def __init__(self, period, kernel_size=5, stride=3, use_spectral_norm=False):
        super(DiscriminatorP, self).__init__()
        self.period = period
        norm_f = weight_norm if use_spectral_norm == False else spectral_norm
        self.convs = nn.ModuleList([
            norm_f(Conv2d(1, 4, (kernel_size, 1), (stride, 1), padding=(get_padding(5, 1), 0))),
            norm_f(Conv2d(4, 8, (kernel_size, 1), (stride, 1), padding=(get_padding(5, 1), 0))),
            norm_f(Conv2d(8, 16, (kernel_size, 1), (stride, 1), padding=(get_padding(5, 1), 0))),
            norm_f(Conv2d(16, 16, (kernel_size, 1), (stride, 1), padding=(get_padding(5, 1), 0))),
            norm_f(Conv2d(16, 16, (kernel_size, 1), 1, padding=(2, 0))),
        ])
        self.conv_post = norm_f(Conv2d(16, 1, (3, 1), 1, padding=(1, 0)))

    def forward(self, x):
        fmap = []

        # 1d to 2d
        b, c, t = x.shape
        if t % self.period != 0: # pad first
            n_pad = self.period - (t % self.period)
            x = F.pad(x, (0, n_pad), "reflect")
            t = t + n_pad
        x = x.view(b, c, t // self.period, self.period)

        for l in self.convs:
            x = l(x)
            x = F.leaky_relu(x, LRELU_SLOPE)
            fmap.append(x)
        x = self.conv_post(x)
        fmap.append(x)
        x = torch.flatten(x, 1, -1)

        return x, fmap


class MultiPeriodDiscriminator(torch.nn.Module):
    def __init__(self):
        super(MultiPeriodDiscriminator, self).__init__()
        self.discriminators = nn.ModuleList([
            DiscriminatorP(2),
            DiscriminatorP(3),
            DiscriminatorP(5),
            DiscriminatorP(7),
            DiscriminatorP(11),
        ])

    def forward(self, y, y_hat):
        y_d_rs = []
        y_d_gs = []
        fmap_rs = []
        fmap_gs = []
        for i, d in enumerate(self.discriminators):
            y_d_r, fmap_r = d(y)
            y_d_g, fmap_g = d(y_hat)
            y_d_rs.append(y_d_r)
            fmap_rs.append(fmap_r)
            y_d_gs.append(y_d_g)
            fmap_gs.append(fmap_g)

        return y_d_rs, y_d_gs, fmap_rs, fmap_gs


class DiscriminatorS(torch.nn.Module):
    def __init__(self, use_spectral_norm=False):
        super(DiscriminatorS, self).__init__()
        norm_f = weight_norm if use_spectral_norm == False else spectral_norm
        self.convs = nn.ModuleList([
            norm_f(Conv1d(1, 16, 15, 1, padding=7)),
            norm_f(Conv1d(16, 16, 41, 2, groups=4, padding=20)),
            norm_f(Conv1d(16, 32, 41, 2, groups=16, padding=20)),
            norm_f(Conv1d(32, 32, 41, 4, groups=16, padding=20)),
            norm_f(Conv1d(32, 32, 41, 4, groups=16, padding=20)),
            norm_f(Conv1d(32, 32, 41, 1, groups=16, padding=20)),
            norm_f(Conv1d(32, 32, 5, 1, padding=2)),
        ])
        self.conv_post = norm_f(Conv1d(32, 1, 3, 1, padding=1))

    def forward(self, x):
        fmap = []
        for l in self.convs:
            x = l(x)
            x = F.leaky_relu(x, LRELU_SLOPE)
            fmap.append(x)
        x = self.conv_post(x)
        fmap.append(x)
        x = torch.flatten(x, 1, -1)

        return x, fmap


class MultiScaleDiscriminator(torch.nn.Module):
    def __init__(self):
        super(MultiScaleDiscriminator, self).__init__()
        self.discriminators = nn.ModuleList([
            DiscriminatorS(use_spectral_norm=True),
            DiscriminatorS(),
            DiscriminatorS(),
        ])
        self.meanpools = nn.ModuleList([
            AvgPool1d(4, 2, padding=2),
            AvgPool1d(4, 2, padding=2)
        ])

    def forward(self, y, y_hat):
        y_d_rs = []
        y_d_gs = []
        fmap_rs = []
        fmap_gs = []
        for i, d in enumerate(self.discriminators):
            if i != 0:
                y = self.meanpools[i-1](y)
                y_hat = self.meanpools[i-1](y_hat)
            y_d_r, fmap_r = d(y)
            y_d_g, fmap_g = d(y_hat)
            y_d_rs.append(y_d_r)
            fmap_rs.append(fmap_r)
            y_d_gs.append(y_d_g)
            fmap_gs.append(fmap_g)

        return y_d_rs, y_d_gs, fmap_rs, fmap_gs


def feature_loss(fmap_r, fmap_g):
    loss = 0
    for dr, dg in zip(fmap_r, fmap_g):
        for rl, gl in zip(dr, dg):
            loss += torch.mean(torch.abs(rl - gl))

    return loss*2


def discriminator_loss(disc_real_outputs, disc_generated_outputs):
    loss = 0
    r_losses = []
    g_losses = []
    for dr, dg in zip(disc_real_outputs, disc_generated_outputs):
        r_loss = torch.mean((1-dr)**2)
        g_loss = torch.mean(dg**2)
        loss += (r_loss + g_loss)
        r_losses.append(r_loss.item())
        g_losses.append(g_loss.item())

    return loss, r_losses, g_losses


def generator_loss(disc_outputs):
    loss = 0
    gen_losses = []
    for dg in disc_outputs:
        l = torch.mean((1-dg)**2)
        gen_losses.append(l)
        loss += l

    return loss, gen_losses


# ---- meldataset.py (librosa.filters.mel, slaney scale and norm, in numpy)
def hz_to_mel(frequencies):
    frequencies = np.asanyarray(frequencies)
    f_min, f_sp = 0.0, 200.0 / 3
    mels = (frequencies - f_min) / f_sp
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - f_min) / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(frequencies >= min_log_hz,
                    min_log_mel + np.log(np.maximum(frequencies, 1e-10) / min_log_hz) / logstep, mels)


def mel_to_hz(mels):
    mels = np.asanyarray(mels)
    f_min, f_sp = 0.0, 200.0 / 3
    freqs = f_min + f_sp * mels
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - f_min) / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(mels >= min_log_mel, min_log_hz * np.exp(logstep * (mels - min_log_mel)), freqs)


def librosa_mel_fn(sr, n_fft, n_mels, fmin, fmax):
    if fmax is None:
        fmax = float(sr) / 2
    weights = np.zeros((n_mels, int(1 + n_fft // 2)), dtype=np.float32)
    fftfreqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels])
    weights *= enorm[:, np.newaxis]
    return weights


def dynamic_range_compression_torch(x, C=1, clip_val=1e-5):
    return torch.log(torch.clamp(x, min=clip_val) * C)


def dynamic_range_decompression_torch(x, C=1):
    return torch.exp(x) / C


def spectral_normalize_torch(magnitudes):
    output = dynamic_range_compression_torch(magnitudes)
    return output


mel_basis = {}
hann_window = {}


def mel_spectrogram(y, n_fft, num_mels, sampling_rate, hop_size, win_size, fmin, fmax, center=False):
    if torch.min(y) < -1.:
        print('min value is ', torch.min(y))
    if torch.max(y) > 1.:
        print('max value is ', torch.max(y))

    global mel_basis, hann_window
    if fmax not in mel_basis:
        mel = librosa_mel_fn(sampling_rate, n_fft, num_mels, fmin, fmax)
        mel_basis[str(fmax)+'_'+str(y.device)] = torch.from_numpy(mel).float().to(y.device)
        hann_window[str(y.device)] = torch.hann_window(win_size).to(y.device)

    y = torch.nn.functional.pad(y.unsqueeze(1), (int((n_fft-hop_size)/2), int((n_fft-hop_size)/2)), mode='reflect')
    y = y.squeeze(1)

    spec = torch.stft(y, n_fft, hop_length=hop_size, win_length=win_size, window=hann_window[str(y.device)],
                      center=center, pad_mode='reflect', normalized=False, onesided=True, return_complex=True)

    spec = spec.abs() + 1e-9

    spec = torch.matmul(mel_basis[str(fmax)+'_'+str(y.device)], spec)
    spec = spectral_normalize_torch(spec)

    return spec


# ---- a config like config_v1.json, shrunk
h = AttrDict({
    "resblock": "1", "num_gpus": 0, "batch_size": 2, "learning_rate": 0.0002,
    "adam_b1": 0.8, "adam_b2": 0.99, "lr_decay": 0.999, "seed": 1234,
    "upsample_rates": [4, 4], "upsample_kernel_sizes": [8, 8], "upsample_initial_channel": 16,
    "resblock_kernel_sizes": [3, 5], "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5]],
    "segment_size": 256, "num_mels": 8, "num_freq": 33, "n_fft": 64, "hop_size": 16,
    "win_size": 64, "sampling_rate": 4000, "fmin": 0, "fmax": 2000, "fmax_for_loss": None,
})


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.3):
    """weight_g > 0, the rest normal; spectral_norm's u / v vectors normalised."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("weight_g"):
                v = r.uniform(0.5, 1.5, tuple(p.shape))
            else:
                v = r.normal(0, std, tuple(p.shape))
            p.copy_(torch.from_numpy(v.astype(np.float32)))
        for name, b in module.named_buffers():
            if name.endswith("weight_u") or name.endswith("weight_v"):
                v = r.normal(size=tuple(b.shape))
                b.copy_(torch.from_numpy((v / np.linalg.norm(v)).astype(np.float32)))


r = np.random.default_rng(0)
torch.manual_seed(h.seed)

print("padding", get_padding(3, 1), get_padding(5, 3), get_padding(41, 1))
mel = librosa_mel_fn(h.sampling_rate, h.n_fft, h.num_mels, h.fmin, h.fmax)
print("mel basis", mel.shape, [f"{v:.5f}" for v in mel.sum(1)[:4]], int((mel > 0).sum()))
win = torch.hann_window(h.win_size)
print("hann", fmt(win[:4]), f"{win.sum().item():.4f}")

# wn conv: the parameters it keeps, and its weight recomputed from them
c = weight_norm(Conv1d(4, 6, 3))
print("weight_norm params", [n for n, _ in c.named_parameters()], tuple(c.weight_g.shape),
      type(c.weight).__name__, isinstance(c.weight, nn.Parameter))
load_numpy(c, r)
xc = torch.from_numpy(r.normal(size=(2, 4, 10)).astype(np.float32))
w = c.weight_v * (c.weight_g / c.weight_v.norm(dim=(1, 2), keepdim=True))
print("weight_norm forward", torch.allclose(c(xc), F.conv1d(xc, w, c.bias), atol=1e-5), fmt(c(xc)[1, 2]))
remove_weight_norm(c)
print("removed", [n for n, _ in c.named_parameters()], torch.allclose(c.weight, w, atol=1e-6))
try:
    remove_weight_norm(c)
except ValueError as e:
    print("ValueError:", e)
sn = spectral_norm(Conv2d(2, 3, (3, 1)))
print("spectral_norm", [n for n, _ in sn.named_parameters()], [n for n, _ in sn.named_buffers()],
      tuple(sn.weight_u.shape), tuple(sn.weight_v.shape))
load_numpy(sn, r)
u0 = sn.weight_u.clone()
xs = torch.from_numpy(r.normal(size=(1, 2, 6, 2)).astype(np.float32))
ys = sn(xs)
wm = sn.weight_orig.reshape(3, -1)
print("sigma", f"{torch.dot(sn.weight_u, torch.mv(wm, sn.weight_v)).item():.5f}",
      f"{torch.linalg.matrix_norm(wm, ord=2).item():.5f}", "u moved", not torch.equal(u0, sn.weight_u))
sn.eval()
print("eval keeps u", torch.equal(sn(xs), sn(xs)), fmt(ys[0, 1]))

# audio: a batch of two chords, and their mel spectrograms (the dataset's y_mel and x)
t = np.arange(h.segment_size) / h.sampling_rate
audio = np.stack([0.5 * np.sin(2 * np.pi * 220 * t) + 0.2 * np.sin(2 * np.pi * 660 * t + 0.3),
                  0.4 * np.sin(2 * np.pi * 330 * t) + 0.3 * np.sin(2 * np.pi * 1100 * t)])
audio = audio + 0.02 * r.normal(size=audio.shape)
y = torch.FloatTensor(audio.astype(np.float32))
x = mel_spectrogram(y, h.n_fft, h.num_mels, h.sampling_rate, h.hop_size, h.win_size, h.fmin, h.fmax,
                    center=False)
y_mel = mel_spectrogram(y, h.n_fft, h.num_mels, h.sampling_rate, h.hop_size, h.win_size, h.fmin,
                        h.fmax_for_loss, center=False)
print("mel", tuple(x.shape), fmt(x[0, :, 3]), fmt(y_mel[1, 2]), sorted(mel_basis))
spec = torch.stft(F.pad(y.unsqueeze(1), (24, 24), mode='reflect').squeeze(1), h.n_fft, hop_length=h.hop_size,
                  win_length=h.win_size, window=torch.hann_window(h.win_size), center=False,
                  return_complex=True)
print("stft", tuple(spec.shape), spec.dtype, fmt(spec.abs()[0, 3:7, 2]),
      torch.allclose(torch.view_as_real(spec).pow(2).sum(-1).sqrt(), spec.abs(), atol=1e-5))

generator = Generator(h)
mpd = MultiPeriodDiscriminator()
msd = MultiScaleDiscriminator()
for m in (generator, mpd, msd):
    load_numpy(m, r)
print("generator params", sum(p.numel() for p in generator.parameters()),
      [n for n, _ in generator.named_parameters()][:4])
print("mpd/msd params", sum(p.numel() for p in mpd.parameters()), sum(p.numel() for p in msd.parameters()))

y_g_hat = generator(x)
print("generator", tuple(y_g_hat.shape), fmt(y_g_hat[0, 0, 100:]))
y_ = y.unsqueeze(1)
y_d_rs, y_d_gs, fmap_rs, fmap_gs = mpd(y_, y_g_hat)
print("mpd", [tuple(o.shape) for o in y_d_rs], [tuple(f.shape) for f in fmap_rs[4]])
y_d_rs, y_d_gs, fmap_rs, fmap_gs = msd(y_, y_g_hat)
print("msd", [tuple(o.shape) for o in y_d_rs], [tuple(f.shape) for f in fmap_rs[2]][:4])
print("losses", f"{feature_loss(fmap_rs, fmap_gs).item():.5f}",
      [f"{v:.5f}" for v in discriminator_loss(y_d_rs, y_d_gs)[1]], f"{generator_loss(y_d_gs)[0].item():.5f}")

h2 = AttrDict({**h, "resblock": "2", "resblock_kernel_sizes": [3, 5, 7],
               "resblock_dilation_sizes": [[1, 2], [2, 6], [3, 12]]})
gen2 = Generator(h2)
load_numpy(gen2, r)
print("resblock2", type(gen2.resblocks[0]).__name__, len(gen2.resblocks), fmt(gen2(x)[1, 0, 50:]))

# ---- train.py
optim_g = torch.optim.AdamW(generator.parameters(), h.learning_rate, betas=[h.adam_b1, h.adam_b2])
optim_d = torch.optim.AdamW(itertools.chain(msd.parameters(), mpd.parameters()),
                            h.learning_rate, betas=[h.adam_b1, h.adam_b2])
last_epoch = -1
scheduler_g = torch.optim.lr_scheduler.ExponentialLR(optim_g, gamma=h.lr_decay, last_epoch=last_epoch)
scheduler_d = torch.optim.lr_scheduler.ExponentialLR(optim_d, gamma=h.lr_decay, last_epoch=last_epoch)
generator.train()
mpd.train()
msd.train()
steps = 0
for epoch in range(2):
    for i in range(1):
        x_b = torch.autograd.Variable(x)
        y_b = torch.autograd.Variable(y)
        y_mel_b = torch.autograd.Variable(y_mel)
        y_b = y_b.unsqueeze(1)

        y_g_hat = generator(x_b)
        y_g_hat_mel = mel_spectrogram(y_g_hat.squeeze(1), h.n_fft, h.num_mels, h.sampling_rate, h.hop_size, h.win_size,
                                      h.fmin, h.fmax_for_loss)

        optim_d.zero_grad()

        # MPD
        y_df_hat_r, y_df_hat_g, _, _ = mpd(y_b, y_g_hat.detach())
        loss_disc_f, losses_disc_f_r, losses_disc_f_g = discriminator_loss(y_df_hat_r, y_df_hat_g)

        # MSD
        y_ds_hat_r, y_ds_hat_g, _, _ = msd(y_b, y_g_hat.detach())
        loss_disc_s, losses_disc_s_r, losses_disc_s_g = discriminator_loss(y_ds_hat_r, y_ds_hat_g)

        loss_disc_all = loss_disc_s + loss_disc_f

        loss_disc_all.backward()
        optim_d.step()

        # Generator
        optim_g.zero_grad()

        # L1 Mel-Spectrogram Loss
        loss_mel = F.l1_loss(y_mel_b, y_g_hat_mel) * 45

        y_df_hat_r, y_df_hat_g, fmap_f_r, fmap_f_g = mpd(y_b, y_g_hat)
        y_ds_hat_r, y_ds_hat_g, fmap_s_r, fmap_s_g = msd(y_b, y_g_hat)
        loss_fm_f = feature_loss(fmap_f_r, fmap_f_g)
        loss_fm_s = feature_loss(fmap_s_r, fmap_s_g)
        loss_gen_f, losses_gen_f = generator_loss(y_df_hat_g)
        loss_gen_s, losses_gen_s = generator_loss(y_ds_hat_g)
        loss_gen_all = loss_gen_s + loss_gen_f + loss_fm_s + loss_fm_f + loss_mel

        loss_gen_all.backward()
        optim_g.step()

        with torch.no_grad():
            mel_error = F.l1_loss(y_mel_b, y_g_hat_mel).item()
        print('Steps : {:d}, Gen Loss Total : {:4.3f}, Disc Loss : {:4.3f}, Mel-Spec. Error : {:4.3f}'.
              format(steps, loss_gen_all.item(), loss_disc_all.item(), mel_error))
        steps += 1
    scheduler_g.step()
    scheduler_d.step()
print("lr", [f"{g['lr']:.8f}" for g in optim_g.param_groups], scheduler_d.get_last_lr())
print("u after training", fmt(msd.discriminators[0].convs[1].weight_u))

# inference.py: eval, remove_weight_norm, the same audio
generator.eval()
with torch.no_grad():
    before = generator(x)
generator.remove_weight_norm()
with torch.no_grad():
    y_g_hat = generator(x)
    audio_out = y_g_hat.squeeze()
    audio_out = audio_out * 32768.0
    audio_out = audio_out.cpu().numpy().astype('int16')
print("after remove_weight_norm", torch.allclose(before, y_g_hat, atol=1e-5),
      [n for n, _ in generator.conv_pre.named_parameters()], audio_out.dtype, audio_out.shape,
      (np.abs(audio_out[0, 100:104].astype(np.int32) - (before[0, 0, 100:104] * 32768).numpy().astype(np.int32)) <= 1).all())

# one generator step (the mel loss and the period-2 discriminator's losses)
# under torch.compile against the same step eagerly, on a generator with one
# x16 upsampling stage (the same hop size) to keep the cold compile short
h_c = AttrDict({**h, "upsample_rates": [16], "upsample_kernel_sizes": [32]})
gen_c = Generator(h_c)
load_numpy(gen_c, r)
optim_c = torch.optim.AdamW(gen_c.parameters(), h.learning_rate, betas=[h.adam_b1, h.adam_b2])


def train_step(x_b, y_b, y_mel_b):
    optim_c.zero_grad(set_to_none=True)
    y_g_hat = gen_c(x_b)
    y_g_hat_mel = mel_spectrogram(y_g_hat.squeeze(1), h.n_fft, h.num_mels, h.sampling_rate, h.hop_size,
                                  h.win_size, h.fmin, h.fmax_for_loss)
    loss_mel = F.l1_loss(y_mel_b, y_g_hat_mel) * 45
    y_d_hat_r, fmap_r = mpd.discriminators[0](y_b)
    y_d_hat_g, fmap_g = mpd.discriminators[0](y_g_hat)
    loss_fm = feature_loss([fmap_r], [fmap_g])
    loss_gen, losses_gen = generator_loss([y_d_hat_g])
    loss = loss_gen + loss_fm + loss_mel
    loss.backward()
    optim_c.step()
    return loss


y_b = y.unsqueeze(1)
mpd.requires_grad_(False)
state, opt_state = copy.deepcopy(gen_c.state_dict()), copy.deepcopy(optim_c.state_dict())
eager = [train_step(x, y_b, y_mel).item() for _ in range(2)]
after = {k: v.clone() for k, v in gen_c.state_dict().items()}
gen_c.load_state_dict(state)
optim_c.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(x, y_b, y_mel).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(gen_c.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
