# 3D U-Net segmentation the way wolny/pytorch-3dunet writes it
# (pytorch3dunet/unet3d/buildingblocks.py, model.py, losses.py, trainer.py):
# create_conv building (name, module) pairs from an order string ('gcr',
# 'cbr', 'cgD': nn.Conv3d with a bias only without a norm, nn.GroupNorm with
# the groups dropped to 1 below num_groups channels, nn.BatchNorm3d before or
# after the conv, nn.ReLU(inplace=True), nn.Dropout3d), SingleConv /
# DoubleConv as nn.Sequential subclasses filled by add_module, the encoder's
# conv1_out_channels = out_channels // 2 rule, Encoder with
# nn.MaxPool3d(kernel_size=2), Decoder with InterpolateUpsampling
# (functools.partial over F.interpolate(x, size=size, mode='nearest')) and
# concat joining, or TransposeConvUpsampling (nn.ConvTranspose3d(kernel 3,
# stride 2, padding 1), whose 2n-1 output its Upsample resizes with
# F.interpolate(x, size=size)) and sum joining for ResNetBlock (conv1x1,
# SingleConvs, the non-linearity stripped from the last one, out +=
# residual), encoders_features.insert(0, x), final_conv, the final Sigmoid /
# Softmax(dim=1) applied only when testing (self.testing, as the repo's
# earlier model.py has it), number_of_features_per_level, the losses
# (flatten's permute(axis_order).contiguous().view(C, -1),
# compute_per_channel_dice with denominator.clamp(min=epsilon),
# _AbstractDiceLoss's registered None weight buffer and its normalization,
# DiceLoss, BCEDiceLoss with nn.BCEWithLogitsLoss, expand_as_one_hot with
# scatter_ and its ignore_index mask), and the trainer's Adam(weight_decay)
# with ReduceLROnPlateau(mode='min', factor, patience) stepped by the
# validation score.
# Changes for a CPU test: a tiny 1x1x8x8x8 volume and its label from numpy,
# f_maps [4, 8] (two levels), weights from numpy, dropout 0 in the compared
# runs (one Dropout3d pass after torch.manual_seed(0) beside them), a few steps; then one training
# step of a SingleConv under torch.compile against the same step eagerly.
import copy
from functools import partial

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
import torch.nn as nn
import torch.nn.functional as F


# buildingblocks.py
def create_conv(in_channels, out_channels, kernel_size, order, num_groups, padding, dropout_prob, is3d):
    assert 'c' in order, "Conv layer MUST be present"
    assert order[0] not in 'rle', 'Non-linearity cannot be the first operation in the layer'

    modules = []
    for i, char in enumerate(order):
        if char == 'r':
            modules.append(('ReLU', nn.ReLU(inplace=True)))
        elif char == 'l':
            modules.append(('LeakyReLU', nn.LeakyReLU(inplace=True)))
        elif char == 'e':
            modules.append(('ELU', nn.ELU(inplace=True)))
        elif char == 'c':
            # add learnable bias only in the absence of batchnorm/groupnorm
            bias = not ('g' in order or 'b' in order)
            if is3d:
                conv = nn.Conv3d(in_channels, out_channels, kernel_size, padding=padding, bias=bias)
            else:
                conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding, bias=bias)

            modules.append(('conv', conv))
        elif char == 'g':
            is_before_conv = i < order.index('c')
            if is_before_conv:
                num_channels = in_channels
            else:
                num_channels = out_channels

            # use only one group if the given number of groups is greater than the number of channels
            if num_channels < num_groups:
                num_groups = 1

            assert num_channels % num_groups == 0, f'Expected number of channels in input to be divisible by num_groups. num_channels={num_channels}, num_groups={num_groups}'
            modules.append(('groupnorm', nn.GroupNorm(num_groups=num_groups, num_channels=num_channels)))
        elif char == 'b':
            is_before_conv = i < order.index('c')
            if is3d:
                bn = nn.BatchNorm3d
            else:
                bn = nn.BatchNorm2d

            if is_before_conv:
                modules.append(('batchnorm', bn(in_channels)))
            else:
                modules.append(('batchnorm', bn(out_channels)))
        elif char == 'd':
            modules.append(('dropout', nn.Dropout(p=dropout_prob)))
        elif char == 'D':
            modules.append(('dropout3d', nn.Dropout3d(p=dropout_prob)))
        else:
            raise ValueError(f"Unsupported layer type '{char}'. MUST be one of ['b', 'g', 'r', 'l', 'e', 'c', 'd', 'D']")

    return modules


