# RAFT optical flow the way princeton-vl/RAFT writes it: core/utils/utils.py
# (bilinear_sampler: coords.split([1,1], dim=-1), 2*xgrid/(W-1) - 1,
# F.grid_sample(img, grid, align_corners=True) and its mask=True variant;
# coords_grid: torch.meshgrid(torch.arange(ht), torch.arange(wd)) stacked as
# coords[::-1]; upflow8; InputPadder with F.pad(mode='replicate')),
# core/corr.py (CorrBlock: the all-pairs torch.matmul(fmap1.transpose(1,2),
# fmap2) / torch.sqrt(torch.tensor(dim).float()), the avg_pool2d pyramid,
# the linspace / meshgrid(dy, dx) lookup window), core/extractor.py
# (ResidualBlock / BasicEncoder with instance / batch norm and the
# kaiming_normal_(mode='fan_out') init, the list input split back by
# torch.split), core/update.py (FlowHead, SepConvGRU's 1x5 / 5x1 convs,
# BasicMotionEncoder, BasicUpdateBlock with the .25-scaled mask head; and
# RAFT-small's BottleneckBlock / SmallEncoder, ConvGRU, SmallMotionEncoder,
# SmallUpdateBlock without a mask, upsampled by upflow8),
# core/raft.py (the `'dropout' not in self.args` Namespace checks, the
# torch.cuda.amp.autocast(enabled=False) blocks, torch.split of the context
# net into tanh / relu halves, coords1 = coords1.detach() in the refinement
# loop, convex upsampling with F.unfold(8 * flow, [3,3], padding=1) and
# mask.view(N, 1, 9, 8, 8, H, W) / softmax(dim=2) / permute(0, 1, 4, 2, 5, 3),
# test_mode), and train.py (sequence_loss with gamma**(n_predictions - i - 1),
# the bool `valid[:, None] * i_loss`, the EPE metrics over
# epe.view(-1)[valid.view(-1)], AdamW + OneCycleLR(pct_start=0.05,
# cycle_momentum=False, anneal_strategy='linear'), a disabled GradScaler's
# scale / unscale_ / step / update, clip_grad_norm_, freeze_bn). Changes for a
# CPU test: the channel widths divided by 8 (the 8x convex upsampling mask
# keeps its 64*9 channels), 128x128 images (the coarsest of 4 correlation
# levels needs 2x2 cells: bilinear_sampler divides by W-1), synthetic frame
# pairs (the second frame is the first moved by a known flow) from numpy,
# weights from numpy, 3 refinement iterations and a few steps; then a
# training step with the update block under torch.compile (compiling the whole
# step, both encoders' backward included, takes longer than this test's
# budget) against the same step eagerly.
import argparse
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

try:
    autocast = torch.cuda.amp.autocast
except:
    # dummy autocast for PyTorch < 1.6
    class autocast:
        def __init__(self, enabled):
            pass

        def __enter__(self):
            pass

        def __exit__(self, *args):
            pass

# channel widths of the original, divided by W_DIV for a CPU test
W_DIV = 8


