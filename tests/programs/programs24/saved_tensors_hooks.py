# pytorch/tutorials, intermediate_source/autograd_saved_tensors_hooks_tutorial.py
# ("Hooks for autograd saved tensors"), its code in order: grad_fn._saved_self /
# _saved_other / _saved_result (identity and equality), printing pack / unpack
# hooks, saved_tensors_hooks whose packed value is a scaled tensor, a list
# index, a (tensor, closure) tuple and a repr string eval'd back, the
# device / cpu() pack, save_on_cpu(pin_memory=True) in a module and the
# SaveToCpu wrapper, the torch.save / torch.load disk hooks (the naive,
# the "incorrect" double-access one and SelfDeletingTempFile), and SaveToDisk
# around nn.DataParallel.
# Changes for a test: torch.manual_seed(0); values printed where the
# tutorial only computes them (gradients, losses); the "Double access"
# check prints the exception type; SaveToDisk's net is also called (with
# the tutorial's pack_hook fixed to save ``x``: its ``tensor`` is undefined,
# so the tutorial's threshold is lowered to reach the disk path and the
# NameError is shown), and a training step with the disk hooks runs under
# torch.compile checked against eager.
import torch

torch.manual_seed(0)

a = torch.randn(5, requires_grad=True)
b = torch.ones(5, requires_grad=True)
y = a * b

print(y.grad_fn._saved_self)
print(y.grad_fn._saved_other)


def f(x):
    return x * x

x = torch.randn(5, requires_grad=True)
y = f(f(f(x)))
y.sum().backward()
print('f(f(f(x))) grad', x.grad)

a = torch.randn(5, requires_grad=True)
b = torch.ones(5, requires_grad=True)
y = a * b

print(y.grad_fn._saved_self is a)   # True
print(y.grad_fn._saved_other is b)  # True

a = torch.randn(5, requires_grad=True)
y = torch.exp(a)
print(y.grad_fn._saved_result.equal(y))  # True
print(y.grad_fn._saved_result is y)      # False


def pack_hook(x):
    print("Packing", x)
    return x

def unpack_hook(x):
    print("Unpacking", x)
    return x
a = torch.ones(5, requires_grad=True)
b = torch.ones(5, requires_grad=True) * 2

with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
    y = a * b

y.sum().backward()
print('a.grad', a.grad)

