"""MONAI, as its tutorials write it.  The 3D segmentation tutorials
(unet_training_array / spleen_segmentation_3d) on synthetic volumes
(monai.data.create_test_image_3d): array and dictionary transforms with
set_determinism, a Dataset and MONAI's DataLoader (MetaTensor batches
through its collate), a 3D UNet trained with DiceLoss, DiceMetric over
sliding-window inference with the post-processing transforms.  Then its
network zoo (monai.networks.nets) forward and backward at small sizes, as
its model cards build them, with its other losses and metrics."""
import numpy as np
import torch

import monai
from monai.data import ArrayDataset, DataLoader, Dataset, create_test_image_3d, decollate_batch
from monai.inferers import sliding_window_inference
from monai.losses import (DiceCELoss, DiceFocalLoss, DiceLoss, FocalLoss, GeneralizedDiceLoss,
                          SSIMLoss, TverskyLoss)
from monai.metrics import ConfusionMatrixMetric, DiceMetric, MeanIoU, ROCAUCMetric, compute_dice
from monai.networks import nets
from monai.networks.layers import Norm
from monai.networks.nets import UNet
from monai.transforms import (Activations, AsDiscrete, Compose, EnsureChannelFirst,
                              EnsureChannelFirstd, RandRotate90, RandSpatialCrop,
                              RandSpatialCropd, ScaleIntensity, ScaleIntensityd)
from monai.utils import set_determinism

set_determinism(seed=0)
print("monai", monai.__version__)

images, segs = [], []
for i in range(6):
    im, seg = create_test_image_3d(24, 24, 24, num_seg_classes=1, channel_dim=-1, rad_max=6,
                                   random_state=np.random.RandomState(i))
    images.append(im[..., 0].astype(np.float32))
    segs.append(seg[..., 0].astype(np.float32))
print("volume", images[0].shape, f"{images[0].sum():.4f}", f"{segs[0].sum():.1f}")

train_imtrans = Compose([ScaleIntensity(), EnsureChannelFirst(channel_dim="no_channel"),
                         RandSpatialCrop((16, 16, 16), random_size=False),
                         RandRotate90(prob=0.5, spatial_axes=(0, 2))])
train_segtrans = Compose([EnsureChannelFirst(channel_dim="no_channel"),
                          RandSpatialCrop((16, 16, 16), random_size=False),
                          RandRotate90(prob=0.5, spatial_axes=(0, 2))])
ds = ArrayDataset(images[:4], train_imtrans, segs[:4], train_segtrans)
ds.set_random_state(seed=0)
loader = DataLoader(ds, batch_size=2, shuffle=False, num_workers=0)
im, seg = monai.utils.first(loader)
print("batch", type(im).__name__, tuple(im.shape), f"{im.sum().item():.4f}",
      f"{seg.sum().item():.1f}")

torch.manual_seed(0)
model = UNet(spatial_dims=3, in_channels=1, out_channels=1, channels=(4, 8, 16),
             strides=(2, 2), num_res_units=2, norm=Norm.BATCH)
print("params", sum(p.numel() for p in model.parameters()))
loss_fn = DiceLoss(sigmoid=True)
# (SGD, not the tutorial's Adam: the convolutions' biases feed BatchNorm, so
# their gradients are rounding noise, which Adam scales up to full steps)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
for epoch in range(2):
    model.train()
    for im, seg in loader:
        opt.zero_grad()
        out = model(im)
        loss = loss_fn(out, seg)
        loss.backward()
        opt.step()
        print("epoch", epoch, f"loss {loss.item():.5f}")

# validation: sliding-window inference and the post transforms
val_ds = ArrayDataset(images[4:], Compose([ScaleIntensity(),
                                           EnsureChannelFirst(channel_dim="no_channel")]),
                      segs[4:], EnsureChannelFirst(channel_dim="no_channel"))
