# kaituoxu/Conv-TasNet the way its src/conv_tasnet.py, utils.py,
# pit_criterion.py, data.py and solver.py write it: the Encoder's
# Conv1d(1, N, L, stride=L // 2, bias=False) + F.relu on
# torch.unsqueeze(mixture, 1); the TemporalConvNet of a ChannelwiseLayerNorm,
# a bottleneck 1x1 conv, R repeats of X TemporalBlocks (1x1 conv, PReLU, norm,
# DepthwiseSeparableConv: a dilated depthwise Conv1d with groups=in_channels,
# Chomp1d when causal, PReLU, norm, pointwise conv) with the residual added,
# and the mask conv viewed as [M, C, N, K] through F.relu or F.softmax;
# GlobalLayerNorm / ChannelwiseLayerNorm with their own gamma / beta
# Parameters of shape [1, N, 1] (torch.Tensor(...) filled by
# reset_parameters through .data), gLN's y.mean(dim=1, keepdim=True).mean(
# dim=2, keepdim=True) and torch.pow(var + EPS, 0.5), cLN's
# torch.var(..., unbiased=False); the Decoder's nn.Linear basis on
# torch.transpose(source_w, 2, 3) and utils.overlap_and_add with math.gcd,
# torch.arange(...).unfold, signal.new_tensor(frame).long(),
# signal.new_zeros and result.index_add_(-2, frame, subframe_signal);
# F.pad(est_source, (0, T_origin - T_conv)); xavier_normal_ over every
# p.dim() > 1; serialize / load_model_from_package with torch.save /
# torch.load(map_location=lambda storage, loc: storage); pit_criterion's
# cal_loss (get_mask written through mask[i, :, source_lengths[i]:] = 0,
# estimate_source *= mask in place, zero-mean SI-SNR by broadcasting,
# torch.log10, perms from itertools.permutations through
# source.new_tensor(..., dtype=torch.long), the one-hot perms by
# new_zeros(...).scatter_(2, index, 1), torch.einsum('bij,pij->bp', [...]),
# torch.argmax, torch.max(..., keepdim=True), max_snr /= C, reorder_source
# with torch.index_select and a loop of tensor-indexed copies);
# data.py's pad_list (xs[0].new(...).fill_(pad_value)) collate with
# permute((0, 2, 1)).contiguous(); solver.py's Adam step with
# clip_grad_norm_ and the learning-rate halving through
# optimizer.state_dict() / load_state_dict; utils.remove_pad.
# Changes for a CPU test: tiny hyper-parameters (N=B=H=8, L=4, P=3, X=2,
# R=1, C=2 instead of 256/20/256/512/3/8/4/2), synthetic two-source mixtures
# from numpy instead of wsj0-2mix through librosa, weights from numpy
# after the xavier init, a few steps; then one training step under
# torch.compile against the same step eagerly.
import copy
import math
import os
import tempfile
from itertools import permutations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

EPS = 1e-8


def fmt(x, n=4):
    return [f"{v:.4f}" for v in x.reshape(-1)[:n].tolist()]


# ---- src/utils.py
def overlap_and_add(signal, frame_step):
    """Reconstructs a signal from a framed representation.

    Adds potentially overlapping frames of a signal with shape
    `[..., frames, frame_length]`, offsetting subsequent frames by `frame_step`.
    The resulting tensor has shape `[..., output_size]` where

        output_size = (frames - 1) * frame_step + frame_length

    Based on https://github.com/tensorflow/tensorflow/blob/r1.12/tensorflow/contrib/signal/python/ops/reconstruction_ops.py
    """
    outer_dimensions = signal.size()[:-2]
    frames, frame_length = signal.size()[-2:]

    subframe_length = math.gcd(frame_length, frame_step)  # gcd=Greatest Common Divisor
    subframe_step = frame_step // subframe_length
    subframes_per_frame = frame_length // subframe_length
    output_size = frame_step * (frames - 1) + frame_length
    output_subframes = output_size // subframe_length

    subframe_signal = signal.view(*outer_dimensions, -1, subframe_length)

    frame = torch.arange(0, output_subframes).unfold(0, subframes_per_frame, subframe_step)
    frame = signal.new_tensor(frame).long()  # signal may in GPU or CPU
    frame = frame.contiguous().view(-1)

    result = signal.new_zeros(*outer_dimensions, output_subframes, subframe_length)
    result.index_add_(-2, frame, subframe_signal)
    result = result.view(*outer_dimensions, -1)
    return result


