# DARTS architecture search the way quark0/darts writes it (cnn/operations.py,
# cnn/genotypes.py, cnn/model_search.py, cnn/architect.py, cnn/utils.py,
# cnn/train_search.py): the OPS dict of lambdas (sep_conv / dil_conv with
# depthwise groups=C_in convolutions, avg_pool_3x3 with
# count_include_pad=False, max_pool_3x3, skip_connect as Identity or
# FactorizedReduce's two offset stride-2 1x1 convs, 'none' as the Zero op's
# x.mul(0.) / strided x[:, :, ::stride, ::stride].mul(0.)), MixedOp's
# sum(w * op(x) ...) with pooling followed by an affine=False BatchNorm2d,
# Cell's preprocess / offset loop / torch.cat(states[-multiplier:]), the
# Network's F.softmax(self.alphas_*, dim=-1) per cell, _initialize_alphas
# with Variable(1e-3 * torch.randn(k, num_ops), requires_grad=True),
# arch_parameters(), new() copying the alphas by x.data.copy_(y.data),
# genotype()'s numpy parse (sorted edges by their best non-'none' weight),
# and the Architect's second-order unrolled step: _compute_unrolled_model
# (theta = _concat(params).data, the momentum from
# network_optimizer.state[v]['momentum_buffer'] behind a bare except on the
# first step, torch.autograd.grad(loss, self.model.parameters()), weight decay
# added to dtheta), _construct_model_from_theta (np.prod sizes, theta slices
# .view(v.size()), state_dict().update + load_state_dict), the finite-
# difference _hessian_vector_product (R = r / _concat(vector).norm(),
# p.data.add_ / sub_), g.data.sub_(ig.data, alpha=eta) and v.grad =
# Variable(g.data) / v.grad.data.copy_(g.data); utils.AvgrageMeter and
# utils.accuracy with topk (whose correct[:k].view(-1) PyTorch now refuses on
# the transposed prediction: the repo's later reshape(-1) is used after
# showing the refusal), nn.utils.clip_grad_norm_, CosineAnnealingLR with
# eta_min, and infer() under model.eval().
# Changes for a CPU test: no .cuda(); today's add_(v, alpha=R) /
# sub(x, alpha=eta) spellings of the deprecated positional-scalar calls;
# new() passes steps / multiplier (the repo's relies on its defaults, which
# equal its training configuration); a tiny network (C=4, layers=3 so a
# normal cell exists beside the two reduction cells, steps=1, multiplier=1 to
# keep the unrolled step's five forward passes fast, stem_multiplier=3) on 8x8 images drawn from numpy, weights and alphas from
# numpy, sequential batches, two search steps (the first without momentum
# buffers); then one weight step of a cell's ReLUConvBN preprocess and a
# FactorizedReduce under torch.compile against the same step eagerly.
import copy
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

# genotypes.py
Genotype = namedtuple('Genotype', 'normal normal_concat reduce reduce_concat')

PRIMITIVES = [
    'none',
    'max_pool_3x3',
    'avg_pool_3x3',
    'skip_connect',
    'sep_conv_3x3',
    'sep_conv_5x5',
    'dil_conv_3x3',
    'dil_conv_5x5'
]

# operations.py
OPS = {
    'none': lambda C, stride, affine: Zero(stride),
    'avg_pool_3x3': lambda C, stride, affine: nn.AvgPool2d(3, stride=stride, padding=1, count_include_pad=False),
    'max_pool_3x3': lambda C, stride, affine: nn.MaxPool2d(3, stride=stride, padding=1),
    'skip_connect': lambda C, stride, affine: Identity() if stride == 1 else FactorizedReduce(C, C, affine=affine),
    'sep_conv_3x3': lambda C, stride, affine: SepConv(C, C, 3, stride, 1, affine=affine),
    'sep_conv_5x5': lambda C, stride, affine: SepConv(C, C, 5, stride, 2, affine=affine),
    'dil_conv_3x3': lambda C, stride, affine: DilConv(C, C, 3, stride, 2, 2, affine=affine),
    'dil_conv_5x5': lambda C, stride, affine: DilConv(C, C, 5, stride, 4, 2, affine=affine),
}


