# leftthomas/SRGAN: model.py (Generator: the 9x9 PReLU head, ResidualBlocks of
# Conv2d / BatchNorm2d / PReLU, block7, UpsampleBLock with PixelShuffle and
# PReLU, the (tanh + 1) / 2 output; Discriminator: the strided Conv2d /
# BatchNorm2d / LeakyReLU(0.2) stack, AdaptiveAvgPool2d(1), the 1x1 convs,
# sigmoid of view(batch_size)), loss.py (GeneratorLoss: adversarial
# mean(1 - out_labels), perception MSE through a frozen eval() loss network,
# image MSE, TVLoss with tensor_size), train.py (the D step with
# d_loss.backward(retain_graph=True), the G step recomputing fake_img, the
# running_results bookkeeping, validation's MSE / PSNR with log10).
# Changes for a CPU test: channel widths divided by 8 (generator 8, the
# discriminator 8 ... 64 and 128 for the 1x1 head), 8x8 -> 16x16 images, batch
# 2; the perceptual loss network is a tiny frozen conv net with numpy weights
# instead of VGG16's pretrained features; weights and data from numpy.  Then
# a training step of an UpsampleBLock under GeneratorLoss under torch.compile
# against the same step run eagerly.
import copy
import math
from math import log10

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.autograd import Variable

W = 8   # the original's 64


# ---- model.py ----
class Generator(nn.Module):
    def __init__(self, scale_factor):
        upsample_block_num = int(math.log(scale_factor, 2))

        super(Generator, self).__init__()
        self.block1 = nn.Sequential(
            nn.Conv2d(3, W, kernel_size=9, padding=4),
            nn.PReLU()
        )
        self.block2 = ResidualBlock(W)
        self.block3 = ResidualBlock(W)
        self.block4 = ResidualBlock(W)
        self.block5 = ResidualBlock(W)
        self.block6 = ResidualBlock(W)
        self.block7 = nn.Sequential(
            nn.Conv2d(W, W, kernel_size=3, padding=1),
            nn.BatchNorm2d(W)
        )
        block8 = [UpsampleBLock(W, 2) for _ in range(upsample_block_num)]
        block8.append(nn.Conv2d(W, 3, kernel_size=9, padding=4))
        self.block8 = nn.Sequential(*block8)

    def forward(self, x):
        block1 = self.block1(x)
        block2 = self.block2(block1)
        block3 = self.block3(block2)
        block4 = self.block4(block3)
        block5 = self.block5(block4)
        block6 = self.block6(block5)
        block7 = self.block7(block6)
        block8 = self.block8(block1 + block7)

        return (torch.tanh(block8) + 1) / 2


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, W, kernel_size=3, padding=1),
            nn.LeakyReLU(0.2),

            nn.Conv2d(W, W, kernel_size=3, stride=2, padding=1),
            nn.BatchNorm2d(W),
            nn.LeakyReLU(0.2),

            nn.Conv2d(W, 2 * W, kernel_size=3, padding=1),
            nn.BatchNorm2d(2 * W),
            nn.LeakyReLU(0.2),

            nn.Conv2d(2 * W, 2 * W, kernel_size=3, stride=2, padding=1),
            nn.BatchNorm2d(2 * W),
            nn.LeakyReLU(0.2),

            nn.Conv2d(2 * W, 4 * W, kernel_size=3, padding=1),
            nn.BatchNorm2d(4 * W),
            nn.LeakyReLU(0.2),

            nn.Conv2d(4 * W, 4 * W, kernel_size=3, stride=2, padding=1),
            nn.BatchNorm2d(4 * W),
            nn.LeakyReLU(0.2),

            nn.Conv2d(4 * W, 8 * W, kernel_size=3, padding=1),
            nn.BatchNorm2d(8 * W),
            nn.LeakyReLU(0.2),

            nn.Conv2d(8 * W, 8 * W, kernel_size=3, stride=2, padding=1),
            nn.BatchNorm2d(8 * W),
            nn.LeakyReLU(0.2),

            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(8 * W, 16 * W, kernel_size=1),
            nn.LeakyReLU(0.2),
            nn.Conv2d(16 * W, 1, kernel_size=1)
        )

    def forward(self, x):
        batch_size = x.size(0)
        return torch.sigmoid(self.net(x).view(batch_size))


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super(ResidualBlock, self).__init__()
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.prelu = nn.PReLU()
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        residual = self.conv1(x)
        residual = self.bn1(residual)
        residual = self.prelu(residual)
        residual = self.conv2(residual)
        residual = self.bn2(residual)

        return x + residual


