# SPADE / GauGAN (NVlabs/SPADE, models/networks/normalization.py,
# architecture.py, generator.py, loss.py and models/pix2pix_model.py), as
# written: SPADE (a parameter-free nn.BatchNorm2d(norm_nc, affine=False),
# the segmentation map resized by F.interpolate(segmap, size=x.size()[2:],
# mode='nearest'), mlp_shared / mlp_gamma / mlp_beta, normalized * (1 +
# gamma) + beta), SPADEResnetBlock with the learned shortcut and
# torch.nn.utils.spectral_norm on its convs, actvn = F.leaky_relu(x, 2e-1),
# the generator's F.interpolate(seg, size=(self.sh, self.sw)) input, nn.
# Upsample(scale_factor=2), the one-hot label map made by
# input_label.scatter_(1, label_map, 1.0), a multiscale PatchGAN
# discriminator (NLayerDiscriminator returning intermediate features,
# F.avg_pool2d downsampling between scales), GANLoss 'hinge' (torch.min(
# input - 1, self.get_zero_tensor(input)) / -torch.mean(input) for the
# generator), GAN feature matching with L1, Adam(betas=(0.0, 0.9)) for both
# (TTUR: lr / 2 and lr * 2; the repo's int 0 is refused by PyTorch 2.13's
# Adam). Written for this test: 16x16 maps of 3 labels, ngf 4, 2
# iterations; one compiled generator step against eager. (The conv biases
# before every BatchNorm and InstanceNorm get rounding-noise gradients
# that Adam(beta1 = 0) steps by +-lr: the hinge losses follow that noise
# at the fourth digit, and are printed as the repo logs them, to three.)
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.spectral_norm as spectral_norm


class SPADE(nn.Module):
    def __init__(self, norm_nc, label_nc, nhidden=8, ks=3):
        super().__init__()
        self.param_free_norm = nn.BatchNorm2d(norm_nc, affine=False)
        pw = ks // 2
        self.mlp_shared = nn.Sequential(
            nn.Conv2d(label_nc, nhidden, kernel_size=ks, padding=pw),
            nn.ReLU()
        )
        self.mlp_gamma = nn.Conv2d(nhidden, norm_nc, kernel_size=ks, padding=pw)
        self.mlp_beta = nn.Conv2d(nhidden, norm_nc, kernel_size=ks, padding=pw)

    def forward(self, x, segmap):
        # Part 1. generate parameter-free normalized activations
        normalized = self.param_free_norm(x)

        # Part 2. produce scaling and bias conditioned on semantic map
        segmap = F.interpolate(segmap, size=x.size()[2:], mode='nearest')
        actv = self.mlp_shared(segmap)
        gamma = self.mlp_gamma(actv)
        beta = self.mlp_beta(actv)

        # apply scale and bias
        out = normalized * (1 + gamma) + beta

        return out


class SPADEResnetBlock(nn.Module):
    def __init__(self, fin, fout, label_nc):
        super().__init__()
        # Attributes
        self.learned_shortcut = (fin != fout)
        fmiddle = min(fin, fout)

        # create conv layers
        self.conv_0 = nn.Conv2d(fin, fmiddle, kernel_size=3, padding=1)
        self.conv_1 = nn.Conv2d(fmiddle, fout, kernel_size=3, padding=1)
        if self.learned_shortcut:
            self.conv_s = nn.Conv2d(fin, fout, kernel_size=1, bias=False)

        # apply spectral norm if specified
        self.conv_0 = spectral_norm(self.conv_0)
        self.conv_1 = spectral_norm(self.conv_1)
        if self.learned_shortcut:
            self.conv_s = spectral_norm(self.conv_s)

        # define normalization layers
        self.norm_0 = SPADE(fin, label_nc)
        self.norm_1 = SPADE(fmiddle, label_nc)
        if self.learned_shortcut:
            self.norm_s = SPADE(fin, label_nc)

    # note the resnet block with SPADE also takes in |seg|,
    # the semantic segmentation map as input
    def forward(self, x, seg):
        x_s = self.shortcut(x, seg)

        dx = self.conv_0(self.actvn(self.norm_0(x, seg)))
        dx = self.conv_1(self.actvn(self.norm_1(dx, seg)))

        out = x_s + dx

        return out

    def shortcut(self, x, seg):
        if self.learned_shortcut:
            x_s = self.conv_s(self.norm_s(x, seg))
        else:
            x_s = x
        return x_s

    def actvn(self, x):
        return F.leaky_relu(x, 2e-1)


