# heykeetae/Self-Attention-GAN the way its spectral.py, sagan_models.py,
# trainer.py and utils.py write it: its own SpectralNorm(nn.Module) whose
# _make_params registers name + "_u" / "_v" (w.data.new(height).normal_(0, 1)
# wrapped in Parameter(..., requires_grad=False), normalized through
# u.data = l2normalize(u.data)) and name + "_bar" = Parameter(w.data), then
# del self.module._parameters[name]; _update_u_v's power iteration with
# v.data = l2normalize(torch.mv(torch.t(w.view(height,-1).data), u.data)),
# sigma = u.dot(w.view(height, -1).mv(v)) and setattr(self.module,
# self.name, w / sigma.expand_as(w)) before self.module.forward(*args);
# _made_params by getattr / AttributeError; Self_Attn with 1x1 query / key
# / value convs, gamma = nn.Parameter(torch.zeros(1)), torch.bmm of
# proj_query (view(...).permute(0,2,1)) and proj_key, nn.Softmax(dim=-1),
# out = self.gamma*out + x returned with the attention map; the Generator
# (SpectralNorm(ConvTranspose2d) + BatchNorm2d + ReLU layers, repeat_num
# from int(np.log2(self.imsize)) - 3, int(curr_dim / 2), the imsize == 64
# branch adding l4, Tanh) and the Discriminator (SpectralNorm(Conv2d) +
# LeakyReLU(0.1), out.squeeze()); the trainer's hinge losses
# (torch.nn.ReLU()(1.0 - d_out_real).mean()), reset_grad zeroing both
# optimizers, the try / except around next(data_iter) restarting the
# iterator, the wgan-gp branch (alpha(...).expand_as, Variable(alpha *
# real_images.data + (1 - alpha) * fake_images.data, requires_grad=True),
# torch.autograd.grad(outputs, inputs, grad_outputs=torch.ones(out.size()),
# retain_graph=True, create_graph=True, only_inputs=True), the gradient
# penalty), the TTUR Adam optimizers over filter(lambda p: p.requires_grad,
# ...) with lists of betas, print(self.G) / print(self.D), torch.save of
# the state dicts; utils' tensor2var / denorm with clamp_.
# Changes for a CPU test: conv_dim 8 instead of 64 (and so the attention
# layers' channels, hard-coded 128 / 64 and 256 / 512 in the original, as
# conv_dim * 2 / conv_dim and conv_dim * 4 / conv_dim * 8), z_dim 16,
# a batch of 2 synthetic 64 x 64 images from numpy instead of CelebA /
# LSUN through torchvision, weights, z and the gradient penalty's alpha
# from numpy instead of torch.randn / torch.rand (and the u / v vectors
# drawn by normal_), .cuda() dropped, the log line's d_loss_real.data[0]
# (an error on 0-dim tensors since PyTorch 0.4) as .item(), save_image
# left out, a few steps; then one generator step under torch.compile
# against the same step eagerly.
import copy
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.nn import Parameter
from torch.utils.data import DataLoader, TensorDataset


def fmt(x, n=4, p=4):
    return [f"{v:.{p}f}" for v in x.reshape(-1)[:n].tolist()]


# ---- spectral.py
def l2normalize(v, eps=1e-12):
    return v / (v.norm() + eps)


class SpectralNorm(nn.Module):
    def __init__(self, module, name='weight', power_iterations=1):
        super(SpectralNorm, self).__init__()
        self.module = module
        self.name = name
        self.power_iterations = power_iterations
        if not self._made_params():
            self._make_params()

    def _update_u_v(self):
        u = getattr(self.module, self.name + "_u")
        v = getattr(self.module, self.name + "_v")
        w = getattr(self.module, self.name + "_bar")

        height = w.data.shape[0]
        for _ in range(self.power_iterations):
            v.data = l2normalize(torch.mv(torch.t(w.view(height,-1).data), u.data))
            u.data = l2normalize(torch.mv(w.view(height,-1).data, v.data))

        # sigma = torch.dot(u.data, torch.mv(w.view(height,-1).data, v.data))
        sigma = u.dot(w.view(height, -1).mv(v))
        setattr(self.module, self.name, w / sigma.expand_as(w))

    def _made_params(self):
        try:
            u = getattr(self.module, self.name + "_u")
            v = getattr(self.module, self.name + "_v")
            w = getattr(self.module, self.name + "_bar")
            return True
        except AttributeError:
            return False


    def _make_params(self):
        w = getattr(self.module, self.name)

        height = w.data.shape[0]
        width = w.view(height, -1).data.shape[1]

        u = Parameter(w.data.new(height).normal_(0, 1), requires_grad=False)
        v = Parameter(w.data.new(width).normal_(0, 1), requires_grad=False)
        u.data = l2normalize(u.data)
        v.data = l2normalize(v.data)
        w_bar = Parameter(w.data)

        del self.module._parameters[self.name]

        self.module.register_parameter(self.name + "_u", u)
        self.module.register_parameter(self.name + "_v", v)
        self.module.register_parameter(self.name + "_bar", w_bar)


    def forward(self, *args):
        self._update_u_v()
        return self.module.forward(*args)


