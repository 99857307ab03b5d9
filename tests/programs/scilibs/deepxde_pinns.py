# lululxvi/deepxde on its PyTorch backend (DDE_BACKEND=pytorch, set before
# the import as its docs say), as its examples write it:
# examples/pinn_forward/Poisson_Dirichlet_1d.py (a PINN for -u'' = pi^2
# sin(pi x) on [-1, 1] with Dirichlet boundaries: dde.grad.hessian through
# create_graph autograd), examples/pinn_forward/ode_system.py (y1' = y2,
# y2' = -y1 with two ICs: dde.grad.jacobian), a Poisson problem with a
# Neumann and a Robin boundary and a 2-D Laplace problem on a rectangle,
# each compiled with Adam and trained a few iterations, then L-BFGS
# (dde.optimizers.config.set_LBFGS_options) a few, predict, the PDE
# residual through model.predict(operator=...), save / restore; a diffusion
# TimePDE (examples/pinn_forward/diffusion_1d.py), an inverse problem with a
# dde.Variable, a DeepONet; float32 models with LAAF, PFNN, AdamW / RMSprop /
# SGD; forward-mode autodiff (nested torch.func.jvp).
# Changed for a CPU test: small nets, few points, few iterations, verbose=0
# (no timing lines) and the loss history printed here.
import os
os.environ["DDE_BACKEND"] = "pytorch"

import numpy as np
import deepxde as dde
import torch

dde.config.set_random_seed(0)
dde.config.set_default_float("float64")


def report(name, losshistory, train_state, model=None, x=None):
    steps = losshistory.steps
    print(name, steps, [[f"{v:.6f}" for v in np.ravel(l)] for l in losshistory.loss_train])
    print('  test', [[f"{v:.6f}" for v in np.ravel(l)] for l in losshistory.loss_test])
    print('  metrics', [[f"{v:.6f}" for v in np.ravel(m)] for m in losshistory.metrics_test])
    print('  best', train_state.best_step, f"{np.sum(train_state.best_loss_train):.6f}")
    if model is not None:
        y = model.predict(x)
        print('  predict', y.shape, y.dtype, [f"{v:.6f}" for v in y.ravel()[:6]])


# ---- Poisson_Dirichlet_1d
def pde(x, y):
    dy_xx = dde.grad.hessian(y, x)
    # Use torch.sin for backend pytorch
    return -dy_xx - np.pi ** 2 * torch.sin(np.pi * x)


def boundary(x, on_boundary):
    return on_boundary


def func(x):
    return np.sin(np.pi * x)


geom = dde.geometry.Interval(-1, 1)
bc = dde.icbc.DirichletBC(geom, func, boundary)
data = dde.data.PDE(geom, pde, bc, 16, 2, solution=func, num_test=20)
print('points', data.train_x.shape, [f"{v:.5f}" for v in data.train_x.ravel()[:6]])

layer_size = [1] + [16] * 2 + [1]
activation = "tanh"
initializer = "Glorot uniform"
net = dde.nn.FNN(layer_size, activation, initializer)

model = dde.Model(data, net)
model.compile("adam", lr=0.001, metrics=["l2 relative error"], verbose=0)
losshistory, train_state = model.train(iterations=4, display_every=2, verbose=0)
x = geom.uniform_points(7, True)
report('poisson adam', losshistory, train_state, model, x)
residual = model.predict(x, operator=pde)
print('  residual', [f"{v:.5f}" for v in residual.ravel()])

path = model.save("poisson", verbose=0)
print('saved', os.path.basename(path))
net2 = dde.nn.FNN(layer_size, activation, initializer)
model2 = dde.Model(data, net2)
model2.compile("adam", lr=0.001, verbose=0)
model2.restore(path, verbose=0)
print('restored', np.allclose(model2.predict(x), model.predict(x)))
losshistory, train_state = model2.train(iterations=2, display_every=1, verbose=0)
report('poisson resumed', losshistory, train_state)

