# Arbitrary style transfer with AdaIN the way naoto0804/pytorch-AdaIN
# writes it: function.py's calc_mean_std (feat.view(N, C, -1).var(dim=2) +
# eps, sqrt, view(N, C, 1, 1)), adaptive_instance_normalization with
# expand(size), _calc_feat_flatten_mean_std asserting
# isinstance(feat, torch.FloatTensor), _mat_sqrt through torch.svd and
# coral with torch.inverse (preserve_color); net.py's decoder of
# ReflectionPad2d((1, 1, 1, 1)) + Conv2d(..., (3, 3)) + ReLU +
# Upsample(scale_factor=2, mode='nearest') and the VGG of Conv2d(3, 3, (1, 1))
# + MaxPool2d((2, 2), (2, 2), (0, 0), ceil_mode=True) cut by
# nn.Sequential(*list(vgg.children())[:31]), Net splitting the encoder into
# enc_1..enc_4 slices of list(encoder.children()), frozen by
# param.requires_grad = False over getattr(self, name), encode /
# encode_with_intermediate, the content / style losses with MSELoss and
# their `target.requires_grad is False` asserts, alpha blending; test.py's
# style_transfer with the interpolation_weights path
# (torch.FloatTensor(1, C, H, W).zero_() summed with weights) and
# content.unsqueeze(0).expand_as(style); train.py's adjust_learning_rate
# (lr / (1 + lr_decay * iteration_count)) over param_groups, the
# InfiniteSamplerWrapper (a data.sampler.Sampler of 2 ** 31 items) feeding
# data.DataLoader iterators with next(), Adam on the decoder only, and the
# decoder's state_dict moved to cpu key by key then torch.save. Changes for
# a CPU test: 16 x 16 images from numpy instead of COCO / WikiArt through
# PIL, channel widths cut (64/128/256/512 -> 4/8/8/16), weights from
# numpy instead of vgg_normalised.pth, the sampler's np.random.seed()
# (a fresh OS seed) dropped so the order is reproducible, a few
# iterations; then one training step under torch.compile against the same
# step eagerly.
import copy
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.utils.data as data

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

C1, C2, C3, C4 = 4, 8, 8, 16      # 64, 128, 256, 512 in the original


def fmt(x, n=4):
    return [f"{v:.4f}" for v in x.reshape(-1)[:n].tolist()]


# ---- function.py
def calc_mean_std(feat, eps=1e-5):
    # eps is a small value added to the variance to avoid divide-by-zero.
    size = feat.size()
    assert (len(size) == 4)
    N, C = size[:2]
    feat_var = feat.view(N, C, -1).var(dim=2) + eps
    feat_std = feat_var.sqrt().view(N, C, 1, 1)
    feat_mean = feat.view(N, C, -1).mean(dim=2).view(N, C, 1, 1)
    return feat_mean, feat_std


def adaptive_instance_normalization(content_feat, style_feat):
    assert (content_feat.size()[:2] == style_feat.size()[:2])
    size = content_feat.size()
    style_mean, style_std = calc_mean_std(style_feat)
    content_mean, content_std = calc_mean_std(content_feat)

    normalized_feat = (content_feat - content_mean.expand(
        size)) / content_std.expand(size)
    return normalized_feat * style_std.expand(size) + style_mean.expand(size)


def _calc_feat_flatten_mean_std(feat):
    # takes 3D feat (C, H, W), return mean and std of array within channels
    assert (feat.size()[0] == 3)
    assert (isinstance(feat, torch.FloatTensor))
    feat_flatten = feat.view(3, -1)
    mean = feat_flatten.mean(dim=-1, keepdim=True)
    std = feat_flatten.std(dim=-1, keepdim=True)
    return feat_flatten, mean, std


def _mat_sqrt(x):
    U, D, V = torch.svd(x)
    return torch.mm(torch.mm(U, D.pow(0.5).diag()), V.t())


