# SSD training and detection the way amdegroot/ssd.pytorch writes it
# (layers/box_utils.py, layers/modules/multibox_loss.py, layers/modules/
# l2norm.py, layers/functions/prior_box.py, layers/functions/detection.py,
# ssd.py, train.py): point_form, center_size (whose torch.cat(tensor, tensor,
# 1) PyTorch refuses: the repo never calls it), intersect's
# unsqueeze / expand / torch.min / torch.max and torch.clamp(min=0), jaccard,
# match (overlaps.max(1, keepdim=True), squeeze_, best_truth_overlap.
# index_fill_(0, best_prior_idx, 2), the for-loop best_truth_idx[best_prior_idx[j]]
# = j, conf[best_truth_overlap < threshold] = 0, loc_t[idx] = loc into an
# uninitialized torch.Tensor(num, num_priors, 4) / torch.LongTensor), encode /
# decode with variances and torch.log / torch.exp, log_sum_exp's x.data.max(),
# MultiBoxLoss's hard negative mining (its loss_c[pos] = 0 on the unviewed
# [batch * priors, 1] loss, which PyTorch refuses, then the widely used fix
# of viewing first; loss_c.sort(1, descending=True), idx_rank = loss_idx.sort(1),
# torch.clamp(self.negpos_ratio * num_pos, max=pos.size(1) - 1),
# (pos_idx + neg_idx).gt(0) on bool masks, F.smooth_l1_loss / F.cross_entropy
# summed, loss_l /= N by a LongTensor), PriorBox.forward (itertools.product,
# math.sqrt, torch.Tensor(mean).view(-1, 4), clamp_(max=1, min=0)), L2Norm
# (an uninitialized Parameter set by init.constant_, x.pow(2).sum(dim=1,
# keepdim=True).sqrt() + self.eps, torch.div, unsqueeze / expand_as),
# the vgg / add_extras / multibox builders, SSD.forward's sources with
# permute(0, 2, 3, 1).contiguous() and view / cat, weights_init through
# .apply, train.py's SGD with adjust_learning_rate, and Detect's per-class
# nms (scores.new(...).zero_().long(), scores.sort(0), torch.index_select(
# x1, 0, idx, out=xx1) into boxes.new() tensors, w.resize_as_(xx2),
# torch.clamp(xx1, min=x1[i]) with tensor bounds, idx[IoU.le(overlap)]) and
# its final rank filter (flt[mask].fill_(0), which fills a copy).
# Changes for a CPU test: a tiny VGG-like base (two conv stages, then pool5 /
# dilated conv6 / conv7) and two extras pairs on 32x32 images with four
# feature maps (16, 8, 4, 2) and its prior config; the source split and
# vgg_source indices follow that base (the repo's 23 / [21, -2] are VGG16's);
# Detect as a plain class (the repo's non-static autograd.Function forward is
# refused by today's PyTorch); size_average=False written as reduction='sum';
# weights and images from numpy; a few SGD steps; then one step of the
# L2Norm + first loc / conf heads under torch.compile against eager.
import copy
from itertools import product as product
from math import sqrt as sqrt

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
from torch.autograd import Variable

voc_tiny = {
    'num_classes': 4,
    'feature_maps': [16, 8, 4, 2],
    'min_dim': 32,
    'steps': [2, 4, 8, 16],
    'min_sizes': [4, 9, 15, 22],
    'max_sizes': [9, 15, 22, 30],
    'aspect_ratios': [[2], [2, 3], [2, 3], [2]],
    'variance': [0.1, 0.2],
    'clip': True,
    'name': 'VOC',
}
cfg = voc_tiny


# layers/box_utils.py
def point_form(boxes):
    return torch.cat((boxes[:, :2] - boxes[:, 2:] / 2,     # xmin, ymin
                      boxes[:, :2] + boxes[:, 2:] / 2), 1)  # xmax, ymax


def center_size(boxes):
    return torch.cat((boxes[:, 2:] + boxes[:, :2]) / 2,  # cx, cy
                     boxes[:, 2:] - boxes[:, :2], 1)  # w, h


