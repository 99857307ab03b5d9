# Wasserstein GANs the way two public programs write them:
# eriklindernoren/PyTorch-GAN's implementations/wgan_gp/wgan_gp.py (the
# Generator's block() helper with BatchNorm1d(out_feat, 0.8), the critic
# without normalization, compute_gradient_penalty with alpha drawn as
# Tensor(np.random.random((N, 1, 1, 1))), autograd.Variable(...,
# requires_grad=False) for fake = Tensor(N, 1).fill_(1.0), autograd.grad with
# create_graph=True, retain_graph=True, only_inputs=True, the n_critic loop,
# Adam(betas=(b1, b2))) and its implementations/wgan/wgan.py (RMSprop and the
# critic's weights clipped with p.data.clamp_(-clip_value, clip_value)); and
# caogang/wgan-gp's gan_toy.py and gan_cifar.py (interpolates = alpha * real + ((1 - alpha) *
# fake) with alpha = torch.rand(BATCH_SIZE, 1).expand(real_data.size()) or
# expand(B, n).contiguous().view(B, 3, H, W), the convolutional critic's input
# gradients.view(gradients.size(0), -1),
# grad_outputs=torch.ones(disc_interpolates.size()), the penalty
# ((gradients.norm(2, dim=1) - 1) ** 2).mean() * LAMBDA, p.requires_grad
# toggled around the critic loop, backward(mone) / backward(one) with
# one = torch.tensor(1, dtype=torch.float), Adam(betas=(0.5, 0.9))).
# Changes for a CPU test: 8x8 images and 2-D toy points, small MLPs and convs,
# weights and data from numpy, the random draws (latents, alpha) from a numpy
# generator (torch's and tracec's generators differ), a few iterations; then
# critic steps (the MLP and the convolutional one) under torch.compile against
# the same steps eagerly.
import copy

import numpy as np
import torch
import torch.autograd as autograd
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


