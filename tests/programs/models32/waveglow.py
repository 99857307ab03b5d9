# WaveGlow the way NVIDIA/waveglow writes it: glow.py (the @torch.jit.script
# fused_add_tanh_sigmoid_multiply taking n_channels as an IntTensor and
# reading n_channels[0], WaveGlowLoss summing log_s and log_det_W and
# normalizing by z.size(0) * z.size(1) * z.size(2), Invertible1x1Conv's
# orthonormal init from a QR with the sign flip when torch.det(W) < 0,
# `self.conv.weight.data = W`, batch_size * n_of_groups * torch.logdet(W),
# the reverse pass through W.float().inverse() wrapped in Variable and
# cached on self.W_inverse, F.conv1d(z, self.W_inverse, bias=None, stride=1,
# padding=0); WN with torch.nn.utils.weight_norm convs, dilations 2 ** i,
# the zero-initialized end conv, res_skip_acts[:, :self.n_channels, :];
# WaveGlow.forward's ConvTranspose1d upsampling and trimming,
# spect.unfold(2, n_group, n_group).permute(0, 2, 1, 3), the audio's
# unfold(1, n_group, n_group).permute(0, 2, 1), the early outputs
# audio[:, :self.n_early_size, :], the affine coupling
# torch.exp(log_s) * audio_1 + b; infer's reversed flows with sigma-scaled
# FloatTensor(...).normal_() noise; remove_weightnorm / remove) and
# train.py (load_checkpoint / save_checkpoint with the whole model object
# pickled, Adam, the "{}:\t{:.9f}" loss lines). Changes for a CPU test: a tiny
# WaveGlow (4 mel channels, n_group 4, 4 flows, early outputs every 2 flows,
# 2-layer WNs of 8 channels, an upsampling ConvTranspose1d of kernel 16 and
# stride 4 instead of 1024 / 256), weights and audio from numpy (the QR init
# run on a numpy matrix too), torch.cuda.FloatTensor as torch.FloatTensor,
# the checkpoint loaded with weights_only=False (torch >= 2.6 refuses the
# pickled module otherwise), a few Adam steps; infer's noise lines are
# compared at sigma=0 and marked [rng] otherwise; then one affine coupling's
# training step under torch.compile against the same step eagerly.
import copy
import os

import numpy as np
import torch
from torch.autograd import Variable
import torch.nn.functional as F


@torch.jit.script
def fused_add_tanh_sigmoid_multiply(input_a, input_b, n_channels):
    n_channels_int = n_channels[0]
    in_act = input_a+input_b
    t_act = torch.tanh(in_act[:, :n_channels_int, :])
    s_act = torch.sigmoid(in_act[:, n_channels_int:, :])
    acts = t_act * s_act
    return acts


class WaveGlowLoss(torch.nn.Module):
    def __init__(self, sigma=1.0):
        super(WaveGlowLoss, self).__init__()
        self.sigma = sigma

    def forward(self, model_output):
        z, log_s_list, log_det_W_list = model_output
        for i, log_s in enumerate(log_s_list):
            if i == 0:
                log_s_total = torch.sum(log_s)
                log_det_W_total = log_det_W_list[i]
            else:
                log_s_total = log_s_total + torch.sum(log_s)
                log_det_W_total += log_det_W_list[i]

        loss = torch.sum(z*z)/(2*self.sigma*self.sigma) - log_s_total - log_det_W_total
        return loss/(z.size(0)*z.size(1)*z.size(2))


class Invertible1x1Conv(torch.nn.Module):
    """
    The layer outputs both the convolution, and the log determinant
    of its weight matrix.  If reverse=True it does convolution with
    inverse
    """
    def __init__(self, c):
        super(Invertible1x1Conv, self).__init__()
        self.conv = torch.nn.Conv1d(c, c, kernel_size=1, stride=1, padding=0,
                                    bias=False)

        # Sample a random orthonormal matrix to initialize weights
        W = torch.linalg.qr(torch.FloatTensor(c, c).normal_())[0]

        # Ensure determinant is 1.0 not -1.0
        if torch.det(W) < 0:
            W[:,0] = -1*W[:,0]
        W = W.view(c, c, 1)
        self.conv.weight.data = W

    def forward(self, z, reverse=False):
        # shape
        batch_size, group_size, n_of_groups = z.size()

        W = self.conv.weight.squeeze()

        if reverse:
            if not hasattr(self, 'W_inverse'):
                # Reverse computation
                W_inverse = W.float().inverse()
                W_inverse = Variable(W_inverse[..., None])
                if z.type() == 'torch.cuda.HalfTensor':
                    W_inverse = W_inverse.half()
                self.W_inverse = W_inverse
            z = F.conv1d(z, self.W_inverse, bias=None, stride=1, padding=0)
            return z
        else:
            # Forward computation
            log_det_W = batch_size * n_of_groups * torch.logdet(W)
            z = self.conv(z)
            return z, log_det_W