def coral(source, target):
    # assume both source and target are 3D array (C, H, W)
    # Note: flatten -> f

    source_f, source_f_mean, source_f_std = _calc_feat_flatten_mean_std(source)
    source_f_norm = (source_f - source_f_mean.expand_as(
        source_f)) / source_f_std.expand_as(source_f)
    source_f_cov_eye = \
        torch.mm(source_f_norm, source_f_norm.t()) + torch.eye(3)

    target_f, target_f_mean, target_f_std = _calc_feat_flatten_mean_std(target)
    target_f_norm = (target_f - target_f_mean.expand_as(
        target_f)) / target_f_std.expand_as(target_f)
    target_f_cov_eye = \
        torch.mm(target_f_norm, target_f_norm.t()) + torch.eye(3)

    source_f_norm_transfer = torch.mm(
        _mat_sqrt(target_f_cov_eye),
        torch.mm(torch.inverse(_mat_sqrt(source_f_cov_eye)),
                 source_f_norm)
    )

    source_f_transfer = source_f_norm_transfer * \
                        target_f_std.expand_as(source_f_norm) + \
                        target_f_mean.expand_as(source_f_norm)

    return source_f_transfer.view(source.size())


# ---- net.py
decoder = nn.Sequential(
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C4, C3, (3, 3)),
    nn.ReLU(),
    nn.Upsample(scale_factor=2, mode='nearest'),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C3, C3, (3, 3)),
    nn.ReLU(),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C3, C3, (3, 3)),
    nn.ReLU(),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C3, C3, (3, 3)),
    nn.ReLU(),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C3, C2, (3, 3)),
    nn.ReLU(),
    nn.Upsample(scale_factor=2, mode='nearest'),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C2, C2, (3, 3)),
    nn.ReLU(),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C2, C1, (3, 3)),
    nn.ReLU(),
    nn.Upsample(scale_factor=2, mode='nearest'),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C1, C1, (3, 3)),
    nn.ReLU(),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C1, 3, (3, 3)),
)

vgg = nn.Sequential(
    nn.Conv2d(3, 3, (1, 1)),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(3, C1, (3, 3)),
    nn.ReLU(),  # relu1-1
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C1, C1, (3, 3)),
    nn.ReLU(),  # relu1-2
    nn.MaxPool2d((2, 2), (2, 2), (0, 0), ceil_mode=True),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C1, C2, (3, 3)),
    nn.ReLU(),  # relu2-1
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C2, C2, (3, 3)),
    nn.ReLU(),  # relu2-2
    nn.MaxPool2d((2, 2), (2, 2), (0, 0), ceil_mode=True),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C2, C3, (3, 3)),
    nn.ReLU(),  # relu3-1
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C3, C3, (3, 3)),
    nn.ReLU(),  # relu3-2
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C3, C3, (3, 3)),
    nn.ReLU(),  # relu3-3
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C3, C3, (3, 3)),
    nn.ReLU(),  # relu3-4
    nn.MaxPool2d((2, 2), (2, 2), (0, 0), ceil_mode=True),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C3, C4, (3, 3)),
    nn.ReLU(),  # relu4-1, this is the last layer used
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C4, C4, (3, 3)),
    nn.ReLU(),  # relu4-2
    nn.MaxPool2d((2, 2), (2, 2), (0, 0), ceil_mode=True),
    nn.ReflectionPad2d((1, 1, 1, 1)),
    nn.Conv2d(C4, C4, (3, 3)),
    nn.ReLU()  # relu5-1
)


class Net(nn.Module):
    def __init__(self, encoder, decoder):
        super(Net, self).__init__()
        enc_layers = list(encoder.children())
        self.enc_1 = nn.Sequential(*enc_layers[:4])  # input -> relu1_1
        self.enc_2 = nn.Sequential(*enc_layers[4:11])  # relu1_1 -> relu2_1
        self.enc_3 = nn.Sequential(*enc_layers[11:18])  # relu2_1 -> relu3_1
        self.enc_4 = nn.Sequential(*enc_layers[18:31])  # relu3_1 -> relu4_1
        self.decoder = decoder
        self.mse_loss = nn.MSELoss()

        # fix the encoder
        for name in ['enc_1', 'enc_2', 'enc_3', 'enc_4']:
            for param in getattr(self, name).parameters():
                param.requires_grad = False

    # extract relu1_1, relu2_1, relu3_1, relu4_1 from input image
    def encode_with_intermediate(self, input):
        results = [input]
        for i in range(4):
            func = getattr(self, 'enc_{:d}'.format(i + 1))
            results.append(func(results[-1]))
        return results[1:]

    # extract relu4_1 from input image
    def encode(self, input):
        for i in range(4):
            input = getattr(self, 'enc_{:d}'.format(i + 1))(input)
        return input

    def calc_content_loss(self, input, target):
        assert (input.size() == target.size())
        assert (target.requires_grad is False)
        return self.mse_loss(input, target)

    def calc_style_loss(self, input, target):
        assert (input.size() == target.size())
        assert (target.requires_grad is False)
        input_mean, input_std = calc_mean_std(input)
        target_mean, target_std = calc_mean_std(target)
        return self.mse_loss(input_mean, target_mean) + \
               self.mse_loss(input_std, target_std)

    def forward(self, content, style, alpha=1.0):
        assert 0 <= alpha <= 1
        style_feats = self.encode_with_intermediate(style)
        content_feat = self.encode(content)
        t = adaptive_instance_normalization(content_feat, style_feats[-1])
        t = alpha * t + (1 - alpha) * content_feat

        g_t = self.decoder(t)
        g_t_feats = self.encode_with_intermediate(g_t)

        loss_c = self.calc_content_loss(g_t_feats[-1], t)
        loss_s = self.calc_style_loss(g_t_feats[0], style_feats[0])
        for i in range(1, 4):
            loss_s += self.calc_style_loss(g_t_feats[i], style_feats[i])
        return loss_c, loss_s