def fmt(x, n=4):
    return [f"{v:.4f}" for v in x.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.2):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("bias"):
                p.copy_(torch.from_numpy(r.normal(0, 0.05, tuple(p.shape)).astype(np.float32)))
            elif p.dim() == 1:     # batch norm weight
                p.copy_(torch.from_numpy(1 + r.normal(0, 0.05, tuple(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


np.random.seed(0)


class opt:
    n_epochs = 1
    batch_size = 8
    lr = 0.0002
    b1 = 0.5
    b2 = 0.999
    latent_dim = 10
    img_size = 8
    channels = 1
    n_critic = 3
    clip_value = 0.01
    sample_interval = 4


img_shape = (opt.channels, opt.img_size, opt.img_size)

cuda = True if torch.cuda.is_available() else False


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()

        def block(in_feat, out_feat, normalize=True):
            layers = [nn.Linear(in_feat, out_feat)]
            if normalize:
                layers.append(nn.BatchNorm1d(out_feat, 0.8))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        self.model = nn.Sequential(
            *block(opt.latent_dim, 16, normalize=False),
            *block(16, 32),
            *block(32, 48),
            nn.Linear(48, int(np.prod(img_shape))),
            nn.Tanh()
        )

    def forward(self, z):
        img = self.model(z)
        img = img.view(img.shape[0], *img_shape)
        return img


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()

        self.model = nn.Sequential(
            nn.Linear(int(np.prod(img_shape)), 32),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(32, 16),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(16, 1),
        )

    def forward(self, img):
        img_flat = img.view(img.shape[0], -1)
        validity = self.model(img_flat)
        return validity


# Loss weight for gradient penalty
lambda_gp = 10

r = np.random.default_rng(0)
# Initialize generator and discriminator
generator = Generator()
discriminator = Discriminator()
load_numpy(generator, r)
load_numpy(discriminator, r)
print("bn eps", generator.model[3].eps, generator.model[3].momentum, len(generator.model))

# "MNIST": blobs of brightness in 8x8 images, in [-1, 1]
data = np.tanh(r.normal(size=(32, 1, 8, 8)).astype(np.float32) + np.linspace(-1, 1, 8, dtype=np.float32))
dataloader = [(torch.from_numpy(data[i:i + 8]), torch.zeros(8, dtype=torch.long)) for i in range(0, 32, 8)]

# Optimizers
optimizer_G = torch.optim.Adam(generator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))

Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor


def compute_gradient_penalty(D, real_samples, fake_samples):
    """Calculates the gradient penalty loss for WGAN GP"""
    # Random weight term for interpolation between real and fake samples
    alpha = Tensor(np.random.random((real_samples.size(0), 1, 1, 1)))
    # Get random interpolation between real and fake samples
    interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
    d_interpolates = D(interpolates)
    fake = Variable(Tensor(real_samples.shape[0], 1).fill_(1.0), requires_grad=False)
    # Get gradient w.r.t. interpolates
    gradients = autograd.grad(
        outputs=d_interpolates,
        inputs=interpolates,
        grad_outputs=fake,
        create_graph=True,
        retain_graph=True,
        only_inputs=True,
    )[0]
    gradients = gradients.view(gradients.size(0), -1)
    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean()
    return gradient_penalty


# ----------
#  Training
# ----------

batches_done = 0
for epoch in range(opt.n_epochs):
    for i, (imgs, _) in enumerate(dataloader):

        # Configure input
        real_imgs = Variable(imgs.type(Tensor))

        # ---------------------
        #  Train Discriminator
        # ---------------------

        optimizer_D.zero_grad()

        # Sample noise as generator input
        z = Variable(Tensor(np.random.normal(0, 1, (imgs.shape[0], opt.latent_dim))))

        # Generate a batch of images
        fake_imgs = generator(z)

        # Real images
        real_validity = discriminator(real_imgs)
        # Fake images
        fake_validity = discriminator(fake_imgs)
        # Gradient penalty
        gradient_penalty = compute_gradient_penalty(discriminator, real_imgs.data, fake_imgs.data)
        # Adversarial loss
        d_loss = -torch.mean(real_validity) + torch.mean(fake_validity) + lambda_gp * gradient_penalty

        d_loss.backward()
        optimizer_D.step()

        optimizer_G.zero_grad()

        # Train the generator every n_critic steps
        if i % opt.n_critic == 0:

            # -----------------
            #  Train Generator
            # -----------------

            # Generate a batch of images
            fake_imgs = generator(z)
            # Loss measures generator's ability to fool the discriminator
            # Train on fake images
            fake_validity = discriminator(fake_imgs)
            g_loss = -torch.mean(fake_validity)

            g_loss.backward()
            optimizer_G.step()

            print(
                "[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f] [GP: %f]"
                % (epoch, opt.n_epochs, i, len(dataloader), d_loss.item(), g_loss.item(), gradient_penalty.item())
            )

            batches_done += opt.n_critic
print("grads", fmt(discriminator.model[0].weight.grad, 3), generator.model[0].weight.grad is None,
      fmt(generator.model[3].running_mean, 3))

# ---- wgan.py: RMSprop and weight clipping
generator.train()
optimizer_G = torch.optim.RMSprop(generator.parameters(), lr=0.00005)
optimizer_D = torch.optim.RMSprop(discriminator.parameters(), lr=0.00005)
for i, (imgs, _) in enumerate(dataloader):
    real_imgs = Variable(imgs.type(Tensor))
    optimizer_D.zero_grad()
    z = Variable(Tensor(np.random.normal(0, 1, (imgs.shape[0], opt.latent_dim))))
    fake_imgs = generator(z).detach()
    # Adversarial loss
    loss_D = -torch.mean(discriminator(real_imgs)) + torch.mean(discriminator(fake_imgs))
    loss_D.backward()
    optimizer_D.step()
    # Clip weights of discriminator
    for p in discriminator.parameters():
        p.data.clamp_(-opt.clip_value, opt.clip_value)
    if i % opt.n_critic == 0:
        optimizer_G.zero_grad()
        gen_imgs = generator(z)
        loss_G = -torch.mean(discriminator(gen_imgs))
        loss_G.backward()
        optimizer_G.step()
        print("[Batch %d/%d] [D loss: %f] [G loss: %f]" % (i, len(dataloader), loss_D.item(), loss_G.item()))
print("clipped", float(max(p.abs().max() for p in discriminator.parameters())) <= opt.clip_value,
      fmt(discriminator.model[2].weight, 3), optimizer_D.state_dict()["param_groups"][0]["alpha"])

# ---- caogang/wgan-gp gan_toy.py
DIM = 32
LAMBDA = .1
CRITIC_ITERS = 3
BATCH_SIZE = 16
use_cuda = False


class ToyGenerator(nn.Module):

    def __init__(self):
        super(ToyGenerator, self).__init__()

        main = nn.Sequential(
            nn.Linear(2, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, 2),
        )
        self.main = main

    def forward(self, noise, real_data):
        FIXED_GENERATOR = False
        if FIXED_GENERATOR:
            return noise + real_data
        else:
            output = self.main(noise)
            return output


class ToyDiscriminator(nn.Module):

    def __init__(self):
        super(ToyDiscriminator, self).__init__()

        main = nn.Sequential(
            nn.Linear(2, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, DIM),
            nn.ReLU(True),
            nn.Linear(DIM, 1),
        )
        self.main = main

    def forward(self, inputs):
        output = self.main(inputs)
        return output.view(-1)


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Linear') != -1:
        m.weight.data.copy_(torch.from_numpy(r.normal(0.0, 0.2, tuple(m.weight.shape)).astype(np.float32)))
        m.bias.data.fill_(0)
    elif classname.find('BatchNorm') != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


def inf_train_gen():
    scale = 2.
    centers = [(1, 0), (-1, 0), (0, 1), (0, -1)]
    centers = [(scale * x, scale * y) for x, y in centers]
    while True:
        dataset = []
        for i in range(BATCH_SIZE):
            point = np.random.randn(2) * .02
            center = centers[np.random.randint(len(centers))]
            point[0] += center[0]
            point[1] += center[1]
            dataset.append(point)
        dataset = np.array(dataset, dtype='float32')
        dataset /= 1.414  # stdev
        yield dataset


def calc_gradient_penalty(netD, real_data, fake_data):
    alpha = torch.from_numpy(np.random.rand(BATCH_SIZE, 1).astype(np.float32))
    alpha = alpha.expand(real_data.size())
    alpha = alpha.cuda() if use_cuda else alpha

    interpolates = alpha * real_data + ((1 - alpha) * fake_data)

    if use_cuda:
        interpolates = interpolates.cuda()
    interpolates = autograd.Variable(interpolates, requires_grad=True)

    disc_interpolates = netD(interpolates)

    gradients = autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                              grad_outputs=torch.ones(disc_interpolates.size()).cuda() if use_cuda else torch.ones(
                                  disc_interpolates.size()),
                              create_graph=True, retain_graph=True, only_inputs=True)[0]

    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * LAMBDA
    return gradient_penalty


netG = ToyGenerator()
netD = ToyDiscriminator()
netD.apply(weights_init)
netG.apply(weights_init)
print(netG)

optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-4, betas=(0.5, 0.9))
optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-4, betas=(0.5, 0.9))

