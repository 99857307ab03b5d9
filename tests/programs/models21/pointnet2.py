# yanx27/Pointnet_Pointnet2_pytorch the way its models/pointnet2_utils.py,
# models/pointnet2_cls_msg.py and train_classification.py write it:
# square_distance (matmul against the permuted cloud plus the squared norms
# viewed to broadcast), index_points (the batch gather through an arange
# viewed and repeated to the index's shape, points[batch_indices, idx, :]),
# farthest_point_sample (the loop over npoint with torch.randint's start,
# boolean-mask updates of the running distance and torch.max's indices),
# query_ball_point (an arange repeated, masked to N beyond the radius, sorted,
# cut to nsample and the N slots filled with the group's first index),
# sample_and_group / sample_and_group_all, PointNetSetAbstraction(Msg) with
# 1x1 Conv2d + BatchNorm2d + relu and max over the samples, the
# PointNetFeaturePropagation 3-NN interpolation with reciprocal distances,
# and the classifier (log_softmax head, NLL loss) trained with Adam and
# StepLR as train_classification.py does, with its pc_normalize /
# random_scale_point_cloud / shift_point_cloud numpy augmentations from
# provider.py. Changes for a CPU test: small sizes (12-point clouds, the
# largest ball's nsample 12: the compiled step unrolls both levels' FPS
# loops, one iteration per point), weights and clouds from
# numpy, dropout p = 0 for the numeric steps (dropout's draws differ between
# tracec and torch; one dropout step is printed on an [rng] line). Every
# set-abstraction level samples all its input points (npoint = N) and the
# second level's ball holds every point, so the outputs do not depend on
# torch.randint's start: FPS then only permutes the centroids, and every
# later step is invariant to their order (BatchNorm statistics, the max
# over centroids). A sparser FPS prints on [rng] lines with the checks that
# hold for any start. Then one training step under torch.compile against
# the same step eagerly.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from time import time


def timeit(tag, t):
    print("{}: {}s".format(tag, time() - t))
    return time()


def pc_normalize(pc):
    l = pc.shape[0]
    centroid = np.mean(pc, axis=0)
    pc = pc - centroid
    m = np.max(np.sqrt(np.sum(pc**2, axis=1)))
    pc = pc / m
    return pc


def square_distance(src, dst):
    """
    Calculate Euclid distance between each two points.

    src^T * dst = xn * xm + yn * ym + zn * zm；
    sum(src^2, dim=-1) = xn*xn + yn*yn + zn*zn;
    sum(dst^2, dim=-1) = xm*xm + ym*ym + zm*zm;
    dist = (xn - xm)^2 + (yn - ym)^2 + (zn - zm)^2
         = sum(src**2,dim=-1)+sum(dst**2,dim=-1)-2*src^T*dst

    Input:
        src: source points, [B, N, C]
        dst: target points, [B, M, C]
    Output:
        dist: per-point square distance, [B, N, M]
    """
    B, N, _ = src.shape
    _, M, _ = dst.shape
    dist = -2 * torch.matmul(src, dst.permute(0, 2, 1))
    dist += torch.sum(src ** 2, -1).view(B, N, 1)
    dist += torch.sum(dst ** 2, -1).view(B, 1, M)
    return dist


def index_points(points, idx):
    """

    Input:
        points: input points data, [B, N, C]
        idx: sample index data, [B, S]
    Return:
        new_points:, indexed points data, [B, S, C]
    """
    device = points.device
    B = points.shape[0]
    view_shape = list(idx.shape)
    view_shape[1:] = [1] * (len(view_shape) - 1)
    repeat_shape = list(idx.shape)
    repeat_shape[0] = 1
    batch_indices = torch.arange(B, dtype=torch.long).to(device).view(view_shape).repeat(repeat_shape)
    new_points = points[batch_indices, idx, :]
    return new_points


