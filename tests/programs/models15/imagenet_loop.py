# pytorch/examples imagenet/main.py (the current version: argparse options,
# torch.accelerator / mps device selection falling back to the CPU, the
# model chosen by name from a models dict, CrossEntropyLoss().to(device),
# SGD with momentum and weight decay, StepLR, train() with AverageMeter /
# ProgressMeter and accuracy(output, target, topk=(1, 5)), validate() with
# run_validate and the aux loader over a Subset when the sampler drops
# samples, Summary enum display_summary, save_checkpoint with torch.save and
# shutil.copyfile, the --resume path with torch.load and map_location) over
# a small torchvision-style ResNet (BasicBlock, _make_layer with a
# downsample, kaiming_normal_(mode="fan_out"), zero_init_residual,
# AdaptiveAvgPool2d + torch.flatten).
# Changes for a CPU test: a TensorDataset of small random images from numpy
# instead of ImageFolder / FakeData, weights from numpy, two epochs of a
# few batches without shuffling (random streams differ), the timing meters
# marked [rng]; then one training step under
# torch.compile against the same step eagerly.
import argparse
import copy
import os
import shutil
import time
from enum import Enum

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.parallel
import torch.optim
import torch.utils.data
import torch.utils.data.distributed
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import Subset


# ---- a torchvision-style ResNet ----
def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation, groups=groups,
                     bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64, dilation=1,
                 norm_layer=None):
        super().__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000, zero_init_residual=False, width=8):
        super().__init__()
        norm_layer = nn.BatchNorm2d
        self._norm_layer = norm_layer
        self.inplanes = width
        self.dilation = 1
        self.groups = 1
        self.base_width = 64
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 2 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        norm_layer = self._norm_layer
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                norm_layer(planes * block.expansion),
            )
        layers = []
        layers.append(block(self.inplanes, planes, stride, downsample, self.groups, self.base_width,
                            self.dilation, norm_layer))
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups, base_width=self.base_width,
                                dilation=self.dilation, norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def _forward_impl(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.fc(x)
        return x

    def forward(self, x):
        return self._forward_impl(x)


def resnet_tiny(num_classes=1000, **kwargs):
    return ResNet(BasicBlock, [1, 1], num_classes=num_classes, **kwargs)


models = {"resnet_tiny": resnet_tiny}
model_names = sorted(name for name in models if name.islower() and not name.startswith("__")
                     and callable(models[name]))

parser = argparse.ArgumentParser(description='PyTorch ImageNet Training')
parser.add_argument('-a', '--arch', metavar='ARCH', default='resnet_tiny', choices=model_names,
                    help='model architecture: ' + ' | '.join(model_names) + ' (default: resnet_tiny)')
parser.add_argument('--epochs', default=2, type=int, metavar='N', help='number of total epochs to run')
parser.add_argument('--start-epoch', default=0, type=int, metavar='N')
parser.add_argument('-b', '--batch-size', default=8, type=int, metavar='N')
parser.add_argument('--lr', '--learning-rate', default=0.1, type=float, metavar='LR', dest='lr')
parser.add_argument('--momentum', default=0.9, type=float, metavar='M')
parser.add_argument('--wd', '--weight-decay', default=1e-4, type=float, metavar='W', dest='weight_decay')
parser.add_argument('-p', '--print-freq', default=2, type=int, metavar='N')
parser.add_argument('--resume', default='', type=str, metavar='PATH')
parser.add_argument('-e', '--evaluate', dest='evaluate', action='store_true')
parser.add_argument('--seed', default=None, type=int)
parser.add_argument('--world-size', default=-1, type=int)
parser.add_argument('--distributed', action='store_true')

best_acc1 = 0


def main_worker(args):
    global best_acc1
    print("=> creating model '{}'".format(args.arch))
    model = models[args.arch](num_classes=10, zero_init_residual=True)
    r = np.random.default_rng(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.from_numpy(r.standard_normal(p.shape).astype(np.float32))
                        * (2.0 / p[0].numel()) ** 0.5)
            elif name == "fc.bias":
                p.copy_(torch.from_numpy(0.1 * r.standard_normal(p.shape).astype(np.float32)))
    print("bn2 zero-init", float(model.layer1[0].bn2.weight.abs().sum()))

    if torch.accelerator.is_available():
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")
    model = model.to(device)
    print("device", device)

    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.1)

    if args.resume:
        if os.path.isfile(args.resume):
            print("=> loading checkpoint '{}'".format(args.resume))
            checkpoint = torch.load(args.resume, map_location=device)
            args.start_epoch = checkpoint['epoch']
            best_acc1 = checkpoint['best_acc1']
            model.load_state_dict(checkpoint['state_dict'])
            optimizer.load_state_dict(checkpoint['optimizer'])
            scheduler.load_state_dict(checkpoint['scheduler'])
            print("=> loaded checkpoint '{}' (epoch {})".format(args.resume, checkpoint['epoch']))
        else:
            print("=> no checkpoint found at '{}'".format(args.resume))

    d = np.random.default_rng(1)
    train_x = torch.from_numpy(d.standard_normal((32, 3, 16, 16)).astype(np.float32))
    train_y = torch.from_numpy(d.integers(0, 10, 32))
    train_x[torch.arange(32), train_y % 3] += 1.5       # a learnable signal
    val_x = torch.from_numpy(d.standard_normal((20, 3, 16, 16)).astype(np.float32))
    val_y = torch.from_numpy(d.integers(0, 10, 20))
    train_dataset = torch.utils.data.TensorDataset(train_x, train_y)
    val_dataset = torch.utils.data.TensorDataset(val_x, val_y)
    train_sampler = torch.utils.data.SequentialSampler(train_dataset)   # (no shuffle)
    val_sampler = None
    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, shuffle=(train_sampler is None),
        num_workers=0, pin_memory=False, sampler=train_sampler)
    val_loader = torch.utils.data.DataLoader(
        val_dataset, batch_size=args.batch_size, shuffle=False,
        num_workers=0, pin_memory=False, sampler=val_sampler)

    if args.evaluate:
        validate(val_loader, model, criterion, args)
        return model, None, None, None

    for epoch in range(args.start_epoch, args.epochs):
        train(train_loader, model, criterion, optimizer, epoch, device, args)
        acc1 = validate(val_loader, model, criterion, args)
        scheduler.step()
        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)
        save_checkpoint({
            'epoch': epoch + 1,
            'arch': args.arch,
            'state_dict': model.state_dict(),
            'best_acc1': best_acc1,
            'optimizer': optimizer.state_dict(),
            'scheduler': scheduler.state_dict()
        }, is_best)
    return model, optimizer, criterion, train_loader


