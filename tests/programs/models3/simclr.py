# sthalles/SimCLR (simclr.py: the SimCLR trainer's info_nce_loss with its
# boolean-mask indexing of the similarity matrix, the training loop with
# GradScaler / autocast (disabled without CUDA), SummaryWriter logging,
# CosineAnnealingLR after warmup, save_checkpoint; utils.py's accuracy with
# topk; models/resnet_simclr.py's projection head replacing the backbone's
# fc) with a small CNN backbone in place of torchvision's resnet18 (whose
# compiled ops are not installed here), no yaml config file, and two views
# made by adding fixed numpy noise instead of random crops and colour
# jitter.  Weights and data come from numpy so tracec and torch compute the
# same numbers.  Then the training step under torch.compile.
import copy
import logging
import os
import shutil

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.cuda.amp import GradScaler, autocast
from torch.utils.tensorboard import SummaryWriter

torch.manual_seed(0)


# --- utils.py -----------------------------------------------------------------
def save_checkpoint(state, is_best, filename='checkpoint.pth.tar'):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, 'model_best.pth.tar')


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


# --- models/resnet_simclr.py (a small backbone for resnet18) -------------------
class SmallBackbone(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)))
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


class ResNetSimCLR(nn.Module):

    def __init__(self, base_model, out_dim):
        super(ResNetSimCLR, self).__init__()
        self.resnet_dict = {"resnet18": SmallBackbone(num_classes=out_dim)}

        self.backbone = self._get_basemodel(base_model)
        dim_mlp = self.backbone.fc.in_features

        # add mlp projection head
        self.backbone.fc = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.backbone.fc)

    def _get_basemodel(self, model_name):
        try:
            model = self.resnet_dict[model_name]
        except KeyError:
            raise ValueError("Invalid backbone architecture. Check the config file and pass one of: resnet18 or resnet50")
        else:
            return model

    def forward(self, x):
        return self.backbone(x)


# --- simclr.py ----------------------------------------------------------------
class SimCLR(object):

    def __init__(self, *args, **kwargs):
        self.args = kwargs['args']
        self.model = kwargs['model'].to(self.args.device)
        self.optimizer = kwargs['optimizer']
        self.scheduler = kwargs['scheduler']
        self.writer = SummaryWriter(log_dir='runs')
        logging.basicConfig(filename=os.path.join(self.writer.log_dir, 'training.log'), level=logging.DEBUG)
        self.criterion = torch.nn.CrossEntropyLoss().to(self.args.device)

    def info_nce_loss(self, features):

        labels = torch.cat([torch.arange(self.args.batch_size) for i in range(self.args.n_views)], dim=0)
        labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
        labels = labels.to(self.args.device)

        features = F.normalize(features, dim=1)

        similarity_matrix = torch.matmul(features, features.T)
        # assert similarity_matrix.shape == (
        #     self.args.n_views * self.args.batch_size, self.args.n_views * self.args.batch_size)
        # assert similarity_matrix.shape == labels.shape

        # discard the main diagonal from both: labels and similarities matrix
        mask = torch.eye(labels.shape[0], dtype=torch.bool).to(self.args.device)
        labels = labels[~mask].view(labels.shape[0], -1)
        similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)
        # assert similarity_matrix.shape == labels.shape

        # select and combine multiple positives
        positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)

        # select only the negatives the negatives
        negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)

        logits = torch.cat([positives, negatives], dim=1)
        labels = torch.zeros(logits.shape[0], dtype=torch.long).to(self.args.device)

        logits = logits / self.args.temperature
        return logits, labels

    def train(self, train_loader):

        scaler = GradScaler(enabled=self.args.fp16_precision)

        # save config file
        # save_config_file(self.writer.log_dir, self.args)

        n_iter = 0
        logging.info(f"Start SimCLR training for {self.args.epochs} epochs.")
        logging.info(f"Training with gpu: {self.args.disable_cuda}.")

        for epoch_counter in range(self.args.epochs):
            for images, _ in train_loader:
                images = torch.cat(images, dim=0)

                images = images.to(self.args.device)

                with autocast(enabled=self.args.fp16_precision):
                    features = self.model(images)
                    logits, labels = self.info_nce_loss(features)
                    loss = self.criterion(logits, labels)

                self.optimizer.zero_grad()

                scaler.scale(loss).backward()

                scaler.step(self.optimizer)
                scaler.update()

                if n_iter % self.args.log_every_n_steps == 0:
                    top1, top5 = accuracy(logits, labels, topk=(1, 5))
                    self.writer.add_scalar('loss', loss, global_step=n_iter)
                    self.writer.add_scalar('acc/top1', top1[0], global_step=n_iter)
                    self.writer.add_scalar('acc/top5', top5[0], global_step=n_iter)
                    self.writer.add_scalar('learning_rate', self.scheduler.get_lr()[0], global_step=n_iter)
                    print(f"Step {n_iter}\tLoss: {loss.item():.6f}\tTop1: {top1[0].item():.2f}\tTop5: {top5[0].item():.2f}")

                n_iter += 1

            # warmup for the first 10 epochs
            if epoch_counter >= 1:
                self.scheduler.step()
            logging.debug(f"Epoch: {epoch_counter}\tLoss: {loss}\tTop1 accuracy: {top1[0]}")
            print(f"Epoch: {epoch_counter}\tLoss: {loss.item():.6f}\tTop1 accuracy: {top1[0].item():.2f}"
                  f"\tlr: {self.scheduler.get_last_lr()[0]:.6f}")

        logging.info("Training has finished.")
        # save model checkpoints
        checkpoint_name = 'checkpoint_{:04d}.pth.tar'.format(self.args.epochs)
        save_checkpoint({
            'epoch': self.args.epochs,
            'arch': self.args.arch,
            'state_dict': self.model.state_dict(),
            'optimizer': self.optimizer.state_dict(),
        }, is_best=False, filename=os.path.join(self.writer.log_dir, checkpoint_name))
        logging.info(f"Model checkpoint and metadata has been saved at {self.writer.log_dir}.")
        return os.path.join(self.writer.log_dir, checkpoint_name)