def farthest_point_sample(xyz, npoint):
    """
    Input:
        xyz: pointcloud data, [B, N, 3]
        npoint: number of samples
    Return:
        centroids: sampled pointcloud index, [B, npoint]
    """
    device = xyz.device
    B, N, C = xyz.shape
    centroids = torch.zeros(B, npoint, dtype=torch.long).to(device)
    distance = torch.ones(B, N).to(device) * 1e10
    farthest = torch.randint(0, N, (B,), dtype=torch.long).to(device)
    batch_indices = torch.arange(B, dtype=torch.long).to(device)
    for i in range(npoint):
        centroids[:, i] = farthest
        centroid = xyz[batch_indices, farthest, :].view(B, 1, 3)
        dist = torch.sum((xyz - centroid) ** 2, -1)
        mask = dist < distance
        distance[mask] = dist[mask]
        farthest = torch.max(distance, -1)[1]
    return centroids


def query_ball_point(radius, nsample, xyz, new_xyz):
    """
    Input:
        radius: local region radius
        nsample: max sample number in local region
        xyz: all points, [B, N, 3]
        new_xyz: query points, [B, S, 3]
    Return:
        group_idx: grouped points index, [B, S, nsample]
    """
    device = xyz.device
    B, N, C = xyz.shape
    _, S, _ = new_xyz.shape
    group_idx = torch.arange(N, dtype=torch.long).to(device).view(1, 1, N).repeat([B, S, 1])
    sqrdists = square_distance(new_xyz, xyz)
    group_idx[sqrdists > radius ** 2] = N
    group_idx = group_idx.sort(dim=-1)[0][:, :, :nsample]
    group_first = group_idx[:, :, 0].view(B, S, 1).repeat([1, 1, nsample])
    mask = group_idx == N
    group_idx[mask] = group_first[mask]
    return group_idx


def sample_and_group(npoint, radius, nsample, xyz, points, returnfps=False):
    """
    Input:
        npoint:
        radius:
        nsample:
        xyz: input points position data, [B, N, 3]
        points: input points data, [B, N, D]
    Return:
        new_xyz: sampled points position data, [B, npoint, nsample, 3]
        new_points: sampled points data, [B, npoint, nsample, 3+D]
    """
    B, N, C = xyz.shape
    S = npoint
    fps_idx = farthest_point_sample(xyz, npoint) # [B, npoint, C]
    new_xyz = index_points(xyz, fps_idx)
    idx = query_ball_point(radius, nsample, xyz, new_xyz)
    grouped_xyz = index_points(xyz, idx) # [B, npoint, nsample, C]
    grouped_xyz_norm = grouped_xyz - new_xyz.view(B, S, 1, C)

    if points is not None:
        grouped_points = index_points(points, idx)
        new_points = torch.cat([grouped_xyz_norm, grouped_points], dim=-1) # [B, npoint, nsample, C+D]
    else:
        new_points = grouped_xyz_norm
    if returnfps:
        return new_xyz, new_points, grouped_xyz, fps_idx
    else:
        return new_xyz, new_points


def sample_and_group_all(xyz, points):
    """
    Input:
        xyz: input points position data, [B, N, 3]
        points: input points data, [B, N, D]
    Return:
        new_xyz: sampled points position data, [B, 1, 3]
        new_points: sampled points data, [B, 1, N, 3+D]
    """
    device = xyz.device
    B, N, C = xyz.shape
    new_xyz = torch.zeros(B, 1, C).to(device)
    grouped_xyz = xyz.view(B, 1, N, C)
    if points is not None:
        new_points = torch.cat([grouped_xyz, points.view(B, 1, N, -1)], dim=-1)
    else:
        new_points = grouped_xyz
    return new_xyz, new_points


