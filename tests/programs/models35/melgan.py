# MelGAN the way descriptinc/melgan-neurips writes it (mel2wav/modules.py,
# scripts/train.py): weights_init by classname.find("Conv") (on
# weight-normed convs, whose weight the forward pre-hook recomputes),
# WNConv1d / WNConvTranspose1d as weight_norm(nn.Conv1d(...)), Audio2Mel
# (torch.hann_window buffer, a mel filterbank buffer from numpy,
# F.pad(audio, (p, p), "reflect").squeeze(1), torch.stft(center=False,
# return_complex=False) then fft.unbind(-1), the magnitude, torch.matmul
# with the filterbank, torch.log10(torch.clamp(mel_output, min=1e-5))),
# ResnetBlock (LeakyReLU(0.2), ReflectionPad1d(dilation), dilated WNConv1d,
# a 1x1 shortcut), Generator (mult = int(2 ** len(ratios)), the
# WNConvTranspose1d(kernel_size=r * 2, stride=r, padding=r // 2 + r % 2,
# output_padding=r % 2) upsamplers, Tanh), NLayerDiscriminator (an
# nn.ModuleDict of layers, grouped convs groups=nf_prev // 4,
# LeakyReLU(0.2, True)), the multi-scale Discriminator with
# nn.AvgPool1d(4, stride=2, padding=1, count_include_pad=False), and
# train.py's loop: the hinge losses F.relu(1 + scale[-1]).mean() /
# F.relu(1 - scale[-1]).mean(), the generator's -scale[-1].mean(), the
# feature-matching loss wt * F.l1_loss(D_fake[i][j], D_real[i][j].detach()),
# the s_error of the predicted audio's mel, Adam(lr=1e-4, betas=(0.5, 0.9)).
# Changes for a CPU test: ratios [4, 2] instead of [8, 8, 2, 2], n_fft=32,
# hop 8, 8 mel channels (librosa's slaney mel filterbank written in numpy),
# ngf=4, ndf=8, n_layers_D=1, 2 discriminators, 128-sample segments from numpy sines,
# weights from numpy, a few G/D steps; then one step of the first scale's
# discriminator under torch.compile against the same step eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import weight_norm


