# fxia22/pointnet.pytorch: pointnet/model.py (STN3d, STNkd, PointNetfeat,
# PointNetCls, PointNetDenseCls, feature_transform_regularizer) as published,
# its __main__ shape checks, and utils/train_classification.py /
# utils/train_segmentation.py's training loops (Adam, StepLR, nll_loss plus
# the feature-transform regularizer, accuracy and the per-shape mIOU) over a
# synthetic ShapeNetDataset (dataset.py's centring, unit-sphere scaling,
# random rotation and jitter, all drawn from numpy); then a classification
# training step under torch.compile against the same step run eagerly.
# Widths are the published ones; batches and point counts are tiny.  The
# classifier's dropout is set to 0 where numbers are compared, and Adam's eps
# is 1e-4 (not 1e-8): the biases of the layers in front of a BatchNorm (and
# bn3's, in front of the max and fc1's BatchNorm) have zero gradients up to
# float rounding (~1e-8), which Adam with eps=1e-8 turns into lr-sized steps
# of rounding-dependent sign, so no two libraries (or two summation orders)
# would train alike.  Batches of 12 (not 4): with 4 clouds per BatchNorm
# batch the training runs are chaotic (a 1e-6 change of the weights changes
# the third loss in its third digit, in torch as well).  The weights after
# the compiled steps are compared element by element to 1e-4, and fewer than
# one in a thousand may be further off: a near-tie of the max over points,
# decided differently by another summation order (another processor's
# vector width), sends a gradient to another point.
from __future__ import print_function
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.parallel
import torch.optim as optim
import torch.utils.data
from torch.autograd import Variable
import torch.nn.functional as F


# --- pointnet/model.py ------------------------------------------------------
class STN3d(nn.Module):
    def __init__(self):
        super(STN3d, self).__init__()
        self.conv1 = torch.nn.Conv1d(3, 64, 1)
        self.conv2 = torch.nn.Conv1d(64, 128, 1)
        self.conv3 = torch.nn.Conv1d(128, 1024, 1)
        self.fc1 = nn.Linear(1024, 512)
        self.fc2 = nn.Linear(512, 256)
        self.fc3 = nn.Linear(256, 9)
        self.relu = nn.ReLU()

        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(128)
        self.bn3 = nn.BatchNorm1d(1024)
        self.bn4 = nn.BatchNorm1d(512)
        self.bn5 = nn.BatchNorm1d(256)

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 1024)

        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.fc2(x)))
        x = self.fc3(x)

        iden = Variable(torch.from_numpy(np.array([1, 0, 0, 0, 1, 0, 0, 0, 1]).astype(np.float32))).view(1, 9).repeat(batchsize, 1)
        if x.is_cuda:
            iden = iden.cuda()
        x = x + iden
        x = x.view(-1, 3, 3)
        return x


class STNkd(nn.Module):
    def __init__(self, k=64):
        super(STNkd, self).__init__()
        self.conv1 = torch.nn.Conv1d(k, 64, 1)
        self.conv2 = torch.nn.Conv1d(64, 128, 1)
        self.conv3 = torch.nn.Conv1d(128, 1024, 1)
        self.fc1 = nn.Linear(1024, 512)
        self.fc2 = nn.Linear(512, 256)
        self.fc3 = nn.Linear(256, k*k)
        self.relu = nn.ReLU()

        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(128)
        self.bn3 = nn.BatchNorm1d(1024)
        self.bn4 = nn.BatchNorm1d(512)
        self.bn5 = nn.BatchNorm1d(256)

        self.k = k

    def forward(self, x):
        batchsize = x.size()[0]
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 1024)

        x = F.relu(self.bn4(self.fc1(x)))
        x = F.relu(self.bn5(self.fc2(x)))
        x = self.fc3(x)

        iden = Variable(torch.from_numpy(np.eye(self.k).flatten().astype(np.float32))).view(1, self.k*self.k).repeat(batchsize, 1)
        if x.is_cuda:
            iden = iden.cuda()
        x = x + iden
        x = x.view(-1, self.k, self.k)
        return x


