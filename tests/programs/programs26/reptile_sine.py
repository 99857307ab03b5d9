# Reptile on random sine waves, after John Schulman's reptile-sinewaves-demo
# (https://gist.github.com/joschu/f503500cda64f2ce87c8288906b09e2d, the demo
# of OpenAI's "Reptile: a Scalable Meta-Learning Algorithm" post): a Tanh MLP,
# inner SGD written by hand (param.data -= step * param.grad.data), the
# outer update interpolating deepcopy'd state dicts through load_state_dict,
# the evaluation that snapshots the weights, fine-tunes 32 steps on a fixed
# task and restores them.  The plotting is left out; the printed losses stay.
# Written for this test: 6 outer iterations (the original's 30000), 16-unit
# layers; the inner step compiled against eager.
from copy import deepcopy

import numpy as np
import torch
from torch import nn, autograd as ag

seed = 0
plot = False
innerstepsize = 0.02 # stepsize in inner SGD
innerepochs = 1 # number of epochs of each inner SGD
outerstepsize0 = 0.1 # stepsize of outer optimization, i.e., meta-optimization
niterations = 6 # number of outer updates; each iteration we sample one task and update on it

rng = np.random.RandomState(seed)
torch.manual_seed(seed)

# Define task distribution
x_all = np.linspace(-5, 5, 50)[:,None] # All of the x points
ntrain = 10 # Size of training minibatches
def gen_task():
    "Generate classification problem"
    phase = rng.uniform(low=0, high=2*np.pi)
    ampl = rng.uniform(0.1, 5)
    f_randomsine = lambda x : np.sin(x + phase) * ampl
    return f_randomsine

# Define model. Reptile paper uses ReLU, but Tanh gives slightly better results
model = nn.Sequential(
    nn.Linear(1, 16),
    nn.Tanh(),
    nn.Linear(16, 16),
    nn.Tanh(),
    nn.Linear(16, 1),
)

def totorch(x):
    return ag.Variable(torch.Tensor(x))

def train_on_batch(x, y):
    x = totorch(x)
    y = totorch(y)
    model.zero_grad()
    ypred = model(x)
    loss = (ypred - y).pow(2).mean()
    loss.backward()
    for param in model.parameters():
        param.data -= innerstepsize * param.grad.data

def predict(x):
    x = totorch(x)
    return model(x).data.numpy()

# Choose a fixed task and minibatch for visualization
f_plot = gen_task()
xtrain_plot = x_all[rng.choice(len(x_all), size=ntrain)]

# Reptile training loop
for iteration in range(niterations):
    weights_before = deepcopy(model.state_dict())
    # Generate task
    f = gen_task()
    y_all = f(x_all)
    # Do SGD on this task
    inds = rng.permutation(len(x_all))
    for _ in range(innerepochs):
        for start in range(0, len(x_all), ntrain):
            mbinds = inds[start:start+ntrain]
            train_on_batch(x_all[mbinds], y_all[mbinds])
    # Interpolate between current weights and trained weights from this task
    # I.e. (weights_before - weights_after) is the meta-gradient
    weights_after = model.state_dict()
    outerstepsize = outerstepsize0 * (1 - iteration / niterations) # linear schedule
    model.load_state_dict({name :
        weights_before[name] + (weights_after[name] - weights_before[name]) * outerstepsize
        for name in weights_before})

    # Periodically plot the results on a particular task and minibatch
    if plot and iteration==0 or (iteration+1) % 2 == 0:
        weights_before = deepcopy(model.state_dict()) # save snapshot before evaluation
        for inneriter in range(32):
            train_on_batch(xtrain_plot, f_plot(xtrain_plot))
            if (inneriter+1) % 8 == 0:
                frac = (inneriter+1) / 32
                print("pred after %i" % (inneriter+1), np.round(predict(x_all[::10]).ravel(), 4).tolist())
        lossval = np.square(predict(x_all) - f_plot(x_all)).mean() # would be better to average loss over a set of examples, but this is optimized for brevity
        print(f"-----------------------------")
        print(f"iteration               {iteration+1}")
        print(f"loss on plotted curve   {lossval:.3f}") # optimized in one example for brevity
        model.load_state_dict(weights_before) # restore from snapshot

print("weights", {k: round(v.abs().sum().item(), 5) for k, v in model.state_dict().items()})

# the inner step compiled: the hand-written SGD through .data included
state = deepcopy(model.state_dict())
x, y = x_all[:ntrain], f_plot(x_all[:ntrain])
torch.compile(train_on_batch)(x, y)
after_c = deepcopy(model.state_dict())
model.load_state_dict(state)
train_on_batch(x, y)
print("compiled == eager", all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in model.state_dict().items()),
      "changed", not torch.equal(after_c["0.weight"], state["0.weight"]))