def intersect(box_a, box_b):
    A = box_a.size(0)
    B = box_b.size(0)
    max_xy = torch.min(box_a[:, 2:].unsqueeze(1).expand(A, B, 2),
                       box_b[:, 2:].unsqueeze(0).expand(A, B, 2))
    min_xy = torch.max(box_a[:, :2].unsqueeze(1).expand(A, B, 2),
                       box_b[:, :2].unsqueeze(0).expand(A, B, 2))
    inter = torch.clamp((max_xy - min_xy), min=0)
    return inter[:, :, 0] * inter[:, :, 1]


def jaccard(box_a, box_b):
    inter = intersect(box_a, box_b)
    area_a = ((box_a[:, 2] - box_a[:, 0]) *
              (box_a[:, 3] - box_a[:, 1])).unsqueeze(1).expand_as(inter)  # [A,B]
    area_b = ((box_b[:, 2] - box_b[:, 0]) *
              (box_b[:, 3] - box_b[:, 1])).unsqueeze(0).expand_as(inter)  # [A,B]
    union = area_a + area_b - inter
    return inter / union  # [A,B]


def match(threshold, truths, priors, variances, labels, loc_t, conf_t, idx):
    # jaccard index
    overlaps = jaccard(
        truths,
        point_form(priors)
    )
    # (Bipartite Matching)
    # [1,num_objects] best prior for each ground truth
    best_prior_overlap, best_prior_idx = overlaps.max(1, keepdim=True)
    # [1,num_priors] best ground truth for each prior
    best_truth_overlap, best_truth_idx = overlaps.max(0, keepdim=True)
    best_truth_idx.squeeze_(0)
    best_truth_overlap.squeeze_(0)
    best_prior_idx.squeeze_(1)
    best_prior_overlap.squeeze_(1)
    best_truth_overlap.index_fill_(0, best_prior_idx, 2)  # ensure best prior
    # TODO refactor: index  best_prior_idx with long tensor
    # ensure every gt matches with its prior of max overlap
    for j in range(best_prior_idx.size(0)):
        best_truth_idx[best_prior_idx[j]] = j
    matches = truths[best_truth_idx]          # Shape: [num_priors,4]
    conf = labels[best_truth_idx] + 1         # Shape: [num_priors]
    conf[best_truth_overlap < threshold] = 0  # label as background
    loc = encode(matches, priors, variances)
    loc_t[idx] = loc    # [num_priors,4] encoded offsets to learn
    conf_t[idx] = conf  # [num_priors] top class label for each prior


def encode(matched, priors, variances):
    # dist b/t match center and prior's center
    g_cxcy = (matched[:, :2] + matched[:, 2:]) / 2 - priors[:, :2]
    # encode variance
    g_cxcy /= (variances[0] * priors[:, 2:])
    # match wh / prior wh
    g_wh = (matched[:, 2:] - matched[:, :2]) / priors[:, 2:]
    g_wh = torch.log(g_wh) / variances[1]
    # return target for smooth_l1_loss
    return torch.cat([g_cxcy, g_wh], 1)  # [num_priors,4]


def decode(loc, priors, variances):
    boxes = torch.cat((
        priors[:, :2] + loc[:, :2] * variances[0] * priors[:, 2:],
        priors[:, 2:] * torch.exp(loc[:, 2:] * variances[1])), 1)
    boxes[:, :2] -= boxes[:, 2:] / 2
    boxes[:, 2:] += boxes[:, :2]
    return boxes


def log_sum_exp(x):
    x_max = x.data.max()
    return torch.log(torch.sum(torch.exp(x - x_max), 1, keepdim=True)) + x_max


