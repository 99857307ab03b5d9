# PyTorch's MaskedTensor tutorials (pytorch/tutorials, prototype_source/
# maskedtensor_overview.py, maskedtensor_sparsity.py and
# maskedtensor_adagrad.py) and torch.masked's functional reductions:
# masked_tensor / as_masked_tensor construction and printing, indexing,
# the issues MaskedTensor resolves (torch.where's NaN gradient, a / 0
# under torch.where, nansum's gradient, safe softmax, nan-reductions as
# masked amax / argmax / mean with and without dim), get_data / get_mask,
# gradients through masked ops (x.grad printed as a MaskedTensor), the
# elementwise / reduction semantics (masks must match), to_sparse_coo on
# a MaskedTensor, the Adagrad-with-MaskedTensor update (a sparse COO
# masked gradient) against the sparse-gradient Adagrad, the sparsity
# tutorial's sparse COO MaskedTensor ops, and
# torch.masked.sum / mean / amax / softmax / log_softmax / norm with
# mask=. Changes for a CPU test: small sizes; the tutorials' random data
# drawn after torch.manual_seed.
import warnings

import torch
from torch.masked import as_masked_tensor, masked_tensor

# Disable prototype warnings and such
warnings.filterwarnings(action='ignore', category=UserWarning)

torch.manual_seed(0)

######################################################################
# Overview: construction and indexing
data = torch.arange(24).reshape(2, 3, 4)
mask = data % 2 == 0

print("data:\n", data)
print("mask:\n", mask)

# float is used for cleaner visualization when being printed
mt = masked_tensor(data.float(), mask)

print("mt[0]:\n", mt[0])
print("mt[:, :, 2:4]:\n", mt[:, :, 2:4])
print(mt.shape, mt.dtype, mt.dim(), mt.size(1))

######################################################################
# Distinguishing between 0 and NaN gradient: torch.where
x = torch.tensor([-10., -5, 0, 5, 10, 50, 60, 70, 80, 90, 100], requires_grad=True)
y = torch.where(x < 0, torch.exp(x), torch.ones_like(x))
y.sum().backward()
print("x.grad:", x.grad)

x = torch.tensor([-10., -5, 0, 5, 10, 50, 60, 70, 80, 90, 100])
mask = x < 0
mx = masked_tensor(x, mask, requires_grad=True)
my = masked_tensor(torch.ones_like(x), ~mask, requires_grad=True)
y = torch.where(mask, torch.exp(mx), my)
y.sum().backward()
print("mx.grad:", mx.grad)
print("my.grad:", my.grad)

######################################################################
# Another torch.where: a / 0
a = torch.randn((), requires_grad=True)
b = torch.tensor(False)
c = torch.ones(())
print("torch.where(b, a/0, c):\n", torch.where(b, a / 0, c))
print("torch.autograd.grad(torch.where(b, a/0, c), a):\n",
      torch.autograd.grad(torch.where(b, a / 0, c), a))

a = masked_tensor(torch.randn(()), torch.tensor(True), requires_grad=True)
b = torch.tensor(False)
c = torch.ones(())
print("torch.where(b, a/0, c):\n", torch.where(b, a / 0, c))
print("torch.autograd.grad(torch.where(b, a/0, c), a):\n",
      torch.autograd.grad(torch.where(b, a / 0, c), a))

######################################################################
# nansum and nanmean
x = torch.tensor([1., 2., float('nan')])
b = torch.tensor(1.0, requires_grad=True)
c = x * b
c1 = torch.nansum(c)  # or torch.nanmean

bgrad1, = torch.autograd.grad(c1, b, retain_graph=True)
print("bgrad1:", bgrad1)

x = torch.tensor([1., 2., float('nan')])
b = torch.tensor(1.0, requires_grad=True)
mt = masked_tensor(x, ~torch.isnan(x))
c = mt * b
c1 = torch.sum(c)  # or torch.mean
print("c1:", c1)

