# ESRGAN training (xinntao/BasicSR, basicsr/archs/rrdbnet_arch.py,
# basicsr/archs/discriminator_arch.py, basicsr/models/esrgan_model.py and
# basicsr/losses/gan_loss.py), as written: ResidualDenseBlock (five convs
# over torch.cat((x, x1, ...), 1), LeakyReLU(0.2), x5 * 0.2 + x), RRDB
# (three of them, out * 0.2 + x), RRDBNet's conv_first / body /
# conv_body / two F.interpolate(scale_factor=2, mode='nearest') upsamplers,
# default_init_weights (kaiming_normal_ scaled by 0.1 under torch.no_grad,
# bias fill_), a VGG-style discriminator (BatchNorm2d(affine=True),
# LeakyReLU, two linear layers); the model's optimize_parameters: the
# discriminator frozen by p.requires_grad = False for the generator step,
# pixel L1 loss, the relativistic average GAN loss (GANLoss 'vanilla':
# BCEWithLogitsLoss against target tensors made by
# input.new_ones(input.size()) * target_val) for both networks, real and
# fake discriminator losses backwarded separately with the fake detached,
# two Adam optimizers with MultiStepLR. Written for this test: 8x8 -> 32x32,
# 8 features, 1 RRDB, 3 iterations; one compiled generator step against
# eager. (The relativistic losses cancel the discriminator's last bias
# gradient but for rounding, which Adam steps by: out_d_real / out_d_fake
# follow the rounding of BCEWithLogits' backward, test_programs28_gaps.)
import copy

import torch
from torch import nn as nn
from torch.nn import functional as F
from torch.nn import init as init
from torch.nn.modules.batchnorm import _BatchNorm


@torch.no_grad()
def default_init_weights(module_list, scale=1, bias_fill=0, **kwargs):
    if not isinstance(module_list, list):
        module_list = [module_list]
    for module in module_list:
        for m in module.modules():
            if isinstance(m, nn.Conv2d):
                init.kaiming_normal_(m.weight, **kwargs)
                m.weight.data *= scale
                if m.bias is not None:
                    m.bias.data.fill_(bias_fill)
            elif isinstance(m, nn.Linear):
                init.kaiming_normal_(m.weight, **kwargs)
                m.weight.data *= scale
                if m.bias is not None:
                    m.bias.data.fill_(bias_fill)
            elif isinstance(m, _BatchNorm):
                init.constant_(m.weight, 1)
                if m.bias is not None:
                    m.bias.data.fill_(bias_fill)


def make_layer(basic_block, num_basic_block, **kwarg):
    layers = []
    for _ in range(num_basic_block):
        layers.append(basic_block(**kwarg))
    return nn.Sequential(*layers)


class ResidualDenseBlock(nn.Module):
    def __init__(self, num_feat=64, num_grow_ch=32):
        super(ResidualDenseBlock, self).__init__()
        self.conv1 = nn.Conv2d(num_feat, num_grow_ch, 3, 1, 1)
        self.conv2 = nn.Conv2d(num_feat + num_grow_ch, num_grow_ch, 3, 1, 1)
        self.conv3 = nn.Conv2d(num_feat + 2 * num_grow_ch, num_grow_ch, 3, 1, 1)
        self.conv4 = nn.Conv2d(num_feat + 3 * num_grow_ch, num_grow_ch, 3, 1, 1)
        self.conv5 = nn.Conv2d(num_feat + 4 * num_grow_ch, num_feat, 3, 1, 1)

        self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)

        # initialization
        default_init_weights([self.conv1, self.conv2, self.conv3, self.conv4, self.conv5], 0.1)

    def forward(self, x):
        x1 = self.lrelu(self.conv1(x))
        x2 = self.lrelu(self.conv2(torch.cat((x, x1), 1)))
        x3 = self.lrelu(self.conv3(torch.cat((x, x1, x2), 1)))
        x4 = self.lrelu(self.conv4(torch.cat((x, x1, x2, x3), 1)))
        x5 = self.conv5(torch.cat((x, x1, x2, x3, x4), 1))
        # Empirically, we use 0.2 to scale the residual for better performance
        return x5 * 0.2 + x