# ---- sampler.py
def InfiniteSampler(n):
    # i = 0
    i = n - 1
    order = np.random.permutation(n)
    while True:
        yield order[i]
        i += 1
        if i >= n:
            order = np.random.permutation(n)
            i = 0


class InfiniteSamplerWrapper(data.sampler.Sampler):
    def __init__(self, data_source):
        self.num_samples = len(data_source)

    def __iter__(self):
        return iter(InfiniteSampler(self.num_samples))

    def __len__(self):
        return 2 ** 31


class FlatFolderDataset(data.Dataset):
    """The original reads a folder of images through PIL and a transform;
    here: images drawn once from numpy, as float32 (3, 16, 16) tensors."""

    def __init__(self, n, seed):
        super(FlatFolderDataset, self).__init__()
        r = np.random.default_rng(seed)
        self.images = r.random((n, 3, 16, 16)).astype(np.float32)

    def __getitem__(self, index):
        return torch.from_numpy(self.images[index])

    def __len__(self):
        return len(self.images)

    def name(self):
        return 'FlatFolderDataset'


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.from_numpy(r.normal(0, 1.4 / np.sqrt(fan_in), tuple(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy(r.normal(0, 0.05, tuple(p.shape)).astype(np.float32)))


np.random.seed(0)
load_numpy(vgg, np.random.default_rng(1))
load_numpy(decoder, np.random.default_rng(2))


class Args:
    lr = 1e-3
    lr_decay = 5e-2
    max_iter = 4
    batch_size = 2
    style_weight = 10.0
    content_weight = 1.0
    n_threads = 0
    save_model_interval = 2


args = Args()


def adjust_learning_rate(optimizer, iteration_count):
    """Imitating the original implementation"""
    lr = args.lr / (1.0 + args.lr_decay * iteration_count)
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


# ---- train.py
save_dir = tempfile.mkdtemp()
vgg = nn.Sequential(*list(vgg.children())[:31])
network = Net(vgg, decoder)
network.train()
network.to(device)
print("encoder slices", [len(getattr(network, f"enc_{i}")) for i in range(1, 5)],
      sum(p.requires_grad for p in network.parameters()), len(list(network.decoder.parameters())))

content_dataset = FlatFolderDataset(6, 3)
style_dataset = FlatFolderDataset(5, 4)

content_iter = iter(data.DataLoader(
    content_dataset, batch_size=args.batch_size,
    sampler=InfiniteSamplerWrapper(content_dataset),
    num_workers=args.n_threads))
style_iter = iter(data.DataLoader(
    style_dataset, batch_size=args.batch_size,
    sampler=InfiniteSamplerWrapper(style_dataset),
    num_workers=args.n_threads))

optimizer = torch.optim.Adam(network.decoder.parameters(), lr=args.lr)

for i in range(args.max_iter):
    adjust_learning_rate(optimizer, iteration_count=i)
    content_images = next(content_iter).to(device)
    style_images = next(style_iter).to(device)
    loss_c, loss_s = network(content_images, style_images)
    loss_c = args.content_weight * loss_c
    loss_s = args.style_weight * loss_s
    loss = loss_c + loss_s

    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

    print(f"iter {i} loss_content {loss_c.item():.5f} loss_style {loss_s.item():.5f} "
          f"lr {optimizer.param_groups[0]['lr']:.6f}", tuple(content_images.shape))

    if (i + 1) % args.save_model_interval == 0 or (i + 1) == args.max_iter:
        state_dict = decoder.state_dict()
        for key in state_dict.keys():
            state_dict[key] = state_dict[key].to(torch.device('cpu'))
        torch.save(state_dict, os.path.join(save_dir, 'decoder_iter_{:d}.pth.tar'.format(i + 1)))
print("saved", sorted(os.listdir(save_dir)), network.enc_1[0].weight.grad is None,
      network.decoder[1].weight.grad is not None)

# ---- test.py
def style_transfer(vgg, decoder, content, style, alpha=1.0,
                   interpolation_weights=None):
    assert (0.0 <= alpha <= 1.0)
    content_f = vgg(content)
    style_f = vgg(style)
    if interpolation_weights:
        _, C, H, W = content_f.size()
        feat = torch.FloatTensor(1, C, H, W).zero_().to(device)
        base_feat = adaptive_instance_normalization(content_f, style_f)
        for i, w in enumerate(interpolation_weights):
            feat = feat + w * base_feat[i:i + 1]
        content_f = content_f[0:1]
    else:
        feat = adaptive_instance_normalization(content_f, style_f)
    feat = feat * alpha + content_f * (1 - alpha)
    return decoder(feat)


decoder2 = copy.deepcopy(decoder)
decoder2.eval()
vgg.eval()
decoder2.load_state_dict(torch.load(os.path.join(save_dir, 'decoder_iter_4.pth.tar')))
print("loaded", all(torch.equal(a, b) for a, b in zip(decoder2.parameters(), decoder.parameters())))

content = torch.from_numpy(content_dataset.images[0])
styles = torch.stack([torch.from_numpy(style_dataset.images[j]) for j in range(3)])
style_interpolation_weights = [1, 2, 1]
interpolation_weights = [w / sum(style_interpolation_weights) for w in style_interpolation_weights]
with torch.no_grad():
    content_e = content.unsqueeze(0).expand_as(styles)
    output = style_transfer(vgg, decoder2, content_e.to(device), styles.to(device), 0.8, interpolation_weights)
output = output.cpu()
print("interpolated", tuple(output.shape), fmt(output, 4), f"{output.mean().item():.5f}")

for alpha in (1.0, 0.5):
    with torch.no_grad():
        out = style_transfer(vgg, decoder2, content.unsqueeze(0), styles[1:2], alpha)
    print("alpha", alpha, tuple(out.shape), fmt(out[0, 2], 4))

# preserve_color: CORAL on the style image
style = styles[2]
print("FloatTensor", isinstance(style, torch.FloatTensor), isinstance(style.double(), torch.FloatTensor))
style_c = coral(style, content)
print("coral", tuple(style_c.shape), fmt(style_c, 4), fmt(style_c.view(3, -1).mean(1), 3),
      fmt(content.view(3, -1).mean(1), 3))
sq = _mat_sqrt(torch.eye(3) * 4 + 0.5)
print("mat_sqrt", torch.allclose(sq @ sq, torch.eye(3) * 4 + 0.5, atol=1e-4), fmt(sq, 3))

# calc_mean_std / AdaIN statistics
cf = network.encode(content.unsqueeze(0))
sf = network.encode(styles[:1])
t = adaptive_instance_normalization(cf, sf)
tm, ts = calc_mean_std(t)
sm, ss = calc_mean_std(sf)
print("adain stats", torch.allclose(tm, sm, atol=1e-4), torch.allclose(ts, ss, rtol=1e-3, atol=1e-4),
      t.requires_grad, tuple(cf.shape))
try:
    calc_mean_std(torch.zeros(2, 3))
except AssertionError:
    print("calc_mean_std needs a 4-D input")


# one training step under torch.compile against the same step eagerly
def train_step(content_images, style_images):
    loss_c, loss_s = network(content_images, style_images)
    loss = args.content_weight * loss_c + args.style_weight * loss_s
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


ci, si = next(content_iter), next(style_iter)
state, opt_state = copy.deepcopy(network.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(ci, si).item() for _ in range(2)]
after = {k: v.clone() for k, v in network.state_dict().items()}
network.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(ci, si).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(network.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
