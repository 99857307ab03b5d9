# FixMatch semi-supervised training (kekmodel/FixMatch-pytorch, train.py,
# models/ema.py), as written: get_cosine_schedule_with_warmup (LambdaLR),
# interleave / de_interleave (reshape, transpose, reshape), the SGD groups
# without weight decay for bias and bn parameters (nesterov), ModelEMA
# (deepcopy, requires_grad_(False), the ema update over named parameters
# and buffers), the train step: torch.cat of the labeled, weak and strong
# batches, logits_x / logits_u_w / logits_u_s by chunk(2), F.cross_entropy
# on the labeled batch, pseudo labels torch.softmax(logits_u_w.detach()
# / T, dim=-1), torch.max, max_probs.ge(threshold).float() as the mask,
# the masked unlabeled loss, and the EMA model's evaluation accuracy.
# The network after its WideResNet's idioms (BatchNorm2d(momentum=0.001),
# LeakyReLU(0.1), kaiming_normal_ fan_out leaky_relu init). Written for
# this test: 6x6 images, 4 classes, mu 2, 6 steps of 4 labeled images;
# one compiled training step against eager.
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import LambdaLR


def get_cosine_schedule_with_warmup(optimizer,
                                    num_warmup_steps,
                                    num_training_steps,
                                    num_cycles=7. / 16.,
                                    last_epoch=-1):
    def _lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        no_progress = float(current_step - num_warmup_steps) / \
            float(max(1, num_training_steps - num_warmup_steps))
        return max(0., math.cos(math.pi * num_cycles * no_progress))

    return LambdaLR(optimizer, _lr_lambda, last_epoch)


def interleave(x, size):
    s = list(x.shape)
    return x.reshape([-1, size] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


def de_interleave(x, size):
    s = list(x.shape)
    return x.reshape([size, -1] + s[1:]).transpose(0, 1).reshape([-1] + s[1:])


class ModelEMA(object):
    def __init__(self, args, model, decay):
        self.ema = copy.deepcopy(model)
        self.ema.to(args.device)
        self.ema.eval()
        self.decay = decay
        self.ema_has_module = hasattr(self.ema, 'module')
        # Fix EMA. https://github.com/valencebond/FixMatch_pytorch thank you!
        self.param_keys = [k for k, _ in self.ema.named_parameters()]
        self.buffer_keys = [k for k, _ in self.ema.named_buffers()]
        for p in self.ema.parameters():
            p.requires_grad_(False)

    def update(self, model):
        needs_module = hasattr(model, 'module') and not self.ema_has_module
        with torch.no_grad():
            msd = model.state_dict()
            esd = self.ema.state_dict()
            for k in self.param_keys:
                if needs_module:
                    j = 'module.' + k
                else:
                    j = k
                model_v = msd[j].detach()
                ema_v = esd[k]
                esd[k].copy_(ema_v * self.decay + (1. - self.decay) * model_v)

            for k in self.buffer_keys:
                if needs_module:
                    j = 'module.' + k
                else:
                    j = k
                esd[k].copy_(msd[j])


class BasicBlock(nn.Module):
    def __init__(self, in_planes, out_planes, stride, drop_rate=0.0, activate_before_residual=False):
        super(BasicBlock, self).__init__()
        self.bn1 = nn.BatchNorm2d(in_planes, momentum=0.001)
        self.relu1 = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        self.conv1 = nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride,
                               padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_planes, momentum=0.001)
        self.relu2 = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        self.conv2 = nn.Conv2d(out_planes, out_planes, kernel_size=3, stride=1,
                               padding=1, bias=False)
        self.drop_rate = drop_rate
        self.equalInOut = (in_planes == out_planes)
        self.convShortcut = (not self.equalInOut) and nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride,
                                                                padding=0, bias=False) or None
        self.activate_before_residual = activate_before_residual

    def forward(self, x):
        if not self.equalInOut and self.activate_before_residual == True:
            x = self.relu1(self.bn1(x))
        else:
            out = self.relu1(self.bn1(x))
        out = self.relu2(self.bn2(self.conv1(out if self.equalInOut else x)))
        if self.drop_rate > 0:
            out = F.dropout(out, p=self.drop_rate, training=self.training)
        out = self.conv2(out)
        return torch.add(x if self.equalInOut else self.convShortcut(x), out)


class WideResNet(nn.Module):
    def __init__(self, num_classes, channels=(8, 8, 16)):
        super(WideResNet, self).__init__()
        self.conv1 = nn.Conv2d(3, channels[0], kernel_size=3, stride=1, padding=1, bias=False)
        self.block1 = BasicBlock(channels[0], channels[1], 1, activate_before_residual=True)
        self.block2 = BasicBlock(channels[1], channels[2], 2)
        self.bn1 = nn.BatchNorm2d(channels[2], momentum=0.001)
        self.relu = nn.LeakyReLU(negative_slope=0.1, inplace=True)
        self.fc = nn.Linear(channels[2], num_classes)
        self.channels = channels[2]

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight,
                                        mode='fan_out',
                                        nonlinearity='leaky_relu')
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.data.fill_(1.0)
                m.bias.data.zero_()
            elif isinstance(m, nn.Linear):
                nn.init.xavier_normal_(m.weight)
                m.bias.data.zero_()

    def forward(self, x):
        out = self.conv1(x)
        out = self.block2(self.block1(out))
        out = self.relu(self.bn1(out))
        out = F.adaptive_avg_pool2d(out, 1)
        out = out.view(-1, self.channels)
        return self.fc(out)


