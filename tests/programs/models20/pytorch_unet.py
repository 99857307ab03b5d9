# milesial/Pytorch-UNet the way its files write it: unet/unet_parts.py
# (DoubleConv with mid_channels and bias=False convolutions, Down as
# MaxPool2d + DoubleConv, Up with bilinear Upsample(align_corners=True) or
# ConvTranspose2d, the F.pad of x1 by diffX // 2, diffX - diffX // 2, ... to
# x2's size, torch.cat([x2, x1], dim=1), OutConv), unet/unet_model.py (UNet
# with factor = 2 if bilinear else 1, the modules in parentheses),
# utils/dice_score.py (dice_coeff with sum_dim and torch.where(sets_sum == 0,
# inter, sets_sum), multiclass_dice_coeff over flatten(0, 1), dice_loss),
# train.py (RMSprop(lr, weight_decay, momentum, foreach=True),
# ReduceLROnPlateau('max', patience), GradScaler(enabled=amp), CrossEntropy
# or BCEWithLogits plus the dice loss over F.softmax / F.sigmoid and
# F.one_hot(...).permute(0, 3, 1, 2).float(), torch.autocast(enabled=False),
# zero_grad(set_to_none=True), scale / unscale_ / clip_grad_norm_ / step /
# update, images moved with memory_format=torch.channels_last, random_split
# with a seeded Generator, the checkpoint with 'mask_values'), evaluate.py
# (@torch.inference_mode(), argmax one-hot masks, dice over classes 1:) and
# predict.py (F.interpolate back to the full size, argmax or the sigmoid
# threshold, mask_to_image). Changes for a CPU test: 18x18 images (odd
# sizes after pooling, so the F.pad runs), channel widths 4..64 instead of
# 64..1024, weights and data from numpy, a few steps; then one training step
# under torch.compile against the same step eagerly.
import copy
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor
from torch import optim
from torch.utils.data import DataLoader, Dataset, random_split