class SingleConv(nn.Sequential):

    def __init__(self, in_channels, out_channels, kernel_size=3, order='gcr', num_groups=8,
                 padding=1, dropout_prob=0.1, is3d=True):
        super(SingleConv, self).__init__()

        for name, module in create_conv(in_channels, out_channels, kernel_size, order,
                                        num_groups, padding, dropout_prob, is3d):
            self.add_module(name, module)


class DoubleConv(nn.Sequential):

    def __init__(self, in_channels, out_channels, encoder, kernel_size=3, order='gcr',
                 num_groups=8, padding=1, upscale=2, dropout_prob=0.1, is3d=True):
        super(DoubleConv, self).__init__()
        if encoder:
            # we're in the encoder path
            conv1_in_channels = in_channels
            if upscale == 1:
                conv1_out_channels = out_channels
            else:
                conv1_out_channels = out_channels // 2
            if conv1_out_channels < in_channels:
                conv1_out_channels = in_channels
            conv2_in_channels, conv2_out_channels = conv1_out_channels, out_channels
        else:
            # we're in the decoder path, decrease the number of channels in the 1st convolution
            conv1_in_channels, conv1_out_channels = in_channels, out_channels
            conv2_in_channels, conv2_out_channels = out_channels, out_channels

        # check if dropout_prob is a tuple and if so
        # split it for different dropout probabilities for each convolution.
        if isinstance(dropout_prob, list) or isinstance(dropout_prob, tuple):
            dropout_prob1 = dropout_prob[0]
            dropout_prob2 = dropout_prob[1]
        else:
            dropout_prob1 = dropout_prob2 = dropout_prob

        # conv1
        self.add_module('SingleConv1',
                        SingleConv(conv1_in_channels, conv1_out_channels, kernel_size, order, num_groups,
                                   padding=padding, dropout_prob=dropout_prob1, is3d=is3d))
        # conv2
        self.add_module('SingleConv2',
                        SingleConv(conv2_in_channels, conv2_out_channels, kernel_size, order, num_groups,
                                   padding=padding, dropout_prob=dropout_prob2, is3d=is3d))


class ResNetBlock(nn.Module):

    def __init__(self, in_channels, out_channels, kernel_size=3, order='cge', num_groups=8, is3d=True, **kwargs):
        super(ResNetBlock, self).__init__()

        if in_channels != out_channels:
            # conv1x1 for increasing the number of channels
            if is3d:
                self.conv1 = nn.Conv3d(in_channels, out_channels, 1)
            else:
                self.conv1 = nn.Conv2d(in_channels, out_channels, 1)
        else:
            self.conv1 = nn.Identity()

        self.conv2 = SingleConv(out_channels, out_channels, kernel_size=kernel_size, order=order,
                                num_groups=num_groups, is3d=is3d)
        # remove non-linearity from the 3rd convolution since it's going to be applied after adding the residual
        n_order = order
        for c in 'rel':
            n_order = n_order.replace(c, '')
        self.conv3 = SingleConv(out_channels, out_channels, kernel_size=kernel_size, order=n_order,
                                num_groups=num_groups, is3d=is3d)

        # create non-linearity separately
        if 'l' in order:
            self.non_linearity = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        elif 'e' in order:
            self.non_linearity = nn.ELU(inplace=True)
        else:
            self.non_linearity = nn.ReLU(inplace=True)

    def forward(self, x):
        # apply first convolution to bring the number of channels to out_channels
        residual = self.conv1(x)

        out = self.conv2(residual)
        out = self.conv3(out)

        out += residual
        out = self.non_linearity(out)

        return out


