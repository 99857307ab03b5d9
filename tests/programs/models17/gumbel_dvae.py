# The discrete VAE of lucidrains/DALLE-pytorch (dalle_pytorch/dalle_pytorch.py:
# DiscreteVAE with its strided conv encoder, ResBlocks, ConvTranspose2d
# decoder, the in-class normalization with in-place sub_/div_, the codebook
# as an nn.Embedding read through einsum, F.gumbel_softmax(logits, tau,
# dim=1, hard=straight_through) with the reinmax option, the KL to the
# uniform categorical as F.kl_div(log_uniform, log_qy, None, None,
# 'batchmean', log_target=True), get_codebook_indices under no_grad and
# eval_decorator, decode from indices) trained as train_vae.py does (Adam,
# ExponentialLR, temperature annealing temp = max(temp *
# exp(-anneal_rate * global_step), temp_min)); and the categorical VAE's
# KL (YongfeiYan/Gumbel_Softmax_VAE: log(qy * categorical_dim + 1e-20)).
# Changes for a CPU test: 16x16 images from numpy, 16 tokens, 2 layers,
# hidden 16, a few steps, weights from numpy.  F.gumbel_softmax's
# exponential_ draws differ in tracec, so its draws print [rng] lines, and
# the training runs through a subclass whose forward takes the Gumbel noise
# from numpy (F.gumbel_softmax's own body with numpy's draws, one line
# changed).  Then one training step under torch.compile against the same
# step eagerly.
import copy
import math
from math import log2, sqrt

import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange
from torch import einsum, nn


# ---- dalle_pytorch/dalle_pytorch.py ----
def exists(val):
    return val is not None


def default(val, d):
    return val if exists(val) else d


def eval_decorator(fn):
    def inner(model, *args, **kwargs):
        was_training = model.training
        model.eval()
        out = fn(model, *args, **kwargs)
        model.train(was_training)
        return out
    return inner


def log(t, eps=1e-20):
    return torch.log(t.clamp(min=eps))


