"""timm's training utilities as its train.py wires them: a tiny timm model,
create_optimizer_v2 (several optimizers, layer-wise decay), create_scheduler_v2
and CosineLRScheduler stepping per epoch and per update, Mixup/CutMix with
SoftTargetCrossEntropy, LabelSmoothingCrossEntropy, ModelEmaV2/V3, accuracy
and AverageMeter."""
import torch
import torch.nn.functional as F

import timm
from timm.data import Mixup
from timm.loss import BinaryCrossEntropy, LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
from timm.optim import create_optimizer_v2
from timm.scheduler import CosineLRScheduler, create_scheduler_v2
from timm.utils import AverageMeter, ModelEmaV2, ModelEmaV3, accuracy, random_seed


def model():
    torch.manual_seed(0)
    return timm.create_model("test_efficientnet", num_classes=10)


torch.manual_seed(1)
X = torch.randn(8, 3, 32, 32)
Y = torch.randint(0, 10, (8,))


def r(v, n=5):
    return round(float(v), n)


def step(m, opt):
    loss = F.cross_entropy(m(X), Y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


# --- optimizers from create_optimizer_v2, a few steps each ---------------------------
for name, kw in [("sgd", dict(momentum=0.9, nesterov=True)), ("adamw", {}), ("lamb", {}),
                 ("lars", dict(momentum=0.9)), ("adabelief", {}), ("rmsproptf", {}),
                 ("lion", {}), ("adan", {}), ("nadamw", {}), ("adafactorbv", {}),
                 ("lookahead_adamw", {})]:
    m = model()
    opt = create_optimizer_v2(m, name, lr=1e-2, weight_decay=0.05, **kw)
    losses = [r(step(m, opt).item()) for _ in range(3)]
    print(name, type(opt).__name__, len(opt.param_groups), losses)

# layer-wise lr decay groups (timm's param_groups_layer_decay)
m = model()
opt = create_optimizer_v2(m, "adamw", lr=1e-3, weight_decay=0.05, layer_decay=0.75)
print("layer_decay groups", len(opt.param_groups),
      sorted({r(g["lr_scale"], 4) for g in opt.param_groups}))

# --- schedulers -----------------------------------------------------------------------
m = model()
opt = create_optimizer_v2(m, "sgd", lr=0.1, momentum=0.9)
sched, epochs = create_scheduler_v2(opt, sched="cosine", num_epochs=6, warmup_epochs=2,
                                    warmup_lr=1e-4, min_lr=1e-5)
lrs = []
for epoch in range(epochs):
    lrs.append(r(opt.param_groups[0]["lr"], 6))
    sched.step(epoch + 1)
print("cosine", epochs, lrs)

for kind in ("step", "multistep", "plateau", "tanh", "poly"):
    m = model()
    opt = create_optimizer_v2(m, "adamw", lr=1e-2)
    sched, epochs = create_scheduler_v2(opt, sched=kind, num_epochs=5, decay_epochs=2,
                                        decay_milestones=[1, 3], warmup_epochs=1, warmup_lr=1e-4)
    lrs = []
    for epoch in range(epochs):
        lrs.append(r(opt.param_groups[0]["lr"], 6))
        sched.step(epoch + 1, metric=1.0)
    print(kind, type(sched).__name__, lrs)

m = model()
opt = create_optimizer_v2(m, "adamw", lr=1e-2)
sched = CosineLRScheduler(opt, t_initial=8, lr_min=1e-4, warmup_t=2, warmup_lr_init=1e-5,
                          t_in_epochs=False, cycle_limit=1)
lrs = []
for update in range(8):
    loss = step(m, opt)
    sched.step_update(num_updates=update + 1)
    lrs.append(r(opt.param_groups[0]["lr"], 6))
print("step_update", lrs, r(loss.item()))

# --- losses, mixup, EMA ---------------------------------------------------------------
torch.manual_seed(2)
logits = torch.randn(8, 10, requires_grad=True)
for crit in (LabelSmoothingCrossEntropy(smoothing=0.1), SoftTargetCrossEntropy(),
             BinaryCrossEntropy(smoothing=0.1)):
    tgt = Y if not isinstance(crit, SoftTargetCrossEntropy) else F.one_hot(Y, 10).float() * 0.9 + 0.01
    loss = crit(logits, tgt)
    g, = torch.autograd.grad(loss, logits)
    print(type(crit).__name__, r(loss.item()), r(g.abs().sum().item()))

mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, prob=1.0, switch_prob=0.5, label_smoothing=0.1,
              num_classes=10)
crit = SoftTargetCrossEntropy()
m = model()
random_seed(42)  # seeds python's random, numpy (Mixup draws lam with numpy) and torch
# (SGD: Adam's normalized steps turn the rounding noise of gradients that are
# zero in exact arithmetic -- a BatchNorm bias feeding another BatchNorm -- into
# whole steps, and eval-mode outputs then differ in the third digit)
opt = create_optimizer_v2(m, "sgd", lr=0.01, momentum=0.9, weight_decay=1e-4)
ema2 = ModelEmaV2(m, decay=0.9)
ema3 = ModelEmaV3(m, decay=0.9, use_warmup=True)
top1, losses = AverageMeter(), AverageMeter()
for step in range(3):
    x, y = mixup(X.clone(), Y.clone())
    out = m(x)
    loss = crit(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    ema2.update(m)
    ema3.update(m, step=step)
    losses.update(loss.item(), x.size(0))
    print("mixup", step, r(x[0].abs().sum().item(), 3), [r(v, 4) for v in y[0].tolist()], r(loss.item()))
with torch.no_grad():
    m.eval()
    for net in (m, ema2.module, ema3.module):
        out = net(X)
        a1, a5 = accuracy(out, Y, topk=(1, 5))
        top1.update(a1.item(), X.size(0))
        print(type(net).__name__, r(out.sum().item(), 4), r(a1.item(), 3), r(a5.item(), 3))
print("meters", r(losses.avg), r(top1.avg, 3), r(ema3.get_decay(5), 6))