class ReLUConvBN(nn.Module):

    def __init__(self, C_in, C_out, kernel_size, stride, padding, affine=True):
        super(ReLUConvBN, self).__init__()
        self.op = nn.Sequential(
            nn.ReLU(inplace=False),
            nn.Conv2d(C_in, C_out, kernel_size, stride=stride, padding=padding, bias=False),
            nn.BatchNorm2d(C_out, affine=affine)
        )

    def forward(self, x):
        return self.op(x)


class DilConv(nn.Module):

    def __init__(self, C_in, C_out, kernel_size, stride, padding, dilation, affine=True):
        super(DilConv, self).__init__()
        self.op = nn.Sequential(
            nn.ReLU(inplace=False),
            nn.Conv2d(C_in, C_in, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation,
                      groups=C_in, bias=False),
            nn.Conv2d(C_in, C_out, kernel_size=1, padding=0, bias=False),
            nn.BatchNorm2d(C_out, affine=affine),
        )

    def forward(self, x):
        return self.op(x)


class SepConv(nn.Module):

    def __init__(self, C_in, C_out, kernel_size, stride, padding, affine=True):
        super(SepConv, self).__init__()
        self.op = nn.Sequential(
            nn.ReLU(inplace=False),
            nn.Conv2d(C_in, C_in, kernel_size=kernel_size, stride=stride, padding=padding, groups=C_in, bias=False),
            nn.Conv2d(C_in, C_in, kernel_size=1, padding=0, bias=False),
            nn.BatchNorm2d(C_in, affine=affine),
            nn.ReLU(inplace=False),
            nn.Conv2d(C_in, C_in, kernel_size=kernel_size, stride=1, padding=padding, groups=C_in, bias=False),
            nn.Conv2d(C_in, C_out, kernel_size=1, padding=0, bias=False),
            nn.BatchNorm2d(C_out, affine=affine),
        )

    def forward(self, x):
        return self.op(x)


class Identity(nn.Module):

    def __init__(self):
        super(Identity, self).__init__()

    def forward(self, x):
        return x


class Zero(nn.Module):

    def __init__(self, stride):
        super(Zero, self).__init__()
        self.stride = stride

    def forward(self, x):
        if self.stride == 1:
            return x.mul(0.)
        return x[:, :, ::self.stride, ::self.stride].mul(0.)


