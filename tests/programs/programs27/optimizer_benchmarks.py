# jettify/pytorch-optimizer's examples/viz_optimizers.py
# (https://github.com/jettify/pytorch-optimizer/blob/master/examples/
# viz_optimizers.py) with torch.optim's own optimizers: the Rosenbrock and
# Rastrigin test functions written with torch.cos / math.pi, a point
# x = torch.Tensor(initial_state).requires_grad_(True) optimized by
# optimizer_class([x], **params), f.backward(create_graph=True,
# retain_graph=True), torch.nn.utils.clip_grad_norm_(x, 1.0) and
# optimizer.step(), the path stored into a NumPy array from
# x.detach().numpy(), and the script's hyperparameter search objective
# (the distance of the path's end from the minimum, with its penalty).
# Optimizers: Rprop, ASGD, Adadelta, Adagrad, Adamax, NAdam, RAdam,
# RMSprop, SGD (nesterov) and LBFGS with a closure. Written for this test:
# 40 iterations per optimizer and 2 learning rates instead of hyperopt's
# search (one LBFGS step: see the test's docstring); one compiled Rosenbrock step (Rprop) against eager.
import copy
import math

import numpy as np
import torch
import torch.optim as optim


def rastrigin(tensor, lib=torch):
    # https://en.wikipedia.org/wiki/Test_functions_for_optimization
    x, y = tensor
    A = 10
    f = (A * 2 + (x ** 2 - A * lib.cos(x * math.pi * 2)) + (y ** 2 - A * lib.cos(y * math.pi * 2)))
    return f


def rosenbrock(tensor):
    # https://en.wikipedia.org/wiki/Test_functions_for_optimization
    x, y = tensor
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


def execute_steps(func, initial_state, optimizer_class, optimizer_config, num_iter=500):
    x = torch.Tensor(initial_state).requires_grad_(True)
    optimizer = optimizer_class([x], **optimizer_config)
    steps = []
    steps = np.zeros((2, num_iter + 1))
    steps[:, 0] = np.array(initial_state)
    for i in range(1, num_iter + 1):
        optimizer.zero_grad()
        f = func(x)
        f.backward(create_graph=True, retain_graph=True)
        torch.nn.utils.clip_grad_norm_(x, 1.0)
        optimizer.step()
        steps[:, i] = x.detach().numpy()
    return steps


def objective_rastrigin(params, optimizer_class):
    lr = params["lr"]
    initial_state = (-2.0, 3.5)
    minimum = (0, 0)
    optimizer_config = dict(lr=lr)
    num_iter = 40
    steps = execute_steps(rastrigin, initial_state, optimizer_class, optimizer_config, num_iter)
    return (steps[0][-1] - minimum[0]) ** 2 + (steps[1][-1] - minimum[1]) ** 2


def objective_rosenbrok(params, optimizer_class):
    lr = params["lr"]
    minimum = (1.0, 1.0)
    initial_state = (-2.0, 2.0)
    optimizer_config = dict(lr=lr)
    num_iter = 40
    steps = execute_steps(rosenbrock, initial_state, optimizer_class, optimizer_config, num_iter)
    return (steps[0][-1] - minimum[0]) ** 2 + (steps[1][-1] - minimum[1]) ** 2


optimizers = [
    (optim.Rprop, 1e-3, 1e-1), (optim.ASGD, 1e-3, 1e-2), (optim.Adadelta, 1e-1, 1.0),
    (optim.Adagrad, 1e-2, 0.5), (optim.Adamax, 1e-2, 0.3), (optim.NAdam, 1e-2, 0.3),
    (optim.RAdam, 1e-2, 0.3), (optim.RMSprop, 1e-3, 1e-2), (optim.SGD, 1e-3, 1e-2),
]
for optimizer_class, lr_low, lr_hi in optimizers:
    results = []
    for lr in (lr_low, lr_hi):
        results.append((objective_rastrigin({"lr": lr}, optimizer_class),
                        objective_rosenbrok({"lr": lr}, optimizer_class)))
    best_lr = (lr_low, lr_hi)[int(np.argmin([r[1] for r in results]))]
    steps = execute_steps(rosenbrock, (-2.0, 2.0), optimizer_class, {"lr": best_lr}, 40)
    print(f"{optimizer_class.__name__:9s} rastrigin {[round(r[0], 4) for r in results]} "
          f"rosenbrock {[round(r[1], 4) for r in results]} best lr {best_lr} end {np.round(steps[:, -1], 4).tolist()}")

# SGD with nesterov momentum and an ASGD with t0, weight decay
print("nesterov", np.round(execute_steps(rosenbrock, (-2.0, 2.0), optim.SGD,
                                         dict(lr=1e-3, momentum=0.9, nesterov=True), 40)[:, -1], 4).tolist())
print("asgd t0", np.round(execute_steps(rosenbrock, (-2.0, 2.0), optim.ASGD,
                                        dict(lr=1e-2, t0=10, weight_decay=1e-3), 40)[:, -1], 4).tolist())

# LBFGS needs a closure
x = torch.Tensor((-2.0, 2.0)).requires_grad_(True)
lbfgs = optim.LBFGS([x], lr=1, max_iter=20, history_size=10, line_search_fn="strong_wolfe")


def closure():
    lbfgs.zero_grad()
    f = rosenbrock(x)
    f.backward()
    return f


f = lbfgs.step(closure)
print("lbfgs", np.round(x.detach().numpy(), 4).tolist(), round(f.item(), 5))

# one Rprop step compiled against eager
x = torch.Tensor((-2.0, 2.0)).requires_grad_(True)
opt = optim.Rprop([x], lr=1e-2)
for _ in range(3):
    opt.zero_grad()
    rosenbrock(x).backward()
    opt.step()


def step(x):
    opt.zero_grad()
    f = rosenbrock(x)
    f.backward()
    torch.nn.utils.clip_grad_norm_(x, 1.0)
    opt.step()
    return f


saved_x, saved_opt = x.detach().clone(), copy.deepcopy(opt.state_dict())
f_c = torch.compile(step)(x)
x_c = x.detach().clone()
with torch.no_grad():
    x.copy_(saved_x)
opt.load_state_dict(saved_opt)
f_e = step(x)
print("compiled f", round(f_c.item(), 5), np.round(x_c.numpy(), 5).tolist())
print("compiled == eager", torch.allclose(f_c, f_e), torch.allclose(x_c, x.detach()))