def nms(boxes, scores, overlap=0.5, top_k=200):
    keep = scores.new(scores.size(0)).zero_().long()
    if boxes.numel() == 0:
        return keep
    x1 = boxes[:, 0]
    y1 = boxes[:, 1]
    x2 = boxes[:, 2]
    y2 = boxes[:, 3]
    area = torch.mul(x2 - x1, y2 - y1)
    v, idx = scores.sort(0)  # sort in ascending order
    # I = I[v >= 0.01]
    idx = idx[-top_k:]  # indices of the top-k largest vals
    xx1 = boxes.new()
    yy1 = boxes.new()
    xx2 = boxes.new()
    yy2 = boxes.new()
    w = boxes.new()
    h = boxes.new()

    # keep = torch.Tensor()
    count = 0
    while idx.numel() > 0:
        i = idx[-1]  # index of current largest val
        # keep.append(i)
        keep[count] = i
        count += 1
        if idx.size(0) == 1:
            break
        idx = idx[:-1]  # remove kept element from view
        # load bboxes of next highest vals
        torch.index_select(x1, 0, idx, out=xx1)
        torch.index_select(y1, 0, idx, out=yy1)
        torch.index_select(x2, 0, idx, out=xx2)
        torch.index_select(y2, 0, idx, out=yy2)
        # store element-wise max with next highest score
        xx1 = torch.clamp(xx1, min=x1[i])
        yy1 = torch.clamp(yy1, min=y1[i])
        xx2 = torch.clamp(xx2, max=x2[i])
        yy2 = torch.clamp(yy2, max=y2[i])
        w.resize_as_(xx2)
        h.resize_as_(yy2)
        w = xx2 - xx1
        h = yy2 - yy1
        # check sizes of xx1 and xx2.. after each iteration
        w = torch.clamp(w, min=0.0)
        h = torch.clamp(h, min=0.0)
        inter = w * h
        # IoU = i / (area(a) + area(b) - i)
        rem_areas = torch.index_select(area, 0, idx)  # load remaining areas)
        union = (rem_areas - inter) + area[i]
        IoU = inter / union  # store result in iou
        # keep only elements with an IoU <= overlap
        idx = idx[IoU.le(overlap)]
    return keep, count


# layers/modules/multibox_loss.py
class MultiBoxLoss(nn.Module):

    def __init__(self, num_classes, overlap_thresh, prior_for_matching,
                 bkg_label, neg_mining, neg_pos, neg_overlap, encode_target,
                 use_gpu=True, view_first=True):
        super(MultiBoxLoss, self).__init__()
        self.use_gpu = use_gpu
        self.num_classes = num_classes
        self.threshold = overlap_thresh
        self.background_label = bkg_label
        self.encode_target = encode_target
        self.use_prior_for_matching = prior_for_matching
        self.do_neg_mining = neg_mining
        self.negpos_ratio = neg_pos
        self.neg_overlap = neg_overlap
        self.variance = cfg['variance']
        self.view_first = view_first

    def forward(self, predictions, targets):
        loc_data, conf_data, priors = predictions
        num = loc_data.size(0)
        priors = priors[:loc_data.size(1), :]
        num_priors = (priors.size(0))
        num_classes = self.num_classes

        # match priors (default boxes) and ground truth boxes
        loc_t = torch.Tensor(num, num_priors, 4)
        conf_t = torch.LongTensor(num, num_priors)
        for idx in range(num):
            truths = targets[idx][:, :-1].data
            labels = targets[idx][:, -1].data
            defaults = priors.data
            match(self.threshold, truths, defaults, self.variance, labels,
                  loc_t, conf_t, idx)
        # wrap targets
        loc_t = Variable(loc_t, requires_grad=False)
        conf_t = Variable(conf_t, requires_grad=False)

        pos = conf_t > 0
        num_pos = pos.sum(dim=1, keepdim=True)

        # Localization Loss (Smooth L1)
        # Shape: [batch,num_priors,4]
        pos_idx = pos.unsqueeze(pos.dim()).expand_as(loc_data)
        loc_p = loc_data[pos_idx].view(-1, 4)
        loc_t = loc_t[pos_idx].view(-1, 4)
        loss_l = F.smooth_l1_loss(loc_p, loc_t, reduction='sum')

        # Compute max conf across batch for hard negative mining
        batch_conf = conf_data.view(-1, self.num_classes)
        loss_c = log_sum_exp(batch_conf) - batch_conf.gather(1, conf_t.view(-1, 1))

        # Hard Negative Mining
        if self.view_first:
            loss_c = loss_c.view(num, -1)
        loss_c[pos] = 0  # filter out pos boxes for now
        loss_c = loss_c.view(num, -1)
        _, loss_idx = loss_c.sort(1, descending=True)
        _, idx_rank = loss_idx.sort(1)
        num_pos = pos.long().sum(1, keepdim=True)
        num_neg = torch.clamp(self.negpos_ratio * num_pos, max=pos.size(1) - 1)
        neg = idx_rank < num_neg.expand_as(idx_rank)

        # Confidence Loss Including Positive and Negative Examples
        pos_idx = pos.unsqueeze(2).expand_as(conf_data)
        neg_idx = neg.unsqueeze(2).expand_as(conf_data)
        conf_p = conf_data[(pos_idx + neg_idx).gt(0)].view(-1, self.num_classes)
        targets_weighted = conf_t[(pos + neg).gt(0)]
        loss_c = F.cross_entropy(conf_p, targets_weighted, reduction='sum')

        # Sum of losses: L(x,c,l,g) = (Lloc(x,l,g) + Lconf(x, c)) / N

        N = num_pos.data.sum()
        loss_l /= N
        loss_c /= N
        return loss_l, loss_c