class FactorizedReduce(nn.Module):

    def __init__(self, C_in, C_out, affine=True):
        super(FactorizedReduce, self).__init__()
        assert C_out % 2 == 0
        self.relu = nn.ReLU(inplace=False)
        self.conv_1 = nn.Conv2d(C_in, C_out // 2, 1, stride=2, padding=0, bias=False)
        self.conv_2 = nn.Conv2d(C_in, C_out // 2, 1, stride=2, padding=0, bias=False)
        self.bn = nn.BatchNorm2d(C_out, affine=affine)

    def forward(self, x):
        x = self.relu(x)
        out = torch.cat([self.conv_1(x), self.conv_2(x[:, :, 1:, 1:])], dim=1)
        out = self.bn(out)
        return out


# model_search.py
class MixedOp(nn.Module):

    def __init__(self, C, stride):
        super(MixedOp, self).__init__()
        self._ops = nn.ModuleList()
        for primitive in PRIMITIVES:
            op = OPS[primitive](C, stride, False)
            if 'pool' in primitive:
                op = nn.Sequential(op, nn.BatchNorm2d(C, affine=False))
            self._ops.append(op)

    def forward(self, x, weights):
        return sum(w * op(x) for w, op in zip(weights, self._ops))


class Cell(nn.Module):

    def __init__(self, steps, multiplier, C_prev_prev, C_prev, C, reduction, reduction_prev):
        super(Cell, self).__init__()
        self.reduction = reduction

        if reduction_prev:
            self.preprocess0 = FactorizedReduce(C_prev_prev, C, affine=False)
        else:
            self.preprocess0 = ReLUConvBN(C_prev_prev, C, 1, 1, 0, affine=False)
        self.preprocess1 = ReLUConvBN(C_prev, C, 1, 1, 0, affine=False)
        self._steps = steps
        self._multiplier = multiplier

        self._ops = nn.ModuleList()
        self._bns = nn.ModuleList()
        for i in range(self._steps):
            for j in range(2 + i):
                stride = 2 if reduction and j < 2 else 1
                op = MixedOp(C, stride)
                self._ops.append(op)

    def forward(self, s0, s1, weights):
        s0 = self.preprocess0(s0)
        s1 = self.preprocess1(s1)

        states = [s0, s1]
        offset = 0
        for i in range(self._steps):
            s = sum(self._ops[offset + j](h, weights[offset + j]) for j, h in enumerate(states))
            offset += len(states)
            states.append(s)

        return torch.cat(states[-self._multiplier:], dim=1)


class Network(nn.Module):

    def __init__(self, C, num_classes, layers, criterion, steps=4, multiplier=4, stem_multiplier=3):
        super(Network, self).__init__()
        self._C = C
        self._num_classes = num_classes
        self._layers = layers
        self._criterion = criterion
        self._steps = steps
        self._multiplier = multiplier

        C_curr = stem_multiplier * C
        self.stem = nn.Sequential(
            nn.Conv2d(3, C_curr, 3, padding=1, bias=False),
            nn.BatchNorm2d(C_curr)
        )

        C_prev_prev, C_prev, C_curr = C_curr, C_curr, C
        self.cells = nn.ModuleList()
        reduction_prev = False
        for i in range(layers):
            if i in [layers // 3, 2 * layers // 3]:
                C_curr *= 2
                reduction = True
            else:
                reduction = False
            cell = Cell(steps, multiplier, C_prev_prev, C_prev, C_curr, reduction, reduction_prev)
            reduction_prev = reduction
            self.cells += [cell]
            C_prev_prev, C_prev = C_prev, multiplier * C_curr

        self.global_pooling = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(C_prev, num_classes)

        self._initialize_alphas()

    def new(self):
        model_new = Network(self._C, self._num_classes, self._layers, self._criterion,
                            steps=self._steps, multiplier=self._multiplier)
        for x, y in zip(model_new.arch_parameters(), self.arch_parameters()):
            x.data.copy_(y.data)
        return model_new

    def forward(self, input):
        s0 = s1 = self.stem(input)
        for i, cell in enumerate(self.cells):
            if cell.reduction:
                weights = F.softmax(self.alphas_reduce, dim=-1)
            else:
                weights = F.softmax(self.alphas_normal, dim=-1)
            s0, s1 = s1, cell(s0, s1, weights)
        out = self.global_pooling(s1)
        logits = self.classifier(out.view(out.size(0), -1))
        return logits

    def _loss(self, input, target):
        logits = self(input)
        return self._criterion(logits, target)

    def _initialize_alphas(self):
        k = sum(1 for i in range(self._steps) for n in range(2 + i))
        num_ops = len(PRIMITIVES)

        self.alphas_normal = Variable(1e-3 * torch.randn(k, num_ops), requires_grad=True)
        self.alphas_reduce = Variable(1e-3 * torch.randn(k, num_ops), requires_grad=True)
        self._arch_parameters = [
            self.alphas_normal,
            self.alphas_reduce,
        ]

    def arch_parameters(self):
        return self._arch_parameters

    def genotype(self):

        def _parse(weights):
            gene = []
            n = 2
            start = 0
            for i in range(self._steps):
                end = start + n
                W = weights[start:end].copy()
                edges = sorted(range(i + 2), key=lambda x: -max(
                    W[x][k] for k in range(len(W[x])) if k != PRIMITIVES.index('none')))[:2]
                for j in edges:
                    k_best = None
                    for k in range(len(W[j])):
                        if k != PRIMITIVES.index('none'):
                            if k_best is None or W[j][k] > W[j][k_best]:
                                k_best = k
                    gene.append((PRIMITIVES[k_best], j))
                start = end
                n += 1
            return gene

        gene_normal = _parse(F.softmax(self.alphas_normal, dim=-1).data.cpu().numpy())
        gene_reduce = _parse(F.softmax(self.alphas_reduce, dim=-1).data.cpu().numpy())

        concat = range(2 + self._steps - self._multiplier, self._steps + 2)
        genotype = Genotype(
            normal=gene_normal, normal_concat=concat,
            reduce=gene_reduce, reduce_concat=concat
        )
        return genotype


# architect.py
def _concat(xs):
    return torch.cat([x.view(-1) for x in xs])


class Architect(object):

    def __init__(self, model, args):
        self.network_momentum = args.momentum
        self.network_weight_decay = args.weight_decay
        self.model = model
        self.optimizer = torch.optim.Adam(self.model.arch_parameters(),
                                          lr=args.arch_learning_rate, betas=(0.5, 0.999),
                                          weight_decay=args.arch_weight_decay)

    def _compute_unrolled_model(self, input, target, eta, network_optimizer):
        loss = self.model._loss(input, target)
        theta = _concat(self.model.parameters()).data
        try:
            moment = _concat(network_optimizer.state[v]['momentum_buffer']
                             for v in self.model.parameters()).mul_(self.network_momentum)
        except:  # noqa: E722 - the repo's: no momentum buffers before the first step
            moment = torch.zeros_like(theta)
        dtheta = _concat(torch.autograd.grad(loss, self.model.parameters())).data + self.network_weight_decay * theta
        unrolled_model = self._construct_model_from_theta(theta.sub(moment + dtheta, alpha=eta))
        return unrolled_model

    def step(self, input_train, target_train, input_valid, target_valid, eta, network_optimizer, unrolled):
        self.optimizer.zero_grad()
        if unrolled:
            self._backward_step_unrolled(input_train, target_train, input_valid, target_valid, eta,
                                         network_optimizer)
        else:
            self._backward_step(input_valid, target_valid)
        self.optimizer.step()

    def _backward_step(self, input_valid, target_valid):
        loss = self.model._loss(input_valid, target_valid)
        loss.backward()

    def _backward_step_unrolled(self, input_train, target_train, input_valid, target_valid, eta, network_optimizer):
        unrolled_model = self._compute_unrolled_model(input_train, target_train, eta, network_optimizer)
        unrolled_loss = unrolled_model._loss(input_valid, target_valid)

        unrolled_loss.backward()
        dalpha = [v.grad for v in unrolled_model.arch_parameters()]
        vector = [v.grad.data for v in unrolled_model.parameters()]
        implicit_grads = self._hessian_vector_product(vector, input_train, target_train)

        for g, ig in zip(dalpha, implicit_grads):
            g.data.sub_(ig.data, alpha=eta)

        for v, g in zip(self.model.arch_parameters(), dalpha):
            if v.grad is None:
                v.grad = Variable(g.data)
            else:
                v.grad.data.copy_(g.data)

    def _construct_model_from_theta(self, theta):
        model_new = self.model.new()
        model_dict = self.model.state_dict()

        params, offset = {}, 0
        for k, v in self.model.named_parameters():
            v_length = np.prod(v.size())
            params[k] = theta[offset: offset + v_length].view(v.size())
            offset += v_length

        assert offset == len(theta)
        model_dict.update(params)
        model_new.load_state_dict(model_dict)
        return model_new

    def _hessian_vector_product(self, vector, input, target, r=1e-2):
        R = r / _concat(vector).norm()
        for p, v in zip(self.model.parameters(), vector):
            p.data.add_(v, alpha=R)
        loss = self.model._loss(input, target)
        grads_p = torch.autograd.grad(loss, self.model.arch_parameters())

        for p, v in zip(self.model.parameters(), vector):
            p.data.sub_(v, alpha=2 * R)
        loss = self.model._loss(input, target)
        grads_n = torch.autograd.grad(loss, self.model.arch_parameters())

        for p, v in zip(self.model.parameters(), vector):
            p.data.add_(v, alpha=R)

        return [(x - y).div_(2 * R) for x, y in zip(grads_p, grads_n)]


# utils.py
class AvgrageMeter(object):

    def __init__(self):
        self.reset()

    def reset(self):
        self.avg = 0
        self.sum = 0
        self.cnt = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.cnt += n
        self.avg = self.sum / self.cnt


def accuracy_view(output, target, topk=(1,)):
    """utils.accuracy as first published: correct[:k].view(-1)."""
    maxk = max(topk)
    batch_size = target.size(0)

    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))

    res = []
    for k in topk:
        correct_k = correct[:k].view(-1).float().sum(0)
        res.append(correct_k.mul_(100.0 / batch_size))
    return res


def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    batch_size = target.size(0)

    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))

    res = []
    for k in topk:
        correct_k = correct[:k].reshape(-1).float().sum(0)
        res.append(correct_k.mul_(100.0 / batch_size))
    return res