# ---------------------------------------------------------------- core/utils/utils.py
class InputPadder:
    """ Pads images such that dimensions are divisible by 8 """
    def __init__(self, dims, mode='sintel'):
        self.ht, self.wd = dims[-2:]
        pad_ht = (((self.ht // 8) + 1) * 8 - self.ht) % 8
        pad_wd = (((self.wd // 8) + 1) * 8 - self.wd) % 8
        if mode == 'sintel':
            self._pad = [pad_wd//2, pad_wd - pad_wd//2, pad_ht//2, pad_ht - pad_ht//2]
        else:
            self._pad = [pad_wd//2, pad_wd - pad_wd//2, 0, pad_ht]

    def pad(self, *inputs):
        return [F.pad(x, self._pad, mode='replicate') for x in inputs]

    def unpad(self, x):
        ht, wd = x.shape[-2:]
        c = [self._pad[2], ht-self._pad[3], self._pad[0], wd-self._pad[1]]
        return x[..., c[0]:c[1], c[2]:c[3]]


def bilinear_sampler(img, coords, mode='bilinear', mask=False):
    """ Wrapper for grid_sample, uses pixel coordinates """
    H, W = img.shape[-2:]
    xgrid, ygrid = coords.split([1,1], dim=-1)
    xgrid = 2*xgrid/(W-1) - 1
    ygrid = 2*ygrid/(H-1) - 1

    grid = torch.cat([xgrid, ygrid], dim=-1)
    img = F.grid_sample(img, grid, align_corners=True)

    if mask:
        mask = (xgrid > -1) & (ygrid > -1) & (xgrid < 1) & (ygrid < 1)
        return img, mask.float()

    return img


def coords_grid(batch, ht, wd, device):
    coords = torch.meshgrid(torch.arange(ht, device=device), torch.arange(wd, device=device))
    coords = torch.stack(coords[::-1], dim=0).float()
    return coords[None].repeat(batch, 1, 1, 1)


def upflow8(flow, mode='bilinear'):
    new_size = (8 * flow.shape[2], 8 * flow.shape[3])
    return 8 * F.interpolate(flow, size=new_size, mode=mode, align_corners=True)


# ---------------------------------------------------------------- core/corr.py
class CorrBlock:
    def __init__(self, fmap1, fmap2, num_levels=4, radius=4):
        self.num_levels = num_levels
        self.radius = radius
        self.corr_pyramid = []

        # all pairs correlation
        corr = CorrBlock.corr(fmap1, fmap2)

        batch, h1, w1, dim, h2, w2 = corr.shape
        corr = corr.reshape(batch*h1*w1, dim, h2, w2)

        self.corr_pyramid.append(corr)
        for i in range(self.num_levels-1):
            corr = F.avg_pool2d(corr, 2, stride=2)
            self.corr_pyramid.append(corr)

    def __call__(self, coords):
        r = self.radius
        coords = coords.permute(0, 2, 3, 1)
        batch, h1, w1, _ = coords.shape

        out_pyramid = []
        for i in range(self.num_levels):
            corr = self.corr_pyramid[i]
            dx = torch.linspace(-r, r, 2*r+1, device=coords.device)
            dy = torch.linspace(-r, r, 2*r+1, device=coords.device)
            delta = torch.stack(torch.meshgrid(dy, dx), axis=-1)

            centroid_lvl = coords.reshape(batch*h1*w1, 1, 1, 2) / 2**i
            delta_lvl = delta.view(1, 2*r+1, 2*r+1, 2)
            coords_lvl = centroid_lvl + delta_lvl

            corr = bilinear_sampler(corr, coords_lvl)
            corr = corr.view(batch, h1, w1, -1)
            out_pyramid.append(corr)

        out = torch.cat(out_pyramid, dim=-1)
        return out.permute(0, 3, 1, 2).contiguous().float()

    @staticmethod
    def corr(fmap1, fmap2):
        batch, dim, ht, wd = fmap1.shape
        fmap1 = fmap1.view(batch, dim, ht*wd)
        fmap2 = fmap2.view(batch, dim, ht*wd)

        corr = torch.matmul(fmap1.transpose(1,2), fmap2)
        corr = corr.view(batch, ht, wd, 1, ht, wd)
        return corr / torch.sqrt(torch.tensor(dim).float())


# ---------------------------------------------------------------- core/extractor.py
class ResidualBlock(nn.Module):
    def __init__(self, in_planes, planes, norm_fn='group', stride=1):
        super(ResidualBlock, self).__init__()

        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, padding=1, stride=stride)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, padding=1)
        self.relu = nn.ReLU(inplace=True)

        num_groups = planes // 8

        if norm_fn == 'group':
            self.norm1 = nn.GroupNorm(num_groups=num_groups, num_channels=planes)
            self.norm2 = nn.GroupNorm(num_groups=num_groups, num_channels=planes)
            if not stride == 1:
                self.norm3 = nn.GroupNorm(num_groups=num_groups, num_channels=planes)

        elif norm_fn == 'batch':
            self.norm1 = nn.BatchNorm2d(planes)
            self.norm2 = nn.BatchNorm2d(planes)
            if not stride == 1:
                self.norm3 = nn.BatchNorm2d(planes)

        elif norm_fn == 'instance':
            self.norm1 = nn.InstanceNorm2d(planes)
            self.norm2 = nn.InstanceNorm2d(planes)
            if not stride == 1:
                self.norm3 = nn.InstanceNorm2d(planes)

        elif norm_fn == 'none':
            self.norm1 = nn.Sequential()
            self.norm2 = nn.Sequential()
            if not stride == 1:
                self.norm3 = nn.Sequential()

        if stride == 1:
            self.downsample = None

        else:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride), self.norm3)

    def forward(self, x):
        y = x
        y = self.relu(self.norm1(self.conv1(y)))
        y = self.relu(self.norm2(self.conv2(y)))

        if self.downsample is not None:
            x = self.downsample(x)

        return self.relu(x+y)


class BottleneckBlock(nn.Module):
    def __init__(self, in_planes, planes, norm_fn='group', stride=1):
        super(BottleneckBlock, self).__init__()

        self.conv1 = nn.Conv2d(in_planes, planes//4, kernel_size=1, padding=0)
        self.conv2 = nn.Conv2d(planes//4, planes//4, kernel_size=3, padding=1, stride=stride)
        self.conv3 = nn.Conv2d(planes//4, planes, kernel_size=1, padding=0)
        self.relu = nn.ReLU(inplace=True)

        num_groups = planes // 8

        if norm_fn == 'group':
            self.norm1 = nn.GroupNorm(num_groups=num_groups, num_channels=planes//4)
            self.norm2 = nn.GroupNorm(num_groups=num_groups, num_channels=planes//4)
            self.norm3 = nn.GroupNorm(num_groups=num_groups, num_channels=planes)
            if not stride == 1:
                self.norm4 = nn.GroupNorm(num_groups=num_groups, num_channels=planes)

        elif norm_fn == 'batch':
            self.norm1 = nn.BatchNorm2d(planes//4)
            self.norm2 = nn.BatchNorm2d(planes//4)
            self.norm3 = nn.BatchNorm2d(planes)
            if not stride == 1:
                self.norm4 = nn.BatchNorm2d(planes)

        elif norm_fn == 'instance':
            self.norm1 = nn.InstanceNorm2d(planes//4)
            self.norm2 = nn.InstanceNorm2d(planes//4)
            self.norm3 = nn.InstanceNorm2d(planes)
            if not stride == 1:
                self.norm4 = nn.InstanceNorm2d(planes)

        elif norm_fn == 'none':
            self.norm1 = nn.Sequential()
            self.norm2 = nn.Sequential()
            self.norm3 = nn.Sequential()
            if not stride == 1:
                self.norm4 = nn.Sequential()

        if stride == 1:
            self.downsample = None

        else:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride), self.norm4)

    def forward(self, x):
        y = x
        y = self.relu(self.norm1(self.conv1(y)))
        y = self.relu(self.norm2(self.conv2(y)))
        y = self.relu(self.norm3(self.conv3(y)))

        if self.downsample is not None:
            x = self.downsample(x)

        return self.relu(x+y)


class BasicEncoder(nn.Module):
    def __init__(self, output_dim=128, norm_fn='batch', dropout=0.0):
        super(BasicEncoder, self).__init__()
        self.norm_fn = norm_fn

        if self.norm_fn == 'group':
            self.norm1 = nn.GroupNorm(num_groups=8, num_channels=64 // W_DIV)
        elif self.norm_fn == 'batch':
            self.norm1 = nn.BatchNorm2d(64 // W_DIV)
        elif self.norm_fn == 'instance':
            self.norm1 = nn.InstanceNorm2d(64 // W_DIV)
        elif self.norm_fn == 'none':
            self.norm1 = nn.Sequential()

        self.conv1 = nn.Conv2d(3, 64 // W_DIV, kernel_size=7, stride=2, padding=3)
        self.relu1 = nn.ReLU(inplace=True)

        self.in_planes = 64 // W_DIV
        self.layer1 = self._make_layer(64 // W_DIV, stride=1)
        self.layer2 = self._make_layer(96 // W_DIV, stride=2)
        self.layer3 = self._make_layer(128 // W_DIV, stride=2)

        # output convolution
        self.conv2 = nn.Conv2d(128 // W_DIV, output_dim, kernel_size=1)

        self.dropout = None
        if dropout > 0:
            self.dropout = nn.Dropout2d(p=dropout)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
            elif isinstance(m, (nn.BatchNorm2d, nn.InstanceNorm2d, nn.GroupNorm)):
                if m.weight is not None:
                    nn.init.constant_(m.weight, 1)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)

    def _make_layer(self, dim, stride=1):
        layer1 = ResidualBlock(self.in_planes, dim, self.norm_fn, stride=stride)
        layer2 = ResidualBlock(dim, dim, self.norm_fn, stride=1)
        layers = (layer1, layer2)

        self.in_planes = dim
        return nn.Sequential(*layers)

    def forward(self, x):

        # if input is list, combine batch dimension
        is_list = isinstance(x, tuple) or isinstance(x, list)
        if is_list:
            batch_dim = x[0].shape[0]
            x = torch.cat(x, dim=0)

        x = self.conv1(x)
        x = self.norm1(x)
        x = self.relu1(x)

        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)

        x = self.conv2(x)

        if self.training and self.dropout is not None:
            x = self.dropout(x)

        if is_list:
            x = torch.split(x, [batch_dim, batch_dim], dim=0)

        return x


class SmallEncoder(nn.Module):
    def __init__(self, output_dim=128, norm_fn='batch', dropout=0.0):
        super(SmallEncoder, self).__init__()
        self.norm_fn = norm_fn

        if self.norm_fn == 'group':
            self.norm1 = nn.GroupNorm(num_groups=8, num_channels=32 // W_DIV)
        elif self.norm_fn == 'batch':
            self.norm1 = nn.BatchNorm2d(32 // W_DIV)
        elif self.norm_fn == 'instance':
            self.norm1 = nn.InstanceNorm2d(32 // W_DIV)
        elif self.norm_fn == 'none':
            self.norm1 = nn.Sequential()

        self.conv1 = nn.Conv2d(3, 32 // W_DIV, kernel_size=7, stride=2, padding=3)
        self.relu1 = nn.ReLU(inplace=True)

        self.in_planes = 32 // W_DIV
        self.layer1 = self._make_layer(32 // W_DIV, stride=1)
        self.layer2 = self._make_layer(64 // W_DIV, stride=2)
        self.layer3 = self._make_layer(96 // W_DIV, stride=2)

        self.dropout = None
        if dropout > 0:
            self.dropout = nn.Dropout2d(p=dropout)

        self.conv2 = nn.Conv2d(96 // W_DIV, output_dim, kernel_size=1)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')
            elif isinstance(m, (nn.BatchNorm2d, nn.InstanceNorm2d, nn.GroupNorm)):
                if m.weight is not None:
                    nn.init.constant_(m.weight, 1)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)

    def _make_layer(self, dim, stride=1):
        layer1 = BottleneckBlock(self.in_planes, dim, self.norm_fn, stride=stride)
        layer2 = BottleneckBlock(dim, dim, self.norm_fn, stride=1)
        layers = (layer1, layer2)

        self.in_planes = dim
        return nn.Sequential(*layers)

    def forward(self, x):

        # if input is list, combine batch dimension
        is_list = isinstance(x, tuple) or isinstance(x, list)
        if is_list:
            batch_dim = x[0].shape[0]
            x = torch.cat(x, dim=0)

        x = self.conv1(x)
        x = self.norm1(x)
        x = self.relu1(x)

        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.conv2(x)

        if self.training and self.dropout is not None:
            x = self.dropout(x)

        if is_list:
            x = torch.split(x, [batch_dim, batch_dim], dim=0)

        return x


# ---------------------------------------------------------------- core/update.py
class FlowHead(nn.Module):
    def __init__(self, input_dim=128, hidden_dim=256):
        super(FlowHead, self).__init__()
        self.conv1 = nn.Conv2d(input_dim, hidden_dim, 3, padding=1)
        self.conv2 = nn.Conv2d(hidden_dim, 2, 3, padding=1)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.conv2(self.relu(self.conv1(x)))


class ConvGRU(nn.Module):
    def __init__(self, hidden_dim=128, input_dim=192+128):
        super(ConvGRU, self).__init__()
        self.convz = nn.Conv2d(hidden_dim+input_dim, hidden_dim, 3, padding=1)
        self.convr = nn.Conv2d(hidden_dim+input_dim, hidden_dim, 3, padding=1)
        self.convq = nn.Conv2d(hidden_dim+input_dim, hidden_dim, 3, padding=1)

    def forward(self, h, x):
        hx = torch.cat([h, x], dim=1)

        z = torch.sigmoid(self.convz(hx))
        r = torch.sigmoid(self.convr(hx))
        q = torch.tanh(self.convq(torch.cat([r*h, x], dim=1)))

        h = (1-z) * h + z * q
        return h


class SepConvGRU(nn.Module):
    def __init__(self, hidden_dim=128, input_dim=192+128):
        super(SepConvGRU, self).__init__()
        self.convz1 = nn.Conv2d(hidden_dim+input_dim, hidden_dim, (1,5), padding=(0,2))
        self.convr1 = nn.Conv2d(hidden_dim+input_dim, hidden_dim, (1,5), padding=(0,2))
        self.convq1 = nn.Conv2d(hidden_dim+input_dim, hidden_dim, (1,5), padding=(0,2))

        self.convz2 = nn.Conv2d(hidden_dim+input_dim, hidden_dim, (5,1), padding=(2,0))
        self.convr2 = nn.Conv2d(hidden_dim+input_dim, hidden_dim, (5,1), padding=(2,0))
        self.convq2 = nn.Conv2d(hidden_dim+input_dim, hidden_dim, (5,1), padding=(2,0))

    def forward(self, h, x):
        # horizontal
        hx = torch.cat([h, x], dim=1)
        z = torch.sigmoid(self.convz1(hx))
        r = torch.sigmoid(self.convr1(hx))
        q = torch.tanh(self.convq1(torch.cat([r*h, x], dim=1)))
        h = (1-z) * h + z * q

        # vertical
        hx = torch.cat([h, x], dim=1)
        z = torch.sigmoid(self.convz2(hx))
        r = torch.sigmoid(self.convr2(hx))
        q = torch.tanh(self.convq2(torch.cat([r*h, x], dim=1)))
        h = (1-z) * h + z * q

        return h


class SmallMotionEncoder(nn.Module):
    def __init__(self, args):
        super(SmallMotionEncoder, self).__init__()
        cor_planes = args.corr_levels * (2*args.corr_radius + 1)**2
        self.convc1 = nn.Conv2d(cor_planes, 96 // W_DIV, 1, padding=0)
        self.convf1 = nn.Conv2d(2, 64 // W_DIV, 7, padding=3)
        self.convf2 = nn.Conv2d(64 // W_DIV, 32 // W_DIV, 3, padding=1)
        self.conv = nn.Conv2d(128 // W_DIV, 80 // W_DIV, 3, padding=1)

    def forward(self, flow, corr):
        cor = F.relu(self.convc1(corr))
        flo = F.relu(self.convf1(flow))
        flo = F.relu(self.convf2(flo))
        cor_flo = torch.cat([cor, flo], dim=1)
        out = F.relu(self.conv(cor_flo))
        return torch.cat([out, flow], dim=1)


class BasicMotionEncoder(nn.Module):
    def __init__(self, args):
        super(BasicMotionEncoder, self).__init__()
        cor_planes = args.corr_levels * (2*args.corr_radius + 1)**2
        self.convc1 = nn.Conv2d(cor_planes, 256 // W_DIV, 1, padding=0)
        self.convc2 = nn.Conv2d(256 // W_DIV, 192 // W_DIV, 3, padding=1)
        self.convf1 = nn.Conv2d(2, 128 // W_DIV, 7, padding=3)
        self.convf2 = nn.Conv2d(128 // W_DIV, 64 // W_DIV, 3, padding=1)
        self.conv = nn.Conv2d((64+192) // W_DIV, 128 // W_DIV - 2, 3, padding=1)

    def forward(self, flow, corr):
        cor = F.relu(self.convc1(corr))
        cor = F.relu(self.convc2(cor))
        flo = F.relu(self.convf1(flow))
        flo = F.relu(self.convf2(flo))

        cor_flo = torch.cat([cor, flo], dim=1)
        out = F.relu(self.conv(cor_flo))
        return torch.cat([out, flow], dim=1)


class SmallUpdateBlock(nn.Module):
    def __init__(self, args, hidden_dim=96):
        super(SmallUpdateBlock, self).__init__()
        self.encoder = SmallMotionEncoder(args)
        self.gru = ConvGRU(hidden_dim=hidden_dim, input_dim=80 // W_DIV + 2 + 64 // W_DIV)
        self.flow_head = FlowHead(hidden_dim, hidden_dim=128 // W_DIV)

    def forward(self, net, inp, corr, flow):
        motion_features = self.encoder(flow, corr)
        inp = torch.cat([inp, motion_features], dim=1)
        net = self.gru(net, inp)
        delta_flow = self.flow_head(net)

        return net, None, delta_flow


class BasicUpdateBlock(nn.Module):
    def __init__(self, args, hidden_dim=128, input_dim=128):
        super(BasicUpdateBlock, self).__init__()
        self.args = args
        self.encoder = BasicMotionEncoder(args)
        self.gru = SepConvGRU(hidden_dim=hidden_dim, input_dim=128 // W_DIV + hidden_dim)
        self.flow_head = FlowHead(hidden_dim, hidden_dim=256 // W_DIV)

        self.mask = nn.Sequential(
            nn.Conv2d(128 // W_DIV, 256 // W_DIV, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256 // W_DIV, 64*9, 1, padding=0))

    def forward(self, net, inp, corr, flow, upsample=True):
        motion_features = self.encoder(flow, corr)
        inp = torch.cat([inp, motion_features], dim=1)

        net = self.gru(net, inp)
        delta_flow = self.flow_head(net)

        # scale mask to balence gradients
        mask = .25 * self.mask(net)
        return net, mask, delta_flow


# ---------------------------------------------------------------- core/raft.py
class RAFT(nn.Module):
    def __init__(self, args):
        super(RAFT, self).__init__()
        self.args = args

        if args.small:
            self.hidden_dim = hdim = 96 // W_DIV
            self.context_dim = cdim = 64 // W_DIV
            args.corr_levels = 4
            args.corr_radius = 3

        else:
            self.hidden_dim = hdim = 128 // W_DIV
            self.context_dim = cdim = 128 // W_DIV
            args.corr_levels = 4
            args.corr_radius = 4

        if 'dropout' not in self.args:
            self.args.dropout = 0

        if 'alternate_corr' not in self.args:
            self.args.alternate_corr = False

        # feature network, context network, and update block
        if args.small:
            self.fnet = SmallEncoder(output_dim=128 // W_DIV, norm_fn='instance', dropout=args.dropout)
            self.cnet = SmallEncoder(output_dim=hdim+cdim, norm_fn='none', dropout=args.dropout)
            self.update_block = SmallUpdateBlock(self.args, hidden_dim=hdim)

        else:
            self.fnet = BasicEncoder(output_dim=256 // W_DIV, norm_fn='instance', dropout=args.dropout)
            self.cnet = BasicEncoder(output_dim=hdim+cdim, norm_fn='batch', dropout=args.dropout)
            self.update_block = BasicUpdateBlock(self.args, hidden_dim=hdim)

    def freeze_bn(self):
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.eval()

    def initialize_flow(self, img):
        """ Flow is represented as difference between two coordinate grids flow = coords1 - coords0"""
        N, C, H, W = img.shape
        coords0 = coords_grid(N, H//8, W//8, device=img.device)
        coords1 = coords_grid(N, H//8, W//8, device=img.device)

        # optical flow computed as difference: flow = coords1 - coords0
        return coords0, coords1

    def upsample_flow(self, flow, mask):
        """ Upsample flow field [H/8, W/8, 2] -> [H, W, 2] using convex combination """
        N, _, H, W = flow.shape
        mask = mask.view(N, 1, 9, 8, 8, H, W)
        mask = torch.softmax(mask, dim=2)

        up_flow = F.unfold(8 * flow, [3,3], padding=1)
        up_flow = up_flow.view(N, 2, 9, 1, 1, H, W)

        up_flow = torch.sum(mask * up_flow, dim=2)
        up_flow = up_flow.permute(0, 1, 4, 2, 5, 3)
        return up_flow.reshape(N, 2, 8*H, 8*W)

    def forward(self, image1, image2, iters=12, flow_init=None, upsample=True, test_mode=False):
        """ Estimate optical flow between pair of frames """

        image1 = 2 * (image1 / 255.0) - 1.0
        image2 = 2 * (image2 / 255.0) - 1.0

        image1 = image1.contiguous()
        image2 = image2.contiguous()

        hdim = self.hidden_dim
        cdim = self.context_dim

        # run the feature network
        with autocast(enabled=self.args.mixed_precision):
            fmap1, fmap2 = self.fnet([image1, image2])

        fmap1 = fmap1.float()
        fmap2 = fmap2.float()
        corr_fn = CorrBlock(fmap1, fmap2, radius=self.args.corr_radius)

        # run the context network
        with autocast(enabled=self.args.mixed_precision):
            cnet = self.cnet(image1)
            net, inp = torch.split(cnet, [hdim, cdim], dim=1)
            net = torch.tanh(net)
            inp = torch.relu(inp)

        coords0, coords1 = self.initialize_flow(image1)

        if flow_init is not None:
            coords1 = coords1 + flow_init

        flow_predictions = []
        for itr in range(iters):
            coords1 = coords1.detach()
            corr = corr_fn(coords1)  # index correlation volume

            flow = coords1 - coords0
            with autocast(enabled=self.args.mixed_precision):
                net, up_mask, delta_flow = self.update_block(net, inp, corr, flow)

            # F(t+1) = F(t) + \Delta(t)
            coords1 = coords1 + delta_flow

            # upsample predictions
            if up_mask is None:
                flow_up = upflow8(coords1 - coords0)
            else:
                flow_up = self.upsample_flow(coords1 - coords0, up_mask)

            flow_predictions.append(flow_up)

        if test_mode:
            return coords1 - coords0, flow_up

        return flow_predictions


# ---------------------------------------------------------------- train.py
MAX_FLOW = 400


def sequence_loss(flow_preds, flow_gt, valid, gamma=0.8, max_flow=MAX_FLOW):
    """ Loss function defined over sequence of flow predictions """

    n_predictions = len(flow_preds)
    flow_loss = 0.0

    # exlude invalid pixels and extremely large diplacements
    mag = torch.sum(flow_gt**2, dim=1).sqrt()
    valid = (valid >= 0.5) & (mag < max_flow)

    for i in range(n_predictions):
        i_weight = gamma**(n_predictions - i - 1)
        i_loss = (flow_preds[i] - flow_gt).abs()
        flow_loss += i_weight * (valid[:, None] * i_loss).mean()

    epe = torch.sum((flow_preds[-1] - flow_gt)**2, dim=1).sqrt()
    epe = epe.view(-1)[valid.view(-1)]

    metrics = {
        'epe': epe.mean().item(),
        '1px': (epe < 1).float().mean().item(),
        '3px': (epe < 3).float().mean().item(),
        '5px': (epe < 5).float().mean().item(),
    }

    return flow_loss, metrics


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def fetch_optimizer(args, model):
    """ Create the optimizer and learning rate scheduler """
    optimizer = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.wdecay, eps=args.epsilon)

    scheduler = optim.lr_scheduler.OneCycleLR(optimizer, args.lr, args.num_steps+100,
        pct_start=0.05, cycle_momentum=False, anneal_strategy='linear')

    return optimizer, scheduler


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed, std=0.1):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.from_numpy(r.normal(0, 1.0 / np.sqrt(fan_in), tuple(p.shape)).astype(np.float32)))
            elif 'norm' in name and name.endswith('weight'):
                p.copy_(torch.from_numpy(1 + r.normal(0, std, tuple(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


def make_pair(rng, n, ht, wd, flow):
    """Two frames: a smooth random texture and the same texture moved by `flow` (pixels)."""
    yy, xx = np.meshgrid(np.arange(ht), np.arange(wd), indexing='ij')
    imgs1, imgs2 = [], []
    for _ in range(n):
        phase = rng.uniform(0, 2 * np.pi, (3, 3))
        freq = rng.uniform(0.1, 0.4, (3, 2))

        def tex(x, y):
            return np.stack([127.5 + 100 * np.sin(freq[c, 0] * x + phase[c, 0]) * np.cos(freq[c, 1] * y + phase[c, 1])
                             for c in range(3)])
        imgs1.append(tex(xx, yy))
        imgs2.append(tex(xx - flow[0], yy - flow[1]))
    img1 = torch.from_numpy(np.stack(imgs1).astype(np.float32))
    img2 = torch.from_numpy(np.stack(imgs2).astype(np.float32))
    return img1, img2


# the helpers on their own
coords = coords_grid(2, 3, 4, device='cpu')
print("coords_grid", tuple(coords.shape), coords.dtype, coords[1, 0, 2].tolist(), coords[1, 1, :, 3].tolist())
img = torch.arange(2 * 5 * 6, dtype=torch.float32).view(1, 2, 5, 6)
pts = torch.tensor([[[[0.0, 0.0], [2.5, 1.5], [5.0, 4.0], [6.5, 1.0]]]])
sampled, inside = bilinear_sampler(img, pts, mask=True)
print("bilinear_sampler", tuple(sampled.shape), fmt(sampled, 8), inside.view(-1).tolist())
f1 = torch.from_numpy(np.random.default_rng(1).normal(0, 1, (1, 6, 8, 8)).astype(np.float32))
f2 = torch.from_numpy(np.random.default_rng(2).normal(0, 1, (1, 6, 8, 8)).astype(np.float32))
corr_fn = CorrBlock(f1, f2, num_levels=3, radius=2)
print("corr pyramid", [tuple(c.shape) for c in corr_fn.corr_pyramid], fmt(corr_fn.corr_pyramid[0][9], 3),
      fmt(corr_fn.corr_pyramid[2], 3))
look = corr_fn(coords_grid(1, 8, 8, device='cpu') + 0.25)
print("corr lookup", tuple(look.shape), fmt(look[0, :, 3, 4], 5), f"{look.abs().sum().item():.3f}")
padder = InputPadder((1, 3, 61, 58))
padded, = padder.pad(torch.arange(61 * 58, dtype=torch.float32).view(1, 1, 61, 58).expand(1, 3, 61, 58))
print("InputPadder", padder._pad, tuple(padded.shape), padded[0, 0, 0, :4].tolist(),
      tuple(padder.unpad(padded).shape), torch.equal(padder.unpad(padded)[0, 0], padded[0, 0, 1:62, 3:61]))
kitti = InputPadder((1, 3, 61, 58), mode='kitti')
print("kitti pad", kitti._pad)
up8 = upflow8(torch.tensor([[[[0.0, 1.0], [2.0, 3.0]], [[1.0, 1.0], [-1.0, -1.0]]]]))
print("upflow8", tuple(up8.shape), fmt(up8[0, 0, 3], 8))

# the model
args = argparse.Namespace(small=False, mixed_precision=False, lr=4e-4, wdecay=1e-5, epsilon=1e-8,
                          num_steps=20, clip=1.0, gamma=0.8, iters=3)
torch.manual_seed(0)
model = RAFT(args)
print("args", args.corr_levels, args.corr_radius, args.dropout, args.alternate_corr)
print("kaiming fan_out std", f"{model.fnet.conv1.weight.std().item():.2f}",
      "norm init", model.cnet.norm1.weight.sum().item(), model.cnet.norm1.bias.sum().item(),
      "instance affine", model.fnet.norm1.weight)
load_numpy(model, 0)
print("Parameter Count: %d" % count_parameters(model))

rng = np.random.default_rng(0)
true_flow = (1.5, -0.75)
image1, image2 = make_pair(rng, 2, 128, 128, true_flow)
flow_gt = torch.empty(2, 2, 128, 128)
flow_gt[:, 0] = true_flow[0]
flow_gt[:, 1] = true_flow[1]
valid = torch.ones(2, 128, 128)
valid[:, :, :2] = 0.0
valid[1, 120:] = 0.2
print("images", tuple(image1.shape), fmt(image1[0, 0, 5], 3), fmt(image2[1, 2, 7], 3))

fmaps = model.fnet([image1, image2])
print("fnet", type(fmaps).__name__, len(fmaps), tuple(fmaps[0].shape), fmt(fmaps[1][1, 3], 4))
model.eval()
with torch.no_grad():
    flow_low, flow_up = model(image1, image2, iters=args.iters, test_mode=True)
print("test_mode", tuple(flow_low.shape), tuple(flow_up.shape), fmt(flow_low[0, :, 2], 4), fmt(flow_up[1, 1, 60], 4))
with torch.no_grad():
    warm, _ = model(image1, image2, iters=1, flow_init=flow_low, test_mode=True)
print("warm start", fmt(warm[0, 0, 3], 4))
model.train()

optimizer, scheduler = fetch_optimizer(args, model)
scaler = torch.cuda.amp.GradScaler(enabled=args.mixed_precision)
print("lr schedule start", f"{scheduler.get_last_lr()[0]:.3e}", optimizer.param_groups[0]['initial_lr'],
      optimizer.param_groups[0]['max_lr'], optimizer.param_groups[0]['min_lr'])

total_steps = 0
for step in range(2):
    optimizer.zero_grad()
    flow_predictions = model(image1, image2, iters=args.iters)
    loss, metrics = sequence_loss(flow_predictions, flow_gt, valid, args.gamma)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)

    scaler.step(optimizer)
    scheduler.step()
    scaler.update()
    total_steps += 1
    print(f"step {total_steps} loss {loss.item():.4f} grad norm {norm.item():.4f} lr {scheduler.get_last_lr()[0]:.4e} "
          + " ".join(f"{k} {v:.4f}" for k, v in metrics.items()))
print("n predictions", len(flow_predictions), tuple(flow_predictions[-1].shape))
print("grads", fmt(model.update_block.gru.convz1.weight.grad), fmt(model.fnet.conv2.weight.grad),
      [f"{v:.4e}" for v in model.update_block.mask[2].bias.grad[:4].tolist()], fmt(model.cnet.conv1.weight.grad))
print("running mean", fmt(model.cnet.norm1.running_mean), model.cnet.norm1.num_batches_tracked.item())

# fine-tuning stages freeze the batch norms
model.freeze_bn()
print("frozen bn", model.cnet.norm1.training, model.cnet.layer1[0].norm1.training, model.fnet.norm1.training,
      model.training)


# RAFT-small: bottleneck encoders, ConvGRU, no mask (upflow8 upsampling)
small_args = argparse.Namespace(small=True, mixed_precision=False)
small = RAFT(small_args)
load_numpy(small, 5)
print("small", small_args.corr_radius, small_args.dropout, "Parameter Count: %d" % count_parameters(small))
small_opt = optim.AdamW(small.parameters(), lr=1e-3, weight_decay=1e-5, eps=1e-8)
small_preds = small(image1[:1], image2[:1], iters=2)
small_loss, small_metrics = sequence_loss(small_preds, flow_gt[:1], valid[:1], args.gamma)
small_loss.backward()
small_opt.step()
print("small loss", f"{small_loss.item():.4f}", f"epe {small_metrics['epe']:.4f}",
      fmt(small_preds[0][0, 0, 40], 4), fmt(small.update_block.gru.convq.weight.grad, 4))
small.eval()
with torch.no_grad():
    low, up = small(image1[1:], image2[1:], iters=2, test_mode=True)
print("small test_mode", tuple(low.shape), tuple(up.shape), fmt(low[0, :, 3], 4), torch.allclose(up, upflow8(low)))


# the update block (called args.iters times a forward with the same shapes)
# under torch.compile, in a training step checked against the same step
# eagerly
def sequence_loss_only(flow_preds, flow_gt, valid, gamma=0.8, max_flow=MAX_FLOW):
    # sequence_loss without its .item() metrics
    n_predictions = len(flow_preds)
    flow_loss = 0.0
    mag = torch.sum(flow_gt**2, dim=1).sqrt()
    valid = (valid >= 0.5) & (mag < max_flow)
    for i in range(n_predictions):
        i_weight = gamma**(n_predictions - i - 1)
        i_loss = (flow_preds[i] - flow_gt).abs()
        flow_loss += i_weight * (valid[:, None] * i_loss).mean()
    return flow_loss


def train_step(image1, image2, flow_gt, valid):
    optimizer.zero_grad()
    flow_predictions = model(image1, image2, iters=args.iters)
    loss = sequence_loss_only(flow_predictions, flow_gt, valid, args.gamma)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
batch = (image1[:1], image2[:1], flow_gt[:1], valid[:1])
eager = [train_step(*batch).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
update_block = model.update_block
model.update_block = torch.compile(update_block)
compiled = [train_step(*batch).item() for _ in range(2)]
model.update_block = update_block
print("compiled losses", [f"{v:.5f}" for v in compiled])
# (the feature net's convolutions feed InstanceNorm2d, which subtracts each
# channel's mean: their biases' gradients are rounding noise, which AdamW's
# normalization turns into steps of up to lr either way, in torch as here)
noise = {f"fnet.{n}.bias" for n, m in model.fnet.named_modules() if isinstance(m, nn.Conv2d)} - {"fnet.conv2.bias"}
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after
          if k not in noise), len(noise))
