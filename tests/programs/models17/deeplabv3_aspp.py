# torchvision's DeepLabV3 (models/segmentation/deeplabv3.py: DeepLabHead,
# ASPPConv with dilated 3x3 convolutions, ASPPPooling's image-pooling branch
# upsampled with F.interpolate(mode="bilinear", align_corners=False), ASPP's
# concatenation and projection; _utils.py's _SimpleSegmentationModel and
# IntermediateLayerGetter) trained the way references/segmentation/train.py
# and utils.py do it: the criterion over the output dict with
# nn.CrossEntropyLoss(ignore_index=255), SGD with the poly learning-rate
# schedule as a LambdaLR, evaluation with ConfusionMatrix (torch.bincount,
# torch.inference_mode, so its matrix is an inference tensor) and its mean
# IoU, the checkpoint and --resume.  Changes for a CPU test: a tiny
# dilated backbone instead of ResNet-50, 32x32 images with 4 classes from
# numpy (borders labelled 255), ASPP width 16 with rates (1, 2, 3), weights
# from numpy; torch seeded with manual_seed(0), one train-mode forward with
# the projection's Dropout(0.5), and the training with p=0.
# Then one training step under torch.compile against the same step eagerly.
import copy
from collections import OrderedDict
from typing import Dict, List, Sequence

import numpy as np
import torch
torch.manual_seed(0)  # (test change) torch seeds its default generator at random in every process: seeded, its draws are compared
from torch import nn
from torch.nn import functional as F


# ---- torchvision/models/_utils.py ----
class IntermediateLayerGetter(nn.ModuleDict):
    _version = 2
    __annotations__ = {
        "return_layers": Dict[str, str],
    }

    def __init__(self, model: nn.Module, return_layers: Dict[str, str]) -> None:
        if not set(return_layers).issubset([name for name, _ in model.named_children()]):
            raise ValueError("return_layers are not present in model")
        orig_return_layers = return_layers
        return_layers = {str(k): str(v) for k, v in return_layers.items()}
        layers = OrderedDict()
        for name, module in model.named_children():
            layers[name] = module
            if name in return_layers:
                del return_layers[name]
            if not return_layers:
                break

        super().__init__(layers)
        self.return_layers = orig_return_layers

    def forward(self, x):
        out = OrderedDict()
        for name, module in self.items():
            x = module(x)
            if name in self.return_layers:
                out_name = self.return_layers[name]
                out[out_name] = x
        return out


# ---- torchvision/models/segmentation/_utils.py ----
class _SimpleSegmentationModel(nn.Module):
    __constants__ = ["aux_classifier"]

    def __init__(self, backbone: nn.Module, classifier: nn.Module, aux_classifier=None) -> None:
        super().__init__()
        self.backbone = backbone
        self.classifier = classifier
        self.aux_classifier = aux_classifier

    def forward(self, x):
        input_shape = x.shape[-2:]
        # contract: features is a dict of tensors
        features = self.backbone(x)

        result = OrderedDict()
        x = features["out"]
        x = self.classifier(x)
        x = F.interpolate(x, size=input_shape, mode="bilinear", align_corners=False)
        result["out"] = x

        if self.aux_classifier is not None:
            x = features["aux"]
            x = self.aux_classifier(x)
            x = F.interpolate(x, size=input_shape, mode="bilinear", align_corners=False)
            result["aux"] = x

        return result


# ---- torchvision/models/segmentation/deeplabv3.py ----
class DeepLabV3(_SimpleSegmentationModel):
    pass


class DeepLabHead(nn.Sequential):
    def __init__(self, in_channels: int, num_classes: int, atrous_rates: Sequence[int] = (12, 24, 36),
                 width: int = 256) -> None:
        super().__init__(
            ASPP(in_channels, atrous_rates, width),
            nn.Conv2d(width, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, num_classes, 1),
        )