class Args:
    device = torch.device('cpu')
    mu = 2
    T = 1.0
    threshold = 0.4
    lambda_u = 1.0
    lr = 0.1
    wdecay = 5e-4
    nesterov = True
    warmup = 2
    total_steps = 8
    ema_decay = 0.9


args = Args()
torch.manual_seed(0)
model = WideResNet(num_classes=4)
no_decay = ['bias', 'bn']
grouped_parameters = [
    {'params': [p for n, p in model.named_parameters() if not any(
        nd in n for nd in no_decay)], 'weight_decay': args.wdecay},
    {'params': [p for n, p in model.named_parameters() if any(
        nd in n for nd in no_decay)], 'weight_decay': 0.0}
]
optimizer = optim.SGD(grouped_parameters, lr=args.lr,
                      momentum=0.9, nesterov=args.nesterov)
scheduler = get_cosine_schedule_with_warmup(optimizer, args.warmup, args.total_steps)
ema_model = ModelEMA(args, model, args.ema_decay)
print("groups", [len(g['params']) for g in optimizer.param_groups])

batch_size = 4
protos = torch.randn(4, 3, 6, 6)


def sample(n):
    targets = torch.randint(0, 4, (n,))
    return protos[targets] + 0.5 * torch.randn(n, 3, 6, 6), targets


def train_step(inputs_x, targets_x, inputs_u_w, inputs_u_s):
    batch_size = inputs_x.shape[0]
    inputs = interleave(
        torch.cat((inputs_x, inputs_u_w, inputs_u_s)), 2 * args.mu + 1).to(args.device)
    targets_x = targets_x.to(args.device)
    logits = model(inputs)
    logits = de_interleave(logits, 2 * args.mu + 1)
    logits_x = logits[:batch_size]
    logits_u_w, logits_u_s = logits[batch_size:].chunk(2)
    del logits

    Lx = F.cross_entropy(logits_x, targets_x, reduction='mean')

    pseudo_label = torch.softmax(logits_u_w.detach() / args.T, dim=-1)
    max_probs, targets_u = torch.max(pseudo_label, dim=-1)
    mask = max_probs.ge(args.threshold).float()

    Lu = (F.cross_entropy(logits_u_s, targets_u,
                          reduction='none') * mask).mean()

    loss = Lx + args.lambda_u * Lu
    loss.backward()
    optimizer.step()
    scheduler.step()
    model.zero_grad()
    return loss, Lx, Lu, mask.mean()


model.train()
for step in range(6):
    inputs_x, targets_x = sample(batch_size)
    inputs_u, _ = sample(batch_size * args.mu)
    inputs_u_w = inputs_u + 0.05 * torch.randn_like(inputs_u)   # weak: a little noise
    inputs_u_s = inputs_u.flip(3) * (1 + 0.3 * torch.randn(inputs_u.size(0), 1, 1, 1))  # strong
    loss, Lx, Lu, mask = train_step(inputs_x, targets_x, inputs_u_w, inputs_u_s)
    ema_model.update(model)
    print("Step {}. LR: {:.4f}. Loss: {:.4f}. Loss_x: {:.4f}. Loss_u: {:.4f}. Mask: {:.2f}.".format(
        step + 1, scheduler.get_last_lr()[0], loss.item(), Lx.item(), Lu.item(), mask.item()))

test_x, test_t = sample(16)
with torch.no_grad():
    acc = (ema_model.ema(test_x).argmax(1) == test_t).float().mean()
print("ema top-1 {:.2f}".format(acc.item() * 100),
      "ema bn var", round(ema_model.ema.bn1.running_var.mean().item(), 5))

state = (copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict()),
         copy.deepcopy(scheduler.state_dict()))
args_c = (inputs_x, targets_x, inputs_u_w, inputs_u_s)
out_c = torch.compile(train_step)(*args_c)
after_c = copy.deepcopy(model.state_dict())
model.load_state_dict(state[0])
optimizer.load_state_dict(state[1])
scheduler.load_state_dict(state[2])
out_e = train_step(*args_c)
print("compiled loss {:.5f} mask {:.2f}".format(out_c[0].item(), out_c[3].item()))
print("compiled == eager", all(torch.allclose(a, b, atol=1e-5) for a, b in zip(out_c, out_e)),
      all(torch.allclose(after_c[k].float(), v.float(), atol=1e-5) for k, v in model.state_dict().items()),
      scheduler.get_last_lr()[0] == optimizer.param_groups[0]['lr'])
