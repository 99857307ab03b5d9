# Dev Nag's "GANs in 50 lines of code"
# (https://github.com/devnag/pytorch-generative-adversarial-networks,
# gan_pytorch.py), as written: a generator and a discriminator MLP (ELU,
# sigmoid), the data sampler torch.Tensor(np.random.normal(mu, sigma,
# (1, n))), the generator's input sampler torch.rand(m, n), the "diffs"
# preprocessing (torch.mean, torch.pow(diffs, 2.0), torch.cat), nn.BCELoss
# with torch.ones([1, 1]) / torch.zeros([1, 1]) labels, two SGD optimizers
# with momentum, the discriminator trained on fake data detached, the
# generator through the discriminator, and its stats from
# v.data.storage().tolist(). Written for this test: 8 samples, 30 epochs of
# one discriminator and one generator step; one compiled generator step
# against eager.
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

data_mean = 4
data_stddev = 1.25
name, preprocess, d_input_func = ("Data and variances", lambda data: decorate_with_diffs(data, 2.0),
                                  lambda x: x * 2)

g_input_size = 1
g_hidden_size = 5
g_output_size = 1
d_input_size = 8
d_hidden_size = 10
d_output_size = 1
minibatch_size = d_input_size
d_learning_rate = 1e-3
g_learning_rate = 1e-3
sgd_momentum = 0.9
num_epochs = 30
print_interval = 10
d_steps = 1
g_steps = 1


def get_distribution_sampler(mu, sigma):
    return lambda n: torch.Tensor(np.random.normal(mu, sigma, (1, n)))  # Gaussian


def get_generator_input_sampler():
    return lambda m, n: torch.rand(m, n)  # Uniform-dist data into generator, _NOT_ Gaussian


class Generator(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, f):
        super(Generator, self).__init__()
        self.map1 = nn.Linear(input_size, hidden_size)
        self.map2 = nn.Linear(hidden_size, hidden_size)
        self.map3 = nn.Linear(hidden_size, output_size)
        self.f = f

    def forward(self, x):
        x = self.map1(x)
        x = self.f(x)
        x = self.map2(x)
        x = self.f(x)
        x = self.map3(x)
        return x


class Discriminator(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, f):
        super(Discriminator, self).__init__()
        self.map1 = nn.Linear(input_size, hidden_size)
        self.map2 = nn.Linear(hidden_size, hidden_size)
        self.map3 = nn.Linear(hidden_size, output_size)
        self.f = f

    def forward(self, x):
        x = self.f(self.map1(x))
        x = self.f(self.map2(x))
        return self.f(self.map3(x))


def extract(v):
    return v.data.storage().tolist()


def stats(d):
    return [np.mean(d), np.std(d)]


def get_moments(d):
    # Return the first 4 moments of the data provided
    mean = torch.mean(d)
    diffs = d - mean
    var = torch.mean(torch.pow(diffs, 2.0))
    std = torch.pow(var, 0.5)
    zscores = diffs / std
    skews = torch.mean(torch.pow(zscores, 3.0))
    kurtoses = torch.mean(torch.pow(zscores, 4.0)) - 3.0  # excess kurtosis, should be 0 for Gaussian
    final = torch.cat((mean.reshape(1,), std.reshape(1,), skews.reshape(1,), kurtoses.reshape(1,)))
    return final


def decorate_with_diffs(data, exponent, remove_raw_data=False):
    mean = torch.mean(data.data, 1, keepdim=True)
    mean_broadcast = torch.mul(torch.ones(data.size()), mean.tolist()[0][0])
    diffs = torch.pow(data - mean_broadcast, exponent)
    if remove_raw_data:
        return torch.cat([diffs], 1)
    else:
        return torch.cat([data, diffs], 1)


np.random.seed(0)
torch.manual_seed(0)
d_sampler = get_distribution_sampler(data_mean, data_stddev)
gi_sampler = get_generator_input_sampler()
G = Generator(input_size=g_input_size, hidden_size=g_hidden_size, output_size=g_output_size,
              f=torch.tanh)
D = Discriminator(input_size=d_input_func(d_input_size), hidden_size=d_hidden_size,
                  output_size=d_output_size, f=torch.sigmoid)
criterion = nn.BCELoss()  # Binary cross entropy: http://pytorch.org/docs/nn.html#bceloss
d_optimizer = optim.SGD(D.parameters(), lr=d_learning_rate, momentum=sgd_momentum)
g_optimizer = optim.SGD(G.parameters(), lr=g_learning_rate, momentum=sgd_momentum)

print("moments", [round(v, 4) for v in get_moments(d_sampler(1000)).tolist()])


def g_step(gen_input):
    G.zero_grad()
    g_fake_data = G(gen_input)
    dg_fake_decision = D(preprocess(g_fake_data.t()))
    g_error = criterion(dg_fake_decision, torch.ones([1, 1]))  # Train G to pretend it's genuine
    g_error.backward()
    g_optimizer.step()  # Only optimizes G's parameters
    return g_error


for epoch in range(num_epochs):
    for d_index in range(d_steps):
        # 1. Train D on real+fake
        D.zero_grad()

        #  1A: Train D on real
        d_real_data = d_sampler(d_input_size)
        d_real_decision = D(preprocess(d_real_data))
        d_real_error = criterion(d_real_decision, torch.ones([1, 1]))  # ones = true
        d_real_error.backward()  # compute/store gradients, but don't change params

        #  1B: Train D on fake
        d_gen_input = gi_sampler(minibatch_size, g_input_size)
        d_fake_data = G(d_gen_input).detach()  # detach to avoid training G on these labels
        d_fake_decision = D(preprocess(d_fake_data.t()))
        d_fake_error = criterion(d_fake_decision, torch.zeros([1, 1]))  # zeros = fake
        d_fake_error.backward()
        d_optimizer.step()  # Only optimizes D's parameters; changes based on stored gradients from backward()

        dre, dfe = extract(d_real_error)[0], extract(d_fake_error)[0]

    for g_index in range(g_steps):
        # 2. Train G on D's response (but DO NOT train D on these labels)
        gen_input = gi_sampler(minibatch_size, g_input_size)
        g_error = g_step(gen_input)
        ge = extract(g_error)[0]

    if epoch % print_interval == 0 or epoch == num_epochs - 1:
        print("Epoch %s: D (%.5f real_err, %.5f fake_err) G (%.5f err); Real Dist (%s),  Fake Dist (%s) " %
              (epoch, dre, dfe, ge, [round(v, 4) for v in stats(extract(d_real_data))],
               [round(v, 4) for v in stats(extract(d_fake_data))]))

gen_input = gi_sampler(minibatch_size, g_input_size)
state, opt_state = copy.deepcopy(G.state_dict()), copy.deepcopy(g_optimizer.state_dict())
err_c = torch.compile(g_step)(gen_input)
after_c = copy.deepcopy(G.state_dict())
G.load_state_dict(state)
g_optimizer.load_state_dict(opt_state)
err_e = g_step(gen_input)
print("compiled error", round(err_c.item(), 6))
print("compiled == eager", torch.allclose(err_c, err_e, atol=1e-6),
      all(torch.allclose(after_c[k], v, atol=1e-6) for k, v in G.state_dict().items()))