class Encoder(nn.Module):

    def __init__(self, in_channels, out_channels, conv_kernel_size=3, apply_pooling=True,
                 pool_kernel_size=2, pool_type='max', basic_module=DoubleConv, conv_layer_order='gcr',
                 num_groups=8, padding=1, upscale=2, dropout_prob=0.1, is3d=True):
        super(Encoder, self).__init__()
        assert pool_type in ['max', 'avg']
        if apply_pooling:
            if pool_type == 'max':
                if is3d:
                    self.pooling = nn.MaxPool3d(kernel_size=pool_kernel_size)
                else:
                    self.pooling = nn.MaxPool2d(kernel_size=pool_kernel_size)
            else:
                if is3d:
                    self.pooling = nn.AvgPool3d(kernel_size=pool_kernel_size)
                else:
                    self.pooling = nn.AvgPool2d(kernel_size=pool_kernel_size)
        else:
            self.pooling = None

        self.basic_module = basic_module(in_channels, out_channels,
                                         encoder=True,
                                         kernel_size=conv_kernel_size,
                                         order=conv_layer_order,
                                         num_groups=num_groups,
                                         padding=padding,
                                         upscale=upscale,
                                         dropout_prob=dropout_prob,
                                         is3d=is3d)

    def forward(self, x):
        if self.pooling is not None:
            x = self.pooling(x)
        x = self.basic_module(x)
        return x


class Decoder(nn.Module):

    def __init__(self, in_channels, out_channels, conv_kernel_size=3, scale_factor=2, basic_module=DoubleConv,
                 conv_layer_order='gcr', num_groups=8, padding=1, upsample='default',
                 dropout_prob=0.1, is3d=True):
        super(Decoder, self).__init__()

        # perform concat joining per default
        concat = True

        # don't adapt channels after join operation
        adapt_channels = False

        if upsample is not None and upsample != 'none':
            if upsample == 'default':
                if basic_module == DoubleConv:
                    upsample = 'nearest'  # use nearest neighbor interpolation for upsampling
                    concat = True  # use concat joining
                    adapt_channels = False  # don't adapt channels
                elif basic_module == ResNetBlock:
                    upsample = 'deconv'  # use deconvolution upsampling
                    concat = False  # use summation joining
                    adapt_channels = True  # adapt channels after joining

            # perform deconvolution upsampling if mode is deconv
            if upsample == 'deconv':
                self.upsampling = TransposeConvUpsampling(in_channels=in_channels, out_channels=out_channels,
                                                          kernel_size=conv_kernel_size, scale_factor=scale_factor,
                                                          is3d=is3d)
            else:
                self.upsampling = InterpolateUpsampling(mode=upsample)
        else:
            # no upsampling
            self.upsampling = NoUpsampling()

        # perform joining operation
        self.joining = partial(self._joining, concat=concat)

        # adapt the number of in_channels for the ResNetBlock
        if adapt_channels is True:
            in_channels = out_channels

        self.basic_module = basic_module(in_channels, out_channels,
                                         encoder=False,
                                         kernel_size=conv_kernel_size,
                                         order=conv_layer_order,
                                         num_groups=num_groups,
                                         padding=padding,
                                         dropout_prob=dropout_prob,
                                         is3d=is3d)

    def forward(self, encoder_features, x):
        x = self.upsampling(encoder_features=encoder_features, x=x)
        x = self.joining(encoder_features, x)
        x = self.basic_module(x)
        return x

    @staticmethod
    def _joining(encoder_features, x, concat):
        if concat:
            return torch.cat((encoder_features, x), dim=1)
        else:
            return encoder_features + x


class AbstractUpsampling(nn.Module):

    def __init__(self, upsample):
        super(AbstractUpsampling, self).__init__()
        self.upsample = upsample

    def forward(self, encoder_features, x):
        # get the spatial dimensions of the output given the encoder_features
        output_size = encoder_features.size()[2:]
        # upsample the input and return
        return self.upsample(x, output_size)


class InterpolateUpsampling(AbstractUpsampling):

    def __init__(self, mode='nearest'):
        upsample = partial(self._interpolate, mode=mode)
        super().__init__(upsample)

    @staticmethod
    def _interpolate(x, size, mode):
        return F.interpolate(x, size=size, mode=mode)


