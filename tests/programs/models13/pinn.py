# A physics-informed neural network for the viscous Burgers equation, as in
# maziarraissi/PINNs' continuous-time inference example in its PyTorch port
# (the widely copied "PINNs Burgers_Inference.ipynb" / PhysicsInformedNN: a
# DNN of nn.Sequential with an OrderedDict of Linear / Tanh layers, the
# lower / upper-bound input scaling, net_u, net_f with u_t, u_x and u_xx from
# torch.autograd.grad(..., grad_outputs=torch.ones_like(u), retain_graph=True,
# create_graph=True), loss_func as the closure with its iteration counter,
# training with Adam and then LBFGS(max_iter, tolerance_grad,
# tolerance_change, history_size, line_search_fn="strong_wolfe")), plus a 1-D
# Poisson problem -u'' = pi^2 sin(pi x) with hard boundary conditions.
# Changes for a CPU test: a 2-20-20-1 network, 16 boundary and 32 collocation
# points from numpy, a few Adam and LBFGS iterations.  Then the Adam step
# (its second derivatives through create_graph) under torch.compile against
# the same step run eagerly.
import copy
from collections import OrderedDict

import numpy as np
import torch

np.random.seed(1234)

# CUDA support
if torch.cuda.is_available():
    device = torch.device('cuda')
else:
    device = torch.device('cpu')


# the deep neural network
class DNN(torch.nn.Module):
    def __init__(self, layers):
        super(DNN, self).__init__()

        # parameters
        self.depth = len(layers) - 1

        # set up layer order dict
        self.activation = torch.nn.Tanh

        layer_list = list()
        for i in range(self.depth - 1):
            layer_list.append(
                ('layer_%d' % i, torch.nn.Linear(layers[i], layers[i+1]))
            )
            layer_list.append(('activation_%d' % i, self.activation()))

        layer_list.append(
            ('layer_%d' % (self.depth - 1), torch.nn.Linear(layers[-2], layers[-1]))
        )
        layerDict = OrderedDict(layer_list)

        # deploy layers
        self.layers = torch.nn.Sequential(layerDict)

    def forward(self, x):
        out = self.layers(x)
        return out


# the physics-guided neural network
class PhysicsInformedNN():
    def __init__(self, X_u, u, X_f, layers, lb, ub, nu, max_iter=5):

        # boundary conditions
        self.lb = torch.tensor(lb).float().to(device)
        self.ub = torch.tensor(ub).float().to(device)

        # data
        self.x_u = torch.tensor(X_u[:, 0:1], requires_grad=True).float().to(device)
        self.t_u = torch.tensor(X_u[:, 1:2], requires_grad=True).float().to(device)
        self.x_f = torch.tensor(X_f[:, 0:1], requires_grad=True).float().to(device)
        self.t_f = torch.tensor(X_f[:, 1:2], requires_grad=True).float().to(device)
        self.u = torch.tensor(u).float().to(device)

        self.layers = layers
        self.nu = nu

        # deep neural networks
        self.dnn = numpy_init(DNN(layers).to(device), 0)

        # optimizers: using the same settings
        self.optimizer = torch.optim.LBFGS(
            self.dnn.parameters(),
            lr=1.0,
            max_iter=max_iter,
            max_eval=max_iter,
            history_size=50,
            tolerance_grad=1e-5,
            tolerance_change=1.0 * np.finfo(float).eps,
            line_search_fn="strong_wolfe"       # can be "strong_wolfe"
        )

        self.iter = 0

    def net_u(self, x, t):
        u = self.dnn(torch.cat([x, t], dim=1))
        return u

    def net_f(self, x, t):
        """ The pytorch autograd version of calculating residual """
        u = self.net_u(x, t)

        u_t = torch.autograd.grad(
            u, t,
            grad_outputs=torch.ones_like(u),
            retain_graph=True,
            create_graph=True
        )[0]
        u_x = torch.autograd.grad(
            u, x,
            grad_outputs=torch.ones_like(u),
            retain_graph=True,
            create_graph=True
        )[0]
        u_xx = torch.autograd.grad(
            u_x, x,
            grad_outputs=torch.ones_like(u_x),
            retain_graph=True,
            create_graph=True
        )[0]

        f = u_t + u * u_x - self.nu * u_xx
        return f

    def loss_func(self):
        self.optimizer.zero_grad()

        u_pred = self.net_u(self.x_u, self.t_u)
        f_pred = self.net_f(self.x_f, self.t_f)
        loss_u = torch.mean((self.u - u_pred) ** 2)
        loss_f = torch.mean(f_pred ** 2)

        loss = loss_u + loss_f

        loss.backward()
        self.iter += 1
        if self.iter % 2 == 0:
            print(
                'Iter %d, Loss: %.5e, Loss_u: %.5e, Loss_f: %.5e' % (self.iter, loss.item(), loss_u.item(), loss_f.item())
            )
        return loss

    def train(self):
        self.dnn.train()

        # Backward and optimize
        self.optimizer.step(self.loss_func)

    def predict(self, X):
        x = torch.tensor(X[:, 0:1], requires_grad=True).float().to(device)
        t = torch.tensor(X[:, 1:2], requires_grad=True).float().to(device)

        self.dnn.eval()
        u = self.net_u(x, t)
        f = self.net_f(x, t)
        u = u.detach().cpu().numpy()
        f = f.detach().cpu().numpy()
        return u, f