# layers/modules/l2norm.py
class L2Norm(nn.Module):
    def __init__(self, n_channels, scale):
        super(L2Norm, self).__init__()
        self.n_channels = n_channels
        self.gamma = scale or None
        self.eps = 1e-10
        self.weight = nn.Parameter(torch.Tensor(self.n_channels))
        self.reset_parameters()

    def reset_parameters(self):
        init.constant_(self.weight, self.gamma)

    def forward(self, x):
        norm = x.pow(2).sum(dim=1, keepdim=True).sqrt() + self.eps
        # x /= norm
        x = torch.div(x, norm)
        out = self.weight.unsqueeze(0).unsqueeze(2).unsqueeze(3).expand_as(x) * x
        return out


# layers/functions/prior_box.py
class PriorBox(object):
    def __init__(self, cfg):
        super(PriorBox, self).__init__()
        self.image_size = cfg['min_dim']
        # number of priors for feature map location (either 4 or 6)
        self.num_priors = len(cfg['aspect_ratios'])
        self.variance = cfg['variance'] or [0.1]
        self.feature_maps = cfg['feature_maps']
        self.min_sizes = cfg['min_sizes']
        self.max_sizes = cfg['max_sizes']
        self.steps = cfg['steps']
        self.aspect_ratios = cfg['aspect_ratios']
        self.clip = cfg['clip']
        self.version = cfg['name']
        for v in self.variance:
            if v <= 0:
                raise ValueError('Variances must be greater than 0')

    def forward(self):
        mean = []
        for k, f in enumerate(self.feature_maps):
            for i, j in product(range(f), repeat=2):
                f_k = self.image_size / self.steps[k]
                # unit center x,y
                cx = (j + 0.5) / f_k
                cy = (i + 0.5) / f_k

                # aspect_ratio: 1
                # rel size: min_size
                s_k = self.min_sizes[k] / self.image_size
                mean += [cx, cy, s_k, s_k]

                # aspect_ratio: 1
                # rel size: sqrt(s_k * s_(k+1))
                s_k_prime = sqrt(s_k * (self.max_sizes[k] / self.image_size))
                mean += [cx, cy, s_k_prime, s_k_prime]

                # rest of aspect ratios
                for ar in self.aspect_ratios[k]:
                    mean += [cx, cy, s_k * sqrt(ar), s_k / sqrt(ar)]
                    mean += [cx, cy, s_k / sqrt(ar), s_k * sqrt(ar)]
        # back to torch land
        output = torch.Tensor(mean).view(-1, 4)
        if self.clip:
            output.clamp_(max=1, min=0)
        return output


# layers/functions/detection.py
class Detect:
    def __init__(self, num_classes, bkg_label, top_k, conf_thresh, nms_thresh):
        self.num_classes = num_classes
        self.background_label = bkg_label
        self.top_k = top_k
        # Parameters used in nms.
        self.nms_thresh = nms_thresh
        if nms_thresh <= 0:
            raise ValueError('nms_threshold must be non negative.')
        self.conf_thresh = conf_thresh
        self.variance = cfg['variance']

    def __call__(self, loc_data, conf_data, prior_data):
        return self.forward(loc_data, conf_data, prior_data)

    def forward(self, loc_data, conf_data, prior_data):
        num = loc_data.size(0)  # batch size
        num_priors = prior_data.size(0)
        output = torch.zeros(num, self.num_classes, self.top_k, 5)
        conf_preds = conf_data.view(num, num_priors,
                                    self.num_classes).transpose(2, 1)

        # Decode predictions into bboxes.
        for i in range(num):
            decoded_boxes = decode(loc_data[i], prior_data, self.variance)
            # For each class, perform nms
            conf_scores = conf_preds[i].clone()

            for cl in range(1, self.num_classes):
                c_mask = conf_scores[cl].gt(self.conf_thresh)
                scores = conf_scores[cl][c_mask]
                if scores.size(0) == 0:
                    continue
                l_mask = c_mask.unsqueeze(1).expand_as(decoded_boxes)
                boxes = decoded_boxes[l_mask].view(-1, 4)
                # idx of highest scoring and non-overlapping boxes per class
                ids, count = nms(boxes, scores, self.nms_thresh, self.top_k)
                output[i, cl, :count] = \
                    torch.cat((scores[ids[:count]].unsqueeze(1),
                               boxes[ids[:count]]), 1)
        flt = output.contiguous().view(num, -1, 5)
        _, idx = flt[:, :, 0].sort(1, descending=True)
        _, rank = idx.sort(1)
        flt[(rank < self.top_k).unsqueeze(-1).expand_as(flt)].fill_(0)
        return output