def remove_pad(inputs, inputs_lengths):
    """
    Args:
        inputs: torch.Tensor, [B, C, T] or [B, T], B is batch size
        inputs_lengths: torch.Tensor, [B]
    Returns:
        results: a list containing B items, each item is [C, T], T varies
    """
    results = []
    dim = inputs.dim()
    if dim == 3:
        C = inputs.size(1)
    for input, length in zip(inputs, inputs_lengths):
        if dim == 3:  # [B, C, T]
            results.append(input[:, :length].view(C, -1).cpu().numpy())
        elif dim == 2:  # [B, T]
            results.append(input[:length].view(-1).cpu().numpy())
    return results


# ---- src/conv_tasnet.py
class ConvTasNet(nn.Module):
    def __init__(self, N, L, B, H, P, X, R, C, norm_type="gLN", causal=False,
                 mask_nonlinear='relu'):
        """
        Args:
            N: Number of filters in autoencoder
            L: Length of the filters (in samples)
            B: Number of channels in bottleneck 1 × 1-conv block
            H: Number of channels in convolutional blocks
            P: Kernel size in convolutional blocks
            X: Number of convolutional blocks in each repeat
            R: Number of repeats
            C: Number of speakers
            norm_type: BN, gLN, cLN
            causal: causal or non-causal
            mask_nonlinear: use which non-linear function to generate mask
        """
        super(ConvTasNet, self).__init__()
        # Hyper-parameter
        self.N, self.L, self.B, self.H, self.P, self.X, self.R, self.C = N, L, B, H, P, X, R, C
        self.norm_type = norm_type
        self.causal = causal
        self.mask_nonlinear = mask_nonlinear
        # Components
        self.encoder = Encoder(L, N)
        self.separator = TemporalConvNet(N, B, H, P, X, R, C, norm_type, causal, mask_nonlinear)
        self.decoder = Decoder(N, L)
        # init
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_normal_(p)

    def forward(self, mixture):
        """
        Args:
            mixture: [M, T], M is batch size, T is #samples
        Returns:
            est_source: [M, C, T]
        """
        mixture_w = self.encoder(mixture)
        est_mask = self.separator(mixture_w)
        est_source = self.decoder(mixture_w, est_mask)

        # T changed after conv1d in encoder, fix it here
        T_origin = mixture.size(-1)
        T_conv = est_source.size(-1)
        est_source = F.pad(est_source, (0, T_origin - T_conv))
        return est_source

    @classmethod
    def load_model(cls, path):
        # Load to CPU
        package = torch.load(path, map_location=lambda storage, loc: storage)
        model = cls.load_model_from_package(package)
        return model

    @classmethod
    def load_model_from_package(cls, package):
        model = cls(package['N'], package['L'], package['B'], package['H'],
                    package['P'], package['X'], package['R'], package['C'],
                    norm_type=package['norm_type'], causal=package['causal'],
                    mask_nonlinear=package['mask_nonlinear'])
        model.load_state_dict(package['state_dict'])
        return model

    @staticmethod
    def serialize(model, optimizer, epoch, tr_loss=None, cv_loss=None):
        package = {
            # hyper-parameter
            'N': model.N, 'L': model.L, 'B': model.B, 'H': model.H,
            'P': model.P, 'X': model.X, 'R': model.R, 'C': model.C,
            'norm_type': model.norm_type, 'causal': model.causal,
            'mask_nonlinear': model.mask_nonlinear,
            # state
            'state_dict': model.state_dict(),
            'optim_dict': optimizer.state_dict(),
            'epoch': epoch
        }
        if tr_loss is not None:
            package['tr_loss'] = tr_loss
            package['cv_loss'] = cv_loss
        return package


