# SwAV the way facebookresearch/swav (main_swav.py, src/resnet50.py) writes
# it, single process: the ResNet's forward over a list of multi-crop batches
# of different resolutions, grouped by
# torch.cumsum(torch.unique_consecutive(torch.tensor([inp.shape[-1] ...]),
# return_counts=True)[1], 0), the trunk run once per resolution group and the
# outputs torch.cat'ed, forward_head (the projection head's Linear /
# BatchNorm1d / ReLU(inplace=True) / Linear, nn.functional.normalize, the
# bias-free nn.Linear prototypes), the prototypes normalized under
# torch.no_grad() through weight.data.clone() / normalize / weight.copy_,
# distributed_sinkhorn (@torch.no_grad(), torch.exp(out / epsilon).t(), the
# dist.all_reduce calls guarded by dist.is_available() and
# dist.is_initialized(), in-place row / column normalizations in a loop),
# the feature queue (torch.zeros(len(crops_for_assign), queue_length //
# world_size, feat_dim), filled after its first use test
# torch.all(queue[i, -1, :] == 0), torch.mm(queue[i],
# model.module.prototypes.weight.t()), the shift queue[i, bs:] =
# queue[i, :-bs].clone()), the swapped prediction loss over
# np.delete(np.arange(np.sum(nmb_crops)), crop_id), the prototypes' grads
# set to None for the first freeze_prototypes_niters iterations, and the
# warm-up + cosine lr_schedule array whose numpy float64 entries are written
# into param_group["lr"], fix_random_seeds (torch.manual_seed,
# torch.cuda.manual_seed_all, np.random.seed), cudnn.benchmark, and the
# checkpoints: torch.save of {"epoch", "state_dict", "optimizer"} and of
# {"queue": queue}, read back by restart_from_checkpoint's torch.load with
# map_location (which refuses the optimizer's numpy float64 lr: retried
# under torch.serialization.safe_globals). Changes for a CPU test: a small BasicBlock ResNet
# trunk (widths 8 / 16), crops of 16x16 and 8x8 from numpy, the model wrapped
# in nn.DataParallel (no GPU: it calls the module, and keeps the .module the
# script reads), SGD without LARC, a few iterations; then one training step
# under torch.compile against the same step eagerly.
import copy
import math
import os
import pickle

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class AttrDict(dict):
    __getattr__ = dict.__getitem__


args = AttrDict(
    nmb_crops=[2, 2], size_crops=[16, 8], crops_for_assign=[0, 1], temperature=0.1,
    epsilon=0.05, sinkhorn_iterations=3, feat_dim=8, nmb_prototypes=12, queue_length=8,
    epoch_queue_starts=1, epochs=3, batch_size=4, base_lr=0.6, final_lr=0.0006,
    freeze_prototypes_niters=3, wd=1e-6, warmup_epochs=1, start_warmup=0.0, world_size=1,
    hidden_mlp=16,
)


