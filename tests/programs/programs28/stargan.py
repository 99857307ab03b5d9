# StarGAN (yunjey/stargan, model.py and solver.py), as written: the
# Generator concatenating the domain label spatially (c.view(c.size(0),
# c.size(1), 1, 1).repeat(1, 1, x.size(2), x.size(3)), torch.cat([x, c],
# dim=1)), InstanceNorm2d(affine=True, track_running_stats=True) in its
# down / residual / up-sampling (ConvTranspose2d) layers, Tanh; the
# PatchGAN Discriminator with LeakyReLU(0.01) and its two heads (out_src,
# out_cls.view(out_cls.size(0), out_cls.size(1))); Solver.gradient_penalty
# (torch.autograd.grad(outputs=y, inputs=x, grad_outputs=weight,
# retain_graph=True, create_graph=True, only_inputs=True), the norm of
# dydx.view(dydx.size(0), -1)), label2onehot (out[np.arange(batch_size),
# labels.long()] = 1), classification_loss for CelebA
# (F.binary_cross_entropy_with_logits(logit, target, size_average=False) /
# logit.size(0)), the x_hat interpolation with alpha = torch.rand(...)
# requires_grad_(True), d_loss / g_loss with lambda_cls, lambda_rec and
# lambda_gp, n_critic, update_lr over param_groups, denorm (clamp_). Written
# for this test: 16x16 images, 3 attributes, conv_dim 4, 1 repeat, 4
# iterations; one compiled discriminator step (a double backward) against
# eager.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class ResidualBlock(nn.Module):
    """Residual Block with instance normalization."""
    def __init__(self, dim_in, dim_out):
        super(ResidualBlock, self).__init__()
        self.main = nn.Sequential(
            nn.Conv2d(dim_in, dim_out, kernel_size=3, stride=1, padding=1, bias=False),
            nn.InstanceNorm2d(dim_out, affine=True, track_running_stats=True),
            nn.ReLU(inplace=True),
            nn.Conv2d(dim_out, dim_out, kernel_size=3, stride=1, padding=1, bias=False),
            nn.InstanceNorm2d(dim_out, affine=True, track_running_stats=True))

    def forward(self, x):
        return x + self.main(x)