def count_parameters_in_MB(model):
    # (numpy 2 refuses the repo's np.sum(generator): a list)
    return np.sum([np.prod(v.size()) for name, v in model.named_parameters() if "auxiliary" not in name]) / 1e6


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(params, seed, std=0.3):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for p in params:
            p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


class Args:
    learning_rate = 0.025
    learning_rate_min = 0.001
    momentum = 0.9
    weight_decay = 3e-4
    arch_learning_rate = 3e-4
    arch_weight_decay = 1e-3
    grad_clip = 5
    epochs = 1
    unrolled = True


args = Args()

# the ops on their own: pooling without the padded zeros, strided Zero, FactorizedReduce
x = torch.from_numpy(np.random.default_rng(0).normal(0, 1, (2, 4, 8, 8)).astype(np.float32))
print("avg_pool corner", fmt(OPS['avg_pool_3x3'](4, 1, False)(x)[0, 0, 0], 3),
      "with pad", fmt(nn.AvgPool2d(3, 1, 1)(x)[0, 0, 0], 3))
print("zero", tuple(OPS['none'](4, 2, False)(x).shape), OPS['none'](4, 1, False)(-x).sum().item())
fr = OPS['skip_connect'](4, 2, False)
print("reduce ops", [tuple(OPS[p](4, 2, False)(x).shape) for p in PRIMITIVES])