class Encoder(nn.Module):
    """Estimation of the nonnegative mixture weight by a 1-D conv layer.
    """
    def __init__(self, L, N):
        super(Encoder, self).__init__()
        # Hyper-parameter
        self.L, self.N = L, N
        # Components
        # 50% overlap
        self.conv1d_U = nn.Conv1d(1, N, kernel_size=L, stride=L // 2, bias=False)

    def forward(self, mixture):
        """
        Args:
            mixture: [M, T], M is batch size, T is #samples
        Returns:
            mixture_w: [M, N, K], where K = (T-L)/(L/2)+1 = 2T/L-1
        """
        mixture = torch.unsqueeze(mixture, 1)  # [M, 1, T]
        mixture_w = F.relu(self.conv1d_U(mixture))  # [M, N, K]
        return mixture_w


class Decoder(nn.Module):
    def __init__(self, N, L):
        super(Decoder, self).__init__()
        # Hyper-parameter
        self.N, self.L = N, L
        # Components
        self.basis_signals = nn.Linear(N, L, bias=False)

    def forward(self, mixture_w, est_mask):
        """
        Args:
            mixture_w: [M, N, K]
            est_mask: [M, C, N, K]
        Returns:
            est_source: [M, C, T]
        """
        # D = W * M
        source_w = torch.unsqueeze(mixture_w, 1) * est_mask  # [M, C, N, K]
        source_w = torch.transpose(source_w, 2, 3)  # [M, C, K, N]
        # S = DV
        est_source = self.basis_signals(source_w)  # [M, C, K, L]
        est_source = overlap_and_add(est_source, self.L // 2)  # M x C x T
        return est_source


class TemporalConvNet(nn.Module):
    def __init__(self, N, B, H, P, X, R, C, norm_type="gLN", causal=False,
                 mask_nonlinear='relu'):
        super(TemporalConvNet, self).__init__()
        # Hyper-parameter
        self.C = C
        self.mask_nonlinear = mask_nonlinear
        # Components
        # [M, N, K] -> [M, N, K]
        layer_norm = ChannelwiseLayerNorm(N)
        # [M, N, K] -> [M, B, K]
        bottleneck_conv1x1 = nn.Conv1d(N, B, 1, bias=False)
        # [M, B, K] -> [M, B, K]
        repeats = []
        for r in range(R):
            blocks = []
            for x in range(X):
                dilation = 2**x
                padding = (P - 1) * dilation if causal else (P - 1) * dilation // 2
                blocks += [TemporalBlock(B, H, P, stride=1,
                                         padding=padding,
                                         dilation=dilation,
                                         norm_type=norm_type,
                                         causal=causal)]
            repeats += [nn.Sequential(*blocks)]
        temporal_conv_net = nn.Sequential(*repeats)
        # [M, B, K] -> [M, C*N, K]
        mask_conv1x1 = nn.Conv1d(B, C * N, 1, bias=False)
        # Put together
        self.network = nn.Sequential(layer_norm,
                                     bottleneck_conv1x1,
                                     temporal_conv_net,
                                     mask_conv1x1)

    def forward(self, mixture_w):
        """
        Keep this API same with TasNet
        Args:
            mixture_w: [M, N, K], M is batch size
        returns:
            est_mask: [M, C, N, K]
        """
        M, N, K = mixture_w.size()
        score = self.network(mixture_w)  # [M, N, K] -> [M, C*N, K]
        score = score.view(M, self.C, N, K)  # [M, C*N, K] -> [M, C, N, K]
        if self.mask_nonlinear == 'softmax':
            est_mask = F.softmax(score, dim=1)
        elif self.mask_nonlinear == 'relu':
            est_mask = F.relu(score)
        else:
            raise ValueError("Unsupported mask non-linear function")
        return est_mask


class TemporalBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size,
                 stride, padding, dilation, norm_type="gLN", causal=False):
        super(TemporalBlock, self).__init__()
        # [M, B, K] -> [M, H, K]
        conv1x1 = nn.Conv1d(in_channels, out_channels, 1, bias=False)
        prelu = nn.PReLU()
        norm = chose_norm(norm_type, out_channels)
        # [M, H, K] -> [M, B, K]
        dsconv = DepthwiseSeparableConv(out_channels, in_channels, kernel_size,
                                        stride, padding, dilation, norm_type,
                                        causal)
        # Put together
        self.net = nn.Sequential(conv1x1, prelu, norm, dsconv)

    def forward(self, x):
        """
        Args:
            x: [M, B, K]
        Returns:
            [M, B, K]
        """
        residual = x
        out = self.net(x)
        # TODO: when P = 3 here works fine, but when P = 2 maybe need to pad?
        return out + residual  # look like w/o F.relu is better than w/ F.relu
        # return F.relu(out + residual)


class DepthwiseSeparableConv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size,
                 stride, padding, dilation, norm_type="gLN", causal=False):
        super(DepthwiseSeparableConv, self).__init__()
        # Use `groups` option to implement depthwise convolution
        # [M, H, K] -> [M, H, K]
        depthwise_conv = nn.Conv1d(in_channels, in_channels, kernel_size,
                                   stride=stride, padding=padding,
                                   dilation=dilation, groups=in_channels,
                                   bias=False)
        if causal:
            chomp = Chomp1d(padding)
        prelu = nn.PReLU()
        norm = chose_norm(norm_type, in_channels)
        # [M, H, K] -> [M, B, K]
        pointwise_conv = nn.Conv1d(in_channels, out_channels, 1, bias=False)
        # Put together
        if causal:
            self.net = nn.Sequential(depthwise_conv, chomp, prelu, norm,
                                     pointwise_conv)
        else:
            self.net = nn.Sequential(depthwise_conv, prelu, norm,
                                     pointwise_conv)

    def forward(self, x):
        """
        Args:
            x: [M, H, K]
        Returns:
            result: [M, B, K]
        """
        return self.net(x)