class TransposeConvUpsampling(AbstractUpsampling):

    class Upsample(nn.Module):
        def __init__(self, conv_transposed, is3d):
            super().__init__()
            self.conv_transposed = conv_transposed
            self.is3d = is3d

        def forward(self, x, size):
            x = self.conv_transposed(x)
            if self.is3d:
                output_size = x.size()[-3:]
            else:
                output_size = x.size()[-2:]
            if output_size != size:
                return F.interpolate(x, size=size)
            return x

    def __init__(self, in_channels, out_channels, kernel_size=3, scale_factor=2, is3d=True):
        # make sure that the output size reverses the MaxPool3d from the corresponding encoder
        if is3d:
            conv_transposed = nn.ConvTranspose3d(in_channels, out_channels, kernel_size=kernel_size,
                                                 stride=scale_factor, padding=1, bias=False)
        else:
            conv_transposed = nn.ConvTranspose2d(in_channels, out_channels, kernel_size=kernel_size,
                                                 stride=scale_factor, padding=1, bias=False)
        upsample = self.Upsample(conv_transposed, is3d)
        super().__init__(upsample)


class NoUpsampling(AbstractUpsampling):
    def __init__(self):
        super().__init__(self._no_upsampling)

    @staticmethod
    def _no_upsampling(x, size):
        return x


# model.py
def number_of_features_per_level(init_channel_number, num_levels):
    return [init_channel_number * 2 ** k for k in range(num_levels)]


def create_encoders(in_channels, f_maps, basic_module, conv_kernel_size, conv_padding, conv_upscale, dropout_prob,
                    layer_order, num_groups, pool_kernel_size, is3d):
    # create encoder path consisting of Encoder modules. Depth of the encoder is equal to `len(f_maps)`
    encoders = []
    for i, out_feature_num in enumerate(f_maps):
        if i == 0:
            # apply conv_coord only in the first encoder if any
            encoder = Encoder(in_channels, out_feature_num,
                              apply_pooling=False,  # skip pooling in the firs encoder
                              basic_module=basic_module,
                              conv_layer_order=layer_order,
                              conv_kernel_size=conv_kernel_size,
                              num_groups=num_groups,
                              padding=conv_padding,
                              upscale=conv_upscale,
                              dropout_prob=dropout_prob,
                              is3d=is3d)
        else:
            encoder = Encoder(f_maps[i - 1], out_feature_num,
                              basic_module=basic_module,
                              conv_layer_order=layer_order,
                              conv_kernel_size=conv_kernel_size,
                              num_groups=num_groups,
                              pool_kernel_size=pool_kernel_size,
                              padding=conv_padding,
                              upscale=conv_upscale,
                              dropout_prob=dropout_prob,
                              is3d=is3d)

        encoders.append(encoder)

    return nn.ModuleList(encoders)


def create_decoders(f_maps, basic_module, conv_kernel_size, conv_padding, layer_order,
                    num_groups, upsample, dropout_prob, is3d):
    # create decoder path consisting of the Decoder modules. The length of the decoder list is equal to `len(f_maps) - 1`
    decoders = []
    reversed_f_maps = list(reversed(f_maps))
    for i in range(len(reversed_f_maps) - 1):
        if basic_module == DoubleConv and upsample != 'deconv':
            in_feature_num = reversed_f_maps[i] + reversed_f_maps[i + 1]
        else:
            in_feature_num = reversed_f_maps[i]

        out_feature_num = reversed_f_maps[i + 1]

        decoder = Decoder(in_feature_num, out_feature_num,
                          basic_module=basic_module,
                          conv_layer_order=layer_order,
                          conv_kernel_size=conv_kernel_size,
                          num_groups=num_groups,
                          padding=conv_padding,
                          upsample=upsample,
                          dropout_prob=dropout_prob,
                          is3d=is3d)
        decoders.append(decoder)
    return nn.ModuleList(decoders)


