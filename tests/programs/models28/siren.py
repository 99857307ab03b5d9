# SIREN the way vsitzmann/siren's explore_siren.ipynb writes it: get_mgrid
# (torch.linspace per dimension, torch.meshgrid(*tensors, indexing='ij'),
# torch.stack(..., dim=-1).reshape(-1, dim)), SineLayer (torch.sin(self.omega_0
# * self.linear(input)), the is_first / hidden uniform_ init under
# torch.no_grad() with the np.sqrt(6 / in_features) / omega_0 bound,
# forward_with_intermediate), Siren (outermost_linear, coords
# .clone().detach().requires_grad_(True) returned with the output,
# forward_with_activations with retain_grad), the differential operators
# gradient / divergence / laplace by torch.autograd.grad(..., create_graph=True),
# ImageFitting and PoissonEqn datasets behind a DataLoader(batch_size=1),
# fitting an image by its pixels and, as the Poisson example, by its
# gradients only (gradients_mse: a double backward through sin), with
# Adam(lr=1e-4). Changes for a CPU test: a 16x16 synthetic image from numpy
# in place of skimage's cameraman (get_cameraman_tensor's Resize / ToTensor /
# Normalize done in numpy), scipy.ndimage's sobel and laplace written in numpy
# (same kernels, reflect borders), hidden width 32, weights copied from
# numpy after the notebook's init (its bounds are checked), a few steps,
# .cuda() dropped; then one Poisson training step under torch.compile
# against the same step eagerly.
import copy
from collections import OrderedDict

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def get_mgrid(sidelen, dim=2):
    '''Generates a flattened grid of (x,y,...) coordinates in a range of -1 to 1.
    sidelen: int
    dim: int'''
    tensors = tuple(dim * [torch.linspace(-1, 1, steps=sidelen)])
    mgrid = torch.stack(torch.meshgrid(*tensors, indexing='ij'), dim=-1)
    mgrid = mgrid.reshape(-1, dim)
    return mgrid


class SineLayer(nn.Module):
    # See paper sec. 3.2, final paragraph, and supplement Sec. 1.5 for discussion of omega_0.

    # If is_first=True, omega_0 is a frequency factor which simply multiplies the activations before the
    # nonlinearity. Different signals may require different omega_0 in the first layer - this is a
    # hyperparameter.

    # If is_first=False, then the weights will be divided by omega_0 so as to keep the magnitude of
    # activations constant, but boost gradients to the weight matrix (see supplement Sec. 1.5)

    def __init__(self, in_features, out_features, bias=True,
                 is_first=False, omega_0=30):
        super().__init__()
        self.omega_0 = omega_0
        self.is_first = is_first

        self.in_features = in_features
        self.linear = nn.Linear(in_features, out_features, bias=bias)

        self.init_weights()

    def init_weights(self):
        with torch.no_grad():
            if self.is_first:
                self.linear.weight.uniform_(-1 / self.in_features,
                                            1 / self.in_features)
            else:
                self.linear.weight.uniform_(-np.sqrt(6 / self.in_features) / self.omega_0,
                                            np.sqrt(6 / self.in_features) / self.omega_0)

    def forward(self, input):
        return torch.sin(self.omega_0 * self.linear(input))

    def forward_with_intermediate(self, input):
        # For visualization of activation distributions
        intermediate = self.omega_0 * self.linear(input)
        return torch.sin(intermediate), intermediate


class Siren(nn.Module):
    def __init__(self, in_features, hidden_features, hidden_layers, out_features, outermost_linear=False,
                 first_omega_0=30, hidden_omega_0=30.):
        super().__init__()

        self.net = []
        self.net.append(SineLayer(in_features, hidden_features,
                                  is_first=True, omega_0=first_omega_0))

        for i in range(hidden_layers):
            self.net.append(SineLayer(hidden_features, hidden_features,
                                      is_first=False, omega_0=hidden_omega_0))

        if outermost_linear:
            final_linear = nn.Linear(hidden_features, out_features)

            with torch.no_grad():
                final_linear.weight.uniform_(-np.sqrt(6 / hidden_features) / hidden_omega_0,
                                             np.sqrt(6 / hidden_features) / hidden_omega_0)

            self.net.append(final_linear)
        else:
            self.net.append(SineLayer(hidden_features, out_features,
                                      is_first=False, omega_0=hidden_omega_0))

        self.net = nn.Sequential(*self.net)

    def forward(self, coords):
        coords = coords.clone().detach().requires_grad_(True)  # allows to take derivative w.r.t. input
        output = self.net(coords)
        return output, coords

    def forward_with_activations(self, coords, retain_grad=False):
        '''Returns not only model output, but also intermediate activations.
        Only used for visualizing activations later!'''
        activations = OrderedDict()

        activation_count = 0
        x = coords.clone().detach().requires_grad_(True)
        activations['input'] = x
        for i, layer in enumerate(self.net):
            if isinstance(layer, SineLayer):
                x, intermed = layer.forward_with_intermediate(x)

                if retain_grad:
                    x.retain_grad()
                    intermed.retain_grad()

                activations['_'.join((str(layer.__class__), "%d" % activation_count))] = intermed
                activation_count += 1
            else:
                x = layer(x)

                if retain_grad:
                    x.retain_grad()

            activations['_'.join((str(layer.__class__), "%d" % activation_count))] = x
            activation_count += 1

        return activations


