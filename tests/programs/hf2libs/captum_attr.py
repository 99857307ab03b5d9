"""captum's attribution algorithms as its tutorials use them, on a small
MLP, a small CNN and an embedding-bag text classifier: IntegratedGradients
(with convergence deltas), Saliency, InputXGradient, DeepLift, DeepLiftShap,
GradientShap (seeded), NoiseTunnel over IG, Occlusion, FeatureAblation,
LayerConductance, LayerIntegratedGradients on an embedding layer,
NeuronConductance and LayerGradCam."""
import random

import numpy as np
import torch
import torch.nn as nn
from captum.attr import (DeepLift, DeepLiftShap, FeatureAblation, GradientShap,
                         InputXGradient, IntegratedGradients, LayerConductance, LayerGradCam,
                         LayerIntegratedGradients, NeuronConductance, NoiseTunnel, Occlusion,
                         Saliency)

torch.manual_seed(0)
random.seed(0)


def show(name, t, n=6):
    flat = t.detach().flatten()[:n]
    print(name, tuple(t.shape), " ".join(f"{v:.5f}" for v in flat.tolist()),
          f"sum {t.sum().item():.5f}")


class ToyModel(nn.Module):
    """captum's README model."""

    def __init__(self):
        super().__init__()
        self.lin1 = nn.Linear(3, 3)
        self.relu = nn.ReLU()
        self.lin2 = nn.Linear(3, 2)
        nn.init.constant_(self.lin1.weight, 0.5)   # the README's fixed weights
        nn.init.constant_(self.lin1.bias, -0.1)
        self.lin2.weight = nn.Parameter(torch.tensor([[1.0, -0.5, 0.2], [0.3, 0.8, -1.0]]))
        self.lin2.bias = nn.Parameter(torch.zeros(2))

    def forward(self, x):
        return self.lin2(self.relu(self.lin1(x)))


model = ToyModel().eval()
x = torch.rand(2, 3)
baseline = torch.zeros(2, 3)
ig = IntegratedGradients(model)
attr, delta = ig.attribute(x, baseline, target=0, return_convergence_delta=True)
show("IG", attr)
show("IG delta", delta)
attr, delta = ig.attribute(x, baseline, target=1, n_steps=20, method="riemann_trapezoid",
                           return_convergence_delta=True)
show("IG trapezoid", attr)
show("IG trapezoid delta", delta)
show("Saliency", Saliency(model).attribute(x, target=1))
show("Saliency signed", Saliency(model).attribute(x, target=1, abs=False))
show("InputXGradient", InputXGradient(model).attribute(x, target=0))
attr, delta = DeepLift(model).attribute(x, baseline, target=0, return_convergence_delta=True)
show("DeepLift", attr)
show("DeepLift delta", delta)
torch.manual_seed(3)
baselines = torch.randn(5, 3) * 0.1
show("DeepLiftShap", DeepLiftShap(model).attribute(x, baselines, target=0))
torch.manual_seed(4)
np.random.seed(4)       # GradientShap draws its path points with NumPy
attr, delta = GradientShap(model).attribute(x, baselines, n_samples=8, stdevs=0.05, target=0,
                                            return_convergence_delta=True)
show("GradientShap", attr)
show("GradientShap delta", delta)
torch.manual_seed(5)
nt = NoiseTunnel(ig)
show("NoiseTunnel smoothgrad", nt.attribute(x, nt_type="smoothgrad", nt_samples=4, stdevs=0.1,
                                            target=0, n_steps=10))
show("NoiseTunnel smoothgrad_sq", nt.attribute(x, nt_type="smoothgrad_sq", nt_samples=3,
                                               stdevs=0.1, target=1, n_steps=10))
show("FeatureAblation", FeatureAblation(model).attribute(x, target=0))
attr, delta = LayerConductance(model, model.lin1).attribute(x, baseline, target=0,
                                                             return_convergence_delta=True)
show("LayerConductance", attr)
show("LayerConductance delta", delta)
show("NeuronConductance", NeuronConductance(model, model.lin1).attribute(
    x, neuron_selector=1, target=0))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 6, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.fc = nn.Linear(6 * 4 * 4, 3)

    def forward(self, x):
        x = self.pool(self.relu1(self.conv1(x)))
        x = self.relu2(self.conv2(x))
        return self.fc(x.flatten(1))


torch.manual_seed(6)
cnn = SmallCNN().eval()
img = torch.rand(2, 1, 8, 8)
target = cnn(img).argmax(1)
print("cnn targets", target.tolist())
attr, delta = IntegratedGradients(cnn).attribute(img, target=target, n_steps=16,
                                                 internal_batch_size=8,
                                                 return_convergence_delta=True)
show("cnn IG", attr)
show("cnn IG delta", delta)
show("cnn Saliency", Saliency(cnn).attribute(img, target=target))
show("cnn DeepLift", DeepLift(cnn).attribute(img, target=target))
show("cnn Occlusion", Occlusion(cnn).attribute(img, strides=(1, 2, 2), target=target,
                                               sliding_window_shapes=(1, 3, 3), baselines=0))
show("cnn LayerGradCam", LayerGradCam(cnn, cnn.conv2).attribute(img, target=target))
show("cnn LayerConductance", LayerConductance(cnn, cnn.conv1).attribute(img, target=target,
                                                                        n_steps=8))


class TextClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(20, 8, padding_idx=0)
        self.fc = nn.Linear(8, 2)

    def forward(self, ids):
        return self.fc(self.embedding(ids).mean(1))