class Chomp1d(nn.Module):
    """To ensure the output length is the same as the input.
    """
    def __init__(self, chomp_size):
        super(Chomp1d, self).__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        """
        Args:
            x: [M, H, Kpad]
        Returns:
            [M, H, K]
        """
        return x[:, :, :-self.chomp_size].contiguous()


def chose_norm(norm_type, channel_size):
    """The input of normlization will be (M, C, K), where M is batch size,
       C is channel size and K is sequence length.
    """
    if norm_type == "gLN":
        return GlobalLayerNorm(channel_size)
    elif norm_type == "cLN":
        return ChannelwiseLayerNorm(channel_size)
    else:  # norm_type == "BN":
        # Given input (M, C, K), nn.BatchNorm1d(C) will accept that input
        # as NCL and compute normalization over C.
        return nn.BatchNorm1d(channel_size)


# TODO: Use nn.LayerNorm to impl cLN to speed up
class ChannelwiseLayerNorm(nn.Module):
    """Channel-wise Layer Normalization (cLN)"""
    def __init__(self, channel_size):
        super(ChannelwiseLayerNorm, self).__init__()
        self.gamma = nn.Parameter(torch.Tensor(1, channel_size, 1))  # [1, N, 1]
        self.beta = nn.Parameter(torch.Tensor(1, channel_size, 1))  # [1, N, 1]
        self.reset_parameters()

    def reset_parameters(self):
        self.gamma.data.fill_(1)
        self.beta.data.zero_()

    def forward(self, y):
        """
        Args:
            y: [M, N, K], M is batch size, N is channel size, K is length
        Returns:
            cLN_y: [M, N, K]
        """
        mean = torch.mean(y, dim=1, keepdim=True)  # [M, 1, K]
        var = torch.var(y, dim=1, keepdim=True, unbiased=False)  # [M, 1, K]
        cLN_y = self.gamma * (y - mean) / torch.pow(var + EPS, 0.5) + self.beta
        return cLN_y


class GlobalLayerNorm(nn.Module):
    """Global Layer Normalization (gLN)"""
    def __init__(self, channel_size):
        super(GlobalLayerNorm, self).__init__()
        self.gamma = nn.Parameter(torch.Tensor(1, channel_size, 1))  # [1, N, 1]
        self.beta = nn.Parameter(torch.Tensor(1, channel_size, 1))  # [1, N, 1]
        self.reset_parameters()

    def reset_parameters(self):
        self.gamma.data.fill_(1)
        self.beta.data.zero_()

    def forward(self, y):
        """
        Args:
            y: [M, N, K], M is batch size, N is channel size, K is length
        Returns:
            gLN_y: [M, N, K]
        """
        # TODO: in torch 1.0, torch.mean() support dim list
        mean = y.mean(dim=1, keepdim=True).mean(dim=2, keepdim=True)  # [M, 1, 1]
        var = (torch.pow(y - mean, 2)).mean(dim=1, keepdim=True).mean(dim=2, keepdim=True)
        gLN_y = self.gamma * (y - mean) / torch.pow(var + EPS, 0.5) + self.beta
        return gLN_y


