# jacobgil/pytorch-grad-cam (pytorch_grad_cam/activations_and_gradients.py,
# base_cam.py, grad_cam.py, grad_cam_plusplus.py, utils/model_targets.py's
# ClassifierOutputTarget, utils/image.py's scale_cam_image and
# show_cam_on_image) as published, on a small VGG-style CNN (weights from
# numpy; the README's torchvision resnet50 cannot be imported by the torch
# reference run here) with target_layers = [model.layer4[-1]]: forward
# hooks that keep the activations and register tensor hooks for the
# gradients, a backward with retain_graph, numpy CAM weights, and the
# context manager that removes the hooks.  cv2 is not installed: the two
# cv2.resize / applyColorMap calls are written with numpy (bilinear resize
# with OpenCV's half-pixel centres, a JET-like colormap).  Then a fine-tuning
# step of the model under torch.compile against the same step run eagerly.
import copy

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


# ---- utils/image.py (cv2 written with numpy) ----

def _resize(img, size):
    """cv2.resize(img, (width, height)) with INTER_LINEAR (half-pixel centres)."""
    w, h = size
    ys = np.clip((np.arange(h) + 0.5) * img.shape[0] / h - 0.5, 0, img.shape[0] - 1)
    xs = np.clip((np.arange(w) + 0.5) * img.shape[1] / w - 0.5, 0, img.shape[1] - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, img.shape[0] - 1), np.minimum(x0 + 1, img.shape[1] - 1)
    wy, wx = (ys - y0)[:, None], (xs - x0)[None, :]
    top = img[y0][:, x0] * (1 - wx) + img[y0][:, x1] * wx
    bottom = img[y1][:, x0] * (1 - wx) + img[y1][:, x1] * wx
    return (top * (1 - wy) + bottom * wy).astype(img.dtype)


def show_cam_on_image(img: np.ndarray,
                      mask: np.ndarray,
                      use_rgb: bool = False,
                      image_weight: float = 0.5) -> np.ndarray:
    """ This function overlays the cam mask on the image as an heatmap.
    By default the heatmap is in BGR format.
    """
    jet = np.stack([np.clip(1.5 - np.abs(4 * mask - k), 0, 1) for k in (3, 2, 1)], axis=-1)  # cv2.applyColorMap(COLORMAP_JET)
    heatmap = np.uint8(255 * jet)
    if use_rgb:
        heatmap = heatmap[..., ::-1]   # cv2.cvtColor(heatmap, cv2.COLOR_BGR2RGB)
    heatmap = np.float32(heatmap) / 255

    if np.max(img) > 1:
        raise Exception(
            "The input image should np.float32 in the range [0, 1]")

    if image_weight < 0 or image_weight > 1:
        raise Exception(
            f"image_weight should be in the range [0, 1].\
                Got: {image_weight}")

    cam = (1 - image_weight) * heatmap + image_weight * img
    cam = cam / np.max(cam)
    return np.uint8(255 * cam)


def scale_cam_image(cam, target_size=None):
    result = []
    for img in cam:
        img = img - np.min(img)
        img = img / (1e-7 + np.max(img))
        if target_size is not None:
            img = _resize(img, target_size)
        result.append(img)
    result = np.float32(result)

    return result


# ---- utils/model_targets.py ----

class ClassifierOutputTarget:
    def __init__(self, category):
        self.category = category

    def __call__(self, model_output):
        if len(model_output.shape) == 1:
            return model_output[self.category]
        return model_output[:, self.category]


# ---- activations_and_gradients.py ----