one = torch.tensor(1, dtype=torch.float)
mone = one * -1

data = inf_train_gen()

for iteration in range(3):
    ############################
    # (1) Update D network
    ###########################
    for p in netD.parameters():  # reset requires_grad
        p.requires_grad = True  # they are set to False below in netG update

    for iter_d in range(CRITIC_ITERS):
        _data = next(data)
        real_data = torch.Tensor(_data)
        real_data_v = autograd.Variable(real_data)

        netD.zero_grad()

        # train with real
        D_real = netD(real_data_v)
        D_real = D_real.mean()
        D_real.backward(mone)

        # train with fake
        noise = torch.from_numpy(np.random.randn(BATCH_SIZE, 2).astype(np.float32))
        with torch.no_grad():
            noisev = autograd.Variable(noise)  # totally freeze netG
        fake = autograd.Variable(netG(noisev, real_data_v).data)
        inputv = fake
        D_fake = netD(inputv)
        D_fake = D_fake.mean()
        D_fake.backward(one)

        # train with gradient penalty
        gradient_penalty = calc_gradient_penalty(netD, real_data_v.data, fake.data)
        gradient_penalty.backward()

        D_cost = D_fake - D_real + gradient_penalty
        Wasserstein_D = D_real - D_fake
        optimizerD.step()

    ############################
    # (2) Update G network
    ###########################
    for p in netD.parameters():
        p.requires_grad = False  # to avoid computation
    netG.zero_grad()

    _data = next(data)
    real_data = torch.Tensor(_data)
    real_data_v = autograd.Variable(real_data)

    noise = torch.from_numpy(np.random.randn(BATCH_SIZE, 2).astype(np.float32))
    noisev = autograd.Variable(noise)
    fake = netG(noisev, real_data_v)
    G = netD(fake)
    G = G.mean()
    G.backward(mone)
    G_cost = -G
    optimizerG.step()
    print("toy", iteration, "D_cost %.5f G_cost %.5f W_D %.5f" % (D_cost.cpu().data.numpy(), G_cost.cpu().data.numpy(),
                                                                 Wasserstein_D.cpu().data.numpy()))
