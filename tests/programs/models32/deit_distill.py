# DeiT distillation the way facebookresearch/deit writes it: models.py
# (DistilledVisionTransformer over a timm-style VisionTransformer: the
# dist_token expanded per batch beside the cls token, pos_embed over
# num_patches + 2, trunc_normal_(self.dist_token, std=.02), head_dist, the
# eval-mode (x + x_dist) / 2), losses.py (DistillationLoss: 'soft' through
# F.kl_div(F.log_softmax(outputs_kd / T, dim=1), F.log_softmax(
# teacher_outputs / T, dim=1), reduction='sum', log_target=True) * (T * T) /
# outputs_kd.numel(), 'hard' through F.cross_entropy(outputs_kd,
# teacher_outputs.argmax(dim=1)), alpha mixing, the teacher under
# torch.no_grad(), the ValueError without a distillation output),
# samplers.py (RASampler: torch.randperm(len(self.dataset), generator=g)
# seeded by self.epoch, repeat_interleave, the padded / strided subsample,
# len(dataset) // 256 * 256 selection, set_epoch), engine.py
# (train_one_epoch with clip_grad_norm_, evaluate with utils.accuracy's
# topk), timm's LabelSmoothingCrossEntropy / SoftTargetCrossEntropy and
# accuracy, and MAE's util/lr_decay.py param_groups_lrd / util/lr_sched.py
# adjust_learning_rate (layer-wise lr scales, no weight decay for 1-D
# parameters and no_weight_decay() keywords, cosine with warm-up by
# fractional epoch written into each group's lr). Changes for a CPU test: a
# tiny ViT (8x8 images, 4x4 patches, dim 16, 2 blocks) and a small CNN
# teacher, 256 synthetic images from numpy (RASampler keeps
# len // 256 * 256 of them), 8 replicas of which rank 0 trains on 32
# images, shuffle=False for the trained epochs (randperm's draws differ
# between libraries; the shuffled order's lines are [rng]), weights from
# numpy, two epochs; then one transformer Block's step under torch.compile
# against the same step eagerly.
import copy
import math
from functools import partial

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.init import trunc_normal_


# ---------------------------------------------------------------- timm: layers / vision_transformer.py
class PatchEmbed(nn.Module):
    def __init__(self, img_size=224, patch_size=16, in_chans=3, embed_dim=768):
        super().__init__()
        self.img_size = (img_size, img_size)
        self.patch_size = (patch_size, patch_size)
        self.grid_size = (img_size // patch_size, img_size // patch_size)
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        B, C, H, W = x.shape
        assert H == self.img_size[0] and W == self.img_size[1], \
            f"Input image size ({H}*{W}) doesn't match model ({self.img_size[0]}*{self.img_size[1]})."
        x = self.proj(x).flatten(2).transpose(1, 2)
        return x


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features=None, out_features=None, act_layer=nn.GELU, drop=0.):
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden_features, out_features)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop(x)
        x = self.fc2(x)
        x = self.drop(x)
        return x


class Attention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=False, attn_drop=0., proj_drop=0.):
        super().__init__()
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = head_dim ** -0.5

        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]   # make torchscript happy (cannot use tensor as tuple)

        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        attn = self.attn_drop(attn)

        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        x = self.proj(x)
        x = self.proj_drop(x)
        return x


def drop_path(x, drop_prob: float = 0., training: bool = False):
    if drop_prob == 0. or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)  # work with diff dim tensors, not just 2D ConvNets
    random_tensor = keep_prob + torch.rand(shape, dtype=x.dtype, device=x.device)
    random_tensor.floor_()  # binarize
    output = x.div(keep_prob) * random_tensor
    return output


class DropPath(nn.Module):
    def __init__(self, drop_prob=None):
        super(DropPath, self).__init__()
        self.drop_prob = drop_prob

    def forward(self, x):
        return drop_path(x, self.drop_prob, self.training)


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=4., qkv_bias=False, drop=0., attn_drop=0.,
                 drop_path=0., act_layer=nn.GELU, norm_layer=nn.LayerNorm):
        super().__init__()
        self.norm1 = norm_layer(dim)
        self.attn = Attention(dim, num_heads=num_heads, qkv_bias=qkv_bias, attn_drop=attn_drop, proj_drop=drop)
        # NOTE: drop path for stochastic depth, we shall see if this is better than dropout here
        self.drop_path = DropPath(drop_path) if drop_path > 0. else nn.Identity()
        self.norm2 = norm_layer(dim)
        mlp_hidden_dim = int(dim * mlp_ratio)
        self.mlp = Mlp(in_features=dim, hidden_features=mlp_hidden_dim, act_layer=act_layer, drop=drop)

    def forward(self, x):
        x = x + self.drop_path(self.attn(self.norm1(x)))
        x = x + self.drop_path(self.mlp(self.norm2(x)))
        return x