class WN(torch.nn.Module):
    """
    This is the WaveNet like layer for the affine coupling.  The primary difference
    from WaveNet is the convolutions need not be causal.  There is also no dilation
    size reset.  The dilation only doubles on each layer
    """
    def __init__(self, n_in_channels, n_mel_channels, n_layers, n_channels,
                 kernel_size):
        super(WN, self).__init__()
        assert(kernel_size % 2 == 1)
        assert(n_channels % 2 == 0)
        self.n_layers = n_layers
        self.n_channels = n_channels
        self.in_layers = torch.nn.ModuleList()
        self.res_skip_layers = torch.nn.ModuleList()

        start = torch.nn.Conv1d(n_in_channels, n_channels, 1)
        start = torch.nn.utils.weight_norm(start, name='weight')
        self.start = start

        # Initializing last layer to 0 makes the affine coupling layers
        # do nothing at first.  This helps with training stability
        end = torch.nn.Conv1d(n_channels, 2*n_in_channels, 1)
        end.weight.data.zero_()
        end.bias.data.zero_()
        self.end = end

        cond_layer = torch.nn.Conv1d(n_mel_channels, 2*n_channels*n_layers, 1)
        self.cond_layer = torch.nn.utils.weight_norm(cond_layer, name='weight')

        for i in range(n_layers):
            dilation = 2 ** i
            padding = int((kernel_size*dilation - dilation)/2)
            in_layer = torch.nn.Conv1d(n_channels, 2*n_channels, kernel_size,
                                       dilation=dilation, padding=padding)
            in_layer = torch.nn.utils.weight_norm(in_layer, name='weight')
            self.in_layers.append(in_layer)


            # last one is not necessary
            if i < n_layers - 1:
                res_skip_channels = 2*n_channels
            else:
                res_skip_channels = n_channels
            res_skip_layer = torch.nn.Conv1d(n_channels, res_skip_channels, 1)
            res_skip_layer = torch.nn.utils.weight_norm(res_skip_layer, name='weight')
            self.res_skip_layers.append(res_skip_layer)

    def forward(self, forward_input):
        audio, spect = forward_input
        audio = self.start(audio)
        output = torch.zeros_like(audio)
        n_channels_tensor = torch.IntTensor([self.n_channels])

        spect = self.cond_layer(spect)

        for i in range(self.n_layers):
            spect_offset = i*2*self.n_channels
            acts = fused_add_tanh_sigmoid_multiply(
                self.in_layers[i](audio),
                spect[:,spect_offset:spect_offset+2*self.n_channels,:],
                n_channels_tensor)

            res_skip_acts = self.res_skip_layers[i](acts)
            if i < self.n_layers - 1:
                audio = audio + res_skip_acts[:,:self.n_channels,:]
                output = output + res_skip_acts[:,self.n_channels:,:]
            else:
                output = output + res_skip_acts

        return self.end(output)