class Generator(nn.Module):
    """Generator network."""
    def __init__(self, conv_dim=64, c_dim=5, repeat_num=6):
        super(Generator, self).__init__()

        layers = []
        layers.append(nn.Conv2d(3 + c_dim, conv_dim, kernel_size=7, stride=1, padding=3, bias=False))
        layers.append(nn.InstanceNorm2d(conv_dim, affine=True, track_running_stats=True))
        layers.append(nn.ReLU(inplace=True))

        # Down-sampling layers.
        curr_dim = conv_dim
        for i in range(2):
            layers.append(nn.Conv2d(curr_dim, curr_dim * 2, kernel_size=4, stride=2, padding=1, bias=False))
            layers.append(nn.InstanceNorm2d(curr_dim * 2, affine=True, track_running_stats=True))
            layers.append(nn.ReLU(inplace=True))
            curr_dim = curr_dim * 2

        # Bottleneck layers.
        for i in range(repeat_num):
            layers.append(ResidualBlock(dim_in=curr_dim, dim_out=curr_dim))

        # Up-sampling layers.
        for i in range(2):
            layers.append(nn.ConvTranspose2d(curr_dim, curr_dim // 2, kernel_size=4, stride=2, padding=1, bias=False))
            layers.append(nn.InstanceNorm2d(curr_dim // 2, affine=True, track_running_stats=True))
            layers.append(nn.ReLU(inplace=True))
            curr_dim = curr_dim // 2

        layers.append(nn.Conv2d(curr_dim, 3, kernel_size=7, stride=1, padding=3, bias=False))
        layers.append(nn.Tanh())
        self.main = nn.Sequential(*layers)

    def forward(self, x, c):
        # Replicate spatially and concatenate domain information.
        # Note that this type of label conditioning does not work at all if we use reflection padding in Conv2d.
        # This is because instance normalization ignores the shifting (or bias) effect.
        c = c.view(c.size(0), c.size(1), 1, 1)
        c = c.repeat(1, 1, x.size(2), x.size(3))
        x = torch.cat([x, c], dim=1)
        return self.main(x)


class Discriminator(nn.Module):
    """Discriminator network with PatchGAN."""
    def __init__(self, image_size=128, conv_dim=64, c_dim=5, repeat_num=6):
        super(Discriminator, self).__init__()
        layers = []
        layers.append(nn.Conv2d(3, conv_dim, kernel_size=4, stride=2, padding=1))
        layers.append(nn.LeakyReLU(0.01))

        curr_dim = conv_dim
        for i in range(1, repeat_num):
            layers.append(nn.Conv2d(curr_dim, curr_dim * 2, kernel_size=4, stride=2, padding=1))
            layers.append(nn.LeakyReLU(0.01))
            curr_dim = curr_dim * 2

        kernel_size = int(image_size / np.power(2, repeat_num))
        self.main = nn.Sequential(*layers)
        self.conv1 = nn.Conv2d(curr_dim, 1, kernel_size=3, stride=1, padding=1, bias=False)
        self.conv2 = nn.Conv2d(curr_dim, c_dim, kernel_size=kernel_size, bias=False)

    def forward(self, x):
        h = self.main(x)
        out_src = self.conv1(h)
        out_cls = self.conv2(h)
        return out_src, out_cls.view(out_cls.size(0), out_cls.size(1))


class Solver(object):
    """Solver for training and testing StarGAN."""

    def __init__(self):
        self.c_dim = 3
        self.image_size = 16
        self.g_conv_dim = 4
        self.d_conv_dim = 4
        self.g_repeat_num = 1
        self.d_repeat_num = 3
        self.lambda_cls = 1
        self.lambda_rec = 10
        self.lambda_gp = 10
        self.g_lr = 1e-4
        self.d_lr = 1e-4
        self.n_critic = 2
        self.beta1 = 0.5
        self.beta2 = 0.999
        self.device = torch.device('cpu')
        self.build_model()

    def build_model(self):
        self.G = Generator(self.g_conv_dim, self.c_dim, self.g_repeat_num)
        self.D = Discriminator(self.image_size, self.d_conv_dim, self.c_dim, self.d_repeat_num)
        self.g_optimizer = torch.optim.Adam(self.G.parameters(), self.g_lr, [self.beta1, self.beta2])
        self.d_optimizer = torch.optim.Adam(self.D.parameters(), self.d_lr, [self.beta1, self.beta2])
        self.print_network(self.G, 'G')
        self.print_network(self.D, 'D')
        self.G.to(self.device)
        self.D.to(self.device)

    def print_network(self, model, name):
        num_params = 0
        for p in model.parameters():
            num_params += p.numel()
        print(name, "The number of parameters: {}".format(num_params))

    def update_lr(self, g_lr, d_lr):
        for param_group in self.g_optimizer.param_groups:
            param_group['lr'] = g_lr
        for param_group in self.d_optimizer.param_groups:
            param_group['lr'] = d_lr

    def reset_grad(self):
        self.g_optimizer.zero_grad()
        self.d_optimizer.zero_grad()

    def denorm(self, x):
        out = (x + 1) / 2
        return out.clamp_(0, 1)

    def gradient_penalty(self, y, x):
        """Compute gradient penalty: (L2_norm(dy/dx) - 1)**2."""
        weight = torch.ones(y.size()).to(self.device)
        dydx = torch.autograd.grad(outputs=y,
                                   inputs=x,
                                   grad_outputs=weight,
                                   retain_graph=True,
                                   create_graph=True,
                                   only_inputs=True)[0]

        dydx = dydx.view(dydx.size(0), -1)
        dydx_l2norm = torch.sqrt(torch.sum(dydx**2, dim=1))
        return torch.mean((dydx_l2norm - 1)**2)

    def label2onehot(self, labels, dim):
        batch_size = labels.size(0)
        out = torch.zeros(batch_size, dim)
        out[np.arange(batch_size), labels.long()] = 1
        return out

    def classification_loss(self, logit, target):
        return F.binary_cross_entropy_with_logits(logit, target, size_average=False) / logit.size(0)

    def train_discriminator(self, x_real, c_org, c_trg, label_org, alpha):
        # Compute loss with real images.
        out_src, out_cls = self.D(x_real)
        d_loss_real = - torch.mean(out_src)
        d_loss_cls = self.classification_loss(out_cls, label_org)

        # Compute loss with fake images.
        x_fake = self.G(x_real, c_trg)
        out_src, out_cls = self.D(x_fake.detach())
        d_loss_fake = torch.mean(out_src)

        # Compute loss for gradient penalty.
        x_hat = (alpha * x_real.data + (1 - alpha) * x_fake.data).requires_grad_(True)
        out_src, _ = self.D(x_hat)
        d_loss_gp = self.gradient_penalty(out_src, x_hat)

        # Backward and optimize.
        d_loss = d_loss_real + d_loss_fake + self.lambda_cls * d_loss_cls + self.lambda_gp * d_loss_gp
        self.reset_grad()
        d_loss.backward()
        self.d_optimizer.step()

        loss = {}
        loss['D/loss_real'] = d_loss_real.item()
        loss['D/loss_fake'] = d_loss_fake.item()
        loss['D/loss_cls'] = d_loss_cls.item()
        loss['D/loss_gp'] = d_loss_gp.item()
        return loss

    def d_step(self, x_real, c_trg, label_org, alpha):
        """train_discriminator's tensor work, returning tensors (its .item()
        calls stay outside the compiled step)."""
        out_src, out_cls = self.D(x_real)
        d_loss_real = - torch.mean(out_src)
        d_loss_cls = self.classification_loss(out_cls, label_org)
        x_fake = self.G(x_real, c_trg)
        out_src, out_cls = self.D(x_fake.detach())
        d_loss_fake = torch.mean(out_src)
        x_hat = (alpha * x_real.data + (1 - alpha) * x_fake.data).requires_grad_(True)
        out_src, _ = self.D(x_hat)
        d_loss_gp = self.gradient_penalty(out_src, x_hat)
        d_loss = d_loss_real + d_loss_fake + self.lambda_cls * d_loss_cls + self.lambda_gp * d_loss_gp
        self.reset_grad()
        d_loss.backward()
        self.d_optimizer.step()
        return torch.stack([d_loss_real, d_loss_fake, d_loss_cls, d_loss_gp])

    def train_generator(self, x_real, c_org, c_trg, label_trg):
        # Original-to-target domain.
        x_fake = self.G(x_real, c_trg)
        out_src, out_cls = self.D(x_fake)
        g_loss_fake = - torch.mean(out_src)
        g_loss_cls = self.classification_loss(out_cls, label_trg)

        # Target-to-original domain.
        x_reconst = self.G(x_fake, c_org)
        g_loss_rec = torch.mean(torch.abs(x_real - x_reconst))

        # Backward and optimize.
        g_loss = g_loss_fake + self.lambda_rec * g_loss_rec + self.lambda_cls * g_loss_cls
        self.reset_grad()
        g_loss.backward()
        self.g_optimizer.step()

        loss = {}
        loss['G/loss_fake'] = g_loss_fake.item()
        loss['G/loss_rec'] = g_loss_rec.item()
        loss['G/loss_cls'] = g_loss_cls.item()
        return loss


torch.manual_seed(0)
np.random.seed(0)
solver = Solver()
print(solver.label2onehot(torch.tensor([2, 0, 1]), 3).tolist())
x_real = torch.rand(4, 3, 16, 16) * 2 - 1
label_org = torch.randint(0, 2, (4, 3)).float()

for i in range(4):
    # Generate target domain labels randomly.
    rand_idx = torch.randperm(label_org.size(0))
    label_trg = label_org[rand_idx]
    c_org = label_org.clone()
    c_trg = label_trg.clone()
    alpha = torch.rand(x_real.size(0), 1, 1, 1)
    loss = solver.train_discriminator(x_real, c_org, c_trg, label_org, alpha)
    if (i + 1) % solver.n_critic == 0:
        loss.update(solver.train_generator(x_real, c_org, c_trg, label_trg))
    log = "Iteration [{}/{}]".format(i + 1, 4)
    for tag, value in loss.items():
        log += ", {}: {:.4f}".format(tag, value)
    print(log)
    if i == 2:
        solver.update_lr(solver.g_lr - 1e-5, solver.d_lr - 1e-5)
        print('Decayed learning rates, g_lr: {}, d_lr: {}.'.format(solver.g_lr - 1e-5, solver.d_lr - 1e-5))

solver.G.eval()
with torch.no_grad():
    x_fake = solver.G(x_real[:1], label_org[1:2])
    print("test", tuple(x_fake.shape), round(solver.denorm(x_fake.data).mean().item(), 5),
          "running mean", round(solver.G.main[1].running_mean.abs().sum().item(), 5))
solver.G.train()

state = [copy.deepcopy(m.state_dict()) for m in (solver.G, solver.D, solver.d_optimizer)]
alpha = torch.rand(x_real.size(0), 1, 1, 1)
c_trg = label_org.flip(0)
losses_c = torch.compile(solver.d_step)(x_real, c_trg, label_org, alpha)
after_c = copy.deepcopy(solver.D.state_dict())
g_after_c = copy.deepcopy(solver.G.state_dict())
for m, s in zip((solver.G, solver.D, solver.d_optimizer), state):
    m.load_state_dict(s)
losses_e = solver.d_step(x_real, c_trg, label_org, alpha)
print("compiled", [round(v, 5) for v in losses_c.tolist()])
print("compiled == eager", torch.allclose(losses_c, losses_e, rtol=1e-4, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in solver.D.state_dict().items()),
      all(torch.allclose(g_after_c[k].float(), v.float(), atol=1e-6) for k, v in solver.G.state_dict().items()))
