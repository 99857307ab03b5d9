# EDSR super-resolution (sanghyun-son/EDSR-PyTorch, src/model/common.py,
# src/model/edsr.py, src/utility.py, src/loss/__init__.py), as written:
# default_conv, MeanShift (a 1x1 nn.Conv2d whose weight is torch.eye(3)
# .view(3, 3, 1, 1) / std and requires_grad = False), ResBlock with
# res_scale (body(x).mul(self.res_scale)), Upsampler (conv + nn.PixelShuffle
# for scale 2^n), EDSR's sub_mean / head / body / tail / add_mean,
# load_state_dict(strict) with the tail exception, the L1 loss, Adam
# (betas (0.9, 0.999), eps 1e-8) with MultiStepLR, quantize and calc_psnr
# (shave = scale + 6, the Y-channel gray coefficients convert.mul(...)),
# evaluation under torch.no_grad with chop-free forward. Written for this
# test: 2x upscaling of 12x12 crops, 4 feats, 2 resblocks, 4 steps; one
# compiled training step against eager.
import copy
import math

import torch
import torch.nn as nn


def default_conv(in_channels, out_channels, kernel_size, bias=True):
    return nn.Conv2d(
        in_channels, out_channels, kernel_size,
        padding=(kernel_size // 2), bias=bias)


class MeanShift(nn.Conv2d):
    def __init__(
        self, rgb_range,
        rgb_mean=(0.4488, 0.4371, 0.4040), rgb_std=(1.0, 1.0, 1.0), sign=-1):

        super(MeanShift, self).__init__(3, 3, kernel_size=1)
        std = torch.Tensor(rgb_std)
        self.weight.data = torch.eye(3).view(3, 3, 1, 1) / std.view(3, 1, 1, 1)
        self.bias.data = sign * rgb_range * torch.Tensor(rgb_mean) / std
        for p in self.parameters():
            p.requires_grad = False


class ResBlock(nn.Module):
    def __init__(
        self, conv, n_feats, kernel_size,
        bias=True, bn=False, act=nn.ReLU(True), res_scale=1):

        super(ResBlock, self).__init__()
        m = []
        for i in range(2):
            m.append(conv(n_feats, n_feats, kernel_size, bias=bias))
            if bn:
                m.append(nn.BatchNorm2d(n_feats))
            if i == 0:
                m.append(act)

        self.body = nn.Sequential(*m)
        self.res_scale = res_scale

    def forward(self, x):
        res = self.body(x).mul(self.res_scale)
        res += x

        return res


class Upsampler(nn.Sequential):
    def __init__(self, conv, scale, n_feats, bn=False, act=False, bias=True):

        m = []
        if (scale & (scale - 1)) == 0:    # Is scale = 2^n?
            for _ in range(int(math.log(scale, 2))):
                m.append(conv(n_feats, 4 * n_feats, 3, bias))
                m.append(nn.PixelShuffle(2))
                if bn:
                    m.append(nn.BatchNorm2d(n_feats))
                if act == 'relu':
                    m.append(nn.ReLU(True))
                elif act == 'prelu':
                    m.append(nn.PReLU(n_feats))

        elif scale == 3:
            m.append(conv(n_feats, 9 * n_feats, 3, bias))
            m.append(nn.PixelShuffle(3))
            if bn:
                m.append(nn.BatchNorm2d(n_feats))
            if act == 'relu':
                m.append(nn.ReLU(True))
            elif act == 'prelu':
                m.append(nn.PReLU(n_feats))
        else:
            raise NotImplementedError

        super(Upsampler, self).__init__(*m)


class EDSR(nn.Module):
    def __init__(self, args, conv=default_conv):
        super(EDSR, self).__init__()

        n_resblocks = args.n_resblocks
        n_feats = args.n_feats
        kernel_size = 3
        scale = args.scale[0]
        act = nn.ReLU(True)
        self.sub_mean = MeanShift(args.rgb_range)
        self.add_mean = MeanShift(args.rgb_range, sign=1)

        # define head module
        m_head = [conv(args.n_colors, n_feats, kernel_size)]

        # define body module
        m_body = [
            ResBlock(
                conv, n_feats, kernel_size, act=act, res_scale=args.res_scale
            ) for _ in range(n_resblocks)
        ]
        m_body.append(conv(n_feats, n_feats, kernel_size))

        # define tail module
        m_tail = [
            Upsampler(conv, scale, n_feats, act=False),
            conv(n_feats, args.n_colors, kernel_size)
        ]

        self.head = nn.Sequential(*m_head)
        self.body = nn.Sequential(*m_body)
        self.tail = nn.Sequential(*m_tail)

    def forward(self, x):
        x = self.sub_mean(x)
        x = self.head(x)

        res = self.body(x)
        res += x

        x = self.tail(res)
        x = self.add_mean(x)

        return x

    def load_state_dict(self, state_dict, strict=True):
        own_state = self.state_dict()
        for name, param in state_dict.items():
            if name in own_state:
                if isinstance(param, nn.Parameter):
                    param = param.data
                try:
                    own_state[name].copy_(param)
                except Exception:
                    if name.find('tail') == -1:
                        raise RuntimeError('While copying the parameter named {}, '
                                           'whose dimensions in the model are {} and '
                                           'whose dimensions in the checkpoint are {}.'
                                           .format(name, own_state[name].size(), param.size()))
            elif strict:
                if name.find('tail') == -1:
                    raise KeyError('unexpected key "{}" in state_dict'
                                   .format(name))


def quantize(img, rgb_range):
    pixel_range = 255 / rgb_range
    return img.mul(pixel_range).clamp(0, 255).round().div(pixel_range)


def calc_psnr(sr, hr, scale, rgb_range, dataset=None):
    if hr.nelement() == 1: return 0

    diff = (sr - hr) / rgb_range
    shave = scale + 6 if dataset is None else scale
    if diff.size(1) > 1:
        gray_coeffs = [65.738, 129.057, 25.064]
        convert = diff.new_tensor(gray_coeffs).view(1, 3, 1, 1) / 256
        diff = diff.mul(convert).sum(dim=1)

    valid = diff[..., shave:-shave, shave:-shave]
    mse = valid.pow(2).mean()

    return -10 * math.log10(mse)


class Args:
    n_resblocks = 2
    n_feats = 4
    scale = [2]
    rgb_range = 255
    n_colors = 3
    res_scale = 0.1
    lr = 1e-4 * 10
    milestones = [2, 3]
    gamma = 0.5


args = Args()
torch.manual_seed(0)
model = EDSR(args)
print("trainable", sum(p.numel() for p in model.parameters() if p.requires_grad),
      "frozen", sum(p.numel() for p in model.parameters() if not p.requires_grad))
x = torch.rand(2, 3, 24, 24) * args.rgb_range
hr = (x + x.roll(1, 2) + x.roll(1, 3)) / 3
lr_img = nn.functional.avg_pool2d(hr, 2)
trainable = filter(lambda x: x.requires_grad, model.parameters())
optimizer = torch.optim.Adam(trainable, lr=args.lr, betas=(0.9, 0.999), eps=1e-8)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=args.milestones, gamma=args.gamma)
loss_fn = nn.L1Loss()


def train_step(lr_img, hr):
    optimizer.zero_grad()
    sr = model(lr_img)
    loss = loss_fn(sr, hr)
    loss.backward()
    optimizer.step()
    return loss, sr


for epoch in range(4):
    model.train()
    loss, sr = train_step(lr_img, hr)
    scheduler.step()
    model.eval()
    with torch.no_grad():
        sr = quantize(model(lr_img), args.rgb_range)
        print("[Epoch {}]\tLoss {:.4f}\tlr {:.2e}\tPSNR {:.3f}".format(
            epoch + 1, loss.item(), scheduler.get_last_lr()[0], calc_psnr(sr, hr, args.scale[0], args.rgb_range)))

# a checkpoint from a x2 model loads into a x3 model, skipping the tail
ckpt = copy.deepcopy(model.state_dict())
args3 = Args()
args3.scale = [3]
model3 = EDSR(args3)
model3.load_state_dict(ckpt, strict=False)
print("x3 head equal", torch.equal(model3.head[0].weight, model.head[0].weight),
      "out", tuple(model3(lr_img[:1, :, :4, :4]).shape))

state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
model.train()
loss_c, sr_c = torch.compile(train_step)(lr_img, hr)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
loss_e, sr_e = train_step(lr_img, hr)
print("compiled loss {:.5f}".format(loss_c.item()))
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-4), torch.allclose(sr_c, sr_e, atol=1e-3),
      all(torch.allclose(after_c[k], v, atol=1e-5) for k, v in model.state_dict().items()))