class WaveGlow(torch.nn.Module):
    def __init__(self, n_mel_channels, n_flows, n_group, n_early_every,
                 n_early_size, WN_config, upsample_kernel=1024, upsample_stride=256):
        super(WaveGlow, self).__init__()

        self.upsample = torch.nn.ConvTranspose1d(n_mel_channels,
                                                 n_mel_channels,
                                                 upsample_kernel, stride=upsample_stride)
        assert(n_group % 2 == 0)
        self.n_flows = n_flows
        self.n_group = n_group
        self.n_early_every = n_early_every
        self.n_early_size = n_early_size
        self.WN = torch.nn.ModuleList()
        self.convinv = torch.nn.ModuleList()

        n_half = int(n_group/2)

        # Set up layers with the right sizes based on how many dimensions
        # have been output already
        n_remaining_channels = n_group
        for k in range(n_flows):
            if k % self.n_early_every == 0 and k > 0:
                n_half = n_half - int(self.n_early_size/2)
                n_remaining_channels = n_remaining_channels - self.n_early_size
            self.convinv.append(Invertible1x1Conv(n_remaining_channels))
            self.WN.append(WN(n_half, n_mel_channels*n_group, **WN_config))
        self.n_remaining_channels = n_remaining_channels  # Useful during inference

    def forward(self, forward_input):
        """
        forward_input[0] = mel_spectrogram:  batch x n_mel_channels x frames
        forward_input[1] = audio: batch x time
        """
        spect, audio = forward_input

        #  Upsample spectrogram to size of audio
        spect = self.upsample(spect)
        assert(spect.size(2) >= audio.size(1))
        if spect.size(2) > audio.size(1):
            spect = spect[:, :, :audio.size(1)]

        spect = spect.unfold(2, self.n_group, self.n_group).permute(0, 2, 1, 3)
        spect = spect.contiguous().view(spect.size(0), spect.size(1), -1).permute(0, 2, 1)

        audio = audio.unfold(1, self.n_group, self.n_group).permute(0, 2, 1)
        output_audio = []
        log_s_list = []
        log_det_W_list = []

        for k in range(self.n_flows):
            if k % self.n_early_every == 0 and k > 0:
                output_audio.append(audio[:,:self.n_early_size,:])
                audio = audio[:,self.n_early_size:,:]

            audio, log_det_W = self.convinv[k](audio)
            log_det_W_list.append(log_det_W)

            n_half = int(audio.size(1)/2)
            audio_0 = audio[:,:n_half,:]
            audio_1 = audio[:,n_half:,:]

            output = self.WN[k]((audio_0, spect))
            log_s = output[:, n_half:, :]
            b = output[:, :n_half, :]
            audio_1 = torch.exp(log_s)*audio_1 + b
            log_s_list.append(log_s)

            audio = torch.cat([audio_0, audio_1],1)

        output_audio.append(audio)
        return torch.cat(output_audio,1), log_s_list, log_det_W_list

    def infer(self, spect, sigma=1.0):
        spect = self.upsample(spect)
        # trim conv artifacts. maybe pad spec to kernel multiple
        time_cutoff = self.upsample.kernel_size[0] - self.upsample.stride[0]
        spect = spect[:, :, :-time_cutoff]

        spect = spect.unfold(2, self.n_group, self.n_group).permute(0, 2, 1, 3)
        spect = spect.contiguous().view(spect.size(0), spect.size(1), -1).permute(0, 2, 1)

        if spect.type() == 'torch.cuda.HalfTensor':
            audio = torch.cuda.HalfTensor(spect.size(0),
                                          self.n_remaining_channels,
                                          spect.size(2)).normal_()
        else:
            audio = torch.FloatTensor(spect.size(0),
                                      self.n_remaining_channels,
                                      spect.size(2)).normal_()

        audio = torch.autograd.Variable(sigma*audio)

        for k in reversed(range(self.n_flows)):
            n_half = int(audio.size(1)/2)
            audio_0 = audio[:,:n_half,:]
            audio_1 = audio[:,n_half:,:]

            output = self.WN[k]((audio_0, spect))

            s = output[:, n_half:, :]
            b = output[:, :n_half, :]
            audio_1 = (audio_1 - b)/torch.exp(s)
            audio = torch.cat([audio_0, audio_1],1)

            audio = self.convinv[k](audio, reverse=True)

            if k % self.n_early_every == 0 and k > 0:
                if spect.type() == 'torch.cuda.HalfTensor':
                    z = torch.cuda.HalfTensor(spect.size(0), self.n_early_size, spect.size(2)).normal_()
                else:
                    z = torch.FloatTensor(spect.size(0), self.n_early_size, spect.size(2)).normal_()
                audio = torch.cat((sigma*z, audio),1)

        audio = audio.permute(0,2,1).contiguous().view(audio.size(0), -1).data
        return audio

    @staticmethod
    def remove_weightnorm(model):
        waveglow = model
        for WN in waveglow.WN:
            WN.start = torch.nn.utils.remove_weight_norm(WN.start)
            WN.in_layers = remove(WN.in_layers)
            WN.cond_layer = torch.nn.utils.remove_weight_norm(WN.cond_layer)
            WN.res_skip_layers = remove(WN.res_skip_layers)
        return waveglow


def remove(conv_list):
    new_conv_list = torch.nn.ModuleList()
    for old_conv in conv_list:
        old_conv = torch.nn.utils.remove_weight_norm(old_conv)
        new_conv_list.append(old_conv)
    return new_conv_list


# ---------------------------------------------------------------- train.py
def load_checkpoint(checkpoint_path, model, optimizer):
    assert os.path.isfile(checkpoint_path)
    checkpoint_dict = torch.load(checkpoint_path, map_location='cpu', weights_only=False)
    iteration = checkpoint_dict['iteration']
    optimizer.load_state_dict(checkpoint_dict['optimizer'])
    model_for_loading = checkpoint_dict['model']
    model.load_state_dict(model_for_loading.state_dict())
    print("Loaded checkpoint '{}' (iteration {})" .format(
          checkpoint_path, iteration))
    return model, optimizer, iteration


