# facebookresearch/moco (moco/builder.py's MoCo: momentum encoder, the queue
# buffer normalized and updated in place by index assignment, queue_ptr,
# _batch_shuffle_ddp / _batch_unshuffle_ddp, logits over einsum with the
# temperature; main_moco.py's train loop with CrossEntropyLoss, SGD with
# momentum and weight decay, adjust_learning_rate (cos), accuracy,
# AverageMeter and ProgressMeter), with the MoCo v2 options (mlp=True,
# T=0.2, cos).  Changes for a CPU test: .cuda(...) is dropped, concat_all_gather
# and the broadcast / rank of torch.distributed are those of a one-process
# group (the gather of one tensor; rank 0), the base encoder is a small CNN
# with a `fc` head taking num_classes (torchvision's resnet50 has), K is 16,
# dim 8, images come from numpy (two fixed "augmentations"), and every
# parameter and buffer (the randn queue included) comes from numpy, so tracec
# and torch compute the same numbers (the shuffle permutation is drawn by
# torch.randperm, and undone, so it does not change them).  Then the training
# step under torch.compile against the same step run eagerly.
import copy
import math
import time

import numpy as np
import torch
import torch.nn as nn


class MoCo(nn.Module):
    """
    Build a MoCo model with: a query encoder, a key encoder, and a queue
    https://arxiv.org/abs/1911.05722
    """
    def __init__(self, base_encoder, dim=128, K=65536, m=0.999, T=0.07, mlp=False):
        """
        dim: feature dimension (default: 128)
        K: queue size; number of negative keys (default: 65536)
        m: moco momentum of updating key encoder (default: 0.999)
        T: softmax temperature (default: 0.07)
        """
        super(MoCo, self).__init__()

        self.K = K
        self.m = m
        self.T = T

        # create the encoders
        # num_classes is the output fc dimension
        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)

        if mlp:  # hack: brute-force replacement
            dim_mlp = self.encoder_q.fc.weight.shape[1]
            self.encoder_q.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_q.fc)
            self.encoder_k.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_k.fc)

        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)  # initialize
            param_k.requires_grad = False  # not update by gradient

        # create the queue
        self.register_buffer("queue", torch.randn(dim, K))
        self.queue = nn.functional.normalize(self.queue, dim=0)

        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        """
        Momentum update of the key encoder
        """
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data = param_k.data * self.m + param_q.data * (1. - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        # gather keys before updating queue
        keys = concat_all_gather(keys)

        batch_size = keys.shape[0]

        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0  # for simplicity

        # replace the keys at ptr (dequeue and enqueue)
        self.queue[:, ptr:ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K  # move pointer

        self.queue_ptr[0] = ptr

    @torch.no_grad()
    def _batch_shuffle_ddp(self, x):
        """
        Batch shuffle, for making use of BatchNorm.
        *** Only support DistributedDataParallel (DDP) model. ***
        """
        # gather from all gpus
        batch_size_this = x.shape[0]
        x_gather = concat_all_gather(x)
        batch_size_all = x_gather.shape[0]

        num_gpus = batch_size_all // batch_size_this

        # random shuffle index
        idx_shuffle = torch.randperm(batch_size_all)

        # broadcast to all gpus
        distributed_broadcast(idx_shuffle, src=0)

        # index for restoring
        idx_unshuffle = torch.argsort(idx_shuffle)

        # shuffled index for this gpu
        gpu_idx = distributed_get_rank()
        idx_this = idx_shuffle.view(num_gpus, -1)[gpu_idx]

        return x_gather[idx_this], idx_unshuffle

    @torch.no_grad()
    def _batch_unshuffle_ddp(self, x, idx_unshuffle):
        """
        Undo batch shuffle.
        *** Only support DistributedDataParallel (DDP) model. ***
        """
        # gather from all gpus
        batch_size_this = x.shape[0]
        x_gather = concat_all_gather(x)
        batch_size_all = x_gather.shape[0]

        num_gpus = batch_size_all // batch_size_this

        # restored index for this gpu
        gpu_idx = distributed_get_rank()
        idx_this = idx_unshuffle.view(num_gpus, -1)[gpu_idx]

        return x_gather[idx_this]

    def forward(self, im_q, im_k):
        """
        Input:
            im_q: a batch of query images
            im_k: a batch of key images
        Output:
            logits, targets
        """

        # compute query features
        q = self.encoder_q(im_q)  # queries: NxC
        q = nn.functional.normalize(q, dim=1)

        # compute key features
        with torch.no_grad():  # no gradient to keys
            self._momentum_update_key_encoder()  # update the key encoder

            # shuffle for making use of BN
            im_k, idx_unshuffle = self._batch_shuffle_ddp(im_k)

            k = self.encoder_k(im_k)  # keys: NxC
            k = nn.functional.normalize(k, dim=1)

            # undo shuffle
            k = self._batch_unshuffle_ddp(k, idx_unshuffle)

        # compute logits
        # Einstein sum is more intuitive
        # positive logits: Nx1
        l_pos = torch.einsum('nc,nc->n', [q, k]).unsqueeze(-1)
        # negative logits: NxK
        l_neg = torch.einsum('nc,ck->nk', [q, self.queue.clone().detach()])

        # logits: Nx(1+K)
        logits = torch.cat([l_pos, l_neg], dim=1)

        # apply temperature
        logits /= self.T

        # labels: positive key indicators
        labels = torch.zeros(logits.shape[0], dtype=torch.long)

        # dequeue and enqueue
        self._dequeue_and_enqueue(k)

        return logits, labels


# utils: one process (world size 1)
@torch.no_grad()
def concat_all_gather(tensor):
    """
    Performs all_gather operation on the provided tensors.
    *** Warning ***: torch.distributed.all_gather has no gradient.
    """
    tensors_gather = [torch.ones_like(tensor)
        for _ in range(1)]
    tensors_gather[0].copy_(tensor)

    output = torch.cat(tensors_gather, dim=0)
    return output


def distributed_broadcast(tensor, src):
    return tensor


def distributed_get_rank():
    return 0


# ---- main_moco.py ----
class AverageMeter(object):
    """Computes and stores the average and current value"""
    def __init__(self, name, fmt=':f'):
        self.name = name
        self.fmt = fmt
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = '{name} {val' + self.fmt + '} ({avg' + self.fmt + '})'
        return fmtstr.format(**self.__dict__)


class ProgressMeter(object):
    def __init__(self, num_batches, meters, prefix=""):
        self.batch_fmtstr = self._get_batch_fmtstr(num_batches)
        self.meters = meters
        self.prefix = prefix

    def display(self, batch):
        entries = [self.prefix + self.batch_fmtstr.format(batch)]
        entries += [str(meter) for meter in self.meters]
        print('\t'.join(entries))

    def _get_batch_fmtstr(self, num_batches):
        num_digits = len(str(num_batches // 1))
        fmt = '{:' + str(num_digits) + 'd}'
        return '[' + fmt + '/' + fmt.format(num_batches) + ']'


def adjust_learning_rate(optimizer, epoch, args):
    """Decay the learning rate based on schedule"""
    lr = args.lr
    if args.cos:  # cosine lr schedule
        lr *= 0.5 * (1. + math.cos(math.pi * epoch / args.epochs))
    else:  # stepwise lr schedule
        for milestone in args.schedule:
            lr *= 0.1 if epoch >= milestone else 1.
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)

        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))

        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def train(train_loader, model, criterion, optimizer, epoch, args):
    batch_time = AverageMeter('[rng] Time', ':6.3f')
    data_time = AverageMeter('Data', ':6.3f')
    losses = AverageMeter('Loss', ':.4e')
    top1 = AverageMeter('Acc@1', ':6.2f')
    top5 = AverageMeter('Acc@5', ':6.2f')
    progress = ProgressMeter(
        len(train_loader),
        [batch_time, losses, top1, top5],
        prefix="Epoch: [{}]".format(epoch))

    # switch to train mode
    model.train()

    end = time.time()
    for i, (images, _) in enumerate(train_loader):
        # measure data loading time
        data_time.update(time.time() - end)

        # compute output
        output, target = model(im_q=images[0], im_k=images[1])
        loss = criterion(output, target)

        # acc1/acc5 are (K+1)-way contrast classifier accuracy
        # measure accuracy and record loss
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        losses.update(loss.item(), images[0].size(0))
        top1.update(acc1[0], images[0].size(0))
        top5.update(acc5[0], images[0].size(0))

        # compute gradient and do SGD step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        # measure elapsed time
        batch_time.update(time.time() - end)
        end = time.time()

        if i % args.print_freq == 0:
            progress.display(i)


# ---- a small base encoder standing in for torchvision.models.resnet50 ----
class SmallNet(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        x = self.avgpool(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(x, 1))


class TwoCropsTransform:
    """Take two random crops of one image as the query and key."""
    def __init__(self, base_transform):
        self.base_transform = base_transform

    def __call__(self, x):
        q = self.base_transform(x)
        k = self.base_transform(x)
        return [q, k]


class Args:
    lr = 0.03
    momentum = 0.9
    weight_decay = 1e-4
    epochs = 3             # 200
    cos = True
    schedule = [120, 160]
    print_freq = 2
    moco_dim = 8           # 128
    moco_k = 16            # 65536
    moco_m = 0.999
    moco_t = 0.2
    mlp = True


args = Args()
model = MoCo(SmallNet, args.moco_dim, args.moco_k, args.moco_m, args.moco_t, args.mlp)
print(model.encoder_q.fc)
print("queue", tuple(model.queue.shape), f"{model.queue.norm(dim=0).mean().item():.4f}",
      model.queue_ptr.dtype, sum(p.requires_grad for p in model.encoder_k.parameters()))
r = np.random.default_rng(0)
with torch.no_grad():
    for name, p in model.encoder_q.named_parameters():
        std = 0.1 if p.dim() == 1 else p[0].numel() ** -0.5
        p.copy_(torch.from_numpy((std * r.standard_normal(tuple(p.shape))).astype(np.float32)))
    for param_q, param_k in zip(model.encoder_q.parameters(), model.encoder_k.parameters()):
        param_k.data.copy_(param_q.data)
    model.queue.copy_(nn.functional.normalize(
        torch.from_numpy(r.standard_normal((args.moco_dim, args.moco_k)).astype(np.float32)), dim=0))

criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), args.lr,
                            momentum=args.momentum,
                            weight_decay=args.weight_decay)