class AbstractUNet(nn.Module):

    def __init__(self, in_channels, out_channels, final_sigmoid, basic_module, f_maps=64, layer_order='gcr',
                 num_groups=8, num_levels=4, is_segmentation=True, testing=False, conv_kernel_size=3,
                 pool_kernel_size=2, conv_padding=1, conv_upscale=2, upsample='default', dropout_prob=0.1,
                 is3d=True):
        super(AbstractUNet, self).__init__()

        self.testing = testing

        if isinstance(f_maps, int):
            f_maps = number_of_features_per_level(f_maps, num_levels=num_levels)

        assert isinstance(f_maps, list) or isinstance(f_maps, tuple)
        assert len(f_maps) > 1, "Required at least 2 levels in the U-Net"
        if 'g' in layer_order:
            assert num_groups is not None, "num_groups must be specified if GroupNorm is used"

        # create encoder path
        self.encoders = create_encoders(in_channels, f_maps, basic_module, conv_kernel_size,
                                        conv_padding, conv_upscale, dropout_prob,
                                        layer_order, num_groups, pool_kernel_size, is3d)

        # create decoder path
        self.decoders = create_decoders(f_maps, basic_module, conv_kernel_size, conv_padding,
                                        layer_order, num_groups, upsample, dropout_prob,
                                        is3d)

        # in the last layer a 1×1 convolution reduces the number of output channels to the number of labels
        if is3d:
            self.final_conv = nn.Conv3d(f_maps[0], out_channels, 1)
        else:
            self.final_conv = nn.Conv2d(f_maps[0], out_channels, 1)

        if is_segmentation:
            # semantic segmentation problem
            if final_sigmoid:
                self.final_activation = nn.Sigmoid()
            else:
                self.final_activation = nn.Softmax(dim=1)
        else:
            # regression problem
            self.final_activation = None

    def forward(self, x):
        # encoder part
        encoders_features = []
        for encoder in self.encoders:
            x = encoder(x)
            # reverse the encoder outputs to be aligned with the decoder
            encoders_features.insert(0, x)

        # remove the last encoder's output from the list
        # !!remember: it's the 1st in the list
        encoders_features = encoders_features[1:]

        # decoder part
        for decoder, encoder_features in zip(self.decoders, encoders_features):
            # pass the output from the corresponding encoder and the output
            # of the previous decoder
            x = decoder(encoder_features, x)

        x = self.final_conv(x)

        # apply final_activation (i.e. Sigmoid or Softmax) only during prediction.
        # During training the network outputs logits
        if self.testing and self.final_activation is not None:
            x = self.final_activation(x)

        return x


class UNet3D(AbstractUNet):

    def __init__(self, in_channels, out_channels, final_sigmoid=True, f_maps=64, layer_order='gcr',
                 num_groups=8, num_levels=4, is_segmentation=True, conv_padding=1, dropout_prob=0.1, **kwargs):
        super(UNet3D, self).__init__(in_channels=in_channels,
                                     out_channels=out_channels,
                                     final_sigmoid=final_sigmoid,
                                     basic_module=DoubleConv,
                                     f_maps=f_maps,
                                     layer_order=layer_order,
                                     num_groups=num_groups,
                                     num_levels=num_levels,
                                     is_segmentation=is_segmentation,
                                     conv_padding=conv_padding,
                                     dropout_prob=dropout_prob,
                                     is3d=True,
                                     **kwargs)


class ResidualUNet3D(AbstractUNet):

    def __init__(self, in_channels, out_channels, final_sigmoid=True, f_maps=64, layer_order='gcr',
                 num_groups=8, num_levels=5, is_segmentation=True, conv_padding=1, dropout_prob=0.1, **kwargs):
        super(ResidualUNet3D, self).__init__(in_channels=in_channels,
                                             out_channels=out_channels,
                                             final_sigmoid=final_sigmoid,
                                             basic_module=ResNetBlock,
                                             f_maps=f_maps,
                                             layer_order=layer_order,
                                             num_groups=num_groups,
                                             num_levels=num_levels,
                                             is_segmentation=is_segmentation,
                                             conv_padding=conv_padding,
                                             dropout_prob=dropout_prob,
                                             is3d=True,
                                             **kwargs)


# losses.py
def compute_per_channel_dice(input, target, epsilon=1e-6, weight=None):
    # input and target shapes must match
    assert input.size() == target.size(), "'input' and 'target' must have the same shape"

    input = flatten(input)
    target = flatten(target)
    target = target.float()

    # compute per channel Dice Coefficient
    intersect = (input * target).sum(-1)
    if weight is not None:
        intersect = weight * intersect

    # here we can use standard dice (input + target).sum(-1) or extension (see V-Net) (input^2 + target^2).sum(-1)
    denominator = (input * input).sum(-1) + (target * target).sum(-1)
    return 2 * (intersect / denominator.clamp(min=epsilon))


