# The essentials of huggingface/pytorch-image-models' train.py recipe:
# timm/data/mixup.py (one_hot, mixup_target, rand_bbox,
# cutmix_bbox_and_lam, Mixup with np.random.beta and the in-place batch
# mix / numpy-index box paste), timm/loss/cross_entropy.py
# (LabelSmoothingCrossEntropy, SoftTargetCrossEntropy), timm/utils/
# model_ema.py (ModelEmaV2: deepcopy, ema_v.copy_(decay * e + (1 - decay) *
# m) over state_dict values under no_grad), timm/optim's
# param_groups_weight_decay (no weight decay on biases and norms) with
# AdamW, timm/utils/metrics.py (AverageMeter, accuracy), gradient
# accumulation and clip_grad_norm_; facebookresearch/mixup-cifar10's
# mixup_data / mixup_criterion and clovaai/CutMix-PyTorch's cutmix with
# torch.randperm; the schedules of torchvision's references/classification
# (SequentialLR of LinearLR warmup and CosineAnnealingLR), transformers'
# get_cosine_schedule_with_warmup (LambdaLR) and ReduceLROnPlateau on the
# validation loss; nn.CrossEntropyLoss(label_smoothing=...) and with soft
# targets.  Changes for a CPU test: a tiny CNN, 4 steps per epoch on fixed
# batches, torch seeded with manual_seed(0), and torch.randperm's
# permutation printed and then replaced by numpy's,
# so tracec and torch compute the same numbers.  Then the training step
# (soft-target loss, accumulation, clipping, AdamW) and the EMA update under
# torch.compile against the same steps run eagerly.
import copy
import math
from copy import deepcopy

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import (CosineAnnealingLR, LambdaLR, LinearLR, ReduceLROnPlateau,
                                      SequentialLR)

np.random.seed(0)


# ---- timm/data/mixup.py ----
def one_hot(x, num_classes, on_value=1., off_value=0.):
    x = x.long().view(-1, 1)
    return torch.full((x.size()[0], num_classes), off_value, device=x.device).scatter_(1, x, on_value)


def mixup_target(target, num_classes, lam=1., smoothing=0.0):
    off_value = smoothing / num_classes
    on_value = 1. - smoothing + off_value
    y1 = one_hot(target, num_classes, on_value=on_value, off_value=off_value)
    y2 = one_hot(target.flip(0), num_classes, on_value=on_value, off_value=off_value)
    return y1 * lam + y2 * (1. - lam)