class VisionTransformer(nn.Module):
    def __init__(self, img_size=224, patch_size=16, in_chans=3, num_classes=1000, embed_dim=768, depth=12,
                 num_heads=12, mlp_ratio=4., qkv_bias=True, drop_rate=0., attn_drop_rate=0.,
                 drop_path_rate=0., norm_layer=None):
        super().__init__()
        self.num_classes = num_classes
        self.num_features = self.embed_dim = embed_dim  # num_features for consistency with other models
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-6)

        self.patch_embed = PatchEmbed(img_size=img_size, patch_size=patch_size, in_chans=in_chans,
                                      embed_dim=embed_dim)
        num_patches = self.patch_embed.num_patches

        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
        self.pos_drop = nn.Dropout(p=drop_rate)

        dpr = [x.item() for x in torch.linspace(0, drop_path_rate, depth)]  # stochastic depth decay rule
        self.blocks = nn.ModuleList([
            Block(dim=embed_dim, num_heads=num_heads, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias,
                  drop=drop_rate, attn_drop=attn_drop_rate, drop_path=dpr[i], norm_layer=norm_layer)
            for i in range(depth)])
        self.norm = norm_layer(embed_dim)

        # Classifier head
        self.head = nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()

        trunc_normal_(self.pos_embed, std=.02)
        trunc_normal_(self.cls_token, std=.02)
        self.apply(self._init_weights)

    def _init_weights(self, m):
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.constant_(m.bias, 0)
        elif isinstance(m, nn.LayerNorm):
            nn.init.constant_(m.bias, 0)
            nn.init.constant_(m.weight, 1.0)

    @torch.jit.ignore
    def no_weight_decay(self):
        return {'pos_embed', 'cls_token'}


# ---------------------------------------------------------------- deit: models.py
class DistilledVisionTransformer(VisionTransformer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.dist_token = nn.Parameter(torch.zeros(1, 1, self.embed_dim))
        num_patches = self.patch_embed.num_patches
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 2, self.embed_dim))
        self.head_dist = nn.Linear(self.embed_dim, self.num_classes) if self.num_classes > 0 else nn.Identity()

        trunc_normal_(self.dist_token, std=.02)
        trunc_normal_(self.pos_embed, std=.02)
        self.head_dist.apply(self._init_weights)

    @torch.jit.ignore
    def no_weight_decay(self):
        return {'pos_embed', 'cls_token', 'dist_token'}

    def forward_features(self, x):
        # taken from https://github.com/rwightman/pytorch-image-models/blob/master/timm/models/vision_transformer.py
        # with slight modifications to add the dist_token
        B = x.shape[0]
        x = self.patch_embed(x)

        cls_tokens = self.cls_token.expand(B, -1, -1)  # stole cls_tokens impl from Phil Wang, thanks
        dist_token = self.dist_token.expand(B, -1, -1)
        x = torch.cat((cls_tokens, dist_token, x), dim=1)

        x = x + self.pos_embed
        x = self.pos_drop(x)

        for blk in self.blocks:
            x = blk(x)

        x = self.norm(x)
        return x[:, 0], x[:, 1]

    def forward(self, x):
        x, x_dist = self.forward_features(x)
        x = self.head(x)
        x_dist = self.head_dist(x_dist)
        if self.training:
            return x, x_dist
        else:
            # during inference, return the average of both classifier predictions
            return (x + x_dist) / 2


