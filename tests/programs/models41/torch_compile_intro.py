# PyTorch tutorial "Introduction to torch.compile" (intermediate/
# torch_compile_tutorial), written the way the tutorial has it: foo compiled
# with torch.compile(foo) and with the @torch.compile decorator, a nested
# function called from a compiled outer function, MyModule compiled with
# torch.compile(mod), the timed() helper, generate_data / init_model,
# evaluation under mode="reduce-overhead" and training under
# mode="max-autotune" after torch._dynamo.reset(), opt.zero_grad(True), the
# eager-vs-compiled equality checks, and dynamic=True over changing sizes.
# Changes for a CPU test: torch.manual_seed(0) up front, a one-conv network
# (bias=False before BatchNorm, as resnet18 has it) in place of
# torchvision's resnet18, on 3x8x8 images (batch 4, 10 classes) instead
# of 3x128x128 on CUDA, timed() on time.perf_counter
# instead of CUDA events, 2 iterations instead of 10, times printed
# under [rng] (they are not compared), and the torch._dynamo.explain /
# fullgraph=True graph-break section left out (see the test's docstring).
import time

import numpy as np
import torch
import torch._dynamo

torch.manual_seed(0)


def foo(x, y):
    a = torch.sin(x)
    b = torch.cos(y)
    return a + b


opt_foo1 = torch.compile(foo)
x, y = torch.randn(10, 10), torch.randn(10, 10)
print(opt_foo1(x, y))
print("foo compiled == eager:", torch.allclose(opt_foo1(x, y), foo(x, y), atol=1e-6))


@torch.compile
def opt_foo2(x, y):
    a = torch.sin(x)
    b = torch.cos(y)
    return a + b


print(opt_foo2(torch.randn(10, 10), torch.randn(10, 10)))


def inner_function(x):
    return torch.sin(x)


@torch.compile
def outer_function(x, y):
    a = inner_function(x)
    b = torch.cos(y)
    return a + b


print(outer_function(torch.randn(10, 10), torch.randn(10, 10)))


class MyModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(100, 10)

    def forward(self, x):
        return torch.nn.functional.relu(self.lin(x))


mod = MyModule()
opt_mod = torch.compile(mod)
inp = torch.randn(10, 100)
print(opt_mod(inp))
print("module compiled == eager:", torch.allclose(opt_mod(inp), mod(inp), atol=1e-6))


# Returns the result of running `fn()` and the time it took for `fn()` to run,
# in seconds.
def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


# Generates random input and targets data for the model, where `b` is
# batch size.
def generate_data(b):
    return (
        torch.randn(b, 3, 8, 8).to(torch.float32),
        torch.randint(10, (b,)),
    )


class SmallNet(torch.nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.AdaptiveAvgPool2d((1, 1))
        self.fc = torch.nn.Linear(8, num_classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


def init_model():
    return SmallNet(num_classes=10).to(torch.float32)


N_ITERS = 2
model = init_model()

# Reset since we are using a different mode.
torch._dynamo.reset()

model_opt = torch.compile(model, mode="reduce-overhead")

inp = generate_data(4)[0]
with torch.no_grad():
    model.eval()
    eager_out, eager_time = timed(lambda: model(inp))
    print("eager:", eager_time, "[rng]")
    compile_out, compile_time = timed(lambda: model_opt(inp))
    print("compile:", compile_time, "[rng]")
    print("eval compiled == eager:", torch.allclose(eager_out, compile_out, atol=1e-5))

eager_times = []
for i in range(N_ITERS):
    inp = generate_data(4)[0]
    with torch.no_grad():
        _, eager_time = timed(lambda: model(inp))
    eager_times.append(eager_time)
    print(f"eager eval time {i}: {eager_time} [rng]")

compile_times = []
for i in range(N_ITERS):
    inp = generate_data(4)[0]
    with torch.no_grad():
        _, compile_time = timed(lambda: model_opt(inp))
    compile_times.append(compile_time)
    print(f"compile eval time {i}: {compile_time} [rng]")
eager_med = np.median(eager_times)
compile_med = np.median(compile_times)
speedup = eager_med / compile_med
print(f"(eval) eager median: {eager_med}, compile median: {compile_med}, speedup: {speedup}x [rng]")

# training
model = init_model()
opt = torch.optim.Adam(model.parameters())


def train(mod, data):
    opt.zero_grad(True)
    pred = mod(data[0])
    loss = torch.nn.CrossEntropyLoss()(pred, data[1])
    loss.backward()
    opt.step()
    return loss


torch._dynamo.reset()
train_opt = torch.compile(train, mode="max-autotune")

ref_model = init_model()
ref_model.load_state_dict(model.state_dict())
ref_opt = torch.optim.Adam(ref_model.parameters())
for i in range(N_ITERS):
    data = generate_data(4)
    loss_c = train_opt(model, data)
    ref_opt.zero_grad(True)
    loss_e = torch.nn.CrossEntropyLoss()(ref_model(data[0]), data[1])
    loss_e.backward()
    ref_opt.step()
    print(f"train step {i}: loss {loss_c.item():.6f} compiled == eager:",
          torch.allclose(loss_c, loss_e, rtol=1e-5, atol=1e-6),
          all(torch.allclose(p, q, rtol=1e-4, atol=1e-6)
              for p, q in zip(model.parameters(), ref_model.parameters())))
print("bn running_mean:", model.bn1.running_mean)

# dynamic shapes
torch._dynamo.reset()


@torch.compile(dynamic=True)
def scale_and_sum(x, s):
    return (x * s).sum(dim=0)


for n in (3, 5, 7):
    t = torch.arange(n * 2, dtype=torch.float32).reshape(n, 2)
    print(n, scale_and_sum(t, 0.5), torch.equal(scale_and_sum(t, 0.5), (t * 0.5).sum(dim=0)))