# ---- sagan_models.py
class Self_Attn(nn.Module):
    """ Self attention Layer"""
    def __init__(self,in_dim,activation):
        super(Self_Attn,self).__init__()
        self.chanel_in = in_dim
        self.activation = activation

        self.query_conv = nn.Conv2d(in_channels = in_dim , out_channels = in_dim//8 , kernel_size= 1)
        self.key_conv = nn.Conv2d(in_channels = in_dim , out_channels = in_dim//8 , kernel_size= 1)
        self.value_conv = nn.Conv2d(in_channels = in_dim , out_channels = in_dim , kernel_size= 1)
        self.gamma = nn.Parameter(torch.zeros(1))

        self.softmax  = nn.Softmax(dim=-1) #
    def forward(self,x):
        """
            inputs :
                x : input feature maps( B X C X W X H)
            returns :
                out : self attention value + input feature
                attention: B X N X N (N is Width*Height)
        """
        m_batchsize,C,width ,height = x.size()
        proj_query  = self.query_conv(x).view(m_batchsize,-1,width*height).permute(0,2,1) # B X CX(N)
        proj_key =  self.key_conv(x).view(m_batchsize,-1,width*height) # B X C x (*W*H)
        energy =  torch.bmm(proj_query,proj_key) # transpose check
        attention = self.softmax(energy) # BX (N) X (N)
        proj_value = self.value_conv(x).view(m_batchsize,-1,width*height) # B X C X N

        out = torch.bmm(proj_value,attention.permute(0,2,1) )
        out = out.view(m_batchsize,C,width,height)

        out = self.gamma*out + x
        return out,attention

class Generator(nn.Module):
    """Generator."""

    def __init__(self, batch_size, image_size=64, z_dim=100, conv_dim=64):
        super(Generator, self).__init__()
        self.imsize = image_size
        layer1 = []
        layer2 = []
        layer3 = []
        last = []

        repeat_num = int(np.log2(self.imsize)) - 3
        mult = 2 ** repeat_num # 8
        layer1.append(SpectralNorm(nn.ConvTranspose2d(z_dim, conv_dim * mult, 4)))
        layer1.append(nn.BatchNorm2d(conv_dim * mult))
        layer1.append(nn.ReLU())

        curr_dim = conv_dim * mult

        layer2.append(SpectralNorm(nn.ConvTranspose2d(curr_dim, int(curr_dim / 2), 4, 2, 1)))
        layer2.append(nn.BatchNorm2d(int(curr_dim / 2)))
        layer2.append(nn.ReLU())

        curr_dim = int(curr_dim / 2)

        layer3.append(SpectralNorm(nn.ConvTranspose2d(curr_dim, int(curr_dim / 2), 4, 2, 1)))
        layer3.append(nn.BatchNorm2d(int(curr_dim / 2)))
        layer3.append(nn.ReLU())

        if self.imsize == 64:
            layer4 = []
            curr_dim = int(curr_dim / 2)
            layer4.append(SpectralNorm(nn.ConvTranspose2d(curr_dim, int(curr_dim / 2), 4, 2, 1)))
            layer4.append(nn.BatchNorm2d(int(curr_dim / 2)))
            layer4.append(nn.ReLU())
            self.l4 = nn.Sequential(*layer4)
            curr_dim = int(curr_dim / 2)

        self.l1 = nn.Sequential(*layer1)
        self.l2 = nn.Sequential(*layer2)
        self.l3 = nn.Sequential(*layer3)

        last.append(nn.ConvTranspose2d(curr_dim, 3, 4, 2, 1))
        last.append(nn.Tanh())
        self.last = nn.Sequential(*last)

        self.attn1 = Self_Attn( conv_dim * 2, 'relu')
        self.attn2 = Self_Attn( conv_dim,  'relu')

    def forward(self, z):
        z = z.view(z.size(0), z.size(1), 1, 1)
        out=self.l1(z)
        out=self.l2(out)
        out=self.l3(out)
        out,p1 = self.attn1(out)
        out=self.l4(out)
        out,p2 = self.attn2(out)
        out=self.last(out)

        return out, p1, p2


class Discriminator(nn.Module):
    """Discriminator, Auxiliary Classifier."""

    def __init__(self, batch_size=64, image_size=64, conv_dim=64):
        super(Discriminator, self).__init__()
        self.imsize = image_size
        layer1 = []
        layer2 = []
        layer3 = []
        last = []

        layer1.append(SpectralNorm(nn.Conv2d(3, conv_dim, 4, 2, 1)))
        layer1.append(nn.LeakyReLU(0.1))

        curr_dim = conv_dim

        layer2.append(SpectralNorm(nn.Conv2d(curr_dim, curr_dim * 2, 4, 2, 1)))
        layer2.append(nn.LeakyReLU(0.1))
        curr_dim = curr_dim * 2

        layer3.append(SpectralNorm(nn.Conv2d(curr_dim, curr_dim * 2, 4, 2, 1)))
        layer3.append(nn.LeakyReLU(0.1))
        curr_dim = curr_dim * 2

        if self.imsize == 64:
            layer4 = []
            layer4.append(SpectralNorm(nn.Conv2d(curr_dim, curr_dim * 2, 4, 2, 1)))
            layer4.append(nn.LeakyReLU(0.1))
            self.l4 = nn.Sequential(*layer4)
            curr_dim = curr_dim*2
        self.l1 = nn.Sequential(*layer1)
        self.l2 = nn.Sequential(*layer2)
        self.l3 = nn.Sequential(*layer3)

        last.append(nn.Conv2d(curr_dim, 1, 4))
        self.last = nn.Sequential(*last)

        self.attn1 = Self_Attn(conv_dim * 4, 'relu')
        self.attn2 = Self_Attn(conv_dim * 8, 'relu')

    def forward(self, x):
        out = self.l1(x)
        out = self.l2(out)
        out = self.l3(out)
        out,p1 = self.attn1(out)
        out=self.l4(out)
        out,p2 = self.attn2(out)
        out=self.last(out)

        return out.squeeze(), p1, p2


# ---- utils.py
def tensor2var(x, grad=False):
    if torch.cuda.is_available():
        x = x.cuda()
    return Variable(x, requires_grad=grad)

def var2tensor(x):
    return x.data.cpu()

def var2numpy(x):
    return x.data.cpu().numpy()

def denorm(x):
    out = (x + 1) / 2
    return out.clamp_(0, 1)


def load_numpy(model, r):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith('_u') or name.endswith('_v'):
                p.data = l2normalize(torch.from_numpy(r.standard_normal(tuple(p.shape)).astype(np.float32)))
            elif p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.from_numpy(r.normal(0, 1.0 / np.sqrt(fan_in), tuple(p.shape)).astype(np.float32)))
            elif name.endswith('gamma') or '.1.' in name:
                continue
            else:
                p.copy_(torch.from_numpy(r.normal(0, 0.05, tuple(p.shape)).astype(np.float32)))


# ---- trainer.py (the Trainer's build_model / train, as functions)
class Config:
    adv_loss = 'hinge'
    imsize = 64
    z_dim = 16
    g_conv_dim = 8
    d_conv_dim = 8
    lambda_gp = 10
    total_step = 2
    batch_size = 2
    g_lr = 0.0001
    d_lr = 0.0004
    beta1 = 0.0
    beta2 = 0.9
    log_step = 2
    model_save_step = 1.0
    parallel = False


config = Config()
noise = np.random.default_rng(7)


def randn(*size):
    return torch.from_numpy(noise.standard_normal(size).astype(np.float32))


def build_model(self):
    self.G = Generator(self.batch_size, self.imsize, self.z_dim, self.g_conv_dim)
    self.D = Discriminator(self.batch_size, self.imsize, self.d_conv_dim)
    if self.parallel:
        self.G = nn.DataParallel(self.G)
        self.D = nn.DataParallel(self.D)

    # Loss and optimizer
    # self.g_optimizer = torch.optim.Adam(self.G.parameters(), self.g_lr, [self.beta1, self.beta2])
    self.g_optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, self.G.parameters()), self.g_lr, [self.beta1, self.beta2])
    self.d_optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, self.D.parameters()), self.d_lr, [self.beta1, self.beta2])

    self.c_loss = torch.nn.CrossEntropyLoss()
    # print networks
    print(self.G)
    print(self.D)