def laplace(y, x):
    grad = gradient(y, x)
    return divergence(grad, x)


def divergence(y, x):
    div = 0.
    for i in range(y.shape[-1]):
        div += torch.autograd.grad(y[..., i], x, torch.ones_like(y[..., i]), create_graph=True)[0][..., i:i + 1]
    return div


def gradient(y, x, grad_outputs=None):
    if grad_outputs is None:
        grad_outputs = torch.ones_like(y)
    grad = torch.autograd.grad(y, [x], grad_outputs=grad_outputs, create_graph=True)[0]
    return grad


# ---- numpy stand-ins for skimage.data.camera() and scipy.ndimage ----

def get_cameraman_tensor(sidelength):
    yy, xx = np.meshgrid(np.linspace(0, 1, sidelength), np.linspace(0, 1, sidelength), indexing='ij')
    img = 0.5 + 0.3 * np.sin(6 * xx) * np.cos(4 * yy) + 0.2 * (xx + yy > 1.1)
    img = (img - 0.5) / 0.5                      # Normalize(torch.Tensor([0.5]), torch.Tensor([0.5]))
    return torch.from_numpy(img.astype(np.float32))[None]


def _correlate1d(a, weights, axis):
    pad = [(0, 0)] * a.ndim
    pad[axis] = (1, 1)
    p = np.pad(a, pad, mode='symmetric')         # scipy.ndimage's 'reflect'
    n = a.shape[axis]
    return sum(w * np.take(p, range(k, k + n), axis=axis) for k, w in enumerate(weights))


def sobel(a, axis):
    out = _correlate1d(a, [-1, 0, 1], axis)
    for ax in range(a.ndim):
        if ax != axis:
            out = _correlate1d(out, [1, 2, 1], ax)
    return out


def ndimage_laplace(a):
    return sum(_correlate1d(a, [1, -2, 1], ax) for ax in range(a.ndim))


class ImageFitting(Dataset):
    def __init__(self, sidelength):
        super().__init__()
        img = get_cameraman_tensor(sidelength)
        self.pixels = img.permute(1, 2, 0).view(-1, 1)
        self.coords = get_mgrid(sidelength, 2)

    def __len__(self):
        return 1

    def __getitem__(self, idx):
        if idx > 0:
            raise IndexError

        return self.coords, self.pixels


class PoissonEqn(Dataset):
    def __init__(self, sidelength):
        super().__init__()
        img = get_cameraman_tensor(sidelength)

        # Compute gradient and laplacian
        grads_x = sobel(img.numpy()[0], axis=0)[..., None]
        grads_y = sobel(img.numpy()[0], axis=1)[..., None]
        grads_x, grads_y = torch.from_numpy(grads_x), torch.from_numpy(grads_y)

        self.grads = torch.stack((grads_x, grads_y), dim=-1).view(-1, 2)
        self.laplace = ndimage_laplace(img.numpy()[0])[..., None]
        self.laplace = torch.from_numpy(self.laplace)

        self.pixels = img.permute(1, 2, 0).view(-1, 1)
        self.coords = get_mgrid(sidelength, 2)

    def __len__(self):
        return 1

    def __getitem__(self, idx):
        return self.coords, {'pixels': self.pixels, 'grads': self.grads, 'laplace': self.laplace}


def gradients_mse(model_output, coords, gt_gradients):
    # compute gradients on the model
    gradients = gradient(model_output, coords)
    # compare them with the ground-truth
    gradients_loss = torch.mean((gradients - gt_gradients).pow(2).sum(-1))
    return gradients_loss


def fmt(t, n=4):
    return [f"{v:.4f}" for v in t.reshape(-1)[:n].tolist()]


def load_numpy(model, r):
    """Replaces the notebook's draws with numpy draws inside the same bounds."""
    with torch.no_grad():
        for m in model.net:
            lin = m.linear if isinstance(m, SineLayer) else m
            first = isinstance(m, SineLayer) and m.is_first
            bound = 1 / lin.in_features if first else np.sqrt(6 / lin.in_features) / 30
            assert lin.weight.abs().max().item() <= bound
            lin.weight.copy_(torch.from_numpy(r.uniform(-bound, bound, tuple(lin.weight.shape)).astype(np.float32)))
            lin.bias.copy_(torch.from_numpy(r.uniform(-0.1, 0.1, tuple(lin.bias.shape)).astype(np.float32)))