class RRDB(nn.Module):
    def __init__(self, num_feat, num_grow_ch=32):
        super(RRDB, self).__init__()
        self.rdb1 = ResidualDenseBlock(num_feat, num_grow_ch)
        self.rdb2 = ResidualDenseBlock(num_feat, num_grow_ch)
        self.rdb3 = ResidualDenseBlock(num_feat, num_grow_ch)

    def forward(self, x):
        out = self.rdb1(x)
        out = self.rdb2(out)
        out = self.rdb3(out)
        # Empirically, we use 0.2 to scale the residual for better performance
        return out * 0.2 + x


class RRDBNet(nn.Module):
    def __init__(self, num_in_ch, num_out_ch, scale=4, num_feat=64, num_block=23, num_grow_ch=32):
        super(RRDBNet, self).__init__()
        self.scale = scale
        self.conv_first = nn.Conv2d(num_in_ch, num_feat, 3, 1, 1)
        self.body = make_layer(RRDB, num_block, num_feat=num_feat, num_grow_ch=num_grow_ch)
        self.conv_body = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        # upsample
        self.conv_up1 = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_up2 = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_hr = nn.Conv2d(num_feat, num_feat, 3, 1, 1)
        self.conv_last = nn.Conv2d(num_feat, num_out_ch, 3, 1, 1)

        self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)

    def forward(self, x):
        feat = x
        feat = self.conv_first(feat)
        body_feat = self.conv_body(self.body(feat))
        feat = feat + body_feat
        # upsample
        feat = self.lrelu(self.conv_up1(F.interpolate(feat, scale_factor=2, mode='nearest')))
        feat = self.lrelu(self.conv_up2(F.interpolate(feat, scale_factor=2, mode='nearest')))
        out = self.conv_last(self.lrelu(self.conv_hr(feat)))
        return out


class VGGStyleDiscriminator(nn.Module):
    def __init__(self, num_in_ch, num_feat, input_size=32):
        super(VGGStyleDiscriminator, self).__init__()
        self.input_size = input_size

        self.conv0_0 = nn.Conv2d(num_in_ch, num_feat, 3, 1, 1, bias=True)
        self.conv0_1 = nn.Conv2d(num_feat, num_feat, 4, 2, 1, bias=False)
        self.bn0_1 = nn.BatchNorm2d(num_feat, affine=True)

        self.conv1_0 = nn.Conv2d(num_feat, num_feat * 2, 3, 1, 1, bias=False)
        self.bn1_0 = nn.BatchNorm2d(num_feat * 2, affine=True)
        self.conv1_1 = nn.Conv2d(num_feat * 2, num_feat * 2, 4, 2, 1, bias=False)
        self.bn1_1 = nn.BatchNorm2d(num_feat * 2, affine=True)

        self.linear1 = nn.Linear(num_feat * 2 * 8 * 8, 16)
        self.linear2 = nn.Linear(16, 1)

        # activation function
        self.lrelu = nn.LeakyReLU(negative_slope=0.2, inplace=True)

    def forward(self, x):
        assert x.size(2) == self.input_size, (f'Input size must be identical to input_size, but received {x.size()}.')

        feat = self.lrelu(self.conv0_0(x))
        feat = self.lrelu(self.bn0_1(self.conv0_1(feat)))  # output spatial size: /2

        feat = self.lrelu(self.bn1_0(self.conv1_0(feat)))
        feat = self.lrelu(self.bn1_1(self.conv1_1(feat)))  # output spatial size: /4

        feat = feat.view(feat.size(0), -1)
        feat = self.lrelu(self.linear1(feat))
        out = self.linear2(feat)
        return out


class GANLoss(nn.Module):
    def __init__(self, gan_type, real_label_val=1.0, fake_label_val=0.0, loss_weight=1.0):
        super(GANLoss, self).__init__()
        self.gan_type = gan_type
        self.loss_weight = loss_weight
        self.real_label_val = real_label_val
        self.fake_label_val = fake_label_val

        if self.gan_type == 'vanilla':
            self.loss = nn.BCEWithLogitsLoss()
        elif self.gan_type == 'lsgan':
            self.loss = nn.MSELoss()
        else:
            raise NotImplementedError(f'GAN type {self.gan_type} is not implemented.')

    def get_target_label(self, input, target_is_real):
        target_val = (self.real_label_val if target_is_real else self.fake_label_val)
        return input.new_ones(input.size()) * target_val

    def forward(self, input, target_is_real, is_disc=False):
        target_label = self.get_target_label(input, target_is_real)
        loss = self.loss(input, target_label)

        # loss_weight is always 1.0 for discriminators
        return loss if is_disc else loss * self.loss_weight