class ActivationsAndGradients:
    """ Class for extracting activations and
    registering gradients from targetted intermediate layers """

    def __init__(self, model, target_layers, reshape_transform):
        self.model = model
        self.gradients = []
        self.activations = []
        self.reshape_transform = reshape_transform
        self.handles = []
        for target_layer in target_layers:
            self.handles.append(
                target_layer.register_forward_hook(self.save_activation))
            # Because of https://github.com/pytorch/pytorch/issues/61519,
            # we don't use backward hook to record gradients.
            self.handles.append(
                target_layer.register_forward_hook(self.save_gradient))

    def save_activation(self, module, input, output):
        activation = output

        if self.reshape_transform is not None:
            activation = self.reshape_transform(activation)
        self.activations.append(activation.cpu().detach())

    def save_gradient(self, module, input, output):
        if not hasattr(output, "requires_grad") or not output.requires_grad:
            # You can only register hooks on tensor requires grad.
            return

        # Gradients are computed in reverse order
        def _store_grad(grad):
            if self.reshape_transform is not None:
                grad = self.reshape_transform(grad)
            self.gradients = [grad.cpu().detach()] + self.gradients

        output.register_hook(_store_grad)

    def __call__(self, x):
        self.gradients = []
        self.activations = []
        return self.model(x)

    def release(self):
        for handle in self.handles:
            handle.remove()


# ---- base_cam.py ----

class BaseCAM:
    def __init__(self,
                 model: torch.nn.Module,
                 target_layers,
                 reshape_transform=None,
                 compute_input_gradient: bool = False,
                 uses_gradients: bool = True) -> None:
        self.model = model.eval()
        self.target_layers = target_layers

        # Use the same device as the model.
        self.device = next(self.model.parameters()).device
        self.reshape_transform = reshape_transform
        self.compute_input_gradient = compute_input_gradient
        self.uses_gradients = uses_gradients
        self.activations_and_grads = ActivationsAndGradients(
            self.model, target_layers, reshape_transform)

    """ Get a vector of weights for every channel in the target layer.
        Methods that return weights channels,
        will typically need to only implement this function. """

    def get_cam_weights(self,
                        input_tensor: torch.Tensor,
                        target_layers,
                        targets,
                        activations: torch.Tensor,
                        grads: torch.Tensor) -> np.ndarray:
        raise Exception("Not Implemented")

    def get_cam_image(self,
                      input_tensor: torch.Tensor,
                      target_layer: torch.nn.Module,
                      targets,
                      activations: torch.Tensor,
                      grads: torch.Tensor,
                      eigen_smooth: bool = False) -> np.ndarray:

        weights = self.get_cam_weights(input_tensor,
                                       target_layer,
                                       targets,
                                       activations,
                                       grads)
        # 2D conv
        if len(activations.shape) == 4:
            weighted_activations = weights[:, :, None, None] * activations
        # 3D conv
        elif len(activations.shape) == 5:
            weighted_activations = weights[:, :, None, None, None] * activations
        else:
            raise ValueError(f"Invalid activation shape. Get {len(activations.shape)}.")

        cam = weighted_activations.sum(axis=1)
        return cam

    def forward(self,
                input_tensor: torch.Tensor,
                targets,
                eigen_smooth: bool = False) -> np.ndarray:

        input_tensor = input_tensor.to(self.device)

        if self.compute_input_gradient:
            input_tensor = torch.autograd.Variable(input_tensor,
                                                   requires_grad=True)

        self.outputs = outputs = self.activations_and_grads(input_tensor)

        if targets is None:
            target_categories = np.argmax(outputs.cpu().data.numpy(), axis=-1)
            targets = [ClassifierOutputTarget(
                category) for category in target_categories]

        if self.uses_gradients:
            self.model.zero_grad()
            loss = sum([target(output)
                       for target, output in zip(targets, outputs)])
            loss.backward(retain_graph=True)

        # In most of the saliency attribution papers, the saliency is
        # computed with a single target layer.
        # Commonly it is the last convolutional layer.
        # Here we support passing a list with multiple target layers.
        # It will compute the saliency image for every image,
        # and then aggregate them (with a default mean aggregation).
        # This gives you more flexibility in case you just want to
        # use all conv layers for example, all Batchnorm layers,
        # or something else.
        cam_per_layer = self.compute_cam_per_layer(input_tensor,
                                                   targets,
                                                   eigen_smooth)
        return self.aggregate_multi_layers(cam_per_layer)

    def get_target_width_height(self,
                                input_tensor: torch.Tensor):
        if len(input_tensor.shape) == 4:
            width, height = input_tensor.size(-1), input_tensor.size(-2)
            return width, height
        elif len(input_tensor.shape) == 5:
            depth, width, height = input_tensor.size(-1), input_tensor.size(-2), input_tensor.size(-3)
            return depth, width, height
        else:
            raise ValueError("Invalid input_tensor shape. Only 2D or 3D images are supported.")

    def compute_cam_per_layer(
            self,
            input_tensor: torch.Tensor,
            targets,
            eigen_smooth: bool) -> np.ndarray:
        activations_list = [a.cpu().data.numpy()
                            for a in self.activations_and_grads.activations]
        grads_list = [g.cpu().data.numpy()
                      for g in self.activations_and_grads.gradients]
        target_size = self.get_target_width_height(input_tensor)

        cam_per_target_layer = []
        # Loop over the saliency image from every layer
        for i in range(len(self.target_layers)):
            target_layer = self.target_layers[i]
            layer_activations = None
            layer_grads = None
            if i < len(activations_list):
                layer_activations = activations_list[i]
            if i < len(grads_list):
                layer_grads = grads_list[i]

            cam = self.get_cam_image(input_tensor,
                                     target_layer,
                                     targets,
                                     layer_activations,
                                     layer_grads,
                                     eigen_smooth)
            cam = np.maximum(cam, 0)
            scaled = scale_cam_image(cam, target_size)
            cam_per_target_layer.append(scaled[:, None, :])

        return cam_per_target_layer

    def aggregate_multi_layers(
            self,
            cam_per_target_layer: np.ndarray) -> np.ndarray:
        cam_per_target_layer = np.concatenate(cam_per_target_layer, axis=1)
        cam_per_target_layer = np.maximum(cam_per_target_layer, 0)
        result = np.mean(cam_per_target_layer, axis=1)
        return scale_cam_image(result)

    def __call__(self,
                 input_tensor: torch.Tensor,
                 targets=None,
                 aug_smooth: bool = False,
                 eigen_smooth: bool = False) -> np.ndarray:

        return self.forward(input_tensor,
                            targets, eigen_smooth)

    def __del__(self):
        self.activations_and_grads.release()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_value, exc_tb):
        self.activations_and_grads.release()
        if isinstance(exc_value, IndexError):
            # Handle IndexError here...
            print(
                f"An exception occurred in CAM with block: {exc_type}. Message: {exc_value}")
            return True