class _AbstractDiceLoss(nn.Module):

    def __init__(self, weight=None, normalization='sigmoid'):
        super(_AbstractDiceLoss, self).__init__()
        self.register_buffer('weight', weight)
        assert normalization in ['sigmoid', 'softmax', 'none']
        if normalization == 'sigmoid':
            self.normalization = nn.Sigmoid()
        elif normalization == 'softmax':
            self.normalization = nn.Softmax(dim=1)
        else:
            self.normalization = lambda x: x

    def dice(self, input, target, weight):
        # actual Dice score computation; to be implemented by the subclass
        raise NotImplementedError

    def forward(self, input, target):
        # get probabilities from logits
        input = self.normalization(input)

        # compute per channel Dice coefficient
        per_channel_dice = self.dice(input, target, weight=self.weight)

        # average Dice score across all channels/classes
        return 1. - torch.mean(per_channel_dice)


class DiceLoss(_AbstractDiceLoss):

    def __init__(self, weight=None, normalization='sigmoid'):
        super().__init__(weight, normalization)

    def dice(self, input, target, weight):
        return compute_per_channel_dice(input, target, weight=self.weight)


class BCEDiceLoss(nn.Module):

    def __init__(self, alpha, beta):
        super(BCEDiceLoss, self).__init__()
        self.alpha = alpha
        self.bce = nn.BCEWithLogitsLoss()
        self.beta = beta
        self.dice = DiceLoss()

    def forward(self, input, target):
        return self.alpha * self.bce(input, target) + self.beta * self.dice(input, target)


def flatten(tensor):
    # number of channels
    C = tensor.size(1)
    # new axis order
    axis_order = (1, 0) + tuple(range(2, tensor.dim()))
    # Transpose: (N, C, D, H, W) -> (C, N, D, H, W)
    transposed = tensor.permute(axis_order)
    # Flatten: (C, N, D, H, W) -> (C, N * D * H * W)
    return transposed.contiguous().view(C, -1)


def expand_as_one_hot(input, C, ignore_index=None):
    assert input.dim() == 4

    # expand the input tensor to Nx1xDxHxW before scattering
    input = input.unsqueeze(1)
    # create output tensor shape (NxCxDxHxW)
    shape = list(input.size())
    shape[1] = C

    if ignore_index is not None:
        # create ignore_index mask for the result
        mask = input.expand(shape) == ignore_index
        # clone the src tensor and zero out ignore_index in the input
        input = input.clone()
        input[input == ignore_index] = 0
        # scatter to get the one-hot tensor
        result = torch.zeros(shape).to(input.device).scatter_(1, input, 1)
        # bring back the ignore_index in the result
        result[mask] = ignore_index
        return result
    else:
        # scatter to get the one-hot tensor
        return torch.zeros(shape).to(input.device).scatter_(1, input, 1)


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed, std=0.3):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'norm' in name:
                continue
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


# a blob in a noisy volume; labels 0 background, 1 blob, 2 a slab
rng = np.random.default_rng(0)
zz, yy, xx = np.meshgrid(np.arange(8), np.arange(8), np.arange(8), indexing='ij')
blob = ((zz - 3.5) ** 2 + (yy - 4) ** 2 + (xx - 3) ** 2) < 7
slab = xx >= 6
label_np = np.where(blob, 1, np.where(slab, 2, 0)).astype(np.int64)
raw_np = (label_np * 0.8 + rng.normal(0, 0.5, label_np.shape)).astype(np.float32)
raw = torch.from_numpy(raw_np)[None, None]          # 1x1x8x8x8
label = torch.from_numpy(label_np)[None]            # 1x8x8x8

target = expand_as_one_hot(label, C=3)
print("one hot", tuple(target.shape), target.sum((0, 2, 3, 4)).tolist(), target.dtype)
ignored = label.clone()
ignored[0, 0, 0, :3] = -1
oh_ignored = expand_as_one_hot(ignored, C=3, ignore_index=-1)
print("ignore", oh_ignored[0, :, 0, 0, :4].tolist())
print("flatten", tuple(flatten(target).shape), flatten(torch.arange(24.).view(2, 3, 4))[1].tolist())
print("features", number_of_features_per_level(4, 3))

# the GroupNorm / conv / ReLU UNet3D with nearest upsampling and concat joining, Dice over softmax
model = UNet3D(in_channels=1, out_channels=3, final_sigmoid=False, f_maps=4, layer_order='gcr',
               num_groups=2, num_levels=2, dropout_prob=0.0)
load_numpy(model, 1)
print([name for name, _ in model.encoders[0].basic_module.named_children()],
      [name for name, _ in model.encoders[1].basic_module.SingleConv1.named_children()])