class ResBlock(nn.Module):
    def __init__(self, chan):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(chan, chan, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(chan, chan, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(chan, chan, 1)
        )

    def forward(self, x):
        return self.net(x) + x


class DiscreteVAE(nn.Module):
    def __init__(
        self,
        image_size=256,
        num_tokens=512,
        codebook_dim=512,
        num_layers=3,
        num_resnet_blocks=0,
        hidden_dim=64,
        channels=3,
        smooth_l1_loss=False,
        temperature=0.9,
        straight_through=False,
        reinmax=False,
        kl_div_loss_weight=0.,
        normalization=((*((0.5,) * 3), 0), (*((0.5,) * 3), 1))
    ):
        super().__init__()
        assert log2(image_size).is_integer(), 'image size must be a power of 2'
        assert num_layers >= 1, 'number of layers must be greater than or equal to 1'
        has_resblocks = num_resnet_blocks > 0

        self.channels = channels
        self.image_size = image_size
        self.num_tokens = num_tokens
        self.num_layers = num_layers
        self.temperature = temperature
        self.straight_through = straight_through
        self.reinmax = reinmax

        self.codebook = nn.Embedding(num_tokens, codebook_dim)

        hdim = hidden_dim

        enc_chans = [hidden_dim] * num_layers
        dec_chans = list(reversed(enc_chans))

        enc_chans = [channels, *enc_chans]

        dec_init_chan = codebook_dim if not has_resblocks else dec_chans[0]
        dec_chans = [dec_init_chan, *dec_chans]

        enc_chans_io, dec_chans_io = map(lambda t: list(zip(t[:-1], t[1:])), (enc_chans, dec_chans))

        enc_layers = []
        dec_layers = []

        for (enc_in, enc_out), (dec_in, dec_out) in zip(enc_chans_io, dec_chans_io):
            enc_layers.append(nn.Sequential(nn.Conv2d(enc_in, enc_out, 4, stride=2, padding=1), nn.ReLU()))
            dec_layers.append(nn.Sequential(nn.ConvTranspose2d(dec_in, dec_out, 4, stride=2, padding=1), nn.ReLU()))

        for _ in range(num_resnet_blocks):
            dec_layers.insert(0, ResBlock(dec_chans[1]))
            enc_layers.append(ResBlock(enc_chans[-1]))

        if num_resnet_blocks > 0:
            dec_layers.insert(0, nn.Conv2d(codebook_dim, dec_chans[1], 1))

        enc_layers.append(nn.Conv2d(enc_chans[-1], num_tokens, 1))
        dec_layers.append(nn.Conv2d(dec_chans[-1], channels, 1))

        self.encoder = nn.Sequential(*enc_layers)
        self.decoder = nn.Sequential(*dec_layers)

        self.loss_fn = F.smooth_l1_loss if smooth_l1_loss else F.mse_loss
        self.kl_div_loss_weight = kl_div_loss_weight

        # take care of normalization within class
        self.normalization = tuple(map(lambda t: t[:channels], normalization))

    def norm(self, images):
        if not exists(self.normalization):
            return images

        means, stds = map(lambda t: torch.as_tensor(t).to(images), self.normalization)
        means, stds = map(lambda t: rearrange(t, 'c -> () c () ()'), (means, stds))
        images = images.clone()
        images.sub_(means).div_(stds)
        return images

    @torch.no_grad()
    @eval_decorator
    def get_codebook_indices(self, images):
        logits = self(images, return_logits=True)
        codebook_indices = logits.argmax(dim=1).flatten(1)
        return codebook_indices

    def decode(
        self,
        img_seq
    ):
        image_embeds = self.codebook(img_seq)
        b, n, d = image_embeds.shape
        h = w = int(sqrt(n))

        image_embeds = rearrange(image_embeds, 'b (h w) d -> b d h w', h=h, w=w)
        images = self.decoder(image_embeds)
        return images

    def forward(
        self,
        img,
        return_loss=False,
        return_recons=False,
        return_logits=False,
        temp=None
    ):
        device, num_tokens, image_size, kl_div_loss_weight = img.device, self.num_tokens, self.image_size, self.kl_div_loss_weight
        assert img.shape[-1] == image_size and img.shape[-2] == image_size, f'input must have the correct image size {image_size}'

        img = self.norm(img)

        logits = self.encoder(img)

        if return_logits:
            return logits  # return logits for getting hard image indices for DALL-E training

        temp = default(temp, self.temperature)

        one_hot = F.gumbel_softmax(logits, tau=temp, dim=1, hard=self.straight_through)

        if self.straight_through and self.reinmax:
            # use reinmax for better second-order accuracy - https://arxiv.org/abs/2304.08612
            # algorithm 2
            one_hot = one_hot.detach()
            π0 = logits.softmax(dim=1)
            π1 = (one_hot + (logits / temp).softmax(dim=1)) / 2
            π1 = ((log(π1) - logits).detach() + logits).softmax(dim=1)
            π2 = 2 * π1 - 0.5 * π0
            one_hot = π2 - π2.detach() + one_hot

        sampled = einsum('b n h w, n d -> b d h w', one_hot, self.codebook.weight)
        out = self.decoder(sampled)

        if not return_loss:
            return out

        # reconstruction loss

        recon_loss = self.loss_fn(img, out)

        # kl divergence

        logits = rearrange(logits, 'b n h w -> b (h w) n')
        log_qy = F.log_softmax(logits, dim=-1)
        log_uniform = torch.log(torch.tensor([1. / num_tokens], device=device))
        kl_div = F.kl_div(log_uniform, log_qy, None, None, 'batchmean', log_target=True)

        loss = recon_loss + (kl_div * kl_div_loss_weight)

        if not return_recons:
            return loss

        return loss, out


# ---- YongfeiYan/Gumbel_Softmax_VAE: the categorical KL to the uniform prior ----
def categorical_kl(qy, categorical_dim):
    log_ratio = torch.log(qy * categorical_dim + 1e-20)
    KLD = torch.sum(qy * log_ratio, dim=-1).mean()
    return KLD


# ---- the test: the Gumbel noise from numpy ----
GUMBELS = np.random.default_rng(5)


def draw_gumbels(shape):
    return torch.from_numpy(-np.log(GUMBELS.exponential(size=shape)).astype(np.float32))


def gumbel_softmax_numpy_noise(logits, gumbels, tau=1, hard=False, dim=-1):
    """F.gumbel_softmax's body; the gumbels (-log of exponential draws) given."""
    gumbels = (logits + gumbels) / tau  # ~Gumbel(logits,tau)
    y_soft = gumbels.softmax(dim)

    if hard:
        # Straight through.
        index = y_soft.max(dim, keepdim=True)[1]
        y_hard = torch.zeros_like(logits, memory_format=torch.legacy_contiguous_format).scatter_(dim, index, 1.0)
        ret = y_hard - y_soft.detach() + y_soft
    else:
        # Reparametrization trick.
        ret = y_soft
    return ret


class NumpyGumbelDiscreteVAE(DiscreteVAE):
    gumbels = None   # set before each call: numpy's draws

    def forward(self, img, return_loss=False, return_recons=False, return_logits=False, temp=None):
        num_tokens, kl_div_loss_weight = self.num_tokens, self.kl_div_loss_weight
        img = self.norm(img)
        logits = self.encoder(img)
        if return_logits:
            return logits
        temp = default(temp, self.temperature)
        one_hot = gumbel_softmax_numpy_noise(logits, self.gumbels, tau=temp, dim=1, hard=self.straight_through)
        if self.straight_through and self.reinmax:
            one_hot = one_hot.detach()
            π0 = logits.softmax(dim=1)
            π1 = (one_hot + (logits / temp).softmax(dim=1)) / 2
            π1 = ((log(π1) - logits).detach() + logits).softmax(dim=1)
            π2 = 2 * π1 - 0.5 * π0
            one_hot = π2 - π2.detach() + one_hot
        sampled = einsum('b n h w, n d -> b d h w', one_hot, self.codebook.weight)
        out = self.decoder(sampled)
        if not return_loss:
            return out
        recon_loss = self.loss_fn(img, out)
        logits = rearrange(logits, 'b n h w -> b (h w) n')
        log_qy = F.log_softmax(logits, dim=-1)
        log_uniform = torch.log(torch.tensor([1. / num_tokens], device=img.device))
        kl_div = F.kl_div(log_uniform, log_qy, None, None, 'batchmean', log_target=True)
        loss = recon_loss + (kl_div * kl_div_loss_weight)
        if not return_recons:
            return loss
        return loss, out


def init_from_numpy(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = 1.0 if name.startswith("codebook") else (2.0 / max(1, p[0].numel())) ** 0.5 if p.dim() > 1 else 0.05
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


rng = np.random.default_rng(0)
yy, xx = np.mgrid[:16, :16] / 15.0
images = np.stack([np.stack([np.sin(3 * xx + k) * 0.5 + 0.5, np.cos(2 * yy * (k + 1)) * 0.5 + 0.5,
                             (xx * yy + 0.1 * k) % 1.0]) for k in range(8)]).astype(np.float32)
images = np.clip(images + 0.05 * rng.normal(size=images.shape), 0, 1).astype(np.float32)
images = torch.from_numpy(images)

# F.gumbel_softmax itself: its draws are [rng], its structure is not
logits = torch.from_numpy(rng.normal(size=(4, 6)).astype(np.float32)).requires_grad_()
torch.manual_seed(0)
soft = F.gumbel_softmax(logits, tau=0.5)
hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
print("soft", tuple(soft.shape), torch.allclose(soft.sum(-1), torch.ones(4)), soft.requires_grad)
print("hard one-hot", torch.equal(hard.detach(), F.one_hot(hard.argmax(-1), 6).float()),
      torch.allclose(hard.sum(-1), torch.ones(4)))
print("soft draws", [f"{v:.4f}" for v in soft[0].tolist()], hard.argmax(-1).tolist())
(hard * torch.arange(6.0)).sum().backward()
print("straight-through grad", tuple(logits.grad.shape), torch.allclose(logits.grad.sum(-1), torch.zeros(4), atol=1e-5))
print("straight-through grad", f"{logits.grad.abs().sum().item():.5f}")
print("dim=0", tuple(F.gumbel_softmax(logits.detach(), tau=2.0, hard=True, dim=0).sum(0).tolist()))

# the categorical VAE's KL to the uniform prior, and dalle's as F.kl_div
qy = F.softmax(logits.detach(), dim=-1)
log_uniform = torch.log(torch.tensor([1. / 6]))
print("KL to uniform", f"{categorical_kl(qy, 6).item():.5f}",
      f"{F.kl_div(log_uniform, F.log_softmax(logits.detach(), -1), None, None, 'batchmean', log_target=True).item():.5f}",
      f"{(qy * (qy.log() - log_uniform)).sum(-1).mean().item():.5f}")

# ---- train_vae.py ----
IMAGE_SIZE, NUM_TOKENS, CODEBOOK_DIM = 16, 16, 16
NUM_LAYERS, NUM_RESNET_BLOCKS, EMB_DIM = 2, 1, 16
LEARNING_RATE, LR_DECAY_RATE = 1e-3, 0.98
STARTING_TEMP, TEMP_MIN, ANNEAL_RATE = 1.0, 0.5, 1e-2
BATCH_SIZE = 4

vae_params = dict(image_size=IMAGE_SIZE, num_layers=NUM_LAYERS, num_tokens=NUM_TOKENS,
                  codebook_dim=EMB_DIM, hidden_dim=16, num_resnet_blocks=NUM_RESNET_BLOCKS)
vae_pub = DiscreteVAE(**vae_params, smooth_l1_loss=False, kl_div_loss_weight=0.1, straight_through=True)
init_from_numpy(vae_pub, 1)
print("encoder", [type(m).__name__ for m in vae_pub.encoder], "decoder", [type(m).__name__ for m in vae_pub.decoder])
print("normalization", vae_pub.normalization, f"{vae_pub.norm(images).mean().item():.5f}", f"{images.mean().item():.5f}")
logits_pub = vae_pub(images[:2], return_logits=True)
print("logits", tuple(logits_pub.shape), f"{logits_pub.abs().sum().item():.4f}")
print("public loss", f"{vae_pub(images[:2], return_loss=True).item():.5f}")
try:
    vae_pub(images[:, :, :8, :8])
except AssertionError as e:
    print("AssertionError:", e)

vae = NumpyGumbelDiscreteVAE(**vae_params, smooth_l1_loss=False, kl_div_loss_weight=0.1, straight_through=True)
vae.load_state_dict(vae_pub.state_dict())
opt = torch.optim.Adam(vae.parameters(), lr=LEARNING_RATE)
sched = torch.optim.lr_scheduler.ExponentialLR(optimizer=opt, gamma=LR_DECAY_RATE)

global_step = 0
temp = STARTING_TEMP
for epoch in range(2):
    for i in range(len(images) // BATCH_SIZE):
        imgs = images[i * BATCH_SIZE:(i + 1) * BATCH_SIZE]
        vae.gumbels = draw_gumbels((BATCH_SIZE, NUM_TOKENS, 4, 4))
        loss, recons = vae(imgs, return_loss=True, return_recons=True, temp=temp)
        opt.zero_grad()
        loss.backward()
        opt.step()

        if i % 1 == 0:
            k = 2
            with torch.no_grad():
                codes = vae.get_codebook_indices(imgs[:k])
                hard_recons = vae.decode(codes)
            print(epoch, i, f"loss - {loss.item():.5f}", "codes", tuple(codes.shape), codes[0, :6].tolist(),
                  "hard recons", tuple(hard_recons.shape), f"{hard_recons.abs().mean().item():.5f}",
                  "training", vae.training)

            # temperature anneal
            temp = max(temp * math.exp(-ANNEAL_RATE * global_step), TEMP_MIN)

            # lr decay
            sched.step()
        global_step += 1
    print("epoch", epoch, f"temp {temp:.5f}", f"lr {sched.get_last_lr()[0]:.6f}")

# reinmax and the soft (not straight-through) relaxation
vae.reinmax = True
vae.gumbels = draw_gumbels((2, NUM_TOKENS, 4, 4))
print("reinmax loss", f"{vae(images[:2], return_loss=True, temp=0.7).item():.5f}")
vae.reinmax, vae.straight_through = False, False
print("soft loss", f"{vae(images[:2], return_loss=True, temp=0.7).item():.5f}")
vae.straight_through = True


# one training step under torch.compile against the same step eagerly
def train_step(imgs, gumbels, temp):
    vae.gumbels = gumbels
    loss = vae(imgs, return_loss=True, temp=temp)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


imgs = images[:BATCH_SIZE]
state, opt_state = copy.deepcopy(vae.state_dict()), copy.deepcopy(opt.state_dict())
noises = [draw_gumbels((BATCH_SIZE, NUM_TOKENS, 4, 4)) for _ in range(2)]
eager = [train_step(imgs, n, 0.8).item() for n in noises]
after = {k: v.clone() for k, v in vae.state_dict().items()}
vae.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(imgs, n, 0.8).item() for n in noises]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(vae.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
