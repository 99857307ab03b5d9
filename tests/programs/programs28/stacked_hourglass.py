# Stacked Hourglass Networks for pose estimation (princeton-vl/
# pytorch_stacked_hourglass, models/layers.py, models/posenet.py and
# task/loss.py), as written: Conv (bn then relu, optional), Residual with
# its 1x1 bottleneck and need_skip skip_layer, the recursive Hourglass
# (nn.MaxPool2d(2, 2), nn.Upsample(scale_factor=2, mode='nearest'),
# up1 + up2), Merge, UnFlatten, PoseNet with intermediate supervision
# (features, outs and merge_preds / merge_features per stack, the
# predictions torch.stack(combined_hm_preds, 1)), HeatmapLoss
# ((pred - gt)**2).mean(dim=3).mean(dim=2).mean(dim=1) summed over the
# stacks, and Adam. Written for this test: 16x16 images, 2 stacks of
# depth 2, 3 keypoints drawn as Gaussians, 4 steps at lr 2e-4; one compiled
# training step against eager and the argmax keypoints of the last stack.
# (Every conv before a BatchNorm has a bias whose gradient is zero but for
# rounding; Adam turns that noise into +-lr steps, which train-mode
# BatchNorm cancels but its running means keep: at the repo's lr 1e-3
# PyTorch's own float32 losses leave its float64 ones at the third digit
# within 3 steps; at 2e-4 they agree to 1e-5, and the eval-mode heatmap
# maxima, which read those running means, are not printed.)
import copy

import numpy as np
import torch
from torch import nn

Pool = nn.MaxPool2d


def batchnorm(x):
    return nn.BatchNorm2d(x.size()[1])(x)


