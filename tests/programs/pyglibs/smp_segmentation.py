"""segmentation_models_pytorch as its README and examples write it: models
built from an encoder name with encoder_weights=None (no download), its
losses and metrics, a short training loop with Adam, and each architecture
forward and backward at a small size."""
import torch

import segmentation_models_pytorch as smp

torch.manual_seed(0)
model = smp.Unet(encoder_name="resnet18", encoder_weights=None, in_channels=3, classes=3)
print(type(model.encoder).__name__, sum(p.numel() for p in model.parameters()))
images = torch.randn(4, 3, 32, 32)
masks = torch.randint(0, 3, (4, 32, 32))
dice = smp.losses.DiceLoss(mode="multiclass", from_logits=True)
focal = smp.losses.FocalLoss(mode="multiclass")
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
model.train()
for step in range(2):
    opt.zero_grad()
    logits = model(images)
    loss = dice(logits, masks) + focal(logits, masks)
    loss.backward()
    opt.step()
    print("step", step, f"{loss.item():.5f}")
model.eval()
with torch.no_grad():
    print("eval logits", tuple(model(images).shape))
# (the metrics on fixed predictions: an argmax of a trained model's logits
# flips where two classes tie within rounding)
pred = torch.randint(0, 3, (4, 32, 32))
tp, fp, fn, tn = smp.metrics.get_stats(pred, masks, mode="multiclass", num_classes=3)
for name in ("iou_score", "f1_score", "accuracy", "recall", "precision"):
    for reduction in ("micro", "macro", "micro-imagewise"):
        value = getattr(smp.metrics, name)(tp, fp, fn, tn, reduction=reduction)
        print(name, reduction, f"{value.item():.5f}")

binary = torch.randint(0, 2, (2, 1, 32, 32)).float()
x = torch.randn(2, 3, 32, 32)
for loss in (smp.losses.DiceLoss("binary"), smp.losses.JaccardLoss("binary"),
             smp.losses.TverskyLoss("binary", alpha=0.3, beta=0.7),
             smp.losses.LovaszLoss("binary"), smp.losses.SoftBCEWithLogitsLoss(smooth_factor=0.1),
             smp.losses.MCCLoss()):
    torch.manual_seed(0)
    logit = torch.randn(2, 1, 32, 32, requires_grad=True)
    value = loss(logit if not isinstance(loss, smp.losses.MCCLoss) else logit.sigmoid(), binary)
    (g,) = torch.autograd.grad(value, logit)
    print(type(loss).__name__, f"{value.item():.5f}", f"{g.abs().sum().item():.5f}")

small = "tu-mobilenetv3_small_050"     # (a small timm encoder: the sweep stays fast)
archs = [("Unet", dict(encoder_name=small, decoder_attention_type="scse",
                       decoder_channels=(64, 32, 32, 16, 16))),
         ("UnetPlusPlus", dict(encoder_name=small, decoder_channels=(32, 16, 16, 8, 8))),
         ("FPN", dict(encoder_name=small, decoder_pyramid_channels=32,
                      decoder_segmentation_channels=32)),
         ("Linknet", dict(encoder_name=small)),
         ("PSPNet", dict(encoder_name=small, psp_out_channels=32)),
         ("MAnet", dict(encoder_name=small, decoder_channels=(32, 16, 16, 8, 8))),
         ("DeepLabV3Plus", dict(encoder_name=small, decoder_channels=32)),
         ("UPerNet", dict(encoder_name=small, decoder_channels=32)),
         ("Segformer", dict(encoder_name=small, decoder_segmentation_channels=32)),
         ("Unet", dict(encoder_name="mobilenet_v2", decoder_channels=(32, 16, 16, 8, 8))),
         ("FPN", dict(encoder_name="tu-resnet18", decoder_pyramid_channels=32,
                      decoder_segmentation_channels=32)),
         ("Unet", dict(encoder_name=small, decoder_channels=(32, 16, 16, 8, 8),
                       aux_params=dict(classes=4, dropout=0.0)))]
x = torch.randn(2, 3, 64, 64)
for arch, kw in archs:
    torch.manual_seed(0)
    net = smp.create_model(arch, encoder_weights=None, classes=2, **kw)
    out = net(x)
    out, aux = out if isinstance(out, tuple) else (out, None)
    out.tanh().mean().backward()
    g = sum(p.grad.abs().sum().item() for p in net.parameters() if p.grad is not None)
    print(arch, kw["encoder_name"], tuple(out.shape), f"{out.sum().item():.4f}", f"{g:.4f}",
          None if aux is None else tuple(aux.shape))