# a dataset of (TwoCropsTransform(image), label), in a DataLoader
g = np.random.default_rng(1)
raw = g.standard_normal((16, 3, 8, 8)).astype(np.float32)
class Jitter:
    def __init__(self):
        self.calls = 0
    def __call__(self, x):
        self.calls += 1
        return x * (1.0 + 0.1 * (self.calls % 2)) + 0.05 * (self.calls % 3)
dataset = [(TwoCropsTransform(Jitter())(torch.from_numpy(raw[i])), i % 4) for i in range(16)]
train_loader = torch.utils.data.DataLoader(dataset, batch_size=4, shuffle=False, drop_last=True)

for epoch in range(0, args.epochs):
    adjust_learning_rate(optimizer, epoch, args)
    train(train_loader, model, criterion, optimizer, epoch, args)
    print("lr", f"{optimizer.param_groups[0]['lr']:.6f}", "ptr", model.queue_ptr.tolist(),
          f"{model.queue.sum().item():.5f}", f"{model.encoder_k.fc[0].weight.sum().item():.6f}")

torch.save({
    'epoch': args.epochs, 'arch': 'smallnet',
    'state_dict': model.state_dict(), 'optimizer': optimizer.state_dict(),
}, 'checkpoint_0003.pth.tar')
ck = torch.load('checkpoint_0003.pth.tar')
print("checkpoint", ck['epoch'], len(ck['state_dict']), ck['state_dict']['queue_ptr'].tolist(),
      len(ck['optimizer']['state']))

# the training step under torch.compile against the same step run eagerly
images, _ = next(iter(train_loader))


def train_step(im_q, im_k):
    output, target = model(im_q=im_q, im_k=im_k)
    loss = criterion(output, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(images[0], images[1]).item() for _ in range(3)]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(images[0], images[1]).item() for _ in range(3)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
