# kornia's README and its "Data augmentation" / "Image filtering" tutorials,
# with kornia itself from PyPI: color conversions, Gaussian blur, Sobel and
# Canny edges, a rotation warp, a seeded AugmentationSequential (flip,
# affine, color jitter, resized crop) on a batch, and the SSIM / PSNR losses
# with a gradient.  Changed for a CPU test: 16x16 random images instead of
# the tutorials' photographs.
import torch
import kornia
import kornia.augmentation as K
import kornia.color as KC
import kornia.filters as KF
import kornia.geometry as KG

torch.manual_seed(0)
img = torch.rand(2, 3, 16, 16)
print(KC.rgb_to_grayscale(img).shape, round(KC.rgb_to_hsv(img).mean().item(), 5),
      round(KC.rgb_to_lab(img).mean().item(), 4))
print(round(KF.gaussian_blur2d(img, (5, 5), (1.5, 1.5)).sum().item(), 4),
      round(KF.sobel(img).mean().item(), 5), round(KF.canny(img)[0].mean().item(), 5))
center = torch.tensor([[8., 8.], [8., 8.]])
M = KG.transform.get_rotation_matrix2d(center, torch.tensor([30., 45.]), torch.ones(2, 2))
print(round(KG.transform.warp_affine(img, M, (16, 16)).sum().item(), 3))
aug = K.AugmentationSequential(
    K.RandomHorizontalFlip(p=0.5),
    K.RandomAffine(degrees=15, p=1.0),
    K.ColorJitter(0.2, 0.2, 0.2, 0.1, p=1.0),
    K.RandomResizedCrop((12, 12)),
    data_keys=["input"],
)
out = aug(img)
print(out.shape, round(out.mean().item(), 5))
x = img.clone().requires_grad_()
loss = kornia.losses.ssim_loss(x, KF.box_blur(img, (3, 3)), 5)
loss.backward()
print(round(loss.item(), 5), round(x.grad.abs().sum().item(), 4))
print(round(kornia.losses.psnr_loss(img, img * 0.9, 1.0).item(), 4))
