# PyTorch tutorial "Parametrizations Tutorial" (register_parametrization:
# symmetric, skew-symmetric, Cayley map, matrix exponential, chained
# parametrizations, cached(), right_inverse and initialization,
# remove_parametrizations), then the built-in torch.nn.utils.parametrizations
# (orthogonal, spectral_norm, weight_norm) training a small model.
# Weights and data come from numpy so tracec and torch run the same numbers.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.utils.parametrize as P
from torch.nn.utils import parametrizations

rng = np.random.default_rng(0)


def npt(*shape):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


def numpy_init(model, scale=0.5):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(scale * npt(*p.shape))
    return model


def symmetric(X):
    return X.triu() + X.triu(1).transpose(-1, -2)


X = npt(3, 3)
A = symmetric(X)
assert torch.allclose(A, A.T)  # A is symmetric
print(A)  # Quick visual check


class LinearSymmetric(nn.Module):
    def __init__(self, n_features):
        super().__init__()
        self.weight = nn.Parameter(npt(n_features, n_features))

    def forward(self, x):
        A = symmetric(self.weight)
        return x @ A


layer = LinearSymmetric(3)
out = layer(npt(8, 3))
print(out.shape)


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).transpose(-1, -2)


layer = numpy_init(nn.Linear(3, 3))
P.register_parametrization(layer, "weight", Symmetric())
A = layer.weight
assert torch.allclose(A, A.T)  # A is symmetric
print(A)                       # Quick visual check


class Skew(nn.Module):
    def forward(self, X):
        A = X.triu(1)
        return A - A.transpose(-1, -2)


cnn = numpy_init(nn.Conv2d(in_channels=5, out_channels=8, kernel_size=3))
P.register_parametrization(cnn, "weight", Skew())
# Print a few kernels
print(cnn.weight[0, 1])
print(cnn.weight[2, 2])

layer = numpy_init(nn.Linear(3, 3))
print(f"Unparametrized:\n{layer}")
P.register_parametrization(layer, "weight", Symmetric())
print(f"\nParametrized:\n{layer}")

parametrized_weight = layer.parametrizations.weight
for i, p in enumerate(parametrized_weight):
    print(f"Parametrization {i}: {p}")
print(layer.parametrizations.weight.original)
print(torch.dist(layer.weight, layer.parametrizations.weight.original.triu() +
                 layer.parametrizations.weight.original.triu(1).T))


class NoisyParametrization(nn.Module):
    def forward(self, X):
        print("Computing the Parametrization")
        return X


layer = nn.Linear(4, 4)
P.register_parametrization(layer, "weight", NoisyParametrization())
print("Here, layer.weight is recomputed every time we call it")
foo = layer.weight + layer.weight.T
bar = layer.weight.sum()
with P.cached():
    print("Here, it is computed just the first time layer.weight is called")
    foo = layer.weight + layer.weight.T
    bar = layer.weight.sum()