def librosa_mel_fn(sr, n_fft, n_mels, fmin, fmax):
    """librosa.filters.mel (htk=False, norm='slaney'), in numpy."""
    if fmax is None:
        fmax = sr / 2.0

    def hz_to_mel(f):
        f = np.asanyarray(f, dtype=np.float64)
        mels = f / (200.0 / 3)
        log_t = f >= 1000.0
        return np.where(log_t, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0), mels)

    def mel_to_hz(m):
        m = np.asanyarray(m, dtype=np.float64)
        freqs = m * (200.0 / 3)
        log_t = m >= 15.0
        return np.where(log_t, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), freqs)

    fftfreqs = np.linspace(0, sr / 2.0, 1 + n_fft // 2)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fftfreqs[None, :]
    weights = np.zeros((n_mels, 1 + n_fft // 2))
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels])
    weights *= enorm[:, None]
    return weights.astype(np.float32)


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.normal_(0.0, 0.02)
    elif classname.find("BatchNorm2d") != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


def WNConv1d(*args, **kwargs):
    return weight_norm(nn.Conv1d(*args, **kwargs))


def WNConvTranspose1d(*args, **kwargs):
    return weight_norm(nn.ConvTranspose1d(*args, **kwargs))


class Audio2Mel(nn.Module):
    def __init__(
        self,
        n_fft=1024,
        hop_length=256,
        win_length=1024,
        sampling_rate=22050,
        n_mel_channels=80,
        mel_fmin=0.0,
        mel_fmax=None,
    ):
        super().__init__()
        ##############################################
        # FFT Parameters                              #
        ##############################################
        window = torch.hann_window(win_length).float()
        mel_basis = librosa_mel_fn(
            sampling_rate, n_fft, n_mel_channels, mel_fmin, mel_fmax
        )
        mel_basis = torch.from_numpy(mel_basis).float()
        self.register_buffer("mel_basis", mel_basis)
        self.register_buffer("window", window)
        self.n_fft = n_fft
        self.hop_length = hop_length
        self.win_length = win_length
        self.sampling_rate = sampling_rate
        self.n_mel_channels = n_mel_channels

    def forward(self, audio):
        p = (self.n_fft - self.hop_length) // 2
        audio = F.pad(audio, (p, p), "reflect").squeeze(1)
        fft = torch.stft(
            audio,
            n_fft=self.n_fft,
            hop_length=self.hop_length,
            win_length=self.win_length,
            window=self.window,
            center=False,
            return_complex=False,
        )
        real_part, imag_part = fft.unbind(-1)
        magnitude = torch.sqrt(real_part ** 2 + imag_part ** 2)
        mel_output = torch.matmul(self.mel_basis, magnitude)
        log_mel_spec = torch.log10(torch.clamp(mel_output, min=1e-5))
        return log_mel_spec


class ResnetBlock(nn.Module):
    def __init__(self, dim, dilation=1):
        super().__init__()
        self.block = nn.Sequential(
            nn.LeakyReLU(0.2),
            nn.ReflectionPad1d(dilation),
            WNConv1d(dim, dim, kernel_size=3, dilation=dilation),
            nn.LeakyReLU(0.2),
            WNConv1d(dim, dim, kernel_size=1),
        )
        self.shortcut = WNConv1d(dim, dim, kernel_size=1)

    def forward(self, x):
        return self.shortcut(x) + self.block(x)


class Generator(nn.Module):
    def __init__(self, input_size, ngf, n_residual_layers):
        super().__init__()
        ratios = [4, 2]
        self.hop_length = np.prod(ratios)
        mult = int(2 ** len(ratios))

        model = [
            nn.ReflectionPad1d(3),
            WNConv1d(input_size, mult * ngf, kernel_size=7, padding=0),
        ]

        # Upsample to raw audio scale
        for i, r in enumerate(ratios):
            model += [
                nn.LeakyReLU(0.2),
                WNConvTranspose1d(
                    mult * ngf,
                    mult * ngf // 2,
                    kernel_size=r * 2,
                    stride=r,
                    padding=r // 2 + r % 2,
                    output_padding=r % 2,
                ),
            ]

            for j in range(n_residual_layers):
                model += [ResnetBlock(mult * ngf // 2, dilation=3 ** j)]

            mult //= 2

        model += [
            nn.LeakyReLU(0.2),
            nn.ReflectionPad1d(3),
            WNConv1d(ngf, 1, kernel_size=7, padding=0),
            nn.Tanh(),
        ]

        self.model = nn.Sequential(*model)
        self.apply(weights_init)

    def forward(self, x):
        return self.model(x)


class NLayerDiscriminator(nn.Module):
    def __init__(self, ndf, n_layers, downsampling_factor):
        super().__init__()
        model = nn.ModuleDict()

        model["layer_0"] = nn.Sequential(
            nn.ReflectionPad1d(7),
            WNConv1d(1, ndf, kernel_size=15),
            nn.LeakyReLU(0.2, True),
        )

        nf = ndf
        stride = downsampling_factor
        for n in range(1, n_layers + 1):
            nf_prev = nf
            nf = min(nf * stride, 1024)

            model["layer_%d" % n] = nn.Sequential(
                WNConv1d(
                    nf_prev,
                    nf,
                    kernel_size=stride * 10 + 1,
                    stride=stride,
                    padding=stride * 5,
                    groups=nf_prev // 4,
                ),
                nn.LeakyReLU(0.2, True),
            )

        nf_prev = nf
        nf = min(nf * 2, 1024)
        model["layer_%d" % (n_layers + 1)] = nn.Sequential(
            WNConv1d(nf_prev, nf, kernel_size=5, stride=1, padding=2),
            nn.LeakyReLU(0.2, True),
        )

        model["layer_%d" % (n_layers + 2)] = WNConv1d(
            nf, 1, kernel_size=3, stride=1, padding=1
        )

        self.model = model

    def forward(self, x):
        results = []
        for key, layer in self.model.items():
            x = layer(x)
            results.append(x)
        return results


class Discriminator(nn.Module):
    def __init__(self, num_D, ndf, n_layers, downsampling_factor):
        super().__init__()
        self.model = nn.ModuleDict()
        for i in range(num_D):
            self.model[f"disc_{i}"] = NLayerDiscriminator(
                ndf, n_layers, downsampling_factor
            )

        self.downsample = nn.AvgPool1d(4, stride=2, padding=1, count_include_pad=False)
        self.apply(weights_init)

    def forward(self, x):
        results = []
        for key, disc in self.model.items():
            results.append(disc(x))
            x = self.downsample(x)
        return results


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed, std=0.3):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight_g"):
                p.copy_(torch.from_numpy(r.uniform(0.5, 1.5, tuple(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


class Args:
    n_mel_channels = 8
    ngf = 4
    n_residual_layers = 2
    ndf = 8
    num_D = 2
    n_layers_D = 1
    downsamp_factor = 2
    lambda_feat = 10
    seq_len = 128


args = Args()
torch.manual_seed(0)
netG = Generator(args.n_mel_channels, args.ngf, args.n_residual_layers)
netD = Discriminator(args.num_D, args.ndf, args.n_layers_D, args.downsamp_factor)
fft = Audio2Mel(n_fft=32, hop_length=8, win_length=32, sampling_rate=8000, n_mel_channels=args.n_mel_channels)
print("G params", sum(p.numel() for p in netG.parameters()), sorted({n.split(".")[-1] for n, _ in netG.named_parameters()}))
print("D", [n for n, _ in netD.model["disc_0"].model.named_children()], netD.model["disc_0"].model["layer_1"][0].groups,
      netD.downsample)
print("mel basis", tuple(fft.mel_basis.shape), fmt(fft.mel_basis.sum(1)), fmt(fft.window, 3))
load_numpy(netG, 0)
load_numpy(netD, 1)
optG = torch.optim.Adam(netG.parameters(), lr=1e-3, betas=(0.5, 0.9))
optD = torch.optim.Adam(netD.parameters(), lr=1e-3, betas=(0.5, 0.9))

rng = np.random.default_rng(2)
tt = np.arange(args.seq_len) / 8000.0
audio = np.stack([0.5 * np.sin(2 * np.pi * f * tt) + 0.05 * rng.normal(size=tt.shape)
                  for f in (440.0, 1000.0, 2500.0, 700.0)]).astype(np.float32)
batches = [torch.from_numpy(audio[i:i + 2]).unsqueeze(1) for i in (0, 2)]

for it, x_t in enumerate(batches * 2):
    s_t = fft(x_t).detach()
    x_pred_t = netG(s_t)

    with torch.no_grad():
        s_pred_t = fft(x_pred_t.detach())
        s_error = F.l1_loss(s_t, s_pred_t).item()

    #######################
    # Train Discriminator #
    #######################
    D_fake_det = netD(x_pred_t.detach())
    D_real = netD(x_t)

    loss_D = 0
    for scale in D_fake_det:
        loss_D += F.relu(1 + scale[-1]).mean()

    for scale in D_real:
        loss_D += F.relu(1 - scale[-1]).mean()

    netD.zero_grad()
    loss_D.backward()
    optD.step()

    ###################
    # Train Generator #
    ###################
    D_fake = netD(x_pred_t)

    loss_G = 0
    for scale in D_fake:
        loss_G += -scale[-1].mean()

    loss_feat = 0
    feat_weights = 4.0 / (args.n_layers_D + 1)
    D_weights = 1.0 / args.num_D
    wt = D_weights * feat_weights
    for i in range(args.num_D):
        for j in range(len(D_fake[i]) - 1):
            loss_feat += wt * F.l1_loss(D_fake[i][j], D_real[i][j].detach())

    netG.zero_grad()
    (loss_G + args.lambda_feat * loss_feat).backward()
    optG.step()
    print("it", it, "shapes", tuple(s_t.shape), tuple(x_pred_t.shape), [tuple(s[-1].shape) for s in D_real],
          f"D {loss_D.item():.4f} G {loss_G.item():.4f} feat {loss_feat.item():.4f} mel {s_error:.4f}")
print("G grad", fmt(netG.model[1].weight_g.grad), fmt(netG.model[3].weight_v.grad))
print("D w", fmt(netD.model["disc_1"].model["layer_1"][0].weight), fmt(netD.model["disc_0"].model["layer_0"][1].weight_g, 2))
x = torch.from_numpy(audio[:1, None, :9].copy())
print("avgpool", fmt(netD.downsample(x), 5))


# one step of the first scale's discriminator under torch.compile against
# the same step eagerly
disc = netD.model["disc_0"]
optd = torch.optim.Adam(disc.parameters(), lr=1e-3, betas=(0.5, 0.9))


def d_step(x_fake, x_real):
    loss_D = F.relu(1 + disc(x_fake)[-1]).mean() + F.relu(1 - disc(x_real)[-1]).mean()
    disc.zero_grad()
    loss_D.backward()
    optd.step()
    return loss_D


with torch.no_grad():
    x_fake = netG(fft(batches[0]))
state, opt_state = copy.deepcopy(disc.state_dict()), copy.deepcopy(optd.state_dict())
eager = [d_step(x_fake, batches[0]).item() for _ in range(2)]
after = {k: v.clone() for k, v in disc.state_dict().items()}
disc.load_state_dict(state)
optd.load_state_dict(opt_state)
cstep = torch.compile(d_step)
compiled = [cstep(x_fake, batches[0]).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(disc.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
