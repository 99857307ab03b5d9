# pytorch/tutorials, beginner_source/understanding_leaf_vs_nonleaf_tutorial.py
# ("Understanding requires_grad, retain_grad, Leaf, and Non-leaf Tensors"),
# its code in order: x @ W + b, F.relu, F.mse_loss; is_leaf /
# requires_grad printed with f-string ``=`` specifiers; backward; W.grad,
# b.grad, the None grads of x, y and of the non-leaf z (PyTorch warns);
# retain_grad() on z, y_pred and loss and their grads.
# Changes for a test: the errors the tutorial quotes are run and printed
# (backward of a loss that needs no grad, retain_grad on a tensor that
# does not require grad), the summary table's cases are printed
# (retains_grad, requires_grad_ on a non-leaf), the warning on z.grad is
# captured, and the step is also run under torch.compile and checked
# against eager.
import warnings

import torch
import torch.nn.functional as F

# tensor setup
x = torch.ones(1, 3)                      # input with shape: (1, 3)
W = torch.ones(3, 2, requires_grad=True)  # weights with shape: (3, 2)
b = torch.ones(1, 2, requires_grad=True)  # bias with shape: (1, 2)
y = torch.ones(1, 2)                      # output with shape: (1, 2)

# forward pass
z = (x @ W) + b                           # pre-activation with shape: (1, 2)
y_pred = F.relu(z)                        # activation with shape: (1, 2)
loss = F.mse_loss(y_pred, y)              # scalar loss

# prints True because new tensors are leafs by convention
print(f"{x.is_leaf=}")

# prints False because tensor is the result of an operation with at
# least one input having requires_grad=True
print(f"{z.is_leaf=}")

print(f"{x.requires_grad=}") # prints False because requires_grad=False by default
print(f"{W.requires_grad=}") # prints True because we set requires_grad=True in constructor
print(f"{z.requires_grad=}") # prints True because tensor is a non-leaf node

loss.backward()

print(f"{W.grad=}")
print(f"{b.grad=}")

# prints all None because requires_grad=False
print(f"{x.grad=}")
print(f"{y.grad=}")

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    print(f"{z.grad=}")
print("warned:", [str(w.message).split(".")[0] for w in caught])

# we have to re-run the forward pass
z = (x @ W) + b
y_pred = F.relu(z)
loss = F.mse_loss(y_pred, y)

# tell PyTorch to store the gradients after backward()
z.retain_grad()
y_pred.retain_grad()
loss.retain_grad()

# have to zero out gradients otherwise they would accumulate
W.grad = None
b.grad = None

# backpropagation
loss.backward()

# print gradients for all tensors that have requires_grad=True
print(f"{W.grad=}")
print(f"{b.grad=}")
print(f"{z.grad=}")
print(f"{y_pred.grad=}")
print(f"{loss.grad=}")

# the summary table
for name, t in [("x", x), ("W", W), ("z", z), ("y_pred", y_pred), ("loss", loss)]:
    print(f"{name}: is_leaf={t.is_leaf} requires_grad={t.requires_grad} retains_grad={t.retains_grad}")
try:
    x.retain_grad()
except RuntimeError as e:
    print("x.retain_grad():", e)
W.retain_grad()
print("W.retain_grad() is a no-op:", W.retains_grad)
try:
    z.requires_grad_(False)
except RuntimeError as e:
    print("z.requires_grad_(False):", str(e).split(".")[0])
z.requires_grad_(True)
x2 = torch.ones(1, 3)
W2 = torch.ones(3, 2)
try:
    F.mse_loss(F.relu(x2 @ W2), y).backward()
except RuntimeError as e:
    print("backward:", e)

# compiled: the step (forward, backward into W.grad and b.grad) checked against eager
def step(x, y):
    loss = F.mse_loss(F.relu((x @ W) + b), y)
    loss.backward()
    return loss

xs = torch.linspace(-1, 1, 3).reshape(1, 3)
W.grad = b.grad = None
loss_c = torch.compile(step)(xs, y)
grads_c = (W.grad.clone(), b.grad.clone())
W.grad = b.grad = None
loss_e = step(xs, y)
print("compiled == eager", torch.allclose(loss_c, loss_e), torch.equal(grads_c[0], W.grad),
      torch.equal(grads_c[1], b.grad))