print("netD frozen", [p.requires_grad for p in netD.parameters()][:2], netD.main[0].weight.grad is not None,
      mone.item(), one.dtype)


# ---- caogang/wgan-gp gan_cifar.py: the convolutional critic and its penalty
DIM = 4
BATCH_SIZE = 6
LAMBDA = 10


class CifarDiscriminator(nn.Module):
    def __init__(self):
        super(CifarDiscriminator, self).__init__()
        main = nn.Sequential(
            nn.Conv2d(3, DIM, 3, 2, padding=1),
            nn.LeakyReLU(),
            nn.Conv2d(DIM, 2 * DIM, 3, 2, padding=1),
            nn.LeakyReLU(),
            nn.Conv2d(2 * DIM, 4 * DIM, 3, 2, padding=1),
            nn.LeakyReLU(),
        )

        self.main = main
        self.linear = nn.Linear(4*DIM, 1)

    def forward(self, input):
        output = self.main(input)
        output = output.view(-1, 4*DIM)
        output = self.linear(output)
        return output


def calc_gradient_penalty_cifar(netD, real_data, fake_data):
    alpha = torch.from_numpy(np.random.rand(BATCH_SIZE, 1).astype(np.float32))
    alpha = alpha.expand(BATCH_SIZE, int(real_data.nelement()/BATCH_SIZE)).contiguous().view(BATCH_SIZE, 3, 8, 8)
    alpha = alpha.cuda() if use_cuda else alpha
    interpolates = alpha * real_data + ((1 - alpha) * fake_data)

    if use_cuda:
        interpolates = interpolates.cuda()
    interpolates = autograd.Variable(interpolates, requires_grad=True)

    disc_interpolates = netD(interpolates)

    gradients = autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                              grad_outputs=torch.ones(disc_interpolates.size()).cuda() if use_cuda else torch.ones(
                                  disc_interpolates.size()),
                              create_graph=True, retain_graph=True, only_inputs=True)[0]
    gradients = gradients.view(gradients.size(0), -1)

    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * LAMBDA
    return gradient_penalty


cifarD = CifarDiscriminator()
load_numpy(cifarD, r, std=0.3)
optimizerD = torch.optim.Adam(cifarD.parameters(), lr=1e-3, betas=(0.5, 0.9))
cifar = np.tanh(r.normal(size=(3 * BATCH_SIZE, 3, 8, 8))).astype(np.float32)
for i in range(CRITIC_ITERS):
    cifarD.zero_grad()
    real_data_v = autograd.Variable(torch.from_numpy(cifar[i * BATCH_SIZE:(i + 1) * BATCH_SIZE]))
    D_real = cifarD(real_data_v).mean()
    D_real.backward(mone)
    fake = torch.from_numpy(np.tanh(r.normal(size=(BATCH_SIZE, 3, 8, 8))).astype(np.float32))
    D_fake = cifarD(fake).mean()
    D_fake.backward(one)
    gradient_penalty = calc_gradient_penalty_cifar(cifarD, real_data_v.data, fake.data)
    gradient_penalty.backward()
    D_cost = D_fake - D_real + gradient_penalty
    optimizerD.step()
    print("cifar critic", i, "D_cost %.5f GP %.5f" % (D_cost.item(), gradient_penalty.item()),
          fmt(cifarD.main[0].weight.grad, 2))