class PointNetfeat(nn.Module):
    def __init__(self, global_feat = True, feature_transform = False):
        super(PointNetfeat, self).__init__()
        self.stn = STN3d()
        self.conv1 = torch.nn.Conv1d(3, 64, 1)
        self.conv2 = torch.nn.Conv1d(64, 128, 1)
        self.conv3 = torch.nn.Conv1d(128, 1024, 1)
        self.bn1 = nn.BatchNorm1d(64)
        self.bn2 = nn.BatchNorm1d(128)
        self.bn3 = nn.BatchNorm1d(1024)
        self.global_feat = global_feat
        self.feature_transform = feature_transform
        if self.feature_transform:
            self.fstn = STNkd(k=64)

    def forward(self, x):
        n_pts = x.size()[2]
        trans = self.stn(x)
        x = x.transpose(2, 1)
        x = torch.bmm(x, trans)
        x = x.transpose(2, 1)
        x = F.relu(self.bn1(self.conv1(x)))

        if self.feature_transform:
            trans_feat = self.fstn(x)
            x = x.transpose(2, 1)
            x = torch.bmm(x, trans_feat)
            x = x.transpose(2, 1)
        else:
            trans_feat = None

        pointfeat = x
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        x = torch.max(x, 2, keepdim=True)[0]
        x = x.view(-1, 1024)
        if self.global_feat:
            return x, trans, trans_feat
        else:
            x = x.view(-1, 1024, 1).repeat(1, 1, n_pts)
            return torch.cat([x, pointfeat], 1), trans, trans_feat


class PointNetCls(nn.Module):
    def __init__(self, k=2, feature_transform=False):
        super(PointNetCls, self).__init__()
        self.feature_transform = feature_transform
        self.feat = PointNetfeat(global_feat=True, feature_transform=feature_transform)
        self.fc1 = nn.Linear(1024, 512)
        self.fc2 = nn.Linear(512, 256)
        self.fc3 = nn.Linear(256, k)
        self.dropout = nn.Dropout(p=0.3)
        self.bn1 = nn.BatchNorm1d(512)
        self.bn2 = nn.BatchNorm1d(256)
        self.relu = nn.ReLU()

    def forward(self, x):
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.dropout(self.fc2(x))))
        x = self.fc3(x)
        return F.log_softmax(x, dim=1), trans, trans_feat


class PointNetDenseCls(nn.Module):
    def __init__(self, k = 2, feature_transform=False):
        super(PointNetDenseCls, self).__init__()
        self.k = k
        self.feature_transform=feature_transform
        self.feat = PointNetfeat(global_feat=False, feature_transform=feature_transform)
        self.conv1 = torch.nn.Conv1d(1088, 512, 1)
        self.conv2 = torch.nn.Conv1d(512, 256, 1)
        self.conv3 = torch.nn.Conv1d(256, 128, 1)
        self.conv4 = torch.nn.Conv1d(128, self.k, 1)
        self.bn1 = nn.BatchNorm1d(512)
        self.bn2 = nn.BatchNorm1d(256)
        self.bn3 = nn.BatchNorm1d(128)

    def forward(self, x):
        batchsize = x.size()[0]
        n_pts = x.size()[2]
        x, trans, trans_feat = self.feat(x)
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.relu(self.bn3(self.conv3(x)))
        x = self.conv4(x)
        x = x.transpose(2,1).contiguous()
        x = F.log_softmax(x.view(-1,self.k), dim=-1)
        x = x.view(batchsize, n_pts, self.k)
        return x, trans, trans_feat


def feature_transform_regularizer(trans):
    d = trans.size()[1]
    batchsize = trans.size()[0]
    I = torch.eye(d)[None, :, :]
    if trans.is_cuda:
        I = I.cuda()
    loss = torch.mean(torch.norm(torch.bmm(trans, trans.transpose(2,1)) - I, dim=(1,2)))
    return loss


