# A face-recognition head the way ronghuaiyang/arcface-pytorch
# (models/metrics.py, models/focal_loss.py, models/resnet.py, train.py) and
# KaiyangZhou/pytorch-center-loss (center_loss.py, main.py) write it:
# ArcMarginProduct (a FloatTensor Parameter with nn.init.xavier_uniform_,
# F.linear(F.normalize(input), F.normalize(self.weight)), sine =
# torch.sqrt((1.0 - torch.pow(cosine, 2)).clamp(0, 1)), phi = cosine *
# self.cos_m - sine * self.sin_m, torch.where(cosine > self.th, phi, cosine -
# self.mm) and the easy_margin branch, one_hot.scatter_(1, label.view(-1,
# 1).long(), 1), (one_hot * phi) + ((1.0 - one_hot) * cosine), output *=
# self.s), AddMarginProduct (CosFace), SphereProduct (the mlambda list of
# lambdas, self.iter annealing max(self.LambdaMin, self.base * (1 + self.gamma
# * self.iter) ** (-1 * self.power)), cos_theta.data.acos(),
# torch.floor(self.m * theta / 3.14159265), NormOfFeature =
# torch.norm(input, 2, 1), the ((-1.0) ** k) * cos_m_theta - 2 * k
# phi_theta), FocalLoss (logp = self.ce(input, target); p = torch.exp(-logp);
# loss = (1 - p) ** self.gamma * logp), CenterLoss (distmat = torch.pow(x,
# 2).sum(dim=1, keepdim=True).expand(batch_size, self.num_classes) +
# torch.pow(self.centers, 2).sum(dim=1, keepdim=True).expand(self.num_classes,
# batch_size).t(); distmat.addmm_(x, self.centers.t(), beta=1, alpha=-2);
# labels.unsqueeze(1).expand(...).eq(classes.expand(...)); (distmat *
# mask.float()).clamp(min=1e-12, max=1e+12).sum() / batch_size), main.py's
# separate SGD for the centers with param.grad.data *= (1. / weight_cent),
# and a small IR-ResNet backbone (BatchNorm2d / PReLU / IRBlock with
# SEBlock, Dropout, BatchNorm1d feature embedding) trained a few SGD steps
# with StepLR.  Changes for a CPU test: 16x16 1-channel crops from numpy,
# 6 identities, widths 8 / 16, embedding 16, weights from numpy (the
# torch-seeded inits are only checked, [rng]), dropout 0; then one
# ArcFace + CenterLoss step under torch.compile against eager.
import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import Parameter
from torch.optim.lr_scheduler import StepLR