class PointNetSetAbstraction(nn.Module):
    def __init__(self, npoint, radius, nsample, in_channel, mlp, group_all):
        super(PointNetSetAbstraction, self).__init__()
        self.npoint = npoint
        self.radius = radius
        self.nsample = nsample
        self.mlp_convs = nn.ModuleList()
        self.mlp_bns = nn.ModuleList()
        last_channel = in_channel
        for out_channel in mlp:
            self.mlp_convs.append(nn.Conv2d(last_channel, out_channel, 1))
            self.mlp_bns.append(nn.BatchNorm2d(out_channel))
            last_channel = out_channel
        self.group_all = group_all

    def forward(self, xyz, points):
        """
        Input:
            xyz: input points position data, [B, C, N]
            points: input points data, [B, D, N]
        Return:
            new_xyz: sampled points position data, [B, C, S]
            new_points_concat: sample points feature data, [B, D', S]
        """
        xyz = xyz.permute(0, 2, 1)
        if points is not None:
            points = points.permute(0, 2, 1)

        if self.group_all:
            new_xyz, new_points = sample_and_group_all(xyz, points)
        else:
            new_xyz, new_points = sample_and_group(self.npoint, self.radius, self.nsample, xyz, points)
        # new_xyz: sampled points position data, [B, npoint, C]
        # new_points: sampled points data, [B, npoint, nsample, C+D]
        new_points = new_points.permute(0, 3, 2, 1) # [B, C+D, nsample,npoint]
        for i, conv in enumerate(self.mlp_convs):
            bn = self.mlp_bns[i]
            new_points =  F.relu(bn(conv(new_points)))

        new_points = torch.max(new_points, 2)[0]
        new_xyz = new_xyz.permute(0, 2, 1)
        return new_xyz, new_points


class PointNetSetAbstractionMsg(nn.Module):
    def __init__(self, npoint, radius_list, nsample_list, in_channel, mlp_list):
        super(PointNetSetAbstractionMsg, self).__init__()
        self.npoint = npoint
        self.radius_list = radius_list
        self.nsample_list = nsample_list
        self.conv_blocks = nn.ModuleList()
        self.bn_blocks = nn.ModuleList()
        for i in range(len(mlp_list)):
            convs = nn.ModuleList()
            bns = nn.ModuleList()
            last_channel = in_channel + 3
            for out_channel in mlp_list[i]:
                convs.append(nn.Conv2d(last_channel, out_channel, 1))
                bns.append(nn.BatchNorm2d(out_channel))
                last_channel = out_channel
            self.conv_blocks.append(convs)
            self.bn_blocks.append(bns)

    def forward(self, xyz, points):
        """
        Input:
            xyz: input points position data, [B, C, N]
            points: input points data, [B, D, N]
        Return:
            new_xyz: sampled points position data, [B, C, S]
            new_points_concat: sample points feature data, [B, D', S]
        """
        xyz = xyz.permute(0, 2, 1)
        if points is not None:
            points = points.permute(0, 2, 1)

        B, N, C = xyz.shape
        S = self.npoint
        new_xyz = index_points(xyz, farthest_point_sample(xyz, S))
        new_points_list = []
        for i, radius in enumerate(self.radius_list):
            K = self.nsample_list[i]
            group_idx = query_ball_point(radius, K, xyz, new_xyz)
            grouped_xyz = index_points(xyz, group_idx)
            grouped_xyz -= new_xyz.view(B, S, 1, C)
            if points is not None:
                grouped_points = index_points(points, group_idx)
                grouped_points = torch.cat([grouped_points, grouped_xyz], dim=-1)
            else:
                grouped_points = grouped_xyz

            grouped_points = grouped_points.permute(0, 3, 2, 1)  # [B, D, K, S]
            for j in range(len(self.conv_blocks[i])):
                conv = self.conv_blocks[i][j]
                bn = self.bn_blocks[i][j]
                grouped_points =  F.relu(bn(conv(grouped_points)))
            new_points = torch.max(grouped_points, 2)[0]  # [B, D', S]
            new_points_list.append(new_points)

        new_xyz = new_xyz.permute(0, 2, 1)
        new_points_concat = torch.cat(new_points_list, dim=1)
        return new_xyz, new_points_concat