# ---- unet/unet_parts.py
class DoubleConv(nn.Module):
    """(convolution => [BN] => ReLU) * 2"""

    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True)
        )

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    """Downscaling with maxpool then double conv"""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(
            nn.MaxPool2d(2),
            DoubleConv(in_channels, out_channels)
        )

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    """Upscaling then double conv"""

    def __init__(self, in_channels, out_channels, bilinear=True):
        super().__init__()

        # if bilinear, use the normal convolutions to reduce the number of channels
        if bilinear:
            self.up = nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        # input is CHW
        diffY = x2.size()[2] - x1.size()[2]
        diffX = x2.size()[3] - x1.size()[3]

        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2,
                        diffY // 2, diffY - diffY // 2])
        # if you have padding issues, see
        # https://github.com/HaiyongJiang/U-Net-Pytorch-Unstructured-Buggy/commit/0e854509c2cea854e247a9c615f175f76fbb2e3a
        # https://github.com/xiaopeng-liao/Pytorch-UNet/commit/8ebac70e633bac59fc22bb5195e513d5832fb3bd
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class OutConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super(OutConv, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        return self.conv(x)


# ---- unet/unet_model.py (widths / 16)
class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, bilinear=False):
        super(UNet, self).__init__()
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.bilinear = bilinear

        self.inc = (DoubleConv(n_channels, 4))
        self.down1 = (Down(4, 8))
        self.down2 = (Down(8, 16))
        self.down3 = (Down(16, 32))
        factor = 2 if bilinear else 1
        self.down4 = (Down(32, 64 // factor))
        self.up1 = (Up(64, 32 // factor, bilinear))
        self.up2 = (Up(32, 16 // factor, bilinear))
        self.up3 = (Up(16, 8 // factor, bilinear))
        self.up4 = (Up(8, 4, bilinear))
        self.outc = (OutConv(4, n_classes))

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x5 = self.down4(x4)
        x = self.up1(x5, x4)
        x = self.up2(x, x3)
        x = self.up3(x, x2)
        x = self.up4(x, x1)
        logits = self.outc(x)
        return logits


# ---- utils/dice_score.py
def dice_coeff(input: Tensor, target: Tensor, reduce_batch_first: bool = False, epsilon: float = 1e-6):
    # Average of Dice coefficient for all batches, or for a single mask
    assert input.size() == target.size()
    assert input.dim() == 3 or not reduce_batch_first

    sum_dim = (-1, -2) if input.dim() == 2 or not reduce_batch_first else (-1, -2, -3)

    inter = 2 * (input * target).sum(dim=sum_dim)
    sets_sum = input.sum(dim=sum_dim) + target.sum(dim=sum_dim)
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)

    dice = (inter + epsilon) / (sets_sum + epsilon)
    return dice.mean()


def multiclass_dice_coeff(input: Tensor, target: Tensor, reduce_batch_first: bool = False, epsilon: float = 1e-6):
    # Average of Dice coefficient for all classes
    return dice_coeff(input.flatten(0, 1), target.flatten(0, 1), reduce_batch_first, epsilon)


def dice_loss(input: Tensor, target: Tensor, multiclass: bool = False):
    # Dice loss (objective to minimize) between 0 and 1
    fn = multiclass_dice_coeff if multiclass else dice_coeff
    return 1 - fn(input, target, reduce_batch_first=True)


# ---- utils/data_loading.py, the images made by numpy
class BasicDataset(Dataset):
    def __init__(self, images, masks, scale: float = 1.0, mask_suffix: str = ''):
        assert 0 < scale <= 1, 'Scale must be between 0 and 1'
        self.images, self.masks = images, masks
        self.ids = list(range(len(images)))
        self.mask_values = list(sorted(np.unique(np.concatenate([np.unique(m) for m in masks])).tolist()))

    def __len__(self):
        return len(self.ids)

    @staticmethod
    def preprocess(mask_values, img, scale, is_mask):
        if is_mask:
            mask = np.zeros(img.shape, dtype=np.int64)
            for i, v in enumerate(mask_values):
                mask[img == v] = i
            return mask
        else:
            img = img[np.newaxis, ...] if img.ndim == 2 else img.transpose((2, 0, 1))
            if (img > 1).any():
                img = img / 255.0
            return img

    def __getitem__(self, idx):
        img = self.preprocess(self.mask_values, self.images[idx], 1.0, is_mask=False)
        mask = self.preprocess(self.mask_values, self.masks[idx], 1.0, is_mask=True)
        return {
            'image': torch.as_tensor(img.copy()).float().contiguous(),
            'mask': torch.as_tensor(mask.copy()).long().contiguous()
        }


# ---- evaluate.py
@torch.inference_mode()
def evaluate(net, dataloader, device, amp):
    net.eval()
    num_val_batches = len(dataloader)
    dice_score = 0

    # iterate over the validation set
    with torch.autocast(device.type if device.type != 'mps' else 'cpu', enabled=amp):
        for batch in dataloader:
            image, mask_true = batch['image'], batch['mask']

            # move images and labels to correct device and type
            image = image.to(device=device, dtype=torch.float32, memory_format=torch.channels_last)
            mask_true = mask_true.to(device=device, dtype=torch.long)

            # predict the mask
            mask_pred = net(image)

            if net.n_classes == 1:
                assert mask_true.min() >= 0 and mask_true.max() <= 1, 'True mask indices should be in [0, 1]'
                mask_pred = (F.sigmoid(mask_pred) > 0.5).float()
                # compute the Dice score
                dice_score += dice_coeff(mask_pred, mask_true, reduce_batch_first=False)
            else:
                assert mask_true.min() >= 0 and mask_true.max() < net.n_classes, 'True mask indices should be in [0, n_classes['
                # convert to one-hot format
                mask_true = F.one_hot(mask_true, net.n_classes).permute(0, 3, 1, 2).float()
                mask_pred = F.one_hot(mask_pred.argmax(dim=1), net.n_classes).permute(0, 3, 1, 2).float()
                # compute the Dice score, ignoring background
                dice_score += multiclass_dice_coeff(mask_pred[:, 1:], mask_true[:, 1:], reduce_batch_first=False)

    net.train()
    return dice_score / max(num_val_batches, 1)


def load_numpy(module, r, std=0.3):
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() == 1 and "conv" in name and name.endswith("weight"):    # batch norm
                p.copy_(torch.from_numpy(1 + r.normal(0, 0.05, tuple(p.shape)).astype(np.float32)))
            else:
                p.copy_(torch.from_numpy(r.normal(0, std, tuple(p.shape)).astype(np.float32)))


r = np.random.default_rng(0)
yy, xx = np.mgrid[0:18, 0:18]
imgs, masks = [], []
for k in range(10):
    cy, cx, rad = r.integers(5, 13), r.integers(5, 13), r.integers(3, 6)
    disk = ((yy - cy) ** 2 + (xx - cx) ** 2 < rad ** 2)
    band = (np.abs(yy - xx + r.integers(-4, 4)) < 2) & ~disk
    mask = np.where(disk, 255, np.where(band, 128, 0)).astype(np.uint8)
    img = np.stack([disk * 180 + band * 90, disk * 60 + band * 200, np.full_like(disk, 40, dtype=np.int64)], -1)
    imgs.append((img + r.integers(0, 50, img.shape)).astype(np.uint8))
    masks.append(mask)

device = torch.device('cpu')
dataset = BasicDataset(imgs, masks)
print("mask values", dataset.mask_values, len(dataset), dataset[0]['image'].dtype, tuple(dataset[0]['image'].shape),
      dataset[0]['mask'].dtype)

# 2. Split into train / validation partitions
val_percent = 0.2
n_val = int(len(dataset) * val_percent)
n_train = len(dataset) - n_val
train_set, val_set = random_split(dataset, [n_train, n_val], generator=torch.Generator().manual_seed(0))
print("split", len(train_set), len(val_set), "[rng]", sorted(val_set.indices))

# 3. Create data loaders (in order: the split's draws differ between generators)
loader_args = dict(batch_size=4, num_workers=0, pin_memory=True)
train_loader = DataLoader(torch.utils.data.Subset(dataset, list(range(8))), shuffle=False, **loader_args)
val_loader = DataLoader(torch.utils.data.Subset(dataset, [8, 9]), shuffle=False, drop_last=True, **loader_args)

for bilinear, n_classes in ((False, 3), (True, 1)):
    model = UNet(n_channels=3, n_classes=n_classes, bilinear=bilinear)
    model = model.to(memory_format=torch.channels_last)
    load_numpy(model, r)
    print(f'Network:\n\t{model.n_channels} input channels\n\t{model.n_classes} output channels (classes)\n\t'
          f'{"Bilinear" if model.bilinear else "Transposed conv"} upscaling',
          sum(p.numel() for p in model.parameters()), type(model.up1.up).__name__)
    model.to(device=device)

    learning_rate, weight_decay, momentum, gradient_clipping, amp = 1e-5, 1e-8, 0.999, 1.0, False
    # 4. Set up the optimizer, the loss, the learning rate scheduler and the loss scaling for AMP
    optimizer = optim.RMSprop(model.parameters(),
                              lr=learning_rate, weight_decay=weight_decay, momentum=momentum, foreach=True)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, 'max', patience=1)  # goal: maximize Dice score
    grad_scaler = torch.cuda.amp.GradScaler(enabled=amp)
    criterion = nn.CrossEntropyLoss() if model.n_classes > 1 else nn.BCEWithLogitsLoss()
    global_step = 0

    # 5. Begin training
    for epoch in range(1, 3):
        model.train()
        epoch_loss = 0
        for batch in train_loader:
            images, true_masks = batch['image'], batch['mask']
            if model.n_classes == 1:
                true_masks = (true_masks == 2).long()

            assert images.shape[1] == model.n_channels, \
                f'Network has been defined with {model.n_channels} input channels, ' \
                f'but loaded images have {images.shape[1]} channels. Please check that ' \
                'the images are loaded correctly.'

            images = images.to(device=device, dtype=torch.float32, memory_format=torch.channels_last)
            true_masks = true_masks.to(device=device, dtype=torch.long)

            with torch.autocast(device.type if device.type != 'mps' else 'cpu', enabled=amp):
                masks_pred = model(images)
                if model.n_classes == 1:
                    loss = criterion(masks_pred.squeeze(1), true_masks.float())
                    loss += dice_loss(F.sigmoid(masks_pred.squeeze(1)), true_masks.float(), multiclass=False)
                else:
                    loss = criterion(masks_pred, true_masks)
                    loss += dice_loss(
                        F.softmax(masks_pred, dim=1).float(),
                        F.one_hot(true_masks, model.n_classes).permute(0, 3, 1, 2).float(),
                        multiclass=True
                    )

            optimizer.zero_grad(set_to_none=True)
            grad_scaler.scale(loss).backward()
            grad_scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), gradient_clipping)
            grad_scaler.step(optimizer)
            grad_scaler.update()

            global_step += 1
            epoch_loss += loss.item()
            print(f"epoch {epoch} step {global_step} train loss {loss.item():.5f}")

        val_score = evaluate(model, val_loader, device, amp)
        scheduler.step(val_score)
        print('Validation Dice score: {}'.format(val_score), 'lr', optimizer.param_groups[0]['lr'],
              scheduler.num_bad_epochs, f"{epoch_loss:.5f}")

    state_dict = model.state_dict()
    state_dict['mask_values'] = dataset.mask_values
    torch.save(state_dict, 'checkpoint_epoch{}.pth'.format(epoch))
print("scaler", grad_scaler.is_enabled(), grad_scaler.get_scale(), os.path.exists('checkpoint_epoch2.pth'))


# ---- predict.py
def predict_img(net, full_img, device, scale_factor=1, out_threshold=0.5):
    net.eval()
    img = torch.from_numpy(BasicDataset.preprocess(None, full_img, scale_factor, is_mask=False))
    img = img.unsqueeze(0)
    img = img.to(device=device, dtype=torch.float32)

    with torch.no_grad():
        output = net(img).cpu()
        output = F.interpolate(output, (full_img.shape[0], full_img.shape[1]), mode='bilinear')
        if net.n_classes > 1:
            mask = output.argmax(dim=1)
        else:
            mask = torch.sigmoid(output) > out_threshold

    return mask[0].long().squeeze().numpy()


def mask_to_image(mask: np.ndarray, mask_values):
    if isinstance(mask_values[0], list):
        out = np.zeros((mask.shape[-2], mask.shape[-1], len(mask_values[0])), dtype=np.uint8)
    elif mask_values == [0, 1]:
        out = np.zeros((mask.shape[-2], mask.shape[-1]), dtype=bool)
    else:
        out = np.zeros((mask.shape[-2], mask.shape[-1]), dtype=np.uint8)

    if mask.ndim == 3:
        mask = np.argmax(mask, axis=0)

    for i, v in enumerate(mask_values):
        out[mask == i] = v

    return out


net = UNet(n_channels=3, n_classes=3, bilinear=False)
state_dict = torch.load('checkpoint_epoch2.pth', map_location=device)
mask_values = state_dict.pop('mask_values', [0, 1])
try:
    net.load_state_dict(state_dict)
except RuntimeError as e:
    print("load error:", str(e).splitlines()[0])
net = UNet(n_channels=3, n_classes=1, bilinear=True)
net.load_state_dict(state_dict)
print("loaded", mask_values)
mask = predict_img(net=net, full_img=imgs[9], scale_factor=1, out_threshold=0.5, device=device)
result = mask_to_image(mask, [0, 1])
print("predicted", mask.shape, mask.dtype, int(mask.sum()), result.dtype, int(result.sum()))

# one training step under torch.compile against the same step eagerly
model = UNet(n_channels=3, n_classes=3, bilinear=False)
load_numpy(model, r)
optimizer = optim.RMSprop(model.parameters(), lr=1e-5, weight_decay=1e-8, momentum=0.999, foreach=True)
criterion = nn.CrossEntropyLoss()


def train_step(images, true_masks):
    masks_pred = model(images)
    loss = criterion(masks_pred, true_masks)
    loss += dice_loss(F.softmax(masks_pred, dim=1).float(),
                      F.one_hot(true_masks, model.n_classes).permute(0, 3, 1, 2).float(), multiclass=True)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


batch = next(iter(train_loader))
images, true_masks = batch['image'], batch['mask']
state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(optimizer.state_dict())
eager = [train_step(images, true_masks).item() for _ in range(2)]
after = {k: v.clone() for k, v in model.state_dict().items()}
model.load_state_dict(state)
optimizer.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(images, true_masks).item() for _ in range(2)]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k].float(), after[k].float(), rtol=1e-4, atol=1e-5) for k in after))