# one critic step (with the gradient penalty) under torch.compile against the same step eagerly
for p in discriminator.parameters():
    p.requires_grad = True
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=1e-3, betas=(0.5, 0.9))


def critic_step(real_imgs, fake_imgs, alpha):
    optimizer_D.zero_grad()
    interpolates = (alpha * real_imgs + ((1 - alpha) * fake_imgs)).requires_grad_(True)
    d_interpolates = discriminator(interpolates)
    gradients = autograd.grad(outputs=d_interpolates, inputs=interpolates,
                              grad_outputs=torch.ones(real_imgs.shape[0], 1), create_graph=True,
                              retain_graph=True, only_inputs=True)[0]
    gradient_penalty = ((gradients.view(gradients.size(0), -1).norm(2, dim=1) - 1) ** 2).mean()
    d_loss = -torch.mean(discriminator(real_imgs)) + torch.mean(discriminator(fake_imgs)) + lambda_gp * gradient_penalty
    d_loss.backward()
    optimizer_D.step()
    return d_loss


real = torch.from_numpy(data_np := np.tanh(r.normal(size=(8, 1, 8, 8))).astype(np.float32))
fake = torch.from_numpy(np.tanh(r.normal(size=(8, 1, 8, 8))).astype(np.float32))
alpha = torch.from_numpy(r.random((8, 1, 1, 1)).astype(np.float32))
state, opt_state = copy.deepcopy(discriminator.state_dict()), copy.deepcopy(optimizer_D.state_dict())
eager = [critic_step(real, fake, alpha).item() for _ in range(2)]
after = {k: v.clone() for k, v in discriminator.state_dict().items()}
discriminator.load_state_dict(state)
optimizer_D.load_state_dict(opt_state)
cstep = torch.compile(critic_step)
compiled = [cstep(real, fake, alpha).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(discriminator.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))


# the convolutional critic's step under torch.compile against the same step eagerly
def cifar_critic_step(real_data, fake_data, alpha):
    cifarD.zero_grad()
    D_real = cifarD(real_data).mean()
    D_fake = cifarD(fake_data).mean()
    interpolates = (alpha * real_data + ((1 - alpha) * fake_data)).requires_grad_(True)
    disc_interpolates = cifarD(interpolates)
    gradients = autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                              grad_outputs=torch.ones(disc_interpolates.size()),
                              create_graph=True, retain_graph=True, only_inputs=True)[0]
    gradients = gradients.view(gradients.size(0), -1)
    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * LAMBDA
    D_cost = D_fake - D_real + gradient_penalty
    D_cost.backward()
    optimizerD.step()
    return D_cost


real = torch.from_numpy(cifar[:BATCH_SIZE])
fake = torch.from_numpy(cifar[BATCH_SIZE:2 * BATCH_SIZE])
alpha = torch.from_numpy(r.random((BATCH_SIZE, 1, 1, 1)).astype(np.float32))
state, opt_state = copy.deepcopy(cifarD.state_dict()), copy.deepcopy(optimizerD.state_dict())
eager = [cifar_critic_step(real, fake, alpha).item() for _ in range(2)]
after = {k: v.clone() for k, v in cifarD.state_dict().items()}
cifarD.load_state_dict(state)
optimizerD.load_state_dict(opt_state)
cstep = torch.compile(cifar_critic_step)
compiled = [cstep(real, fake, alpha).item() for _ in range(2)]
print("compiled conv critic losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(cifarD.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