class PointNetFeaturePropagation(nn.Module):
    def __init__(self, in_channel, mlp):
        super(PointNetFeaturePropagation, self).__init__()
        self.mlp_convs = nn.ModuleList()
        self.mlp_bns = nn.ModuleList()
        last_channel = in_channel
        for out_channel in mlp:
            self.mlp_convs.append(nn.Conv1d(last_channel, out_channel, 1))
            self.mlp_bns.append(nn.BatchNorm1d(out_channel))
            last_channel = out_channel

    def forward(self, xyz1, xyz2, points1, points2):
        """
        Input:
            xyz1: input points position data, [B, C, N]
            xyz2: sampled input points position data, [B, C, S]
            points1: input points data, [B, D, N]
            points2: input points data, [B, D, S]
        Return:
            new_points: upsampled points data, [B, D', N]
        """
        xyz1 = xyz1.permute(0, 2, 1)
        xyz2 = xyz2.permute(0, 2, 1)

        points2 = points2.permute(0, 2, 1)
        B, N, C = xyz1.shape
        _, S, _ = xyz2.shape

        if S == 1:
            interpolated_points = points2.repeat(1, N, 1)
        else:
            dists = square_distance(xyz1, xyz2)
            dists, idx = dists.sort(dim=-1)
            dists, idx = dists[:, :, :3], idx[:, :, :3]  # [B, N, 3]

            dist_recip = 1.0 / (dists + 1e-8)
            norm = torch.sum(dist_recip, dim=2, keepdim=True)
            weight = dist_recip / norm
            interpolated_points = torch.sum(index_points(points2, idx) * weight.view(B, N, 3, 1), dim=2)

        if points1 is not None:
            points1 = points1.permute(0, 2, 1)
            new_points = torch.cat([points1, interpolated_points], dim=-1)
        else:
            new_points = interpolated_points

        new_points = new_points.permute(0, 2, 1)
        for i, conv in enumerate(self.mlp_convs):
            bn = self.mlp_bns[i]
            new_points = F.relu(bn(conv(new_points)))
        return new_points


# ---- models/pointnet2_cls_msg.py ----
class get_model(nn.Module):
    def __init__(self,num_class,normal_channel=True, npoints=(512, 128), width=1):
        super(get_model, self).__init__()
        in_channel = 3 if normal_channel else 0
        self.normal_channel = normal_channel
        w = width
        self.sa1 = PointNetSetAbstractionMsg(npoints[0], [0.1, 0.2, 0.4], [4, 8, 12], in_channel,[[4*w, 4*w, 8*w], [8*w, 8*w, 16*w], [8*w, 12*w, 16*w]])
        self.sa2 = PointNetSetAbstractionMsg(npoints[1], [8.0, 16.0], [npoints[0], npoints[0]], 40*w,[[8*w, 8*w, 16*w], [16*w, 16*w, 32*w]])
        self.sa3 = PointNetSetAbstraction(None, None, None, 48*w + 3, [32*w, 64*w, 128*w], True)
        self.fc1 = nn.Linear(128*w, 64*w)
        self.bn1 = nn.BatchNorm1d(64*w)
        self.drop1 = nn.Dropout(0.4)
        self.fc2 = nn.Linear(64*w, 32*w)
        self.bn2 = nn.BatchNorm1d(32*w)
        self.drop2 = nn.Dropout(0.5)
        self.fc3 = nn.Linear(32*w, num_class)
        self.feat_dim = 128*w

    def forward(self, xyz):
        B, _, _ = xyz.shape
        if self.normal_channel:
            norm = xyz[:, 3:, :]
            xyz = xyz[:, :3, :]
        else:
            norm = None
        l1_xyz, l1_points = self.sa1(xyz, norm)
        l2_xyz, l2_points = self.sa2(l1_xyz, l1_points)
        l3_xyz, l3_points = self.sa3(l2_xyz, l2_points)
        x = l3_points.view(B, self.feat_dim)
        x = self.drop1(F.relu(self.bn1(self.fc1(x))))
        x = self.drop2(F.relu(self.bn2(self.fc2(x))))
        x = self.fc3(x)
        x = F.log_softmax(x, -1)


        return x,l3_points


class get_loss(nn.Module):
    def __init__(self):
        super(get_loss, self).__init__()

    def forward(self, pred, target, trans_feat):
        total_loss = F.nll_loss(pred, target)

        return total_loss