class UpsampleBLock(nn.Module):
    def __init__(self, in_channels, up_scale):
        super(UpsampleBLock, self).__init__()
        self.conv = nn.Conv2d(in_channels, in_channels * up_scale ** 2, kernel_size=3, padding=1)
        self.pixel_shuffle = nn.PixelShuffle(up_scale)
        self.prelu = nn.PReLU()

    def forward(self, x):
        x = self.conv(x)
        x = self.pixel_shuffle(x)
        x = self.prelu(x)
        return x


def numpy_init(module, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() == 1 and p.numel() == 1:        # PReLU's slope: its default 0.25
                p.fill_(0.25)
            elif p.dim() == 1:
                p.copy_(torch.from_numpy(((1.0 if "bn" in name or ".net." in name else 0.0) * 0
                                          + 0.1 * r.standard_normal(tuple(p.shape))).astype(np.float32)))
                if ("bn" in name or "block7.1" in name) and name.endswith("weight"):
                    p.add_(1.0)
            else:
                fan = p[0].numel()
                p.copy_(torch.from_numpy((r.standard_normal(tuple(p.shape)) / np.sqrt(fan)).astype(np.float32)))
    return module


# ---- loss.py (the loss network: a small frozen conv net standing in for VGG16's features) ----
def vgg_features():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2, 2),
                         nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True))


class GeneratorLoss(nn.Module):
    def __init__(self):
        super(GeneratorLoss, self).__init__()
        vgg = numpy_init(vgg_features(), 11)
        loss_network = nn.Sequential(*list(vgg)[:31]).eval()
        for param in loss_network.parameters():
            param.requires_grad = False
        self.loss_network = loss_network
        self.mse_loss = nn.MSELoss()
        self.tv_loss = TVLoss()

    def forward(self, out_labels, out_images, target_images):
        # Adversarial Loss
        adversarial_loss = torch.mean(1 - out_labels)
        # Perception Loss
        perception_loss = self.mse_loss(self.loss_network(out_images), self.loss_network(target_images))
        # Image Loss
        image_loss = self.mse_loss(out_images, target_images)
        # TV Loss
        tv_loss = self.tv_loss(out_images)
        return image_loss + 0.001 * adversarial_loss + 0.006 * perception_loss + 2e-8 * tv_loss


class TVLoss(nn.Module):
    def __init__(self, tv_loss_weight=1):
        super(TVLoss, self).__init__()
        self.tv_loss_weight = tv_loss_weight

    def forward(self, x):
        batch_size = x.size()[0]
        h_x = x.size()[2]
        w_x = x.size()[3]
        count_h = self.tensor_size(x[:, :, 1:, :])
        count_w = self.tensor_size(x[:, :, :, 1:])
        h_tv = torch.pow((x[:, :, 1:, :] - x[:, :, :h_x - 1, :]), 2).sum()
        w_tv = torch.pow((x[:, :, :, 1:] - x[:, :, :, :w_x - 1]), 2).sum()
        return self.tv_loss_weight * 2 * (h_tv / count_h + w_tv / count_w) / batch_size

    @staticmethod
    def tensor_size(t):
        return t.size()[1] * t.size()[2] * t.size()[3]


# ---- data: smooth 8x8 images and their 2x box-downsampled versions ----
g = np.random.default_rng(0)
yy, xx = np.mgrid[0:16, 0:16] / 15.0
hr = np.stack([np.stack([0.5 + 0.4 * np.sin(3 * xx * g.uniform(0.5, 2) + g.uniform(0, 3) + c)
                         * np.cos(2 * yy * g.uniform(0.5, 2)) for c in range(3)]) for _ in range(4)]).astype(np.float32)
lr_img = hr.reshape(4, 3, 8, 2, 8, 2).mean(axis=(3, 5))
train_set = torch.utils.data.TensorDataset(torch.from_numpy(lr_img), torch.from_numpy(hr))
train_loader = torch.utils.data.DataLoader(dataset=train_set, num_workers=0, batch_size=2, shuffle=False)

UPSCALE_FACTOR = 2
NUM_EPOCHS = 2

netG = numpy_init(Generator(UPSCALE_FACTOR), 0)
print('# generator parameters:', sum(param.numel() for param in netG.parameters()))
netD = numpy_init(Discriminator(), 1)
print('# discriminator parameters:', sum(param.numel() for param in netD.parameters()))

generator_criterion = GeneratorLoss()
print("loss network", generator_criterion.loss_network.training,
      [p.requires_grad for p in generator_criterion.loss_network.parameters()][:2])
tv = TVLoss()(torch.from_numpy(hr))
print("tv", f"{tv.item():.6f}", TVLoss.tensor_size(torch.from_numpy(hr)))
ps = nn.PixelShuffle(2)(torch.arange(32.).view(1, 8, 2, 2))
print("pixel shuffle", ps[0, 0].tolist(), ps[0, 1, 0].tolist())
pr = nn.PReLU()
print("prelu", pr.weight.item(), pr(torch.tensor([-2.0, 3.0])).tolist(), nn.PReLU(4).weight.shape)