dde.optimizers.config.set_LBFGS_options(maxiter=8)
# (the PyTorch backend splits L-BFGS into calls of iter_per_step iterations,
# set from maxiter when deepxde is imported: two calls of 4 here)
dde.optimizers.config.LBFGS_options["iter_per_step"] = 4
dde.optimizers.config.LBFGS_options["fun_per_step"] = 5
model.compile("L-BFGS", metrics=["l2 relative error"], verbose=0)
losshistory, train_state = model.train(verbose=0)
report('poisson lbfgs', losshistory, train_state, model, x)


# ---- ode_system
def ode_system(x, y):
    """ODE system.
    dy1/dx = y2
    dy2/dx = -y1
    """
    y1, y2 = y[:, 0:1], y[:, 1:]
    dy1_x = dde.grad.jacobian(y, x, i=0)
    dy2_x = dde.grad.jacobian(y, x, i=1)
    return [dy1_x - y2, dy2_x + y1]


def boundary0(_, on_initial):
    return on_initial


def func2(x):
    """
    y1 = sin(x)
    y2 = cos(x)
    """
    return np.hstack((np.sin(x), np.cos(x)))


geom = dde.geometry.TimeDomain(0, 10)
ic1 = dde.icbc.IC(geom, lambda x: 0, boundary0, component=0)
ic2 = dde.icbc.IC(geom, lambda x: 1, boundary0, component=1)
data = dde.data.PDE(geom, ode_system, [ic1, ic2], 20, 2, solution=func2, num_test=20)

layer_size = [1] + [16] * 2 + [2]
net = dde.nn.FNN(layer_size, "tanh", "Glorot uniform")
model = dde.Model(data, net)
model.compile("adam", lr=0.001, metrics=["l2 relative error"], verbose=0)
losshistory, train_state = model.train(iterations=3, display_every=1, verbose=0)
report('ode adam', losshistory, train_state, model, geom.uniform_points(4, True))


# ---- Neumann / Robin boundaries (Poisson_Neumann_1d, Poisson_Robin_1d),
# a learning-rate decay and loss weights
def boundary_l(x, on_boundary):
    return on_boundary and dde.utils.isclose(x[0], -1)


def boundary_r(x, on_boundary):
    return on_boundary and dde.utils.isclose(x[0], 1)


def pde2(x, y):
    dy_xx = dde.grad.hessian(y, x)
    return dy_xx - 2


geom = dde.geometry.Interval(-1, 1)
bc_l = dde.icbc.DirichletBC(geom, lambda x: 0, boundary_l)
bc_r = dde.icbc.NeumannBC(geom, lambda X: 2 * (X + 1), boundary_r)
bc_r2 = dde.icbc.RobinBC(geom, lambda X, y: y, boundary_r)
data = dde.data.PDE(geom, pde2, [bc_l, bc_r, bc_r2], 12, 2,
                    solution=lambda x: (x + 1) ** 2, num_test=10)
net = dde.nn.FNN([1] + [12] * 2 + [1], "sin", "Glorot normal")
model = dde.Model(data, net)
model.compile("adam", lr=0.01, metrics=["l2 relative error", "MSE"],
              decay=("step", 2, 0.5), loss_weights=[1, 10, 1, 1], verbose=0)
losshistory, train_state = model.train(iterations=4, display_every=2, verbose=0)
report('neumann', losshistory, train_state)


# ---- Laplace on a rectangle, a PointSetBC and an output transform (hard
# constraint), a PFNN of parallel subnetworks
def laplace(x, y):
    dy_xx = dde.grad.hessian(y, x, i=0, j=0)
    dy_yy = dde.grad.hessian(y, x, i=1, j=1)
    return dy_xx + dy_yy