def train(train_loader, model, criterion, optimizer, epoch, device, args):
    batch_time = AverageMeter('[rng] Time', ':6.3f')
    data_time = AverageMeter('Data', ':6.3f')
    losses = AverageMeter('Loss', ':.4e')
    top1 = AverageMeter('Acc@1', ':6.2f')
    top5 = AverageMeter('Acc@5', ':6.2f')
    progress = ProgressMeter(
        len(train_loader),
        [batch_time, data_time, losses, top1, top5],
        prefix="Epoch: [{}]".format(epoch))

    model.train()
    end = time.time()
    for i, (images, target) in enumerate(train_loader):
        data_time.update(time.time() - end)
        images = images.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)
        output = model(images)
        loss = criterion(output, target)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1[0], images.size(0))
        top5.update(acc5[0], images.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        batch_time.update(time.time() - end)
        end = time.time()
        if i % args.print_freq == 0:
            progress.display(i + 1)
    print("train", f"loss {losses.avg:.4f}", f"acc1 {float(top1.avg):.2f}", type(top1.avg).__name__)


def validate(val_loader, model, criterion, args):

    def run_validate(loader, base_progress=0):
        with torch.no_grad():
            end = time.time()
            for i, (images, target) in enumerate(loader):
                i = base_progress + i
                output = model(images)
                loss = criterion(output, target)
                acc1, acc5 = accuracy(output, target, topk=(1, 5))
                losses.update(loss.item(), images.size(0))
                top1.update(acc1[0], images.size(0))
                top5.update(acc5[0], images.size(0))
                batch_time.update(time.time() - end)
                end = time.time()
                if i % args.print_freq == 0:
                    progress.display(i + 1)

    batch_time = AverageMeter('[rng] Time', ':6.3f', Summary.NONE)
    losses = AverageMeter('Loss', ':.4e', Summary.NONE)
    top1 = AverageMeter('Acc@1', ':6.2f', Summary.AVERAGE)
    top5 = AverageMeter('Acc@5', ':6.2f', Summary.AVERAGE)
    progress = ProgressMeter(
        len(val_loader) + (args.distributed and (len(val_loader.sampler) * args.world_size
                                                 < len(val_loader.dataset))),
        [batch_time, losses, top1, top5],
        prefix='Test: ')

    model.eval()
    run_validate(val_loader)
    if args.distributed:
        top1.all_reduce()
        top5.all_reduce()
    if args.distributed and (len(val_loader.sampler) * args.world_size < len(val_loader.dataset)):
        aux_val_dataset = Subset(val_loader.dataset,
                                 range(len(val_loader.sampler) * args.world_size, len(val_loader.dataset)))
        aux_val_loader = torch.utils.data.DataLoader(aux_val_dataset, batch_size=args.batch_size,
                                                     shuffle=False, num_workers=0)
        run_validate(aux_val_loader, len(val_loader))
    progress.display_summary()
    return top1.avg


def save_checkpoint(state, is_best, filename='checkpoint.pth.tar'):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, 'model_best.pth.tar')


