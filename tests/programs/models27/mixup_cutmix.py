# mixup and CutMix CIFAR training the way hongyi-zhang/mixup-cifar10
# (train.py, models/preactresnet.py) and clovaai/CutMix-PyTorch (train.py)
# write it: mixup_data with np.random.beta(alpha, alpha), mixed_x = lam * x
# + (1 - lam) * x[index, :], mixup_criterion as lam * criterion(pred, y_a) +
# (1 - lam) * criterion(pred, y_b), the mixed accuracy through
# predicted.eq(targets_a.data).cpu().sum().float(), map(Variable, ...),
# adjust_learning_rate over param_groups; CutMix's rand_bbox in numpy
# (np.sqrt(1. - lam), int(W * cut_rat), np.clip), the in-place box paste
# input[:, :, bbx1:bbx2, bby1:bby2] = input[rand_index, :, bbx1:bbx2,
# bby1:bby2], lam adjusted by the pixel ratio, the top-k error `accuracy`
# (topk, t(), eq over expand_as, correct[:k].reshape(-1).float().sum(0,
# keepdim=True), wrong_k.mul_(100.0 / batch_size)) and AverageMeter; the
# PreAct-ResNet (PreActBlock with the shortcut only when present via
# hasattr, `out += shortcut`, forward(x, lin=0, lout=5) cutting layers,
# F.avg_pool2d(out, 4), out.view(out.size(0), -1)); SGD(momentum=0.9,
# weight_decay=5e-4, nesterov=True) with MultiStepLR;
# torch.backends.cudnn.benchmark = True kept.
# Changes for a CPU test: 8 x 8 images and labels from numpy instead of
# CIFAR-10 through torchvision, widths cut (64..512 -> 8 / 16), two stages,
# a few batches, shuffle=False in the DataLoader and the permutations of
# mixup / CutMix drawn by np.random.permutation instead of torch.randperm
# (both draw from torch's generator, whose stream tracec does not
# reproduce; torch.randperm's own contract is checked apart); then one
# training step under torch.compile against the same step eagerly.
from __future__ import print_function

import copy

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.autograd import Variable
from torch.utils.data import DataLoader, TensorDataset


# models/preactresnet.py -------------------------------------------------------

class PreActBlock(nn.Module):
    '''Pre-activation version of the BasicBlock.'''
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super(PreActBlock, self).__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)

        if stride != 1 or in_planes != self.expansion*planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion*planes, kernel_size=1, stride=stride, bias=False)
            )

    def forward(self, x):
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out) if hasattr(self, 'shortcut') else x
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        out += shortcut
        return out


class PreActResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10):
        super(PreActResNet, self).__init__()
        self.in_planes = 8

        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, stride=1, padding=1, bias=False)
        self.layer1 = self._make_layer(block, 8, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 16, num_blocks[1], stride=2)
        self.bn = nn.BatchNorm2d(16 * block.expansion)
        self.linear = nn.Linear(16*block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1]*(num_blocks-1)
        layers = []
        for stride in strides:
            layers.append(block(self.in_planes, planes, stride))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x, lin=0, lout=5):
        out = x
        if lin < 1 and lout > -1:
            out = self.conv1(out)
        if lin < 2 and lout > 0:
            out = self.layer1(out)
        if lin < 3 and lout > 1:
            out = self.layer2(out)
        if lout > 2:
            out = F.relu(self.bn(out))
            out = F.avg_pool2d(out, 4)
            out = out.view(out.size(0), -1)
            out = self.linear(out)
        return out


def PreActResNet18():
    return PreActResNet(PreActBlock, [2, 1])


# mixup-cifar10 train.py -------------------------------------------------------

def mixup_data(x, y, alpha=1.0, use_cuda=True):
    '''Returns mixed inputs, pairs of targets, and lambda'''
    if alpha > 0:
        lam = np.random.beta(alpha, alpha)
    else:
        lam = 1

    batch_size = x.size()[0]
    if use_cuda:
        index = torch.from_numpy(np.random.permutation(batch_size)).cuda()
    else:
        index = torch.from_numpy(np.random.permutation(batch_size))

    mixed_x = lam * x + (1 - lam) * x[index, :]
    y_a, y_b = y, y[index]
    return mixed_x, y_a, y_b, lam


def mixup_criterion(criterion, pred, y_a, y_b, lam):
    return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)


# CutMix-PyTorch train.py ------------------------------------------------------