class CayleyMap(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("Id", torch.eye(n))

    def forward(self, X):
        # (I + X)(I - X)^{-1}
        return torch.linalg.solve(self.Id - X, self.Id + X)


layer = numpy_init(nn.Linear(3, 3))
P.register_parametrization(layer, "weight", Skew())
P.register_parametrization(layer, "weight", CayleyMap(3))
X = layer.weight
print(torch.dist(X.T @ X, torch.eye(3)) < 1e-5)  # X is orthogonal


class MatrixExponential(nn.Module):
    def forward(self, X):
        return torch.matrix_exp(X)


layer_orthogonal = numpy_init(nn.Linear(3, 3))
P.register_parametrization(layer_orthogonal, "weight", Skew())
P.register_parametrization(layer_orthogonal, "weight", MatrixExponential())
X = layer_orthogonal.weight
print(torch.dist(X.T @ X, torch.eye(3)) < 1e-5)  # X is orthogonal

layer_spd = numpy_init(nn.Linear(3, 3))
P.register_parametrization(layer_spd, "weight", Symmetric())
P.register_parametrization(layer_spd, "weight", MatrixExponential())
X = layer_spd.weight
print(torch.dist(X, X.T))                        # X is symmetric
print((torch.linalg.eigvalsh(X) > 0.).all())  # X is positive definite


class Skew(nn.Module):
    def forward(self, X):
        A = X.triu(1)
        return A - A.transpose(-1, -2)

    def right_inverse(self, A):
        # We assume that A is skew-symmetric
        # We take the upper-triangular elements, as these are those used in the forward
        return A.triu(1)


layer = numpy_init(nn.Linear(3, 3))
P.register_parametrization(layer, "weight", Skew())
X = npt(3, 3)
X = X - X.T                             # X is now skew-symmetric
layer.weight = X                        # Initialize layer.weight to be X
print(torch.dist(layer.weight, X))      # layer.weight == X


class PruningParametrization(nn.Module):
    def __init__(self, X, p_drop=0.2):
        super().__init__()
        # sample zeros with probability p_drop
        mask = torch.full_like(X, 1.0 - p_drop)
        self.mask = torch.bernoulli(mask)

    def forward(self, X):
        return X * self.mask

    def right_inverse(self, A):
        return A


layer = numpy_init(nn.Linear(3, 4))
X = layer.weight.clone()
P.register_parametrization(layer, "weight", PruningParametrization(X, p_drop=0.5))
print(torch.equal(layer.weight == 0, layer.parametrizations.weight[0].mask == 0))
print(torch.equal(layer.parametrizations.weight.original, X))

layer = numpy_init(nn.Linear(3, 3))
print("Before:")
print(layer)
print(layer.weight)
P.register_parametrization(layer, "weight", Skew())
print("\nParametrized:")
print(layer)
print(layer.weight)
P.remove_parametrizations(layer, "weight")
print("\nAfter. Weight has skew-symmetric values but it is unconstrained:")
print(layer)
print(layer.weight)

layer = numpy_init(nn.Linear(3, 3))
print("Before:")
print(layer)
print(layer.weight)
P.register_parametrization(layer, "weight", Skew())
print("\nParametrized:")
print(layer)
print(layer.weight)
P.remove_parametrizations(layer, "weight", leave_parametrized=False)
print("\nAfter. Same as Before:")
print(layer)
print(layer.weight)

# beyond the tutorial: the built-in parametrizations, trained
# (weights from numpy before registering: orthogonal keeps the initial weight
# as its 'base', spectral_norm runs 15 power iterations from random u, v)
model = nn.Sequential(
    parametrizations.orthogonal(numpy_init(nn.Linear(6, 6))),
    nn.Tanh(),
    parametrizations.spectral_norm(numpy_init(nn.Linear(6, 5))),
    nn.Tanh(),
    parametrizations.weight_norm(numpy_init(nn.Linear(5, 2)), dim=0),
)
print(model)
print(sorted(model.state_dict().keys()))
print(P.is_parametrized(model[0]), P.is_parametrized(model[0], "bias"),
      P.type_before_parametrizations(model[2]).__name__)
x, y = npt(16, 6), npt(16, 2)
opt = torch.optim.Adam(model.parameters(), lr=0.02)
for step in range(5):
    opt.zero_grad()
    with P.cached():
        loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    W = model[0].weight
    print('step', step, 'loss %.5f' % loss.item(),
          'orth err %.1e' % 0 if torch.dist(W.T @ W, torch.eye(6)) < 1e-4 else 'not orthogonal')
model.eval()
with torch.no_grad():
    s = torch.linalg.matrix_norm(model[2].weight, ord=2)
print('sigma %.4f' % s.item(), 'eval %.5f' % nn.functional.mse_loss(model(x), y).item())
wn = model[4].parametrizations.weight
print('g', tuple(wn.original0.shape), 'v', tuple(wn.original1.shape))
for i in (0, 2, 4):
    P.remove_parametrizations(model[i], "weight")
print(model)
print('after remove %.5f' % nn.functional.mse_loss(model(x), y).item())
for orthogonal_map in ("matrix_exp", "cayley", "householder"):
    layer = parametrizations.orthogonal(numpy_init(nn.Linear(4, 4)), orthogonal_map=orthogonal_map)
    with torch.no_grad():
        layer.parametrizations.weight.original.add_(0.3 * npt(4, 4))
    W = layer.weight
    print(orthogonal_map, torch.dist(W.T @ W, torch.eye(4)).item() < 1e-5, '%.5f' % W.sum().item())
try:
    P.remove_parametrizations(model[0], "weight")
except ValueError as e:
    print('ValueError', e)