class Args:
    device = torch.device('cpu')
    batch_size = 6
    n_views = 2
    temperature = 0.07
    fp16_precision = False
    epochs = 3
    log_every_n_steps = 1
    disable_cuda = True
    arch = 'resnet18'
    out_dim = 8
    lr = 0.0003
    weight_decay = 1e-4


args = Args()
rng = np.random.default_rng(0)
base = rng.standard_normal((12, 3, 16, 16)).astype(np.float32)
views = [base + 0.3 * rng.standard_normal(base.shape).astype(np.float32) for _ in range(args.n_views)]
dataset = [([torch.from_numpy(v[i]) for v in views], 0) for i in range(len(base))]
train_loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=False,
                                           drop_last=True)

model = ResNetSimCLR(base_model=args.arch, out_dim=args.out_dim)
g = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() > 1:
            p.copy_(torch.from_numpy((g.standard_normal(p.shape) / np.sqrt(p[0].numel() / 2)).astype(np.float32)))
        elif "features.1" in name or "features.5" in name:
            p.copy_(torch.from_numpy((float(name.endswith("weight")) + 0.1 * g.standard_normal(p.shape)).astype(np.float32)))
        else:
            p.copy_(torch.from_numpy((0.1 * g.standard_normal(p.shape)).astype(np.float32)))
print(model.backbone.fc)

optimizer = torch.optim.Adam(model.parameters(), args.lr, weight_decay=args.weight_decay)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(train_loader), eta_min=0,
                                                       last_epoch=-1)

simclr = SimCLR(model=model, optimizer=optimizer, scheduler=scheduler, args=args)
feats = model(torch.cat(next(iter(train_loader))[0], dim=0))
logits, labels = simclr.info_nce_loss(feats)
print("logits", tuple(logits.shape), labels.tolist(), [f"{v:.5f}" for v in logits[0].tolist()])
loss = simclr.criterion(logits, labels)
loss.backward()
print(f"loss {loss.item():.6f}")
for name, p in model.named_parameters():
    print(f"grad {name} {p.grad.norm().item():.5e}")
optimizer.zero_grad()

path = simclr.train(train_loader)
ckpt = torch.load(path, weights_only=False)
print("checkpoint", ckpt['epoch'], ckpt['arch'], len(ckpt['state_dict']),
      sorted(ckpt['optimizer'].keys()), os.path.basename(path))
print("logged:", os.path.exists(os.path.join('runs', 'training.log')),
      any(f.startswith('events.out.tfevents') for f in os.listdir('runs')))


def train_step(images):
    features = model(images)
    logits, labels = simclr.info_nce_loss(features)
    loss = simclr.criterion(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


images = torch.cat(next(iter(train_loader))[0], dim=0)
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(images).item() for _ in range(2)]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(images).item() for _ in range(2)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