def rand_bbox(size, lam):
    W = size[2]
    H = size[3]
    cut_rat = np.sqrt(1. - lam)
    cut_w = int(W * cut_rat)
    cut_h = int(H * cut_rat)

    # uniform
    cx = np.random.randint(W)
    cy = np.random.randint(H)

    bbx1 = np.clip(cx - cut_w // 2, 0, W)
    bby1 = np.clip(cy - cut_h // 2, 0, H)
    bbx2 = np.clip(cx + cut_w // 2, 0, W)
    bby2 = np.clip(cy + cut_h // 2, 0, H)

    return bbx1, bby1, bbx2, bby2


class AverageMeter(object):
    """Computes and stores the average and current value"""

    def __init__(self):
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


def accuracy(output, target, topk=(1,)):
    """Computes the precision@k for the specified values of k"""
    maxk = max(topk)
    batch_size = target.size(0)

    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))

    res = []
    for k in topk:
        correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
        wrong_k = batch_size - correct_k
        res.append(wrong_k.mul_(100.0 / batch_size))

    return res


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(module, r, std=0.2):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if 'bn' in name:
                continue
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


np.random.seed(0)
use_cuda = torch.cuda.is_available()
cudnn.benchmark = True
print("cuda", use_cuda, "benchmark", torch.backends.cudnn.benchmark)

# torch.randperm's contract (its draws are torch's generator's: not compared)
p1 = torch.randperm(8)
g = torch.Generator().manual_seed(3)
p2, p3 = torch.randperm(8, generator=g), torch.randperm(8, generator=torch.Generator().manual_seed(3))
print("randperm", p1.dtype, sorted(p1.tolist()) == list(range(8)), torch.equal(p2, p3),
      "[rng]", p2.tolist())

r = np.random.RandomState(1)
X = torch.from_numpy(r.rand(32, 3, 8, 8).astype(np.float32))
Y = torch.from_numpy(r.randint(0, 10, 32))
mean, std = X.mean(dim=(0, 2, 3)), X.std(dim=(0, 2, 3))
X = (X - mean[None, :, None, None]) / std[None, :, None, None]
trainloader = DataLoader(TensorDataset(X, Y), batch_size=8, shuffle=False, num_workers=0)

net = PreActResNet18()
load_numpy(net, r)
if use_cuda:
    net.cuda()
print("blocks", [hasattr(b, 'shortcut') for b in list(net.layer1) + list(net.layer2)],
      sum(p.numel() for p in net.parameters()))
print("partial forward", tuple(net(X[:2], lout=1).shape), tuple(net(X[:2], lout=2).shape),
      fmt(net(X[:2])[1], 4))

criterion = nn.CrossEntropyLoss()
lr = 0.1
optimizer = optim.SGD(net.parameters(), lr=lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=[1, 2], gamma=0.1)


def adjust_learning_rate(optimizer, epoch):
    """decrease the learning rate at 100 and 150 epoch"""
    lr = 0.1
    if epoch >= 2:
        lr /= 10
    if epoch >= 3:
        lr /= 10
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


def train_mixup(epoch, alpha=1.0):
    print('\nEpoch: %d' % epoch)
    net.train()
    train_loss = 0
    reg_loss = 0
    correct = 0
    total = 0
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        if use_cuda:
            inputs, targets = inputs.cuda(), targets.cuda()

        inputs, targets_a, targets_b, lam = mixup_data(inputs, targets,
                                                       alpha, use_cuda)
        inputs, targets_a, targets_b = map(Variable, (inputs,
                                                      targets_a, targets_b))
        outputs = net(inputs)
        loss = mixup_criterion(criterion, outputs, targets_a, targets_b, lam)
        train_loss += loss.item()
        _, predicted = torch.max(outputs.data, 1)
        total += targets.size(0)
        correct += (lam * predicted.eq(targets_a.data).cpu().sum().float()
                    + (1 - lam) * predicted.eq(targets_b.data).cpu().sum().float())

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        print('%d/%d Loss: %.3f | Reg: %.5f | Acc: %.3f%% (%d/%d)'
              % (batch_idx, len(trainloader), train_loss/(batch_idx+1), reg_loss/(batch_idx+1),
                 100.*correct/total, correct, total))
    return (train_loss/batch_idx, reg_loss/batch_idx, 100.*correct/total)


def train_cutmix(epoch, beta=1.0, cutmix_prob=0.5):
    losses = AverageMeter()
    top1 = AverageMeter()
    top5 = AverageMeter()
    net.train()
    for i, (input, target) in enumerate(trainloader):
        input = input.clone()
        r = np.random.rand(1)
        if beta > 0 and r < cutmix_prob:
            # generate mixed sample
            lam = np.random.beta(beta, beta)
            rand_index = torch.from_numpy(np.random.permutation(input.size()[0]))
            target_a = target
            target_b = target[rand_index]
            bbx1, bby1, bbx2, bby2 = rand_bbox(input.size(), lam)
            input[:, :, bbx1:bbx2, bby1:bby2] = input[rand_index, :, bbx1:bbx2, bby1:bby2]
            # adjust lambda to exactly match pixel ratio
            lam = 1 - ((bbx2 - bbx1) * (bby2 - bby1) / (input.size()[-1] * input.size()[-2]))
            # compute output
            output = net(input)
            loss = criterion(output, target_a) * lam + criterion(output, target_b) * (1. - lam)
            print("cutmix box", (int(bbx1), int(bby1), int(bbx2), int(bby2)), f"lam {lam:.4f}",
                  type(bbx1).__name__)
        else:
            # compute output
            output = net(input)
            loss = criterion(output, target)

        # measure accuracy and record loss
        err1, err5 = accuracy(output.data, target, topk=(1, 5))

        losses.update(loss.item(), input.size(0))
        top1.update(err1.item(), input.size(0))
        top5.update(err5.item(), input.size(0))

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print('Epoch: [{0}] Loss {loss.val:.4f} ({loss.avg:.4f}) Top 1-err {top1.val:.4f} ({top1.avg:.4f}) '
          'Top 5-err {top5.val:.4f} ({top5.avg:.4f})'.format(epoch, loss=losses, top1=top1, top5=top5))
    return losses.avg


for epoch in range(0, 2):
    adjust_learning_rate(optimizer, epoch)
    train_loss, reg_loss, acc = train_mixup(epoch)
    print("mixup epoch", epoch, f"{train_loss:.4f}", f"{acc.item():.3f}", type(acc).__name__,
          optimizer.param_groups[0]['lr'])

for epoch in range(2):
    avg = train_cutmix(epoch)
    scheduler.step()
    print("cutmix epoch", epoch, f"{avg:.4f}", scheduler.get_last_lr(), optimizer.param_groups[0]['lr'])
print("running stats", fmt(net.bn.running_mean, 4), fmt(net.layer1[0].bn1.running_var, 4),
      net.bn.num_batches_tracked.item())
print("weights", fmt(net.linear.weight, 4), fmt(net.layer2[0].shortcut[0].weight, 4))
state = optimizer.state_dict()
print("sgd state", sorted(state['param_groups'][0].keys())[:6], state['param_groups'][0]['nesterov'],
      fmt(optimizer.state[net.linear.weight]['momentum_buffer'], 3))

# accuracy / mixed-accuracy corners
out = torch.tensor([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1], [0.2, 0.3, 0.5], [0.3, 0.3, 0.4]])
tgt = torch.tensor([1, 2, 2, 0])
print("topk err", [e.tolist() for e in accuracy(out, tgt, topk=(1, 2))])
_, pred = out.topk(2, 1, True, True)
correct = pred.t().eq(tgt.view(1, -1).expand_as(pred.t()))
try:
    correct[:2].view(-1)
    print("view ok")
except RuntimeError as e:
    print("view of the transposed eq:", str(e).split('.')[0])
print("eq contiguous", correct.is_contiguous(), correct.stride(), pred.t().stride())
net.eval()
with torch.no_grad():
    test_out = net(X[:8])
    _, predicted = torch.max(test_out.data, 1)
    print("eval", predicted.tolist(), predicted.eq(Y[:8].data).cpu().sum().item(),
          (100. * predicted.eq(Y[:8].data).cpu().sum().float() / 8).item())
net.train()


# one training step under torch.compile against the same step eagerly
def train_step(inputs, targets_a, targets_b, lam, rand_index):
    inputs = inputs.clone()
    inputs[:, :, 2:6, 1:5] = inputs[rand_index, :, 2:6, 1:5]
    outputs = net(inputs)
    loss = mixup_criterion(criterion, outputs, targets_a, targets_b, lam)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


xb, yb = X[:8], Y[:8]
mixed, ya, yb2, lam = mixup_data(xb, yb, 1.0, use_cuda)
ridx = torch.from_numpy(np.random.permutation(8))
state_sd, opt_sd = copy.deepcopy(net.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(mixed, ya, yb2, lam, ridx).item() for _ in range(2)]
after = {k: v.clone() for k, v in net.state_dict().items()}
net.load_state_dict(state_sd)
optimizer.load_state_dict(opt_sd)
cstep = torch.compile(train_step)
compiled = [cstep(mixed, ya, yb2, lam, ridx).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(net.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