geom = dde.geometry.Rectangle([0, 0], [1, 1])
bc = dde.icbc.DirichletBC(geom, lambda x: x[:, 0:1] * x[:, 1:2], lambda _, on_b: on_b)
pts = np.array([[0.5, 0.5], [0.25, 0.75]])
obs = dde.icbc.PointSetBC(pts, pts[:, 0:1] * pts[:, 1:2])
data = dde.data.PDE(geom, laplace, [bc, obs], 16, 8, num_test=10,
                    train_distribution="uniform")
net = dde.nn.PFNN([2, [8, 8], 8, 1], "tanh", "Glorot uniform")
net.apply_output_transform(lambda x, y: y * x[:, 0:1] * (1 - x[:, 0:1]) + x[:, 0:1] * x[:, 1:2])
model = dde.Model(data, net)
model.compile("adam", lr=0.005, verbose=0)
losshistory, train_state = model.train(iterations=3, display_every=1, verbose=0)
report('laplace', losshistory, train_state, model, np.array([[0.3, 0.4], [0.9, 0.1]]))


# ---- diffusion_1d (examples/pinn_forward/diffusion_1d.py): a TimePDE on
# GeometryXTime, dde.grad.jacobian(i=0, j=1) and hessian(i=0, j=0), with
# the PDE points resampled every two iterations (PDEPointResampler)
def pde_heat(x, y):
    dy_t = dde.grad.jacobian(y, x, i=0, j=1)
    dy_xx = dde.grad.hessian(y, x, i=0, j=0)
    return (dy_t - dy_xx + torch.exp(-x[:, 1:])
            * (torch.sin(np.pi * x[:, 0:1]) - np.pi ** 2 * torch.sin(np.pi * x[:, 0:1])))


def func_heat(x):
    return np.sin(np.pi * x[:, 0:1]) * np.exp(-x[:, 1:])


geom = dde.geometry.Interval(-1, 1)
timedomain = dde.geometry.TimeDomain(0, 1)
geomtime = dde.geometry.GeometryXTime(geom, timedomain)
bc = dde.icbc.DirichletBC(geomtime, func_heat, lambda _, on_boundary: on_boundary)
ic = dde.icbc.IC(geomtime, func_heat, lambda _, on_initial: on_initial)
data = dde.data.TimePDE(geomtime, pde_heat, [bc, ic], num_domain=16, num_boundary=8,
                        num_initial=6, solution=func_heat, num_test=20)
net = dde.nn.FNN([2] + [12] * 2 + [1], "tanh", "Glorot uniform")
model = dde.Model(data, net)
model.compile("adam", lr=0.001, metrics=["l2 relative error"], verbose=0)
resampler = dde.callbacks.PDEPointResampler(period=2)
losshistory, train_state = model.train(iterations=4, display_every=2, callbacks=[resampler],
                                       verbose=0)
report('diffusion', losshistory, train_state, model, np.array([[0.5, 0.5], [-0.2, 0.9]]))


# ---- an inverse problem (examples/pinn_inverse): y' = C y with C unknown,
# a dde.Variable trained with the net from observations, VariableValue
C = dde.Variable(2.0)


def ode_inverse(x, y):
    return dde.grad.jacobian(y, x) - C * y


geom = dde.geometry.TimeDomain(0, 1)
obs_x = np.linspace(0, 1, 5)[:, None]
observe = dde.icbc.PointSetBC(obs_x, np.exp(-obs_x))
ic = dde.icbc.IC(geom, lambda x: 1, lambda _, on_initial: on_initial)
data = dde.data.PDE(geom, ode_inverse, [ic, observe], 12, 2, anchors=obs_x)
net = dde.nn.FNN([1, 12, 12, 1], "tanh", "Glorot uniform")
model = dde.Model(data, net)
model.compile("adam", lr=0.01, external_trainable_variables=C, verbose=0)
variable = dde.callbacks.VariableValue(C, period=2, precision=6)
losshistory, train_state = model.train(iterations=4, callbacks=[variable], display_every=2,
                                       verbose=0)