criterion = nn.CrossEntropyLoss()
torch.manual_seed(0)
model = Network(4, 10, 3, criterion, steps=1, multiplier=1, stem_multiplier=3)
load_numpy(model.parameters(), 1)
load_numpy(model.arch_parameters(), 2, std=1e-3)
print("cells", [c.reduction for c in model.cells], "alphas", tuple(model.alphas_normal.shape),
      model.alphas_normal.is_leaf, model.alphas_normal.requires_grad)
print("param size = %fMB" % count_parameters_in_MB(model), len(list(model.parameters())))
print("buffers", len(list(model.buffers())), sum(1 for m in model.modules() if isinstance(m, nn.BatchNorm2d)))

optimizer = torch.optim.SGD(model.parameters(), args.learning_rate, momentum=args.momentum,
                            weight_decay=args.weight_decay)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, float(args.epochs), eta_min=args.learning_rate_min)
architect = Architect(model, args)

rng = np.random.default_rng(3)
train_data = [(torch.from_numpy(rng.normal(0, 1, (4, 3, 8, 8)).astype(np.float32)),
               torch.from_numpy(rng.integers(0, 10, 4))) for _ in range(2)]
valid_data = [(torch.from_numpy(rng.normal(0, 1, (4, 3, 8, 8)).astype(np.float32)),
               torch.from_numpy(rng.integers(0, 10, 4))) for _ in range(2)]

logits = model(train_data[0][0])
try:
    accuracy_view(logits, train_data[0][1], topk=(1, 5))
except RuntimeError as e:
    print("accuracy view:", str(e).split(".")[0])