# ---- provider.py ----
def random_scale_point_cloud(batch_data, scale_low=0.8, scale_high=1.25):
    """ Randomly scale the point cloud. Scale is per point cloud.
        Input:
            BxNx3 array, original batch of point clouds
        Return:
            BxNx3 array, scaled batch of point clouds
    """
    B, N, C = batch_data.shape
    scales = np.random.uniform(scale_low, scale_high, B)
    for batch_index in range(B):
        batch_data[batch_index,:,:] *= scales[batch_index]
    return batch_data


def shift_point_cloud(batch_data, shift_range=0.1):
    """ Randomly shift point cloud. Shift is per point cloud.
        Input:
          BxNx3 array, original batch of point clouds
        Return:
          BxNx3 array, shifted batch of point clouds
    """
    B, N, C = batch_data.shape
    shifts = np.random.uniform(-shift_range, shift_range, (B,3))
    for batch_index in range(B):
        batch_data[batch_index,:,:] += shifts[batch_index,:]
    return batch_data


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)
np.random.seed(0)
B, N = 4, 12

# the utilities on fixed clouds
src = torch.from_numpy(r.normal(size=(2, 5, 3)).astype(np.float32))
dst = torch.from_numpy(r.normal(size=(2, 7, 3)).astype(np.float32))
sd = square_distance(src, dst)
print("square_distance", tuple(sd.shape), fmt(sd[1, 2], 4),
      torch.allclose(sd, torch.cdist(src, dst) ** 2, atol=1e-4))
feats = torch.from_numpy(r.normal(size=(2, 7, 4)).astype(np.float32))
idx2 = torch.from_numpy(r.integers(0, 7, (2, 3, 5)))
g = index_points(feats, idx2)
print("index_points", tuple(g.shape), fmt(g[1, 2, 4], 4), torch.equal(g[1, 2, 4], feats[1, idx2[1, 2, 4]]),
      tuple(index_points(feats, idx2[:, 0]).shape))
grp = query_ball_point(1.2, 4, dst, src)
# a query with no point in its ball keeps the index N (the repository's
# centroids are always points of the cloud, so it never meets this)
print("query_ball_point", grp.dtype, tuple(grp.shape), grp[0].tolist(), int((grp == 7).sum()))
grp = query_ball_point(2.5, 4, dst, src)
print("all points inside", grp[1].tolist(), bool((sd.gather(2, grp) <= 2.5 ** 2 + 1e-5).all()))

# farthest point sampling: any start gives distinct, well-spread samples
cloud = np.stack([pc_normalize(r.normal(size=(N, 3))) for _ in range(B)]).astype(np.float32)
xyz = torch.from_numpy(cloud)
torch.manual_seed(0)
fps = farthest_point_sample(xyz, 8)
print("fps", fps.dtype, tuple(fps.shape), all(len(set(row)) == 8 for row in fps.tolist()))
print("fps", fps[0].tolist())
full = farthest_point_sample(xyz, N)
print("fps npoint=N is a permutation", torch.equal(full.sort(dim=1)[0], torch.arange(N).expand(B, N)))
# the second sample is the point farthest from the first
first = xyz[torch.arange(B), fps[:, 0]]
print("second is farthest", torch.equal(fps[:, 1], ((xyz - first[:, None]) ** 2).sum(-1).max(-1)[1]))
new_xyz, new_points, grouped_xyz, fps_idx = sample_and_group(8, 0.6, 5, xyz, xyz * 2, returnfps=True)
print("sample_and_group", tuple(new_xyz.shape), tuple(new_points.shape), tuple(grouped_xyz.shape),
      torch.allclose(new_points[..., :3], grouped_xyz - new_xyz[:, :, None]),
      bool((new_points[..., :3].norm(dim=-1) <= 0.6 + 1e-5).all()))
ga_xyz, ga_points = sample_and_group_all(xyz, xyz * 2)
print("sample_and_group_all", tuple(ga_xyz.shape), tuple(ga_points.shape), float(ga_xyz.abs().sum()))