class SPADEGenerator(nn.Module):
    def __init__(self, label_nc, ngf=4, crop_size=16, num_up_layers=2):
        super().__init__()
        nf = ngf
        self.sw = crop_size // (2**num_up_layers)
        self.sh = self.sw
        self.fc = nn.Conv2d(label_nc, 4 * nf, 3, padding=1)
        self.head_0 = SPADEResnetBlock(4 * nf, 4 * nf, label_nc)
        self.up_0 = SPADEResnetBlock(4 * nf, 2 * nf, label_nc)
        self.up_1 = SPADEResnetBlock(2 * nf, 1 * nf, label_nc)
        self.conv_img = nn.Conv2d(nf, 3, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2)

    def forward(self, input, z=None):
        seg = input
        # we downsample segmap and run convolution
        x = F.interpolate(seg, size=(self.sh, self.sw))
        x = self.fc(x)

        x = self.head_0(x, seg)
        x = self.up(x)
        x = self.up_0(x, seg)
        x = self.up(x)
        x = self.up_1(x, seg)

        x = self.conv_img(F.leaky_relu(x, 2e-1))
        x = F.tanh(x)

        return x


class NLayerDiscriminator(nn.Module):
    def __init__(self, input_nc, ndf=4, n_layers_D=2):
        super().__init__()
        kw = 4
        padw = int((kw - 1.0) / 2)
        nf = ndf
        sequence = [[nn.Conv2d(input_nc, nf, kernel_size=kw, stride=2, padding=padw),
                     nn.LeakyReLU(0.2, False)]]

        for n in range(1, n_layers_D):
            nf_prev = nf
            nf = min(nf * 2, 512)
            stride = 1 if n == n_layers_D - 1 else 2
            sequence += [[spectral_norm(nn.Conv2d(nf_prev, nf, kernel_size=kw, stride=stride, padding=padw)),
                          nn.InstanceNorm2d(nf, affine=False),
                          nn.LeakyReLU(0.2, False)
                          ]]

        sequence += [[nn.Conv2d(nf, 1, kernel_size=kw, stride=1, padding=padw)]]

        # We divide the layers into groups to extract intermediate layer outputs
        for n in range(len(sequence)):
            self.add_module('model' + str(n), nn.Sequential(*sequence[n]))

    def forward(self, input):
        results = [input]
        for submodel in self.children():
            intermediate_output = submodel(results[-1])
            results.append(intermediate_output)

        return results[1:]


class MultiscaleDiscriminator(nn.Module):
    def __init__(self, input_nc, num_D=2):
        super().__init__()
        for i in range(num_D):
            subnetD = NLayerDiscriminator(input_nc)
            self.add_module('discriminator_%d' % i, subnetD)

    def downsample(self, input):
        return F.avg_pool2d(input, kernel_size=3,
                            stride=2, padding=[1, 1],
                            count_include_pad=False)

    # Returns list of lists of discriminator outputs.
    # The final result is of size opt.num_D x opt.n_layers_D
    def forward(self, input):
        result = []
        for name, D in self.named_children():
            out = D(input)
            result.append(out)
            input = self.downsample(input)

        return result


class GANLoss(nn.Module):
    def __init__(self, gan_mode='hinge', target_real_label=1.0, target_fake_label=0.0):
        super(GANLoss, self).__init__()
        self.real_label = target_real_label
        self.fake_label = target_fake_label
        self.zero_tensor = None
        self.gan_mode = gan_mode

    def get_zero_tensor(self, input):
        if self.zero_tensor is None:
            self.zero_tensor = torch.FloatTensor(1).fill_(0)
            self.zero_tensor.requires_grad_(False)
        return self.zero_tensor.expand_as(input)

    def loss(self, input, target_is_real, for_discriminator=True):
        if self.gan_mode == 'hinge':
            if for_discriminator:
                if target_is_real:
                    minval = torch.min(input - 1, self.get_zero_tensor(input))
                    loss = -torch.mean(minval)
                else:
                    minval = torch.min(-input - 1, self.get_zero_tensor(input))
                    loss = -torch.mean(minval)
            else:
                assert target_is_real, "The generator's hinge loss must be aiming for real"
                loss = -torch.mean(input)
            return loss
        raise ValueError('Unexpected gan_mode {}'.format(self.gan_mode))

    def __call__(self, input, target_is_real, for_discriminator=True):
        # computing loss is a bit complicated because |input| may not be
        # a tensor, but list of tensors in case of multiscale discriminator
        if isinstance(input, list):
            loss = 0
            for pred_i in input:
                if isinstance(pred_i, list):
                    pred_i = pred_i[-1]
                loss_tensor = self.loss(pred_i, target_is_real, for_discriminator)
                bs = 1 if len(loss_tensor.size()) == 0 else loss_tensor.size(0)
                new_loss = torch.mean(loss_tensor.view(bs, -1), dim=1)
                loss += new_loss
            return loss / len(input)
        else:
            return self.loss(input, target_is_real, for_discriminator)