def rand_bbox(img_shape, lam, margin=0., count=None):
    ratio = np.sqrt(1 - lam)
    img_h, img_w = img_shape[-2:]
    cut_h, cut_w = int(img_h * ratio), int(img_w * ratio)
    margin_y, margin_x = int(margin * cut_h), int(margin * cut_w)
    cy = np.random.randint(0 + margin_y, img_h - margin_y, size=count)
    cx = np.random.randint(0 + margin_x, img_w - margin_x, size=count)
    yl = np.clip(cy - cut_h // 2, 0, img_h)
    yh = np.clip(cy + cut_h // 2, 0, img_h)
    xl = np.clip(cx - cut_w // 2, 0, img_w)
    xh = np.clip(cx + cut_w // 2, 0, img_w)
    return yl, yh, xl, xh


def cutmix_bbox_and_lam(img_shape, lam, ratio_minmax=None, correct_lam=True, count=None):
    assert ratio_minmax is None
    yl, yu, xl, xu = rand_bbox(img_shape, lam, count=count)
    if correct_lam or ratio_minmax is not None:
        bbox_area = (yu - yl) * (xu - xl)
        lam = 1. - bbox_area / float(img_shape[-2] * img_shape[-1])
    return (yl, yu, xl, xu), lam


class Mixup:
    def __init__(self, mixup_alpha=1., cutmix_alpha=0., cutmix_minmax=None, prob=1.0, switch_prob=0.5,
                 mode='batch', correct_lam=True, label_smoothing=0.1, num_classes=1000):
        self.mixup_alpha = mixup_alpha
        self.cutmix_alpha = cutmix_alpha
        self.cutmix_minmax = cutmix_minmax
        if self.cutmix_minmax is not None:
            assert len(self.cutmix_minmax) == 2
            # force cutmix alpha == 1.0 when minmax active to keep logic simple & safe
            self.cutmix_alpha = 1.0
        self.mix_prob = prob
        self.switch_prob = switch_prob
        self.label_smoothing = label_smoothing
        self.num_classes = num_classes
        self.mode = mode
        self.correct_lam = correct_lam  # correct lambda based on clipped area for cutmix
        self.mixup_enabled = True  # set to false to disable mixing (intended tp be set by train loop)

    def _params_per_batch(self):
        lam = 1.
        use_cutmix = False
        if self.mixup_enabled and np.random.rand() < self.mix_prob:
            if self.mixup_alpha > 0. and self.cutmix_alpha > 0.:
                use_cutmix = np.random.rand() < self.switch_prob
                lam_mix = np.random.beta(self.cutmix_alpha, self.cutmix_alpha) if use_cutmix else \
                    np.random.beta(self.mixup_alpha, self.mixup_alpha)
            elif self.mixup_alpha > 0.:
                lam_mix = np.random.beta(self.mixup_alpha, self.mixup_alpha)
            elif self.cutmix_alpha > 0.:
                use_cutmix = True
                lam_mix = np.random.beta(self.cutmix_alpha, self.cutmix_alpha)
            else:
                assert False, "One of mixup_alpha > 0., cutmix_alpha > 0., cutmix_minmax not None should be true."
            lam = float(lam_mix)
        return lam, use_cutmix

    def _mix_batch(self, x):
        lam, use_cutmix = self._params_per_batch()
        if lam == 1.:
            return 1.
        if use_cutmix:
            (yl, yh, xl, xh), lam = cutmix_bbox_and_lam(
                x.shape, lam, ratio_minmax=self.cutmix_minmax, correct_lam=self.correct_lam)
            x[:, :, yl:yh, xl:xh] = x.flip(0)[:, :, yl:yh, xl:xh]
        else:
            x_flipped = x.flip(0).mul_(1. - lam)
            x.mul_(lam).add_(x_flipped)
        return lam

    def __call__(self, x, target):
        assert len(x) % 2 == 0, 'Batch size should be even when using this'
        lam = self._mix_batch(x)
        target = mixup_target(target, self.num_classes, lam, self.label_smoothing)
        return x, target


# ---- timm/loss/cross_entropy.py ----
class LabelSmoothingCrossEntropy(nn.Module):
    """ NLL loss with label smoothing.
    """
    def __init__(self, smoothing=0.1):
        super(LabelSmoothingCrossEntropy, self).__init__()
        assert smoothing < 1.0
        self.smoothing = smoothing
        self.confidence = 1. - smoothing

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logprobs = F.log_softmax(x, dim=-1)
        nll_loss = -logprobs.gather(dim=-1, index=target.unsqueeze(1))
        nll_loss = nll_loss.squeeze(1)
        smooth_loss = -logprobs.mean(dim=-1)
        loss = self.confidence * nll_loss + self.smoothing * smooth_loss
        return loss.mean()


class SoftTargetCrossEntropy(nn.Module):

    def __init__(self):
        super(SoftTargetCrossEntropy, self).__init__()

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1)
        return loss.mean()


# ---- timm/utils/model_ema.py ----
class ModelEmaV2(nn.Module):
    def __init__(self, model, decay=0.9999, device=None):
        super(ModelEmaV2, self).__init__()
        # make a copy of the model for accumulating moving average of weights
        self.module = deepcopy(model)
        self.module.eval()
        self.decay = decay
        self.device = device  # perform ema on different device from model if set
        if self.device is not None:
            self.module.to(device=device)

    def _update(self, model, update_fn):
        with torch.no_grad():
            for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
                if self.device is not None:
                    model_v = model_v.to(device=self.device)
                ema_v.copy_(update_fn(ema_v, model_v))

    def update(self, model):
        self._update(model, update_fn=lambda e, m: self.decay * e + (1. - self.decay) * m)

    def set(self, model):
        self._update(model, update_fn=lambda e, m: m)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


# ---- timm/optim/_param_groups.py ----
def param_groups_weight_decay(model: nn.Module, weight_decay=1e-5, no_weight_decay_list=()):
    no_weight_decay_list = set(no_weight_decay_list)
    decay = []
    no_decay = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue

        if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list:
            no_decay.append(param)
        else:
            decay.append(param)

    return [
        {'params': no_decay, 'weight_decay': 0.},
        {'params': decay, 'weight_decay': weight_decay}]


# ---- timm/utils/metrics.py ----
class AverageMeter:
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
    """Computes the accuracy over the k top predictions for the specified values of k"""
    maxk = min(max(topk), output.size()[1])
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    return [correct[:min(k, maxk)].reshape(-1).float().sum(0) * 100. / batch_size for k in topk]


# ---- facebookresearch/mixup-cifar10 and clovaai/CutMix-PyTorch ----
def mixup_data(x, y, alpha=1.0, use_cuda=True):
    '''Returns mixed inputs, pairs of targets, and lambda'''
    if alpha > 0:
        lam = np.random.beta(alpha, alpha)
    else:
        lam = 1

    batch_size = x.size()[0]
    index = torch.randperm(batch_size)
    print("randperm", index.tolist())
    print("randperm", index.dtype, sorted(index.tolist()) == list(range(batch_size)))
    index = torch.from_numpy(np.random.permutation(batch_size))

    mixed_x = lam * x + (1 - lam) * x[index, :]
    y_a, y_b = y, y[index]
    return mixed_x, y_a, y_b, lam


def mixup_criterion(criterion, pred, y_a, y_b, lam):
    return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)


def cutmix_rand_bbox(size, lam):
    W = size[2]
    H = size[3]
    cut_rat = np.sqrt(1. - lam)
    cut_w = np.int_(W * cut_rat)
    cut_h = np.int_(H * cut_rat)

    # uniform
    cx = np.random.randint(W)
    cy = np.random.randint(H)

    bbx1 = np.clip(cx - cut_w // 2, 0, W)
    bby1 = np.clip(cy - cut_h // 2, 0, H)
    bbx2 = np.clip(cx + cut_w // 2, 0, W)
    bby2 = np.clip(cy + cut_h // 2, 0, H)

    return bbx1, bby1, bbx2, bby2


# ---- the model ----
class Net(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv(x)))).flatten(1)
        return self.head(self.norm(x))


def numpy_init(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            v = (1.0 if ("bn" in name or "norm" in name) and name.endswith("weight") else 0.0) + \
                0.1 * r.standard_normal(tuple(p.shape)) if p.dim() == 1 else \
                r.standard_normal(tuple(p.shape)) * (1.0 / p[0].numel()) ** 0.5
            p.copy_(torch.from_numpy(np.asarray(v).astype(np.float32)))
    return model


num_classes = 5
rng = np.random.default_rng(1)
batches = [(torch.from_numpy(rng.standard_normal((4, 3, 8, 8)).astype(np.float32)),
            torch.from_numpy(rng.integers(0, num_classes, 4))) for _ in range(4)]

# the losses against each other
logits = torch.from_numpy(rng.standard_normal((4, num_classes)).astype(np.float32))
y = batches[0][1]
print("label smoothing", f"{nn.CrossEntropyLoss(label_smoothing=0.1)(logits, y).item():.6f}",
      f"{LabelSmoothingCrossEntropy(0.1)(logits, y).item():.6f}")
soft = mixup_target(y, num_classes, lam=0.7, smoothing=0.1)
print("soft targets", [f"{v:.3f}" for v in soft[0].tolist()], f"{soft.sum(1).mean().item():.4f}")
print("soft ce", f"{nn.CrossEntropyLoss()(logits, soft).item():.6f}", f"{SoftTargetCrossEntropy()(logits, soft).item():.6f}",
      f"{F.cross_entropy(logits, soft, label_smoothing=0.2).item():.6f}")
print("one_hot", one_hot(torch.tensor([2, 0]), 3, on_value=0.9, off_value=0.05).tolist())

# mixup / cutmix on a batch
mixup_fn = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, prob=1.0, switch_prob=0.5, label_smoothing=0.1,
                 num_classes=num_classes)
for i in range(4):
    x = batches[i][0].clone()
    before = x.clone()
    x, t = mixup_fn(x, batches[i][1])
    changed = (x != before).float().mean().item()
    print(f"mixup {i} changed {changed:.4f} sum {x.sum().item():.4f} target {t[0].tolist()}")

# mixup-cifar10 and CutMix-PyTorch
x, yb = batches[1]
criterion = nn.CrossEntropyLoss()
mixed_x, y_a, y_b, lam = mixup_data(x, yb, alpha=1.0, use_cuda=False)
print("mixup_data", f"{lam:.5f}", y_b.tolist(), f"{mixed_x.sum().item():.5f}",
      f"{mixup_criterion(criterion, logits, y_a, y_b, lam).item():.5f}")
lam = np.random.beta(1.0, 1.0)
rand_index = torch.from_numpy(np.random.permutation(4))
inp = x.clone()
bbx1, bby1, bbx2, bby2 = cutmix_rand_bbox(inp.size(), lam)
inp[:, :, bbx1:bbx2, bby1:bby2] = inp[rand_index, :, bbx1:bbx2, bby1:bby2]
lam = 1 - ((bbx2 - bbx1) * (bby2 - bby1) / (inp.size()[-1] * inp.size()[-2]))
print("cutmix", (bbx1, bby1, bbx2, bby2), f"{lam:.5f}", f"{inp.sum().item():.5f}", type(lam).__name__)

# the training loop
torch.manual_seed(0)
model = numpy_init(Net(num_classes), 0)
groups = param_groups_weight_decay(model, weight_decay=0.05)
print("groups", [len(g["params"]) for g in groups], [g["weight_decay"] for g in groups])
optimizer = torch.optim.AdamW(groups, lr=1e-2, betas=(0.9, 0.999))
print("defaults wd", optimizer.defaults["weight_decay"], [g["weight_decay"] for g in optimizer.param_groups])
model_ema = ModelEmaV2(model, decay=0.9)
train_loss_fn = SoftTargetCrossEntropy()
validate_loss_fn = nn.CrossEntropyLoss()
epochs, steps_per_epoch, accum_steps, warmup = 3, 4, 2, 2
updates_per_epoch = steps_per_epoch // accum_steps
main_sched = CosineAnnealingLR(optimizer, T_max=epochs * updates_per_epoch - warmup, eta_min=1e-4)
warm_sched = LinearLR(optimizer, start_factor=0.1, total_iters=warmup)
lr_scheduler = SequentialLR(optimizer, schedulers=[warm_sched, main_sched], milestones=[warmup])
plateau = ReduceLROnPlateau(optimizer, mode='min', factor=0.5, patience=0, threshold=0.5)
print("initial lr", [f"{g['lr']:.5f}" for g in optimizer.param_groups])
for epoch in range(epochs):
    model.train()
    losses_m = AverageMeter()
    optimizer.zero_grad()
    for batch_idx, (input, target) in enumerate(batches):
        input, target = mixup_fn(input.clone(), target)
        output = model(input)
        loss = train_loss_fn(output, target)
        (loss / accum_steps).backward()
        losses_m.update(loss.item(), input.size(0))
        if (batch_idx + 1) % accum_steps == 0:
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0, norm_type=2.0)
            optimizer.step()
            optimizer.zero_grad()
            model_ema.update(model)
            lr_scheduler.step()
            print(f"  update gn {gn.item():.5f} lr {lr_scheduler.get_last_lr()[0]:.6f}")
    model.eval()
    with torch.no_grad():
        val_x = torch.cat([b[0] for b in batches])
        val_y = torch.cat([b[1] for b in batches])
        for m, tag in ((model, "model"), (model_ema.module, "ema")):
            out = m(val_x)
            acc1, acc5 = accuracy(out, val_y, topk=(1, 5))
            val_loss = validate_loss_fn(out, val_y)
            print(f"epoch {epoch} {tag} loss {val_loss.item():.5f} acc1 {acc1.item():.2f} acc5 {acc5.item():.2f}")
    plateau.step(val_loss)
    print(f"epoch {epoch} train {losses_m.avg:.5f} plateau lr {plateau.get_last_lr()[0]:.6f} "
          f"bad {plateau.num_bad_epochs}")
print("ema num_batches_tracked", model_ema.module.bn.num_batches_tracked.item(),
      model_ema.module.bn.num_batches_tracked.dtype, model.bn.num_batches_tracked.item())
print("ema running_var", [f"{v:.5f}" for v in model_ema.module.bn.running_var[:4].tolist()])

# transformers' get_cosine_schedule_with_warmup
def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=0.5, last_epoch=-1):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress)))

    return LambdaLR(optimizer, lr_lambda, last_epoch)