# ssd.py
class SSD(nn.Module):

    def __init__(self, phase, size, base, extras, head, num_classes, split):
        super(SSD, self).__init__()
        self.phase = phase
        self.num_classes = num_classes
        self.cfg = voc_tiny
        self.priorbox = PriorBox(self.cfg)
        with torch.no_grad():
            self.priors = Variable(self.priorbox.forward())
        self.size = size
        self.split = split

        # SSD network
        self.vgg = nn.ModuleList(base)
        # Layer learns to scale the l2 normalized features from conv4_3
        self.L2Norm = L2Norm(base[split - 2].out_channels, 20)
        self.extras = nn.ModuleList(extras)

        self.loc = nn.ModuleList(head[0])
        self.conf = nn.ModuleList(head[1])

        if phase == 'test':
            self.softmax = nn.Softmax(dim=-1)
            self.detect = Detect(num_classes, 0, 20, 0.01, 0.45)

    def forward(self, x):
        sources = list()
        loc = list()
        conf = list()

        # apply vgg up to conv4_3 relu
        for k in range(self.split):
            x = self.vgg[k](x)

        s = self.L2Norm(x)
        sources.append(s)

        # apply vgg up to fc7
        for k in range(self.split, len(self.vgg)):
            x = self.vgg[k](x)
        sources.append(x)

        # apply extra layers and cache source layer outputs
        for k, v in enumerate(self.extras):
            x = F.relu(v(x), inplace=True)
            if k % 2 == 1:
                sources.append(x)

        # apply multibox head to source layers
        for (x, l, c) in zip(sources, self.loc, self.conf):
            loc.append(l(x).permute(0, 2, 3, 1).contiguous())
            conf.append(c(x).permute(0, 2, 3, 1).contiguous())

        loc = torch.cat([o.view(o.size(0), -1) for o in loc], 1)
        conf = torch.cat([o.view(o.size(0), -1) for o in conf], 1)
        if self.phase == "test":
            output = self.detect(
                loc.view(loc.size(0), -1, 4),                   # loc preds
                self.softmax(conf.view(conf.size(0), -1,
                                       self.num_classes)),                # conf preds
                self.priors.type(type(x.data))                  # default boxes
            )
        else:
            output = (
                loc.view(loc.size(0), -1, 4),
                conf.view(conf.size(0), -1, self.num_classes),
                self.priors
            )
        return output