class ASPPConv(nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int, dilation: int) -> None:
        modules = [
            nn.Conv2d(in_channels, out_channels, 3, padding=dilation, dilation=dilation, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
        ]
        super().__init__(*modules)


class ASPPPooling(nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(in_channels, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size = x.shape[-2:]
        for mod in self:
            x = mod(x)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    def __init__(self, in_channels: int, atrous_rates: List[int], out_channels: int = 256) -> None:
        super().__init__()
        modules = []
        modules.append(
            nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels), nn.ReLU())
        )

        rates = tuple(atrous_rates)
        for rate in rates:
            modules.append(ASPPConv(in_channels, out_channels, rate))

        modules.append(ASPPPooling(in_channels, out_channels))

        self.convs = nn.ModuleList(modules)

        self.project = nn.Sequential(
            nn.Conv2d(len(self.convs) * out_channels, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
            nn.Dropout(0.5),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _res = []
        for conv in self.convs:
            _res.append(conv(x))
        res = torch.cat(_res, dim=1)
        return self.project(res)


# ---- a tiny dilated backbone (replace_stride_with_dilation, as ResNet's last stage) ----
def conv_bn(cin, cout, stride=1, dilation=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=stride, padding=dilation, dilation=dilation, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class TinyBackbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 8, stride=2)
        self.layer1 = conv_bn(8, 12, stride=2)
        self.layer2 = conv_bn(12, 16, dilation=2)
        self.fc = nn.Linear(16, 10)   # never reached: IntermediateLayerGetter stops at layer2


# ---- references/segmentation/utils.py ----
class ConfusionMatrix:
    def __init__(self, num_classes):
        self.num_classes = num_classes
        self.mat = None

    def update(self, a, b):
        n = self.num_classes
        if self.mat is None:
            self.mat = torch.zeros((n, n), dtype=torch.int64, device=a.device)
        with torch.inference_mode():
            k = (a >= 0) & (a < n)
            inds = n * a[k].to(torch.int64) + b[k]
            self.mat += torch.bincount(inds, minlength=n**2).reshape(n, n)

    def reset(self):
        self.mat.zero_()

    def compute(self):
        h = self.mat.float()
        acc_global = torch.diag(h).sum() / h.sum()
        acc = torch.diag(h) / h.sum(1)
        iu = torch.diag(h) / (h.sum(1) + h.sum(0) - torch.diag(h))
        return acc_global, acc, iu

    def __str__(self):
        acc_global, acc, iu = self.compute()
        return ("global correct: {:.1f}\naverage row correct: {}\nIoU: {}\nmean IoU: {:.1f}").format(
            acc_global.item() * 100,
            [f"{i:.1f}" for i in (acc * 100).tolist()],
            [f"{i:.1f}" for i in (iu * 100).tolist()],
            iu.mean().item() * 100,
        )


# ---- references/segmentation/train.py ----
criterion_ce = nn.CrossEntropyLoss(ignore_index=255)


def criterion(inputs, target):
    losses = {}
    for name, x in inputs.items():
        losses[name] = criterion_ce(x, target)

    if len(losses) == 1:
        return losses["out"]

    return losses["out"] + 0.5 * losses["aux"]


def evaluate(model, data_loader, num_classes):
    model.eval()
    confmat = ConfusionMatrix(num_classes)
    with torch.inference_mode():
        for image, target in data_loader:
            output = model(image)
            output = output["out"]
            confmat.update(target.flatten(), output.argmax(1).flatten())
    return confmat


def train_one_epoch(model, criterion, optimizer, data_loader, lr_scheduler, epoch, print_freq):
    model.train()
    for i, (image, target) in enumerate(data_loader):
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        lr_scheduler.step()
        if i % print_freq == 0:
            print(f"Epoch: [{epoch}] [{i}/{len(data_loader)}] lr: {optimizer.param_groups[0]['lr']:.6f} "
                  f"loss: {loss.item():.4f}")


# ---- data and weights from numpy ----
NUM_CLASSES = 4
rng = np.random.default_rng(0)


def make_batch(n):
    imgs = np.zeros((n, 3, 32, 32), np.float32)
    masks = np.zeros((n, 32, 32), np.int64)
    yy, xx = np.mgrid[:32, :32]
    for i in range(n):
        for c in range(1, NUM_CLASSES):
            cy, cx, r = rng.integers(6, 26), rng.integers(6, 26), rng.integers(3, 8)
            m = (yy - cy) ** 2 + (xx - cx) ** 2 < r * r
            masks[i][m] = c
        imgs[i] = np.stack([(masks[i] == c) * (0.5 + 0.3 * c) for c in range(3)])
        imgs[i] += 0.3 * rng.normal(size=(3, 32, 32))
        masks[i][:2] = 255     # the void border, as VOC's
        masks[i][:, -2:] = 255
    return torch.from_numpy(imgs), torch.from_numpy(masks)


data_loader = [make_batch(4) for _ in range(3)]
data_loader_test = [make_batch(4) for _ in range(2)]


def init_from_numpy(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                fan_in = p[0].numel()
                p.copy_(torch.from_numpy(r.normal(0, (2.0 / fan_in) ** 0.5, tuple(p.shape)).astype(np.float32)))
            elif name.endswith("bias"):
                p.copy_(torch.from_numpy(r.normal(0, 0.05, tuple(p.shape)).astype(np.float32)))


backbone = IntermediateLayerGetter(TinyBackbone(), return_layers={"layer2": "out"})
print("backbone layers", list(backbone.keys()), backbone.return_layers)
try:
    IntermediateLayerGetter(TinyBackbone(), return_layers={"layer4": "out"})
except ValueError as e:
    print("ValueError:", e)
classifier = DeepLabHead(16, NUM_CLASSES, atrous_rates=(1, 2, 3), width=16)
model = DeepLabV3(backbone, classifier, None)
init_from_numpy(model, 1)
print("aspp branches", len(classifier[0].convs), [m[0].dilation for m in classifier[0].convs[1:4]],
      sum(p.numel() for p in model.parameters()))

image, target = data_loader[0]
feat = backbone(image)["out"]
pooled = classifier[0].convs[-1](feat)
print("features", tuple(feat.shape), "pooling branch", tuple(pooled.shape),
      torch.allclose(pooled, pooled[..., :1, :1].expand_as(pooled)))
out = copy.deepcopy(model)(image)    # (a copy: its BatchNorm statistics stay out of the run)
print("train-mode dropout loss", f"{criterion(out, target).item():.4f}")
classifier[0].project[3].p = 0.0    # the compared runs: no dropout draws
out = model(image)
print("out", list(out.keys()), tuple(out["out"].shape), f"{criterion(out, target).item():.4f}",
      "ignored", (target == 255).sum().item())
print("ignore_index", f"{F.cross_entropy(out['out'], target, ignore_index=255).item():.4f}",
      f"{F.cross_entropy(out['out'], target.clamp(max=NUM_CLASSES - 1)).item():.4f}")

params_to_optimize = [
    {"params": [p for p in model.backbone.parameters() if p.requires_grad]},
    {"params": [p for p in model.classifier.parameters() if p.requires_grad]},
]
lr, epochs = 0.02, 3
optimizer = torch.optim.SGD(params_to_optimize, lr=lr, momentum=0.9, weight_decay=1e-4)
iters_per_epoch = len(data_loader)
lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda x: (1 - x / (iters_per_epoch * epochs)) ** 0.9
)
for epoch in range(epochs):
    train_one_epoch(model, criterion, optimizer, data_loader, lr_scheduler, epoch, print_freq=2)
    confmat = evaluate(model, data_loader_test, num_classes=NUM_CLASSES)
    print(confmat)
    checkpoint = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "lr_scheduler": lr_scheduler.state_dict(),
        "epoch": epoch,
    }
    torch.save(checkpoint, "checkpoint.pth")
print("final lr", lr_scheduler.get_last_lr(), lr_scheduler.last_epoch)

# --resume, as train.py does it
checkpoint = torch.load("checkpoint.pth", map_location="cpu", weights_only=False)
model2 = DeepLabV3(IntermediateLayerGetter(TinyBackbone(), return_layers={"layer2": "out"}),
                   DeepLabHead(16, NUM_CLASSES, atrous_rates=(1, 2, 3), width=16), None)
model2.load_state_dict(checkpoint["model"], strict=True)
optimizer2 = torch.optim.SGD([{"params": [p for p in model2.backbone.parameters() if p.requires_grad]},
                              {"params": [p for p in model2.classifier.parameters() if p.requires_grad]}],
                             lr=lr, momentum=0.9, weight_decay=1e-4)
optimizer2.load_state_dict(checkpoint["optimizer"])
sched2 = torch.optim.lr_scheduler.LambdaLR(optimizer2, lambda x: (1 - x / (iters_per_epoch * epochs)) ** 0.9)
sched2.load_state_dict(checkpoint["lr_scheduler"])
print("resumed", checkpoint["epoch"] + 1, sorted(checkpoint["lr_scheduler"]), checkpoint["lr_scheduler"]["lr_lambdas"],
      sched2.last_epoch, sched2.get_last_lr(), len(optimizer2.state_dict()["state"]),
      optimizer2.param_groups[0]["momentum"])
model2.eval()
evaluate(model, [], NUM_CLASSES)
with torch.inference_mode():
    same = torch.equal(model2(image)["out"], model(image)["out"])
print("resumed model", same, model.training)
print("bn stats", f"{classifier[2].running_mean.abs().sum().item():.5f}",
      f"{classifier[2].running_var.sum().item():.5f}", classifier[2].num_batches_tracked.item())
print("confmat", confmat.mat.dtype, confmat.mat.sum().item(), confmat.mat.tolist(), confmat.mat.is_inference())
try:
    confmat.reset()   # the matrix was made under inference_mode (evaluate's)
except RuntimeError as e:
    print("RuntimeError:", e)
print("reset", confmat.mat.sum().item())

# one training step under torch.compile against the same step eagerly
model.train()
for g in optimizer.param_groups:      # (the schedule ended at lr 0)
    g["lr"] = 0.01


def train_step(image, target):
    output = model(image)
    loss = criterion(output, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


image, target = data_loader[1]
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(image, target).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(image, target).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