report('inverse', losshistory, train_state)
print('  C', f"{C.item():.6f}")


# ---- DeepONet on aligned data (examples/operator/antiderivative_aligned.py,
# with synthetic functions instead of the downloaded arrays)
rng = np.random.default_rng(0)
sensors = np.linspace(0, 1, 10)[:, None]
coef = rng.normal(size=(12, 3))
v = coef[:, :1] + coef[:, 1:2] * sensors.T + coef[:, 2:] * np.sin(3 * sensors.T)
u = coef[:, :1] * sensors.T + coef[:, 1:2] * sensors.T ** 2 / 2 + coef[:, 2:] * (1 - np.cos(3 * sensors.T)) / 3
data = dde.data.TripleCartesianProd(X_train=(v[:8], sensors), y_train=u[:8],
                                    X_test=(v[8:], sensors), y_test=u[8:])
net = dde.nn.DeepONetCartesianProd([10, 16, 16], [1, 16, 16], "relu", "Glorot normal")
model = dde.Model(data, net)
model.compile("adam", lr=0.001, metrics=["mean l2 relative error"], verbose=0)
losshistory, train_state = model.train(iterations=3, display_every=1, verbose=0)
report('deeponet', losshistory, train_state)
print('  predict', [f"{v:.6f}" for v in model.predict((v[8:9], sensors)).ravel()[:5]])


# ---- float32 (deepxde's default), other optimizers and networks: a
# layer-wise locally adaptive activation (LAAF), L2 regularization, a
# PFNN, AdamW / RMSprop / SGD
dde.config.set_default_float("float32")


def pde32(x, y):
    dy_xx = dde.grad.hessian(y, x)
    return -dy_xx - np.pi ** 2 * torch.sin(np.pi * x)


geom = dde.geometry.Interval(-1, 1)
bc = dde.icbc.DirichletBC(geom, lambda x: np.sin(np.pi * x), lambda x, on_b: on_b)
data = dde.data.PDE(geom, pde32, bc, 16, 2, solution=lambda x: np.sin(np.pi * x), num_test=20)
for name, net, opt, kw in [
    ('laaf', dde.nn.FNN([1, 12, 12, 1], "LAAF-5 tanh", "Glorot normal",
                        regularization=["l2", 1e-4]), "adamw", dict(lr=1e-3)),
    ("pfnn", dde.nn.PFNN([1, [6, 6], 6, 1], "sin", "Glorot uniform"), "rmsprop",
     dict(lr=1e-3)),
    ('sgd', dde.nn.FNN([1, 12, 12, 1], "swish", "He normal"), "sgd", dict(lr=1e-3)),
]:
    model = dde.Model(data, net)
    model.compile(opt, metrics=["l2 relative error"], verbose=0, **kw)
    losshistory, train_state = model.train(iterations=3, display_every=1, verbose=0)
    print(name, [[f"{v:.6f}" for v in np.ravel(l)] for l in losshistory.loss_train],
          [f"{v:.6f}" for v in np.ravel(losshistory.metrics_test)],
          model.predict(np.array([[0.3]])).dtype)


# ---- forward-mode automatic differentiation (torch.func.jvp, nested for
# the Hessian, differentiated in reverse by the optimizer)
dde.config.set_default_autodiff("forward")


def pde_fwd(x, y):
    dy_xx = dde.grad.hessian(y, x)[0]  # forward mode: (value, its function)
    return -dy_xx - np.pi ** 2 * torch.sin(np.pi * x)


data = dde.data.PDE(geom, pde_fwd, bc, 16, 2, solution=lambda x: np.sin(np.pi * x), num_test=20)
model = dde.Model(data, dde.nn.FNN([1, 12, 12, 1], "tanh", "Glorot normal"))
model.compile("adam", lr=1e-3, metrics=["l2 relative error"], verbose=0)
losshistory, train_state = model.train(iterations=3, display_every=1, verbose=0)
report('forward-mode', losshistory, train_state)