def vgg(cfg, i, batch_norm=False):
    layers = []
    in_channels = i
    for v in cfg:
        if v == 'M':
            layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
        elif v == 'C':
            layers += [nn.MaxPool2d(kernel_size=2, stride=2, ceil_mode=True)]
        else:
            conv2d = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)
            if batch_norm:
                layers += [conv2d, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
            else:
                layers += [conv2d, nn.ReLU(inplace=True)]
            in_channels = v
    pool5 = nn.MaxPool2d(kernel_size=3, stride=1, padding=1)
    conv6 = nn.Conv2d(in_channels, 24, kernel_size=3, padding=6, dilation=6)
    conv7 = nn.Conv2d(24, 24, kernel_size=1)
    layers += [pool5, conv6,
               nn.ReLU(inplace=True), conv7, nn.ReLU(inplace=True)]
    return layers


def add_extras(cfg, i, batch_norm=False):
    # Extra layers added to VGG for feature scaling
    layers = []
    in_channels = i
    flag = False
    for k, v in enumerate(cfg):
        if in_channels != 'S':
            if v == 'S':
                layers += [nn.Conv2d(in_channels, cfg[k + 1],
                                     kernel_size=(1, 3)[flag], stride=2, padding=1)]
            else:
                layers += [nn.Conv2d(in_channels, v, kernel_size=(1, 3)[flag])]
            flag = not flag
        in_channels = v
    return layers


def multibox(vgg, extra_layers, cfg, num_classes, vgg_source):
    loc_layers = []
    conf_layers = []
    for k, v in enumerate(vgg_source):
        loc_layers += [nn.Conv2d(vgg[v].out_channels,
                                 cfg[k] * 4, kernel_size=3, padding=1)]
        conf_layers += [nn.Conv2d(vgg[v].out_channels,
                                  cfg[k] * num_classes, kernel_size=3, padding=1)]
    for k, v in enumerate(extra_layers[1::2], 2):
        loc_layers += [nn.Conv2d(v.out_channels, cfg[k]
                                 * 4, kernel_size=3, padding=1)]
        conf_layers += [nn.Conv2d(v.out_channels, cfg[k]
                                  * num_classes, kernel_size=3, padding=1)]
    return vgg, extra_layers, (loc_layers, conf_layers)


base = {'32': [8, 'M', 16, 'C']}
extras = {'32': [12, 'S', 16, 12, 'S', 16]}
mbox = {'32': [4, 6, 6, 4]}


def build_ssd(phase, size=32, num_classes=4):
    base_, extras_, head_ = multibox(vgg(base[str(size)], 3),
                                     add_extras(extras[str(size)], 24),
                                     mbox[str(size)], num_classes, vgg_source=[3, -2])
    return SSD(phase, size, base_, extras_, head_, num_classes, split=5)


# train.py
def xavier(param):
    init.xavier_uniform_(param)


def weights_init(m):
    if isinstance(m, nn.Conv2d):
        xavier(m.weight.data)
        m.bias.data.zero_()


def adjust_learning_rate(optimizer, gamma, step, lr=1e-3):
    lr = lr * (gamma ** (step))
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


# the box utilities on their own
truths = torch.tensor([[0.1, 0.1, 0.4, 0.5], [0.5, 0.2, 0.9, 0.6]])
print("jaccard", [fmt(r, 2) for r in jaccard(truths, torch.tensor([[0.1, 0.1, 0.4, 0.5], [0.2, 0.2, 0.6, 0.6]]))])
print("point_form", fmt(point_form(torch.tensor([[0.5, 0.5, 0.2, 0.4]])), 4))
try:
    center_size(truths)
except TypeError as e:
    print("center_size:", type(e).__name__, str(e).split("\n")[0])
priors = PriorBox(cfg).forward()
print("priors", tuple(priors.shape), fmt(priors[0], 4), fmt(priors[-1], 4), f"{priors.max().item():.4f}",
      priors.dtype)
enc = encode(point_form(priors[:5]).clamp(min=0.01), priors[:5], cfg['variance'])
print("encode/decode", fmt(enc[1]), bool(torch.allclose(decode(enc, priors[:5], cfg['variance']),
                                                           point_form(priors[:5]).clamp(min=0.01), atol=1e-5)))
x = torch.tensor([[1.0, 2.0, 3.0], [100.0, 0.0, -1.0]])
print("log_sum_exp", fmt(log_sum_exp(x), 2), fmt(torch.logsumexp(x, 1), 2))
nb = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.05, 0.0, 1.0, 1.0], [2.0, 2.0, 3.0, 3.0], [0.5, 0.5, 1.5, 1.5]])
keep, count = nms(nb, torch.tensor([0.9, 0.8, 0.7, 0.6]), 0.5)
print("nms", keep.tolist(), count, keep.dtype)

# data: a few boxes per image (labels 0..2, background added by match)
rng = np.random.default_rng(0)
images, targets = [], []
for n in range(4):
    img = rng.normal(0, 0.3, (3, 32, 32)).astype(np.float32)
    boxes = []
    for b in range(1 + n % 2):
        cx, cy = rng.uniform(0.25, 0.75, 2)
        w, h = rng.uniform(0.2, 0.45, 2)
        lab = int(rng.integers(0, 3))
        x0, y0, x1, y1 = cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2
        img[lab, int(y0 * 32):int(y1 * 32), int(x0 * 32):int(x1 * 32)] += 1.0
        boxes.append([x0, y0, x1, y1, lab])
    images.append(img)
    targets.append(torch.tensor(boxes, dtype=torch.float32))