def conv3x3(in_planes, out_planes, stride=1, groups=1, dilation=1):
    """3x3 convolution with padding"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation,
                     groups=groups, bias=False, dilation=dilation)


def conv1x1(in_planes, out_planes, stride=1):
    """1x1 convolution"""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1
    __constants__ = ["downsample"]

    def __init__(self, inplanes, planes, stride=1, downsample=None, groups=1, base_width=64,
                 dilation=1, norm_layer=None):
        super(BasicBlock, self).__init__()
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
    def __init__(self, block, layers, zero_init_residual=False, groups=1, widen=1,
                 width_per_group=8, replace_stride_with_dilation=None, norm_layer=None,
                 normalize=False, output_dim=0, hidden_mlp=0, nmb_prototypes=0, eval_mode=False):
        super(ResNet, self).__init__()
        if norm_layer is None:
            norm_layer = nn.BatchNorm2d
        self._norm_layer = norm_layer
        self.eval_mode = eval_mode
        self.padding = nn.ConstantPad2d(1, 0.0)
        self.inplanes = self.base_width = width_per_group * widen
        self.dilation = 1
        if replace_stride_with_dilation is None:
            replace_stride_with_dilation = [False, False, False]
        if len(replace_stride_with_dilation) != 3:
            raise ValueError("replace_stride_with_dilation should be None "
                             "or a 3-element tuple, got {}".format(replace_stride_with_dilation))
        self.groups = groups
        num_out_filters = width_per_group * widen
        self.conv1 = nn.Conv2d(3, num_out_filters, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = norm_layer(num_out_filters)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, num_out_filters, layers[0])
        num_out_filters *= 2
        self.layer2 = self._make_layer(block, num_out_filters, layers[1], stride=2,
                                       dilate=replace_stride_with_dilation[0])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))

        # normalize output features
        self.l2norm = normalize

        # projection head
        if output_dim == 0:
            self.projection_head = None
        elif hidden_mlp == 0:
            self.projection_head = nn.Linear(num_out_filters * block.expansion, output_dim)
        else:
            self.projection_head = nn.Sequential(
                nn.Linear(num_out_filters * block.expansion, hidden_mlp),
                nn.BatchNorm1d(hidden_mlp),
                nn.ReLU(inplace=True),
                nn.Linear(hidden_mlp, output_dim),
            )

        # prototype layer
        self.prototypes = None
        if isinstance(nmb_prototypes, list):
            self.prototypes = MultiPrototypes(output_dim, nmb_prototypes)
        elif nmb_prototypes > 0:
            self.prototypes = nn.Linear(output_dim, nmb_prototypes, bias=False)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

        # Zero-initialize the last BN in each residual branch
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        norm_layer = self._norm_layer
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                norm_layer(planes * block.expansion),
            )
        layers = []
        layers.append(block(self.inplanes, planes, stride, downsample, self.groups,
                            self.base_width, previous_dilation, norm_layer))
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, groups=self.groups, base_width=self.base_width,
                                dilation=self.dilation, norm_layer=norm_layer))
        return nn.Sequential(*layers)

    def forward_backbone(self, x):
        if self.eval_mode:
            x = self.padding(x)
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)
        x = self.layer1(x)
        x = self.layer2(x)
        if self.eval_mode:
            return x
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return x

    def forward_head(self, x):
        if self.projection_head is not None:
            x = self.projection_head(x)
        if self.l2norm:
            x = nn.functional.normalize(x, dim=1, p=2)
        if self.prototypes is not None:
            return x, self.prototypes(x)
        return x

    def forward(self, inputs):
        if not isinstance(inputs, list):
            inputs = [inputs]
        idx_crops = torch.cumsum(torch.unique_consecutive(
            torch.tensor([inp.shape[-1] for inp in inputs]),
            return_counts=True,
        )[1], 0)
        start_idx = 0
        for end_idx in idx_crops:
            _out = self.forward_backbone(torch.cat(inputs[start_idx: end_idx]))
            if start_idx == 0:
                output = _out
            else:
                output = torch.cat((output, _out))
            start_idx = end_idx
        return self.forward_head(output)


class MultiPrototypes(nn.Module):
    def __init__(self, output_dim, nmb_prototypes):
        super(MultiPrototypes, self).__init__()
        self.nmb_heads = len(nmb_prototypes)
        for i, k in enumerate(nmb_prototypes):
            self.add_module("prototypes" + str(i), nn.Linear(output_dim, k, bias=False))

    def forward(self, x):
        out = []
        for i in range(self.nmb_heads):
            out.append(getattr(self, "prototypes" + str(i))(x))
        return out


def resnet_small(**kwargs):
    return ResNet(BasicBlock, [1, 1], **kwargs)


@torch.no_grad()
def distributed_sinkhorn(out):
    Q = torch.exp(out / args.epsilon).t()  # Q is K-by-B for consistency with notations from our paper
    B = Q.shape[1] * args.world_size  # number of samples to assign
    K = Q.shape[0]  # how many prototypes

    # make the matrix sums to 1
    sum_Q = torch.sum(Q)
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(sum_Q)
    Q /= sum_Q

    for it in range(args.sinkhorn_iterations):
        # normalize each row: total weight per prototype must be 1/K
        sum_of_rows = torch.sum(Q, dim=1, keepdim=True)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(sum_of_rows)
        Q /= sum_of_rows
        Q /= K

        # normalize each column: total weight per sample must be 1/B
        Q /= torch.sum(Q, dim=0, keepdim=True)
        Q /= B

    Q *= B  # the colomns must sum to 1 so that Q is an assignment
    return Q.t()


class AverageMeter(object):
    """computes and stores the average and current value"""

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


def fix_random_seeds(seed=31):
    """
    Fix random seeds.
    """
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    np.random.seed(seed)


def restart_from_checkpoint(ckp_paths, run_variables=None, **kwargs):
    """
    Re-start from checkpoint
    """
    # look for a checkpoint in exp repository
    if isinstance(ckp_paths, list):
        for ckp_path in ckp_paths:
            if os.path.isfile(ckp_path):
                break
    else:
        ckp_path = ckp_paths

    if not os.path.isfile(ckp_path):
        return

    print("Found checkpoint at {}".format(ckp_path))

    # open checkpoint file
    checkpoint = torch.load(ckp_path, map_location="cpu")

    # key is what to look for in the checkpoint file
    # value is the object to load
    # example: {'state_dict': model}
    for key, value in kwargs.items():
        if key in checkpoint and value is not None:
            try:
                msg = value.load_state_dict(checkpoint[key], strict=False)
                print(msg)
            except TypeError:
                msg = value.load_state_dict(checkpoint[key])
            print("=> loaded {} from checkpoint '{}'".format(key, ckp_path))
        else:
            print("=> failed to load {} from checkpoint '{}'".format(key, ckp_path))

    # re load variable important for the run
    if run_variables is not None:
        for var_name in run_variables:
            if var_name in checkpoint:
                run_variables[var_name] = checkpoint[var_name]


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "bn" in name or "downsample.1" in name or "projection_head.1" in name:
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(torch.from_numpy((base + r.normal(0, 0.1, tuple(p.shape))).astype(np.float32)))
            else:
                fan_in = int(np.prod(p.shape[1:]))
                p.copy_(torch.from_numpy(r.normal(0, 1 / math.sqrt(fan_in), tuple(p.shape)).astype(np.float32)))


# the multi-crop "dataset": per image, nmb_crops[i] crops of size_crops[i]
rng = np.random.default_rng(0)
n_images = 8
images = rng.normal(0, 1, (n_images, 3, 20, 20)).astype(np.float32)


def multi_crop(idx):
    crops = []
    for size, nmb in zip(args.size_crops, args.nmb_crops):
        for _ in range(nmb):
            i, j = rng.integers(0, 20 - size + 1, 2)
            crop = images[idx, :, i:i + size, j:j + size]
            if rng.random() < 0.5:
                crop = crop[..., ::-1]
            crops.append(torch.from_numpy(np.ascontiguousarray(crop)))
    return crops


train_loader = []
for b in range(0, n_images, args.batch_size):
    per_image = [multi_crop(k) for k in range(b, b + args.batch_size)]
    train_loader.append([torch.stack([c[v] for c in per_image]) for v in range(sum(args.nmb_crops))])

print("crops", [tuple(t.shape) for t in train_loader[0]])
idx_crops = torch.cumsum(torch.unique_consecutive(
    torch.tensor([inp.shape[-1] for inp in train_loader[0]]), return_counts=True)[1], 0)
print("idx_crops", idx_crops, idx_crops.dtype, [int(e) for e in idx_crops])
print("unique_consecutive", torch.unique_consecutive(torch.tensor([16, 16, 8, 8, 16]), return_counts=True,
                                                      return_inverse=True))
print("dist", dist.is_available() and dist.is_initialized())

fix_random_seeds()
torch.backends.cudnn.benchmark = True
model = resnet_small(normalize=True, hidden_mlp=args.hidden_mlp, output_dim=args.feat_dim,
                     nmb_prototypes=args.nmb_prototypes)
print("kaiming fan_out", f"{model.conv1.weight.std().item():.2f}")
load_numpy(model, 1)
multi = resnet_small(normalize=True, hidden_mlp=args.hidden_mlp, output_dim=args.feat_dim, nmb_prototypes=[5, 3])
load_numpy(multi, 2)
multi.eval()
emb_m, out_m = multi(train_loader[0][:2])
print("multi prototypes", tuple(emb_m.shape), [tuple(o.shape) for o in out_m], fmt(out_m[1]))
model = nn.DataParallel(model)
print("module", type(model.module).__name__, list(model.state_dict())[:2])

optimizer = torch.optim.SGD(model.parameters(), lr=args.base_lr, momentum=0.9, weight_decay=args.wd)
warmup_lr_schedule = np.linspace(args.start_warmup, args.base_lr, len(train_loader) * args.warmup_epochs)
iters = np.arange(len(train_loader) * (args.epochs - args.warmup_epochs))
cosine_lr_schedule = np.array([args.final_lr + 0.5 * (args.base_lr - args.final_lr) * (
    1 + math.cos(math.pi * t / (len(train_loader) * (args.epochs - args.warmup_epochs)))) for t in iters])
lr_schedule = np.concatenate((warmup_lr_schedule, cosine_lr_schedule))
print("lr_schedule", [f"{v:.4f}" for v in lr_schedule])

# sinkhorn on its own: the columns of the assignment sum to one
q_test = distributed_sinkhorn(torch.from_numpy(rng.normal(0, 0.1, (6, 5)).astype(np.float32)))
print("sinkhorn", tuple(q_test.shape), fmt(q_test), fmt(q_test.sum(dim=1), 6), fmt(q_test.sum(dim=0), 5))


def train(train_loader, model, optimizer, epoch, lr_schedule, queue):
    losses = AverageMeter()
    model.train()
    use_the_queue = False
    for it, inputs in enumerate(train_loader):
        # update learning rate
        iteration = epoch * len(train_loader) + it
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr_schedule[iteration]

        # normalize the prototypes
        with torch.no_grad():
            w = model.module.prototypes.weight.data.clone()
            w = nn.functional.normalize(w, dim=1, p=2)
            model.module.prototypes.weight.copy_(w)

        # ============ multi-res forward passes ... ============
        embedding, output = model(inputs)
        embedding = embedding.detach()
        bs = inputs[0].size(0)

        # ============ swav loss ... ============
        loss = 0
        for i, crop_id in enumerate(args.crops_for_assign):
            with torch.no_grad():
                out = output[bs * crop_id: bs * (crop_id + 1)].detach()

                # time to use the queue
                if queue is not None:
                    if use_the_queue or not torch.all(queue[i, -1, :] == 0):
                        use_the_queue = True
                        out = torch.cat((torch.mm(
                            queue[i],
                            model.module.prototypes.weight.t()
                        ), out))
                    # fill the queue
                    queue[i, bs:] = queue[i, :-bs].clone()
                    queue[i, :bs] = embedding[crop_id * bs: (crop_id + 1) * bs]

                # get assignments
                q = distributed_sinkhorn(out)[-bs:]

            # cluster assignment prediction
            subloss = 0
            for v in np.delete(np.arange(np.sum(args.nmb_crops)), crop_id):
                x = output[bs * v: bs * (v + 1)] / args.temperature
                subloss -= torch.mean(torch.sum(q * F.log_softmax(x, dim=1), dim=1))
            loss += subloss / (np.sum(args.nmb_crops) - 1)
        loss /= len(args.crops_for_assign)

        # ============ backward and optim step ... ============
        optimizer.zero_grad()
        loss.backward()
        # cancel gradients for the prototypes
        if iteration < args.freeze_prototypes_niters:
            for name, p in model.named_parameters():
                if "prototypes" in name:
                    p.grad = None
        optimizer.step()

        # ============ misc ... ============
        losses.update(loss.item(), inputs[0].size(0))
        print("Epoch: [{0}][{1}]\tLoss {loss.val:.4f} ({loss.avg:.4f})\tLr: {lr:.4f}\tqueue {q}".format(
            epoch, it, loss=losses, lr=optimizer.optim_lr if hasattr(optimizer, "optim_lr")
            else optimizer.param_groups[0]["lr"], q=use_the_queue))
    return (epoch, losses.avg), queue


queue = None
queue_path = os.path.join(".", "queue0.pth")
to_restore = {"epoch": 0}
restart_from_checkpoint(os.path.join(".", "checkpoint.pth.tar"), run_variables=to_restore,
                        state_dict=model, optimizer=optimizer)
start_epoch = to_restore["epoch"]
for epoch in range(start_epoch, args.epochs):
    # optionally starts a queue
    if args.queue_length > 0 and epoch >= args.epoch_queue_starts and queue is None:
        queue = torch.zeros(
            len(args.crops_for_assign),
            args.queue_length // args.world_size,
            args.feat_dim,
        )
    scores, queue = train(train_loader, model, optimizer, epoch, lr_schedule, queue)
    print("epoch", scores[0], f"{scores[1]:.4f}", "queue", None if queue is None else fmt(queue[1, 0]))
    save_dict = {
        "epoch": epoch + 1,
        "state_dict": model.state_dict(),
        "optimizer": optimizer.state_dict(),
    }
    torch.save(save_dict, os.path.join(".", "checkpoint.pth.tar"))
    if queue is not None:
        torch.save({"queue": queue}, queue_path)

# a restart reads the last checkpoint and queue back
to_restore = {"epoch": 0}
fresh = nn.DataParallel(resnet_small(normalize=True, hidden_mlp=args.hidden_mlp, output_dim=args.feat_dim,
                                     nmb_prototypes=args.nmb_prototypes))
fresh_opt = torch.optim.SGD(fresh.parameters(), lr=args.base_lr, momentum=0.9, weight_decay=args.wd)
try:
    restart_from_checkpoint(os.path.join(".", "checkpoint.pth.tar"), run_variables=to_restore,
                            state_dict=fresh, optimizer=fresh_opt, amp=None)
except pickle.UnpicklingError as e:
    # the optimizer's lr is lr_schedule[iteration], a numpy float64, which
    # torch.load's weights_only default refuses
    print("UnpicklingError", "Weights only load failed" in str(e), "GLOBAL numpy._core.multiarray.scalar" in str(e))
    with torch.serialization.safe_globals([np._core.multiarray.scalar, np.dtype, np.dtypes.Float64DType]):
        restart_from_checkpoint(os.path.join(".", "checkpoint.pth.tar"), run_variables=to_restore,
                                state_dict=fresh, optimizer=fresh_opt, amp=None)
restored_queue = torch.load(queue_path)["queue"]
print("restored", to_restore["epoch"], torch.equal(restored_queue, queue),
      torch.equal(fresh.module.prototypes.weight, model.module.prototypes.weight),
      [f"{g['lr']:.4f}" for g in fresh_opt.param_groups], type(fresh_opt.param_groups[0]["lr"]).__name__,
      len(fresh_opt.state))

print("lr type", type(optimizer.param_groups[0]["lr"]).__name__)
print("prototype norms", fmt(model.module.prototypes.weight.norm(dim=1), 3),
      "momentum", fmt(optimizer.state[model.module.prototypes.weight]["momentum_buffer"]))
print("params", fmt(model.module.conv1.weight), fmt(model.module.projection_head[3].weight),
      fmt(model.module.layer2[0].bn2.running_var))


# one training step under torch.compile against the same step eagerly
def train_step(inputs, queue):
    with torch.no_grad():
        w = model.module.prototypes.weight.data.clone()
        w = nn.functional.normalize(w, dim=1, p=2)
        model.module.prototypes.weight.copy_(w)
    embedding, output = model(inputs)
    bs = inputs[0].size(0)
    loss = 0
    for i, crop_id in enumerate(args.crops_for_assign):
        with torch.no_grad():
            out = output[bs * crop_id: bs * (crop_id + 1)].detach()
            out = torch.cat((torch.mm(queue[i], model.module.prototypes.weight.t()), out))
            q = distributed_sinkhorn(out)[-bs:]
        subloss = 0
        for v in np.delete(np.arange(np.sum(args.nmb_crops)), crop_id):
            x = output[bs * v: bs * (v + 1)] / args.temperature
            subloss -= torch.mean(torch.sum(q * F.log_softmax(x, dim=1), dim=1))
        loss += subloss / (np.sum(args.nmb_crops) - 1)
    loss /= len(args.crops_for_assign)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(train_loader[k], queue).item() for k in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(train_loader[k], queue).item() for k in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