torch.manual_seed(0)
net_g = RRDBNet(3, 3, scale=4, num_feat=8, num_block=1, num_grow_ch=4)
net_d = VGGStyleDiscriminator(3, 4, input_size=32)
default_init_weights(net_d, 0.1)
cri_pix = nn.L1Loss()
cri_gan = GANLoss('vanilla', loss_weight=5e-3)
optimizer_g = torch.optim.Adam(net_g.parameters(), lr=1e-4, betas=(0.9, 0.99))
optimizer_d = torch.optim.Adam(net_d.parameters(), lr=1e-4, betas=(0.9, 0.99))
schedulers = [torch.optim.lr_scheduler.MultiStepLR(o, [2], 0.5) for o in (optimizer_g, optimizer_d)]
print("params g", sum(p.numel() for p in net_g.parameters()), "d", sum(p.numel() for p in net_d.parameters()))


def optimize_g(lq, gt):
    # optimize net_g
    for p in net_d.parameters():
        p.requires_grad = False

    optimizer_g.zero_grad()
    output = net_g(lq)

    l_g_total = 0
    loss_dict = {}
    # pixel loss
    l_g_pix = cri_pix(output, gt)
    l_g_total += l_g_pix
    loss_dict['l_g_pix'] = l_g_pix
    # gan loss (relativistic gan)
    real_d_pred = net_d(gt).detach()
    fake_g_pred = net_d(output)
    l_g_real = cri_gan(real_d_pred - torch.mean(fake_g_pred), False, is_disc=False)
    l_g_fake = cri_gan(fake_g_pred - torch.mean(real_d_pred), True, is_disc=False)
    l_g_gan = (l_g_real + l_g_fake) / 2

    l_g_total += l_g_gan
    loss_dict['l_g_gan'] = l_g_gan

    l_g_total.backward()
    optimizer_g.step()
    return output, loss_dict


def optimize_d(output, gt):
    # optimize net_d
    for p in net_d.parameters():
        p.requires_grad = True

    optimizer_d.zero_grad()
    loss_dict = {}
    # gan loss (relativistic gan)

    # In order to avoid the error in distributed training:
    # "Error detected in CudnnBatchNormBackward: RuntimeError: one of
    # the variables needed for gradient computation has been modified by
    # an inplace operation",
    # we separate the backwards for real and fake, and also detach the
    # tensor for calculating mean.

    # real
    fake_d_pred = net_d(output).detach()
    real_d_pred = net_d(gt)
    l_d_real = cri_gan(real_d_pred - torch.mean(fake_d_pred), True, is_disc=True) * 0.5
    l_d_real.backward()
    # fake
    fake_d_pred = net_d(output.detach())
    l_d_fake = cri_gan(fake_d_pred - torch.mean(real_d_pred.detach()), False, is_disc=True) * 0.5
    l_d_fake.backward()
    optimizer_d.step()

    loss_dict['l_d_real'] = l_d_real
    loss_dict['l_d_fake'] = l_d_fake
    loss_dict['out_d_real'] = torch.mean(real_d_pred.detach())
    loss_dict['out_d_fake'] = torch.mean(fake_d_pred.detach())
    return loss_dict


gt = torch.rand(2, 3, 32, 32)
lq = F.interpolate(gt, scale_factor=0.25, mode='bicubic', align_corners=False).clamp(0, 1)
for current_iter in range(3):
    output, log_g = optimize_g(lq, gt)
    log_d = optimize_d(output, gt)
    for s in schedulers:
        s.step()
    print(f"[iter:{current_iter + 1}, lr:({schedulers[0].get_last_lr()[0]:.3e},)] " +
          " ".join(f"{k}: {v.item():.4e}" for k, v in {**log_g, **log_d}.items()))

state = [copy.deepcopy(x.state_dict()) for x in (net_g, net_d, optimizer_g)]
out_c, log_c = torch.compile(optimize_g)(lq, gt)
after_c = copy.deepcopy(net_g.state_dict())
for x, s in zip((net_g, net_d, optimizer_g), state):
    x.load_state_dict(s)
out_e, log_e = optimize_g(lq, gt)
print("compiled", " ".join(f"{k}: {v.item():.5e}" for k, v in log_c.items()),
      "d frozen", not any(p.requires_grad for p in net_d.parameters()))
print("compiled == eager", all(torch.allclose(log_c[k], log_e[k], rtol=1e-5) for k in log_c),
      torch.allclose(out_c, out_e, atol=1e-5),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in net_g.state_dict().items()))