val_loader = DataLoader(val_ds, batch_size=1)
dice = DiceMetric(include_background=True, reduction="mean", get_not_nans=False)
post = Compose([Activations(sigmoid=True), AsDiscrete(threshold=0.5)])
model.eval()
with torch.no_grad():
    for im, seg in val_loader:
        out = sliding_window_inference(im, (16, 16, 16), 2, model, overlap=0.25)
        print("window out", tuple(out.shape), f"{out.sum().item():.3f}")
        outs = [post(o) for o in decollate_batch(out)]
        dice(y_pred=outs, y=decollate_batch(seg))
print("dice", f"{dice.aggregate().item():.5f}")
dice.reset()

# dictionary transforms over a Dataset of dicts, a two-class model with DiceCE
files = [{"img": images[i], "seg": (segs[i] > 0).astype(np.float32)} for i in range(4)]
dtrans = Compose([ScaleIntensityd(keys="img"),
                  EnsureChannelFirstd(keys=["img", "seg"], channel_dim="no_channel"),
                  RandSpatialCropd(keys=["img", "seg"], roi_size=(16, 16, 16),
                                   random_size=False)])
dtrans.set_random_state(seed=1)
dl = DataLoader(Dataset(files, dtrans), batch_size=2)
torch.manual_seed(1)
net = UNet(spatial_dims=3, in_channels=1, out_channels=2, channels=(4, 8), strides=(2,),
           num_res_units=1, norm=Norm.INSTANCE, dropout=0.1)
dce = DiceCELoss(to_onehot_y=True, softmax=True)
focal = FocalLoss(to_onehot_y=True, gamma=2.0)
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
for batch in dl:
    img, sg = batch["img"], batch["seg"]
    print("meta", type(img).__name__, img.meta.get("spatial_shape") is not None
          if hasattr(img, "meta") else None)
    opt.zero_grad()
    logits = net(img)
    l1, l2 = dce(logits, sg), focal(logits, sg)
    (l1 + l2).backward()
    opt.step()
    print(f"dice-ce {l1.item():.5f} focal {l2.item():.5f}")
post2 = AsDiscrete(argmax=True, to_onehot=2)
print("argmax", post2(logits[0]).sum(dim=(1, 2, 3)).tolist())


# --- the network zoo ---------------------------------------------------------
set_determinism(seed=0)


def report(name, net, x, target_fn=None):
    torch.manual_seed(0)
    out = net(x)
    out = out[0] if isinstance(out, (tuple, list)) else out
    loss = out.float().pow(2).mean()
    loss.backward()
    grads = sum(p.grad.abs().sum().item() for p in net.parameters() if p.grad is not None)
    print(f"{name:<16} {tuple(out.shape)} out {out.sum().item():.4f} "
          f"params {sum(p.numel() for p in net.parameters())} grad {grads:.4f}")