def reset_grad(self):
    self.d_optimizer.zero_grad()
    self.g_optimizer.zero_grad()


def train(self, data_loader, save_path):
    # Data iterator
    data_iter = iter(data_loader)
    step_per_epoch = len(data_loader)
    model_save_step = int(self.model_save_step * step_per_epoch)

    # Fixed input for debugging
    fixed_z = tensor2var(randn(self.batch_size, self.z_dim))

    start = 0
    for step in range(start, self.total_step):

        # ================== Train D ================== #
        self.D.train()
        self.G.train()

        try:
            real_images, _ = next(data_iter)
        except:
            data_iter = iter(data_loader)
            real_images, _ = next(data_iter)

        # Compute loss with real images
        # dr1, dr2, df1, df2, gf1, gf2 are attention scores
        real_images = tensor2var(real_images)
        d_out_real,dr1,dr2 = self.D(real_images)
        if self.adv_loss == 'wgan-gp':
            d_loss_real = - torch.mean(d_out_real)
        elif self.adv_loss == 'hinge':
            d_loss_real = torch.nn.ReLU()(1.0 - d_out_real).mean()

        # apply Gumbel Softmax
        z = tensor2var(randn(real_images.size(0), self.z_dim))
        fake_images,gf1,gf2 = self.G(z)
        d_out_fake,df1,df2 = self.D(fake_images)

        if self.adv_loss == 'wgan-gp':
            d_loss_fake = d_out_fake.mean()
        elif self.adv_loss == 'hinge':
            d_loss_fake = torch.nn.ReLU()(1.0 + d_out_fake).mean()


        # Backward + Optimize
        d_loss = d_loss_real + d_loss_fake
        reset_grad(self)
        d_loss.backward()
        self.d_optimizer.step()


        if self.adv_loss == 'wgan-gp':
            # Compute gradient penalty
            alpha = torch.from_numpy(noise.random((real_images.size(0), 1, 1, 1)).astype(np.float32)).expand_as(real_images)
            interpolated = Variable(alpha * real_images.data + (1 - alpha) * fake_images.data, requires_grad=True)
            out,_,_ = self.D(interpolated)

            grad = torch.autograd.grad(outputs=out,
                                       inputs=interpolated,
                                       grad_outputs=torch.ones(out.size()),
                                       retain_graph=True,
                                       create_graph=True,
                                       only_inputs=True)[0]

            grad = grad.view(grad.size(0), -1)
            grad_l2norm = torch.sqrt(torch.sum(grad ** 2, dim=1))
            d_loss_gp = torch.mean((grad_l2norm - 1) ** 2)

            # Backward + Optimize
            d_loss = self.lambda_gp * d_loss_gp

            reset_grad(self)
            d_loss.backward()
            self.d_optimizer.step()
            print("  gp", f"{d_loss_gp.item():.5f}", fmt(grad_l2norm, 2))

        # ================== Train G and gumbel ================== #
        # Create random noise
        z = tensor2var(randn(real_images.size(0), self.z_dim))
        fake_images,_,_ = self.G(z)

        # Compute loss with fake images
        g_out_fake,_,_ = self.D(fake_images)  # batch x n
        if self.adv_loss == 'wgan-gp':
            g_loss_fake = - g_out_fake.mean()
        elif self.adv_loss == 'hinge':
            g_loss_fake = - g_out_fake.mean()

        reset_grad(self)
        g_loss_fake.backward()
        self.g_optimizer.step()


        # Print out log info
        if (step + 1) % self.log_step == 0:
            print("G_step [{}/{}], D_step[{}/{}], d_out_real: {:.4f}, "
                  " ave_gamma_l3: {:.4f}, ave_gamma_l4: {:.4f}".
                  format(step + 1, self.total_step, (step + 1),
                         self.total_step , d_loss_real.item(),
                         self.G.attn1.gamma.mean().item(), self.G.attn2.gamma.mean().item() ))
        print(f"step {step} d_loss {d_loss.item():.5f} g_loss {g_loss_fake.item():.5f}",
              tuple(fake_images.shape), tuple(dr1.shape), tuple(gf2.shape), fmt(d_out_fake, 2))

        if (step+1) % model_save_step==0:
            torch.save(self.G.state_dict(),
                       os.path.join(save_path, '{}_G.pth'.format(step + 1)))
            torch.save(self.D.state_dict(),
                       os.path.join(save_path, '{}_D.pth'.format(step + 1)))
    return fixed_z