# --- a synthetic pointnet/dataset.py ShapeNetDataset ------------------------
class ShapeNetDataset(torch.utils.data.Dataset):
    def __init__(self, n_shapes, npoints=2500, classification=False, data_augmentation=True, seed=0,
                 num_seg_classes=4):
        self.npoints = npoints
        self.classification = classification
        self.data_augmentation = data_augmentation
        self.rng = np.random.RandomState(seed)
        self.classes = {'Airplane': 0, 'Chair': 1, 'Lamp': 2}
        self.shapes, self.cls, self.segs = [], [], []
        for i in range(n_shapes):
            c = i % len(self.classes)
            n = npoints + 7
            pts = self.rng.randn(n, 3) * np.array([1.0 + c, 1.0, 0.5 + 0.5 * c]) + c
            self.shapes.append(pts.astype(np.float32))
            self.cls.append(c)
            self.segs.append(1 + (pts[:, 0] > c).astype(np.int64) + 2 * (pts[:, 2] > c).astype(np.int64))
        self.seg_classes = num_seg_classes

    def __getitem__(self, index):
        point_set = self.shapes[index]
        cls = self.cls[index]
        seg = self.segs[index]
        choice = self.rng.choice(len(seg), self.npoints, replace=True)
        # resample
        point_set = point_set[choice, :]

        point_set = point_set - np.expand_dims(np.mean(point_set, axis = 0), 0) # center
        dist = np.max(np.sqrt(np.sum(point_set ** 2, axis = 1)),0)
        point_set = point_set / dist #scale

        if self.data_augmentation:
            theta = self.rng.uniform(0,np.pi*2)
            rotation_matrix = np.array([[np.cos(theta), -np.sin(theta)],[np.sin(theta), np.cos(theta)]])
            point_set[:,[0,2]] = point_set[:,[0,2]].dot(rotation_matrix) # random rotation
            point_set += self.rng.normal(0, 0.02, size=point_set.shape) # random jitter

        seg = seg[choice]
        point_set = torch.from_numpy(point_set.astype(np.float32))
        seg = torch.from_numpy(seg)
        cls = torch.from_numpy(np.array([cls]).astype(np.int64))

        if self.classification:
            return point_set, cls
        else:
            return point_set, seg

    def __len__(self):
        return len(self.shapes)


