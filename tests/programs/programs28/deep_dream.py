# DeepDream (eriklindernoren/PyTorch-Deep-Dream, deep_dream.py and
# utils.py), as written: the model cut at a layer,
# nn.Sequential(*list(network.features.children())[: (at_layer + 1)]),
# dream(): model.zero_grad(), loss = out.norm(), loss.backward(), the step
# size normalised by np.abs(image.grad.data.cpu().numpy()).mean(),
# image.data += norm_lr * image.grad.data, clip() against the mean / std,
# image.grad.data.zero_(); deep_dream(): the octave pyramid (the repo's
# scipy.ndimage.zoom done with F.interpolate(mode='bilinear')), the detail
# carried between octaves, deprocess (image * std + mean, clip to [0, 1]).
# The network: a small VGG-like features stack with random weights (the
# repo loads torchvision's vgg19 weights). Written for this test: a 3x16x16
# image, 2 octaves, 3 iterations each; the dream step's gradient compiled
# with torch.autograd.grad and checked against eager.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

mean = np.array([0.485, 0.456, 0.406])
std = np.array([0.229, 0.224, 0.225])


def deprocess(image_np):
    image_np = image_np.squeeze().transpose(1, 2, 0)
    image_np = image_np * std.reshape((1, 1, 3)) + mean.reshape((1, 1, 3))
    image_np = np.clip(image_np, 0.0, 255.0)
    return image_np


def clip(image_tensor):
    for c in range(3):
        m, s = mean[c], std[c]
        image_tensor[0, c] = torch.clamp(image_tensor[0, c], -m / s, (1 - m) / s)
    return image_tensor


def dream(image, model, iterations, lr):
    """ Updates the image to maximize outputs for n iterations """
    Tensor = torch.FloatTensor
    image = torch.autograd.Variable(Tensor(image), requires_grad=True)
    for i in range(iterations):
        model.zero_grad()
        out = model(image)
        loss = out.norm()
        loss.backward()
        avg_grad = np.abs(image.grad.data.cpu().numpy()).mean()
        norm_lr = lr / avg_grad
        image.data += norm_lr * image.grad.data
        image.data = clip(image.data)
        image.grad.data.zero_()
        print("  iteration", i, "loss %.5f" % loss.item(), "avg grad %.6g" % avg_grad)
    return image.cpu().data.numpy()


def deep_dream(image, model, iterations, lr, octave_scale, num_octaves):
    """ Main deep dream method """
    image = torch.from_numpy(image).float().unsqueeze(0)
    octaves = [image]
    for _ in range(num_octaves - 1):
        octaves.append(F.interpolate(octaves[-1], scale_factor=1 / octave_scale, mode="bilinear",
                                     align_corners=False, recompute_scale_factor=True))

    detail = np.zeros_like(octaves[-1].numpy())
    for octave, octave_base in enumerate(octaves[::-1]):
        print("octave", octave, tuple(octave_base.shape))
        if octave > 0:
            # Upsample detail to new octave dimension
            detail = F.interpolate(torch.from_numpy(detail), size=octave_base.shape[-2:], mode="bilinear",
                                   align_corners=False).numpy()
        # Add deep dream detail from previous octave to new base
        input_image = octave_base.numpy() + detail
        # Get new deep dream image
        dreamed_image = dream(input_image, model, iterations, lr)
        # Extract deep dream details
        detail = dreamed_image - octave_base.numpy()

    return deprocess(dreamed_image)


def make_features(cfg):
    layers, c = [], 3
    for v in cfg:
        if v == "M":
            layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
        else:
            layers += [nn.Conv2d(c, v, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
            c = v
    return nn.Sequential(*layers)


class VGG(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = make_features([8, "M", 16, 16, "M", 16])


torch.manual_seed(0)
network = VGG()
at_layer = 6
layers = list(network.features.children())
model = nn.Sequential(*layers[: (at_layer + 1)])
print(model)

rng = np.random.RandomState(0)
image = ((rng.rand(3, 16, 16) - mean.reshape(3, 1, 1)) / std.reshape(3, 1, 1)).astype(np.float32)
dreamed = deep_dream(image, model, iterations=3, lr=0.01, octave_scale=1.4, num_octaves=2)
print("dreamed", dreamed.shape, "mean %.5f" % dreamed.mean(), "max %.5f" % dreamed.max())


def dream_grad(image):
    loss = model(image).norm()
    (grad,) = torch.autograd.grad(loss, image)
    return loss, grad / grad.abs().mean()


x = torch.from_numpy(image).unsqueeze(0).requires_grad_()
loss_c, g_c = torch.compile(dream_grad)(x)
loss_e, g_e = dream_grad(x)
print("compiled loss %.5f" % loss_c.item(), "grad", [round(v, 4) for v in g_c[0, :, 0, 0].tolist()])
print("compiled == eager", torch.allclose(loss_c, loss_e, atol=1e-5), torch.allclose(g_c, g_e, atol=1e-4))