class Conv(nn.Module):
    def __init__(self, inp_dim, out_dim, kernel_size=3, stride=1, bn=False, relu=True):
        super(Conv, self).__init__()
        self.inp_dim = inp_dim
        self.conv = nn.Conv2d(inp_dim, out_dim, kernel_size, stride, padding=(kernel_size - 1) // 2, bias=True)
        self.relu = None
        self.bn = None
        if relu:
            self.relu = nn.ReLU()
        if bn:
            self.bn = nn.BatchNorm2d(out_dim)

    def forward(self, x):
        assert x.size()[1] == self.inp_dim, "{} {}".format(x.size()[1], self.inp_dim)
        x = self.conv(x)
        if self.bn is not None:
            x = self.bn(x)
        if self.relu is not None:
            x = self.relu(x)
        return x


class Residual(nn.Module):
    def __init__(self, inp_dim, out_dim):
        super(Residual, self).__init__()
        self.relu = nn.ReLU()
        self.bn1 = nn.BatchNorm2d(inp_dim)
        self.conv1 = Conv(inp_dim, int(out_dim / 2), 1, relu=False)
        self.bn2 = nn.BatchNorm2d(int(out_dim / 2))
        self.conv2 = Conv(int(out_dim / 2), int(out_dim / 2), 3, relu=False)
        self.bn3 = nn.BatchNorm2d(int(out_dim / 2))
        self.conv3 = Conv(int(out_dim / 2), out_dim, 1, relu=False)
        self.skip_layer = Conv(inp_dim, out_dim, 1, relu=False)
        if inp_dim == out_dim:
            self.need_skip = False
        else:
            self.need_skip = True

    def forward(self, x):
        if self.need_skip:
            residual = self.skip_layer(x)
        else:
            residual = x
        out = self.bn1(x)
        out = self.relu(out)
        out = self.conv1(out)
        out = self.bn2(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn3(out)
        out = self.relu(out)
        out = self.conv3(out)
        out += residual
        return out


class Hourglass(nn.Module):
    def __init__(self, n, f, bn=None, increase=0):
        super(Hourglass, self).__init__()
        nf = f + increase
        self.up1 = Residual(f, f)
        # Lower branch
        self.pool1 = Pool(2, 2)
        self.low1 = Residual(f, nf)
        self.n = n
        # Recursive hourglass
        if self.n > 1:
            self.low2 = Hourglass(n - 1, nf, bn=bn)
        else:
            self.low2 = Residual(nf, nf)
        self.low3 = Residual(nf, f)
        self.up2 = nn.Upsample(scale_factor=2, mode='nearest')

    def forward(self, x):
        up1 = self.up1(x)
        pool1 = self.pool1(x)
        low1 = self.low1(pool1)
        low2 = self.low2(low1)
        low3 = self.low3(low2)
        up2 = self.up2(low3)
        return up1 + up2


class UnFlatten(nn.Module):
    def forward(self, input):
        return input.view(-1, 256, 4, 4)


class Merge(nn.Module):
    def __init__(self, x_dim, y_dim):
        super(Merge, self).__init__()
        self.conv = Conv(x_dim, y_dim, 1, relu=False, bn=False)

    def forward(self, x):
        return self.conv(x)


class HeatmapLoss(torch.nn.Module):
    """
    loss for detection heatmap
    """
    def __init__(self):
        super(HeatmapLoss, self).__init__()

    def forward(self, pred, gt):
        l = ((pred - gt)**2)
        l = l.mean(dim=3).mean(dim=2).mean(dim=1)
        return l  ## l of dim bsize


class PoseNet(nn.Module):
    def __init__(self, nstack, inp_dim, oup_dim, bn=False, increase=0, **kwargs):
        super(PoseNet, self).__init__()

        self.nstack = nstack
        self.pre = nn.Sequential(
            Conv(3, 16, 3, 1, bn=True, relu=True),
            Residual(16, 32),
            Pool(2, 2),
            Residual(32, 32),
            Residual(32, inp_dim)
        )

        self.hgs = nn.ModuleList([
            nn.Sequential(
                Hourglass(2, inp_dim, bn, increase),
            ) for i in range(nstack)])

        self.features = nn.ModuleList([
            nn.Sequential(
                Residual(inp_dim, inp_dim),
                Conv(inp_dim, inp_dim, 1, bn=True, relu=True)
            ) for i in range(nstack)])

        self.outs = nn.ModuleList([Conv(inp_dim, oup_dim, 1, relu=False, bn=False) for i in range(nstack)])
        self.merge_features = nn.ModuleList([Merge(inp_dim, inp_dim) for i in range(nstack - 1)])
        self.merge_preds = nn.ModuleList([Merge(oup_dim, inp_dim) for i in range(nstack - 1)])
        self.nstack = nstack
        self.heatmapLoss = HeatmapLoss()

    def forward(self, imgs):
        ## our posenet
        x = imgs.permute(0, 3, 1, 2)  # x of size 1,3,inpdim,inpdim
        x = self.pre(x)
        combined_hm_preds = []
        for i in range(self.nstack):
            hg = self.hgs[i](x)
            feature = self.features[i](hg)
            preds = self.outs[i](feature)
            combined_hm_preds.append(preds)
            if i < self.nstack - 1:
                x = x + self.merge_preds[i](preds) + self.merge_features[i](feature)
        return torch.stack(combined_hm_preds, 1)

    def calc_loss(self, combined_hm_preds, heatmaps):
        combined_loss = []
        for i in range(self.nstack):
            combined_loss.append(self.heatmapLoss(combined_hm_preds[0][:, i], heatmaps))
        combined_loss = torch.stack(combined_loss, dim=1)
        return combined_loss


class GenerateHeatmap():
    def __init__(self, output_res, num_parts):
        self.output_res = output_res
        self.num_parts = num_parts
        sigma = self.output_res / 8  # (the repo: / 64 at 64x64)
        self.sigma = sigma
        size = 6 * sigma + 3
        x = np.arange(0, size, 1, float)
        y = x[:, np.newaxis]
        x0, y0 = 3 * sigma + 1, 3 * sigma + 1
        self.g = np.exp(- ((x - x0) ** 2 + (y - y0) ** 2) / (2 * sigma ** 2))

    def __call__(self, keypoints):
        hms = np.zeros(shape=(self.num_parts, self.output_res, self.output_res), dtype=np.float32)
        sigma = self.sigma
        for p in keypoints:
            for idx, pt in enumerate(p):
                if pt[0] > 0:
                    x, y = int(pt[0]), int(pt[1])
                    if x < 0 or y < 0 or x >= self.output_res or y >= self.output_res:
                        continue
                    ul = int(x - 3 * sigma - 1), int(y - 3 * sigma - 1)
                    br = int(x + 3 * sigma + 2), int(y + 3 * sigma + 2)

                    c, d = max(0, -ul[0]), min(br[0], self.output_res) - ul[0]
                    a, b = max(0, -ul[1]), min(br[1], self.output_res) - ul[1]

                    cc, dd = max(0, ul[0]), min(br[0], self.output_res)
                    aa, bb = max(0, ul[1]), min(br[1], self.output_res)
                    hms[idx, aa:bb, cc:dd] = np.maximum(hms[idx, aa:bb, cc:dd], self.g[a:b, c:d])
        return hms


torch.manual_seed(0)
rng = np.random.RandomState(0)
nstack, oup_dim, res = 2, 3, 8
net = PoseNet(nstack, 32, oup_dim)
print("params", sum(p.numel() for p in net.parameters()))
gen = GenerateHeatmap(res, oup_dim)
keypoints = rng.randint(1, res, size=(4, 1, oup_dim, 2))
heatmaps = torch.from_numpy(np.stack([gen(k) for k in keypoints]))
imgs = torch.randn(4, 16, 16, 3)
print("heatmaps", tuple(heatmaps.shape), round(heatmaps.sum().item(), 4))

optimizer = torch.optim.Adam(net.parameters(), lr=2e-4)


def make_train(net, optimizer):
    def train_step(imgs, heatmaps):
        combined_hm_preds = net(imgs)
        losses = net.calc_loss((combined_hm_preds,), heatmaps)
        loss = torch.sum(torch.mean(losses, dim=0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, losses.detach()
    return train_step


train_step = make_train(net, optimizer)
net.train()
for step in range(4):
    loss, losses = train_step(imgs, heatmaps)
    print("step", step, "loss %.6f" % loss.item(), "per stack",
          [round(v, 6) for v in losses.mean(0).tolist()])

net_c, opt_c = copy.deepcopy(net), None
opt_c = torch.optim.Adam(net_c.parameters(), lr=2e-4)
opt_c.load_state_dict(copy.deepcopy(optimizer.state_dict()))
loss_c, _ = torch.compile(make_train(net_c, opt_c))(imgs, heatmaps)
loss_e, _ = train_step(imgs, heatmaps)
print("compiled loss %.6f" % loss_c.item())
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-6),
      # (the conv biases: Adam's steps on their rounding-noise gradients)
      all(torch.allclose(a, b, atol=1e-5) for (k, a), b in
          zip(net_c.state_dict().items(), net.state_dict().values())
          if not k.endswith("conv.bias") and "running_mean" not in k))

net.eval()
with torch.no_grad():
    pred = net(imgs)[:, -1]
    flat = pred.reshape(pred.shape[0], oup_dim, -1)
    idx = flat.argmax(-1)
    print("keypoints", torch.stack([idx % res, idx // res], -1)[0].tolist())