r = np.random.default_rng(0)
images = np.tanh(r.standard_normal((3, 3, 64, 64)).cumsum(axis=3) * 0.2).astype(np.float32)
data_loader = DataLoader(TensorDataset(torch.from_numpy(images), torch.zeros(3)), batch_size=config.batch_size,
                         shuffle=False, drop_last=True)

torch.manual_seed(0)
build_model(config)
load_numpy(config.G, np.random.default_rng(1))
load_numpy(config.D, np.random.default_rng(2))
sn = config.D.l1[0]
print("params", [n for n, _ in sn.module.named_parameters()], 'weight' in sn.module._parameters,
      sn._made_params(), len(config.d_optimizer.param_groups[0]['params']),
      len(list(config.D.parameters())), config.d_optimizer.param_groups[0]['betas'])

# one power iteration: sigma approaches the top singular value
w = sn.module.weight_bar.detach().view(sn.module.weight_bar.shape[0], -1)
top = torch.linalg.svdvals(w)[0]
for _ in range(30):
    sn._update_u_v()
sigma = sn.module.weight_u.dot(w.mv(sn.module.weight_v))
print("sigma", f"{sigma.item():.5f}", f"{top.item():.5f}", type(sn.module.weight).__name__,
      isinstance(sn.module.weight, nn.Parameter), sn.module.weight.requires_grad,
      f"{torch.linalg.svdvals(sn.module.weight.detach().view(w.shape[0], -1))[0].item():.5f}")