def numpy_init(model, seed):
    g = np.random.RandomState(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(torch.from_numpy((base + 0.1 * g.randn(*p.shape)).astype(np.float32)))
            else:
                std = p[0].numel() ** -0.5
                p.copy_(torch.from_numpy((std * g.randn(*p.shape)).astype(np.float32)))
        # the transform nets start near the identity
        for m in model.modules():
            if isinstance(m, (STN3d, STNkd)):
                m.fc3.weight.mul_(0.01)
                m.fc3.bias.zero_()
    return model


# --- model.py's __main__ --------------------------------------------------
rng = np.random.RandomState(0)
sim_data = Variable(torch.from_numpy(rng.rand(4, 3, 40).astype(np.float32)))
trans = numpy_init(STN3d(), 1)
out = trans(sim_data)
print('stn', out.size())
print('loss', feature_transform_regularizer(out))

sim_data_64d = Variable(torch.from_numpy(rng.rand(4, 64, 40).astype(np.float32)))
trans = numpy_init(STNkd(k=64), 2)
out = trans(sim_data_64d)
print('stn64d', out.size())
print('loss', feature_transform_regularizer(out))

pointfeat = numpy_init(PointNetfeat(global_feat=True), 3)
out, _, _ = pointfeat(sim_data)
print('global feat', out.size())

pointfeat = numpy_init(PointNetfeat(global_feat=False), 3)
out, _, _ = pointfeat(sim_data)
print('point feat', out.size())
print('point feat sums', [f"{v:.4f}" for v in out.sum(dim=(0, 2))[1020:1030].tolist()])

cls = numpy_init(PointNetCls(k = 5), 4)
cls.eval()
out, _, _ = cls(sim_data)
print('class', out.size())
print('class log-probs', [f"{v:.5f}" for v in out[0].tolist()])

seg = numpy_init(PointNetDenseCls(k = 3), 5)
seg.eval()
out, _, _ = seg(sim_data)
print('seg', out.size())
print('seg log-probs', [f"{v:.5f}" for v in out[1, :3].flatten().tolist()])

# --- utils/train_classification.py ----------------------------------------
batchSize, num_points, nepoch, feature_transform = 12, 16, 2, True
dataset = ShapeNetDataset(24, classification=True, npoints=num_points, seed=1)
test_dataset = ShapeNetDataset(6, classification=True, npoints=num_points, data_augmentation=False, seed=2)
dataloader = torch.utils.data.DataLoader(dataset, batch_size=batchSize, shuffle=False, num_workers=0)
testdataloader = torch.utils.data.DataLoader(test_dataset, batch_size=batchSize, shuffle=False, num_workers=0)
print(len(dataset), len(test_dataset))
num_classes = len(dataset.classes)
print('classes', num_classes)

classifier = numpy_init(PointNetCls(k=num_classes, feature_transform=feature_transform), 6)
classifier.dropout.p = 0.0   # compared with torch: no random dropout masks
optimizer = optim.Adam(classifier.parameters(), lr=0.001, betas=(0.9, 0.999), eps=1e-4)
scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
num_batch = len(dataset) / batchSize
print("parameters", sum(p.numel() for p in classifier.parameters()), "buffers", len(list(classifier.buffers())))

blue = lambda x: '\033[94m' + x + '\033[0m'
for epoch in range(nepoch):
    for i, data in enumerate(dataloader, 0):
        points, target = data
        target = target[:, 0]
        points = points.transpose(2, 1)
        optimizer.zero_grad()
        classifier = classifier.train()
        pred, trans, trans_feat = classifier(points)
        loss = F.nll_loss(pred, target)
        if feature_transform:
            loss += feature_transform_regularizer(trans_feat) * 0.001
        loss.backward()
        optimizer.step()
        pred_choice = pred.data.max(1)[1]
        correct = pred_choice.eq(target.data).cpu().sum()
        print('[%d: %d/%d] train loss: %f accuracy: %f' % (epoch, i, num_batch, loss.item(), correct.item() / float(batchSize)))

        if i % 2 == 0:
            j, data = next(enumerate(testdataloader, 0))
            points, target = data
            target = target[:, 0]
            points = points.transpose(2, 1)
            classifier = classifier.eval()
            pred, _, _ = classifier(points)
            loss = F.nll_loss(pred, target)
            pred_choice = pred.data.max(1)[1]
            correct = pred_choice.eq(target.data).cpu().sum()
            print('[%d: %d/%d] %s loss: %f accuracy: %f' % (epoch, i, num_batch, blue('test'), loss.item(), correct.item()/float(batchSize)))
    scheduler.step()
    print("lr", scheduler.get_last_lr())

total_correct = 0
total_testset = 0
for i,data in enumerate(testdataloader, 0):
    points, target = data
    target = target[:, 0]
    points = points.transpose(2, 1)
    classifier = classifier.eval()
    pred, _, _ = classifier(points)
    pred_choice = pred.data.max(1)[1]
    correct = pred_choice.eq(target.data).cpu().sum()
    total_correct += correct.item()
    total_testset += points.size()[0]

print("final accuracy {}".format(total_correct / float(total_testset)))
bn = classifier.feat.bn3
print("bn3 running stats", f"{bn.running_mean.abs().sum().item():.4f}", f"{bn.running_var.sum().item():.3f}",
      bn.num_batches_tracked.item())

# a training step with the published dropout: random masks  [rng]
classifier.dropout.p = 0.3
classifier.train()
pred, _, trans_feat = classifier(points)
print("with dropout [rng]", f"{F.nll_loss(pred, target).item():.4f}", bool(torch.isfinite(pred).all()))
classifier.dropout.p = 0.0

# --- utils/train_segmentation.py ------------------------------------------
dataset = ShapeNetDataset(12, classification=False, npoints=num_points, seed=3)
dataloader = torch.utils.data.DataLoader(dataset, batch_size=batchSize, shuffle=False)
num_classes = dataset.seg_classes
print('classes', num_classes)
classifier = numpy_init(PointNetDenseCls(k=num_classes, feature_transform=feature_transform), 7)
optimizer = optim.Adam(classifier.parameters(), lr=0.001, betas=(0.9, 0.999), eps=1e-4)
scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=20, gamma=0.5)
num_batch = len(dataset) / batchSize

