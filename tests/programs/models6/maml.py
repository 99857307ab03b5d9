# vmikulik/maml-pytorch (MAML-Sines.ipynb: Sine_Task, Sine_Task_Distribution,
# MAMLModel with its `parameterised` functional forward over explicit
# weights, MAML with inner_loop / main_loop (meta-gradients from
# torch.autograd.grad assigned to w.grad, Adam meta-optimiser),
# loss_on_random_task and average_losses for the fine-tuning comparison),
# second order: the inner-loop gradient is taken with create_graph=True, as
# the MAML paper's sinusoid experiment does.  Changes for a CPU test:
# num_iterations 4 (70000), tasks_per_meta_batch 3 (1000), printing every 2
# iterations, no plots, fewer evaluation tasks, and the weights come from
# numpy, so tracec and torch compute the same numbers (numpy draws the
# tasks and points, as published).  Then the meta-step under torch.compile
# against the same step run eagerly.
import copy
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn


class Sine_Task():
    """
    A sine wave data distribution object with interfaces designed for MAML.
    """

    def __init__(self, amplitude, phase, xmin, xmax):
        self.amplitude = amplitude
        self.phase = phase
        self.xmin = xmin
        self.xmax = xmax

    def true_function(self, x):
        """
        Compute the true function on the given x.
        """

        return self.amplitude * np.sin(self.phase + x)

    def sample_data(self, size=1):
        """
        Sample data from this task.

        returns:
            x: the feature vector of length size
            y: the target vector of length size
        """

        x = np.random.uniform(self.xmin, self.xmax, size)
        y = self.true_function(x)

        x = torch.tensor(x, dtype=torch.float).unsqueeze(1)
        y = torch.tensor(y, dtype=torch.float).unsqueeze(1)

        return x, y


class Sine_Task_Distribution():
    """
    The task distribution for sine regression tasks for MAML
    """

    def __init__(self, amplitude_min, amplitude_max, phase_min, phase_max, x_min, x_max):
        self.amplitude_min = amplitude_min
        self.amplitude_max = amplitude_max
        self.phase_min = phase_min
        self.phase_max = phase_max
        self.x_min = x_min
        self.x_max = x_max

    def sample_task(self):
        """
        Sample from the task distribution.

        returns:
            Sine_Task object
        """
        amplitude = np.random.uniform(self.amplitude_min, self.amplitude_max)
        phase = np.random.uniform(self.phase_min, self.phase_max)
        return Sine_Task(amplitude, phase, self.x_min, self.x_max)


class MAMLModel(nn.Module):
    def __init__(self):
        super(MAMLModel, self).__init__()
        self.model = nn.Sequential(OrderedDict([
            ('l1', nn.Linear(1,40)),
            ('relu1', nn.ReLU()),
            ('l2', nn.Linear(40,40)),
            ('relu2', nn.ReLU()),
            ('l3', nn.Linear(40,1))
        ]))

    def forward(self, x):
        return self.model(x)

    def parameterised(self, x, weights):
        # like forward, but uses ``weights`` instead of ``model.parameters()``
        # it'd be nice if this could be generated automatically for any nn.Module...
        x = nn.functional.linear(x, weights[0], weights[1])
        x = nn.functional.relu(x)
        x = nn.functional.linear(x, weights[2], weights[3])
        x = nn.functional.relu(x)
        x = nn.functional.linear(x, weights[4], weights[5])
        return x


class MAML():
    def __init__(self, model, tasks, inner_lr, meta_lr, K=10, inner_steps=1, tasks_per_meta_batch=1000):

        # important objects
        self.tasks = tasks
        self.model = model
        self.weights = list(model.parameters()) # the maml weights we will be meta-optimising
        self.criterion = nn.MSELoss()
        self.meta_optimiser = torch.optim.Adam(self.weights, meta_lr)

        # hyperparameters
        self.inner_lr = inner_lr
        self.meta_lr = meta_lr
        self.K = K
        self.inner_steps = inner_steps # with the current design of MAML, >1 is unlikely to work well
        self.tasks_per_meta_batch = tasks_per_meta_batch

        # metrics
        self.plot_every = 2      # 10
        self.print_every = 2     # 500
        self.meta_losses = []

    def inner_loop(self, task):
        # reset inner model to current maml weights
        temp_weights = [w.clone() for w in self.weights]

        # perform training on data sampled from task
        X, y = task.sample_data(self.K)
        for step in range(self.inner_steps):
            loss = self.criterion(self.model.parameterised(X, temp_weights), y) / self.K

            # compute grad and update inner loop weights
            grad = torch.autograd.grad(loss, temp_weights, create_graph=True)
            temp_weights = [w - self.inner_lr * g for w, g in zip(temp_weights, grad)]

        # sample new data for meta-update and compute loss
        X, y = task.sample_data(self.K)
        loss = self.criterion(self.model.parameterised(X, temp_weights), y) / self.K

        return loss

    def main_loop(self, num_iterations):
        epoch_loss = 0

        for iteration in range(1, num_iterations+1):

            # compute meta loss
            meta_loss = 0
            for i in range(self.tasks_per_meta_batch):
                task = self.tasks.sample_task()
                meta_loss += self.inner_loop(task)

            # compute meta gradient of loss with respect to maml weights
            meta_grads = torch.autograd.grad(meta_loss, self.weights)

            # assign meta gradient to weights and take optimisation step
            for w, g in zip(self.weights, meta_grads):
                w.grad = g
            self.meta_optimiser.step()

            # log metrics
            epoch_loss += meta_loss.item() / self.tasks_per_meta_batch

            if iteration % self.print_every == 0:
                print("{}/{}. loss: {:.6f}".format(iteration, num_iterations, epoch_loss / self.plot_every))

            if iteration % self.plot_every == 0:
                self.meta_losses.append(epoch_loss / self.plot_every)
                epoch_loss = 0