print("groups", [m.num_groups for m in model.modules() if isinstance(m, nn.GroupNorm)],
      "biases", [m.bias is not None for m in model.modules() if isinstance(m, nn.Conv3d)])
print("channels", [(m.in_channels, m.out_channels) for m in model.modules() if isinstance(m, nn.Conv3d)])
loss_criterion = DiceLoss(normalization='softmax')
print("buffers", dict(loss_criterion.named_buffers()), loss_criterion.weight)
optimizer = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=1e-5)
lr_scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode='min', factor=0.2, patience=1)

for step in range(4):
    model.train()
    optimizer.zero_grad()
    output = model(raw)
    loss = loss_criterion(output, target)
    loss.backward()
    optimizer.step()
    model.eval()
    model.testing = True
    with torch.no_grad():
        probs = model(raw)
        eval_score = 1 - compute_per_channel_dice(probs, target).mean()
    model.testing = False
    lr_scheduler.step(eval_score)
    print("step", step, f"{loss.item():.5f}", f"eval {eval_score.item():.5f}",
          f"lr {optimizer.param_groups[0]['lr']:.5f}", "sum1", bool(torch.allclose(probs.sum(1), torch.ones(1, 8, 8, 8))))
pred = probs.argmax(dim=1)
print("pred", [(pred == c).sum().item() for c in range(3)], "acc", f"{(pred == label).float().mean().item():.4f}",
      "logits", fmt(output[0, :, 3, 4, 3], 3))

# the BatchNorm residual UNet with deconv upsampling and sum joining, BCE + Dice over sigmoid
res = ResidualUNet3D(in_channels=1, out_channels=1, final_sigmoid=True, f_maps=[4, 8], layer_order='cbr',
                     num_levels=2, dropout_prob=0.0)
load_numpy(res, 2)
up = res.decoders[0].upsampling
print("deconv", type(up).__name__, tuple(up.upsample.conv_transposed(torch.zeros(1, 8, 4, 4, 4)).shape),
      res.decoders[0].joining.keywords, type(res.encoders[0].basic_module.conv1).__name__,
      [n for n, _ in res.encoders[1].basic_module.conv3.named_children()])
bce_dice = BCEDiceLoss(alpha=1.0, beta=1.0)
fg = (label > 0).float().unsqueeze(1)
opt2 = torch.optim.Adam(res.parameters(), lr=0.01, weight_decay=1e-4)
for step in range(3):
    res.train()
    opt2.zero_grad()
    out = res(raw)
    loss = bce_dice(out, fg)
    loss.backward()
    opt2.step()
    print("res step", step, f"{loss.item():.5f}", fmt(res.decoders[0].upsampling.upsample.conv_transposed.weight.grad, 3),
          fmt(res.encoders[1].basic_module.conv2.batchnorm.running_mean, 2))
res.eval()
res.testing = True
with torch.no_grad():
    p = res(raw)
print("res eval", f"{p.min().item():.4f}", f"{p.max().item():.4f}", fmt(bce_dice.dice.dice(p, fg, None), 1))

# Dropout3d zeroes whole channels (torch's draws, seeded)
drop = SingleConv(1, 4, order='cgD', num_groups=2, dropout_prob=0.5)
load_numpy(drop, 3)
d = drop(raw)
print("dropout3d", sorted(int(c) for c in (d.abs().sum((2, 3, 4)) == 0).sum(1).tolist()))

# one training step of a SingleConv under torch.compile against the same step eagerly
block = model.encoders[1].basic_module.SingleConv2
x_in = torch.from_numpy(rng.normal(0, 1, (1, 4, 4, 4, 4)).astype(np.float32))
block_opt = torch.optim.Adam(block.parameters(), lr=0.05)


def block_step(x):
    block_opt.zero_grad()
    loss = block(x).pow(2).mean()
    loss.backward()
    block_opt.step()
    return loss


state, opt_state = copy.deepcopy(block.state_dict()), copy.deepcopy(block_opt.state_dict())
eager = [block_step(x_in).item() for _ in range(2)]
after = {k: v.clone() for k, v in block.state_dict().items()}
block.load_state_dict(state)
block_opt.load_state_dict(opt_state)
cstep = torch.compile(block_step)
compiled = [cstep(x_in).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(block.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