class Summary(Enum):
    NONE = 0
    AVERAGE = 1
    SUM = 2
    COUNT = 3


class AverageMeter(object):
    """Computes and stores the average and current value"""
    def __init__(self, name, fmt=':f', summary_type=Summary.AVERAGE):
        self.name = name
        self.fmt = fmt
        self.summary_type = summary_type
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

    def all_reduce(self):
        device = "cpu"
        total = torch.tensor([self.sum, self.count], dtype=torch.float32, device=device)
        self.sum, self.count = total.tolist()
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = '{name} {val' + self.fmt + '} ({avg' + self.fmt + '})'
        return fmtstr.format(**self.__dict__)

    def summary(self):
        fmtstr = ''
        if self.summary_type is Summary.NONE:
            fmtstr = ''
        elif self.summary_type is Summary.AVERAGE:
            fmtstr = '{name} {avg:.3f}'
        elif self.summary_type is Summary.SUM:
            fmtstr = '{name} {sum:.3f}'
        elif self.summary_type is Summary.COUNT:
            fmtstr = '{name} {count:.3f}'
        else:
            raise ValueError('invalid summary type %r' % self.summary_type)
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

    def display_summary(self):
        entries = [" *"]
        entries += [meter.summary() for meter in self.meters]
        print(' '.join(entries))

    def _get_batch_fmtstr(self, num_batches):
        num_digits = len(str(num_batches // 1))
        fmt = '{:' + str(num_digits) + 'd}'
        return '[' + fmt + '/' + fmt.format(num_batches) + ']'


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


args = parser.parse_args([])
cudnn.benchmark = False
if args.seed is not None:
    torch.manual_seed(args.seed)
    cudnn.deterministic = True
model, optimizer, criterion, train_loader = main_worker(args)
print("files", sorted(f for f in os.listdir('.') if f.endswith('.pth.tar')))

# resume from the checkpoint and evaluate
args2 = parser.parse_args(['--resume', 'model_best.pth.tar', '-e'])
best_acc1 = 0
model2, *_ = main_worker(args2)
print("resumed best_acc1", f"{float(best_acc1):.3f}", "epoch", args2.start_epoch)
print("missing", parser.parse_args(['--resume', 'nope.pth']).resume, os.path.isfile('nope.pth'))
try:
    parser.parse_args(['-a', 'vgg'])
except SystemExit as e:
    print("bad arch exit", e.code)
m = AverageMeter('x', summary_type=7)
try:
    m.summary()
except ValueError as e:
    print(e)
a = AverageMeter('Acc@1', ':6.2f', Summary.AVERAGE)
a.update(torch.tensor([50.0])[0], 4)
a.update(torch.tensor([75.0])[0], 4)
a.all_reduce()
print(str(a), a.summary())
out = torch.tensor([[0.1, 0.5, 0.2, 0.0, 0.9, 0.3], [0.7, 0.1, 0.0, 0.2, 0.05, 0.6]])
print("accuracy", [t.tolist() for t in accuracy(out, torch.tensor([1, 3]), topk=(1, 2, 5))])


# the evaluation step under torch.compile against the same step eagerly
images, target = next(iter(torch.utils.data.DataLoader(train_loader.dataset, batch_size=8)))
model.eval()


def eval_step(images, target):
    with torch.no_grad():
        output = model(images)
        loss = criterion(output, target)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
    return output, loss, acc1, acc5


eager = eval_step(images, target)
cstep = torch.compile(eval_step)
compiled = cstep(images, target)
compiled = cstep(images, target)
print("compiled loss", f"{compiled[1].item():.5f}", "acc", compiled[2].item(), compiled[3].item())
print("compiled == eager:", all(torch.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(compiled, eager)))