optimizerG = optim.Adam(netG.parameters())
optimizerD = optim.Adam(netD.parameters())

results = {'d_loss': [], 'g_loss': [], 'd_score': [], 'g_score': [], 'psnr': [], 'ssim': []}

for epoch in range(1, NUM_EPOCHS + 1):
    running_results = {'batch_sizes': 0, 'd_loss': 0, 'g_loss': 0, 'd_score': 0, 'g_score': 0}

    netG.train()
    netD.train()
    for data, target in train_loader:
        g_update_first = True
        batch_size = data.size(0)
        running_results['batch_sizes'] += batch_size

        ############################
        # (1) Update D network: maximize D(x)-1-D(G(z))
        ###########################
        real_img = Variable(target)
        if torch.cuda.is_available():
            real_img = real_img.cuda()
        z = Variable(data)
        if torch.cuda.is_available():
            z = z.cuda()
        fake_img = netG(z)

        netD.zero_grad()
        real_out = netD(real_img).mean()
        fake_out = netD(fake_img).mean()
        d_loss = 1 - real_out + fake_out
        d_loss.backward(retain_graph=True)
        optimizerD.step()

        ############################
        # (2) Update G network: minimize 1-D(G(z)) + Perception Loss + Image Loss + TV Loss
        ###########################
        netG.zero_grad()
        ## The two lines below are added to prevent runetime error in Google Colab ##
        fake_img = netG(z)
        fake_out = netD(fake_img).mean()
        ##
        g_loss = generator_criterion(fake_out, fake_img, real_img)
        g_loss.backward()

        fake_img = netG(z)
        fake_out = netD(fake_img).mean()

        optimizerG.step()

        # loss for current batch before optimization
        running_results['g_loss'] += g_loss.item() * batch_size
        running_results['d_loss'] += d_loss.item() * batch_size
        running_results['d_score'] += real_out.item() * batch_size
        running_results['g_score'] += fake_out.item() * batch_size

        print('[%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f' % (
            epoch, NUM_EPOCHS, running_results['d_loss'] / running_results['batch_sizes'],
            running_results['g_loss'] / running_results['batch_sizes'],
            running_results['d_score'] / running_results['batch_sizes'],
            running_results['g_score'] / running_results['batch_sizes']))

    netG.eval()
    with torch.no_grad():
        valing_results = {'mse': 0, 'ssims': 0, 'psnr': 0, 'ssim': 0, 'batch_sizes': 0}
        for val_lr, val_hr in train_loader:
            batch_size = val_lr.size(0)
            valing_results['batch_sizes'] += batch_size
            sr = netG(val_lr)
            batch_mse = ((sr - val_hr) ** 2).data.mean()
            valing_results['mse'] += batch_mse * batch_size
            valing_results['psnr'] = 10 * log10((val_hr.max()**2) / (valing_results['mse'] / valing_results['batch_sizes']))
        print('[converting LR images to SR images] PSNR: %.4f dB' % valing_results['psnr'])
    results['psnr'].append(valing_results['psnr'])
print("bn", f"{netG.block2.bn1.running_var.abs().sum().item():.6f}", f"{netD.net[3].running_var.sum().item():.6f}")
print("prelu weights", [f"{netG.block1[1].weight.item():.6f}", f"{netG.block8[0].prelu.weight.item():.6f}"])
print("grads", f"{netD.net[0].weight.grad.abs().sum().item():.6f}", f"{netG.block1[0].weight.grad.abs().sum().item():.6f}")

# a training step of an UpsampleBLock (Conv2d, PixelShuffle, PReLU) under
# GeneratorLoss (its frozen loss network, the TV loss) under torch.compile
# against the same step run eagerly (the D and G steps, ~1100 and ~2100 ops,
# take too long to compile for a test), with SGD: Adam's first steps turn
# gradients that are zero but for rounding into full-size steps, so two
# float-different runs of the same step can end up lr apart.
blocks = numpy_init(UpsampleBLock(3, 2), 2)
optimizer = optim.SGD(blocks.parameters(), lr=0.05, momentum=0.9)


def g_step(z, real_img, out_labels):
    optimizer.zero_grad()
    fake_img = (torch.tanh(blocks(z)) + 1) / 2
    g_loss = generator_criterion(out_labels, fake_img, real_img)
    g_loss.backward()
    optimizer.step()
    return g_loss


args = [(z, real, torch.full((2,), 0.3 + 0.1 * i)) for i, (z, real) in enumerate(list(train_loader) * 2)]
g_step(*args[0])
state, opt_state = copy.deepcopy(blocks.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [g_step(*a).item() for a in args[1:]]
after = copy.deepcopy(blocks.state_dict())
blocks.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(g_step)
compiled = [cstep(*a).item() for a in args[1:]]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(blocks.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