for epoch in range(2):
    scheduler.step()
    for i, data in enumerate(dataloader, 0):
        points, target = data
        points = points.transpose(2, 1)
        optimizer.zero_grad()
        classifier = classifier.train()
        pred, trans, trans_feat = classifier(points)
        pred = pred.view(-1, num_classes)
        target = target.view(-1, 1)[:, 0] - 1
        loss = F.nll_loss(pred, target)
        if feature_transform:
            loss += feature_transform_regularizer(trans_feat) * 0.001
        loss.backward()
        optimizer.step()
        pred_choice = pred.data.max(1)[1]
        correct = pred_choice.eq(target.data).cpu().sum()
        print('[%d: %d/%d] train loss: %f accuracy: %f' % (epoch, i, num_batch, loss.item(), correct.item()/float(batchSize * num_points)))

## benchmark mIOU
shape_ious = []
for i,data in enumerate(dataloader, 0):
    points, target = data
    points = points.transpose(2, 1)
    classifier = classifier.eval()
    pred, _, _ = classifier(points)
    pred_choice = pred.data.max(2)[1]

    pred_np = pred_choice.cpu().data.numpy()
    target_np = target.cpu().data.numpy() - 1

    for shape_idx in range(target_np.shape[0]):
        parts = range(num_classes)#np.unique(target_np[shape_idx])
        part_ious = []
        for part in parts:
            I = np.sum(np.logical_and(pred_np[shape_idx] == part, target_np[shape_idx] == part))
            U = np.sum(np.logical_or(pred_np[shape_idx] == part, target_np[shape_idx] == part))
            if U == 0:
                iou = 1 #If the union of groundtruth and prediction points is empty, then count part IoU as 1
            else:
                iou = I / float(U)
            part_ious.append(iou)
        shape_ious.append(np.mean(part_ious))

print("mIOU for class {}: {}".format('Chair', np.mean(shape_ious)))

# --- a classification training step: torch.compile against eager -----------
net = numpy_init(PointNetCls(k=3, feature_transform=True), 8)
net.dropout.p = 0.0
opt = optim.Adam(net.parameters(), lr=0.001, eps=1e-4)
pts = torch.from_numpy(np.random.RandomState(9).randn(12, 3, 16).astype(np.float32))
tgt = torch.tensor([0, 2, 1, 2] * 3)


def train_step(points, target):
    opt.zero_grad()
    pred, trans, trans_feat = net(points)
    loss = F.nll_loss(pred, target)
    loss += feature_transform_regularizer(trans_feat) * 0.001
    loss.backward()
    opt.step()
    return loss


net.train()
state = copy.deepcopy(net.state_dict())
opt_state = copy.deepcopy(opt.state_dict())
eager = [train_step(pts, tgt).item() for _ in range(3)]
after = copy.deepcopy(net.state_dict())
net.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(pts, tgt).item() for _ in range(3)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(((net.state_dict()[k].float() - after[k].float()).abs()
           > 1e-4 + 1e-4 * after[k].float().abs()).float().mean().item() < 1e-3 for k in after))