def save_checkpoint(model, optimizer, learning_rate, iteration, filepath):
    print("Saving model and optimizer state at iteration {} to {}".format(
          iteration, filepath))
    model_for_saving = WaveGlow(**waveglow_config)
    model_for_saving.load_state_dict(model.state_dict())
    torch.save({'model': model_for_saving,
                'iteration': iteration,
                'optimizer': optimizer.state_dict(),
                'learning_rate': learning_rate}, filepath)


# ---------------------------------------------------------------- the test
def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


rng = np.random.default_rng(0)


def arr(*shape, std=1.0):
    return torch.from_numpy(rng.normal(0, std, shape).astype(np.float32))


acts = fused_add_tanh_sigmoid_multiply(arr(2, 6, 3), arr(2, 6, 3), torch.IntTensor([3]))
print("fused_add_tanh_sigmoid_multiply", tuple(acts.shape), fmt(acts[1], 4), torch.IntTensor([3]).dtype)

waveglow_config = dict(n_mel_channels=4, n_flows=4, n_group=4, n_early_every=2, n_early_size=2,
                       WN_config=dict(n_layers=2, n_channels=8, kernel_size=3),
                       upsample_kernel=16, upsample_stride=4)
torch.manual_seed(0)
model = WaveGlow(**waveglow_config)
inv = model.convinv[0]
W0 = inv.conv.weight.squeeze()
print("init W orthonormal", torch.allclose(W0 @ W0.T, torch.eye(4), atol=1e-5), "det > 0", bool(torch.det(W0) > 0))
print("convinv sizes", [c.conv.weight.shape[0] for c in model.convinv], "n_remaining", model.n_remaining_channels,
      "WN in", [w.start.weight_v.shape[1] for w in model.WN])
print("weight norm params", [n for n, _ in model.WN[0].named_parameters()][:6])
print("end zero", model.WN[1].end.weight.abs().sum().item(), "dilations",
      [l.dilation[0] for l in model.WN[0].in_layers], [l.padding[0] for l in model.WN[0].in_layers])

# "pretrained" weights from numpy; the 1x1 convs initialized as Invertible1x1Conv does, on numpy draws
with torch.no_grad():
    for n, p in model.named_parameters():
        if 'convinv' in n:
            c = p.shape[0]
            W = torch.linalg.qr(torch.from_numpy(rng.normal(0, 1, (c, c)).astype(np.float32)))[0]
            if torch.det(W) < 0:
                W[:, 0] = -1 * W[:, 0]
            p.copy_(W.view(c, c, 1))
        elif n.endswith('weight_g'):
            p.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, tuple(p.shape)).astype(np.float32)))
        else:
            p.copy_(arr(*p.shape, std=0.2))
print("det signs", [f"{torch.det(c.conv.weight.squeeze()).item():.4f}" for c in model.convinv],
      "W", fmt(model.convinv[2].conv.weight, 4))

mel = arr(3, 4, 6)
audio = arr(3, 20, std=0.5)
criterion = WaveGlowLoss(sigma=1.0)
z, log_s_list, log_det_W_list = model((mel, audio))
print("z", tuple(z.shape), fmt(z[2, :, 1], 4), "log_s", [tuple(s.shape) for s in log_s_list],
      "log_det_W", [f"{d.item():.4f}" for d in log_det_W_list])
loss = criterion((z, log_s_list, log_det_W_list))
loss.backward()
print("loss", f"{loss.item():.6f}", "grads: g", fmt(model.WN[0].in_layers[1].weight_g.grad, 3),
      "v", fmt(model.WN[3].cond_layer.weight_v.grad, 3), "W", fmt(model.convinv[1].conv.weight.grad, 3),
      "upsample", fmt(model.upsample.weight.grad, 3))