# ---- src/pit_criterion.py
def cal_loss(source, estimate_source, source_lengths):
    """
    Args:
        source: [B, C, T], B is batch size
        estimate_source: [B, C, T]
        source_lengths: [B]
    """
    max_snr, perms, max_snr_idx = cal_si_snr_with_pit(source,
                                                      estimate_source,
                                                      source_lengths)
    loss = 0 - torch.mean(max_snr)
    reorder_estimate_source = reorder_source(estimate_source, perms, max_snr_idx)
    return loss, max_snr, estimate_source, reorder_estimate_source


def cal_si_snr_with_pit(source, estimate_source, source_lengths):
    """Calculate SI-SNR with PIT training.
    Args:
        source: [B, C, T], B is batch size
        estimate_source: [B, C, T]
        source_lengths: [B], each item is between [0, T]
    """
    assert source.size() == estimate_source.size()
    B, C, T = source.size()
    # mask padding position along T
    mask = get_mask(source, source_lengths)
    estimate_source *= mask

    # Step 1. Zero-mean norm
    num_samples = source_lengths.view(-1, 1, 1).float()  # [B, 1, 1]
    mean_target = torch.sum(source, dim=2, keepdim=True) / num_samples
    mean_estimate = torch.sum(estimate_source, dim=2, keepdim=True) / num_samples
    zero_mean_target = source - mean_target
    zero_mean_estimate = estimate_source - mean_estimate
    # mask padding position along T
    zero_mean_target *= mask
    zero_mean_estimate *= mask

    # Step 2. SI-SNR with PIT
    # reshape to use broadcast
    s_target = torch.unsqueeze(zero_mean_target, dim=1)  # [B, 1, C, T]
    s_estimate = torch.unsqueeze(zero_mean_estimate, dim=2)  # [B, C, 1, T]
    # s_target = <s', s>s / ||s||^2
    pair_wise_dot = torch.sum(s_estimate * s_target, dim=3, keepdim=True)  # [B, C, C, 1]
    s_target_energy = torch.sum(s_target ** 2, dim=3, keepdim=True) + EPS  # [B, 1, C, 1]
    pair_wise_proj = pair_wise_dot * s_target / s_target_energy  # [B, C, C, T]
    # e_noise = s' - s_target
    e_noise = s_estimate - pair_wise_proj  # [B, C, C, T]
    # SI-SNR = 10 * log_10(||s_target||^2 / ||e_noise||^2)
    pair_wise_si_snr = torch.sum(pair_wise_proj ** 2, dim=3) / (torch.sum(e_noise ** 2, dim=3) + EPS)
    pair_wise_si_snr = 10 * torch.log10(pair_wise_si_snr + EPS)  # [B, C, C]

    # Get max_snr of each utterance
    # permutations, [C!, C]
    perms = source.new_tensor(list(permutations(range(C))), dtype=torch.long)
    # one-hot, [C!, C, C]
    index = torch.unsqueeze(perms, 2)
    perms_one_hot = source.new_zeros((*perms.size(), C)).scatter_(2, index, 1)
    # [B, C!] <- [B, C, C] einsum [C!, C, C], SI-SNR sum of each permutation
    snr_set = torch.einsum('bij,pij->bp', [pair_wise_si_snr, perms_one_hot])
    max_snr_idx = torch.argmax(snr_set, dim=1)  # [B]
    # max_snr = torch.gather(snr_set, 1, max_snr_idx.view(-1, 1))  # [B, 1]
    max_snr, _ = torch.max(snr_set, dim=1, keepdim=True)
    max_snr /= C
    return max_snr, perms, max_snr_idx


def reorder_source(source, perms, max_snr_idx):
    """
    Args:
        source: [B, C, T]
        perms: [C!, C], permutations
        max_snr_idx: [B], each item is between [0, C!)
    Returns:
        reorder_source: [B, C, T]
    """
    B, C, *_ = source.size()
    # [B, C], permutation whose SI-SNR is max of each utterance
    # for each utterance, reorder estimate source according this permutation
    max_snr_perm = torch.index_select(perms, dim=0, index=max_snr_idx)
    # print('max_snr_perm', max_snr_perm)
    # maybe use torch.gather()/index_select()/scatter() to impl this?
    reorder_source = torch.zeros_like(source)
    for b in range(B):
        for c in range(C):
            reorder_source[b, c] = source[b, max_snr_perm[b][c]]
    return reorder_source