# ---- grad_cam.py, grad_cam_plusplus.py ----

class GradCAM(BaseCAM):
    def __init__(self, model, target_layers,
                 reshape_transform=None):
        super(
            GradCAM,
            self).__init__(
            model,
            target_layers,
            reshape_transform)

    def get_cam_weights(self,
                        input_tensor,
                        target_layer,
                        target_category,
                        activations,
                        grads):
        # 2D image
        if len(grads.shape) == 4:
            return np.mean(grads, axis=(2, 3))

        # 3D image
        elif len(grads.shape) == 5:
            return np.mean(grads, axis=(2, 3, 4))

        else:
            raise ValueError("Invalid grads shape."
                             "Shape of grads should be 4 (2D image) or 5 (3D image).")


class GradCAMPlusPlus(BaseCAM):
    def __init__(self, model, target_layers,
                 reshape_transform=None):
        super(GradCAMPlusPlus, self).__init__(model, target_layers,
                                              reshape_transform)

    def get_cam_weights(self,
                        input_tensor,
                        target_layers,
                        target_category,
                        activations,
                        grads):
        grads_power_2 = grads**2
        grads_power_3 = grads_power_2 * grads
        # Equation 19 in https://arxiv.org/abs/1710.11063
        sum_activations = np.sum(activations, axis=(2, 3))
        eps = 0.000001
        aij = grads_power_2 / (2 * grads_power_2 +
                               sum_activations[:, :, None, None] * grads_power_3 + eps)
        # Now bring back the ReLU from eq.7 in the paper,
        # And zero out aijs where the activations are 0
        aij = np.where(grads != 0, aij, 0)

        weights = np.maximum(grads, 0) * aij
        weights = np.sum(weights, axis=(2, 3))
        return weights