print("accuracy top1", accuracy_view(logits, train_data[0][1])[0].item(),
      [a.item() for a in accuracy(logits, train_data[0][1], topk=(1, 5))])


def train(train_queue, valid_queue, model, architect, criterion, optimizer, lr):
    objs = AvgrageMeter()
    top1 = AvgrageMeter()
    top5 = AvgrageMeter()

    for step, (input, target) in enumerate(train_queue):
        model.train()
        n = input.size(0)
        input = Variable(input, requires_grad=False)
        target = Variable(target, requires_grad=False)

        input_search, target_search = valid_queue[step]
        architect.step(input, target, input_search, target_search, lr, optimizer, unrolled=args.unrolled)
        print("  arch grad", fmt(model.alphas_normal.grad[0], 3), fmt(model.alphas_reduce.grad[1], 3))

        optimizer.zero_grad()
        logits = model(input)
        loss = criterion(logits, target)

        loss.backward()
        total = nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()

        prec1, prec5 = accuracy(logits, target, topk=(1, 5))
        objs.update(loss.item(), n)
        top1.update(prec1.item(), n)
        top5.update(prec5.item(), n)
        print('  train %03d %e %f %f' % (step, objs.avg, top1.avg, top5.avg), f"norm {total.item():.4f}")

    return top1.avg, objs.avg


def infer(valid_queue, model, criterion):
    objs = AvgrageMeter()
    top1 = AvgrageMeter()
    model.eval()
    with torch.no_grad():
        for step, (input, target) in enumerate(valid_queue):
            logits = model(input)
            loss = criterion(logits, target)
            prec1, prec5 = accuracy(logits, target, topk=(1, 5))
            objs.update(loss.item(), input.size(0))
            top1.update(prec1.item(), input.size(0))
    return top1.avg, objs.avg


for epoch in range(args.epochs):
    lr = scheduler.get_last_lr()[0]
    print('epoch %d lr %e' % (epoch, lr))
    genotype = model.genotype()
    print('genotype = %s' % (genotype,))
    print(F.softmax(model.alphas_normal, dim=-1)[:2])
    train_acc, train_obj = train(train_data, valid_data, model, architect, criterion, optimizer, lr)
    valid_acc, valid_obj = infer(valid_data[:1], model, criterion)
    print('train_acc %f valid_acc %f valid_obj %f' % (train_acc, valid_acc, valid_obj))
    scheduler.step()
    print('next lr %e' % scheduler.get_last_lr()[0])
print("momentum", fmt(optimizer.state[model.stem[0].weight]['momentum_buffer'], 3),
      "alphas", fmt(model.alphas_reduce, 4))
print("running", fmt(model.cells[0].preprocess1.op[2].running_mean, 3), model.cells[0].preprocess1.op[2].num_batches_tracked.item())

# one weight step of the normal cell's ReLUConvBN preprocess and the last
# cell's FactorizedReduce preprocess under torch.compile
mop = nn.Sequential(model.cells[0].preprocess1, model.cells[2].preprocess0)
mop.train()
mop_opt = torch.optim.SGD(mop.parameters(), 0.2, momentum=0.9)
xin = torch.from_numpy(np.random.default_rng(4).normal(0, 1, (2, 12, 8, 8)).astype(np.float32))
w_fixed = F.softmax(model.alphas_normal, dim=-1)[0].detach()


def mixed_step(x, w):
    mop_opt.zero_grad()
    loss = (mop(x) - w[4]).pow(2).mean()
    loss.backward()
    mop_opt.step()
    return loss


state, opt_state = copy.deepcopy(mop.state_dict()), copy.deepcopy(mop_opt.state_dict())
eager = [mixed_step(xin, w_fixed).item() for _ in range(2)]
after = {k: v.clone() for k, v in mop.state_dict().items()}
mop.load_state_dict(state)
mop_opt.load_state_dict(opt_state)
cstep = torch.compile(mixed_step)
compiled = [cstep(xin, w_fixed).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(mop.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
