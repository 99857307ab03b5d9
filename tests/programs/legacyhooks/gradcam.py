"""A tiny Grad-CAM in the style of the popular public implementations
(jacobgil/pytorch-grad-cam's early versions, kazuto1011/grad-cam-pytorch):
hooks on the last conv layer save its activations (forward hook) and the
gradients flowing into it (legacy register_backward_hook: grad_output[0];
and the full backward hook), weights = spatial mean of the gradients,
heatmap = ReLU of the weighted sum of the activation maps."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import warnings
warnings.simplefilter("ignore")

torch.manual_seed(0)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(16 * 8 * 8, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


class GradCAM:
    def __init__(self, model, layer, legacy):
        self.model, self.activations, self.gradients = model, None, None
        layer.register_forward_hook(self.save_activation)
        if legacy:
            layer.register_backward_hook(self.save_gradient)
        else:
            layer.register_full_backward_hook(self.save_gradient)
        self.layer_grads = []
        if legacy:
            layer.register_backward_hook(
                lambda m, gi, go: self.layer_grads.append([None if g is None else tuple(g.shape)
                                                           for g in gi]))

    def save_activation(self, module, input, output):
        self.activations = output.detach()

    def save_gradient(self, module, grad_input, grad_output):
        self.gradients = grad_output[0].detach()

    def __call__(self, x, target=None):
        self.model.zero_grad()
        out = self.model(x)
        if target is None:
            target = out.argmax(dim=1)
        one_hot = torch.zeros_like(out)
        one_hot[torch.arange(out.shape[0]), target] = 1.0
        out.backward(gradient=one_hot)
        weights = self.gradients.mean(dim=(2, 3), keepdim=True)
        cam = F.relu((weights * self.activations).sum(dim=1))
        cam = F.interpolate(cam.unsqueeze(1), size=x.shape[2:], mode="bilinear",
                            align_corners=False).squeeze(1)
        lo = cam.flatten(1).min(1)[0][:, None, None]
        hi = cam.flatten(1).max(1)[0][:, None, None]
        return (cam - lo) / (hi - lo + 1e-8), target


x = torch.randn(2, 3, 16, 16)
for legacy in (True, False):
    torch.manual_seed(1)
    model = SmallCNN().eval()     # (a module takes one kind of backward hook)
    gc = GradCAM(model, model.features[3], legacy)
    cam, target = gc(x)
    print("conv layer's legacy grad_input shapes", gc.layer_grads)
    print("legacy" if legacy else "full", "targets", target.tolist())
    print("cam shape", tuple(cam.shape), f"sum {cam.sum().item():.5f}")
    for row in cam[0, ::4, ::4].tolist():
        print(" ".join(f"{v:.5f}" for v in row))
    print("per-image", [f"{v:.5f}" for v in cam.sum(dim=(1, 2)).tolist()])
# Grad-CAM++-style: gradients via the layer's legacy hook grad_input on the ReLU after it
grads = {}
model.features[4].register_backward_hook(lambda m, gi, go: grads.update(relu=gi[0]))
model.zero_grad()
model(x)[:, 3].sum().backward()
print("relu gi", tuple(grads["relu"].shape), f"{grads['relu'].abs().sum().item():.5f}")
print("conv w grad", f"{model.features[3].weight.grad.abs().sum().item():.5f}")