torch.manual_seed(0)
img2 = torch.randn(2, 1, 32, 32)
img3 = torch.randn(2, 1, 16, 16, 16)
img64 = torch.randn(1, 1, 64, 64)
cases = [
    ("BasicUNet", lambda: nets.BasicUNet(spatial_dims=2, in_channels=1, out_channels=2,
                                         features=(4, 4, 8, 8, 16, 4)), img2),
    ("SegResNet", lambda: nets.SegResNet(spatial_dims=2, init_filters=8, in_channels=1,
                                         out_channels=2, blocks_down=(1, 1, 1),
                                         blocks_up=(1, 1)), img2),
    ("SegResNetVAE", lambda: nets.SegResNetVAE(input_image_size=(32, 32), spatial_dims=2,
                                               init_filters=8, in_channels=1, out_channels=2,
                                               blocks_down=(1, 1, 1), blocks_up=(1, 1)), img2),
    ("DynUNet", lambda: nets.DynUNet(2, 1, 2, kernel_size=[3, 3, 3], strides=[1, 2, 2],
                                     upsample_kernel_size=[2, 2], filters=[4, 8, 16],
                                     deep_supervision=False, res_block=True), img2),
    ("AttentionUnet", lambda: nets.AttentionUnet(2, 1, 2, channels=(4, 8, 16),
                                                 strides=(2, 2)), img2),
    ("UNETR", lambda: nets.UNETR(in_channels=1, out_channels=2, img_size=(32, 32),
                                 feature_size=4, hidden_size=32, mlp_dim=64, num_heads=4,
                                 spatial_dims=2), img2),
    ("SwinUNETR", lambda: nets.SwinUNETR(in_channels=1, out_channels=2, feature_size=12,
                                         spatial_dims=2, depths=(1, 1, 1, 1),
                                         num_heads=(3, 3, 3, 3)), img64),
    ("DenseNet121", lambda: nets.DenseNet(spatial_dims=2, in_channels=1, out_channels=3,
                                          init_features=4, growth_rate=4,
                                          block_config=(2, 2)), img2),
    ("ResNet", lambda: nets.resnet10(spatial_dims=3, n_input_channels=1, num_classes=3,
                                     widen_factor=0.125), img3),
    ("AutoEncoder", lambda: nets.AutoEncoder(2, 1, 1, channels=(4, 8), strides=(2, 2),
                                             num_res_units=1), img2),
    ("VarAutoEncoder", lambda: nets.VarAutoEncoder(2, (1, 32, 32), 1, 8, channels=(4, 8),
                                                   strides=(2, 2)), img2),
    ("ViT", lambda: nets.ViT(in_channels=1, img_size=(32, 32), patch_size=(8, 8),
                             hidden_size=32, mlp_dim=64, num_layers=2, num_heads=4,
                             spatial_dims=2, classification=True, num_classes=3), img2),
    ("HighResNet", lambda: nets.HighResNet(spatial_dims=2, in_channels=1, out_channels=2,
                                           layer_params=({"name": "conv_0", "n_features": 4,
                                                          "kernel_size": 3},
                                                         {"name": "res_1", "n_features": 4,
                                                          "kernels": (3, 3), "repeat": 1},
                                                         {"name": "conv_1", "n_features": 8,
                                                          "kernel_size": 1},
                                                         {"name": "conv_2", "kernel_size": 1})),
     img2),
]
for name, make, x in cases:
    torch.manual_seed(0)
    report(name, make(), x)

# losses and metrics on fixed predictions
torch.manual_seed(1)
logits = torch.randn(2, 3, 16, 16, requires_grad=True)
labels = torch.randint(0, 3, (2, 1, 16, 16))
for name, fn in [("GeneralizedDice", GeneralizedDiceLoss(to_onehot_y=True, softmax=True)),
                 ("Tversky", TverskyLoss(to_onehot_y=True, softmax=True, alpha=0.3, beta=0.7)),
                 ("DiceFocal", DiceFocalLoss(to_onehot_y=True, softmax=True))]:
    loss = fn(logits, labels)
    (g,) = torch.autograd.grad(loss, logits)
    print(f"{name} {loss.item():.6f} grad {g.abs().sum().item():.6f}")
ssim = SSIMLoss(spatial_dims=2, data_range=1.0)
a, b = torch.rand(2, 1, 16, 16), torch.rand(2, 1, 16, 16)
print(f"ssim {ssim(a, b).item():.6f}")

pred = torch.nn.functional.one_hot(logits.argmax(1), 3).permute(0, 3, 1, 2).float()
onehot = torch.nn.functional.one_hot(labels[:, 0], 3).permute(0, 3, 1, 2).float()
print("dice", compute_dice(pred, onehot, include_background=True).tolist())
iou = MeanIoU(include_background=False)
iou(pred, onehot)
print(f"iou {iou.aggregate().item():.6f}")
cm = ConfusionMatrixMetric(metric_name=["sensitivity", "precision", "f1 score"])
cm(pred, onehot)
print("confusion", [f"{v.item():.6f}" for v in cm.aggregate()])
auc = ROCAUCMetric()
auc(torch.sigmoid(logits.detach()[:, 0].reshape(-1, 1)[:50]),
    (labels.reshape(-1, 1)[:50] == 0).long())
print(f"auc {auc.aggregate():.6f}")