bgrad1, = torch.autograd.grad(torch.sum(c), b, retain_graph=True)
print("bgrad1:", bgrad1)
print("mean:", torch.mean(c))

######################################################################
# Safe softmax
data = torch.randn(3, 3)
mask = torch.tensor([[True, False, False], [True, False, True], [False, False, False]])
x = data.masked_fill(~mask, float('-inf'))

mt = masked_tensor(data, mask)
print("x:\n", x)
print("mt:\n", mt)
print("x.softmax(0):\n", x.softmax(0))
print("mt.softmax(0):\n", mt.softmax(0))

######################################################################
# Implementing missing torch.nan* operators
x = torch.empty(16).fill_(float('nan'))
x[[0, 3, 5, 11]] = torch.tensor([4., -2., 7., 1.])
print("x:\n", x)
print("torch.nanmean(x):", torch.nanmean(x))
mt = masked_tensor(x, ~torch.isnan(x))
print("mt.mean():", mt.mean())
print("mt.amax():", mt.amax())
print("mt.argmax():", mt.argmax())
print("mt.sum():", mt.sum())

x = torch.tensor([[1., float('nan'), 3.], [float('nan'), float('nan'), 6.],
                  [float('nan'), float('nan'), float('nan')]])
mt = masked_tensor(x, ~torch.isnan(x))
print("mt.sum(1):\n", mt.sum(1))
print("mt.sum(dim=0, keepdim=True):\n", mt.sum(dim=0, keepdim=True))
print("mt.mean(1):\n", mt.mean(1))
print("mt.amax(1):\n", mt.amax(1))
print("mt.amin(0):\n", mt.amin(0))
print("mt.argmax(1):\n", mt.argmax(1))

######################################################################
# Semantics: elementwise ops need matching masks
data = torch.arange(1, 7.).reshape(2, 3)
m0 = torch.tensor([[True, False, True], [False, True, True]])
m1 = torch.tensor([[True, True, False], [False, True, True]])
mt0 = masked_tensor(data, m0)
mt1 = masked_tensor(data * 10, m0)
mt2 = masked_tensor(data, m1)
print("mt0 + mt1:\n", mt0 + mt1)
print("mt0 * 2 - 1:\n", mt0 * 2 - 1)
print("mt0.exp():\n", torch.exp(mt0))
print("mt0 / 0:\n", mt0 / 0)
try:
    mt0 + mt2
except ValueError as e:
    print("ValueError:", e)
print("get_data:\n", mt0.get_data())
print("get_mask:\n", mt0.get_mask())
print("to_tensor(0):\n", mt0.to_tensor(0))
amt = as_masked_tensor(data, m1)
print("as_masked_tensor:\n", amt)
print(mt0.is_sparse, mt0.layout)

# gradients through masked reductions
w = torch.tensor([[1., 2., 3.], [4., 5., 6.]])
mw = masked_tensor(w, m0, requires_grad=True)
loss = (mw * mw).sum()
loss.backward()
print("mw.grad:\n", mw.grad)
print("loss:", loss)

######################################################################
# Sparsity: a sparse COO MaskedTensor
values = torch.tensor([[0, 0, 3], [4, 0, 5]])
mask = torch.tensor([[False, False, True], [False, False, True]])
mt = masked_tensor(values, mask)
sparse_coo_mt = mt.to_sparse_coo()
print("mt:\n", mt)
print("mt (sparse coo):\n", sparse_coo_mt)
print("mt data (sparse coo):\n", sparse_coo_mt.get_data())
print(sparse_coo_mt.is_sparse, sparse_coo_mt.layout)

######################################################################
# Adagrad with MaskedTensor
i = [[0, 1, 1],
     [2, 0, 2]]
v = [3.2, 4.1, 5.3]
grad = torch.sparse_coo_tensor(i, v, [2, 4], dtype=torch.float32)
param = torch.arange(8).reshape(2, 4).float()
state_sum = torch.full_like(param, 0.5)  # initial value for state sum
print("param:\n", param)
print("grad:\n", grad.to_dense())
print("state_sum:\n", state_sum)