# the reverse pass inverts the forward, given the forward's z (infer's loop with z for the noise)
with torch.no_grad():
    spect = model.upsample(mel)[:, :, :20]
    spect = spect.unfold(2, model.n_group, model.n_group).permute(0, 2, 1, 3)
    spect = spect.contiguous().view(spect.size(0), spect.size(1), -1).permute(0, 2, 1)
    n_early = model.n_early_size
    x = z[:, (model.n_flows - 1) // model.n_early_every * n_early:, :]
    for k in reversed(range(model.n_flows)):
        n_half = int(x.size(1) / 2)
        out = model.WN[k]((x[:, :n_half, :], spect))
        x = torch.cat([x[:, :n_half, :], (x[:, n_half:, :] - out[:, :n_half, :]) / torch.exp(out[:, n_half:, :])], 1)
        x = model.convinv[k](x, reverse=True)
        if k % model.n_early_every == 0 and k > 0:
            x = torch.cat((z[:, (k // model.n_early_every - 1) * n_early:(k // model.n_early_every) * n_early, :], x), 1)
    rec = x.permute(0, 2, 1).contiguous().view(x.size(0), -1)
print("inverse recovers audio", torch.allclose(rec, audio, atol=1e-4), "W_inverse cached",
      tuple(model.convinv[0].W_inverse.shape), model.convinv[0].W_inverse.requires_grad)

with torch.no_grad():
    quiet = model.infer(mel, sigma=0.0)
    noisy = model.infer(mel, sigma=0.6)
print("infer sigma=0", tuple(quiet.shape), fmt(quiet[1, 4:], 4), "sigma=0.6", tuple(noisy.shape),
      bool(torch.isfinite(noisy).all()))

learning_rate = 1e-3
optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
model.zero_grad()
iteration = 0
model.train()
for epoch in range(2):
    for i in range(2):
        model.zero_grad()
        mel_b = torch.autograd.Variable(arr(2, 4, 6))
        audio_b = torch.autograd.Variable(arr(2, 20, std=0.5))
        outputs = model((mel_b, audio_b))
        loss = criterion(outputs)
        reduced_loss = loss.item()
        loss.backward()
        optimizer.step()
        print("{}:\t{:.9f}".format(iteration, reduced_loss))
        iteration += 1

checkpoint_path = "{}/waveglow_{}".format(".", iteration)
save_checkpoint(model, optimizer, learning_rate, iteration, checkpoint_path)
restored = WaveGlow(**waveglow_config)
ropt = torch.optim.Adam(restored.parameters(), lr=learning_rate)
restored, ropt, it = load_checkpoint(checkpoint_path, restored, ropt)
with torch.no_grad():
    print("restored", it, torch.equal(restored.WN[2].in_layers[0].weight_v, model.WN[2].in_layers[0].weight_v),
          len(ropt.state), torch.allclose(restored((mel, audio))[0], model((mel, audio))[0]))

# remove_weightnorm: the same outputs from plain weights
with torch.no_grad():
    before = model((mel, audio))[0]
    model = WaveGlow.remove_weightnorm(model)
    after = model((mel, audio))[0]
print("weight norm removed", [n for n, _ in model.WN[0].named_parameters()][:4], type(model.WN[0].in_layers).__name__,
      torch.allclose(before, after, atol=1e-5))


# one affine coupling's training step (a WN with its weight-normed convs and
# the scripted gate, exp(log_s) * audio_1 + b, WaveGlowLoss's z and log_s
# terms) under torch.compile against the same step eagerly (the
# Invertible1x1Conv's torch.logdet is LAPACK, eager only in tracec)
torch.manual_seed(0)
wn = WN(2, 4 * 4, n_layers=2, n_channels=8, kernel_size=3)
with torch.no_grad():
    for n, p in wn.named_parameters():
        p.copy_(arr(*p.shape, std=0.2) + (1.0 if n.endswith('weight_g') else 0.0))
sopt = torch.optim.Adam(wn.parameters(), lr=1e-3)
audio_c, spect_c = arr(2, 4, 5, std=0.5), arr(2, 16, 5)


def train_step(audio, spect):
    wn.zero_grad()
    n_half = int(audio.size(1)/2)
    audio_0 = audio[:,:n_half,:]
    audio_1 = audio[:,n_half:,:]
    output = wn((audio_0, spect))
    log_s = output[:, n_half:, :]
    b = output[:, :n_half, :]
    audio_1 = torch.exp(log_s)*audio_1 + b
    z = torch.cat([audio_0, audio_1],1)
    loss = (torch.sum(z*z)/2 - torch.sum(log_s))/(z.size(0)*z.size(1)*z.size(2))
    loss.backward()
    sopt.step()
    return loss


state, opt_state = copy.deepcopy(wn.state_dict()), copy.deepcopy(sopt.state_dict())
eager = [train_step(audio_c, spect_c).item() for _ in range(2)]
after = {k: v.clone() for k, v in wn.state_dict().items()}
wn.load_state_dict(state)
sopt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(audio_c, spect_c).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(wn.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