save_path = tempfile.mkdtemp()
fixed_z = train(config, data_loader, save_path)
print("saved", sorted(os.listdir(save_path)), fixed_z.requires_grad, tuple(fixed_z.shape))
print("attn gamma", fmt(config.G.attn1.gamma, 1, 6), fmt(config.D.attn2.gamma, 1, 6),
      config.D.l2[0].module.weight_u.requires_grad, config.D.l2[0].module.weight_u.grad is None)

state = torch.load(os.path.join(save_path, '2_G.pth'))
print("state", [k for k in state if k.startswith('l1.')])
config.G.eval()
with torch.no_grad():
    fake, p1, p2 = config.G(fixed_z)
img = denorm(fake.data)
print("fixed fake", tuple(fake.shape), fmt(img[1, 0, 30], 4), f"{img.min().item():.3f}",
      f"{p1.sum(-1).mean().item():.4f}", tuple(p2.shape))

# the wgan-gp option
config.adv_loss = 'wgan-gp'
config.total_step = 1
train(config, data_loader, save_path)
config.adv_loss = 'hinge'


# one generator step under torch.compile against the same step eagerly (in
# a discriminator step the attention layers' key / value conv biases get
# rounding-noise gradients, a key's constant being removed by the softmax,
# which Adam with beta1 = 0 scales up to +-lr)
def g_step(z):
    fake_images, _, _ = config.G(z)
    g_out_fake, _, _ = config.D(fake_images)
    g_loss_fake = - g_out_fake.mean()
    reset_grad(config)
    g_loss_fake.backward()
    config.g_optimizer.step()
    return g_loss_fake


zc = randn(2, config.z_dim)
config.G.train(); config.D.train()
nets = (config.G, config.D)
state = [copy.deepcopy(m.state_dict()) for m in nets]
opt_state = copy.deepcopy(config.g_optimizer.state_dict())
eager = [g_step(zc).item() for _ in range(2)]
after = [{k: v.clone() for k, v in m.state_dict().items()} for m in nets]
for m, s in zip(nets, state):
    m.load_state_dict(s)
config.g_optimizer.load_state_dict(opt_state)
cstep = torch.compile(g_step)
compiled = [cstep(zc).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
# the generator's conv biases feed BatchNorm2d, which removes them: their
# gradients are rounding noise, which Adam scales up to +-lr (left out); the
# running means of those BatchNorms move with the biases (0.1 of them)
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(m.state_dict()[k], a[k], rtol=1e-4,
                         atol=1e-4 if m is config.G and k.endswith('running_mean') else 1e-5)
          for m, a in zip(nets, after) for k in a
          if not (m is config.G and k.endswith('module.bias') and not k.startswith('last'))))
