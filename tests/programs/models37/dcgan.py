# pytorch/examples dcgan/main.py, written the way the repo has it: argparse
# opt, random.seed / torch.manual_seed(opt.manualSeed), the Generator /
# Discriminator as nn.Sequential `main` blocks with ngpu and the
# nn.parallel.data_parallel branch, weights_init with
# classname.find('Conv') / m.weight.data.normal_(0.0, 0.02) and the
# BatchNorm branch's normal_(1.0, 0.02) / m.bias.data.fill_(0),
# netG.apply(weights_init), BCELoss, fixed_noise = torch.randn(64, nz, 1, 1),
# real_label = 1 / fake_label = 0, Adam with betas=(opt.beta1, 0.999),
# torch.full((batch_size,), real_label, dtype=real_cpu.dtype),
# label.fill_(fake_label), fake.detach(), D_x / D_G_z1 / D_G_z2 and the
# repo's '[%d/%d][%d/%d] Loss_D ...' print, fake = netG(fixed_noise).
# Changes for a CPU test: 16x16 images (one fewer up / down block each
# side), nz=8, ngf=ndf=8, a TensorDataset of torch.rand images in [-1, 1]
# (the repo's 'fake' dataset is random data too) in a shuffle=True
# DataLoader of batch 4, 2 iterations, no image / checkpoint saving; then
# one discriminator step on the real batch under torch.compile checked
# against the same step eagerly.
import argparse
import copy
import random

import torch
import torch.nn as nn
import torch.nn.parallel
import torch.optim as optim
import torch.utils.data

parser = argparse.ArgumentParser()
parser.add_argument('--dataset', default='fake', help='cifar10 | lsun | mnist |imagenet | folder | lfw | fake')
parser.add_argument('--workers', type=int, help='number of data loading workers', default=0)
parser.add_argument('--batchSize', type=int, default=4, help='input batch size')
parser.add_argument('--imageSize', type=int, default=16, help='the height / width of the input image to network')
parser.add_argument('--nz', type=int, default=8, help='size of the latent z vector')
parser.add_argument('--ngf', type=int, default=8)
parser.add_argument('--ndf', type=int, default=8)
parser.add_argument('--niter', type=int, default=1, help='number of epochs to train for')
parser.add_argument('--lr', type=float, default=0.0002, help='learning rate, default=0.0002')
parser.add_argument('--beta1', type=float, default=0.5, help='beta1 for adam. default=0.5')
parser.add_argument('--ngpu', type=int, default=1, help='number of GPUs to use')
parser.add_argument('--manualSeed', type=int, default=999, help='manual seed')
parser.add_argument('--dry-run', action='store_true', help='check a single training cycle works')
opt = parser.parse_args([])
print(opt.manualSeed)

if opt.manualSeed is None:
    opt.manualSeed = random.randint(1, 10000)
print("Random Seed: ", opt.manualSeed)
random.seed(opt.manualSeed)
torch.manual_seed(opt.manualSeed)

device = torch.device("cpu")

# the 'fake' dataset: random images with labels, in [-1, 1] as Normalize
# ((0.5,), (0.5,)) would make them
images = torch.rand(8, 3, opt.imageSize, opt.imageSize) * 2 - 1
dataset = torch.utils.data.TensorDataset(images, torch.zeros(8, dtype=torch.long))
nc = 3

dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize,
                                         shuffle=True, num_workers=int(opt.workers))

ngpu = int(opt.ngpu)
nz = int(opt.nz)
ngf = int(opt.ngf)
ndf = int(opt.ndf)


# custom weights initialization called on netG and netD
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        m.weight.data.normal_(0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


class Generator(nn.Module):
    def __init__(self, ngpu):
        super(Generator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            # input is Z, going into a convolution
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            # state size. (ngf*4) x 4 x 4
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            # state size. (ngf*2) x 8 x 8
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh()
            # state size. (nc) x 16 x 16
        )

    def forward(self, input):
        if input.is_cuda and self.ngpu > 1:
            output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        else:
            output = self.main(input)
        return output


netG = Generator(ngpu).to(device)
netG.apply(weights_init)
print(netG)


class Discriminator(nn.Module):
    def __init__(self, ngpu):
        super(Discriminator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            # input is (nc) x 16 x 16
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf) x 8 x 8
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf*2) x 4 x 4
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid()
        )

    def forward(self, input):
        if input.is_cuda and self.ngpu > 1:
            output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        else:
            output = self.main(input)

        return output.view(-1, 1).squeeze(1)


netD = Discriminator(ngpu).to(device)
netD.apply(weights_init)
print(netD)

criterion = nn.BCELoss()

fixed_noise = torch.randn(64, nz, 1, 1, device=device)
real_label = 1
fake_label = 0

# setup optimizer
optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

if opt.dry_run:
    opt.niter = 1

for epoch in range(opt.niter):
    for i, data in enumerate(dataloader, 0):
        ############################
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        ###########################
        # train with real
        netD.zero_grad()
        real_cpu = data[0].to(device)
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label,
                           dtype=real_cpu.dtype, device=device)

        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        # train with fake
        noise = torch.randn(batch_size, nz, 1, 1, device=device)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        ############################
        # (2) Update G network: maximize log(D(G(z)))
        ###########################
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for generator cost
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()

        print('[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f'
              % (epoch, opt.niter, i, len(dataloader),
                 errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
        if i % 100 == 0:
            fake = netG(fixed_noise)
            print('fake samples', tuple(fake.shape), '%.5f %.5f' % (fake.mean().item(), fake.std().item()))

        if opt.dry_run:
            break

# one discriminator step on a real batch, compiled against eager
real_cpu = images[:4]
label = torch.full((4,), real_label, dtype=real_cpu.dtype)
netDs = [copy.deepcopy(netD), copy.deepcopy(netD)]
optDs = [optim.Adam(n.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999)) for n in netDs]


def d_step(net, opt_, x, y):
    opt_.zero_grad()
    err = criterion(net(x), y)
    err.backward()
    opt_.step()
    return err


err_e = d_step(netDs[0], optDs[0], real_cpu, label)
err_c = torch.compile(d_step)(netDs[1], optDs[1], real_cpu, label)
same = torch.allclose(err_e, err_c, atol=1e-6) and all(
    torch.allclose(a, b, atol=1e-6) for a, b in zip(netDs[0].parameters(), netDs[1].parameters()))
print('D step loss %.6f' % err_e.item(), 'compiled == eager:', same)