images = torch.from_numpy(np.stack(images))

ssd_net = build_ssd('train', 32, cfg['num_classes'])
net = ssd_net
ssd_net.extras.apply(weights_init)
ssd_net.loc.apply(weights_init)
ssd_net.conf.apply(weights_init)
print("xavier", bool(ssd_net.loc[0].bias.abs().sum() == 0), ssd_net.L2Norm.weight[:3].tolist())
r = np.random.default_rng(1)
with torch.no_grad():
    for name, p in net.named_parameters():
        if 'L2Norm' in name:
            continue
        p.copy_(torch.from_numpy(r.normal(0, 0.15, tuple(p.shape)).astype(np.float32)))
print("layers", len(net.vgg), [type(m).__name__ for m in net.vgg][:6], [tuple(m.weight.shape) for m in net.extras])

optimizer = torch.optim.SGD(net.parameters(), lr=1e-2, momentum=0.9, weight_decay=5e-4)
criterion = MultiBoxLoss(cfg['num_classes'], 0.5, True, 0, True, 3, 0.5, False, False)

out = net(images)
print("outputs", [tuple(o.shape) for o in out])
try:
    MultiBoxLoss(cfg['num_classes'], 0.5, True, 0, True, 3, 0.5, False, False, view_first=False)(out, targets)
except IndexError as e:
    print("loss_c[pos] = 0:", type(e).__name__, str(e).split(" at index")[0])

step_index = 0
net.train()
for iteration in range(4):
    if iteration in (3,):
        step_index += 1
        adjust_learning_rate(optimizer, 0.1, step_index, lr=1e-2)
    out = net(images)
    optimizer.zero_grad()
    loss_l, loss_c = criterion(out, targets)
    loss = loss_l + loss_c
    loss.backward()
    optimizer.step()
    print('iter ' + repr(iteration) + ' || Loss: %.4f ||' % (loss.item()), f"loc {loss_l.item():.4f} conf {loss_c.item():.4f}",
          f"lr {optimizer.param_groups[0]['lr']:.4f}", fmt(net.L2Norm.weight.grad, 2))

# detection
net.eval()
net.phase = 'test'
net.softmax = nn.Softmax(dim=-1)
net.detect = Detect(cfg['num_classes'], 0, 20, 0.01, 0.45)
with torch.no_grad():
    detections = net(images[:2]).data
print("detections", tuple(detections.shape), [int((detections[0, c, :, 0] > 0).sum()) for c in range(4)])
for c in range(1, 4):
    d = detections[0, c]
    print("class", c, fmt(d[0], 5), f"{d[:, 0].sum().item():.4f}")

# one step of the L2Norm + first loc / conf heads under torch.compile against eager
net.train()
with torch.no_grad():
    feat = nn.Sequential(*net.vgg[:5])(images[:2])
head = nn.ModuleList([net.L2Norm, net.loc[0], net.conf[0]])
head_opt = torch.optim.SGD(head.parameters(), lr=0.001, momentum=0.9)
loc_target = torch.from_numpy(rng.normal(0, 1, (2, 16, 16, 16)).astype(np.float32))
cls_target = torch.from_numpy(rng.integers(0, 4, (2 * 16 * 16 * 4,)))


def head_step(x):
    head_opt.zero_grad()
    s = net.L2Norm(x)
    loc = net.loc[0](s).permute(0, 2, 3, 1).contiguous()
    conf = net.conf[0](s).permute(0, 2, 3, 1).contiguous().view(-1, 4)
    loss = F.smooth_l1_loss(loc, loc_target, reduction='sum') / loc.numel() + F.cross_entropy(conf, cls_target)
    loss.backward()
    head_opt.step()
    return loss


state, opt_state = copy.deepcopy(head.state_dict()), copy.deepcopy(head_opt.state_dict())
eager = [head_step(feat).item() for _ in range(2)]
after = {k: v.clone() for k, v in head.state_dict().items()}
head.load_state_dict(state)
head_opt.load_state_dict(opt_state)
cstep = torch.compile(head_step)
compiled = [cstep(feat).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(head.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