state_sum2 = state_sum.clone()
param2 = param.clone()
clr, eps = 0.1, 1e-10


def _make_sparse(grad, grad_indices, values):
    size = grad.size()
    return torch.sparse_coo_tensor(grad_indices, values, size)


grad = grad.coalesce()  # the update is non-linear so indices must be unique
grad_indices = grad._indices()
grad_values = grad._values()

state_sum.add_(_make_sparse(grad, grad_indices, grad_values.pow(2)))  # a different _make_sparse per se
std = state_sum.sparse_mask(grad)
print("state_sum:\n", state_sum)
print("std:\n", std.to_dense())

std_values = std._values().sqrt_().add_(eps)
param.add_(_make_sparse(grad, grad_indices, grad_values / std_values), alpha=-clr)
print("param:\n", param)

# We've been conflating sparse storage and mask semantics: MaskedTensor
# keeps them apart (the tutorial's sparse masked gradient)
mask = (grad.to_dense() != 0).to_sparse()
masked_grad = masked_tensor(grad, mask)
print("masked_grad:\n", masked_grad)

state_sum2 = state_sum2 + masked_grad.pow(2).get_data()
std2 = masked_tensor(state_sum2.to_sparse(), mask)
print("std2 data (restricted to the mask):\n", std2.get_data())

# We can add support for in-place operations later. Notice how this doesn't
# need to access any storage internals and is in general a lot shorter
std2 = std2.sqrt().add(eps)
print("std2:\n", std2)
update = masked_grad / std2
print("update data:\n", update.get_data())
param2 = param2.add(update.get_data(), alpha=-clr)
print("state_sum2:\n", state_sum2)
print("param2:\n", param2)
print("same params:", torch.allclose(param, param2), torch.allclose(state_sum, state_sum2))

# the sparsity tutorial's appendix: sparse COO MaskedTensors
i = [[0, 1, 1],
     [2, 0, 2]]
v1 = [3, 4, 5]
v2 = [20, 30, 40]
m = torch.tensor([True, False, True])
s1 = torch.sparse_coo_tensor(i, v1, (2, 3))
s2 = torch.sparse_coo_tensor(i, v2, (2, 3))
mask = torch.sparse_coo_tensor(i, m, (2, 3))
mt1 = masked_tensor(s1, mask)
mt2 = masked_tensor(s2, mask)
print("mt1:\n", mt1)
print("mt2:\n", mt2)
print("mt2 / mt1:\n", mt2 / mt1)
print("mt1 * mt2:\n", mt1 * mt2)
print("(mt1 * mt2).get_data():\n", (mt1 * mt2).get_data())
print("mt1.sum():\n", mt1.sum())
print("mt1.amin():\n", mt1.amin())
print("mt1.to_dense():\n", mt1.to_dense())
print(mt1.is_sparse, mt1.to_dense().is_sparse, mt1.get_mask().layout)

######################################################################
# torch.masked's functional reductions with mask=
x = torch.randn(3, 4)
m = torch.rand(3, 4) > 0.4
print("masked.sum:", torch.masked.sum(x, 1, mask=m))
print("masked.sum keepdim:", torch.masked.sum(x, 0, keepdim=True, mask=m))
print("masked.mean:", torch.masked.mean(x, 1, mask=m))
print("masked.amax:", torch.masked.amax(x, 1, mask=m))
print("masked.amin:", torch.masked.amin(x, 0, mask=m))
print("masked.softmax:\n", torch.masked.softmax(x, 1, mask=m))
print("masked.log_softmax:\n", torch.masked.log_softmax(x, 1, mask=m))
print("masked.norm:", torch.masked.norm(x, 2.0, 1, mask=m))
print("masked.prod:", torch.masked.prod(x, 1, mask=m))
print("masked.var:", torch.masked.var(x, 1, unbiased=False, mask=m))
print("masked.sum no mask:", torch.masked.sum(x, 1))