label_nc, lr, lambda_feat = 3, 2e-4, 10.0
torch.manual_seed(0)
netG = SPADEGenerator(label_nc)
netD = MultiscaleDiscriminator(label_nc + 3)
criterionGAN = GANLoss('hinge')
criterionFeat = torch.nn.L1Loss()
optimizer_G = torch.optim.Adam(netG.parameters(), lr=lr / 2, betas=(0.0, 0.9))
optimizer_D = torch.optim.Adam(netD.parameters(), lr=lr * 2, betas=(0.0, 0.9))
print("G", sum(p.numel() for p in netG.parameters()), "D", sum(p.numel() for p in netD.parameters()))


def preprocess_input(label_map):
    bs, _, h, w = label_map.size()
    input_label = torch.FloatTensor(bs, label_nc, h, w).zero_()
    input_semantics = input_label.scatter_(1, label_map, 1.0)
    return input_semantics


def discriminate(input_semantics, fake_image, real_image):
    fake_concat = torch.cat([input_semantics, fake_image], dim=1)
    real_concat = torch.cat([input_semantics, real_image], dim=1)
    fake_and_real = torch.cat([fake_concat, real_concat], dim=0)
    discriminator_out = netD(fake_and_real)
    fake = [[tensor[:tensor.size(0) // 2] for tensor in p] for p in discriminator_out]
    real = [[tensor[tensor.size(0) // 2:] for tensor in p] for p in discriminator_out]
    return fake, real


def run_generator_step(input_semantics, real_image):
    optimizer_G.zero_grad()
    G_losses = {}
    fake_image = netG(input_semantics)
    pred_fake, pred_real = discriminate(input_semantics, fake_image, real_image)
    G_losses['GAN'] = criterionGAN(pred_fake, True, for_discriminator=False)
    num_D = len(pred_fake)
    GAN_Feat_loss = torch.FloatTensor(1).fill_(0)
    for i in range(num_D):  # for each discriminator
        # last output is the final prediction, so we exclude it
        num_intermediate_outputs = len(pred_fake[i]) - 1
        for j in range(num_intermediate_outputs):  # for each layer output
            unweighted_loss = criterionFeat(pred_fake[i][j], pred_real[i][j].detach())
            GAN_Feat_loss += unweighted_loss * lambda_feat / num_D
    G_losses['GAN_Feat'] = GAN_Feat_loss
    g_loss = sum(G_losses.values()).mean()
    g_loss.backward()
    optimizer_G.step()
    return G_losses, fake_image


def run_discriminator_step(input_semantics, real_image):
    optimizer_D.zero_grad()
    D_losses = {}
    with torch.no_grad():
        fake_image = netG(input_semantics)
        fake_image = fake_image.detach()
        fake_image.requires_grad_()
    pred_fake, pred_real = discriminate(input_semantics, fake_image, real_image)
    D_losses['D_Fake'] = criterionGAN(pred_fake, False, for_discriminator=True)
    D_losses['D_real'] = criterionGAN(pred_real, True, for_discriminator=True)
    d_loss = sum(D_losses.values()).mean()
    d_loss.backward()
    optimizer_D.step()
    return D_losses


label_map = torch.randint(0, label_nc, (2, 1, 16, 16))
real_image = torch.rand(2, 3, 16, 16) * 2 - 1
input_semantics = preprocess_input(label_map)
print("semantics", input_semantics.sum((0, 2, 3)).tolist())
netG.train(); netD.train()
for i in range(2):
    g_losses, fake = run_generator_step(input_semantics, real_image)
    d_losses = run_discriminator_step(input_semantics, real_image)
    # (the repo's Visualizer.print_current_errors format, '%s: %.3f ')
    print("(iter: %d) " % (i + 1) + " ".join("%s: %.3f" % (k, v.mean().item()) for k, v in {**g_losses, **d_losses}.items()))

state = [copy.deepcopy(x.state_dict()) for x in (netG, netD, optimizer_G)]
g_c, fake_c = torch.compile(run_generator_step)(input_semantics, real_image)
after_c = copy.deepcopy(netG.state_dict())
for x, s in zip((netG, netD, optimizer_G), state):
    x.load_state_dict(s)
g_e, fake_e = run_generator_step(input_semantics, real_image)
print("compiled", " ".join("%s: %.3f" % (k, v.mean().item()) for k, v in g_c.items()))
print("compiled == eager", all(torch.allclose(g_c[k], g_e[k], rtol=1e-5) for k in g_c),
      torch.allclose(fake_c, fake_e, atol=1e-5),
      # (weights: the biases before a BatchNorm have gradients that are zero
      # but for rounding, which Adam with beta1 = 0 steps by +-lr)
      all(torch.allclose(after_c[k], v, atol=1e-5) for k, v in netG.state_dict().items()
          if "weight" in k))