# ---------------------------------------------------------------- deit: losses.py
class DistillationLoss(torch.nn.Module):
    """
    This module wraps a standard criterion and adds an extra knowledge distillation loss by
    taking a teacher model prediction and using it as additional supervision.
    """
    def __init__(self, base_criterion: torch.nn.Module, teacher_model: torch.nn.Module,
                 distillation_type: str, alpha: float, tau: float):
        super().__init__()
        self.base_criterion = base_criterion
        self.teacher_model = teacher_model
        assert distillation_type in ['none', 'soft', 'hard']
        self.distillation_type = distillation_type
        self.alpha = alpha
        self.tau = tau

    def forward(self, inputs, outputs, labels):
        outputs_kd = None
        if not isinstance(outputs, torch.Tensor):
            # assume that the model outputs a tuple of [outputs, outputs_kd]
            outputs, outputs_kd = outputs
        base_loss = self.base_criterion(outputs, labels)
        if self.distillation_type == 'none':
            return base_loss

        if outputs_kd is None:
            raise ValueError("When knowledge distillation is enabled, the model is "
                             "expected to return a Tuple[Tensor, Tensor] with the output of the "
                             "class_token and the dist_token")
        # don't backprop throught the teacher
        with torch.no_grad():
            teacher_outputs = self.teacher_model(inputs)

        if self.distillation_type == 'soft':
            T = self.tau
            # taken from https://github.com/peterliht/knowledge-distillation-pytorch/blob/master/model/net.py#L100
            # with slight modifications
            distillation_loss = F.kl_div(
                F.log_softmax(outputs_kd / T, dim=1),
                F.log_softmax(teacher_outputs / T, dim=1),
                reduction='sum',
                log_target=True
            ) * (T * T) / outputs_kd.numel()
        elif self.distillation_type == 'hard':
            distillation_loss = F.cross_entropy(outputs_kd, teacher_outputs.argmax(dim=1))

        loss = base_loss * (1 - self.alpha) + distillation_loss * self.alpha
        return loss


# ---------------------------------------------------------------- timm: loss/cross_entropy.py, utils/metrics.py
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


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    maxk = min(max(topk), output.size()[1])
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    return [correct[:min(k, maxk)].reshape(-1).float().sum(0) * 100. / batch_size for k in topk]