def numpy_init(module, seed):
    r = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() > 1:      # Xavier-normal, as the TF original
                std = np.sqrt(2.0 / (p.shape[0] + p.shape[1]))
                p.copy_(torch.from_numpy((std * r.standard_normal(tuple(p.shape))).astype(np.float32)))
            else:
                p.zero_()
    return module


nu = 0.01/np.pi
N_u = 16
N_f = 32
layers = [2, 20, 20, 1]

# the data: Burgers' initial condition u(0, x) = -sin(pi x) and u = 0 on x = +-1
lb = np.array([-1.0, 0.0])
ub = np.array([1.0, 0.99])
x0 = np.linspace(-1, 1, 8)[:, None]
X_u_train = np.vstack([np.hstack([x0, np.zeros_like(x0)]),
                       np.hstack([np.full((4, 1), -1.0), np.linspace(0, 0.99, 4)[:, None]]),
                       np.hstack([np.full((4, 1), 1.0), np.linspace(0, 0.99, 4)[:, None]])])
u_train = np.vstack([-np.sin(np.pi * x0), np.zeros((8, 1))])
X_f_train = lb + (ub-lb)*np.random.rand(N_f, 2)    # the notebook uses pyDOE's lhs
X_f_train = np.vstack((X_f_train, X_u_train))

model = PhysicsInformedNN(X_u_train, u_train, X_f_train, layers, lb, ub, nu, max_iter=6)
print("dnn", model.dnn)
print("data", model.x_u.dtype, model.x_u.requires_grad, model.x_u.is_leaf, tuple(model.x_f.shape))
u, f = model.predict(X_u_train[:4])
print("predict", u.dtype, u.shape, [f"{v:.5f}" for v in u.ravel()], [f"{v:.5f}" for v in f.ravel()])

# Adam first (as the PyTorch ports do before L-BFGS)
adam = torch.optim.Adam(model.dnn.parameters(), lr=1e-3)
x_f = model.x_f.detach().clone().requires_grad_(True)
t_f = model.t_f.detach().clone().requires_grad_(True)
for it in range(3):
    adam.zero_grad()
    u_pred = model.net_u(model.x_u, model.t_u)
    f_pred = model.net_f(x_f, t_f)
    loss = torch.mean((model.u - u_pred) ** 2) + torch.mean(f_pred ** 2)
    loss.backward()
    adam.step()
    print('Adam It: %d, Loss: %.5e' % (it, loss.item()), f"{x_f.grad.abs().sum().item():.5e}")

model.train()
print("lbfgs iters", model.iter, "state", sorted(model.optimizer.state_dict()["state"][0].keys()))
st = model.optimizer.state[model.optimizer._params[0]]
print("lbfgs state", st["func_evals"], st["n_iter"], len(st["old_dirs"]), f"{st['t']:.5f}" if torch.is_tensor(st['t']) is False else f"{float(st['t']):.5f}")
u_pred, f_pred = model.predict(X_f_train[:6])
print("u_pred", [f"{v:.5f}" for v in u_pred.ravel()])
print("f_pred", [f"{v:.5f}" for v in f_pred.ravel()])


# ---- 1-D Poisson, -u'' = pi^2 sin(pi x) on [0, 1], u = x (1 - x) N(x) ----
class PoissonNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16),
                                       torch.nn.Tanh(), torch.nn.Linear(16, 1))

    def forward(self, x):
        return x * (1 - x) * self.net(x)


def pde_loss(net, x):
    x = x.requires_grad_(True)
    u = net(x)
    du = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
    d2u = torch.autograd.grad(du.sum(), x, create_graph=True)[0]
    return ((-d2u - np.pi ** 2 * torch.sin(np.pi * x)) ** 2).mean()


pnet = numpy_init(PoissonNet(), 1)
xs = torch.linspace(0, 1, 24).unsqueeze(1)
opt = torch.optim.LBFGS(pnet.parameters(), lr=0.1, max_iter=8, history_size=10)


def closure():
    opt.zero_grad()
    loss = pde_loss(pnet, xs.clone())
    loss.backward()
    return loss


for i in range(2):
    l = opt.step(closure)
    print("poisson lbfgs", f"{l.item():.5e}", f"{pde_loss(pnet, xs.clone()).item():.5e}")
with torch.no_grad():
    err = (pnet(xs) - torch.sin(np.pi * xs)).abs().max()
print("poisson max err", f"{err.item():.4f}")

# the Adam step under torch.compile against the same step run eagerly
pnet = numpy_init(PoissonNet(), 2)
adam = torch.optim.Adam(pnet.parameters(), lr=1e-2)


def train_step(x):
    adam.zero_grad()
    loss = pde_loss(pnet, x)
    loss.backward()
    adam.step()
    return loss


batches = [torch.linspace(0, 1, 24).unsqueeze(1) + 0.01 * k for k in range(4)]
train_step(batches[0].clone())
state, opt_state = copy.deepcopy(pnet.state_dict()), copy.deepcopy(adam.state_dict())
eager = [train_step(b.clone()).item() for b in batches[1:]]
after = copy.deepcopy(pnet.state_dict())
pnet.load_state_dict(state)
adam.load_state_dict(opt_state)
cstep = torch.compile(train_step)
compiled = [cstep(b.clone()).item() for b in batches[1:]]
print("compiled losses", [f"{v:.5f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(pnet.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