# ---- the README's usage ----

class SmallVGG(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        block = lambda cin, cout: nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True))
        self.layer3 = nn.Sequential(block(3, 8), nn.MaxPool2d(2), block(8, 16), nn.MaxPool2d(2))
        self.layer4 = nn.Sequential(block(16, 16), block(16, 32))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.layer4(self.layer3(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


model = SmallVGG(num_classes=10)
g = np.random.default_rng(1)
with torch.no_grad():
    for name, p in model.named_parameters():
        if p.dim() == 1:
            p.copy_(torch.from_numpy((0.1 * g.standard_normal(tuple(p.shape))).astype(np.float32)))
        else:
            p.copy_(torch.from_numpy(((2 / p[0].numel()) ** 0.5 * g.standard_normal(tuple(p.shape))).astype(np.float32)))
target_layers = [model.layer4[-1]]
rng = np.random.default_rng(0)
rgb_img = rng.random((32, 32, 3)).astype(np.float32)
input_tensor = torch.from_numpy(rng.standard_normal((2, 3, 32, 32)).astype(np.float32))

# We have to specify the target we want to generate the CAM for.
targets = [ClassifierOutputTarget(5), ClassifierOutputTarget(1)]

# Construct the CAM object once, and then re-use it on many images.
with GradCAM(model=model, target_layers=target_layers) as cam:
    # You can also pass aug_smooth=True and eigen_smooth=True, to apply smoothing.
    grayscale_cam = cam(input_tensor=input_tensor, targets=targets)
    print("activations", [tuple(a.shape) for a in cam.activations_and_grads.activations],
          "gradients", [tuple(g.shape) for g in cam.activations_and_grads.gradients])
    print("outputs", [f"{v:.5f}" for v in cam.outputs[0].tolist()])
    # In this example grayscale_cam has only one image in the batch:
    grayscale_cam = grayscale_cam[0, :]
    print("grayscale_cam", grayscale_cam.shape, grayscale_cam.dtype, f"{grayscale_cam.mean():.5f}",
          [f"{v:.4f}" for v in grayscale_cam[::8, ::8].ravel().tolist()])
    visualization = show_cam_on_image(rgb_img, grayscale_cam, use_rgb=True)
    # You can also get the model outputs without having to redo inference
    model_outputs = cam.outputs
    print("visualization", visualization.shape, visualization.dtype, int(visualization.astype(np.int64).sum()))
print("hooks removed", len(model.layer4[-1]._forward_hooks))

with GradCAMPlusPlus(model=model, target_layers=[model.layer3[-1], model.layer4[-1]]) as cam:
    maps = cam(input_tensor=input_tensor)    # targets: the top class of each image
    print("gradcam++", maps.shape, [f"{v:.5f}" for v in maps.mean(axis=(1, 2)).tolist()],
          len(cam.activations_and_grads.gradients))

# a fine-tuning step under torch.compile against the same step run eagerly
model.train()
labels = torch.from_numpy(rng.integers(0, 10, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def train_step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


state, opt_state = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
eager = [train_step(input_tensor, labels).item() for _ in range(2)]
after = copy.deepcopy(model.state_dict())
model.load_state_dict(state)
opt.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(input_tensor, labels).item() for _ in range(2)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