# feature propagation: 3-NN inverse distance interpolation
fp = PointNetFeaturePropagation(4 + 6, [8, 6])
load_numpy(fp, r)
x1 = torch.from_numpy(r.normal(size=(2, 3, 10)).astype(np.float32))
x2 = torch.from_numpy(r.normal(size=(2, 3, 5)).astype(np.float32))
p1 = torch.from_numpy(r.normal(size=(2, 4, 10)).astype(np.float32))
p2 = torch.from_numpy(r.normal(size=(2, 6, 5)).astype(np.float32), ).requires_grad_()
up = fp(x1, x2, p1, p2)
up.pow(2).sum().backward()
print("feature propagation", tuple(up.shape), fmt(up[1].sum(0), 6), fmt(p2.grad[0, 0], 5))
fp.eval()
print("fp S == 1", tuple(fp(x1, x2[:, :, :1], None if False else p1, p2[:, :, :1]).shape))

# the classifier
classifier = get_model(5, normal_channel=True, npoints=(N, N), width=1)
load_numpy(classifier, r, std=0.25)
criterion = get_loss()
print("params", sum(p.numel() for p in classifier.parameters()), [n for n, _ in classifier.named_parameters()][:4])
optimizer = torch.optim.Adam(classifier.parameters(), lr=0.001, betas=(0.9, 0.999), eps=1e-08, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.7)


def make_batch():
    pts = np.stack([pc_normalize(r.normal(size=(N, 3))) for _ in range(B)])
    normals = r.normal(size=(B, N, 3))
    normals /= np.linalg.norm(normals, axis=-1, keepdims=True)
    points = np.concatenate([pts, normals], -1)
    points[:, :, 0:3] = random_scale_point_cloud(points[:, :, 0:3])
    points[:, :, 0:3] = shift_point_cloud(points[:, :, 0:3])
    target = r.integers(0, 5, (B,))
    return points, target


# one forward with the repository's dropout (on a copy: the draws differ
# between tracec and torch, and the BatchNorm statistics after them)
points, target = make_batch()
points = torch.Tensor(points)
points = points.transpose(2, 1)
pred, trans_feat = copy.deepcopy(classifier).train()(points)
print("dropout step loss", f"{criterion(pred, torch.Tensor(target).long(), trans_feat).item():.5f}")

classifier.drop1.p = classifier.drop2.p = 0.0
for epoch in range(3):
    mean_correct = []
    classifier = classifier.train()
    for batch_id in range(2):
        optimizer.zero_grad()
        points, target = make_batch()
        points = torch.Tensor(points)
        target = torch.Tensor(target)
        points = points.transpose(2, 1)

        pred, trans_feat = classifier(points)
        loss = criterion(pred, target.long(), trans_feat)
        pred_choice = pred.data.max(1)[1]

        correct = pred_choice.eq(target.long().data).cpu().sum()
        mean_correct.append(correct.item() / float(points.size()[0]))
        loss.backward()
        optimizer.step()
    scheduler.step()
    train_instance_acc = np.mean(mean_correct)
    print('Epoch %d Train Instance Accuracy: %f loss %.5f lr %.6f' % (epoch + 1, train_instance_acc, loss.item(),
                                                                     optimizer.param_groups[0]['lr']))
print("trans_feat", tuple(trans_feat.shape), fmt(trans_feat[0, :, 0], 4))

with torch.no_grad():
    classifier = classifier.eval()
    points, target = make_batch()
    pred, _ = classifier(torch.Tensor(points).transpose(2, 1))
    print("eval", fmt(pred.exp().sum(-1), 4), fmt(pred[1], 5), pred.data.max(1)[1].tolist())
print("bn running", fmt(classifier.bn2.running_var, 4), int(classifier.bn1.num_batches_tracked))

# one training step under torch.compile against the same step eagerly
classifier.train()
points, target = make_batch()
points = torch.Tensor(points).transpose(2, 1)
target = torch.Tensor(target).long()


def train_step(points, target):
    optimizer.zero_grad()
    pred, trans_feat = classifier(points)
    loss = criterion(pred, target, trans_feat)
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(classifier.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(points, target).item() for _ in range(2)]
after = {k: v.clone() for k, v in classifier.state_dict().items()}
classifier.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(points, target).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
# (the weights only: a conv bias feeding BatchNorm has a zero gradient up to
# rounding, which Adam's normalized step turns into noise of size lr)
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(classifier.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after
          if k.endswith("weight")))