def loss_on_random_task(initial_model, K, num_steps, optim=torch.optim.SGD):
    """
    trains the model on a random sine task and measures the loss curve.

    for each n in num_steps_measured, records the model function after n gradient updates.
    """

    # copy MAML model into a new object to preserve MAML weights during training
    model = nn.Sequential(OrderedDict([
        ('l1', nn.Linear(1,40)),
        ('relu1', nn.ReLU()),
        ('l2', nn.Linear(40,40)),
        ('relu2', nn.ReLU()),
        ('l3', nn.Linear(40,1))
    ]))
    model.load_state_dict(initial_model.state_dict())
    criterion = nn.MSELoss()
    optimiser = optim(model.parameters(), 0.01)

    # train model on a random task
    task = tasks.sample_task()
    X, y = task.sample_data(K)
    losses = []
    for step in range(1, num_steps+1):
        loss = criterion(model(X), y) / K
        losses.append(loss.item())

        # compute grad and update inner loop weights
        model.zero_grad()
        loss.backward()
        optimiser.step()

    return losses


def average_losses(initial_model, n_samples, K=10, n_steps=10, optim=torch.optim.SGD):
    """
    returns the average learning trajectory of the model trained for ``n_iterations`` over ``n_samples`` tasks
    """

    x = np.linspace(-5, 5, 2) # dummy input for test_on_new_task
    avg_losses = [0] * K
    for i in range(n_samples):
        losses = loss_on_random_task(initial_model, K, n_steps, optim)
        avg_losses = [l + l_new for l, l_new in zip(avg_losses, losses)]
    avg_losses = [l / n_samples for l in avg_losses]

    return avg_losses


np.random.seed(0)
tasks = Sine_Task_Distribution(0.1, 5, 0, np.pi, -5, 5)
maml = MAML(MAMLModel(), tasks, inner_lr=0.01, meta_lr=0.001, tasks_per_meta_batch=3)
r = np.random.default_rng(0)
with torch.no_grad():
    for name, p in maml.model.named_parameters():
        std = 0.1 if p.dim() == 1 else p.shape[1] ** -0.5
        p.copy_(torch.from_numpy((std * r.standard_normal(tuple(p.shape))).astype(np.float32)))

maml.main_loop(num_iterations=4)
print("meta losses", [f"{v:.6f}" for v in maml.meta_losses])

maml_losses = average_losses(maml.model.model, n_samples=2, K=10, n_steps=4)
print("fine-tuning", [f"{v:.6f}" for v in maml_losses[:4]])

# second-order terms: the meta-gradient differs from its first-order approximation
task = tasks.sample_task()
X1, y1 = task.sample_data(10)
X2, y2 = task.sample_data(10)


def meta_grads(create_graph):
    temp = [w.clone() for w in maml.weights]
    loss = maml.criterion(maml.model.parameterised(X1, temp), y1) / 10
    grad = torch.autograd.grad(loss, temp, create_graph=create_graph)
    temp = [w - maml.inner_lr * g for w, g in zip(temp, grad)]
    loss = maml.criterion(maml.model.parameterised(X2, temp), y2) / 10
    return torch.autograd.grad(loss, maml.weights)


second, first = meta_grads(True), meta_grads(False)
print("second order", f"{sum(g.abs().sum().item() for g in second):.6f}",
      f"{sum((a - b).abs().sum().item() for a, b in zip(second, first)):.8f}")

# the meta-step under torch.compile against the same step run eagerly
batch = [(tasks.sample_task(), ) for _ in range(3)]
data = [(t.sample_data(10), t.sample_data(10)) for (t,) in batch]


def meta_step(data):
    meta_loss = 0
    for (X, y), (Xq, yq) in data:
        temp_weights = [w.clone() for w in maml.weights]
        loss = maml.criterion(maml.model.parameterised(X, temp_weights), y) / maml.K
        grad = torch.autograd.grad(loss, temp_weights, create_graph=True)
        temp_weights = [w - maml.inner_lr * g for w, g in zip(temp_weights, grad)]
        meta_loss += maml.criterion(maml.model.parameterised(Xq, temp_weights), yq) / maml.K
    meta_grads = torch.autograd.grad(meta_loss, maml.weights)
    for w, g in zip(maml.weights, meta_grads):
        w.grad = g
    maml.meta_optimiser.step()
    return meta_loss


state, opt_state = copy.deepcopy(maml.model.state_dict()), copy.deepcopy(maml.meta_optimiser.state_dict())
eager = [meta_step(data).item() for _ in range(3)]
after = copy.deepcopy(maml.model.state_dict())
maml.model.load_state_dict(state)
maml.meta_optimiser.load_state_dict(opt_state)
cstep = torch.compile(meta_step)
compiled = [cstep(data).item() for _ in range(3)]
print("compiled losses", [f"{v:.6f}" for v in compiled])
print("compiled == eager:", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(compiled, eager)),
      all(torch.allclose(maml.model.state_dict()[k], after[k], rtol=1e-4, atol=1e-5) for k in after))