opt2 = torch.optim.AdamW(param_groups_weight_decay(model, 0.01), lr=1e-3)
sched = get_cosine_schedule_with_warmup(opt2, num_warmup_steps=2, num_training_steps=6)
lrs = []
for _ in range(7):
    lrs.append(sched.get_last_lr()[0])
    opt2.step()
    sched.step()
print("cosine warmup", [f"{v:.6f}" for v in lrs])
print("sched state", sorted(k for k in sched.state_dict()), sched.state_dict()["last_epoch"])

# the training step and the EMA update under torch.compile
xb, tb = mixup_fn(batches[2][0].clone(), batches[2][1])


def train_step(input, target):
    for _ in range(accum_steps):
        output = model(input)
        loss = train_loss_fn(output, target)
        (loss / accum_steps).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    optimizer.zero_grad()
    return loss


def ema_step():
    model_ema.update(model)
    return model_ema.module.bn.num_batches_tracked


ema_state = copy.deepcopy(model_ema.module.state_dict())
e1 = ema_step()
ema_after = copy.deepcopy(model_ema.module.state_dict())
model_ema.module.load_state_dict(ema_state)
e2 = torch.compile(ema_step)()
print("compiled ema", e1.item(), e2.item(), all(torch.equal(model_ema.module.state_dict()[k], ema_after[k])
                                                 if ema_after[k].dtype == torch.int64 else
                                                 torch.allclose(model_ema.module.state_dict()[k], ema_after[k])
                                                 for k in ema_after))


# the training step under torch.compile against the same step run eagerly
def compile_check(model, optimizer, train_step, *batch, steps=2):
    model.train()
    state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
    eager = [train_step(*batch).item() for _ in range(steps)]
    after = copy.deepcopy(model.state_dict())
    model.load_state_dict(state)
    optimizer.load_state_dict(opt_state)
    cstep = torch.compile(train_step)
    compiled = [cstep(*batch).item() for _ in range(steps)]
    print("compiled losses", [f"{v:.5f}" for v in compiled])
    print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
          all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-3, atol=1e-5)
              for k in after))
compile_check(model, optimizer, train_step, xb, tb)