# models/metrics.py
class ArcMarginProduct(nn.Module):
    r"""Implement of large margin arc distance: :
        Args:
            in_features: size of each input sample
            out_features: size of each output sample
            s: norm of input feature
            m: margin

            cos(theta + m)
        """
    def __init__(self, in_features, out_features, s=30.0, m=0.50, easy_margin=False):
        super(ArcMarginProduct, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.s = s
        self.m = m
        self.weight = Parameter(torch.FloatTensor(out_features, in_features))
        nn.init.xavier_uniform_(self.weight)

        self.easy_margin = easy_margin
        self.cos_m = math.cos(m)
        self.sin_m = math.sin(m)
        self.th = math.cos(math.pi - m)
        self.mm = math.sin(math.pi - m) * m

    def forward(self, input, label):
        # --------------------------- cos(theta) & phi(theta) ---------------------------
        cosine = F.linear(F.normalize(input), F.normalize(self.weight))
        sine = torch.sqrt((1.0 - torch.pow(cosine, 2)).clamp(0, 1))
        phi = cosine * self.cos_m - sine * self.sin_m
        if self.easy_margin:
            phi = torch.where(cosine > 0, phi, cosine)
        else:
            phi = torch.where(cosine > self.th, phi, cosine - self.mm)
        # --------------------------- convert label to one-hot ---------------------------
        # one_hot = torch.zeros(cosine.size(), requires_grad=True, device='cuda')
        one_hot = torch.zeros(cosine.size(), device='cpu')
        one_hot.scatter_(1, label.view(-1, 1).long(), 1)
        # -------------torch.where(out_i = {x_i if condition_i else y_i) -------------
        output = (one_hot * phi) + ((1.0 - one_hot) * cosine)  # you can use torch.where if your torch.__version__ is 0.4
        output *= self.s
        # print(output)

        return output


class AddMarginProduct(nn.Module):
    r"""Implement of large margin cosine distance: :
    Args:
        in_features: size of each input sample
        out_features: size of each output sample
        s: norm of input feature
        m: margin
        cos(theta) - m
    """

    def __init__(self, in_features, out_features, s=30.0, m=0.40):
        super(AddMarginProduct, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.s = s
        self.m = m
        self.weight = Parameter(torch.FloatTensor(out_features, in_features))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, input, label):
        # --------------------------- cos(theta) & phi(theta) ---------------------------
        cosine = F.linear(F.normalize(input), F.normalize(self.weight))
        phi = cosine - self.m
        # --------------------------- convert label to one-hot ---------------------------
        one_hot = torch.zeros(cosine.size(), device='cpu')
        # one_hot = one_hot.cuda() if cosine.is_cuda else one_hot
        one_hot.scatter_(1, label.view(-1, 1).long(), 1)
        # -------------torch.where(out_i = {x_i if condition_i else y_i) -------------
        output = (one_hot * phi) + ((1.0 - one_hot) * cosine)  # you can use torch.where if your torch.__version__ is 0.4
        output *= self.s
        # print(output)

        return output

    def __repr__(self):
        return self.__class__.__name__ + '(' \
               + 'in_features=' + str(self.in_features) \
               + ', out_features=' + str(self.out_features) \
               + ', s=' + str(self.s) \
               + ', m=' + str(self.m) + ')'


class SphereProduct(nn.Module):
    r"""Implement of large margin cosine distance: :
    Args:
        in_features: size of each input sample
        out_features: size of each output sample
        m: margin
        cos(m*theta)
    """
    def __init__(self, in_features, out_features, m=4):
        super(SphereProduct, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.m = m
        self.base = 1000.0
        self.gamma = 0.12
        self.power = 1
        self.LambdaMin = 5.0
        self.iter = 0
        self.weight = Parameter(torch.FloatTensor(out_features, in_features))
        nn.init.xavier_uniform(self.weight)

        # duplication formula
        self.mlambda = [
            lambda x: x ** 0,
            lambda x: x ** 1,
            lambda x: 2 * x ** 2 - 1,
            lambda x: 4 * x ** 3 - 3 * x,
            lambda x: 8 * x ** 4 - 8 * x ** 2 + 1,
            lambda x: 16 * x ** 5 - 20 * x ** 3 + 5 * x
        ]

    def forward(self, input, label):
        # lambda = max(lambda_min,base*(1+gamma*iteration)^(-power))
        self.iter += 1
        self.lamb = max(self.LambdaMin, self.base * (1 + self.gamma * self.iter) ** (-1 * self.power))

        # --------------------------- cos(theta) & phi(theta) ---------------------------
        cos_theta = F.linear(F.normalize(input), F.normalize(self.weight))
        cos_theta = cos_theta.clamp(-1, 1)
        cos_m_theta = self.mlambda[self.m](cos_theta)
        theta = cos_theta.data.acos()
        k = (self.m * theta / 3.14159265).floor()
        phi_theta = ((-1.0) ** k) * cos_m_theta - 2 * k
        NormOfFeature = torch.norm(input, 2, 1)

        # --------------------------- convert label to one-hot ---------------------------
        one_hot = torch.zeros(cos_theta.size())
        one_hot = one_hot.cuda() if cos_theta.is_cuda else one_hot
        one_hot.scatter_(1, label.view(-1, 1), 1)

        # --------------------------- Calculate output ---------------------------
        output = (one_hot * (phi_theta - cos_theta) / (1 + self.lamb)) + cos_theta
        output *= NormOfFeature.view(-1, 1)

        return output

    def __repr__(self):
        return self.__class__.__name__ + '(' \
               + 'in_features=' + str(self.in_features) \
               + ', out_features=' + str(self.out_features) \
               + ', m=' + str(self.m) + ')'


# models/focal_loss.py
class FocalLoss(nn.Module):

    def __init__(self, gamma=0, eps=1e-7):
        super(FocalLoss, self).__init__()
        self.gamma = gamma
        self.eps = eps
        self.ce = torch.nn.CrossEntropyLoss()

    def forward(self, input, target):
        logp = self.ce(input, target)
        p = torch.exp(-logp)
        loss = (1 - p) ** self.gamma * logp
        return loss.mean()


# pytorch-center-loss/center_loss.py
class CenterLoss(nn.Module):
    """Center loss.

    Reference:
    Wen et al. A Discriminative Feature Learning Approach for Deep Face Recognition. ECCV 2016.

    Args:
        num_classes (int): number of classes.
        feat_dim (int): feature dimension.
    """
    def __init__(self, num_classes=10, feat_dim=2, use_gpu=True):
        super(CenterLoss, self).__init__()
        self.num_classes = num_classes
        self.feat_dim = feat_dim
        self.use_gpu = use_gpu

        if self.use_gpu:
            self.centers = nn.Parameter(torch.randn(self.num_classes, self.feat_dim).cuda())
        else:
            self.centers = nn.Parameter(torch.randn(self.num_classes, self.feat_dim))

    def forward(self, x, labels):
        """
        Args:
            x: feature matrix with shape (batch_size, feat_dim).
            labels: ground truth labels with shape (batch_size).
        """
        batch_size = x.size(0)
        distmat = torch.pow(x, 2).sum(dim=1, keepdim=True).expand(batch_size, self.num_classes) + \
                  torch.pow(self.centers, 2).sum(dim=1, keepdim=True).expand(self.num_classes, batch_size).t()
        distmat.addmm_(x, self.centers.t(), beta=1, alpha=-2)

        classes = torch.arange(self.num_classes).long()
        if self.use_gpu: classes = classes.cuda()
        labels = labels.unsqueeze(1).expand(batch_size, self.num_classes)
        mask = labels.eq(classes.expand(batch_size, self.num_classes))

        dist = distmat * mask.float()
        loss = dist.clamp(min=1e-12, max=1e+12).sum() / batch_size

        return loss


# models/resnet.py (resnet_face18, scaled down)
def conv3x3(in_planes, out_planes, stride=1):
    """3x3 convolution with padding"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride,
                     padding=1, bias=False)


class SEBlock(nn.Module):
    def __init__(self, channel, reduction=16):
        super(SEBlock, self).__init__()
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Sequential(
                nn.Linear(channel, channel // reduction),
                nn.PReLU(),
                nn.Linear(channel // reduction, channel),
                nn.Sigmoid()
        )

    def forward(self, x):
        b, c, _, _ = x.size()
        y = self.avg_pool(x).view(b, c)
        y = self.fc(y).view(b, c, 1, 1)
        return x * y


class IRBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, use_se=True):
        super(IRBlock, self).__init__()
        self.bn0 = nn.BatchNorm2d(inplanes)
        self.conv1 = conv3x3(inplanes, inplanes)
        self.bn1 = nn.BatchNorm2d(inplanes)
        self.prelu = nn.PReLU()
        self.conv2 = conv3x3(inplanes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride
        self.use_se = use_se
        if self.use_se:
            self.se = SEBlock(planes, reduction=4)

    def forward(self, x):
        residual = x
        out = self.bn0(x)
        out = self.conv1(out)
        out = self.bn1(out)
        out = self.prelu(out)

        out = self.conv2(out)
        out = self.bn2(out)
        if self.use_se:
            out = self.se(out)

        if self.downsample is not None:
            residual = self.downsample(x)

        out += residual
        out = self.prelu(out)

        return out


class ResNetFace(nn.Module):
    def __init__(self, block, layers, use_se=True, feat_dim=16):
        self.inplanes = 8
        self.use_se = use_se
        super(ResNetFace, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.prelu = nn.PReLU()
        self.maxpool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.layer1 = self._make_layer(block, 8, layers[0])
        self.layer2 = self._make_layer(block, 16, layers[1], stride=2)
        self.bn4 = nn.BatchNorm2d(16)
        self.dropout = nn.Dropout()
        self.fc5 = nn.Linear(16 * 4 * 4, feat_dim)
        self.bn5 = nn.BatchNorm1d(feat_dim)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.xavier_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d) or isinstance(m, nn.BatchNorm1d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.xavier_normal_(m.weight)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion,
                          kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = []
        layers.append(block(self.inplanes, planes, stride, downsample, use_se=self.use_se))
        self.inplanes = planes
        for i in range(1, blocks):
            layers.append(block(self.inplanes, planes, use_se=self.use_se))

        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.prelu(x)
        x = self.maxpool(x)

        x = self.layer1(x)
        x = self.layer2(x)
        x = self.bn4(x)
        x = self.dropout(x)
        x = x.view(x.size(0), -1)
        x = self.fc5(x)
        x = self.bn5(x)

        return x


def fmt(t, n=4):
    return [f"{v:.4f}" for v in torch.as_tensor(t).reshape(-1)[:n].tolist()]


def load_numpy(model, seed, std=0.2):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if 'bn' in name or 'prelu' in name or 'downsample.1' in name or name.endswith('fc.1.weight'):
                continue        # BatchNorm's 1 / 0 and PReLU's 0.25 stay
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


rng = np.random.default_rng(0)
num_classes, feat_dim, batch = 6, 16, 12
feats = torch.from_numpy(rng.normal(0, 1, (batch, feat_dim)).astype(np.float32))
label = torch.from_numpy(np.arange(batch) % num_classes)

# the margin heads
torch.manual_seed(0)
arc = ArcMarginProduct(feat_dim, num_classes, s=30, m=0.5, easy_margin=False)
bound = math.sqrt(6 / (feat_dim + num_classes))
print("xavier", bool(arc.weight.abs().max() <= bound), tuple(arc.weight.shape))
load_numpy(arc, 1)
arc.weight.data[0] = arc.weight.data[0] * 0.15 - F.normalize(feats[0:1]).squeeze(0)   # cosine < th: the th branch
x = feats.clone().requires_grad_()
out = arc(x, label)
out.sum().backward()
print("arc", bool(F.linear(F.normalize(x), F.normalize(arc.weight))[0, 0] < arc.th), fmt(out[0], 6), fmt(out[1], 3), "grad", fmt(x.grad[0]), fmt(arc.weight.grad[1]))
print("arc consts", f"{arc.cos_m:.5f} {arc.sin_m:.5f} {arc.th:.5f} {arc.mm:.5f}")
easy = ArcMarginProduct(feat_dim, num_classes, s=16, m=0.3, easy_margin=True)
easy.weight.data.copy_(arc.weight.data)
print("easy", fmt(easy(feats, label)[0], 6))
add = AddMarginProduct(feat_dim, num_classes, s=30, m=0.35)
load_numpy(add, 2)
print(add, fmt(add(feats, label)[2], 6))
sphere = SphereProduct(feat_dim, num_classes, m=4)
load_numpy(sphere, 3)
xs = feats.clone().requires_grad_()
for it in range(3):
    so = sphere(xs, label)
print(sphere, "iter", sphere.iter, f"lamb {sphere.lamb:.4f}", fmt(so[0], 6))
so.sum().backward()
print("sphere grad", fmt(xs.grad[0]), fmt(sphere.weight.grad[0]))
sphere.iter = 10000
print("lamb min", fmt(sphere(feats, label)[1], 3), sphere.lamb)
print("mlambda", [round(f(0.3), 6) for f in sphere.mlambda])

# focal loss and center loss
focal = FocalLoss(gamma=2)
logits = torch.from_numpy(rng.normal(0, 2, (batch, num_classes)).astype(np.float32)).requires_grad_()
fl = focal(logits, label)
fl.backward()
print("focal", f"{fl.item():.5f}", fmt(logits.grad[0], 6), f"{FocalLoss(0)(logits, label).item():.5f}")
torch.manual_seed(0)
center_loss = CenterLoss(num_classes=num_classes, feat_dim=feat_dim, use_gpu=False)
print("centers", tuple(center_loss.centers.shape), center_loss.centers.requires_grad)
load_numpy(center_loss, 4, std=1.0)
xc = feats.clone().requires_grad_()
cl = center_loss(xc, label)
cl.backward()
print("center loss", f"{cl.item():.4f}", fmt(xc.grad[0]), fmt(center_loss.centers.grad[1]))
ref = ((feats - center_loss.centers.detach()[label]) ** 2).sum(1).mean()
print("center ref", torch.allclose(cl, ref, rtol=1e-4))

# training: backbone + ArcFace + FocalLoss, CenterLoss with its own SGD
torch.manual_seed(0)
model = ResNetFace(IRBlock, [1, 1], use_se=True, feat_dim=feat_dim)
print("init", model.bn5.weight.tolist()[:2], model.fc5.bias.abs().sum().item())
load_numpy(model, 5, std=0.15)
model.dropout.p = 0.0
metric_fc = ArcMarginProduct(feat_dim, num_classes, s=30, m=0.5, easy_margin=False)
load_numpy(metric_fc, 6)
criterion = FocalLoss(gamma=2)
optimizer = torch.optim.SGD([{'params': model.parameters()}, {'params': metric_fc.parameters()}],
                            lr=0.05, weight_decay=5e-4)
scheduler = StepLR(optimizer, step_size=2, gamma=0.1)
weight_cent = 0.01
optimizer_centloss = torch.optim.SGD(center_loss.parameters(), lr=0.5)
images = torch.from_numpy(rng.normal(0, 1, (batch, 1, 16, 16)).astype(np.float32))
for i in range(4):
    model.train()
    feature = model(images)
    output = metric_fc(feature, label)
    loss_xent = criterion(output, label)
    loss_cent = center_loss(feature, label)
    loss = loss_xent + weight_cent * loss_cent
    optimizer.zero_grad()
    optimizer_centloss.zero_grad()
    loss.backward()
    optimizer.step()
    # by doing so, weight_cent would not impact on the learning of centers
    for param in center_loss.parameters():
        param.grad.data *= (1. / weight_cent)
    optimizer_centloss.step()
    scheduler.step()
    output = output.data.cpu().numpy()
    output = np.argmax(output, axis=1)
    acc = np.mean((output == label.data.cpu().numpy()).astype(int))
    print('iter {} loss {:.5f} xent {:.5f} cent {:.4f} acc {} lr {}'.format(
        i, loss.item(), loss_xent.item(), loss_cent.item(), acc, optimizer.param_groups[0]['lr']))
print("centers", fmt(center_loss.centers[0]), "bn5", fmt(model.bn5.running_mean), "prelu",
      f"{model.prelu.weight.item():.5f}", f"{model.layer1[0].se.fc[1].weight.item():.5f}")
model.eval()
with torch.no_grad():
    emb = model(images)
    sims = F.normalize(emb) @ F.normalize(emb).t()
print("eval emb", fmt(emb[0]), "cos", fmt(sims[0], 6))


# one ArcFace + CenterLoss step under torch.compile against the same step eagerly
def head_step(feature, label):
    optimizer.zero_grad()
    optimizer_centloss.zero_grad()
    output = metric_fc(feature, label)
    loss = criterion(output, label) + weight_cent * center_loss(feature, label)
    loss.backward()
    optimizer.step()
    optimizer_centloss.step()
    return loss


fe = emb.clone()
mods = (metric_fc, center_loss)
state = [copy.deepcopy(m.state_dict()) for m in mods]
opt_state = [copy.deepcopy(o.state_dict()) for o in (optimizer, optimizer_centloss)]
eager = [head_step(fe, label).item() for _ in range(2)]
after = [{k: v.clone() for k, v in m.state_dict().items()} for m in mods]
for m, s in zip(mods, state):
    m.load_state_dict(s)
for o, s in zip((optimizer, optimizer_centloss), opt_state):
    o.load_state_dict(s)
cstep = torch.compile(head_step)
compiled = [cstep(fe, label).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(m.state_dict()[k], a[k], rtol=1e-4, atol=1e-5) for m, a in zip(mods, after) for k in a))