r = np.random.default_rng(0)
side = 16

grid = get_mgrid(4, 2)
print("mgrid", tuple(grid.shape), grid[:5].tolist(), tuple(get_mgrid(3, 3).shape))

layer = SineLayer(32, 32, omega_0=30)
first = SineLayer(2, 32, is_first=True)
print("init bounds", layer.linear.weight.abs().max().item() <= np.sqrt(6 / 32) / 30,
      first.linear.weight.abs().max().item() <= 1 / 2, f"{np.sqrt(6 / 32) / 30:.6f}")

# the operators on a known function: f = x^2 y + sin(y)
xy = torch.tensor([[0.5, -0.3], [1.0, 2.0]]).requires_grad_(True)
f = (xy[:, :1] ** 2 * xy[:, 1:] + torch.sin(xy[:, 1:]))
g = gradient(f, xy)
print("gradient", fmt(g, 4), "laplace", fmt(laplace(f, xy), 2), "divergence", fmt(divergence(xy * xy, xy), 2))

img_siren = Siren(in_features=2, out_features=1, hidden_features=32, hidden_layers=2, outermost_linear=True)
load_numpy(img_siren, r)
print(img_siren.net[0], type(img_siren.net[-1]).__name__, sum(p.numel() for p in img_siren.parameters()))

cameraman = ImageFitting(side)
dataloader = DataLoader(cameraman, batch_size=1, pin_memory=True, num_workers=0)
model_input, ground_truth = next(iter(dataloader))
print("data", tuple(model_input.shape), tuple(ground_truth.shape), fmt(ground_truth, 3))

optim = torch.optim.Adam(lr=1e-4, params=img_siren.parameters())
for step in range(3):
    model_output, coords = img_siren(model_input)
    loss = ((model_output - ground_truth) ** 2).mean()
    img_grad = gradient(model_output, coords)
    img_laplacian = laplace(model_output, coords)
    print("Step %d, Total loss %0.6f" % (step, loss), fmt(img_grad.norm(dim=-1), 2), fmt(img_laplacian, 2))
    optim.zero_grad()
    loss.backward()
    optim.step()
print("coords leaf", coords.is_leaf, coords.requires_grad, model_input.requires_grad)

acts = img_siren.forward_with_activations(model_input[:, :8], retain_grad=True)
print("activations", len(acts), list(acts.keys())[1].split("'")[1].split(".")[-1], list(acts.keys())[-1][-1])
acts[list(acts.keys())[-1]].sum().backward()
print("retained", fmt(acts[list(acts.keys())[1]].grad, 4))

cameraman_poisson = PoissonEqn(side)
dataloader = DataLoader(cameraman_poisson, batch_size=1, pin_memory=True, num_workers=0)
poisson_siren = Siren(in_features=2, out_features=1, hidden_features=32, hidden_layers=2, outermost_linear=True)
load_numpy(poisson_siren, r)

model_input, gt = next(iter(dataloader))
gt = {key: value for key, value in gt.items()}
print("poisson data", sorted(gt), tuple(gt['grads'].shape), fmt(gt['grads'][0, 20], 2), fmt(gt['laplace'][0, 3], 3))

optim = torch.optim.Adam(lr=1e-4, params=poisson_siren.parameters())
for step in range(4):
    model_output, coords = poisson_siren(model_input)
    train_loss = gradients_mse(model_output, coords, gt['grads'])
    print("Step %d, Total loss %0.6f" % (step, train_loss))
    optim.zero_grad()
    train_loss.backward()
    optim.step()
print("grad of first layer", fmt(poisson_siren.net[0].linear.weight.grad, 4))


# one Poisson training step under torch.compile against the same step eagerly
def train_step(inp, grads):
    model_output, coords = poisson_siren(inp)
    train_loss = gradients_mse(model_output, coords, grads)
    optim.zero_grad()
    train_loss.backward()
    optim.step()
    return train_loss


state, opt_state = copy.deepcopy(poisson_siren.state_dict()), copy.deepcopy(optim.state_dict())
eager = [train_step(model_input, gt['grads']).item() for _ in range(2)]
after = {k: v.clone() for k, v in poisson_siren.state_dict().items()}
poisson_siren.load_state_dict(state)
optim.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(model_input, gt['grads']).item() for _ in range(2)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(poisson_siren.state_dict()[k], after[k], rtol=1e-4, atol=1e-6) for k in after))