def get_mask(source, source_lengths):
    """
    Args:
        source: [B, C, T]
        source_lengths: [B]
    Returns:
        mask: [B, 1, T]
    """
    B, _, T = source.size()
    mask = source.new_ones((B, 1, T))
    for i in range(B):
        mask[i, :, source_lengths[i]:] = 0
    return mask


# ---- src/data.py (the collate function; the original reads wav files)
def pad_list(xs, pad_value):
    n_batch = len(xs)
    max_len = max(x.size(0) for x in xs)
    pad = xs[0].new(n_batch, max_len, * xs[0].size()[1:]).fill_(pad_value)
    for i in range(n_batch):
        pad[i, :xs[i].size(0)] = xs[i]
    return pad


def _collate_fn(batch):
    mixtures, sources = batch
    # get batch of lengths of input sequences
    ilens = np.array([mix.shape[0] for mix in mixtures])

    # perform padding and convert to tensor
    pad_value = 0
    mixtures_pad = pad_list([torch.from_numpy(mix).float()
                             for mix in mixtures], pad_value)
    ilens = torch.from_numpy(ilens)
    sources_pad = pad_list([torch.from_numpy(s).float()
                            for s in sources], pad_value)
    # N x T x C -> N x C x T
    sources_pad = sources_pad.permute((0, 2, 1)).contiguous()
    return mixtures_pad, ilens, sources_pad


def make_batch(r, lengths, C=2):
    """Two-speaker utterances: sums of a few sinusoids with random pitch."""
    mixtures, sources = [], []
    for T in lengths:
        t = np.arange(T)
        s = np.stack([np.sin(2 * np.pi * r.uniform(0.02, 0.2) * t + r.uniform(0, 6))
                      * r.uniform(0.3, 1.0) for _ in range(C)], axis=1)  # T x C
        s = s + 0.05 * r.standard_normal(s.shape)
        sources.append(s.astype(np.float32))
        mixtures.append(s.sum(axis=1).astype(np.float64))
    return _collate_fn((mixtures, sources))


def load_numpy(model, r):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                fan = p[0].numel() + p.shape[0]
                p.copy_(torch.from_numpy(r.normal(0, np.sqrt(2.0 / fan), tuple(p.shape)).astype(np.float32)))


N, L, B, H, P, X, R, C = 8, 4, 8, 8, 3, 2, 1, 2
torch.manual_seed(0)
model = ConvTasNet(N, L, B, H, P, X, R, C, norm_type="gLN", causal=False, mask_nonlinear='relu')
print("params", sum(p.numel() for p in model.parameters()), len(list(model.parameters())),
      [n for n, _ in model.named_parameters()][:4])
std = float(torch.cat([p.view(-1) for p in model.parameters() if p.dim() > 1]).std())
print("xavier std [rng]", f"{std:.3f}")
load_numpy(model, np.random.default_rng(0))

data_r = np.random.default_rng(1)
batches = [make_batch(data_r, [40, 33]), make_batch(data_r, [38, 38]), make_batch(data_r, [40, 25])]
mix, ilens, src = batches[0]
print("batch", tuple(mix.shape), mix.dtype, ilens.tolist(), ilens.dtype, tuple(src.shape))

# overlap_and_add against a plain loop
frames = torch.from_numpy(np.random.default_rng(2).standard_normal((2, 3, 5, 4)).astype(np.float32))
ola = overlap_and_add(frames, 2)
ref = torch.zeros(2, 3, 2 * 4 + 4)
for k in range(5):
    ref[..., 2 * k:2 * k + 4] += frames[..., k, :]
print("overlap_and_add", tuple(ola.shape), torch.allclose(ola, ref, atol=1e-6), fmt(ola[1, 2], 4))
print("ola step 3", tuple(overlap_and_add(frames, 3).shape), fmt(overlap_and_add(frames, 3)[0, 0], 6))

mixture_w = model.encoder(mix)
est_mask = model.separator(mixture_w)
print("encoder", tuple(mixture_w.shape), "mask", tuple(est_mask.shape), fmt(est_mask[0, 1], 3))
est = model(mix)
print("estimate", tuple(est.shape), fmt(est[1, 0, 4:], 4), fmt(est[0, 1, -4:], 4))

optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=0.0)
max_norm = 5
half_lr = True
prev_val_loss = float("inf")
for epoch in range(3):
    model.train()
    total_loss = 0
    for i, (data) in enumerate(batches[:2]):
        padded_mixture, mixture_lengths, padded_source = data
        estimate_source = model(padded_mixture)
        loss, max_snr, estimate_source, reorder_estimate_source = \
            cal_loss(padded_source, estimate_source, mixture_lengths)
        optimizer.zero_grad()
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        total_loss += loss.item()
    # cross validation
    model.eval()
    with torch.no_grad():
        padded_mixture, mixture_lengths, padded_source = batches[2]
        estimate_source = model(padded_mixture)
        val_loss, max_snr, _, reorder = cal_loss(padded_source, estimate_source, mixture_lengths)
    val_loss = val_loss.item()
    if half_lr and val_loss >= prev_val_loss:
        optim_state = optimizer.state_dict()
        optim_state['param_groups'][0]['lr'] = optim_state['param_groups'][0]['lr'] / 2.0
        optimizer.load_state_dict(optim_state)
        print('Learning rate adjusted to: {lr:.6f}'.format(lr=optim_state['param_groups'][0]['lr']))
    prev_val_loss = val_loss
    print(f"epoch {epoch} train {total_loss / 2:.4f} val {val_loss:.4f} gnorm {gnorm.item():.4f}",
          fmt(max_snr, 2), fmt(reorder[0, :, 5], 2))

# the PIT reorder: swapping the estimate's channels gives the same loss and the same reorder
src2 = batches[1][2]
est2 = model(batches[1][0]).detach()
l1, s1, _, r1 = cal_loss(src2, est2.clone(), batches[1][1])
l2, s2, _, r2 = cal_loss(src2, est2.flip(1).contiguous(), batches[1][1])
print("pit", f"{l1.item():.4f}", f"{l2.item():.4f}", torch.allclose(r1, r2), torch.allclose(s1, s2))
masked = est2.clone()
cal_loss(src2, masked, torch.tensor([38, 20]))
print("masked tail", masked[1, :, 20:].abs().sum().item(), masked[1, :, :20].abs().sum().item() > 0)
print("remove_pad", [a.shape for a in remove_pad(batches[2][2], batches[2][1])],
      [a.shape for a in remove_pad(batches[2][0], batches[2][1])])

# serialize / load, causal cLN and softmax variants
tmp = tempfile.mkdtemp()
path = os.path.join(tmp, 'final.pth.tar')
torch.save(ConvTasNet.serialize(model, optimizer, 3, tr_loss=torch.tensor([1.0]), cv_loss=torch.tensor([2.0])), path)
model2 = ConvTasNet.load_model(path)
model.eval(); model2.eval()
print("reload", torch.equal(model2(mix), model(mix)), torch.load(path)['epoch'],
      sorted(torch.load(path)['optim_dict']['state'].keys())[:3])

for norm_type, causal, nl in (("cLN", True, 'softmax'), ("BN", True, 'relu')):
    m = ConvTasNet(N, L, B, H, P, X, R, C, norm_type=norm_type, causal=causal, mask_nonlinear=nl)
    load_numpy(m, np.random.default_rng(5))
    out = m(mix)
    (out ** 2).sum().backward()
    dw = m.separator.network[2][0][1].net[1].weight.grad
    print(norm_type, causal, nl, tuple(out.shape), fmt(out[0, 1, 10:], 3),
          [type(x).__name__ for x in m.separator.network[2][0][1].net[3].net], fmt(dw, 3))
    # causal: the first samples do not depend on later input
    x2 = mix.clone()
    x2[:, 20:] += 1.0
    with torch.no_grad():
        m.eval()
        same = torch.allclose(m(x2)[..., :16], m(mix)[..., :16], atol=1e-5)
    print("causal prefix unchanged", same)

try:
    TemporalConvNet(N, B, H, P, X, R, C, mask_nonlinear='tanh')(mixture_w)
except ValueError as e:
    print("ValueError", e)


# one training step under torch.compile against the same step eagerly
def train_step(padded_mixture, mixture_lengths, padded_source):
    estimate_source = model(padded_mixture)
    loss, max_snr, estimate_source, reorder_estimate_source = \
        cal_loss(padded_source, estimate_source, mixture_lengths)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return loss


model.train()
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(*batches[1]).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(*batches[1]).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