# ---------------------------------------------------------------- deit: samplers.py
class RASampler(torch.utils.data.Sampler):
    """Sampler that restricts data loading to a subset of the dataset for distributed,
    with repeated augmentation.
    It ensures that different each augmented version of a sample will be visible to a
    different process (GPU)
    Heavily based on torch.utils.data.DistributedSampler
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, num_repeats: int = 3):
        if num_replicas is None:
            raise RuntimeError("Requires distributed package to be available")
        if rank is None:
            raise RuntimeError("Requires distributed package to be available")
        if num_repeats < 1:
            raise ValueError("num_repeats should be greater than 0")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.num_repeats = num_repeats
        self.epoch = 0
        self.num_samples = int(math.ceil(len(self.dataset) * self.num_repeats / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas
        # self.num_selected_samples = int(math.ceil(len(self.dataset) / self.num_replicas))
        self.num_selected_samples = int(math.floor(len(self.dataset) // 256 * 256 / self.num_replicas))
        self.shuffle = shuffle

    def __iter__(self):
        if self.shuffle:
            # deterministically shuffle based on epoch
            g = torch.Generator()
            g.manual_seed(self.epoch)
            indices = torch.randperm(len(self.dataset), generator=g)
        else:
            indices = torch.arange(start=0, end=len(self.dataset))

        # add extra samples to make it evenly divisible
        indices = torch.repeat_interleave(indices, repeats=self.num_repeats, dim=0).tolist()
        padding_size: int = self.total_size - len(indices)
        if padding_size > 0:
            indices += indices[:padding_size]
        assert len(indices) == self.total_size

        # subsample
        indices = indices[self.rank:self.total_size:self.num_replicas]
        assert len(indices) == self.num_samples

        return iter(indices[:self.num_selected_samples])

    def __len__(self):
        return self.num_selected_samples

    def set_epoch(self, epoch):
        self.epoch = epoch


# ---------------------------------------------------------------- MAE: util/lr_decay.py, util/lr_sched.py
def param_groups_lrd(model, weight_decay=0.05, no_weight_decay_list=[], layer_decay=.75):
    """
    Parameter groups for layer-wise lr decay
    Following BEiT: https://github.com/microsoft/unilm/blob/master/beit/optim_factory.py#L58
    """
    param_group_names = {}
    param_groups = {}

    num_layers = len(model.blocks) + 1

    layer_scales = list(layer_decay ** (num_layers - i) for i in range(num_layers + 1))

    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue

        # no decay: all 1D parameters and model specific ones
        if p.ndim == 1 or n in no_weight_decay_list:
            g_decay = "no_decay"
            this_decay = 0.
        else:
            g_decay = "decay"
            this_decay = weight_decay

        layer_id = get_layer_id_for_vit(n, num_layers)
        group_name = "layer_%d_%s" % (layer_id, g_decay)

        if group_name not in param_group_names:
            this_scale = layer_scales[layer_id]

            param_group_names[group_name] = {
                "lr_scale": this_scale,
                "weight_decay": this_decay,
                "params": [],
            }
            param_groups[group_name] = {
                "lr_scale": this_scale,
                "weight_decay": this_decay,
                "params": [],
            }

        param_group_names[group_name]["params"].append(n)
        param_groups[group_name]["params"].append(p)

    return list(param_groups.values()), param_group_names


def get_layer_id_for_vit(name, num_layers):
    """
    Assign a parameter with its layer id
    Following BEiT: https://github.com/microsoft/unilm/blob/master/beit/optim_factory.py#L33
    """
    if name in ['cls_token', 'pos_embed']:
        return 0
    elif name.startswith('patch_embed'):
        return 0
    elif name.startswith('blocks'):
        return int(name.split('.')[1]) + 1
    else:
        return num_layers


class Args:
    lr = 2e-3
    min_lr = 1e-4
    warmup_epochs = 1
    epochs = 2
    clip_grad = 1.0


def adjust_learning_rate(optimizer, epoch, args):
    """Decay the learning rate with half-cycle cosine after warmup"""
    if epoch < args.warmup_epochs:
        lr = args.lr * epoch / args.warmup_epochs
    else:
        lr = args.min_lr + (args.lr - args.min_lr) * 0.5 * \
            (1. + math.cos(math.pi * (epoch - args.warmup_epochs) / (args.epochs - args.warmup_epochs)))
    for param_group in optimizer.param_groups:
        if "lr_scale" in param_group:
            param_group["lr"] = lr * param_group["lr_scale"]
        else:
            param_group["lr"] = lr
    return lr


# ---------------------------------------------------------------- deit: engine.py
def train_one_epoch(model, criterion, data_loader, optimizer, epoch, args):
    model.train()
    losses = []
    for data_iter_step, (samples, targets) in enumerate(data_loader):
        adjust_learning_rate(optimizer, data_iter_step / len(data_loader) + epoch, args)
        outputs = model(samples)
        loss = criterion(samples, outputs, targets)
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            print("Loss is {}, stopping training".format(loss_value))
            raise SystemExit(1)
        optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
        optimizer.step()
        losses.append(loss_value)
        print(f"epoch {epoch} step {data_iter_step} loss {loss_value:.5f} grad_norm {grad_norm.item():.4f} "
              f"lr {optimizer.param_groups[0]['lr']:.6f} / {optimizer.param_groups[-1]['lr']:.6f}")
    return sum(losses) / len(losses)


@torch.no_grad()
def evaluate(data_loader, model):
    criterion = torch.nn.CrossEntropyLoss()
    model.eval()
    stats = []
    for images, target in data_loader:
        output = model(images)
        loss = criterion(output, target)
        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        stats.append((loss.item(), acc1.item(), acc5.item()))
    n = len(stats)
    return {k: sum(s[i] for s in stats) / n for i, k in enumerate(("loss", "acc1", "acc5"))}


# ---------------------------------------------------------------- the test
def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


rng = np.random.default_rng(0)


def arr(*shape, std=1.0):
    return torch.from_numpy(rng.normal(0, std, shape).astype(np.float32))


images = arr(256, 3, 8, 8)
labels = torch.from_numpy((rng.integers(0, 10, 256)).astype(np.int64))
dataset = torch.utils.data.TensorDataset(images, labels)

sampler = RASampler(dataset, num_replicas=8, rank=0, shuffle=True)
first = list(sampler)
print("RASampler", len(sampler), sampler.num_samples, sampler.total_size, len(first),
      "same epoch same order", first == list(sampler))
sampler.set_epoch(1)
print("epoch 1 differs", list(sampler) != first, "[rng] first", first[:4])
plain = RASampler(dataset, num_replicas=8, rank=3, shuffle=False)
print("unshuffled rank 3", list(plain)[:8], "repeats", torch.repeat_interleave(torch.arange(3), repeats=3, dim=0).tolist())
try:
    RASampler(dataset, num_replicas=2, rank=0, num_repeats=0)
except ValueError as e:
    print("ValueError", e)

torch.manual_seed(0)
model = DistilledVisionTransformer(img_size=8, patch_size=4, num_classes=10, embed_dim=16, depth=2, num_heads=2,
                                   mlp_ratio=2, qkv_bias=True, norm_layer=partial(nn.LayerNorm, eps=1e-6))
print("pos_embed", tuple(model.pos_embed.shape), "dist_token", tuple(model.dist_token.shape),
      "trunc_normal std", f"{model.pos_embed.std().item():.2f}",
      "head_dist bias", model.head_dist.bias.abs().sum().item(), "no_weight_decay", sorted(model.no_weight_decay()))
with torch.no_grad():
    for n, p in model.named_parameters():
        if n.endswith('norm1.weight') or n.endswith('norm2.weight') or n == 'norm.weight':
            p.copy_(1.0 + arr(*p.shape, std=0.05))
        elif p.ndim == 1:
            p.copy_(arr(*p.shape, std=0.05))
        else:
            p.copy_(arr(*p.shape, std=0.3))

teacher = nn.Sequential(
    nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.MaxPool2d(2),
    nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
with torch.no_grad():
    for n, p in teacher.named_parameters():
        p.copy_(arr(*p.shape, std=0.4) + (1.0 if n == '1.weight' else 0.0))
    teacher[1].running_mean.copy_(arr(8, std=0.1))
    teacher[1].running_var.copy_(torch.from_numpy(rng.uniform(0.5, 1.5, 8).astype(np.float32)))
teacher.eval()

xb, yb = images[:6], labels[:6]
out, out_kd = model(xb)
model.eval()
avg = model(xb)
model.train()
print("train outputs", tuple(out.shape), fmt(out[0], 3), fmt(out_kd[0], 3), "eval averages",
      torch.allclose(avg, (out + out_kd) / 2, atol=1e-6))
base = LabelSmoothingCrossEntropy(smoothing=0.1)
for kind in ("none", "soft", "hard"):
    crit = DistillationLoss(base, teacher, kind, alpha=0.5, tau=3.0)
    print(kind, f"{crit(xb, (out, out_kd), yb).item():.5f}")
try:
    DistillationLoss(base, teacher, 'soft', 0.5, 1.0)(xb, avg, yb)
except ValueError as e:
    print("ValueError", str(e)[:60])
soft_targets = torch.from_numpy(rng.dirichlet(np.ones(10), 6).astype(np.float32))
print("SoftTargetCrossEntropy", f"{SoftTargetCrossEntropy()(out, soft_targets).item():.5f}",
      "== one-hot CE", torch.allclose(SoftTargetCrossEntropy()(out, F.one_hot(yb, 10).float()), F.cross_entropy(out, yb)))
acc1, acc5 = accuracy(out, yb, topk=(1, 5))
print("accuracy", f"{acc1.item():.2f}", f"{acc5.item():.2f}", acc1.dtype, [a.item() for a in accuracy(out, yb, topk=(1, 20))])

criterion = DistillationLoss(base, teacher, 'soft', alpha=0.5, tau=3.0)
param_groups, names = param_groups_lrd(model, weight_decay=0.05, no_weight_decay_list=model.no_weight_decay(),
                                       layer_decay=0.75)
print("groups", [(k, round(v["lr_scale"], 4), v["weight_decay"], len(v["params"])) for k, v in names.items()])
optimizer = torch.optim.AdamW(param_groups, lr=Args.lr, betas=(0.9, 0.999))
train_sampler = RASampler(dataset, num_replicas=8, rank=0, shuffle=False)
data_loader = torch.utils.data.DataLoader(dataset, sampler=train_sampler, batch_size=16, drop_last=True)
val_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images[200:232], labels[200:232]),
                                         batch_size=16, shuffle=False)
for epoch in range(Args.epochs):
    train_sampler.set_epoch(epoch)
    mean_loss = train_one_epoch(model, criterion, data_loader, optimizer, epoch, Args)
    stats = evaluate(val_loader, model)
    print(f"epoch {epoch}: train {mean_loss:.5f} val loss {stats['loss']:.5f} acc1 {stats['acc1']:.2f} acc5 {stats['acc5']:.2f}")
print("after", fmt(model.dist_token, 4), fmt(model.head_dist.weight, 4),
      "teacher untouched", teacher[8].weight.grad is None, "bn stats", fmt(teacher[1].running_mean, 2))


# one transformer Block's step under torch.compile against the same step eagerly
blk = model.blocks[1]
bopt = torch.optim.AdamW(blk.parameters(), lr=1e-3, weight_decay=0.05)
hb = arr(4, 6, 16)


def train_step(h):
    bopt.zero_grad()
    loss = blk(h).pow(2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(blk.parameters(), 1.0)
    bopt.step()
    return loss


state, opt_state = copy.deepcopy(blk.state_dict()), copy.deepcopy(bopt.state_dict())
eager = [train_step(hb).item() for _ in range(2)]
after = {k: v.clone() for k, v in blk.state_dict().items()}
blk.load_state_dict(state)
bopt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(hb).item() for _ in range(2)]


# (the key third of qkv.bias has an exactly zero gradient, softmax being
# shift invariant: AdamW's normalized step follows rounding noise there, in
# either library, so it is left out of the comparison)
def compared(k, v):
    return torch.cat([v[:16], v[32:]]) if k.endswith('qkv.bias') else v


print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(compared(k, blk.state_dict()[k]), compared(k, after[k]), rtol=1e-4, atol=1e-5)
          for k in after))
