# A "modern" image-classification training loop in the style of timm /
# the PyTorch recipes: channels_last, autocast(bfloat16 on CPU), GradScaler,
# activation checkpointing, mixup (np.random.beta + randperm), label
# smoothing, SequentialLR(LinearLR warmup -> CosineAnnealingLR), gradient
# clipping, a timm ModelEmaV2, torch.compile of the model, inference_mode.
import copy
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
np.random.seed(0)
torch.backends.cudnn.benchmark = True
torch.set_float32_matmul_precision('high')
device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
amp_dtype = torch.bfloat16 if device.type == 'cpu' else torch.float16

class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))

class Net(nn.Module):
    def __init__(self, num_classes=10, grad_checkpointing=False):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.blocks = nn.Sequential(*[Block(16) for _ in range(2)])
        self.head = nn.Linear(16, num_classes)
        self.grad_checkpointing = grad_checkpointing
    def forward(self, x):
        x = self.stem(x)
        for blk in self.blocks:
            if self.grad_checkpointing and self.training:
                x = checkpoint(blk, x, use_reentrant=False)
            else:
                x = blk(x)
        x = x.mean((2, 3))
        return self.head(x)

class ModelEmaV2(nn.Module):
    def __init__(self, model, decay=0.9999, device=None):
        super(ModelEmaV2, self).__init__()
        self.module = copy.deepcopy(model)
        self.module.eval()
        self.decay = decay
        self.device = device
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

def mixup(x, y, alpha=0.4):
    lam = np.random.beta(alpha, alpha)
    index = torch.randperm(x.size(0), device=x.device)
    mixed_x = lam * x + (1 - lam) * x[index, :]
    return mixed_x, y, y[index], lam

model = Net(grad_checkpointing=True).to(device).to(memory_format=torch.channels_last)
model_ema = ModelEmaV2(model, decay=0.9)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
scaler = torch.amp.GradScaler(device.type, enabled=(amp_dtype == torch.float16))
epochs, steps_per_epoch, warmup = 3, 4, 2
warm = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=warmup)
cos = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * steps_per_epoch - warmup, eta_min=1e-4)
scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, schedulers=[warm, cos], milestones=[warmup])
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

x_all = torch.randn(32, 3, 16, 16)
y_all = torch.randint(0, 10, (32,))
for epoch in range(epochs):
    model.train()
    for step in range(steps_per_epoch):
        x = x_all[step * 8:(step + 1) * 8].to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        y = y_all[step * 8:(step + 1) * 8].to(device, non_blocking=True)
        x, y_a, y_b, lam = mixup(x, y)
        with torch.autocast(device_type=device.type, dtype=amp_dtype):
            out = model(x)
            loss = lam * criterion(out, y_a) + (1 - lam) * criterion(out, y_b)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        model_ema.update(model)
        print(f"epoch {epoch} step {step} loss {loss.item():.4f} out {out.dtype} "
              f"grad_norm_finite {bool(torch.isfinite(grad_norm))} lr {scheduler.get_last_lr()[0]:.5f}")

compiled = torch.compile(model)
model.eval()
with torch.inference_mode():
    a = compiled(x_all[:8])
    b = model(x_all[:8])
    e = model_ema.module(x_all[:8])
    print("compiled eval matches:", torch.allclose(a, b, atol=1e-4), e.shape)
    acc = (model(x_all).argmax(-1) == y_all).float().mean().item()
    print(f"acc {acc:.3f}")