torch.manual_seed(7)
text = TextClassifier().eval()
ids = torch.tensor([[3, 5, 7, 9, 0], [2, 4, 6, 8, 10]])
ref_ids = torch.zeros_like(ids)
lig = LayerIntegratedGradients(text, text.embedding)
attr, delta = lig.attribute(ids, ref_ids, target=1, n_steps=12, return_convergence_delta=True)
show("LIG embedding", attr)
show("LIG per token", attr.sum(-1), n=10)
show("LIG delta", delta)


# ----------------------------------------------------------------------------
# captum_more (one program: the libraries are imported once)
# More of captum: backprop-modifying methods (GuidedBackprop,
# Deconvolution, GuidedGradCam, LRP), perturbation methods (KernelShap,
# ShapleyValueSampling, FeaturePermutation, feature masks, and Lime with a
# surrogate fit by captum's own torch SGD loop), layer and neuron methods
# (LayerActivation, LayerGradientXActivation, LayerDeepLift,
# InternalInfluence, NeuronIntegratedGradients, NeuronGradient), the metrics
# (infidelity, sensitivity_max) and captum.robust's FGSM / PGD.
# ----------------------------------------------------------------------------
import random

import numpy as np
import torch
import torch.nn as nn
from captum.attr import (LRP, Deconvolution, FeaturePermutation, GuidedBackprop,
                         GuidedGradCam, InternalInfluence, KernelShap, LayerActivation,
                         LayerDeepLift, LayerGradientXActivation, Lime, NeuronGradient,
                         NeuronIntegratedGradients, Saliency, ShapleyValueSampling)
from captum._utils.models.linear_model import SGDLinearRegression
from captum.metrics import infidelity, sensitivity_max
from captum.robust import FGSM, PGD

torch.manual_seed(0)
random.seed(0)
np.random.seed(0)


def show(name, t, n=6):
    t = t if isinstance(t, torch.Tensor) else torch.as_tensor(t)
    flat = t.detach().flatten()[:n]
    print(name, tuple(t.shape), " ".join(f"{v:.5f}" for v in flat.tolist()),
          f"sum {t.detach().sum().item():.5f}")


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.relu1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.relu2 = nn.ReLU()
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = self.pool(self.relu1(self.conv1(x)))
        return self.fc(self.relu2(self.conv2(x)).flatten(1))


cnn = CNN().eval()
img = torch.rand(2, 1, 8, 8)
target = torch.tensor([0, 2])
show("GuidedBackprop", GuidedBackprop(cnn).attribute(img, target=target))
show("Deconvolution", Deconvolution(cnn).attribute(img, target=target))
show("GuidedGradCam", GuidedGradCam(cnn, cnn.conv2).attribute(img, target=target))
show("LRP", LRP(cnn).attribute(img, target=target))
show("LayerActivation", LayerActivation(cnn, cnn.conv2).attribute(img))
show("LayerGradientXActivation", LayerGradientXActivation(cnn, cnn.conv1).attribute(
    img, target=target))
attr, delta = LayerDeepLift(cnn, cnn.conv2).attribute(img, target=target,
                                                      return_convergence_delta=True)
show("LayerDeepLift", attr)
show("LayerDeepLift delta", delta)
show("InternalInfluence", InternalInfluence(cnn, cnn.conv1).attribute(img, target=target,
                                                                      n_steps=8))
show("NeuronGradient", NeuronGradient(cnn, cnn.conv2).attribute(img, neuron_selector=(1, 2, 2)))
show("NeuronIntegratedGradients", NeuronIntegratedGradients(cnn, cnn.fc).attribute(
    img, neuron_selector=1, n_steps=8))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.Sigmoid(), nn.Linear(8, 2))

    def forward(self, x):
        return self.net(x)


torch.manual_seed(1)
mlp = MLP().eval()
x = torch.randn(3, 6)
mask = torch.tensor([[0, 0, 1, 1, 2, 2]])
torch.manual_seed(2)
show("ShapleyValueSampling", ShapleyValueSampling(mlp).attribute(x, target=1, n_samples=4,
                                                                 feature_mask=mask))
torch.manual_seed(3)
show("KernelShap", KernelShap(mlp).attribute(x[:1], target=0, n_samples=30))
torch.manual_seed(4)
lime = Lime(mlp, interpretable_model=SGDLinearRegression())  # fit by torch SGD
show("Lime", lime.attribute(x[:1], target=1, n_samples=40, feature_mask=mask))
torch.manual_seed(5)
show("FeaturePermutation", FeaturePermutation(mlp).attribute(x, target=0))


def perturb(inputs):
    noise = torch.tensor(np.random.normal(0, 0.03, inputs.shape)).float()
    return noise, inputs - noise


np.random.seed(6)
sal = Saliency(mlp)
attr = sal.attribute(x, target=0)
show("infidelity", infidelity(mlp, perturb, x, attr, target=0, n_perturb_samples=5))
torch.manual_seed(7)
show("sensitivity_max", sensitivity_max(sal.attribute, x, target=0, n_perturb_samples=4,
                                        perturb_radius=0.05))

fgsm = FGSM(cnn, lower_bound=0.0, upper_bound=1.0)
adv = fgsm.perturb(img, epsilon=0.1, target=target)
show("FGSM", adv - img)
torch.manual_seed(8)
pgd = PGD(cnn, lower_bound=0.0, upper_bound=1.0)
adv = pgd.perturb(img, radius=0.1, step_size=0.03, step_num=3, target=target,
                  random_start=True)
show("PGD", adv - img)
print("PGD logits", cnn(adv).argmax(1).tolist(), cnn(img).argmax(1).tolist())