x = torch.randn(5, requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(lambda x: x * 4, lambda x: x / 4):
    y = torch.pow(x, 2)
y.sum().backward()
assert(x.grad.equal(2 * x))

# Returning the index of a Python list
storage = []

def pack(x):
    storage.append(x)
    return len(storage) - 1

def unpack(x):
    return storage[x]

x = torch.randn(5, requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
    y = x * x
y.sum().backward()

assert(x.grad.equal(2 * x))
print('storage', len(storage))

# Returning some tensor and a function how to unpack it
def pack(x):
    delta = torch.randn(*x.size())
    return x - delta, lambda x: x + delta

def unpack(packed):
    x, f = packed
    return f(x)


x = torch.randn(5, requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
    y = x * x
y.sum().backward()

assert(torch.allclose(x.grad, 2 * x))
print('tuple grad', x.grad)

# Returning the __repr__ of the tensor
x = torch.randn(5, requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(lambda x: repr(x), lambda x: eval("torch." + x)):
    y = x * x
y.sum().backward()
assert(torch.all(x.grad - 2 * x <= 1e-4))
print('repr grad', x.grad)


def pack_hook(x):
    return (x.device, x.cpu())

def unpack_hook(packed):
    device, tensor = packed
    return tensor.to(device)

x = torch.randn(5, requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
    y = x * x
y.sum().backward()

print(torch.allclose(x.grad, (2 * x)))

import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(5))

    def forward(self, x):
        with torch.autograd.graph.save_on_cpu(pin_memory=True):
            # some computation
            return self.w * x

x = torch.randn(5)
model = Model()
loss = model(x).sum()
loss.backward()
print('save_on_cpu w.grad', model.w.grad, torch.equal(model.w.grad, x))


class SaveToCpu(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        with torch.autograd.graph.save_on_cpu(pin_memory=True):
            return self.module(*args, **kwargs)

model = nn.Sequential(
    nn.Linear(10, 100),
    SaveToCpu(nn.Linear(100, 100)),
    nn.Linear(100, 10),
)

x = torch.randn(10)
loss = model(x).sum()
loss.backward()
print('SaveToCpu loss', f'{loss.item():.6f}', [f'{p.grad.abs().sum().item():.5f}' for p in model.parameters()])
print(model)

# Naive version - HINT: Don't do this

import uuid
tmp_dir = "temp"

def pack_hook(tensor):
    name = os.path.join(tmp_dir, str(uuid.uuid4()))
    torch.save(tensor, name)
    return name

def unpack_hook(name):
    return torch.load(name)

# Incorrect version - HINT: Don't do this

import uuid
import os
import tempfile
tmp_dir_obj = tempfile.TemporaryDirectory()
tmp_dir = tmp_dir_obj.name

def pack_hook(tensor):
    name = os.path.join(tmp_dir, str(uuid.uuid4()))
    torch.save(tensor, name)
    return name

def unpack_hook(name):
    tensor = torch.load(name)
    os.remove(name)
    return tensor

x = torch.ones(5, requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
    y = x.pow(2)
print(y.grad_fn._saved_self)
try:
    print(y.grad_fn._saved_self)
    print("Double access succeeded!")
except Exception as e:
    print("Double access failed!", type(e).__name__)


class SelfDeletingTempFile():
    def __init__(self):
        self.name = os.path.join(tmp_dir, str(uuid.uuid4()))

    def __del__(self):
        os.remove(self.name)

def pack_hook(tensor):
    temp_file = SelfDeletingTempFile()
    torch.save(tensor, temp_file.name)
    return temp_file

def unpack_hook(temp_file):
    return torch.load(temp_file.name)

x = torch.ones(5, requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
    y = x.pow(2)
print('files while the graph lives', len(os.listdir(tmp_dir)))
print(y.grad_fn._saved_self)
print(y.grad_fn._saved_self)
y.sum().backward()
print('self-deleting grad', x.grad)
del y
import gc; gc.collect()
print('files after backward', len(os.listdir(tmp_dir)))

# Only save on disk tensors that have size >= 1000
SAVE_ON_DISK_THRESHOLD = 1000

def pack_hook(x):
    if x.numel() < SAVE_ON_DISK_THRESHOLD:
        return x
    temp_file = SelfDeletingTempFile()
    torch.save(tensor, temp_file.name)
    return temp_file

def unpack_hook(tensor_or_sctf):
    if isinstance(tensor_or_sctf, torch.Tensor):
        return tensor_or_sctf
    return torch.load(tensor_or_sctf.name)

class SaveToDisk(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *args, **kwargs):
        with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
            return self.module(*args, **kwargs)

net = nn.DataParallel(SaveToDisk(Model()))
print(net)
x = torch.randn(5)
loss = net(x).sum()
loss.backward()
print('SaveToDisk (under threshold) grad', net.module.module.w.grad)

SAVE_ON_DISK_THRESHOLD = 4
try:
    net(x)
except NameError as e:
    print('tutorial pack_hook:', e)


def pack_hook(x):
    if x.numel() < SAVE_ON_DISK_THRESHOLD:
        return x
    temp_file = SelfDeletingTempFile()
    torch.save(x, temp_file.name)
    return temp_file

big = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), SaveToDisk(nn.Sequential(nn.Linear(16, 16), nn.GELU())),
                    nn.Linear(16, 3))
opt = torch.optim.Adam(big.parameters(), lr=1e-2)
data, target = torch.randn(6, 8), torch.tensor([0, 1, 2, 0, 1, 2])
for step in range(3):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(big(data), target)
    loss.backward()
    opt.step()
    print(f'SaveToDisk step {step} loss {loss.item():.6f}')
gc.collect()
print('files left', len(os.listdir(tmp_dir)))

# compiled: one training step with the disk hooks, checked against eager
import copy
state, opt_state = copy.deepcopy(big.state_dict()), copy.deepcopy(opt.state_dict())


def train_step(data, target):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(big(data), target)
    loss.backward()
    opt.step()
    return loss


loss_c = torch.compile(train_step)(data, target)
after_c = copy.deepcopy(big.state_dict())
big.load_state_dict(state)
opt.load_state_dict(opt_state)
loss_e = train_step(data, target)
print('compiled == eager', torch.allclose(loss_c, loss_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in big.state_dict().items()))
